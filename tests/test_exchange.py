"""GUIDE.md §1-5 with nbgrader's own exchange, an instructor and two learners as Unix users
(:mod:`exchange_class`): release, fetch, submit, collect, grade, feedback, a late resubmission."""

import re

import pytest
from exchange_class import ASSIGNMENT, HIDDEN_CALL, TEST, WRITTEN

pytestmark = pytest.mark.slow


def _cell(result: dict, grade_id: str) -> dict:
    return next(c for nb in result["notebooks"] for c in nb["cells"] if c["grade_id"] == grade_id)


def test_collect_writes_the_layout_grade_reads(exchange_term):
    cls = exchange_term.cls
    for learner in (cls.ada, cls.bob):
        folder = cls.course / "submitted" / learner.name / ASSIGNMENT
        assert (folder / f"{ASSIGNMENT}.ipynb").is_file(), sorted(folder.parent.rglob("*"))
        assert (folder / "timestamp.txt").is_file()
    assert exchange_term.first.returncode == 0, exchange_term.first.stdout[-2000:]
    assert set(exchange_term.first_results) == {cls.ada.name, cls.bob.name}


def test_each_learner_fetches_their_score_and_one_line_messages_without_hidden_tests(
    exchange_term,
):
    cls, results = exchange_term.cls, exchange_term.first_results
    ada, bob = results[cls.ada.name], results[cls.bob.name]
    assert _cell(ada, TEST)["score"] == _cell(ada, TEST)["max_score"] > 0, _cell(ada, TEST)
    assert _cell(bob, TEST)["score"] == 0 and _cell(bob, TEST)["message"], _cell(bob, TEST)
    assert WRITTEN in {m["grade_id"] for nb in ada["notebooks"] for m in nb["manual"]}
    for learner, result in ((cls.ada, ada), (cls.bob, bob)):
        (html,) = exchange_term.feedback[learner.name]
        score = re.search(r"Score:\s*([\d.]+)\s*/\s*([\d.]+)", html)
        assert score, html[:2000]
        assert float(score.group(1)) == result["score"], (score.group(0), result["score"])
        assert HIDDEN_CALL not in html and "HIDDEN TESTS" not in html
        assert "most recent call last" not in html  # one line per failure, no traceback
    message = _cell(bob, TEST)["message"]
    (bob_html,) = exchange_term.feedback[cls.bob.name]
    assert message[:60] in bob_html.replace("&#39;", "'").replace("&quot;", '"'), message


def test_a_late_resubmission_is_the_only_submission_graded_again(exchange_term):
    cls, first, second = (
        exchange_term.cls,
        exchange_term.first_results,
        exchange_term.second_results,
    )
    assert exchange_term.second.returncode == 0, exchange_term.second.stdout[-2000:]
    ada, bob = cls.ada.name, cls.bob.name
    assert second[ada]["sha256"] == first[ada]["sha256"]  # collect --update left ada's alone
    # What decides a grade (the grading code included) did not change between the two runs,
    # as in CI; in a tree someone edits meanwhile, everyone is graded again, rightly.
    assert second[ada]["key"] == first[ada]["key"], "the grading code changed between the runs"
    assert "1 this run, 1 unchanged since the last run" in exchange_term.second.stdout
    assert second[ada] == first[ada]  # the same result, not redone
    assert second[bob]["sha256"] != first[bob]["sha256"]
    assert _cell(second[bob], TEST)["score"] == _cell(second[bob], TEST)["max_score"]
    late = exchange_term.feedback[f"{bob}-late"]
    assert len(late) == 2, "bob keeps the first feedback and gets the new one beside it"
    scores = sorted(float(re.search(r"Score:\s*([\d.]+)", h).group(1)) for h in late)
    assert scores == [first[bob]["score"], second[bob]["score"]], scores
