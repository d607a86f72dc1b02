"""The line under a passing test cell: what it checked, on stdout, only after a check ran."""

from autograder.checks import _cell_feedback
from autograder.checks.nb01_attention import check_softmax_values

NS = {"check_softmax_values": check_softmax_values, "print": print}
CELL = '"""softmax matches torch.softmax."""\ncheck_softmax_values(softmax)\n'


def test_the_line_says_what_was_checked():
    assert _cell_feedback.passed_line(CELL, NS, None) == "✓ softmax matches torch.softmax."
    no_doc = "check_softmax_values(softmax)"
    assert _cell_feedback.passed_line(no_doc, NS, "test_softmax_matches_torch") == (
        "✓ test_softmax_matches_torch: the visible checks pass"
    )
    assert _cell_feedback.passed_line(no_doc, NS, "a1b2c3") == "✓ the checks in this cell pass"


def test_no_line_without_a_check():
    assert _cell_feedback.passed_line('"""a demo."""\nprint(1)', NS, "test_x") is None
    assert _cell_feedback.passed_line("%%time\nx = 1", NS, None) is None
    assert _cell_feedback.passed_line("check_softmax_values", NS, None) is None  # not a call
