"""Functions of integers answered from a table, and Python reads of tensor values, win nothing;
index lists from Python ints and F.pad keep full marks.

Each attack of :mod:`hostile.integers` runs here in-process (its notebook's cells in one
namespace, each target test cell verified by the grader's own checks, hidden checks included):
a target must be refuted or withheld, never verified. The class run grades the same attacks as
submissions, and the honest learners of :data:`hostile.integers.HONEST` there keep every
automatic cell, full marks and verified.
"""

from __future__ import annotations

import pytest
from hostile import won_in_class_run, won_in_process
from hostile.integers import HONEST, attacks
from hostile.trust import TRITON
from test_hostile_loopholes import verdicts

ATTACKS = attacks()


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.learner)
def test_a_table_or_a_python_read_wins_nothing(attack):
    found = verdicts(attack)
    won = won_in_process(found)
    assert not won, f"{attack.what}: {won}"
    for verdict in found.values():
        assert verdict.message and "\n" not in verdict.message, verdict


@pytest.mark.slow
@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.learner)
def test_graded_attack_wins_no_target_cell(class_run, attack):
    won = won_in_class_run(class_run, [attack])
    assert not won, f"{attack.what}: won {won}"


@pytest.mark.slow
@pytest.mark.parametrize("honest", HONEST, ids=lambda a: a.learner)
def test_honest_index_lists_and_f_pad_keep_full_marks_verified(class_run, honest):
    result = class_run.results.get((honest.notebook, honest.learner))
    assert result is not None, class_run.stdout[-3000:]
    assert result["status"] == "graded", result
    for nb in result["notebooks"]:
        for cell in nb["cells"]:
            if cell["grade_id"] in TRITON:
                continue
            assert cell["passed"] and cell["score"] == cell["max_score"], cell
            assert cell["check"] == "verified", cell
