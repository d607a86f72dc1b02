"""The mock interview's interviewer mode (issue 46), on the kernel's ``interview`` object without
a kernel: a run says pass or fail and which case, a hint names the mistake and is counted, the
debrief waits for the clean pass or the end of the box, the clock runs from the notebook's
creation, follow-ups are said in words (model answer, rubric, ticks) and estimated within a
tolerance, and the model answers are out of ``work/`` until the debrief.
"""

from __future__ import annotations

import re
import time

import nbformat
import pytest
from interview_answers import SCALED_CELL, UNSCALED_CELL

from autograder import paths
from autograder.checks import CheckFailure
from autograder.interview import bank, notebook, scorecard
from autograder.interview.numeric import NUMERIC
from autograder.interview.session import Interview
from autograder.interview.task import Task, course_check, outcome
from autograder.interview.written import WRITTEN

SAID = (
    "The dot product sums d_k terms, so its variance grows with the head size; large scores "
    "saturate the softmax and its gradients vanish."
)


def _defined(source: str) -> dict:
    namespace: dict = {}
    exec(source, namespace)
    return namespace


@pytest.fixture
def attempt(tmp_path, monkeypatch):
    """A fresh interviewer-mode attempt at ``attention`` (bias variant) and its session."""
    monkeypatch.chdir(tmp_path)
    path, record = notebook.write("attention", tmp_path, seed=1, variant_id="bias")
    return Interview(record["id"], path.parent), record


def test_a_run_says_only_pass_or_fail_and_which_case(attempt, capsys, one_thread):
    session, record = attempt
    assert record["mode"] == "interviewer" and record["spoken"] == {}
    with pytest.raises(CheckFailure) as failure:
        session.run_tests(_defined(UNSCALED_CELL))
    said = str(failure.value)
    assert said.startswith("✗ Fail: visible case 1 of 3") and "√d_k" not in said, said
    with pytest.raises(CheckFailure, match="after your clean pass"):
        session.debrief_text()
    session.hint()
    assert "divide the scores by √d_k" in capsys.readouterr().out
    assert session.record()["hints"] == 1
    session.run_tests(_defined(SCALED_CELL))
    assert "✓ Every test passes" in capsys.readouterr().out
    done = session.record()
    assert done["runs"] == 2 and done["visible_pass_s"] is not None
    assert done["first_pass_s"] is not None and done["debriefed"]
    debrief = session.debrief_text()
    assert "√d_k" in debrief and "| hints | 1 |" in debrief and "clean pass" in debrief


def test_a_hidden_case_is_named_as_hidden():
    def check_only_small(fn, *, seed=0, thorough=False):
        if thorough:
            raise CheckFailure("fails on the larger inputs")

    def check_breaks_on_large(fn, *, seed=0, thorough=False):
        if thorough:
            raise IndexError("the answer's tensor was too short")

    for check, said in (
        (check_only_small, "fails on the larger"),
        (check_breaks_on_large, "short"),
    ):
        task = Task("f", "def f():", "", (course_check(check, lambda fn: fn),))
        assert outcome(task, object()).case == "a hidden case"
        assert said in outcome(task, object()).diagnosis


def test_the_clock_runs_from_the_notebooks_creation(attempt):
    session, record = attempt
    scorecard.update(session.folder, session.id, lambda r: r.update(created=r["created"] - 90))
    session = Interview(record["id"], session.folder)
    session.clock()
    assert 90 <= session.timer.elapsed() < 150
    assert re.search(r"01:[345]\d of a 15:00 box", session.timer.text())
    session.timer.retire()


def test_when_the_box_ends_runs_diagnose_and_the_debrief_opens(attempt, one_thread):
    session, record = attempt
    over = 60 * session.problem.box_minutes + 1
    scorecard.update(session.folder, session.id, lambda r: r.update(created=time.time() - over))
    session = Interview(record["id"], session.folder)
    with pytest.raises(CheckFailure, match="√d_k"):
        session.run_tests(_defined(UNSCALED_CELL))
    assert "What the tests saw" in session.debrief_text()


