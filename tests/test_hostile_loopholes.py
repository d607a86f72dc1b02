"""Faithful records that read a rule by its letter win nothing (issue 27, classes 2 to 5).

Each attack of :mod:`hostile.loopholes` runs here in-process: its notebook's set-up, answer and
attack cells run in one namespace (the kernel), and each target test cell, hidden checks
included, is verified by the grader's own checks (:func:`cells.verify_cell`), unless the scan
withholds it for a person. A target must be refuted or withheld, never verified, with a one-line
message. The class run grades the same attacks as
submissions (``test_hostile_trust.py``).
"""

from __future__ import annotations

import nbformat
import pytest
from hostile import won_in_class_run, won_in_process
from hostile.loopholes import ATTACKS, SCAN_ONLY, attacks, block_table_attack
from hostile.trust import build

from autograder import nbcell, paths
from autograder.build import instructor_notebook_text
from autograder.grader import scan
from autograder.grader.verify import cells


def _notebooks(attack) -> tuple:
    """(The instructor's notebook, the release, the attack's submission)."""
    solution = nbformat.reads(instructor_notebook_text(attack.notebook), as_version=4)
    release = nbformat.read(paths.release_notebook(attack.notebook), as_version=4)
    return solution, release, build(attack, solution, release)


def _kernel(submitted) -> dict:
    """The namespace after the submission's non-test cells ran (the kernel); an unfinished
    answer raises and the next cell runs, as in a kernel (:func:`hostile.trust.build` puts the
    stub back in answers no target reaches)."""
    namespace: dict = {"__name__": "__main__"}
    for cell in submitted.cells:
        if cell.cell_type == "code" and not nbcell.is_test(cell) and not _selfcheck(cell):
            source = "\n".join(
                line for line in cell.source.splitlines() if not line.startswith(("%", "!"))
            )  # IPython magics: no kernel here
            try:
                exec(compile(source, nbcell.grade_id(cell) or "cell", "exec"), namespace)
            except NotImplementedError:  # an answer left as the release's stub, as a kernel
                if not nbcell.is_answer(cell):  # goes on past it; anything else is a bug
                    raise
    return namespace


def _selfcheck(cell) -> bool:
    """Notebook 06's optional Triton self-checks: no points, and no Triton here."""
    return (nbcell.grade_id(cell) or "").startswith("selfcheck")


def verdicts(attack) -> dict[str, cells.Verdict]:
    """Each target's verdict: for an attack only the scan stops (:data:`SCAN_ONLY`), whether the
    scan withholds it; for every other one the grader's own, on the instructor's test cells
    (hidden checks included), whatever the scan says."""
    solution, release, submitted = _notebooks(attack)
    if attack.learner in SCAN_ONLY:
        withheld = scan.withheld_tests(submitted, solution, release)
        return {
            g: cells.Verdict("withheld", withheld[g])
            if g in withheld
            else cells.Verdict("verified")
            for g in attack.targets
        }
    kernel = cells.InProcessKernel(_kernel(submitted))
    tests = {
        nbcell.grade_id(c): "\n".join(
            line for line in c.source.splitlines() if "HIDDEN TESTS" not in line
        )
        for c in solution.cells
        if nbcell.is_test(c)
    }
    return {g: cells.verify_cell(tests[g], kernel) for g in attack.targets}


@pytest.mark.parametrize(
    "attack", [*ATTACKS, pytest.param(None, id="f4_nb02_block_table")], ids=lambda a: a.learner
)
def test_a_rule_read_by_its_letter_wins_nothing(attack):
    attack = attack or block_table_attack()
    found = verdicts(attack)
    won = won_in_process(found)
    assert not won, f"{attack.what}: {won}"
    for verdict in found.values():
        assert verdict.message and "\n" not in verdict.message, verdict


@pytest.mark.slow
def test_graded_attacks_win_no_target_cell(class_run):
    """The same attacks handed in: every target scores 0 (or waits for a person)."""
    won = won_in_class_run(class_run, attacks())
    assert not won, won
