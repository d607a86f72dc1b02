"""Every instructor notebook runs top to bottom without an error, as a learner would run it (not
under autograde).

The notebooks run in a background job (``tests/notebook_runs.py``), two at a time, beside the
other tests; each test then reads its notebook's outcome. The untouched learner notebooks run in
the real browser's Run All, once (``test_explorer_browser``).
"""

import json
import os
import sys
from pathlib import Path

import background
import pytest

from autograder import paths
from conftest import REPO, _environment

pytestmark = pytest.mark.slow
IDS = paths.notebook_ids()


# One core on average (83 CPU-s over 78 s in fresh25), though it runs two notebooks at once: as
# 1.5 it did not fit beside the browser job and started last, alone, at 544 s of 599 (fresh26).
@background.job("notebook_runs", cores=1, rank=5)
def _start_notebook_runs(folder: Path) -> background.Job:
    runner = str(Path(__file__).with_name("notebook_runs.py"))
    argv = [sys.executable, runner, str(folder / "outcomes.json")]
    return background.Job(argv, folder, REPO, _environment())


@pytest.fixture(scope="module")
def notebook_runs() -> dict:
    """notebook id -> the instructor notebook's first error, or None."""
    job = background.start("notebook_runs")
    done = job.wait()
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return json.loads((job.folder / "outcomes.json").read_text())


@pytest.mark.parametrize("notebook_id", IDS)
def test_solution_runs_top_to_bottom(notebook_id, notebook_runs):
    assert notebook_runs[notebook_id] is None, notebook_runs[notebook_id]
    assert os.environ.get("NBGRADER_EXECUTION") is None
