"""Notebook 09's chunked-prefill and split-KV cells give nothing to the attacks of
:mod:`hostile.serving_chunks`: each target, checked in-process by the grader's own checks
(hidden ones included), is refuted or withheld for a person, with a one-line reason."""

from __future__ import annotations

import pytest
from hostile import won_in_class_run, won_in_process
from hostile.serving_chunks import attacks
from test_hostile_loopholes import verdicts


@pytest.mark.parametrize("attack", attacks(), ids=lambda a: a.learner)
def test_serving_chunk_attacks_win_nothing(attack):
    found = verdicts(attack)
    won = won_in_process(found)
    assert not won, f"{attack.what}: {won}"
    for verdict in found.values():
        assert verdict.message and "\n" not in verdict.message, verdict


@pytest.mark.slow
def test_graded_serving_chunk_attacks_score_nothing(class_run):
    """The same submission handed in: every target scores 0 (or waits for a person)."""
    won = won_in_class_run(class_run, attacks())
    assert not won, won
