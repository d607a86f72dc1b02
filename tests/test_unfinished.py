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
