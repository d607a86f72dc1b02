"""The CI gate itself, and that it can fail.

``validate`` judges each notebook by its solution and its untouched release. For the whole
course, the verdict is taken from the session's one ``grade`` run (``class_run``), which grades
every notebook's control and release (and verifies the control's cells outside the kernel); the
command itself runs end to end on the first notebook.
"""

import pytest
from hostile.class_run import RELEASE
from hostile.trust import CONTROLS

from autograder import paths
from autograder.grader.one_notebook import CellResult, NotebookResult
from autograder.validate import _problems
from conftest import autograder


def _graded(class_run, nb_id: str, learner: str) -> NotebookResult:
    result = class_run.results[(nb_id, learner)]
    if result["status"] != "graded":
        return NotebookResult("", nb_id, error=result["error"])
    (summary,) = result["notebooks"]
    return NotebookResult.from_summary(nb_id, summary)


@pytest.mark.slow
@pytest.mark.parametrize("nb_id", paths.notebook_ids())
def test_validate_passes_on_the_course(class_run, nb_id):
    solution = _graded(class_run, nb_id, CONTROLS[nb_id].learner)
    release = _graded(class_run, nb_id, RELEASE)
    assert _problems(solution, release) == [], class_run.stdout[-2000:]


@pytest.mark.slow
def test_validate_command_passes_on_a_notebook(first_notebook):
    result = autograder("validate", first_notebook)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"ok  {first_notebook}: solution" in result.stdout, result.stdout


def _result(*scores):
    cells = [
        CellResult(f"test_{i}", s, 2.0, s >= 2.0, "" if s >= 2 else "wrong")
        for i, s in enumerate(scores)
    ]
    return NotebookResult("nb.ipynb", "nb", sum(scores), 2.0 * len(scores), cells)


def test_problems_flag_a_failing_solution_and_a_passing_release():
    assert _problems(_result(2, 2), _result(0, 0)) == []
    assert any("solution fails test_1" in p for p in _problems(_result(2, 0), _result(0, 0)))
    assert any("release passes test_0" in p for p in _problems(_result(2, 2), _result(2, 0)))
    assert _problems(NotebookResult("nb", "nb"), _result(0)) == [
        "solution: no auto-graded test cells"
    ]


def _validate_handler(root, monkeypatch):
    """The Validate handler of autograder.grader.lab_validate serving ``root``, without a server."""
    from types import SimpleNamespace

    from traitlets.config import Config

    from autograder.grader.lab_validate import ThreadedValidateHandler

    handler = ThreadedValidateHandler.__new__(ThreadedValidateHandler)
    handler.application = SimpleNamespace(settings={"root_dir": str(root)})
    handler.load_config = Config
    monkeypatch.setattr(ThreadedValidateHandler, "log", SimpleNamespace(error=print), raising=False)
    return handler


def test_validate_does_not_run_a_mock_interview(tmp_path, monkeypatch):
    """A mock interview has no nbgrader cells: Validate said "Success!" while its test cell
    failed, and its rerun added runs to the scorecard. It says where the interview is graded."""
    from autograder.interview import notebook, scorecard

    path, record = notebook.write("causal_mha", tmp_path, seed=1)
    result = _validate_handler(tmp_path, monkeypatch).validate_notebook(
        str(path.relative_to(tmp_path))
    )
    assert not result["success"], result
    assert "run its test cell" in result["value"], result
    assert scorecard.attempt(path.parent, record["id"])["runs"] == 0


def test_validate_reads_a_notebook_caught_mid_save_whole(tmp_path, monkeypatch):
    """JupyterLab's Ctrl+S truncates the file and writes it anew: a Validate that read in between
    crashed ("Notebook does not appear to be JSON: ''"). It reads as ``check`` does: it waits
    out the save, and a file that stays empty gets one line, not a traceback."""
    import threading

    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")])
    path = tmp_path / "mine.ipynb"
    path.write_text("")
    handler = _validate_handler(tmp_path, monkeypatch)
    threading.Timer(0.3, path.write_text, [nbformat.writes(nb)]).start()
    result = handler.validate_notebook("mine.ipynb")
    assert result["success"], result["value"]
    path.write_text("")
    result = handler.validate_notebook("mine.ipynb")
    assert not result["success"] and "is empty" in result["value"], result
    assert "Traceback" not in result["value"]
