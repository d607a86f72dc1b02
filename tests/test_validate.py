"""The CI gate itself, and that it can fail."""

import pytest

from autograder.grading import CellResult, NotebookResult
from autograder.validate import _problems
from conftest import autograder


@pytest.mark.slow
def test_validate_passes_on_the_course():
    result = autograder("validate")
    assert result.returncode == 0, result.stdout + result.stderr


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
