"""Code outside the allow-list is withheld, fast: issue 42's attacks read by the scan alone.

Each learner of :mod:`hostile.allowlist` hands in its notebook; every target test cell must be
withheld for a person with a one-line reason (the class run grades the same submissions,
``tests/test_hostile_trust.py``). The instructor's answers stay inside the list.
"""

from __future__ import annotations

import nbformat
import pytest
from hostile.allowlist import ATTACKS
from hostile.trust import build

from autograder import paths
from autograder.build import instructor_notebook_text
from autograder.classroom import scan


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.learner)
def test_code_outside_the_list_is_withheld(attack):
    solution = nbformat.reads(instructor_notebook_text(attack.notebook), as_version=4)
    release = nbformat.read(paths.release_notebook(attack.notebook), as_version=4)
    submitted = build(attack, solution, release)
    withheld = scan.withheld_tests(submitted, solution, release, attack.notebook)
    assert set(attack.targets) <= set(withheld), (attack.what, withheld)
    for why in withheld.values():
        assert why and "\n" not in why, why
