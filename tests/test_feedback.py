"""The feedback preprocessor hides hidden tests and shortens tracebacks of test cells only."""

import nbformat
import pytest

from autograder.grader.feedback import HideHiddenTests


def _cell(source, nbgrader, ename="CheckFailure", evalue="softmax is taken over the wrong axis."):
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = nbgrader
    cell.outputs = [
        nbformat.v4.new_output(
            "error", ename=ename, evalue=evalue, traceback=["Traceback...", "----> 3 secret()"]
        )
    ]
    return cell


TEST = {"grade": True, "solution": False, "grade_id": "test_x", "points": 1}
ANSWER = {"grade": False, "solution": True, "grade_id": "x"}


def test_hidden_region_removed_and_traceback_shortened():
    source = (
        '"""Checks x."""\ncheck_x(x)\n### BEGIN HIDDEN TESTS\nsecret_check(x, seed=7)\n'
        "### END HIDDEN TESTS\nafter_hidden()\n"
    )
    cell, _ = HideHiddenTests().preprocess_cell(_cell(source, TEST), {}, 0)
    assert "secret_check" not in cell.source and "HIDDEN TESTS" not in cell.source
    assert "check_x(x)" in cell.source and "after_hidden()" in cell.source
    assert "hidden tests run here" in cell.source
    assert cell.outputs[0].traceback == ["CheckFailure: softmax is taken over the wrong axis."]


def test_learner_cells_keep_their_traceback():
    cell, _ = HideHiddenTests().preprocess_cell(_cell("x = 1 / 0", ANSWER), {}, 0)
    assert cell.source == "x = 1 / 0"
    assert len(cell.outputs[0].traceback) == 2


def _document(page: str) -> list:
    """A page as the browser's document: every tag with its attributes (in any order), and
    every piece of text."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page, features="html.parser")
    tags = [
        (t.name, sorted((k, " ".join(v) if isinstance(v, list) else v) for k, v in t.attrs.items()))
        for t in soup.find_all(True)
    ]
    return [tags, [str(s) for s in soup.find_all(string=True)]]


def _feedback_template():
    """nbgrader's own feedback template, configured as ``GenerateFeedback`` configures it."""
    import os

    import nbgrader
    from traitlets.config import Config

    root = os.path.join(os.path.dirname(nbgrader.__file__), "server_extensions", "formgrader")
    c = Config()
    c.HTMLExporter.template_name = "feedback"
    c.HTMLExporter.extra_template_basedirs = [os.path.join(root, "templates")]
    css = os.path.join(root, "static", "node_modules", "bootstrap", "dist", "css")
    c.HTMLExporter.extra_template_paths = [css]
    return c


@pytest.mark.parametrize("template", ["lab", "nbgrader feedback"])
def test_feedback_page_is_the_document_nbconverts_exporter_makes(template):
    """The feedback exporter adds nbconvert's alt texts and tab stops by pattern, without parsing
    the page: the document must be the one ``HTMLExporter`` makes, for a release notebook with
    a plot, a table, printed text, an error and images with and without alt text, in
    nbconvert's lab template (tab stops) and in nbgrader's feedback template (what learners get)."""
    from nbconvert.exporters import HTMLExporter
    from traitlets.config import Config

    from autograder import paths
    from autograder.grader.feedback import NO_ALT_TEXT, FeedbackExporter

    nb = nbformat.read(paths.release_notebook(paths.notebook_ids()[0]), as_version=4)
    png = (  # one pixel
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    )
    code = next(c for c in nb.cells if c.cell_type == "code")
    code.outputs = [
        nbformat.v4.new_output("display_data", data={"image/png": png, "text/plain": "<Figure>"}),
        nbformat.v4.new_output("stream", name="stdout", text="a <b>printed</b> line\n"),
        nbformat.v4.new_output(
            "execute_result",
            data={"text/html": "<table><tr><td>1</td></tr></table>", "text/plain": "1"},
            execution_count=1,
        ),
        nbformat.v4.new_output("error", ename="CheckFailure", evalue="wrong", traceback=["x"]),
    ]
    nb.cells.append(
        nbformat.v4.new_markdown_cell(
            '<img src="a.png"> <img src="b.png" alt="b"> ![c](c.png) <img src="alt=.png">'
            ' <IMG SRC="d.png"> <img data-alt="e" src="e.png"> <img src="f.png" alt>'
            '\n\n<div class="note">x</div>'
        )
    )
    for cell in nb.cells:  # as GetGrades leaves them
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") or meta.get("task"):
            meta["score"] = 0
    config = Config() if template == "lab" else _feedback_template()
    graded = {"notebook": "nb", "score": 3, "max_score": 10, "late_penalty": 0}  # GetGrades'
    ours, _ = FeedbackExporter(config=config).from_notebook_node(nb, {"nbgrader": graded})
    theirs, _ = HTMLExporter(config=config).from_notebook_node(nb, {"nbgrader": dict(graded)})
    assert _document(ours) == _document(theirs)
    assert ours.count(f'alt="{NO_ALT_TEXT}"') == 5  # the plot, a, alt=, d and e
    if template == "lab":
        assert ours.count('tabindex="0"') >= 5
    else:
        assert "prompt input_prompt" in ours  # nbgrader's template, not the lab one
