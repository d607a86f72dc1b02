"""Notebook 09's speculative decoding cells hold against answers that know the public checks:
the attacks of :mod:`hostile.serving_speculative`, in-process and in the class run."""

from __future__ import annotations

import pytest
from hostile import won_in_class_run, won_in_process
from hostile.serving_speculative import ATTACKS
from test_hostile_loopholes import verdicts

# The oracle is importable in this process; in a classroom kernel its module is a stand-in.
IN_PROCESS = ("test_accept_greedy", "test_tree_attention_mask")


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.learner)
def test_knowing_the_public_checks_wins_nothing(attack):
    found = {g: v for g, v in verdicts(attack).items() if g in IN_PROCESS}
    won = won_in_process(found)
    assert not won, f"{attack.what}: {won}"
    for verdict in found.values():
        assert verdict.message and "\n" not in verdict.message, verdict


@pytest.mark.slow
def test_graded_attacks_win_no_target_cell(class_run):
    """The same answers handed in: every target scores 0 (or waits for a person)."""
    won = won_in_class_run(class_run, ATTACKS)
    assert not won, won
