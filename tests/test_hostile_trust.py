"""Attacks on the grader's trust boundary win nothing; honest controls keep every point, verified.

The session's one ``grade`` run (``--jobs 2``, :mod:`hostile.class_run`) holds every submission
of ``tests/hostile/trust.py``: an honest control per notebook (the instructor's answers), the
attacks on cells, a flood of error output, and the attacks on the submissions folder itself
(symlinked folders, formula-like learner ids).

- every target cell of an attack scores 0 or is withheld for a person (or the whole submission
  is refused with a reason);
- every control gets full automatic marks, every passed cell verified outside the kernel
  (notebook 06's Triton cells are the only ones that cannot be: they may be ``unverified``);
- the flood neither stops grading nor blows up the graded notebook;
- a symlinked learner or assignment folder is refused with a reason, and no cell of
  ``grades.csv`` starts like a spreadsheet formula (``=``, ``+``, ``-``, ``@``).
"""

from __future__ import annotations

import pytest
from hostile.allowlist import ATTACKS as OUTSIDE_ATTACKS
from hostile.trust import (
    ATTACKS,
    CONTROLS,
    ERROR_FLOOD_ATTACK,
    FOLDER_ATTACKS,
    NB01,
    NOTEBOOKS,
    TRITON,
)

from autograder import paths

pytestmark = pytest.mark.slow
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
FLOOD_LIMIT = 8 * 1024**2  # bytes: the cap is 1 MiB per cell, a few cells may reach it


@pytest.fixture(scope="module")
def graded(class_run):
    """The session's one ``grade`` run (:mod:`hostile.class_run`), which holds every submission
    of :mod:`hostile.trust`."""
    if not set(NOTEBOOKS) <= set(paths.notebook_ids()):
        pytest.skip("not every notebook is in solutions/")
    return class_run


def _cells(result: dict) -> dict[str, dict]:
    return {c["grade_id"]: c for nb in result["notebooks"] for c in nb["cells"]}


def _refused(result: dict | None) -> bool:
    """The submission was refused for good, with a reason (not an infrastructure retry)."""
    return bool(result and result["status"] == "error" and result["error"]) and not result.get(
        "retry"
    )


@pytest.mark.parametrize("nb_id", list(CONTROLS))
def test_control_keeps_full_marks_verified(graded, nb_id):
    control = CONTROLS[nb_id]
    result = graded.results[(nb_id, control.learner)]
    assert result["status"] == "graded", (result, graded.stdout[-3000:])
    for grade_id, cell in _cells(result).items():
        assert cell["passed"] and cell["score"] == cell["max_score"], cell
        allowed = {"verified", "unverified"} if grade_id in TRITON else {"verified"}
        assert cell["check"] in allowed, cell


@pytest.mark.parametrize("attack", [*ATTACKS, *OUTSIDE_ATTACKS], ids=lambda a: a.learner)
def test_attack_wins_no_target_cell(graded, attack):
    result = graded.results.get((attack.notebook, attack.learner))
    assert result is not None, graded.stdout[-3000:]
    if _refused(result):
        return
    assert result["status"] == "graded", result
    cells = _cells(result)
    ungraded = set(attack.targets) - set(cells)
    assert ungraded <= set(TRITON), (attack.targets, sorted(cells))  # self-checks have no points
    won = {
        g: (cells[g]["score"], cells[g]["check"])
        for g in attack.targets
        if g in cells and cells[g]["score"] > 0 and cells[g]["check"] != "withheld"
    }
    assert not won, f"threat {attack.threat}: {attack.what}: won {won}"


def test_error_flood_neither_stops_grading_nor_bloats_the_notebook(graded):
    attack = ERROR_FLOOD_ATTACK
    result = graded.results[(attack.notebook, attack.learner)]
    assert result["status"] == "graded", result
    assert all(c["passed"] and c["check"] == "verified" for c in _cells(result).values()), result
    name = attack.notebook
    graded_nb = graded.out / "autograded" / attack.learner / name / f"{name}.ipynb"
    feedback = graded.out / "feedback" / attack.learner / name / f"{name}.html"
    for path in (graded_nb, feedback):
        assert path.stat().st_size < FLOOD_LIMIT, (path.name, path.stat().st_size)


@pytest.mark.parametrize(
    "attack", [a for a in FOLDER_ATTACKS if a.kind != "formula_id"], ids=lambda a: a.learner
)
def test_symlinked_folder_is_refused_with_a_reason(graded, attack):
    result = graded.results.get((NB01, attack.learner))
    if result is None:  # not graded at all: the run must say why
        assert attack.learner in graded.stdout, graded.stdout[-3000:]
        return
    assert result["status"] == "error" and result["error"], (
        f"{attack.what}: graded as {result['status']} with {result.get('score')} points"
    )


def test_no_csv_cell_starts_like_a_formula(graded):
    learners = {row["student_id"].removeprefix("'") for row in graded.rows}
    formulas = [a.learner for a in FOLDER_ATTACKS if a.kind == "formula_id"]
    assert set(formulas) <= learners, sorted(learners)
    for row in graded.rows:
        if row["student_id"].removeprefix("'") in formulas:
            assert row["student_id"].startswith("'"), row
        risky = {k: v for k, v in row.items() if v and v.startswith(FORMULA_STARTS)}
        assert not risky, row
