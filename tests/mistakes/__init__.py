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
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

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


def stub(*args: Any, **kwargs: Any) -> Any:
    """What the learner sees before answering: the nbgrader stub."""
    raise NotImplementedError()
