"""The follow-ups after a pass, as the kernel's ``interview`` object offers them.

The interviewer's: the code extension; questions answered in words (``say``), after which the
model answer and a rubric of 3–5 points are shown and the candidate ticks the points they made
(``covered``); and estimates for a named model (``estimate``), graded within a tolerance. The
coach's: the extension and notebook 10's questions answered with a letter or a number
(``answer``), graded by that notebook's ``check_choice`` and ``check_number``.
"""

from __future__ import annotations

from autograder.checks import CheckFailure
from autograder.checks.nb10_interview import check_choice, check_number

from . import bank, scorecard
from .numeric import NUMERIC, Numeric
from .written import WRITTEN, Written

MIN_WORDS = 12  # "a few sentences"


def show(markdown: str) -> None:
    try:
        from IPython.display import Markdown, display
    except ImportError:
        print(markdown)
        return
    display(Markdown(markdown))


def _spoken(question: str, message: str) -> str:
    """A check's message about notebook 10's ``answer_<question>`` variable, said of the
    candidate's ``interview.answer(question, value)`` call instead."""
    name, call = f"`answer_{question}`", f'`interview.answer("{question}", …)`'
    if f"{name} is not set yet" in message:
        how = '"<letter>"' if bank.is_choice(question) else "<a number>"
        return f'{call} got no answer: call `interview.answer("{question}", {how})`.'
    message = message.replace(f"{name} = ", "Your answer ").replace(f"Set {name} to", "Give")
    return message.replace(name, call)


class FollowUps:
    """The follow-up methods of :class:`autograder.interview.session.Interview`."""

    def _asked(self, kind: str, question: str) -> dict:
        __tracebackhide__ = True
        asked = self.record().get(kind, {})
        if question not in asked:
            listed = ", ".join(f'"{q}"' for q in asked) or "none"
            raise CheckFailure(f"This attempt's questions of that kind are {listed}.")
        return asked[question]

    def _written(self, question: str) -> Written:
        return WRITTEN[question]

    def follow_ups(self) -> str:
        """The follow-ups, as Markdown."""
        ext = self.problem.extension
        parts = [
            "## Follow-up 1: extend your code",
            f"```python\n{ext.signature}\n```",
            ext.contract,
            f"Write `{ext.name}` in a new cell, then run `interview.run_extension(globals())`.",
        ]
        n = 2
        if self.coach:
            for question in self.spoken:
                how = '"<letter>"' if bank.is_choice(question) else "<a number>"
                parts += [
                    f"## Follow-up {n}: say it, then answer",
                    bank.question_text(question),
                    f'Answer with `interview.answer("{question}", {how})`.',
                ]
                n += 1
            return "\n\n".join(parts)
        record = self.record()
        for question in record.get("written", {}):
            parts += [
                f"## Follow-up {n}: answer in words",
                WRITTEN[question].question,
                f"Write a few sentences, as you would say them, then run "
                f'`interview.say("{question}", """your answer""")`: the model answer and '
                "the points an interviewer listens for come after yours.",
            ]
            n += 1
        for question in record.get("numeric", {}):
            asked = NUMERIC[question]
            unit = f" in {asked.unit}" if asked.unit else ""
            parts += [
                f"## Follow-up {n}: estimate",
                asked.question,
                f'Work it out, then give one number{unit}: `interview.estimate("{question}", '
                "<number>)`.",
            ]
            n += 1
        return "\n\n".join(parts)

    def say(self, question: str, text: str) -> None:
        """Record a follow-up answered in words; show the model answer and its rubric."""
        __tracebackhide__ = True
        self._asked("written", question)
        words = len(str(text).split())
        if words < MIN_WORDS:
            raise CheckFailure(
                f"That is {words} word(s): say it as you would to an interviewer, in a few "
                "sentences, before you see the model answer."
            )

        def note(record: dict) -> None:
            said = record["written"][question]
            said["text"] = said["text"] or str(text)  # the first answer is the one scored

        scorecard.update(self.folder, self.id, note)
        asked = WRITTEN[question]
        points = "\n".join(f"{n}. {point}" for n, point in enumerate(asked.rubric, 1))
        show(
            f"**Model answer.** {asked.model}\n\n**What an interviewer listens for:**\n\n"
            f"{points}\n\nTick the points your answer made: "
            f'`interview.covered("{question}", 1, 3)` (their numbers; none: no number).'
        )

    def covered(self, question: str, *points: int) -> None:
        """Tick the rubric's points the candidate's written answer made."""
        __tracebackhide__ = True
        said = self._asked("written", question)
        if said["text"] is None:
            raise CheckFailure(f'Answer first: `interview.say("{question}", """…""")`.')
        rubric = WRITTEN[question].rubric
        wrong = [p for p in points if not (isinstance(p, int) and 1 <= p <= len(rubric))]
        if wrong:
            raise CheckFailure(f"The points are numbered 1 to {len(rubric)}; not {wrong}.")
        ticked = sorted(set(points))
        scorecard.update(
            self.folder, self.id, lambda r: r["written"][question].update(covered=ticked)
        )
        missed = [f"{n}. {p}" for n, p in enumerate(rubric, 1) if n not in ticked]
        print(f"{len(ticked)} of {len(rubric)} points, on your scorecard.")
        if missed:
            print("Next time, also say: " + "; ".join(missed))

    def estimate(self, question: str, value) -> None:
        """Grade an estimate within its tolerance; the first one given is scored."""
        __tracebackhide__ = True
        given = self._asked("numeric", question)
        asked: Numeric = NUMERIC[question]
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise CheckFailure(
                f"Give a number{' in ' + asked.unit if asked.unit else ''}."
            ) from None
        if given["value"] is None:
            right = asked.right(number)
            scorecard.update(
                self.folder,
                self.id,
                lambda r: r["numeric"][question].update(value=number, right=right),
            )
        else:
            number, right = given["value"], given["right"]
        within = f"within {asked.tolerance:.0%}" if asked.tolerance else "exactly"
        verdict = "Right" if right else "Off"
        print(
            f"{verdict}: {number:g} {asked.unit} (scored: your first estimate; the answer is "
            f"{asked.answer:.4g} {asked.unit}, {within}). {asked.working}"
        )

    def answer(self, question: str, value) -> None:
        """Grade a coach's follow-up with the interview notebook's own check."""
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
