"""The kernel's side of one attempt: the clock, the tests, the follow-ups, the scorecard.

``Interview(attempt_id)`` reads its record from the scorecard in the notebook's folder.
``clock()`` starts the round's clock (:class:`autograder.tools.live_timer.LiveTimer`, which
stops at the first successful run of a cell that calls ``run_tests``). ``run_tests(globals())``
grades the answer with the course's checks and raises the first diagnosis; after the first pass
it records the time and offers the follow-ups: ``run_extension(globals())`` for the code one,
``answer(question, value)`` for the spoken ones, graded by the interview notebook's own
``check_choice`` and ``check_number``.
"""

from __future__ import annotations

from pathlib import Path

from autograder.checks import CheckFailure
from autograder.checks.nb09_interview import check_choice, check_number
from autograder.tools.live_timer import LiveTimer

from . import bank, scorecard
from .task import Task, grade


def _show(markdown: str) -> None:
    try:
        from IPython.display import Markdown, display
    except ImportError:
        print(markdown)
        return
    display(Markdown(markdown))


def _seen(diagnoses: list[str], message: str) -> None:
    if message not in diagnoses:
        diagnoses.append(message)


def _spoken(question: str, message: str) -> str:
    """A check's message about notebook 09's ``answer_<question>`` variable, said of the
    candidate's ``interview.answer(question, value)`` call instead."""
    name, call = f"`answer_{question}`", f'`interview.answer("{question}", …)`'
    if f"{name} is not set yet" in message:
        how = '"<letter>"' if bank.is_choice(question) else "<a number>"
        return f'{call} got no answer: call `interview.answer("{question}", {how})`.'
    message = message.replace(f"{name} = ", "Your answer ").replace(f"Set {name} to", "Give")
    return message.replace(name, call)


class Interview:
    """One attempt at one problem, recorded in ``folder``'s scorecard."""

    def __init__(self, attempt_id: str, folder: str | Path = "."):
        self.folder = Path(folder)
        self.id = attempt_id
        try:
            record = scorecard.attempt(self.folder, attempt_id)
        except (OSError, ValueError, StopIteration):
            raise CheckFailure(
                f"Attempt {attempt_id} is not in {scorecard.SCORECARD} here "
                f"({self.folder.resolve()}): open this notebook from work/{scorecard.FOLDER}/, "
                "where `python -m autograder interview` wrote it."
            ) from None
        self.problem = bank.PROBLEMS[record["problem"]]
        self.task = self.problem.variant(record["variant"]).task
        self.spoken = list(record["spoken"])
        self.timer = LiveTimer("run_tests", box_minutes=self.problem.box_minutes)

    def clock(self):
        """Start the clock; the label that shows it."""
        return self.timer.start()

    def _grade(self, task: Task, namespace: dict) -> str | None:
        """``task``'s diagnosis of the learner's answer; an answer not written yet is said at
        once and not recorded (Run All reaches the test cell before anything is written)."""
        __tracebackhide__ = True
        answer = namespace.get(task.name)
        if answer is None:
            raise CheckFailure(
                f"`{task.name}` is not defined yet: write it in the empty cell and run that cell."
            )
        return grade(task, answer)

    def run_tests(self, namespace: dict) -> None:
        """Grade the answer in ``namespace``; raise its diagnosis, or record the pass."""
        __tracebackhide__ = True
        diagnosis = self._grade(self.task, namespace)
        passed_after = self.timer.elapsed()

        def note(record: dict) -> None:
            record["runs"] += 1
            if diagnosis:
                _seen(record["diagnoses"], diagnosis)
            elif record["first_pass_s"] is None:
                record["first_pass_s"] = passed_after

        record = scorecard.update(self.folder, self.id, note)
        if diagnosis:
            raise CheckFailure(diagnosis)
        minutes, seconds = divmod(int(record["first_pass_s"]), 60)
        print(
            f"✓ Every test passes, hidden cases included (first full pass after "
            f"{minutes:02d}:{seconds:02d}, {record['runs']} run(s))."
        )
        _show(self.follow_ups())

    def follow_ups(self) -> str:
        """The interviewer's follow-ups, as Markdown."""
        ext = self.problem.extension
        parts = [
            "## Follow-up 1: extend your code",
            f"```python\n{ext.signature}\n```",
            ext.contract,
            f"Write `{ext.name}` in a new cell, then run `interview.run_extension(globals())`.",
        ]
        for n, question in enumerate(self.spoken, 2):
            how = '"<letter>"' if bank.is_choice(question) else "<a number>"
            parts += [
                f"## Follow-up {n}: say it, then answer",
                bank.question_text(question),
                f'Answer with `interview.answer("{question}", {how})`.',
            ]
        return "\n\n".join(parts)

    def run_extension(self, namespace: dict) -> None:
        """Grade the code follow-up; raise its diagnosis, or record the pass."""
        __tracebackhide__ = True
        diagnosis = self._grade(self.problem.extension, namespace)

        def note(record: dict) -> None:
            ext = record["extension"]
            ext["runs"] += 1
            if diagnosis:
                _seen(ext["diagnoses"], diagnosis)
            else:
                ext["passed"] = True

        scorecard.update(self.folder, self.id, note)
        if diagnosis:
            raise CheckFailure(diagnosis)
        print("✓ The extension passes, hidden cases included.")

    def answer(self, question: str, value) -> None:
        """Grade a spoken follow-up with the interview notebook's own check."""
        __tracebackhide__ = True
        if question not in self.spoken:
            raise CheckFailure(f"The follow-ups of this attempt are {', '.join(self.spoken)}.")
        check = check_choice if bank.is_choice(question) else check_number
        right = False

        def note(record: dict) -> None:
            spoken = record["spoken"][question]
            spoken["tries"] += 1
            spoken["right"] = spoken["right"] or right

        try:
            check(question, value)
            right = True
        except CheckFailure as failure:
            raise CheckFailure(_spoken(question, str(failure))) from None
        finally:
            scorecard.update(self.folder, self.id, note)
        if not bank.is_choice(question):
            print("Right.")
