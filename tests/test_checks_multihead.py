"""The notebook 02 checks pass correct implementations and name each classic mistake."""

from __future__ import annotations

import pytest
import torch
from mistakes import multihead as impls
from mistakes import stub

from autograder.checks import CheckFailure
from autograder.checks import nb02_multihead as checks
from conftest import RUNS, assert_diagnosed

MHA_CHECKS = [
    checks.check_mha_structure,
    checks.check_mha_matches_torch,
    checks.check_mha_mask,
    checks.check_mha_edge_cases,
]
CORRECT = (
    [(checks.check_split_heads, name, fn) for name, fn in impls.CORRECT_SPLIT.items()]
    + [(checks.check_merge_heads, name, fn) for name, fn in impls.CORRECT_MERGE.items()]
    + [(check, name, cls) for check in MHA_CHECKS for name, cls in impls.CORRECT_MHA.items()]
    + [(checks.check_mha_param_count, name, fn) for name, fn in impls.CORRECT_COUNT.items()]
)


class Stub:
    """The learner's class before answering: every method is the nbgrader stub."""

    def __init__(self, d_model, num_heads, bias=True):
        raise NotImplementedError()


@pytest.mark.parametrize("run", RUNS, ids=str)
@pytest.mark.parametrize(
    ("check", "impl"),
    [(c, f) for c, _, f in CORRECT],
    ids=[f"{c.__name__}-{n}" for c, n, _ in CORRECT],
)
def test_correct_passes(check, impl, run):
    check(impl, **run)


@pytest.mark.parametrize("seed", [0, 5])
@pytest.mark.parametrize("mistake", impls.MISTAKES, ids=str)
def test_mistake_is_diagnosed(mistake, seed):
    assert_diagnosed(mistake, seed)


@pytest.mark.parametrize(
    ("check", "learner"),
    [(checks.check_split_heads, stub), (checks.check_merge_heads, stub)]
    + [(check, Stub) for check in MHA_CHECKS]
    + [(checks.check_mha_param_count, stub)],
    ids=lambda x: getattr(x, "__name__", ""),
)
def test_stub_is_not_implemented_yet(check, learner):
    with pytest.raises(CheckFailure, match="is not implemented yet: replace `raise Not"):
        check(learner)


def test_forward_stub_is_not_implemented_yet():
    class ForwardStub(impls.MHASeparate):
        def forward(self, query, key=None, value=None, mask=None):
            raise NotImplementedError()

    with pytest.raises(CheckFailure, match="`MultiHeadAttention.forward` is not implemented yet"):
        checks.check_mha_matches_torch(ForwardStub)


@pytest.mark.parametrize("check", MHA_CHECKS, ids=lambda c: c.__name__)
def test_checks_do_not_change_global_rng(check):
    state = torch.random.get_rng_state()
    check(impls.MHASeparate)
    assert torch.equal(state, torch.random.get_rng_state())


def test_gpt3_count_is_not_revealed():
    with pytest.raises(CheckFailure) as info:
        checks.check_mha_param_count(lambda d_model, num_heads, bias=True: 4 * d_model + 7)
    assert "604,028,928" not in str(info.value)
