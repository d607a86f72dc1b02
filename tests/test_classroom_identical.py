"""Copied work (``classroom.identical``): identical submissions flagged, naming the others."""

import nbformat
from notebook_cells import tiny_release

from autograder.classroom.identical import flag_identical
from autograder.classroom.submissions import Job
from autograder.grader.files import read_json

# ----------------------------------------------------------------------------- identical work


def test_identical_submissions_are_flagged_naming_the_others(tmp_path):
    """Same answers (whitespace aside) or same bytes: a flag naming the other learners in each
    result, rewritten only when it changes; untouched releases are alike and not flagged."""
    out = tmp_path / "out"
    (out / "release" / "hw").mkdir(parents=True)
    nbformat.write(tiny_release(), out / "release" / "hw" / "a.ipynb")

    def answered(source):
        nb = tiny_release()
        nb.cells[1].source = source
        return nbformat.writes(nb)

    files = {
        "ann": answered("def f(x):\n    return x + 1\n"),
        "bo": answered("def f(x):\n  return x  +  1"),
        "fay": answered("def f(x):\n    return x - 1\n"),
        "di": nbformat.writes(tiny_release()),
        "ed": nbformat.writes(tiny_release()).replace('"cells"', '"cells" '),
        "gus": '{"cells": [',
    }
    files["cy"], files["hal"] = files["ann"], files["gus"]
    jobs, results = [], []
    for student, text in files.items():
        (tmp_path / student).mkdir()
        (tmp_path / student / "a.ipynb").write_text(text)
        jobs.append(Job(f"hw/{student}", student, "hw", str(tmp_path / student)))
        results.append({"student": student, "assignment": "hw", "flags": ["cell 2: uses exec"]})
    lines = flag_identical(out, jobs, results)
    assert lines == [
        "hw: ann, bo, cy (the same answers, whitespace aside)",
        "hw: gus, hal (the same notebook bytes)",
    ]
    flags = {r["student"]: r["flags"] for r in results}
    assert flags["bo"][0] == (
        "identical to the submissions of ann, cy (the same answers, whitespace aside)"
    )
    assert flags["hal"] == [
        "identical to the submission of gus (the same notebook bytes)",
        flags["hal"][1],
    ]
    assert all(flags[s] == ["cell 2: uses exec"] for s in ("fay", "di", "ed"))
    written = {p.stem: p.stat().st_mtime_ns for p in (out / "results" / "hw").glob("*.json")}
    assert sorted(written) == ["ann", "bo", "cy", "gus", "hal"]
    assert read_json(out / "results" / "hw" / "ann.json")["flags"] == flags["ann"]
    assert flag_identical(out, jobs, results) == lines
    assert {
        p.stem: p.stat().st_mtime_ns for p in (out / "results" / "hw").glob("*.json")
    } == written
