"""Find a check by its name: the one way the grader reaches the course's checks.

A test cell names its checks (``check_softmax(softmax)``); the grader's verifier
(``autograder.grader.verify.cells``) asks here for the function, the ATen operators learner code
may run under it (its module's ``OPERATORS``) and why it cannot be verified outside the kernel, if
it cannot. Check names are unique across the modules, so a name is enough. The modules are
imported on demand: a notebook imports only its own.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from . import operators

# One module per notebook, named after its number (nb01_attention ...): see the README.
MODULES = tuple(sorted(p.stem for p in Path(__file__).parent.glob("nb[0-9][0-9]_*.py")))


def module_of(name: str) -> ModuleType:
    """The check module that defines the ``check_*`` function ``name``."""
    for module in MODULES:
        found = importlib.import_module(f"autograder.checks.{module}")
        if name.startswith("check_") and callable(getattr(found, name, None)):
            return found
    raise ValueError(f"there is no check named {name}")


def find_check(name: str) -> Callable:
    """The ``check_*`` function of that name."""
    return getattr(module_of(name), name)


def allowed_operators(name: str) -> frozenset[str]:
    """The ATen operators learner code may run under the check ``name``: its module's
    ``OPERATORS``, else :data:`.operators.DEFAULT`."""
    return getattr(module_of(name), "OPERATORS", operators.DEFAULT)


def unverifiable(name: str) -> str | None:
    """Why the check ``name`` cannot be verified outside the kernel, or None."""
    return getattr(module_of(name), "UNVERIFIABLE", {}).get(name)
