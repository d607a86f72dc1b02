"""Answers computed on another thread or process and handed back as constants win nothing.

Each attack of :mod:`hostile.threads` runs here in-process: its notebook's set-up, answer and
attack cells run in one namespace (the kernel), and each target test cell is verified by the
grader's own checks (:func:`cells.verify_cell`). A target must be refuted or withheld, never
verified. The class run (:mod:`hostile.class_run`) grades the same attacks as submissions, in
real sandboxed kernels: each target cell must score 0 or be withheld for a person.
"""

from __future__ import annotations

import nbformat
import pytest
from hostile.threads import ATTACKS
from hostile.trust import build

from autograder import nbcell, paths
from autograder.build import instructor_notebook_text
from autograder.checks.replay import cells


def _kernel(attack) -> tuple[dict, dict]:
    """The attack's namespace after its non-test cells ran, and its test cells by grade id."""
    solution = nbformat.reads(instructor_notebook_text(attack.notebook), as_version=4)
    release = nbformat.read(paths.release_notebook(attack.notebook), as_version=4)
    nb = build(attack, solution, release)
    namespace: dict = {"__name__": "__main__"}
    tests = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if nbcell.is_test(cell):
            tests[nbcell.grade_id(cell)] = cell.source
        elif not (nbcell.grade_id(cell) or "").startswith("selfcheck"):  # Triton: no points
            source = "\n".join(
                line for line in cell.source.splitlines() if not line.startswith(("%", "!"))
            )  # IPython magics: no kernel here
            exec(compile(source, nbcell.grade_id(cell) or "cell", "exec"), namespace)
    return namespace, tests


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.learner)
def test_an_answer_computed_out_of_sight_is_never_verified(attack):
    namespace, tests = _kernel(attack)
    kernel = cells.InProcessKernel(namespace)
    verdicts = {g: cells.verify_cell(tests[g], kernel) for g in attack.targets}
    won = {g: v for g, v in verdicts.items() if v.status == "verified"}
    assert not won, f"{attack.what}: verified {sorted(won)}"
    for verdict in verdicts.values():
        assert verdict.message and "\n" not in verdict.message, verdict


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
