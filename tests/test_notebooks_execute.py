"""Every instructor notebook runs top to bottom, as a learner would run it (not under autograde)."""

import os

import nbformat
import pytest
from nbclient import NotebookClient

from autograder import paths

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("notebook_id", paths.notebook_ids())
def test_solution_runs_top_to_bottom(notebook_id, monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(paths.solution_notebook(notebook_id), as_version=4)
    client = NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(paths.SOLUTIONS_DIR / notebook_id)}},
    )
    client.execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, f"{errors[0].ename}: {errors[0].evalue}"
    assert os.environ.get("NBGRADER_EXECUTION") is None
