"""Notebook 04's rotary-embedding checks pass correct code, name each classic mistake, and give
the same verdict when the grader verifies them on a kernel's record (``grader.verify``)."""

from __future__ import annotations

import re

import pytest
import torch
from mistakes import HIDDEN, outcome
from mistakes import rope as impls

from autograder.checks import CheckFailure
from autograder.checks import nb04_rope as checks
from autograder.grader.verify import cells

# Correct implementations, catalogued mistakes and stubs: tests/test_mistakes.py.
CORRECT = [(c.check, c.name, c.impl) for c in impls.CORRECT]
CORRECT_IDS = [f"{c.check.__name__}-{c.name}" for c in impls.CORRECT]

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_interleaved_convention_is_relative_but_not_the_graded_layout():
    """Interleaved pairs are RoPE too: the property holds, the values name the convention."""
    checks.check_apply_rope_relative(impls.rope_interleaved, thorough=True)
    with pytest.raises(CheckFailure, match="interleaved layout of the RoFormer paper"):
        checks.check_apply_rope_values(impls.rope_interleaved)


class GQAStub:
    def __init__(self, d_model, num_heads, num_kv_heads, bias=False):
        raise NotImplementedError()


class RotaryOnUnfinishedGQA(GQAStub):
    pass


@pytest.mark.parametrize("check", impls.ROTARY_CHECKS, ids=lambda c: c.__name__)
def test_an_unfinished_gqa_is_named(check):
    with pytest.raises(CheckFailure, match=r"finish exercise 3, then run this test cell again"):
        check(RotaryOnUnfinishedGQA)


def test_the_oracle_pairs_halves_and_keeps_lengths():
    """The oracle against a hand-made case: hs = 4, pair 0 turns by m rad, pair 1 by m/100 rad."""
    x = torch.tensor([[1.0, 0.0, 0.0, 1.0]], dtype=torch.float64)  # (T=1, hs=4): x0 = 1, x3 = 1
    m = 3
    out = checks.rotate(x, torch.tensor([m]))  # (1, 4)
    theta1 = 10000.0 ** (-2 / 4)
    expected = torch.tensor(
        [[torch.cos(torch.tensor(m * 1.0)), -torch.sin(torch.tensor(m * theta1)),
          torch.sin(torch.tensor(m * 1.0)), torch.cos(torch.tensor(m * theta1))]],
        dtype=torch.float64,
    )  # fmt: skip
    assert torch.allclose(out, expected)


# ------------------------------------------------------------- verified by the grader


def _verdicts(check, impl) -> tuple[list, cells.Verdict]:
    result = outcome(check, impl, HIDDEN)  # the run tests/test_mistakes.py makes, if it does
    direct = ["failed" if result.failure else "passed", result.message]
    source = f"{check.__name__}(fn, seed=1, thorough=True)"
    return direct, cells.verify_cell(source, cells.InProcessKernel({"fn": impl}))


@pytest.mark.parametrize(("check", "name", "impl"), CORRECT, ids=CORRECT_IDS)
def test_correct_implementations_verify(check, name, impl):
    direct, verdict = _verdicts(check, impl)
    assert direct == ["passed", ""], direct
    assert verdict.status == "verified", verdict


@pytest.mark.parametrize("mistake", impls.MISTAKES, ids=str)
def test_mistakes_are_refuted_with_the_checks_own_diagnosis(mistake):
    direct, verdict = _verdicts(mistake.check, mistake.impl)
    assert direct[0] == "failed", direct
    assert verdict.status == "refuted", verdict
    if "in place" in direct[1]:  # the rerun works on copies: a write is the grader's finding
        assert "changed its input in place" in verdict.message, verdict
    else:
        assert verdict.message == direct[1]


# ---------------------------------------------------------------- half precision, far positions


def test_bf16_rounds_neighbouring_positions_together():
    """Why angles in x.dtype fail: bfloat16 keeps 8 significant bits."""
    assert torch.tensor([1000.0, 1001.0, 1002.0]).to(torch.bfloat16).unique().tolist() == [1000.0]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_angles_in_the_inputs_dtype_fail_at_positions_in_the_thousands(dtype):
    """The course's first apply_rope (θ and angles in x.dtype) fails on bf16 and on fp16 alone:
    the check feeds both at positions ≥ 4,000; float32 angles pass on the same inputs."""

    def old_for_dtype(x, positions, base=10000.0):
        if x.dtype == dtype:
            return impls.rope_angles_in_x_dtype(x, positions, base)
        return impls.rope_hf_llama(x, positions, base)

    name = str(dtype).removeprefix("torch.")
    with pytest.raises(CheckFailure, match=rf"on {name} input at positions (\d+) … \d+") as info:
        checks.check_apply_rope_values(old_for_dtype)
    first = int(re.search(r"positions (\d+)", str(info.value)).group(1))
    assert first >= 4000
    checks.check_apply_rope_values(impls.rope_hf_llama, thorough=True)


@pytest.mark.parametrize("shape", [(6, 8), (3, 6, 8)], ids=str)
def test_four_dim_cos_sin_tables_fail_on_fewer_leading_dims(shape):
    """Issue 31: cos/sin as (1, 1, T, hs) turn a (T, hs) input into (1, 1, T, hs)."""
    x, positions = torch.randn(shape), torch.arange(shape[-2])
    assert impls.rope_four_dim_tables(x, positions).dim() == 4
    with pytest.raises(CheckFailure, match="add leading dimensions"):
        checks.check_apply_rope_values(impls.rope_four_dim_tables)
