"""Each cell's time limit under ``check``: what the instructor's solution needs there, with room.

One limit for every cell (60 s) let an endless loop in notebook 01's ``softmax`` cost three
minutes before ``check`` named it: the test cell, then each demonstration cell that calls it,
waited out the whole limit, when the solution runs each of them in well under a second. So each
cell of each instructor notebook was timed once, running top to bottom as a learner runs it, and
the seconds are stored in :data:`MEASURED` by cell id (``python -m autograder.grader.cell_limits``
measures again). A cell's limit is :data:`MARGIN` times that, never below :data:`FLOOR_S` and
never above the ``--cell-timeout`` given; a cell the instructor notebook does not have (one the
learner added) keeps ``--cell-timeout``, and an id several notebooks share (``setup``) gets the
longest of their times.

An endless loop in 01's ``softmax`` is now named in about 27 s in all (the test cell and the two
demonstrations that call it, 5 s each), on a 2-core machine with a load of 7; it was 192 s.
Edit a notebook, then time it again: ``tests/test_cli.py`` names any cell without a time.

``grade`` keeps ``--cell-timeout`` for every cell: it re-checks each passed cell in the grader
within the same limit, work these measurements do not include.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
from pathlib import Path

from autograder import paths

MEASURED = Path(__file__).with_name("cell_seconds.json")
MARGIN = 10  # a learner's loops may be slower than the solution's vectorised code
FLOOR_S = 5  # Python and PyTorch start-up noise, a busy laptop


@functools.cache
def _measured() -> dict[str, float]:
    """cell id -> the most any instructor notebook's cell of that id took, in seconds."""
    seconds: dict[str, float] = {}
    for cells in json.loads(MEASURED.read_text(encoding="utf-8")).values():
        for cell_id, took in cells.items():
            seconds[cell_id] = max(took, seconds.get(cell_id, 0.0))
    return seconds


def limit(cell, cap_s: int) -> int:
    """Seconds a notebook cell may run: :data:`MARGIN` times what its id took, at least
    :data:`FLOOR_S`, at most ``cap_s``; ``cap_s`` for a cell never measured. (nbclient's
    ``timeout_func``.)"""
    took = _measured().get(cell.get("id") or "")
    if took is None:
        return cap_s
    return min(cap_s, max(FLOOR_S, math.ceil(MARGIN * took)))


def measure(notebook_id: str) -> dict[str, float]:
    """Seconds each code cell of the instructor notebook takes, run top to bottom in a fresh,
    single-threaded kernel, as ``check``'s kernels run."""
    import os
    from datetime import datetime

    import nbformat
    from nbclient import NotebookClient

    from autograder.grader.kernel_channels import KernelManager

    os.environ.update(MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    nb = nbformat.read(paths.solution_notebook(notebook_id), as_version=4)
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        kernel_manager_class=KernelManager,
        resources={"metadata": {"path": str(paths.SOLUTIONS_DIR / notebook_id)}},
    )
    client.execute()
    seconds = {}
    for cell in nb.cells:
        timing = cell.get("metadata", {}).get("execution", {})
        if cell.cell_type == "code" and "shell.execute_reply" in timing:
            began = datetime.fromisoformat(timing["iopub.execute_input"].rstrip("Z"))
            ended = datetime.fromisoformat(timing["shell.execute_reply"].rstrip("Z"))
            seconds[cell.id] = round((ended - began).total_seconds(), 2)
    return seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="time the instructor notebooks' cells again")
    parser.add_argument("notebooks", nargs="*", help="notebook ids (default: all)")
    ids = parser.parse_args(argv).notebooks or paths.notebook_ids()
    stored = json.loads(MEASURED.read_text(encoding="utf-8")) if MEASURED.is_file() else {}
    for nb_id in ids:
        stored[nb_id] = measure(nb_id)
        MEASURED.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n", "utf-8")
        print(f"{nb_id}: {len(stored[nb_id])} cells, {sum(stored[nb_id].values()):.1f} s")


if __name__ == "__main__":
    main()
