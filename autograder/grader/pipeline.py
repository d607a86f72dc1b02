"""One submission through nbgrader's autograde: the steps ``check`` and ``grade`` share.

Both callers hand a learner's folder to :func:`autograde`, which repairs the submission
(:func:`.structure.prepare`: duplicated, deleted or metadata-stripped cells), lets the caller read
it as handed in (``before_run``: ``grade`` notes what its cells may do before any learner code
runs), runs nbgrader's autograde under :class:`.execute.GradingExecute` and returns the run's
record. What can go wrong is typed: :class:`~.structure.SubmissionError` (the submission itself:
the learner's to fix) and :class:`GradingFailed` (the kernel or nbgrader: nobody's mistake, graded
again later). What each caller does with the graded notebook differs: ``check`` reads the
results (:mod:`.one_notebook`), ``grade`` re-checks passed cells outside the kernel, withholds and
publishes (:mod:`.worker`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from traitlets.config import Config

from .isolation import Limits
from .nbgrader_run import NbgraderRun
from .nbgrader_settings import grading_config
from .structure import prepare


class GradingFailed(Exception):
    """The kernel could not start or nbgrader failed: reported, not scored, graded again later."""


@dataclass
class Autograded:
    """What one autograde of a submission produced besides nbgrader's own files."""

    notes: list[str] = field(default_factory=list)  # what repairing the submission changed
    runs: dict[str, dict] = field(default_factory=dict)  # notebook stem -> its run's record


class GradingRun:
    """An nbgrader course set up for grading, with the records its runs leave.

    ``GradingExecute`` writes what happened to each notebook (stopped, truncated, verdicts) into
    the ``RunRecords`` its config carries; this object owns it, so nothing outside reads a dict
    shared through nbgrader's config.
    """

    def __init__(
        self,
        root: Path,
        limits: Limits,
        runtime: Path,
        verify: bool,
        uid: int | None = None,
        extra: Config | None = None,
    ):
        from .execute import RunRecords  # imports torch: only where grading happens

        self.records = RunRecords()
        config = grading_config(limits, runtime, verify, self.records, uid)
        if extra is not None:
            config.merge(extra)
        self.nbgrader = NbgraderRun(root, config)
        self.root = self.nbgrader.root

    def autograde(
        self,
        assignment: str,
        student: str,
        folder: Path,
        before_run: Callable[[dict[str, Path], Path], None] | None = None,
    ) -> Autograded:
        """Repair ``folder``'s notebooks into the course as ``student``'s submission of
        ``assignment``, call ``before_run(expected, submitted)``, autograde, and return the notes
        and each notebook's run record. Raises ``SubmissionError`` or :class:`GradingFailed`."""
        release = self.root / "release" / assignment
        expected = {p.name: p for p in sorted(release.glob("*.ipynb"))}
        submitted = self.root / "submitted" / student / assignment
        done = Autograded(notes=prepare(folder, expected, submitted))
        if before_run is not None:
            before_run(expected, submitted)
        self.records.clear()
        outcome = self.nbgrader.autograde(assignment, student)
        done.runs = dict(self.records)
        failed = [r["stopped"] for r in done.runs.values() if r.get("kernel_failed_to_start")]
        if failed:
            reasons = "; ".join(failed)
            raise GradingFailed(
                f"the grading kernel could not start (not the notebook's fault): {reasons}"
            )
        if not outcome.get("success"):
            reason = self.nbgrader.failure_reason(outcome)
            raise GradingFailed(f"nbgrader could not grade this notebook: {reason}")
        unrun = sorted(name for name in expected if Path(name).stem not in done.runs)
        if unrun:  # graded without a record of its run: its cells would read as never checked
            raise GradingFailed(f"nbgrader graded {', '.join(unrun)} without running it")
        return done
