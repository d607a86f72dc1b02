"""A feedback preprocessor that keeps hidden tests hidden (nbgrader issue #917).

nbgrader's feedback HTML shows each test cell as it was graded: hidden tests included, and with a
full traceback that quotes the failing source line. This preprocessor removes the hidden region
from test cells and shortens each error to ``ExceptionName: message`` — the checks' messages are
written to be safe to show.
"""

import re

from nbgrader.preprocessors import NbGraderPreprocessor

HIDDEN_REGION = re.compile(
    r"^[ \t]*### BEGIN HIDDEN TESTS.*?^[ \t]*### END HIDDEN TESTS[^\n]*\n?",
    re.DOTALL | re.MULTILINE,
)
HIDDEN_NOTE = "# (hidden tests run here; their code is not shown)\n"


def is_test_cell(cell) -> bool:
    meta = cell.metadata.get("nbgrader", {})
    return cell.cell_type == "code" and meta.get("grade", False) and not meta.get("solution", False)


class HideHiddenTests(NbGraderPreprocessor):
    """Strip hidden tests from test cells and shorten their tracebacks."""

    def preprocess_cell(self, cell, resources, cell_index):
        if is_test_cell(cell):
            cell.source = HIDDEN_REGION.sub(HIDDEN_NOTE, cell.source)
            for output in cell.get("outputs", []):
                if output.output_type == "error":
                    output.traceback = [f"{output.ename}: {output.evalue}"]
        return cell, resources
