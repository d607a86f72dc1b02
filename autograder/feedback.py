"""A feedback preprocessor that keeps hidden tests hidden (nbgrader issue #917).

nbgrader's feedback HTML shows each test cell as it was graded: hidden tests included, and with a
full traceback that quotes the failing source line. This preprocessor removes the hidden region
from test cells and shortens each error to ``ExceptionName: message`` — the checks' messages are
written to be safe to show.
"""

import re

from nbgrader.preprocessors import NbGraderPreprocessor

from autograder import nbcell

HIDDEN_REGION = re.compile(
    r"^[ \t]*### BEGIN HIDDEN TESTS.*?^[ \t]*### END HIDDEN TESTS[^\n]*\n?",
    re.DOTALL | re.MULTILINE,
)
HIDDEN_NOTE = "# (hidden tests run here; their code is not shown)\n"


class HideHiddenTests(NbGraderPreprocessor):
    """Strip hidden tests from test cells and shorten their tracebacks."""

    def preprocess_cell(self, cell, resources, cell_index):
        if nbcell.is_test(cell):
            cell.source = HIDDEN_REGION.sub(HIDDEN_NOTE, cell.source)
            for output in cell.get("outputs", []):
                if output.output_type == "error":
                    output.traceback = [f"{output.ename}: {output.evalue}"]
        return cell, resources


class ValidationSummary:
    """nbclient cell hooks for nbgrader's Validate (JupyterLab's button, ``nbgrader validate``).

    Validate lists each failing test cell with its error output's traceback. These hooks make that
    the one-line diagnosis ``check`` prints (a failing check's own rendering is kept: its sentence,
    after the learner's frames when learner code raised) and put the score above the first one.
    nbconvert runs no notebook-level hooks, so the score is kept up to date cell by cell.
    """

    def __init__(self):
        self.points: dict[int, float] = {}  # id(test cell) -> its points
        self.failed: dict[int, float] = {}
        self.first = None  # the first failing cell's error output, and its own traceback
        self.first_traceback: list[str] = []

    def cell_started(self, cell, cell_index, **_) -> None:
        if cell_index == 0:
            self.__init__()
        if nbcell.is_test(cell):
            self.points[id(cell)] = nbcell.points(cell)
        self._headline()

    def cell_failed(self, cell, cell_index, **_) -> None:
        from autograder.grading import explain_error

        errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
        if not nbcell.is_test(cell) or not errors:
            return
        for output in errors:
            if output.ename != "CheckFailure":
                output.traceback = [explain_error(output.ename, str(output.evalue))]
        self.points.setdefault(id(cell), nbcell.points(cell))
        self.failed[id(cell)] = self.points[id(cell)]
        if self.first is None:
            self.first, self.first_traceback = errors[-1], list(errors[-1].traceback)
        self._headline()

    def _headline(self) -> None:
        if self.first is None:
            return
        total, lost = sum(self.points.values()), sum(self.failed.values())
        n = len(self.failed)
        cells = "1 test cell fails" if n == 1 else f"{n} test cells fail"
        headline = f"Score: {total - lost:g} / {total:g} points; {cells}, each shown here."
        self.first.traceback = [headline, "", *self.first_traceback]


_SUMMARY = ValidationSummary()  # one Validate runs at a time: the handler blocks the server


def _cell_started(**kwargs) -> None:
    _SUMMARY.cell_started(**kwargs)


def _cell_failed(**kwargs) -> None:
    _SUMMARY.cell_failed(**kwargs)


def validation_hooks(c) -> None:
    """Install :class:`ValidationSummary` on the Execute step of nbgrader's Validator only.

    (Plain functions: traitlets deep-copies configured values, bound methods and all.)
    """
    c.Validator.Execute.on_cell_start = _cell_started
    c.Validator.Execute.on_cell_error = _cell_failed
