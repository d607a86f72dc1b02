"""The kernel's side of one attempt: the clock, the tests, the hints, the debrief, the scorecard.

``Interview(attempt_id)`` reads its record from the scorecard in the notebook's folder.
``clock()`` shows the round's clock, which started when the notebook was written
(:class:`autograder.tools.live_timer.LiveTimer`, stopped by the first clean pass).
``run_tests(globals())`` grades the answer with the course's checks. In interviewer mode (the
default) a failed run says only which case failed, as an interviewer would; ``hint()`` names the
mistake, and costs a hint on the scorecard; the full diagnosis, run by run, comes in the debrief
after the clean pass or once the time box is over. Then come the follow-ups (:mod:`.follow_ups`):
the code extension, questions answered in words and scored against a rubric, and estimates. In
coach mode every run names its mistake and the follow-ups are notebook 10's letters, as before.
"""

from __future__ import annotations

import time
from pathlib import Path

from autograder.checks import CheckFailure
from autograder.tools.live_timer import LiveTimer

from . import bank, scorecard, seal
from .follow_ups import FollowUps, show
from .task import Task, outcome


def _seen(diagnoses: list[str], message: str) -> None:
    if message not in diagnoses:
        diagnoses.append(message)


def clock(seconds: float | None) -> str:
    if seconds is None:
        return "not yet"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes:02d}:{secs:02d}"


class Interview(FollowUps):
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
        self.coach = record.get("mode") == "coach"
        self.created = record["created"]
        self.timer = LiveTimer("run_tests", box_minutes=self.problem.box_minutes, now=time.time)

    def record(self) -> dict:
        return scorecard.attempt(self.folder, self.id)

    def elapsed(self) -> float:
        return time.time() - self.created

    def box_over(self) -> bool:
        return self.elapsed() > 60 * self.problem.box_minutes

    def clock(self):
        """The clock, started when the notebook was written; the label that shows it."""
        return self.timer.start(started=self.created)

    def _grade(self, task: Task, namespace: dict):
        """``task``'s outcome on the learner's answer; an answer not written yet is said at once
        and not recorded (Run All reaches the test cell before anything is written)."""
        __tracebackhide__ = True
        answer = namespace.get(task.name)
        if answer is None:
            raise CheckFailure(
                f"`{task.name}` is not defined yet: write it in the empty cell and run that cell."
            )
        return outcome(task, answer)

    def run_tests(self, namespace: dict) -> None:
        """Grade the answer in ``namespace``; raise what the interviewer says, or record the
        pass."""
        __tracebackhide__ = True
        failed = self._grade(self.task, namespace)
        after = self.elapsed()

        def note(record: dict) -> None:
            record["runs"] += 1
            record["last_diagnosis"] = failed.diagnosis if failed else None
            if failed:
                _seen(record["diagnoses"], failed.diagnosis)
            if (not failed or failed.case == "a hidden case") and not record["visible_pass_s"]:
                record["visible_pass_s"] = after
            if not failed and record["first_pass_s"] is None:
                record["first_pass_s"] = after

        record = scorecard.update(self.folder, self.id, note)
        if failed and (self.coach or self.box_over()):
            raise CheckFailure(failed.diagnosis)
        if failed:
            raise CheckFailure(
                f"✗ Fail: {failed.case}. (`interview.hint()` names the mistake; it costs a hint.)"
            )
        print(
            f"✓ Every test passes, hidden cases included (clean pass after "
            f"{clock(record['first_pass_s'])}, {record['runs']} run(s), "
            f"{record['hints']} hint(s))."
        )
        if self.coach:
            self._end()
        show(self.follow_ups() if self.coach else self.debrief_text())

    def hint(self) -> None:
        """The latest failed run's diagnosis; the scorecard counts it."""
        last = self.record()["last_diagnosis"]
        if last is None:
            print("No failed run to hint at: run the tests first.")
            return

        def note(record: dict) -> None:
            record["hints"] += 1

        record = scorecard.update(self.folder, self.id, note)
        print(f"Hint {record['hints']} (on your scorecard): {last}")

    def debrief(self) -> None:
        """The debrief: the runs' diagnoses and the follow-ups, after the clean pass or once the
        time box is over."""
        show(self.debrief_text())

    def debrief_text(self) -> str:
        __tracebackhide__ = True
        record = self.record()
        if record["first_pass_s"] is None and not self.box_over():
            left = clock(60 * self.problem.box_minutes - self.elapsed())
            raise CheckFailure(
                f"The debrief comes after your clean pass, or when the box ends ({left} left)."
            )
        self._end()
        seen = record["diagnoses"] or ["(no failed run)"]
        parts = [
            "## Debrief",
            self.scorecard_text(),
            "### What the tests saw, run by run",
            "\n".join(f"{n}. {d}" for n, d in enumerate(seen, 1)),
        ]
        return "\n\n".join([*parts, self.follow_ups()])

    def _end(self) -> None:
        """The attempt is over: recorded so, and the model answers are back in ``work/``."""
        if not self.record()["debriefed"]:
            scorecard.update(self.folder, self.id, lambda r: r.update(debriefed=True))
            seal.unseal(self.folder.resolve().parent)

    def scorecard_text(self) -> str:
        """This attempt's scorecard, as Markdown."""
        r = self.record()
        rows = [
            ("mode", r.get("mode", "interviewer")),
            ("runs", r["runs"]),
            ("hints", r["hints"]),
            ("first pass (visible cases)", clock(r["visible_pass_s"])),
            ("clean pass (hidden cases too)", clock(r["first_pass_s"])),
            ("time box", f"{self.problem.box_minutes:02d}:00"),
            ("extension", "passed" if r["extension"]["passed"] else "not passed"),
        ]
        for q, said in r.get("written", {}).items():
            covered = said["covered"]
            of = len(self._written(q).rubric)
            rows.append((f"said: {q}", f"{len(covered)}/{of} points" if covered else "not ticked"))
        for q, given in r.get("numeric", {}).items():
            verdict = {None: "not answered", True: "right", False: "off"}[given["right"]]
            rows.append((f"estimate: {q}", verdict))
        table = "\n".join(f"| {k} | {v} |" for k, v in rows)
        return f"### Scorecard\n\n| | |\n|---|---|\n{table}"

    def scorecard(self) -> None:
        show(self.scorecard_text())

    def run_extension(self, namespace: dict) -> None:
        """Grade the code follow-up; raise its diagnosis, or record the pass."""
        __tracebackhide__ = True
        failed = self._grade(self.problem.extension, namespace)

        def note(record: dict) -> None:
            ext = record["extension"]
            ext["runs"] += 1
            if failed:
                _seen(ext["diagnoses"], failed.diagnosis)
            else:
                ext["passed"] = True

        scorecard.update(self.folder, self.id, note)
        if failed:
            raise CheckFailure(failed.diagnosis)
        print("✓ The extension passes, hidden cases included.")
