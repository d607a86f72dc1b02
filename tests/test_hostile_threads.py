"""Answers computed on another thread or process and handed back as constants win nothing.

The class run (:mod:`hostile.class_run`) grades each attack of :mod:`hostile.threads` as a
submission, in real sandboxed kernels: each target cell must score 0 or be withheld for a person.
(An in-process copy of the same attacks ran them a second time, 46 CPU seconds of the fast tier,
and is gone: the real run is the proof.)
"""

from __future__ import annotations

import pytest
from hostile.threads import ATTACKS


@pytest.mark.slow
@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.learner)
def test_graded_attack_wins_no_target_cell(class_run, attack):
    result = class_run.results.get((attack.notebook, attack.learner))
    assert result is not None, class_run.stdout[-3000:]
    assert result["status"] == "graded", result
    cells_ = {c["grade_id"]: c for nb in result["notebooks"] for c in nb["cells"]}
    assert set(attack.targets) <= set(cells_), (attack.targets, sorted(cells_))
    won = {
        g: (cells_[g]["score"], cells_[g]["check"], cells_[g]["message"])
        for g in attack.targets
        if cells_[g]["score"] > 0 and cells_[g]["check"] != "withheld"
    }
    assert not won, f"{attack.what}: won {won}"
