"""Human-readable grading reports."""

from autograder.grading import NotebookResult


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
