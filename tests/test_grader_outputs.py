"""What a graded notebook keeps of its kernel's output (``grader.execute``, ``grader.feedback``):
each test cell its own result, caps on every output, feedback without hidden tests."""

import json

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from notebook_cells import graded_cell

from autograder.grader.execute import GradingExecute
from autograder.grader.feedback import ClassroomFeedback

# ----------------------------------------------------------------------------- kernel outputs


def test_test_cells_keep_only_their_own_result():
    failing = graded_cell("check_f(f)", "test_f", grade=True, locked=True, points=2)
    failing.outputs = [
        new_output("execute_result", data={"text/plain": "100"}, execution_count=1),
        new_output("error", ename="AssertionError", evalue="wrong", traceback=[]),
    ]
    GradingExecute._keep_own_result(failing)
    assert [o.output_type for o in failing.outputs] == ["error"]
    partial = graded_cell("0.5", "test_g", grade=True, locked=True, points=2)
    partial.outputs = [
        new_output("execute_result", data={"text/plain": "100"}, execution_count=1),
        new_output("execute_result", data={"text/plain": "0.5"}, execution_count=1),
    ]
    GradingExecute._keep_own_result(partial)
    assert [o.data["text/plain"] for o in partial.outputs] == ["0.5"]


MIME = "application/vnd.mha-replay+json"  # what the grader's recordings were once published as
OUTPUT_FLOOD = [
    'raise ValueError("e" * 5_000_000)',
    "try:\n    1 / 0\nexcept ZeroDivisionError:\n    for _ in range(300):\n"
    "        get_ipython().showtraceback()\nraise KeyError('the last one')",
    'print("y" * 30_000)',
    *['print("z" * 15_000)'] * 5,
    "h = display('a', display_id=True)\nh.update('b' * 50_000)",
    "0.5",
    "from IPython.display import publish_display_data\n"
    f"publish_display_data({{{MIME!r}: 'r' * 100_000}})",
]


@pytest.mark.slow
def test_output_caps_hold_for_every_output_type_and_the_whole_notebook(tmp_path):
    """Errors are capped too (one notebook came out at 201 MB): each keeps its ename and a short
    value, a cell keeps one shortened error, the latest; a notebook keeps at most its cap in all;
    a learner cell publishing what looks like a grader's record is capped like any other."""
    from autograder.grader.execute import RunRecords
    from autograder.grader.nbgrader_run import kernel_stderr_silenced

    nb = new_notebook(cells=[new_code_cell(source) for source in OUTPUT_FLOOD])
    records = RunRecords()
    from traitlets.config import Config

    config = Config()
    config.SandboxKernelManager.runtime_base = str(tmp_path)  # each kernel's runtime folder
    ex = GradingExecute(
        output_limit=20_000,
        notebook_output_limit=60_000,
        verify=False,
        records=records,
        config=config,
    )
    with kernel_stderr_silenced():
        nb, _ = ex.preprocess(nb, {"nbgrader": {"notebook": "a"}})
    outputs = [c.outputs for c in nb.cells]
    notes = [
        [o.text for o in out if o.output_type == "stream" and "[output cut" in o.text]
        for out in outputs
    ]
    error = outputs[0][-1]
    assert (
        error.ename == "ValueError"
        and len(error.evalue) < 1000
        and "characters cut" in error.evalue
    )
    errors = [o for o in outputs[1] if o.output_type == "error"]
    assert errors[-1].ename == "KeyError" and len(errors) < 40
    assert "this cell's output passed 20000 bytes" in notes[2][0] and len(outputs[2]) == 1
    assert [bool(n) for n in notes[3:8]] == [False, False, True, True, True]
    assert "in all" in notes[7][0]
    assert outputs[8][0].data["text/plain"].startswith("[display update cut")
    assert outputs[9][-1].data["text/plain"] == "0.5"
    assert len(nbformat.writes(nb)) < 100_000
    assert not any(MIME in o.get("data", {}) for o in outputs[10])
    assert records["a"]["truncated"] == 7


def test_feedback_drops_outputs_and_redacts_hidden_tests():
    hidden = "check_f(f, seed=1, thorough=True)"
    test = graded_cell(
        f"check_f(f)\n### BEGIN HIDDEN TESTS\n{hidden}\n### END HIDDEN TESTS\n",
        "test_f",
        grade=True,
        locked=True,
        points=1,
    )
    test.outputs = [
        new_output("stream", name="stdout", text=f"spy: {hidden}"),
        new_output(
            "error",
            ename="ValueError",
            evalue=f"leak {hidden} " + "x" * 900,
            traceback=["long", "traceback"],
        ),
    ]
    own = new_code_cell("print(1)")
    own.outputs = [new_output("stream", name="stdout", text=hidden)]
    nb = new_notebook(cells=[new_markdown_cell("hi"), own, test])
    nb, _ = ClassroomFeedback().preprocess(nb, {})
    text = json.dumps(nb)
    assert hidden not in text and "BEGIN HIDDEN" not in text
    assert own.outputs == [] and len(test.outputs) == 1
    assert test.outputs[0].evalue.startswith("leak [hidden test]")
    assert len(test.outputs[0].evalue) <= 300
