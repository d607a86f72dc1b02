"""``check``'s report: unfinished exercises on one line, a closing line with the score, the first
test to fix and its section, and the model answers where the learner's file browser shows them."""

import shutil

import pytest

from autograder import paths
from autograder.checks.nb05_quiz import check_quiz_answer
from autograder.checks.nb10_interview import check_number
from autograder.grader.messages import explain_error, is_unfinished
from autograder.grader.results import CellResult, NotebookResult
from autograder.report import format_result, sections

NB = "10_interview_prep"
STUB = explain_error("NotImplementedError", "")


def _not_set() -> AssertionError:
    try:
        check_number("gpt3_head_size", None)
    except AssertionError as failure:
        return failure
    raise AssertionError("check_number accepted None")


def _result(tmp_path) -> NotebookResult:
    notebook = tmp_path / f"{NB}.ipynb"
    shutil.copyfile(paths.release_notebook(NB), notebook)
    ids = list(sections(notebook))
    result = NotebookResult(str(notebook), NB, manual=[{"grade_id": "written", "max_score": 4}])
    result.cells = [CellResult(ids[0], 1, 1, True, "")]
    result.cells.append(CellResult(ids[1], 0, 1, False, "Option (a) ignores the head size."))
    result.cells += [CellResult(i, 0, 1, False, str(_not_set()), None, True) for i in ids[2:]]
    result.cells.append(CellResult("test_not_run", 0, 2, False, "not run: the kernel died"))
    result.total()
    return result


def test_the_cells_whose_exercise_is_not_written_share_one_line(tmp_path):
    assert is_unfinished(type(_not_set()).__name__) and is_unfinished("NotImplementedError")
    assert "not implemented yet" in STUB
    with pytest.raises(AssertionError) as unanswered:  # notebook 05's quiz
        check_quiz_answer("q1", None)
    assert is_unfinished(unanswered.type.__name__), unanswered.value
    with pytest.raises(AssertionError) as wrong:  # a wrong answer is a mistake, not unfinished
        check_quiz_answer("q1", "(e)")
    assert not is_unfinished(wrong.type.__name__)
    assert not is_unfinished("CheckFailure")
    result = _result(tmp_path)
    lines = format_result(result).splitlines()
    assert len(lines) < 10, lines
    (waiting,) = [line for line in lines if line.startswith("  TODO  ")]
    assert f"{len(result.cells) - 3} test cells" in waiting and "in §1.2 to §" in waiting, waiting
    assert "Option (a) ignores the head size." in lines[3], lines
    assert "        not run: the kernel died" in lines, lines  # a reason of its own, not a TODO


def test_every_report_ends_with_the_score_and_the_first_test_to_fix_and_its_section(tmp_path):
    result = _result(tmp_path)
    first = result.cells[1].grade_id
    last = format_result(result).splitlines()[-1]
    assert last.startswith(
        f"Score: 1 / {result.max_score:g} points. First to fix: {first}, in §1."
    ), last
    for cell in result.cells:
        cell.passed, cell.score = True, cell.max_score
    result.total()
    assert (
        format_result(result)
        .splitlines()[-1]
        .endswith(" points. All automatic tests pass. Well done!")
    )


def test_written_answers_point_to_the_model_answers_in_the_file_browser(tmp_path):
    report = format_result(_result(tmp_path))
    assert "reference/model_answers/ of your file browser" in report
    assert "solutions/" not in report


def test_sections_name_the_heading_a_test_cell_sits_under():
    where = sections(paths.release_notebook(NB))
    assert where["test_numbers_gpt3_head_size"] == ("§1.1 · Head size and head count", "1.1")
    assert all(label.startswith("§") for label, _ in where.values())
