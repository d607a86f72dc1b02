"""Notebook 09's prefix-caching and packed-sequence cells win nothing from tables of the public
runs or from bookkeeping out of the recorder's sight (:mod:`hostile.serving_sharing`).

The submission runs in-process: its cells in one namespace (the kernel), each target test cell,
hidden checks included, verified by the grader's own checks unless the allow-list scan withholds
it for a person. A target must be refuted or withheld, never verified, with a one-line message.
The class run grades the same submission (``test_hostile_trust.py`` reads it).
"""

from __future__ import annotations

import pytest
from hostile import NO_WIN, won_in_class_run
from hostile.serving_sharing import attack
from test_hostile_loopholes import _kernel, _notebooks

from autograder import nbcell
from autograder.grader import scan
from autograder.grader.verify import cells


def test_tables_and_numpy_win_no_target():
    solution, release, submitted = _notebooks(attack())
    withheld = scan.withheld_tests(submitted, solution, release)
    kernel = cells.InProcessKernel(_kernel(submitted))
    tests = {
        nbcell.grade_id(c): "\n".join(
            line for line in c.source.splitlines() if "HIDDEN TESTS" not in line
        )
        for c in solution.cells
        if nbcell.is_test(c)
    }
    won = {}
    for target in attack().targets:
        if target in withheld:
            assert withheld[target] and "\n" not in withheld[target]
            continue
        verdict = cells.verify_cell(tests[target], kernel)
        assert verdict.message and "\n" not in verdict.message, verdict
        if verdict.status not in NO_WIN:
            won[target] = verdict
    assert not won, f"{attack().what}: {won}"


@pytest.mark.slow
def test_graded_submission_wins_no_target_cell(class_run):
    """The same submission handed in: every target scores 0 (or waits for a person)."""
    won = won_in_class_run(class_run, [attack()])
    assert not won, won
