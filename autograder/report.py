"""Human-readable grading reports."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # grading imports nbgrader and torch: seconds, and the header comes at once
    from autograder.grading import NotebookResult

TYPICAL_GRADING = "15-30 s"  # measured for solved notebooks 01, 04 and 07 on a laptop-class CPU


def _ago(seconds: float) -> str:
    if seconds < 60:
        return f"{max(seconds, 0):.0f} s ago"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min ago"
    if seconds < 86400:
        return f"{seconds // 3600:.0f} h ago"
    return f"{seconds // 86400:.0f} days ago"


def format_header(path: Path, budget_s: int, now: float | None = None) -> str:
    """What ``check`` says before grading: which file, when it was saved, how long it will take.

    JupyterLab's unsaved changes live in the browser, where a terminal cannot see them, so the
    header says, every time, that the saved file is what gets graded.
    """
    now = time.time() if now is None else now
    saved = path.stat().st_mtime
    clock = "%H:%M:%S" if time.localtime(saved)[:3] == time.localtime(now)[:3] else "%Y-%m-%d %H:%M"
    try:
        shown = path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        shown = path
    return (
        f"Grading {shown}, saved {time.strftime(clock, time.localtime(saved))}"
        f" ({_ago(now - saved)}): about {TYPICAL_GRADING}, at most {budget_s} s.\n"
        "check grades the saved file: save first (Ctrl+S) if you changed the notebook since."
    )


def _points(x: float) -> str:
    return f"{x:g}"


def format_result(result: NotebookResult) -> str:
    """A learner-facing summary: one line per test cell, the diagnosis under each failure."""
    if result.error:
        return f"{result.notebook}: could not be graded\n  {result.error}"
    lines = [f"{result.notebook}: {_points(result.score)} / {_points(result.max_score)} points"]
    if result.stopped:
        lines.append(f"  stopped early: {result.stopped}")
    lines += [f"  note: {note}" for note in result.notes]
    width = max((len(c.grade_id) for c in result.cells), default=0)
    for cell in result.cells:
        mark = "PASS" if cell.passed else "FAIL"
        score = f"{_points(cell.score)}/{_points(cell.max_score)}"
        lines.append(f"  {mark}  {cell.grade_id:<{width}}  {score}")
        if cell.message:
            lines.append(f"        {cell.message}")
    for manual in result.manual:
        lines.append(
            f"  ----  {manual['grade_id']:<{width}}  ?/{_points(manual['max_score'])}"
            "  (graded by your instructor; compare with the model answer in solutions/)"
        )
    if result.full_marks:
        lines.append("All automatic tests pass. Well done!")
    return "\n".join(lines)
