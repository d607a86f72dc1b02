"""Every notebook runs top to bottom, as a learner would run it (not under autograde).

- Every instructor notebook runs without an error.
- Every learner notebook, untouched (no exercise done), runs top to bottom with JupyterLab's Run
  All semantics: a cell's error stops the run unless the cell carries the ``raises-exception``
  tag (nbclient honours it as JupyterLab does), and every code cell must get an execution count.
  No traceback, in a cell or inside a widget, shows a frame of the course's own code
  (``autograder/``), and an example that needs an unwritten exercise, or a name such a cell
  left undefined, says so in one line.

The notebooks run in a background job (``tests/notebook_runs.py``), two at a time, beside the
other tests; each test then reads its notebook's outcome.
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


@background.job("notebook_runs", cores=2, rank=5)
def _start_notebook_runs(folder: Path) -> background.Job:
    runner = str(Path(__file__).with_name("notebook_runs.py"))
    argv = [sys.executable, runner, str(folder / "outcomes.json")]
    return background.Job(argv, folder, REPO, _environment())


@pytest.fixture(scope="module")
def notebook_runs() -> dict:
    """(kind, notebook id) -> the solution's first error, or the release's problems."""
    job = background.start("notebook_runs")
    done = job.wait()
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    outcomes = json.loads((job.folder / "outcomes.json").read_text())
    return {tuple(key.split("/", 1)): value for key, value in outcomes.items()}


@pytest.mark.parametrize("notebook_id", IDS)
def test_solution_runs_top_to_bottom(notebook_id, notebook_runs):
    assert notebook_runs[("solution", notebook_id)] is None, notebook_runs[
        ("solution", notebook_id)
    ]
    assert os.environ.get("NBGRADER_EXECUTION") is None


@pytest.mark.parametrize("notebook_id", IDS)
def test_untouched_release_shows_no_course_frames_and_one_line_per_unfinished_exercise(
    notebook_id, notebook_runs
):
    assert notebook_runs[("release", notebook_id)] == [], notebook_runs[("release", notebook_id)]
