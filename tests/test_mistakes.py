"""Every catalogue in ``tests/mistakes``: correct implementations pass their checks, each classic
mistake is named by its check in one line, and stubs are reported as not implemented yet.

The cases are the catalogues' declarations (``CORRECT``, ``MISTAKES``, ``STUBS``; see
:mod:`mistakes`), so a new check needs catalogue entries, not a test function. Ids read
``<catalogue>-<check>-<name>-<run>``.
"""

from __future__ import annotations

import mistakes
import pytest

from autograder.checks import CheckFailure
from conftest import assert_diagnosed

CATALOGUES = mistakes.catalogues()
DECLARED = ("CORRECT", "MISTAKES", "STUBS", "REPLAY")

pytestmark = pytest.mark.usefixtures("one_thread")


def _name(check) -> str:
    return getattr(check, "__name__", str(check)).lstrip("_")


def _run(run: dict) -> str:
    return ",".join(k if v is True else f"{k}={v}" for k, v in run.items()) or "default"


def _cases(attribute: str, expand) -> list:
    """``pytest.param`` for every case of every catalogue's ``attribute``, with its id."""
    cases = []
    for module, catalogue in CATALOGUES.items():
        reason = getattr(catalogue, "SKIP", None)
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        for entry in getattr(catalogue, attribute, []):
            for values, label in expand(entry):
                cases.append(pytest.param(*values, id=f"{module}-{label}", marks=marks))
    return cases


def _correct(entry):
    for run in entry.runs:
        yield (entry, run), f"{_name(entry.check)}-{entry.name}-{_run(run)}"


def _mistakes(entry):
    for outcome in ("runs", "caught", "missed"):
        for run in getattr(entry, outcome):
            label = f"{_name(entry.check)}-{entry.name}-{_run(run)}"
            yield (entry, outcome, run), label if outcome == "runs" else f"{label}-{outcome}"


def _stubs(entry):
    check, learner = entry
    yield (check, learner), f"{_name(check)}-{_name(learner)}"


def test_every_catalogue_declares_its_cases():
    assert CATALOGUES
    for module, catalogue in CATALOGUES.items():
        missing = [name for name in DECLARED if not hasattr(catalogue, name)]
        assert not missing, f"mistakes/{module}.py does not declare {missing}"
        assert all(isinstance(m, mistakes.Mistake) for m in catalogue.MISTAKES), module
        assert all(isinstance(c, mistakes.Correct) for c in catalogue.CORRECT), module


@pytest.mark.parametrize(("entry", "run"), _cases("CORRECT", _correct))
def test_correct_passes(entry, run):
    result = mistakes.outcome(entry.check, entry.impl, run)
    assert result.failure is None, result.message
    assert result.grad_enabled


@pytest.mark.parametrize(("mistake", "outcome", "run"), _cases("MISTAKES", _mistakes))
def test_mistake_is_diagnosed(mistake, outcome, run):
    result = mistakes.outcome(mistake.check, mistake.impl, run)
    if outcome == "runs":
        assert_diagnosed(mistake, **run)
    elif outcome == "caught":  # the visible test catches it too, whatever it says
        assert result.failure and issubclass(result.failure, CheckFailure), result
    else:  # the visible test lets it through: only the hidden one catches it
        assert result.failure is None, result.message
    assert result.grad_enabled


@pytest.mark.parametrize(("check", "learner"), _cases("STUBS", _stubs))
def test_stub_is_not_implemented_yet(check, learner):
    with pytest.raises(CheckFailure, match="is not implemented yet: replace `raise Not"):
        check(learner)
