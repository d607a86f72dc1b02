"""Containment and integrity of class grading, in one ``grade`` run of notebook 01.

Links under the submissions root are refused, not followed; grades.csv runs no formula in a
spreadsheet; identical work of different learners is flagged, its grades unchanged; a flood of
error output is capped; tests that use answer code with dynamic features are withheld for a
person.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import background
import nbformat
import pytest
from hostile import FULL, SDPA, filled, minimal, notebooks, set_answer

from autograder import nbcell, paths
from conftest import autograder_job

pytestmark = pytest.mark.slow
NB = "01_attention_from_scratch"
FORMULA = "=cmd"  # a learner id a spreadsheet would run


def _copy(nb):
    return nbformat.from_dict(json.loads(json.dumps(nb)))


def _start_containment(root: Path) -> background.Job:
    """Write the class (see the module docstring) and start its ``grade``: a background job."""
    subs, out = root / "subs", root / "out"
    solution, release = notebooks(root)
    correct = minimal(filled(release, solution))
    sdpa = next(c.source for c in correct.cells if nbcell.grade_id(c) == SDPA)
    reindented = set_answer(_copy(correct), SDPA, sdpa.replace("    ", "  ") + "\n\n")
    dynamic = set_answer(
        _copy(correct), SDPA, sdpa.replace("    return", '    getattr(q, "__dict__")\n    return')
    )
    flood = _copy(correct)
    flood.cells.append(
        nbformat.v4.new_code_cell(
            "try:\n    raise ValueError('e' * 4_000_000)\nexcept ValueError:\n"
            "    for _ in range(40):\n        get_ipython().showtraceback()\n"
        )
    )
    notebooks_of = {
        "alice": correct,
        "carol": reindented,
        FORMULA: release,
        "erin": release,
        "frank": dynamic,
        "gina": flood,
    }
    for student, nb in notebooks_of.items():
        (subs / student / NB).mkdir(parents=True)
        nbformat.write(nb, subs / student / NB / f"{NB}.ipynb")
    (subs / "bob").symlink_to("alice")
    (subs / "dave" / NB).mkdir(parents=True)
    (subs / "dave" / NB / f"{NB}.ipynb").symlink_to(subs / "alice" / NB / f"{NB}.ipynb")
    return autograder_job(root, "grade", str(subs), "--out", str(out), "--jobs", "1")


if NB in paths.notebook_ids():
    background.job("containment", cores=0.5, rank=13)(_start_containment)


@pytest.fixture(scope="module")
def containment():
    if NB not in paths.notebook_ids():
        pytest.skip(f"{NB} is not in solutions/")
    job = background.start("containment")
    done, out = job.wait(), job.folder / "out"
    results = {p.stem: json.loads(p.read_text()) for p in (out / "results" / NB).glob("*.json")}
    with open(out / "grades.csv", newline="") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    return done, results, rows, out


def test_links_are_errors_naming_the_link_and_the_others_are_graded(containment):
    done, results, _, _ = containment
    assert done.returncode == 2, done.stdout + done.stderr  # the two links, the unsafe id
    assert results["bob"]["status"] == "error" and results["dave"]["status"] == "error"
    assert results["bob"]["error"].startswith("bob is a symbolic link (to alice)")
    assert results["dave"]["error"].startswith(f"dave/{NB}/{NB}.ipynb is a symbolic link")
    assert results["alice"]["status"] == "graded" and results["alice"]["score"] == FULL
    assert "COULD NOT BE GRADED (3)" in done.stdout  # the two links and the refused id


def test_grades_csv_runs_no_formula(containment):
    _, results, rows, _ = containment
    assert "'" + FORMULA in rows and FORMULA not in rows
    # refused at the door (issue 42: no unsafe id reaches nbgrader), with its reason, no score
    refused = rows["'" + FORMULA]
    assert refused["status"] == "error" and "refused" in refused["error"], refused
    assert refused["score"] == "" and rows["alice"]["score"] == "10"
    assert not any(v.startswith(("=", "+", "-", "@")) for r in rows.values() for v in r.values())


def test_identical_work_is_flagged_for_a_person_grades_unchanged(containment):
    done, results, _, _ = containment
    flags = {s: [f for f in r["flags"] if f.startswith("identical")] for s, r in results.items()}
    assert flags["alice"] == [  # gina added a cell of her own: the answers are alice's
        "identical to the submissions of carol, gina (the same answers, whitespace aside)"
    ], flags
    assert flags["carol"] == [
        "identical to the submissions of alice, gina (the same answers, whitespace aside)"
    ]
    assert results["carol"]["score"] == FULL
    assert not flags["erin"] and not flags[FORMULA]  # untouched releases are all alike
    assert not flags["frank"]
    assert f"{NB}: alice, carol, gina (the same answers, whitespace aside)" in done.stdout


def test_an_error_flood_is_capped_and_still_graded(containment):
    _, results, _, out = containment
    graded_nb = out / "autograded" / "gina" / NB / f"{NB}.ipynb"
    assert graded_nb.stat().st_size < 3 * 1024**2, graded_nb.stat().st_size
    assert results["gina"]["score"] == FULL
    assert any("cut at the cap" in n for n in results["gina"]["notes"]), results["gina"]["notes"]


def test_tests_using_dynamic_answer_code_are_withheld_for_a_person(containment):
    _, results, _, out = containment
    cells = {c["grade_id"]: c for nb in results["frank"]["notebooks"] for c in nb["cells"]}
    withheld = {g for g, c in cells.items() if c["check"] == "withheld"}
    assert withheld == {g for g in cells if SDPA in g}, cells
    assert all(cells[g]["score"] == 0 for g in withheld)
    assert results["frank"]["score"] == 4  # the softmax tests do not use it
    assert any("withheld" in f and "__dict__" in f for f in results["frank"]["flags"])
    feedback = (out / "feedback" / "frank" / NB / f"{NB}.html").read_text()
    assert "withheld for a person, who may award the points" in feedback
