"""Run every notebook top to bottom, as a learner would (not under autograde), and write what
went wrong to a JSON file: the background job ``notebook_runs`` of ``test_notebooks_execute``.

``python tests/notebook_runs.py OUT.json``: the instructor notebooks run two at a time in worker
processes (their kernels are single-threaded, and the machine has two cores). The untouched learner
notebooks run once, in the real browser's Run All (``test_explorer_browser``), which reads them
with :func:`problems_in`.
"""

import json
import multiprocessing
import os
import re
import sys
from concurrent.futures import ProcessPoolExecutor

from autograder import paths

IDS = paths.notebook_ids()


def _kernel_environment() -> None:
    """What this worker's kernels inherit: not autograde, no display, and one thread each. Two
    kernels run at once on two cores; with PyTorch's two threads each, notebooks 04 and 05's
    timing sweeps were measured at 31-35 s on one run and 4-5 minutes on another."""
    os.environ.pop("NBGRADER_EXECUTION", None)
    os.environ.update(MPLBACKEND="Agg", OMP_NUM_THREADS="1")


def run_top_to_bottom(notebook_id: str) -> str | None:
    """Execute the instructor notebook in a fresh kernel; the first error, or None."""
    import nbformat
    from nbclient import NotebookClient

    from autograder.grader.kernel_channels import KernelManager

    _kernel_environment()
    nb = nbformat.read(paths.solution_notebook(notebook_id), as_version=4)
    client = NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        kernel_manager_class=KernelManager,
        resources={"metadata": {"path": str(paths.SOLUTIONS_DIR / notebook_id)}},
    )
    try:
        client.execute()
    except Exception as err:  # the cell error, with its traceback, as nbclient reports it
        return f"{type(err).__name__}: {err}"[-3000:]
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
    return f"{errors[0].ename}: {errors[0].evalue}" if errors else None


def _shown_outputs(nb) -> list:
    """Every output a learner sees: the cells', and those kept in widget state."""
    shown = [(str(i), o) for i, c in enumerate(nb.cells) for o in c.get("outputs", [])]
    widgets = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    for model in widgets.get("state", {}).values():
        for output in model.get("state", {}).get("outputs") or []:
            shown.append(("a widget", output))
    return shown


def problems_in(nb) -> list[str]:
    """What a learner should not see in a notebook Run All has run (``test_explorer_browser``
    saves each untouched release after JupyterLab's Run All and reads it with this): a traceback
    through the course's own code, or an unfinished exercise's error in more than one line."""
    problems = []
    for where, output in _shown_outputs(nb):
        if output.get("output_type") == "error":
            lines = list(output.get("traceback", []))
        elif output.get("output_type") == "stream":
            lines = [output.get("text", "")]
        else:
            continue
        text = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(lines))
        ename = output.get("ename", "")
        if "/autograder/" in text or "Traceback (most recent call last)" in text and not ename:
            problems.append(f"{where}: a traceback through course code: {text[-300:]}")
        elif ename in ("NotImplementedError", "NameError") and len(lines) != 1:
            problems.append(f"{where}: {ename} shown as {len(lines)} lines, not one")
    return problems


def main(out: str) -> None:
    """notebook id -> the instructor notebook's first error, or None."""
    workers = min(2, len(os.sched_getaffinity(0)), len(IDS)) or 1
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        # later notebooks are the longest: start them first so both workers end together
        futures = {i: pool.submit(run_top_to_bottom, i) for i in reversed(IDS)}
        outcomes = {i: future.result() for i, future in futures.items()}
    with open(out, "w") as f:
        json.dump(outcomes, f)


if __name__ == "__main__":
    main(sys.argv[1])
