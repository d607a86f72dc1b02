"""What a grading run tells the instructor: a progress bar, a summary, the grades CSV.

Every line goes through :func:`~.learner_ids.printable`: learner ids, flags and error messages
quote what learners wrote, and an escape sequence in them would run in the instructor's terminal.
"""

from __future__ import annotations

import sys
from pathlib import Path

from autograder.classroom.learner_ids import printable
from autograder.grader.isolation import Isolation, Limits, describe
from autograder.grader.results import CheckStatus

EXIT_OK, EXIT_ERRORS = 0, 2


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{seconds:.1f}s"


class Summary:
    def __init__(self, out: Path, iso: Isolation, limits: Limits, jobs: int, warm: bool, echo):
        self.out, self.iso, self.limits, self.jobs, self.warm = out, iso, limits, jobs, warm
        self.echo = lambda line: echo(printable(line))  # ids and messages hold no escapes
        self.ignored: list[str] = []
        self.identical: list[str] = []  # groups of learners who handed in the same work
        self.skipped = 0
        self.todo = 0
        self._bar = None

    def start_progress(self, total: int) -> None:
        from tqdm import tqdm

        self._bar = tqdm(
            total=total,
            unit="nb",
            desc="grading",
            disable=not sys.stderr.isatty(),
            dynamic_ncols=True,
        )

    def progress(self, result: dict) -> None:
        if self._bar is not None:
            line = printable(f"{result['student']}: {result['status']}")
            self._bar.set_postfix_str(line, refresh=False)
            self._bar.update(1)

    def stop_progress(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def finish(self, folder, results: list[dict], seconds: float) -> int:
        from autograder.grader.gradebook import export_csv

        graded = [r for r in results if r["status"] == "graded"]
        errors = [r for r in results if r["status"] != "graded"]
        out = folder.out
        if (out / "gradebook.db").is_file():
            export_csv(out / "gradebook.db", results, out / "grades.csv")
        mode = "warm kernels" if self.warm else "a fresh kernel each"
        say = self.echo
        say(
            f"graded {len(graded)} of {len(results)} submission(s) in {_duration(seconds)} "
            f"({self.todo} this run, {self.skipped} unchanged since the last run; "
            f"{self.jobs} worker(s), {mode})"
        )
        for assignment in sorted({r["assignment"] for r in graded}):
            these = [r for r in graded if r["assignment"] == assignment]
            full = sum(1 for r in these if r.get("score", 0) >= r.get("max_score", 0) > 0)
            manual = sum(1 for r in these if r.get("needs_manual_grade"))
            mean = sum(r.get("score", 0) for r in these) / len(these)
            top = max(r.get("max_score", 0) for r in these)
            say(
                f"  {assignment}: {len(these)} graded, mean {mean:.2f}/{top:g}, "
                f"full marks {full}, awaiting manual grading {manual}"
            )
        stopped = [(r, nb) for r in graded for nb in r.get("notebooks", []) if nb.get("stopped")]
        if stopped:
            say(f"stopped early, graded on what ran ({len(stopped)}):")
            for r, nb in stopped:
                say(f"  {r['student']}/{r['assignment']}: {nb['stopped']}")
        if errors:
            say(f"COULD NOT BE GRADED ({len(errors)}), not scored:")
            for r in errors:
                say(f"  {r['student']}/{r['assignment']}: {r.get('error')}")
        if self.identical:
            say(
                f"identical submissions of different learners ({len(self.identical)}), "
                "for a person to look at (grades unchanged):"
            )
            for line in self.identical:
                say(f"  {line}")
        flagged = [r for r in results if r.get("flags")]
        if flagged:
            say(f"for the instructor to look at ({len(flagged)}):")
            for r in flagged:
                say(f"  {r['student']}/{r['assignment']}: " + "; ".join(r["flags"][:6]))
        cells = [c for r in graded for nb in r.get("notebooks", []) for c in nb["cells"]]
        unverified = [c["grade_id"] for c in cells if c.get("check") == CheckStatus.UNVERIFIED]
        if unverified:
            names = ", ".join(sorted(set(unverified)))
            say(
                f"note: {len(unverified)} passed cell(s) could not be verified outside the kernel "
                f"({names}): they keep their in-kernel points (flags above say which)"
            )
        withheld = [c["grade_id"] for c in cells if c.get("check") == CheckStatus.WITHHELD]
        if withheld:
            names = ", ".join(sorted(set(withheld)))
            say(
                f"note: {len(withheld)} passed cell(s) are withheld for a person ({names}): 0 "
                "points until a person awards them in the formgrader (flags above give the reason)"
            )
        for line in self.ignored:
            say(f"ignored: {line}")
        say("isolation:")
        for line in describe(self.iso, self.limits):
            say(f"  {line}")
        say(f"wrote {out / 'gradebook.db'}, {out / 'grades.csv'}, feedback in {out / 'feedback'}")
        return EXIT_ERRORS if errors else EXIT_OK