def test_follow_ups_are_said_in_words_then_ticked_and_estimated(attempt, capsys, one_thread):
    session, record = attempt
    (question,), (estimate,) = record["written"], record["numeric"]
    with pytest.raises(CheckFailure):  # not before the pass
        session.debrief_text()
    session.run_tests(_defined(SCALED_CELL))
    with pytest.raises(CheckFailure, match="Answer first"):
        session.covered(question, 1)
    with pytest.raises(CheckFailure, match="a few sentences"):
        session.say(question, "scaling")
    session.say(question, SAID)
    session.covered(question, 1, 2)
    assert "2 of 4 points" in capsys.readouterr().out
    with pytest.raises(CheckFailure, match="numbered 1 to 4"):
        session.covered(question, 7)
    answer = NUMERIC[estimate].answer
    session.estimate(estimate, answer * 1.05)  # within 10 %
    session.estimate(estimate, answer * 3)  # the first estimate is the one scored
    assert capsys.readouterr().out.count("Right") == 2
    done = session.record()
    assert done["written"][question] == {"text": SAID, "covered": [1, 2]}
    assert done["numeric"][estimate]["right"] is True
    card = session.scorecard_text()
    assert f"said: {question} | 2/4 points" in card and f"estimate: {estimate} | right" in card
    line = scorecard.summary_lines(session.folder)[0]
    assert "2 rubric point(s) covered" in line and "follow-ups 1/2" in line


def test_an_estimate_outside_the_tolerance_is_off(attempt, capsys, one_thread):
    session, record = attempt
    (estimate,) = record["numeric"]
    session.run_tests(_defined(SCALED_CELL))
    session.estimate(estimate, NUMERIC[estimate].answer * 1.5)
    assert "Off" in capsys.readouterr().out
    assert session.record()["numeric"][estimate]["right"] is False


def test_the_model_answers_are_away_during_an_attempt(tmp_path, monkeypatch, one_thread):
    from autograder import lab_launcher

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(paths, "WORK_DIR", tmp_path)
    answers = tmp_path / paths.MODEL_ANSWERS
    assert lab_launcher.sync_model_answers() and any(answers.glob("*.ipynb"))
    path, record = notebook.write("attention", tmp_path, seed=2, variant_id="bias")
    assert not any(answers.glob("*.ipynb"))
    assert not lab_launcher.sync_model_answers()  # make lab during the attempt: still away
    assert not any(answers.glob("*.ipynb"))
    Interview(record["id"], path.parent).run_tests(_defined(SCALED_CELL))  # the pass: the debrief
    assert any(answers.glob("*.ipynb"))


def test_coach_mode_keeps_the_letters(tmp_path, capsys):
    from autograder.cli import main

    assert main(["interview", "attention", "--coach", "--folder", str(tmp_path)]) == 0
    assert "Coach mode" in capsys.readouterr().out
    (record,) = scorecard.load(tmp_path / "interview")["attempts"]
    assert record["mode"] == "coach" and record["spoken"]
    (written,) = (tmp_path / "interview").glob("*.ipynb")
    assert "name the first mistake" in nbformat.read(written, as_version=4).cells[0].source


def test_every_problem_has_follow_ups_in_words_and_numbers():
    for problem in bank.PROBLEMS.values():
        assert problem.written and problem.numeric, problem.id
        assert set(problem.written) <= set(WRITTEN) and set(problem.numeric) <= set(NUMERIC)
    for question in WRITTEN.values():
        assert 3 <= len(question.rubric) <= 5, question.question
        assert not re.search(r"\bsection \d", question.question, re.I)
    for asked in NUMERIC.values():
        assert asked.right(asked.answer) and not asked.right(asked.answer * 1.5 + 1)


def test_a_coach_cannot_open_the_model_answers_before_the_pass(tmp_path, monkeypatch, one_thread):
    from autograder import lab_launcher

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(paths, "WORK_DIR", tmp_path)
    answers = tmp_path / paths.MODEL_ANSWERS
    lab_launcher.sync_model_answers()
    path, record = notebook.write("attention", tmp_path, seed=3, variant_id="bias", mode="coach")
    session = Interview(record["id"], path.parent)
    with pytest.raises(CheckFailure, match="after your clean pass"):
        session.debrief()
    with pytest.raises(CheckFailure, match="√d_k"):  # the coach names the mistake
        session.run_tests(_defined(UNSCALED_CELL))
    assert not any(answers.glob("*.ipynb"))
    session.run_tests(_defined(SCALED_CELL))
    assert any(answers.glob("*.ipynb")) and session.record()["debriefed"]
