"""Notebook 04's rotary-embedding checks pass correct code, name each classic mistake, and give
the same verdict when the grader verifies them on a kernel's record (``checks.replay``)."""

from __future__ import annotations

import pytest
import torch
from mistakes import rope as impls

from autograder.checks import CheckFailure
from autograder.checks import nb04_rope as checks
from autograder.checks.replay import cells

# Correct implementations, catalogued mistakes and stubs: tests/test_mistakes.py.
CORRECT = [(c.check, c.name, c.impl) for c in impls.CORRECT]
CORRECT_IDS = [f"{c.check.__name__}-{c.name}" for c in impls.CORRECT]


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
    try:
        check(impl, seed=1, thorough=True)
        direct = ["passed", ""]
    except AssertionError as err:
        direct = ["failed", str(err)]
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
    assert verdict.message == direct[1]
