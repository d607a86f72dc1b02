"""Correct and wrong learner implementations used to test the checks.

Each module holds ``CORRECT_*`` dicts (name -> implementation that must pass every check) and a
``MISTAKES`` catalogue of classic wrong implementations, each paired with the check that must catch
it and a substring of the diagnosis that check must give.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Mistake:
    """A wrong implementation, the check that must fail and a substring of its message."""

    name: str
    impl: Any
    check: Callable[..., None]
    diagnosis: str

    def __str__(self) -> str:  # readable pytest ids
        return self.name


def stub(*args: Any, **kwargs: Any) -> Any:
    """What the learner sees before answering: the nbgrader stub."""
    raise NotImplementedError()
