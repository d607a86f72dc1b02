"""The notebook 03 checks pass correct mask functions and name each classic masking mistake."""

from __future__ import annotations

import torch
from mistakes import masking as impls

from autograder.checks import nb03_masking as checks
from autograder.checks import nb03_nn_masks as nn_masks

# Correct implementations, catalogued mistakes and stubs: tests/test_mistakes.py.


def test_checks_leave_the_global_random_state_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    checks.check_attention_mask_padding_invariance(impls.attention_and)
    nn_masks.check_to_nn_mha_masks(impls.nn_masks_bool)
    assert torch.equal(torch.rand(3), expected)
