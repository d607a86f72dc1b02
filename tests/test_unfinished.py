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
