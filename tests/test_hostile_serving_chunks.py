"""Notebook 10's chunked-prefill and split-KV cells give nothing to the attacks of
:mod:`hostile.serving_chunks`: each target, checked in-process by the grader's own checks
(hidden ones included), is refuted or withheld for a person, with a one-line reason."""

from __future__ import annotations

import pytest
from hostile.serving_chunks import attacks
from test_hostile_loopholes import verdicts


@pytest.mark.parametrize("attack", attacks(), ids=lambda a: a.learner)
def test_serving_chunk_attacks_win_nothing(attack):
    found = verdicts(attack)
    # an unverified cell is withheld by grade for a person: no points either
    won = {g: v for g, v in found.items() if v.status not in ("refuted", "withheld", "unverified")}
    assert not won, f"{attack.what}: {won}"
    for verdict in found.values():
        assert verdict.message and "\n" not in verdict.message, verdict


@pytest.mark.slow
def test_graded_serving_chunk_attacks_score_nothing(class_run):
    """The same submission handed in: every target scores 0 (or waits for a person)."""
    won = {}
    for attack in attacks():
        result = class_run.results.get((attack.notebook, attack.learner))
        assert result is not None and result["status"] == "graded", (attack.learner, result)
        cells_ = {c["grade_id"]: c for nb in result["notebooks"] for c in nb["cells"]}
        assert set(attack.targets) <= set(cells_), (attack.targets, sorted(cells_))
        won |= {
            g: (cells_[g]["score"], cells_[g]["check"], cells_[g]["message"])
            for g in attack.targets
            if cells_[g]["score"] > 0 and cells_[g]["check"] != "withheld"
        }
    assert not won, won
