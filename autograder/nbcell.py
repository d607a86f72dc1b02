"""nbgrader's cell metadata in one place: is a cell a test, an answer, its grade id, its points.

Every function takes a notebook cell as nbformat reads it (a ``NotebookNode``) or as plain JSON (a
``dict``), and never fails on a cell without metadata: an editor may have stripped it.
"""


def meta(cell) -> dict:
    """The cell's ``nbgrader`` metadata, ``{}`` when it has none."""
    return (cell.get("metadata") or {}).get("nbgrader") or {}


def grade_id(cell) -> str | None:
    """The cell's nbgrader name (``grade_id``), or None."""
    return meta(cell).get("grade_id")


def is_answer(cell) -> bool:
    """An answer cell (nbgrader ``solution``): code or a written answer."""
    return bool(meta(cell).get("solution"))


def is_graded(cell) -> bool:
    """A cell that earns points: a test, or a written answer graded by a person."""
    return bool(meta(cell).get("grade"))


def is_test(cell) -> bool:
    """An autograded test cell: a graded code cell that is not an answer."""
    return cell.get("cell_type") == "code" and is_graded(cell) and not is_answer(cell)


def is_locked(cell) -> bool:
    """A cell the learner may not edit (nbgrader ``locked``)."""
    return bool(meta(cell).get("locked"))


SELF_CHECK_PREFIX = "selfcheck_"


def is_self_check(cell) -> bool:
    """A locked check the learner runs for feedback only: not graded, no points.

    It is an ordinary locked code cell whose grade id starts with ``selfcheck_`` (notebook 06's
    optional Triton exercise has two).
    """
    return (
        cell.get("cell_type") == "code"
        and is_locked(cell)
        and not is_graded(cell)
        and (grade_id(cell) or "").startswith(SELF_CHECK_PREFIX)
    )


def points(cell) -> float:
    """The cell's points (0 when it has none)."""
    return float(meta(cell).get("points", 0))
