"""Every check is proven by the catalogue, and its name finds it.

A public ``check_*`` function of a notebook's check module needs a right implementation it
passes (``CORRECT``) and a classic mistake it names (``MISTAKES``) in ``tests/mistakes``, or is
quiz-type: it grades a constant the learner sets (a letter, a number), and its right and wrong
answers are tested in the file named below. A check's name is unique across the modules, because
the grader finds a test cell's check by name alone (``checks.registry.find_check``).
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import mistakes
import pytest

from conftest import REPO

#: Quiz-type checks -> the test file that proves their right and wrong answers.
QUIZ_TYPE = {
    "check_choice": "test_checks_interview.py",
    "check_number": "test_checks_interview.py",
    "check_quiz_answer": "test_checks_parallel.py",
    "check_predicted_matmul_counts": "test_checks_parallel.py",
}

MODULES = sorted(p.stem for p in (REPO / "autograder" / "checks").glob("nb[0-9][0-9]_*.py"))


def _checks() -> dict[str, list[tuple[str, object]]]:
    """name -> (module, function) for every public ``check_*`` a check module defines."""
    found: dict[str, list[tuple[str, object]]] = {}
    for name in MODULES:
        module = importlib.import_module(f"autograder.checks.{name}")
        for attr, value in vars(module).items():
            if attr.startswith("check_") and inspect.isfunction(value):
                if value.__module__ == module.__name__:
                    found.setdefault(attr, []).append((name, value))
    return found


def _catalogued(attribute: str) -> set[str]:
    """The checks named by the catalogues' ``attribute`` entries: an entry's ``check`` is the
    check itself, or an adapter that calls it by name (a check of two learner functions)."""
    names = set()
    for catalogue in mistakes.catalogues().values():
        for entry in getattr(catalogue, attribute, []):
            code = getattr(entry.check, "__code__", None)
            called = code.co_names if code else ()
            names |= {n for n in (entry.check.__name__, *called) if n.startswith("check_")}
    return names


def test_check_names_are_unique_across_modules():
    twice = {name: [m for m, _ in where] for name, where in _checks().items() if len(where) > 1}
    assert not twice, f"check names defined in more than one module: {twice}"


@pytest.mark.parametrize("attribute", ["CORRECT", "MISTAKES"])
def test_every_check_has_catalogue_entries_or_is_quiz_type(attribute):
    catalogued = _catalogued(attribute)
    missing = [
        f"{where[0][0]}.{name}"
        for name, where in sorted(_checks().items())
        if name not in QUIZ_TYPE and name not in catalogued
    ]
    assert not missing, f"add {attribute} entries in tests/mistakes for: {missing}"


def test_quiz_type_checks_exist_and_are_tested_where_declared():
    checks = _checks()
    for name, test_file in QUIZ_TYPE.items():
        assert name in checks, f"{name} is declared quiz-type but no check module defines it"
        assert name in (Path(__file__).parent / test_file).read_text(), (name, test_file)
