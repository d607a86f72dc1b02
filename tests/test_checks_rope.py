"""Notebook 04's rotary-embedding checks pass correct code, name each classic mistake, and give
the same verdict when the grader verifies them on a kernel's record (``checks.replay``)."""

from __future__ import annotations

import pytest
import torch
from mistakes import rope as impls
from mistakes import stub
from mistakes.gqa import GQAManual

from autograder.checks import CheckFailure
from autograder.checks import nb04_rope as checks
from autograder.checks.replay import cells
from conftest import RUNS, assert_diagnosed

ROPE_CHECKS = [checks.check_apply_rope_values, checks.check_apply_rope_relative]
ROTARY_CHECKS = [checks.check_rotary_gqa_full_pass, checks.check_rotary_gqa_decoding]
CORRECT = [
    (check, name, fn) for check in ROPE_CHECKS for name, fn in impls.CORRECT_ROPE.items()
] + [(check, name, cls) for check in ROTARY_CHECKS for name, cls in impls.CORRECT_ROTARY.items()]
CORRECT_IDS = [f"{c.__name__}-{n}" for c, n, _ in CORRECT]


@pytest.mark.parametrize("run", RUNS, ids=str)
@pytest.mark.parametrize(("check", "impl"), [(c, f) for c, _, f in CORRECT], ids=CORRECT_IDS)
def test_correct_passes(check, impl, run):
    check(impl, **run)


def test_the_interleaved_convention_is_relative_but_not_the_graded_layout():
    """Interleaved pairs are RoPE too: the property holds, the values name the convention."""
    checks.check_apply_rope_relative(impls.rope_interleaved, thorough=True)
    with pytest.raises(CheckFailure, match="interleaved layout of the RoFormer paper"):
        checks.check_apply_rope_values(impls.rope_interleaved)


@pytest.mark.parametrize("seed", [0, 5])
@pytest.mark.parametrize("mistake", impls.MISTAKES, ids=str)
def test_mistake_is_diagnosed(mistake, seed):
    assert_diagnosed(mistake, seed)


class RotaryStub(GQAManual):
    """The release of exercise 7: the learner's finished GQA, forward still the stub."""

    def forward(self, x, past_kv=None, causal=True):
        raise NotImplementedError()


class GQAStub:
    def __init__(self, d_model, num_heads, num_kv_heads, bias=False):
        raise NotImplementedError()


class RotaryOnUnfinishedGQA(GQAStub):
    pass


@pytest.mark.parametrize(
    ("check", "learner"),
    [(c, stub) for c in ROPE_CHECKS] + [(c, RotaryStub) for c in ROTARY_CHECKS],
    ids=lambda x: getattr(x, "__name__", ""),
)
def test_stub_is_not_implemented_yet(check, learner):
    with pytest.raises(CheckFailure, match="is not implemented yet: replace `raise Not"):
        check(learner)


@pytest.mark.parametrize("check", ROTARY_CHECKS, ids=lambda c: c.__name__)
def test_an_unfinished_gqa_is_named(check):
    with pytest.raises(CheckFailure, match="finish exercise 3 first"):
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
