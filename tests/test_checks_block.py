"""Notebook 02's cross-attention, dropout and block checks: correct code passes, mistakes are
named, and each verdict is the same when the grader verifies it against a kernel."""

from __future__ import annotations

import pytest
import torch
from mistakes import block as impls
from mistakes.multihead import MHASeparate

from autograder.checks import CheckFailure
from autograder.checks import nb02_block as checks
from autograder.checks.replay import cells

# Correct implementations, catalogued mistakes and stubs: tests/test_mistakes.py.


def test_cross_attend_names_an_unfinished_multihead_attention():
    class Broken(MHASeparate):
        def merge(self, x):
            return x.reshape(x.shape[0], x.shape[2], -1)  # no transpose

    with pytest.raises(CheckFailure, match="Fix your MultiHeadAttention first"):
        checks.check_cross_attend(impls.cross_arange, Broken)


@pytest.mark.parametrize(
    "check",
    [checks.check_dropout_training, checks.check_block_matches_torch],
    ids=lambda c: c.__name__,
)
def test_checks_do_not_change_global_rng(check):
    impl = impls.dropout_by_hand if "dropout" in check.__name__ else impls.BlockSequential
    state = torch.random.get_rng_state()
    check(impl)
    assert torch.equal(state, torch.random.get_rng_state())


class SeparateKernel(cells.InProcessKernel):
    """A kernel with its own random state, as a real one in its own process has."""

    def __call__(self, request: bytes) -> str:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(12345)
            return super().__call__(request)


VERIFIED = [
    ("check_dropout_training(fn)", impls.CORRECT_DROPOUT),
    ("check_dropout_eval(fn)", impls.CORRECT_DROPOUT),
    ("check_block_structure(fn)", impls.CORRECT_BLOCK),
    ("check_block_matches_torch(fn, seed=1, thorough=True)", impls.CORRECT_BLOCK),
    ("check_block_param_count(fn)", impls.CORRECT_COUNT),
    ("check_cross_attend(fn, MHA, seed=1, thorough=True)", impls.CORRECT_CROSS),
]


@pytest.mark.parametrize(
    ("source", "impl"),
    [(s, f) for s, fns in VERIFIED for f in fns.values()],
    ids=[f"{s.split('(')[0]}-{n}" for s, fns in VERIFIED for n in fns],
)
def test_correct_implementations_verify(source, impl):
    verdict = cells.verify_cell(source, SeparateKernel({"fn": impl, "MHA": MHASeparate}))
    assert verdict.status == "verified", verdict.message


# A generator made inside learner code cannot travel to the grader: the rerun refutes the call.
REFUTED_BY_THE_RERUN = {"dropout: fixed generator"}


def _source(mistake) -> str:
    if mistake.check is impls._cross:
        return "check_cross_attend(fn, MHA)"
    return f"{mistake.check.__name__}(fn)"


@pytest.mark.parametrize("mistake", impls.MISTAKES, ids=str)
def test_mistakes_are_refuted_with_the_checks_own_diagnosis(mistake):
    kernel = SeparateKernel({"fn": mistake.impl, "MHA": MHASeparate})
    verdict = cells.verify_cell(_source(mistake), kernel)
    assert verdict.status == "refuted"
    if mistake.name not in REFUTED_BY_THE_RERUN:
        assert mistake.diagnosis in verdict.message, verdict.message
