"""Hostile and broken submissions of notebook 01, graded in one run with correct ones.

Every case must end with a definite, explained grade or a named error (``tests/hostile``), the
correct submissions in the same run keep full marks, nothing is lost, nothing outside a
submission is read or written, and a second run regrades nothing.
"""

import hashlib
import json
import re
import sys
from pathlib import Path

import background
import pytest
from hostile import after_grade, catalogue, notebooks, write_submissions

from autograder import paths
from autograder.build import instructor_notebook_text
from autograder.grader.isolation import detect
from conftest import autograder, autograder_job

pytestmark = pytest.mark.slow
NB = "01_attention_from_scratch"
# The budget is wall-clock from the kernel's start. ignores_interrupt needs its earlier cells
# (about 1 s alone), the 5-s cell limit and the grace after the interrupt (about 4 s) to fit in it:
# at 15 s, beside two CPU hogs, pytest's fast tier and the browser job (fresh31), and at 20 s once
# in CI, the budget ran out first ("time budget", not "did not stop"). infinite_loop needs the
# opposite: its six test cells wait out 5 s each (about 31 s in all) and must not all fit.
# 26 s (24 s before the finishing reserve) leaves each about 7 s.
SETTINGS = ["--jobs", "2", "--cell-timeout", "5", "--budget", "26"]


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            h.update(path.name.encode() + path.read_bytes())
    return h.hexdigest()


def _start_hostile(root: Path) -> background.Job:
    """Write every case's submission and start their ``grade`` with the correct ones."""
    subs, out = root / "submissions", root / "out"
    solution, release = notebooks(root)
    places = {
        "repo": str(paths.REPO_ROOT),
        "out": str(out),
        "submissions": str(subs),
        "solution": str(paths.source_text(NB)),
        "other_student": str(subs / "correct_1" / NB / f"{NB}.ipynb"),
        "other_student_dir": str(subs / "correct_1" / NB),
    }
    cases = {c.student: c for c in catalogue(solution, release, places)}
    write_submissions(subs, list(cases.values()), NB)
    before = {s: _digest(subs / s) for s in cases}
    # nice 0: its limits are tight (5 s a cell), so it never yields to the other tests
    # run through after_grade: whether a kernel of the run is left can only be read at its end,
    # before another run (a later job, a test) claims the same block of kernel uids
    leftovers = (sys.executable, str(Path(after_grade.__file__)), str(root / "leftovers.json"))
    job = autograder_job(
        root, "grade", str(subs), "--out", str(out), *SETTINGS, nice=0, wrapper=leftovers
    )
    job.context = {"cases": cases, "subs": subs, "out": out, "before": before, "places": places}
    return job


# In the middle of the chain, not last: much of its time is spent waiting out its own time limits,
# and at the end of the session nothing else filled those waits (the machine ran at 1.3 cores
# for its last 40 s). Its kernels run at nice 0, so the jobs beside it (nice 5) yield to them.
if NB in paths.notebook_ids():
    background.job("hostile", cores=1, rank=11)(_start_hostile)


@pytest.fixture(scope="module")
def hostile():
    if NB not in paths.notebook_ids():
        pytest.skip(f"{NB} is not in solutions/")
    job = background.start("hostile")
    first = job.wait()
    out = job.context["out"]
    results = {
        s: json.loads((out / "results" / NB / f"{s}.json").read_text())
        for s in job.context["cases"]
        if (out / "results" / NB / f"{s}.json").is_file()
    }
    return {
        **job.context,
        "first": first,
        "seconds": job.seconds,
        "results": results,
        "sandboxed": detect().sandboxed,
    }


def test_every_submission_has_a_result_and_the_run_says_some_failed(hostile):
    first = hostile["first"]
    assert sorted(hostile["results"]) == sorted(hostile["cases"]), first.stdout + first.stderr
    assert first.returncode == 2, first.stdout + first.stderr  # corrupt files are errors
    assert "COULD NOT BE GRADED" in first.stdout
    assert "Traceback" not in first.stdout
    print(f"\nhostile run: {len(hostile['cases'])} submissions in {hostile['seconds']:.0f} s")


