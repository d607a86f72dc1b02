"""The notebook 02 checks pass correct implementations and name each classic mistake."""

from __future__ import annotations

import pytest
import torch
from mistakes import multihead as impls

from autograder.checks import CheckFailure
from autograder.checks import nb02_multihead as checks

# Correct implementations, catalogued mistakes and stubs: tests/test_mistakes.py.


def test_forward_stub_is_not_implemented_yet():
    class ForwardStub(impls.MHASeparate):
        def forward(self, query, key=None, value=None, mask=None):
            raise NotImplementedError()

    with pytest.raises(CheckFailure, match="`MultiHeadAttention.forward` is not implemented yet"):
        checks.check_mha_matches_torch(ForwardStub)


@pytest.mark.parametrize("check", impls.MHA_CHECKS, ids=lambda c: c.__name__)
def test_checks_do_not_change_global_rng(check):
    state = torch.random.get_rng_state()
    check(impls.MHASeparate)
    assert torch.equal(state, torch.random.get_rng_state())


def test_gpt3_count_is_not_revealed():
    with pytest.raises(CheckFailure) as info:
        checks.check_mha_param_count(lambda d_model, num_heads, bias=True: 4 * d_model + 7)
    assert "604,028,928" not in str(info.value)
