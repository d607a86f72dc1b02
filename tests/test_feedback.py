"""The feedback preprocessor hides hidden tests and shortens tracebacks of test cells only."""

import nbformat

from autograder.grader.feedback import HideHiddenTests


def _cell(source, nbgrader, ename="CheckFailure", evalue="softmax is taken over the wrong axis."):
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = nbgrader
    cell.outputs = [
        nbformat.v4.new_output(
            "error", ename=ename, evalue=evalue, traceback=["Traceback...", "----> 3 secret()"]
        )
    ]
    return cell


TEST = {"grade": True, "solution": False, "grade_id": "test_x", "points": 1}
ANSWER = {"grade": False, "solution": True, "grade_id": "x"}


def test_hidden_region_removed_and_traceback_shortened():
    source = (
        '"""Checks x."""\ncheck_x(x)\n### BEGIN HIDDEN TESTS\nsecret_check(x, seed=7)\n'
        "### END HIDDEN TESTS\nafter_hidden()\n"
    )
    cell, _ = HideHiddenTests().preprocess_cell(_cell(source, TEST), {}, 0)
    assert "secret_check" not in cell.source and "HIDDEN TESTS" not in cell.source
    assert "check_x(x)" in cell.source and "after_hidden()" in cell.source
    assert "hidden tests run here" in cell.source
    assert cell.outputs[0].traceback == ["CheckFailure: softmax is taken over the wrong axis."]


def test_learner_cells_keep_their_traceback():
    cell, _ = HideHiddenTests().preprocess_cell(_cell("x = 1 / 0", ANSWER), {}, 0)
    assert cell.source == "x = 1 / 0"
    assert len(cell.outputs[0].traceback) == 2