def test_each_case_gets_its_definite_outcome(hostile):
    results, problems = hostile["results"], []
    for student, case in hostile["cases"].items():
        r, e = results[student], case.expect
        if e.needs_sandbox and not hostile["sandboxed"]:
            continue
        where = f"{student} ({case.what})"
        if r["status"] != e.status:
            problems.append(f"{where}: status {r['status']}: {r.get('error')}")
            continue
        if e.status == "error":
            if e.error not in (r["error"] or ""):
                problems.append(f"{where}: error {r['error']!r} lacks {e.error!r}")
            continue
        cells = [c for nb in r["notebooks"] for c in nb["cells"]]
        if e.score_in and r["score"] not in e.score_in:
            problems.append(f"{where}: score {r['score']} not in {e.score_in}")
        waiting = [c for c in cells if c.get("check") == "withheld"]
        if e.withheld and not waiting:
            problems.append(f"{where}: nothing withheld for a person")
        awarded = sum(c["max_score"] for c in waiting) if e.withheld else 0
        if e.score is not None and r["score"] + awarded != e.score:
            problems.append(f"{where}: score {r['score']} != {e.score}: {_story(r)}")
        if e.at_most_control and r["score"] > results[e.at_most_control]["score"]:
            problems.append(f"{where}: scored more than without the attack")
        if any(not c["passed"] and not c["message"] for c in cells):
            problems.append(f"{where}: a failed cell has no explanation")
        stopped = " ".join(nb["stopped"] or "" for nb in r["notebooks"])
        if e.stopped and e.stopped not in stopped:
            problems.append(f"{where}: stopped {stopped!r} lacks {e.stopped!r}; {_story(r)}")
        if e.flag and not any(e.flag in f for f in r["flags"]):
            problems.append(f"{where}: no flag with {e.flag!r}: {r['flags']}")
        if e.note and not any(e.note in n for n in r["notes"]):
            problems.append(f"{where}: no note with {e.note!r}: {r['notes']}")
        if e.refuted and not any(c.get("check") == "refuted" for c in cells):
            problems.append(f"{where}: nothing refuted outside the kernel")
    assert not problems, "\n".join(problems + _worker_logs(hostile["out"]))


def _worker_logs(out: Path) -> list[str]:
    """The end of each grading worker's log (a forkserver lost, modules it could not import)."""
    return [
        f"{log.name}: {line}"
        for log in sorted((out / "logs").glob("worker-*.log"))
        for line in log.read_text(errors="replace").splitlines()[-8:]
    ]


def _story(result: dict) -> str:
    """How a case's notebooks ran, for a failure's message: a timing-dependent outcome that
    differs on another machine says there where its time went."""
    return "; ".join(
        f"{nb['seconds']} s, timing {nb['timing']}, cells "
        + ", ".join(f"{c['grade_id']} {c['score']} {c['message'][:50]!r}" for c in nb["cells"])
        for nb in result["notebooks"]
    )


def test_correct_submissions_keep_full_marks_verified(hostile):
    for student in ("correct_1", "correct_2", "noisy"):
        r = hostile["results"][student]
        cells = [c for nb in r["notebooks"] for c in nb["cells"]]
        assert r["score"] == r["max_score"] == 10, r
        assert all(c["check"] == "verified" for c in cells), cells


def test_nothing_outside_a_submission_was_touched(hostile):
    subs, places = hostile["subs"], hostile["places"]
    after = {s: _digest(subs / s) for s in hostile["cases"]}
    assert after == hostile["before"]
    for key in ("out", "submissions", "other_student_dir", "repo"):
        assert not (Path(places[key]) / "pwned.txt").exists()
    assert not list(subs.rglob("pwned*"))
    if detect().switches_uid:  # kernels ran as uids of their own: none is left running
        found = json.loads((hostile["out"].parent / "leftovers.json").read_text())
        assert found["uid_base"] is not None, hostile["first"].stdout[-2000:]
        assert found["checked"], "another grade run took the block before it could be read"
        assert not found["left"], found


def test_feedback_never_shows_hidden_tests(hostile):
    out = hostile["out"]
    hidden = {
        line.strip()
        for block in re.findall(
            r"BEGIN HIDDEN TESTS(.*?)### END HIDDEN TESTS", instructor_notebook_text(NB), re.S
        )
        for line in block.encode().decode("unicode_escape").splitlines()
        if len(line.strip().strip('",')) > 8
    }
    assert hidden
    pages = list((out / "feedback").rglob("*.html"))
    assert len(pages) == sum(1 for r in hostile["results"].values() if r["status"] == "graded")
    for page in pages:
        html = page.read_text()
        assert "BEGIN HIDDEN TESTS" not in html and "Traceback (most recent" not in html
        leaked = [line for line in hidden if line.strip('",') in html]
        assert not leaked, (page, leaked)


def test_gradebook_and_csv_agree_with_the_results(hostile):
    import csv

    from autograder.grader.gradebook import open_gradebook

    out, results = hostile["out"], hostile["results"]
    with open(out / "grades.csv", newline="") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    assert sorted(rows) == sorted(results)
    with open_gradebook(out / "gradebook.db") as gb:
        for student, r in results.items():
            assert rows[student]["status"] == r["status"]
            if r["status"] == "graded":
                assert float(rows[student]["score"]) == r["score"]
                assert gb.find_submission(NB, student).score == r["score"]
            else:
                assert rows[student]["score"] == "" and rows[student]["error"]


def test_second_run_regrades_nothing(hostile):
    out = hostile["out"]
    stamps = {p: p.stat().st_mtime_ns for p in (out / "results").rglob("*.json")}
    again = autograder("grade", str(hostile["subs"]), "--out", str(out), *SETTINGS)
    assert again.returncode == 2
    assert "(0 this run" in again.stdout, again.stdout
    assert {p: p.stat().st_mtime_ns for p in (out / "results").rglob("*.json")} == stamps
