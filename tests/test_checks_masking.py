"""The notebook 03 checks pass correct mask functions and name each classic masking mistake."""

from __future__ import annotations

import pytest
import torch
from mistakes import Mistake, stub
from mistakes import masking as impls

from autograder.checks import CheckFailure
from autograder.checks import nb03_masking as checks
from conftest import RUNS, ids

CAUSAL_CHECKS = [checks.check_causal_mask_values, checks.check_causal_mask_no_leak]
ATTENTION_CHECKS = [
    checks.check_attention_mask_values,
    checks.check_attention_mask_padding_invariance,
]


def assert_diagnosed(mistake: Mistake, **run) -> None:
    """``mistake`` fails its check with one learner-facing line containing the diagnosis."""
    with pytest.raises(CheckFailure) as info:
        mistake.check(mistake.impl, **run)
    message = str(info.value)
    assert mistake.diagnosis in message, message
    assert "\n" not in message and message.endswith("."), message
    assert "tensor(" not in message, message  # shapes only, never values


@pytest.mark.parametrize("run", RUNS, ids=str)
@pytest.mark.parametrize("check", CAUSAL_CHECKS, ids=ids)
@pytest.mark.parametrize("impl", impls.CORRECT_CAUSAL.values(), ids=impls.CORRECT_CAUSAL)
def test_correct_causal_mask_passes(impl, check, run):
    check(impl, **run)


@pytest.mark.parametrize("run", RUNS, ids=str)
@pytest.mark.parametrize("impl", impls.CORRECT_PADDING.values(), ids=impls.CORRECT_PADDING)
def test_correct_padding_mask_passes(impl, run):
    checks.check_padding_mask_values(impl, **run)


@pytest.mark.parametrize("run", RUNS, ids=str)
@pytest.mark.parametrize("check", ATTENTION_CHECKS, ids=ids)
@pytest.mark.parametrize("impl", impls.CORRECT_ATTENTION.values(), ids=impls.CORRECT_ATTENTION)
def test_correct_attention_mask_passes(impl, check, run):
    check(impl, **run)


@pytest.mark.parametrize("run", RUNS, ids=str)
@pytest.mark.parametrize("impl", impls.CORRECT_NN_MASKS.values(), ids=impls.CORRECT_NN_MASKS)
def test_correct_nn_mha_masks_pass(impl, run):
    checks.check_to_nn_mha_masks(impl, **run)


@pytest.mark.parametrize("run", [{"seed": 0}, {"seed": 5, "thorough": True}], ids=str)
@pytest.mark.parametrize("mistake", impls.MISTAKES, ids=str)
def test_mistake_is_diagnosed(mistake, run):
    assert_diagnosed(mistake, **run)


ALL_CHECKS = [
    *CAUSAL_CHECKS,
    checks.check_padding_mask_values,
    *ATTENTION_CHECKS,
    checks.check_to_nn_mha_masks,
]


@pytest.mark.parametrize("check", ALL_CHECKS, ids=ids)
def test_stub_is_not_implemented_yet(check):
    with pytest.raises(CheckFailure, match="is not implemented yet: replace `raise Not"):
        check(stub)


def test_checks_leave_the_global_random_state_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    checks.check_attention_mask_padding_invariance(impls.attention_and)
    checks.check_to_nn_mha_masks(impls.nn_masks_bool)
    assert torch.equal(torch.rand(3), expected)
