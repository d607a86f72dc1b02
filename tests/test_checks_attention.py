"""The notebook 01 checks pass correct implementations and name each classic mistake."""

from __future__ import annotations

import warnings

import pytest
import torch
from mistakes import attention as impls

from autograder.checks import CheckFailure
from autograder.checks import nb01_attention as checks

# Correct implementations, catalogued mistakes and stubs: tests/test_mistakes.py.


def test_learner_warnings_and_errors_become_one_sentence():
    def noisy_then_broken(x, dim=-1):
        warnings.warn("learner warning", stacklevel=1)
        return x.sum(dim=5)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(CheckFailure) as info:
            checks.check_softmax_values(noisy_then_broken)
    assert not caught
    assert str(info.value).startswith("`softmax` raised IndexError")
    assert "(4, 7) float64, dim=-1" in str(info.value)
    assert isinstance(info.value, AssertionError)


def test_wrong_return_type_is_explained():
    with pytest.raises(CheckFailure, match="should return a pair `\\(out, weights\\)`"):
        checks.check_sdpa_shapes(lambda q, k, v, mask=None: q @ k.mT @ v)
    with pytest.raises(CheckFailure, match="should return a tensor, but it returned list"):
        checks.check_softmax_values(lambda x, dim=-1: x.tolist())


def test_checks_do_not_change_global_rng():
    state = torch.random.get_rng_state()
    for check in impls.SDPA_CHECKS:
        check(impls.sdpa_matmul, thorough=True)
    assert torch.equal(state, torch.random.get_rng_state())
