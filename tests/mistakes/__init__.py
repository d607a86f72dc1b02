"""Correct and wrong learner implementations used to test the checks.

Every module here is a catalogue for one notebook's checks and declares, under the same names:

``CORRECT``
    :class:`Correct` entries: a check and an implementation it must pass under each of its runs.
``MISTAKES``
    :class:`Mistake` entries: a classic wrong implementation, the check that must catch it and a
    substring of the one-line diagnosis that check must give.
``STUBS``
    ``(check, learner)`` pairs: the learner's code before answering, which the check must report
    as not implemented yet.
``REPLAY``
    The checks whose correct implementations ``tests/test_replay.py`` verifies on a kernel's
    record; a module with an empty ``REPLAY`` is left out of that test altogether.

``SKIP`` (optional) is a reason to skip the whole catalogue (Triton not installed).
``tests/test_mistakes.py`` runs every entry of every catalogue; adding a check means adding
entries here, not a test function.

:func:`outcome` runs one check on one implementation once per session: the tests that verify a
run on a kernel's record (``test_replay.py``, ``test_checks_rope.py``) compare it with the run
``test_mistakes.py`` already made, rather than making it again.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch

Run = dict[str, Any]

# Check options every correct implementation passes with: the quick default, and a thorough run.
RUNS: tuple[Run, ...] = ({"seed": 0}, {"seed": 3, "thorough": True})
# The visible and the hidden test of one seed.
VISIBLE: Run = {"seed": 1, "thorough": False}
HIDDEN: Run = {"seed": 1, "thorough": True}
VISIBLE_AND_HIDDEN: tuple[Run, ...] = (VISIBLE, HIDDEN)
# The visible test of a mistake that only the hidden test catches.
MISSED: tuple[Run, ...] = ({"seed": 0, "thorough": False},)
# Check options every mistake is diagnosed with, unless it says otherwise.
SEEDS: tuple[Run, ...] = ({"seed": 0}, {"seed": 5})


@dataclass(frozen=True)
class Correct:
    """A right implementation that ``check`` must pass under every one of ``runs``."""

    check: Callable[..., None]
    name: str
    impl: Any
    runs: tuple[Run, ...] = field(default=RUNS, hash=False)


def correct(checks: Iterable[Callable[..., None]], impls: dict[str, Any], runs=RUNS) -> list:
    """Every implementation of ``impls`` under every check of ``checks``."""
    return [Correct(check, name, impl, runs) for check in checks for name, impl in impls.items()]


@dataclass(frozen=True)
class Mistake:
    """A wrong implementation, the check that must fail and a substring of its message.

    ``runs``: check options under which the check fails with the diagnosis, in one line.
    ``caught``: further options under which it must fail, whatever the message (the visible test).
    ``missed``: options under which the check lets it through (only the hidden test catches it).
    """

    name: str
    impl: Any
    check: Callable[..., None]
    diagnosis: str
    runs: tuple[Run, ...] = field(default=SEEDS, hash=False)
    caught: tuple[Run, ...] = field(default=(), hash=False)
    missed: tuple[Run, ...] = field(default=(), hash=False)

    def __str__(self) -> str:  # readable pytest ids
        return self.name


def tried(mistakes: Iterable[Mistake], **runs: tuple[Run, ...]) -> list[Mistake]:
    """``mistakes`` with other run options (``runs``, ``caught``, ``missed``)."""
    return [dataclasses.replace(m, **runs) for m in mistakes]


def catalogues() -> dict[str, ModuleType]:
    """Every catalogue module of this package, by name."""
    return {
        info.name: importlib.import_module(f"{__name__}.{info.name}")
        for info in pkgutil.iter_modules(__path__)
    }


@dataclass(frozen=True)
class Outcome:
    """What ``check(impl, **run)`` gave: the type and text of the failure it raised (None and ""
    when it passed), and whether gradients were still enabled after it."""

    failure: type[AssertionError] | None
    message: str
    grad_enabled: bool


_outcomes: dict[tuple, Outcome] = {}


def outcome(check: Callable[..., None], impl: Any, run: Run) -> Outcome:
    """``check(impl, **run)``, computed on the first call with these three and remembered (checks
    draw their inputs from ``seed``). An exception that is not a check's failure is raised, and
    not remembered."""
    key = (check, impl, tuple(sorted(run.items())))
    if key not in _outcomes:
        try:
            check(impl, **run)
            failure, message = None, ""
        except AssertionError as err:
            failure, message = type(err), str(err)
        _outcomes[key] = Outcome(failure, message, torch.is_grad_enabled())
    return _outcomes[key]


def stub(*args: Any, **kwargs: Any) -> Any:
    """What the learner sees before answering: the nbgrader stub."""
    raise NotImplementedError()
