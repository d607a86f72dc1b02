"""Feedback for a class: scores and one-line messages, nothing the kernel printed.

:class:`autograder.feedback.HideHiddenTests` removes hidden tests from test cells and shortens
tracebacks. In a class, learner code can also *observe* the hidden tests while they run (an
IPython hook sees every cell's source) and print them, from a later cell or inside the failing
test's own error message. So this preprocessor also drops every output except the error line of
a failed test cell, caps that line, and blanks any line of hidden-test source that appears in
it. What remains learner-controlled is one capped line per failed test.
"""

from __future__ import annotations

import re

from autograder import nbcell
from autograder.feedback import HIDDEN_REGION, HideHiddenTests

MESSAGE_CHARS = 300
REDACTED = "[hidden test]"


def hidden_lines(nb) -> list[str]:
    """Lines of hidden-test source worth redacting (long enough to be specific)."""
    lines = set()
    for cell in nb.cells:
        if not nbcell.is_test(cell):
            continue
        for block in HIDDEN_REGION.findall(cell.source):
            for line in block.splitlines()[1:-1]:
                if len(line.strip()) >= 8:
                    lines.add(line.strip())
    return sorted(lines, key=len, reverse=True)


def redact(text: str, lines: list[str]) -> str:
    for line in lines:
        text = text.replace(line, REDACTED)
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"


class ClassroomFeedback(HideHiddenTests):
    """Hidden tests removed, outputs dropped, failed tests' one-line messages kept (redacted)."""

    def preprocess(self, nb, resources):
        self._hidden = hidden_lines(nb)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, cell_index):
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if cell.cell_type != "code":
            return cell, resources
        kept = []
        if nbcell.is_test(cell):
            errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
            for output in errors[-1:]:
                output.ename = redact(str(output.ename), self._hidden)[:80]
                output.evalue = redact(str(output.evalue).strip().split("\n")[0], self._hidden)
                output.traceback = [f"{output.ename}: {output.evalue}"]
                kept.append(output)
        cell.outputs = kept
        return cell, resources


def class_config(root):
    """nbgrader settings of a graded class folder: the shared ones, this feedback."""
    from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
    from nbgrader.preprocessors import GetGrades

    from autograder.nbgrader_settings import scratch_config

    c = scratch_config(root)
    c.GenerateFeedback.preprocessors = [GetGrades, ClassroomFeedback, CSSHTMLHeaderPreprocessor]
    return c
