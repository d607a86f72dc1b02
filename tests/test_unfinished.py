"""An example that needs an unwritten exercise says so in one line (``tools.unfinished``)."""

import pytest

from autograder.tools import unfinished


def split_heads(x, num_heads):
    raise NotImplementedError()


class MultiHeadAttention:
    def forward(self, x):
        raise NotImplementedError()


def _raised(fn, *args) -> BaseException:
    with pytest.raises(BaseException) as info:
        fn(*args)
    return info.value


@pytest.fixture(autouse=True)
def _nothing_waiting(monkeypatch):
    monkeypatch.setattr(unfinished, "_waiting", [])
    monkeypatch.setattr(unfinished, "_unset_by", {})


def test_a_stub_names_its_exercise_and_a_methods_its_class():
    line = unfinished.describe(_raised(split_heads, None, 2))
    assert line.startswith("needs `split_heads`: it is not written yet") and "\n" not in line
    line = unfinished.describe(_raised(MultiHeadAttention().forward, None))
    assert line.startswith("needs `MultiHeadAttention`:"), line


def test_other_errors_are_not_called_unfinished():
    def raises_with_a_message():
        raise NotImplementedError("bfloat16 is not supported here")

    assert unfinished.unfinished_exercise(_raised(raises_with_a_message)) is None
    assert unfinished.describe(ValueError("bad shape")) == "ValueError: bad shape"


def test_a_name_left_undefined_points_at_the_exercise_that_stopped_its_cell():
    missing = NameError("name 'torch_mha' is not defined")
    assert unfinished.describe(missing) == (
        "`torch_mha` is not defined: run the cells above this one first."
    )
    unfinished.describe(_raised(MultiHeadAttention().forward, None))
    line = unfinished.describe(missing)
    assert "`torch_mha` is not defined" in line and "`MultiHeadAttention`" in line, line


def _answer_cell(source: str) -> tuple[BaseException, dict]:
    """Run ``source`` as IPython runs a cell (top-level code of a file outside the course)."""
    namespace: dict = {}
    with pytest.raises(NotImplementedError) as info:
        exec(compile(source, "/tmp/ipykernel_1/123.py", "exec"), namespace)
    return info.value, namespace


STUB = "answer_head_count = None  # one letter\n# YOUR CODE HERE\nraise NotImplementedError()\n"


def test_an_answer_cell_that_still_raises_is_named_by_its_variable_not_module():
    untouched, _ = _answer_cell(STUB)
    line = unfinished.describe(untouched)
    assert line.startswith("`answer_head_count`: not answered yet.") and "<module>" not in line
    assert "delete the cell's `raise NotImplementedError()` line" in line, line
    answered, _ = _answer_cell(STUB.replace("# YOUR CODE HERE", 'answer_head_count = "b"'))
    line = unfinished.describe(answered)
    assert line.startswith("`answer_head_count`: set, and the test cell below grades"), line
    assert "delete that line" in line and "\n" not in line, line
    assert unfinished.unfinished_exercise(answered) is None
    assert unfinished._waiting == []  # no "needs `<module>`" for the cells after it


def test_an_answer_cell_names_only_the_answers_still_unset():
    source = "a_mha = None\na_gqa = None\na_mha = 3\nraise NotImplementedError()\n"
    line = unfinished.describe(_answer_cell(source)[0])
    assert line.startswith("`a_gqa`: not answered yet. Set it in this cell"), line


def _run_cell(source: str, namespace: dict, number: int) -> BaseException:
    """Run ``source`` as IPython runs cell ``number``: its text in linecache, top-level code."""
    import linecache

    filename = f"/tmp/ipykernel_1/{number}.py"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    with pytest.raises(BaseException) as info:
        exec(compile(source, filename, "exec"), namespace)
    return info.value


def get_device():
    raise NotImplementedError()


def tiled_attention_backward(q, k, v):
    raise NotImplementedError()


def mha_parallel(x, mha):
    raise NotImplementedError()


def test_a_name_is_blamed_on_the_exercise_that_stopped_the_cell_that_sets_it():
    """Notebook 06 under Run All: `device = get_device()` stops at the first exercise, a later
    cell at `tiled_attention_backward`; a cell using `device` needs `get_device`, not the later."""
    namespace = {"get_device": get_device, "tiled_attention_backward": tiled_attention_backward}
    unfinished.describe(_run_cell("device = get_device()\nx = 1\n", namespace, 3))
    unfinished.describe(_run_cell("dq = tiled_attention_backward(1, 2, 3)\n", namespace, 9))
    line = unfinished.describe(_run_cell("print(device)\n", namespace, 10))
    assert "`device` is not defined" in line and "`get_device`" in line, line
    assert "tiled_attention_backward" not in line, line


def test_an_unanswered_answer_is_blamed_on_its_cell_not_on_an_earlier_exercise():
    """Notebook 05 under Run All: `mha_parallel` stops its examples, then the quiz's answer cells
    (a commented `# answer_q1 = ...` and the stub's raise) stop; `answer_q1` is not answered."""
    namespace = {"mha_parallel": mha_parallel, "check": print}
    unfinished.describe(_run_cell("out = mha_parallel(1, 2)\n", namespace, 4))
    stub = '# answer_q1 = "a", "b", "c" or "d"\n# YOUR CODE HERE\nraise NotImplementedError()\n'
    unfinished.describe(_run_cell(stub, namespace, 20))
    line = unfinished.describe(_run_cell('check("q1", answer_q1)\n', namespace, 21))
    assert "`answer_q1` is not defined: its answer cell is not answered yet" in line, line
    assert "mha_parallel" not in line, line
