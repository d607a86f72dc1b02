"""The notebook 07 checks pass correct implementations and name each classic mistake."""

from __future__ import annotations

import pytest
import torch
from mistakes import heads as impls

from autograder.checks import nb07_importance as importance

pytestmark = pytest.mark.usefixtures("one_thread")

# Correct implementations, catalogued mistakes and stubs: tests/test_mistakes.py.


def test_checks_do_not_change_global_rng():
    state = torch.random.get_rng_state()
    importance.check_head_importance_values(impls.importance_argument)
    importance.check_head_importance_leaves_model_unchanged(impls.importance_argument)
    assert torch.equal(state, torch.random.get_rng_state())


def test_every_mistake_is_caught_by_one_of_its_functions_checks_only():
    """Sanity: the catalogue pairs each mistake with a check of the right function."""
    families = {
        "entropy": impls.ENTROPY_CHECKS,
        "previous": impls.PREVIOUS_CHECKS,
        "importance": impls.IMPORTANCE_CHECKS,
    }
    for mistake in impls.MISTAKES:
        family = mistake.name.split(":")[0]
        assert mistake.check in families[family], mistake.name
