"""Every instructor notebook runs top to bottom, as a learner would run it (not under autograde).

The notebooks run two at a time in worker processes (their kernels are single-threaded, and the
machine has two cores); each test then reads its notebook's outcome.
"""

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

import pytest

from autograder import paths

pytestmark = pytest.mark.slow
IDS = paths.notebook_ids()


def run_top_to_bottom(notebook_id: str) -> str | None:
    """Execute the instructor notebook in a fresh kernel; the first error, or None."""
    import nbformat
    from nbclient import NotebookClient

    os.environ.pop("NBGRADER_EXECUTION", None)
    os.environ["MPLBACKEND"] = "Agg"
    nb = nbformat.read(paths.solution_notebook(notebook_id), as_version=4)
    client = NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(paths.SOLUTIONS_DIR / notebook_id)}},
    )
    try:
        client.execute()
    except Exception as err:  # the cell error, with its traceback, as nbclient reports it
        return f"{type(err).__name__}: {err}"[-3000:]
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
    return f"{errors[0].ename}: {errors[0].evalue}" if errors else None


@pytest.fixture(scope="module")
def outcomes() -> dict:
    workers = min(2, len(os.sched_getaffinity(0)), len(IDS)) or 1
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        # later notebooks are the longest: start them first so both workers end together
        futures = {nb_id: pool.submit(run_top_to_bottom, nb_id) for nb_id in reversed(IDS)}
        return {nb_id: future.result() for nb_id, future in futures.items()}


@pytest.mark.parametrize("notebook_id", IDS)
def test_solution_runs_top_to_bottom(notebook_id, outcomes):
    assert outcomes[notebook_id] is None, outcomes[notebook_id]
    assert os.environ.get("NBGRADER_EXECUTION") is None
