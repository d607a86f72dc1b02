"""Write one attempt's notebook: the problem statement, a clock cell, one empty cell for the
answer and a run-the-tests cell, and nothing else from the course.

The kernel of that notebook imports only :mod:`autograder.interview.session`, whose one object
runs the clock and the tests and offers the follow-ups; no course exercise, helper or answer is
in its scope.
"""

from __future__ import annotations

import random
import secrets
from pathlib import Path

import nbformat

from autograder import paths

from . import bank, scorecard, seal

FOLDER = scorecard.FOLDER
TEST_CALL = "run_tests"  # the name the clock watches for (tools.live_timer)


def folder(work: Path = paths.WORK_DIR) -> Path:
    return Path(work) / FOLDER


_GRADING = {
    "interviewer": "then run the test cell: the course's checks, hidden cases included, grade "
    "it, and like an interviewer say only whether it passes and which case fails. "
    "`interview.hint()` names the mistake, at the cost of a hint on your scorecard; the full "
    "diagnosis comes in the debrief, after your clean pass or, when the box ends, from "
    "`interview.debrief()`. Then the "
    "interviewer has follow-up questions.",
    "coach": "then run the test cell: the course's checks, hidden cases included, grade it and "
    "name the first mistake they find. After a pass the interviewer has follow-up questions.",
}


def _statement(problem, variant, box_minutes: int, mode: str) -> str:
    task = variant.task
    return "\n".join(
        [
            f"# Mock interview: {problem.title}",
            "",
            f"*From {problem.taught}. Time box: {box_minutes} minutes, on the clock since this "
            "notebook was written; it stops at your first clean pass.*",
            "",
            problem.brief,
            "",
            "```python",
            task.signature,
            "```",
            "",
            task.contract,
            "",
            f"Write `{task.name}` in the empty cell, using `torch` (import what you need "
            f"there), {_GRADING[mode]}",
        ]
    )


def _code(source: str, **metadata) -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(source, metadata=metadata)


def write(
    problem_id: str | None = None,
    work: Path = paths.WORK_DIR,
    seed: int | None = None,
    variant_id: str | None = None,
    mode: str = "interviewer",
):
    """Draw a problem (the schedule's choice unless ``problem_id``) and a variant (unless
    ``variant_id``), record the attempt, write its notebook and take the model answers out of
    ``work`` until its debrief (:mod:`.seal`); ``(notebook path, record)``. ``mode`` is
    ``interviewer`` or ``coach``."""
    where = folder(work)
    where.mkdir(parents=True, exist_ok=True)
    plan = scorecard.schedule(where, list(bank.PROBLEMS))
    for record in scorecard.load(where)["attempts"]:
        if record["rating"] is None:  # an attempt is over when the next one starts
            scorecard.rate(where, plan, record["id"], bank.PROBLEMS[record["problem"]].box_minutes)
    problem = bank.PROBLEMS[problem_id or scorecard.next_problem(plan)]
    seed = secrets.randbits(32) if seed is None else seed
    previous = scorecard.last_variant(where, problem.id)
    variant = problem.variant(variant_id or bank.draw_variant(problem, seed, previous))
    spoken = bank.draw_spoken(problem, seed, count=random.Random(seed).choice((2, 3)))
    written, numeric = bank.draw_follow_ups(problem, seed)
    if mode != "coach":  # the interviewer asks in words and for estimates, not for letters
        spoken = []
    record = scorecard.new_attempt(
        where, problem.id, variant.id, spoken, mode, written, numeric, problem.box_minutes
    )
    seal.seal(work)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata["mock_interview"] = {"attempt": record["id"]}
    nb.cells = [
        nbformat.v4.new_markdown_cell(_statement(problem, variant, problem.box_minutes, mode)),
        _code(
            "from autograder.interview.session import Interview\n\n"
            f'interview = Interview("{record["id"]}")\n'
            "interview.clock()  # running since the notebook was written; a clean pass stops it",
            tags=["clock"],
        ),
        _code("", tags=["answer"]),
        _code(f"interview.{TEST_CALL}(globals())", tags=["tests"]),
    ]
    path = where / f"{record['id']}.ipynb"
    nbformat.write(nb, path)
    return path, record
