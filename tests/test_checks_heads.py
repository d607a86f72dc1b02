"""The notebook 07 checks pass correct implementations and name each classic mistake."""

from __future__ import annotations

import pytest
import torch
from mistakes import Mistake, stub
from mistakes import heads as impls

from autograder.checks import CheckFailure
from autograder.checks import nb07_heads as checks
from conftest import RUNS, ids

ENTROPY_CHECKS = [checks.check_head_entropy_values, checks.check_head_entropy_zero_weights]
PREVIOUS_CHECKS = [
    checks.check_previous_token_score_values,
    checks.check_previous_token_score_patterns,
]
IMPORTANCE_CHECKS = [
    checks.check_head_importance_values,
    checks.check_head_importance_leaves_model_unchanged,
]


pytestmark = pytest.mark.usefixtures("one_thread")


def assert_diagnosed(mistake: Mistake, seed: int) -> None:
    """``mistake`` fails its check with one learner-facing line containing the diagnosis."""
    with pytest.raises(CheckFailure) as info:
        mistake.check(mistake.impl, seed=seed)
    message = str(info.value)
    assert mistake.diagnosis in message, message
    assert "\n" not in message and message.endswith("."), message
    assert "tensor(" not in message, message


@pytest.mark.parametrize("run", RUNS, ids=str)
@pytest.mark.parametrize("check", ENTROPY_CHECKS, ids=ids)
@pytest.mark.parametrize("impl", impls.CORRECT_ENTROPY.values(), ids=impls.CORRECT_ENTROPY)
def test_correct_entropy_passes(impl, check, run):
    check(impl, **run)


@pytest.mark.parametrize("run", RUNS, ids=str)
@pytest.mark.parametrize("check", PREVIOUS_CHECKS, ids=ids)
@pytest.mark.parametrize("impl", impls.CORRECT_PREVIOUS.values(), ids=impls.CORRECT_PREVIOUS)
def test_correct_previous_token_score_passes(impl, check, run):
    check(impl, **run)


@pytest.mark.parametrize("run", RUNS, ids=str)
@pytest.mark.parametrize("check", IMPORTANCE_CHECKS, ids=ids)
@pytest.mark.parametrize("impl", impls.CORRECT_IMPORTANCE.values(), ids=impls.CORRECT_IMPORTANCE)
def test_correct_importance_passes(impl, check, run):
    check(impl, **run)
    assert torch.is_grad_enabled()


# Importance checks run models, so their mistakes are tried with one seed; the others with two.
SEEDED_MISTAKES = [(m, 0) for m in impls.MISTAKES] + [
    (m, 5) for m in impls.MISTAKES if not m.name.startswith("importance")
]


@pytest.mark.parametrize(("mistake", "seed"), SEEDED_MISTAKES, ids=lambda x: str(x))
def test_mistake_is_diagnosed(mistake, seed):
    assert_diagnosed(mistake, seed)
    assert torch.is_grad_enabled()


@pytest.mark.parametrize("check", ENTROPY_CHECKS + PREVIOUS_CHECKS + IMPORTANCE_CHECKS, ids=ids)
def test_stub_is_not_implemented_yet(check):
    with pytest.raises(CheckFailure, match="is not implemented yet: replace `raise Not"):
        check(stub)


def test_checks_do_not_change_global_rng():
    state = torch.random.get_rng_state()
    checks.check_head_importance_values(impls.importance_argument)
    checks.check_head_importance_leaves_model_unchanged(impls.importance_argument)
    assert torch.equal(state, torch.random.get_rng_state())


def test_every_mistake_is_caught_by_one_of_its_functions_checks_only():
    """Sanity: the catalogue pairs each mistake with a check of the right function."""
    families = {
        "entropy": ENTROPY_CHECKS,
        "previous": PREVIOUS_CHECKS,
        "importance": IMPORTANCE_CHECKS,
    }
    for mistake in impls.MISTAKES:
        family = mistake.name.split(":")[0]
        assert mistake.check in families[family], mistake.name
