"""Notebook 02's cross-attention, dropout and block checks: correct code passes, mistakes are
named, and each verdict is the same when the grader verifies it against a kernel."""

from __future__ import annotations

import pytest
import torch
from mistakes import block, cross, dropout
from mistakes.multihead import MHASeparate

from autograder.checks import CheckFailure, nb02_block, nb02_cross, nb02_dropout
from autograder.grader.verify import cells

# Correct implementations, catalogued mistakes and stubs: tests/test_mistakes.py.


def test_cross_attend_names_an_unfinished_multihead_attention():
    class Broken(MHASeparate):
        def merge(self, x):
            return x.reshape(x.shape[0], x.shape[2], -1)  # no transpose

    with pytest.raises(CheckFailure, match="Fix your MultiHeadAttention first"):
        nb02_cross.check_cross_attend(cross.cross_arange, Broken)


def test_cross_attend_names_the_shapes_it_was_given():
    with pytest.raises(CheckFailure) as info:
        nb02_cross.check_cross_attend(cross.cross_over_decoder, MHASeparate)
    assert "decoder_x (B, T, C) = (2, 4, 12)" in str(info.value)
    assert "encoder_out (B, S, C) = (2, 6, 12)" in str(info.value)
    assert "mask hint" not in str(info.value)


@pytest.mark.parametrize(
    "check",
    [nb02_dropout.check_dropout_training, nb02_block.check_block_matches_torch],
    ids=lambda c: c.__name__,
)
def test_checks_do_not_change_global_rng(check):
    impl = dropout.dropout_by_hand if "dropout" in check.__name__ else block.BlockSequential
    state = torch.random.get_rng_state()
    check(impl)
    assert torch.equal(state, torch.random.get_rng_state())


@pytest.mark.parametrize(
    ("impl", "check"),
    [
        (block.BlockNoAffine, nb02_block.check_block_structure),
        (block.BlockNoAffine, nb02_block.check_block_matches_torch),
        (block.BlockMLPNoBias, nb02_block.check_block_matches_torch),
        (block.BlockNormNoBias, nb02_block.check_block_structure),
    ],
    ids=lambda x: getattr(x, "__name__", str(x)),
)
def test_a_block_missing_a_weight_or_bias_is_one_sentence_not_a_crash(impl, check):
    with pytest.raises(CheckFailure) as info:
        check(impl)
    message = str(info.value)
    assert "NoneType" not in message and "AttributeError" not in message
    assert message.count(". ") == 0, message


def test_the_count_must_be_an_int_on_the_default_call_too():
    with pytest.raises(CheckFailure, match="returned a float"):
        nb02_block.check_block_param_count(block.count_float_ratio)


class SeparateKernel(cells.InProcessKernel):
    """A kernel with its own random state, as a real one in its own process has."""

    def __call__(self, request: bytes) -> str:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(12345)
            return super().__call__(request)


VERIFIED = [
    ("check_dropout_training(fn)", dropout.CORRECT_DROPOUT),
    ("check_dropout_eval(fn)", dropout.CORRECT_DROPOUT),
    ("check_sdpa_dropout(fn, seed=1, thorough=True)", dropout.CORRECT_SDPA),
    ("check_block_structure(fn)", block.CORRECT_BLOCK),
    ("check_block_matches_torch(fn, seed=1, thorough=True)", block.CORRECT_BLOCK),
    ("check_block_param_count(fn)", block.CORRECT_COUNT),
    ("check_cross_attend(fn, MHA, seed=1, thorough=True)", cross.CORRECT_CROSS),
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
MISTAKES = cross.MISTAKES + dropout.MISTAKES + block.MISTAKES


def _source(mistake) -> str:
    if mistake.check is cross._cross:
        return "check_cross_attend(fn, MHA)"
    return f"{mistake.check.__name__}(fn)"


@pytest.mark.parametrize("mistake", MISTAKES, ids=str)
def test_mistakes_are_refuted_with_the_checks_own_diagnosis(mistake):
    kernel = SeparateKernel({"fn": mistake.impl, "MHA": MHASeparate})
    verdict = cells.verify_cell(_source(mistake), kernel)
    assert verdict.status == "refuted"
    if mistake.name not in REFUTED_BY_THE_RERUN:
        assert mistake.diagnosis in verdict.message, verdict.message
