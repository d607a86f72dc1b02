"""What nbgrader gave one notebook, read one way for ``check`` and ``grade`` alike.

:func:`read_notebook` turns the gradebook's grades and the autograded notebook into a
:class:`NotebookResult`: the automatically graded cells in notebook order, each with its one-line
diagnosis (:func:`autograder.grader.messages.cell_message`), and the cells a person grades.
``grade`` then re-checks the passed cells outside the kernel (``CellResult.check``); ``check``
does not.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path

import nbformat

from autograder import nbcell
from autograder.grader.messages import NOT_PASSED, cell_message, cell_unfinished


class CheckStatus(str, Enum):
    """What ``grade``'s re-check outside the kernel made of a cell that passed in the kernel.

    A ``str`` so that result files, the gradebook's rows and tests read the plain word.
    """

    VERIFIED = "verified"  # the grader's own run of the checks on the learner's code agreed
    REFUTED = "refuted"  # it disagreed: the points are withdrawn
    UNVERIFIED = "unverified"  # it could not tell (the reason goes with it)
    WITHHELD = "withheld"  # a person decides: the points wait in the formgrader

    def __str__(self) -> str:
        return self.value


@dataclass
class CellResult:
    grade_id: str
    score: float
    max_score: float
    passed: bool
    message: str
    check: CheckStatus | None = None  # grade's re-check; None under ``check``
    unfinished: bool = False  # failed only because its exercise is not written yet


@dataclass
class NotebookResult:
    notebook: str
    notebook_id: str
    score: float = 0.0
    max_score: float = 0.0
    cells: list[CellResult] = field(default_factory=list)
    manual: list[dict] = field(default_factory=list)
    error: str | None = None
    stopped: str | None = None  # why the notebook stopped early (the cells after it scored 0)
    notes: list[str] = field(default_factory=list)  # what was repaired or cut before grading

    @property
    def full_marks(self) -> bool:
        return self.error is None and bool(self.cells) and all(c.passed for c in self.cells)

    def total(self) -> None:
        self.score = sum(c.score for c in self.cells)
        self.max_score = sum(c.max_score for c in self.cells)

    @classmethod
    def from_summary(cls, notebook_id: str, summary: dict) -> NotebookResult:
        """A notebook's part of ``grade``'s result file (``grader.worker.notebook_summary``),
        or a result's own :meth:`to_json`, back as a result."""
        result = cls(summary["notebook"], notebook_id, stopped=summary.get("stopped"))
        result.cells = [CellResult(**cell) for cell in summary["cells"]]
        result.manual = list(summary.get("manual", []))
        result.notes = list(summary.get("notes", []))
        result.total()
        return result

    def to_json(self) -> dict:
        """``check --json``'s object (the contract's keys; optional ones only when set)."""
        data = asdict(self)
        data.pop("notebook_id")
        for cell in data["cells"]:
            cell.pop("unfinished")  # the report's grouping, not the contract's
            if cell["check"] is None:
                cell.pop("check")
        for optional in ("error", "stopped", "notes"):
            if not data[optional]:
                data.pop(optional)
        return data


@dataclass
class GradedNotebook:
    """A notebook's result with what produced it: the autograded notebook, its grade rows and
    test cells by grade id (``grade`` changes them when it withdraws points)."""

    result: NotebookResult
    nb: nbformat.NotebookNode
    grades: dict  # grade id -> nbgrader Grade
    tests: dict  # grade id -> test cell


def graded_by_a_person(grade) -> bool:
    return grade.cell_type == "markdown" or grade.auto_score is None


def read_notebook(gb, autograded: Path, notebook_id: str, assignment: str, student: str):
    """The :class:`GradedNotebook` of one autograded notebook of ``student``'s ``assignment``."""
    nb = nbformat.read(autograded, as_version=4)
    tests = {nbcell.grade_id(c): c for c in nb.cells if nbcell.is_test(c)}
    cells = {nbcell.grade_id(c): c for c in nb.cells if nbcell.grade_id(c)}
    grades = gb.find_submission_notebook(notebook_id, assignment, student).grades
    order = {nbcell.grade_id(c): i for i, c in enumerate(nb.cells)}
    result = NotebookResult(notebook=str(autograded), notebook_id=notebook_id)
    for grade in sorted(grades, key=lambda g: order.get(g.name, len(order))):
        if graded_by_a_person(grade):
            result.manual.append({"grade_id": grade.name, "max_score": float(grade.max_score)})
            continue
        score, max_score = float(grade.auto_score), float(grade.max_score)
        passed = score >= max_score
        cell = cells.get(grade.name)
        message = "" if passed else (cell_message(cell) if cell is not None else NOT_PASSED)
        cell_result = CellResult(grade.name, score, max_score, passed, message)
        cell_result.unfinished = not passed and cell_unfinished(cell)
        result.cells.append(cell_result)
    result.total()
    return GradedNotebook(result, nb, {g.name: g for g in grades}, tests)
