"""What a learner sees in JupyterLab: a failing check's sentence without the grading package's
frames, and nbgrader's Validate leading with the score and one diagnosis per failing test cell."""

import re

import nbformat
import pytest
from hostile import SDPA, SOFTMAX, WRONG_SOFTMAX, filled, minimal, set_answer
from nbconvert.filters import ansi2html

from autograder import paths
from autograder.build import instructor_notebook_text
from autograder.grader.feedback import ValidationSummary

NB = "01_attention_from_scratch"
RAISES = """def _helper(q):
    raise ValueError("my own mistake")


def scaled_dot_product_attention(q, k, v, mask=None):
    return _helper(q)
"""


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _test_cell(grade_id: str, points: float, outputs: list) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(f"check_{grade_id}()")
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": grade_id}
    cell.metadata["nbgrader"]["points"] = points
    cell.outputs = outputs
    return cell


def test_validate_summary_leads_with_the_score_and_explains_each_failure():
    name_error = nbformat.v4.new_output(
        "error", ename="NameError", evalue="name 'softmax' is not defined", traceback=["long"]
    )
    check = nbformat.v4.new_output(
        "error", ename="CheckFailure", evalue="wrong.", traceback=["CheckFailure: wrong."]
    )
    nb = nbformat.v4.new_notebook(
        cells=[
            _test_cell("a", 2, []),
            _test_cell("b", 1, [name_error]),
            _test_cell("c", 3, [check]),
        ]
    )
    summary = ValidationSummary()
    for index, cell in enumerate(nb.cells):  # as nbclient calls the hooks
        summary.cell_started(cell=cell, cell_index=index)
        if cell.outputs:
            summary.cell_failed(cell=cell, cell_index=index, execute_reply={})
    first, second = nb.cells[1].outputs[0].traceback, nb.cells[2].outputs[0].traceback
    score, diagnosis = _plain("\n".join(first)).split("\n", 1)
    assert score == "Score: 2 / 6 points; 2 test cells fail, each shown below."
    assert diagnosis.startswith("`softmax` is not defined: run the cell that defines it")
    # the score line alone carries the colour custom.css lifts to the top of the dialog
    html = ansi2html("\n".join(first))
    assert re.search(r'<span style="color: rgb\(25,100,170\)">Score: [^<]*\n</span>`softmax`', html)
    assert second == ["CheckFailure: wrong."]
    assert nb.cells[1].outputs[0].ename == "NameError"  # nbgrader still sees the cell fail


@pytest.mark.slow
def test_validate_and_the_notebook_show_the_diagnosis_without_the_checks_frames(tmp_path):
    """Through nbgrader's Validator with the course's settings, as JupyterLab's button runs it."""
    from nbgrader.validator import Validator

    from autograder.grader.nbgrader_run import put_environment_on_path
    from autograder.grader.nbgrader_settings import course_config

    if NB not in paths.notebook_ids():
        pytest.skip(f"{NB} is not in solutions/")
    solution = nbformat.reads(instructor_notebook_text(NB), as_version=4)
    release = nbformat.read(paths.release_notebook(NB), as_version=4)
    nb = set_answer(
        set_answer(minimal(filled(release, solution)), SOFTMAX, WRONG_SOFTMAX), SDPA, RAISES
    )
    path = tmp_path / f"{NB}.ipynb"
    nbformat.write(nb, path)
    put_environment_on_path()
    failed = Validator(config=course_config(paths.REPO_ROOT)).validate(str(path))["failed"]
    errors = [_plain(f["raw_error"]) for f in failed]
    # All six: "no built-in softmax" also needs right values, so zeros do not earn it.
    assert len(errors) == 6, errors
    assert errors[0].startswith("Score: 0 / 10 points; 6 test cells fail, each shown below.")
    errors[0] = errors[0].split("\n", 1)[1]
    for error in errors:  # the diagnosis first, then (when learner code raised) its own lines
        assert "autograder/checks" not in error and "_core.py" not in error, error
        assert error.strip().splitlines()[0].startswith("CheckFailure: "), error
    softmax_errors = [e for e in errors if "`softmax(" in e]
    assert softmax_errors and all(len(e.strip().splitlines()) <= 3 for e in softmax_errors)
    learner = [e for e in errors if "my own mistake" in e]
    assert learner and all('raise ValueError("my own mistake")' in e for e in learner), learner
    assert all("return _helper(q)" in e for e in learner), learner
