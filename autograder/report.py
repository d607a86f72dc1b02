"""Human-readable grading reports: ``check``'s header, its lines, and its closing summary.

``check`` ends every run with one line: the score, the first test to fix and the section of the
notebook it tests, so the line a learner needs is the last one in the terminal. Test cells that
only say their exercise is not written yet (``CellResult.unfinished``, from the error's name)
share one line, so an unfinished notebook does not scroll its score off the top.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from autograder import nbcell, paths

if TYPE_CHECKING:  # grading imports nbgrader and torch: seconds, and the header comes at once
    from autograder.grader.one_notebook import NotebookResult

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


def _headings(text: str) -> list[tuple[int, str]]:
    """(level, title) of each ``##`` and ``###`` heading of a Markdown cell, in order."""
    return [(len(m[1]), m[2]) for m in re.finditer(r"^(#{2,3}) +(.+?) *$", text, re.MULTILINE)]


def sections(path: Path) -> dict[str, tuple[str, str]]:
    """Each test cell's grade id -> (the section it tests, its number alone), from the headings
    above it: ``("§1.1 · Head size and head count", "1.1")``, ``("§2, Exercise 1 · `softmax`",
    "2")``. Empty when the file cannot be read as JSON."""
    try:
        cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    found, part, sub = {}, "", ""
    for cell in cells:
        if cell.get("cell_type") == "markdown":
            for level, title in _headings("".join(cell.get("source", ""))):
                part, sub = (title, "") if level == 2 else (part, title)
        if nbcell.is_test(cell) and nbcell.grade_id(cell):
            number = part.split(" ", 1)[0] if part[:1].isdigit() else ""
            sub_number = sub.split(" ", 1)[0] if sub[:1].isdigit() else ""
            if sub_number:
                where = f"§{sub}"
            elif sub and number:
                where = f"§{number}, {sub}"
            else:
                where = f"§{part}" if part else "the notebook"
            found[nbcell.grade_id(cell)] = (where, sub_number or number or part)
    return found


def _manual_line(manual: dict, width: int) -> str:
    return (
        f"  ----  {manual['grade_id']:<{width}}  ?/{_points(manual['max_score'])}"
        f"  (graded by your instructor; compare with the model answer in "
        f"{paths.MODEL_ANSWERS.as_posix()}/ of your file browser)"
    )


def summary_line(result: NotebookResult, where: dict[str, tuple[str, str]]) -> str:
    """The closing line: the score, and the first test to fix with its section."""
    score = f"Score: {_points(result.score)} / {_points(result.max_score)} points"
    if result.full_marks:
        return f"{score}. All automatic tests pass. Well done!"
    failing = [c for c in result.cells if not c.passed]
    if not failing:
        return f"{score}."
    first = failing[0]
    section = where.get(first.grade_id, ("", ""))[0]
    return f"{score}. First to fix: {first.grade_id}" + (f", in {section}." if section else ".")


def format_result(result: NotebookResult) -> str:
    """A learner-facing summary: one line per test cell, the diagnosis under each failure, the
    cells whose exercise is not written yet on one line, and the closing :func:`summary_line`."""
    if result.error:
        return f"{result.notebook}: could not be graded\n  {result.error}"
    where = sections(Path(result.notebook))
    lines = [f"{result.notebook}: {_points(result.score)} / {_points(result.max_score)} points"]
    if result.stopped:
        lines.append(f"  stopped early: {result.stopped}")
    lines += [f"  note: {note}" for note in result.notes]
    waiting = [c for c in result.cells if not c.passed and c.unfinished]
    width = max((len(c.grade_id) for c in result.cells if c not in waiting), default=0)
    width = max([width, *(len(m["grade_id"]) for m in result.manual)])
    for cell in result.cells:
        if cell in waiting:
            if cell is waiting[0]:
                lines.append(_waiting_line(waiting, where))
            continue
        mark = "PASS" if cell.passed else "FAIL"
        score = f"{_points(cell.score)}/{_points(cell.max_score)}"
        lines.append(f"  {mark}  {cell.grade_id:<{width}}  {score}")
        if cell.message:
            lines.append(f"        {cell.message}")
    lines += [_manual_line(manual, width) for manual in result.manual]
    lines.append(summary_line(result, where))
    return "\n".join(lines)


def _waiting_line(waiting: list, where: dict[str, tuple[str, str]]) -> str:
    """One line for the test cells whose exercise is not written yet."""
    numbers = [
        f"§{n}" for n in dict.fromkeys(where[c.grade_id][1] for c in waiting if c.grade_id in where)
    ]
    span = ", ".join(numbers) if len(numbers) <= 4 else f"{numbers[0]} to {numbers[-1]}"
    span = f" in {span}" if numbers else ""
    points = _points(sum(c.max_score for c in waiting))
    cells = "1 test cell" if len(waiting) == 1 else f"{len(waiting)} test cells"
    return (
        f"  TODO  {cells} ({points} points){span}: exercise not written yet; each test cell "
        "says what it needs."
    )
