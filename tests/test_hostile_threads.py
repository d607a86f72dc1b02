"""Answers computed on another thread or process and handed back as constants win nothing.

The class run (:mod:`hostile.class_run`) grades each attack of :mod:`hostile.threads` as a
submission, in real sandboxed kernels: each target cell must score 0 or be withheld for a person.
(An in-process copy of the same attacks ran them a second time, 46 CPU seconds of the fast tier,
and is gone: the real run is the proof.)
"""

from __future__ import annotations

import pytest
from hostile import won_in_class_run
from hostile.threads import ATTACKS


@pytest.mark.slow
@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.learner)
def test_graded_attack_wins_no_target_cell(class_run, attack):
    won = won_in_class_run(class_run, [attack])
    assert not won, f"{attack.what}: won {won}"
