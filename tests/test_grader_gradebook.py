"""Gradebooks (``grader.gradebook``): shards merged, manual grades carried, ``grades.csv`` safe."""

import csv
import shutil
from pathlib import Path

import pytest

from autograder.grader.gradebook import (
    MergeError,
    copy_assignment,
    export_csv,
    merge,
    open_gradebook,
    submission_record,
    write_submission,
)
from conftest import autograder

# ----------------------------------------------------------------------------- gradebooks


@pytest.fixture(scope="module")
def empty_db(tmp_path_factory) -> Path:
    """An empty gradebook, made once: creating one runs alembic, which takes seconds."""
    path = tmp_path_factory.mktemp("gradebooks") / "empty.db"
    with open_gradebook(path):
        pass
    return path


def _gradebook(empty: Path, path: Path, students: dict[str, float], points=(1.0, 2.0)) -> Path:
    shutil.copyfile(empty, path)
    with open_gradebook(path) as gb:
        gb.add_assignment("hw")
        gb.add_notebook("hw", "hw")
        for i, p in enumerate(points):
            gb.add_grade_cell(f"test_{i}", "hw", "hw", max_score=p, cell_type="code")
            gb.add_source_cell(
                f"test_{i}", "hw", "hw", cell_type="code", locked=True, source="pass", checksum="c"
            )
        for student, score in students.items():
            gb.add_student(student)
            gb.add_submission("hw", student)
            for grade in gb.find_submission("hw", student).notebooks[0].grades:
                grade.auto_score = min(score, grade.max_score)
                grade.needs_manual_grade = False
            gb.db.commit()
    return path


def test_merge_unions_shards_and_refuses_conflicts(tmp_path, empty_db):
    a = _gradebook(empty_db, tmp_path / "a.db", {"ann": 1.0, "bo": 0.0})
    b = _gradebook(empty_db, tmp_path / "b.db", {"cy": 2.0})
    shutil.copyfile(empty_db, tmp_path / "all.db")
    report = merge([a, b], tmp_path / "all.db")
    assert report["added"] == 3 and not report["conflicts"]
    again = merge([a, b], tmp_path / "all.db")
    assert again["same"] == 3 and again["added"] == 0
    clash = _gradebook(empty_db, tmp_path / "c.db", {"ann": 0.0})
    assert merge([clash], tmp_path / "all.db")["conflicts"] == [f"hw/ann ({clash})"]
    with open_gradebook(tmp_path / "all.db") as gb:
        assert {s.student.id: s.score for s in gb.find_assignment("hw").submissions} == {
            "ann": 2.0,
            "bo": 0.0,
            "cy": 3.0,
        }
    assert merge([clash], tmp_path / "all.db", replace=True)["replaced"] == 1
    other = _gradebook(empty_db, tmp_path / "d.db", {"ed": 1.0}, points=(5.0,))
    with pytest.raises(MergeError, match="different test cells"):
        merge([other], tmp_path / "all.db")


def test_manual_grades_and_comments_travel_with_a_merge(tmp_path, empty_db):
    a = _gradebook(empty_db, tmp_path / "a.db", {"ann": 1.0})
    with open_gradebook(a) as gb:
        grade = gb.find_submission("hw", "ann").notebooks[0].grades[0]
        grade.manual_score, grade.extra_credit = 0.5, 1.0
        gb.db.commit()
        record = submission_record(gb, "hw", "ann")
    shutil.copyfile(empty_db, tmp_path / "out.db")
    merge([a], tmp_path / "out.db")
    with open_gradebook(tmp_path / "out.db") as gb:
        assert submission_record(gb, "hw", "ann") == record
        copy_assignment(gb, gb, "hw")  # a gradebook agrees with itself
        write_submission(gb, "hw", "ann", record)
        assert submission_record(gb, "hw", "ann") == record


def test_grades_csv_neutralises_formulas_and_keeps_numbers(tmp_path, empty_db):
    """OWASP CSV injection: a text cell that starts with = + - @ (or tab, CR) gets a leading '."""
    evil = '=HYPERLINK("http://x","y")'
    db = _gradebook(empty_db, tmp_path / "g.db", {evil: 2.0, "ann": 1.0})
    graded = {"assignment": "hw", "status": "graded", "notebooks": [], "notes": ["+1"]}
    results = [
        {**graded, "student": evil, "flags": ["@SUM(A1)", "-2"]},
        {**graded, "student": "ann", "flags": ["cell 3: uses exec"]},
        {"student": "\tbo", "assignment": "hw", "status": "error", "error": "\r=1+1"},
    ]
    export_csv(db, results, tmp_path / "g.csv")
    with open(tmp_path / "g.csv", newline="") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    assert sorted(rows) == ["'\tbo", "'" + evil, "ann"]
    assert rows["'" + evil]["flags"] == "'@SUM(A1); -2" and rows["ann"]["notes"] == "'+1"
    assert rows["'\tbo"]["error"] == "'\r=1+1"
    assert rows["'" + evil]["score"] == "3" and rows["ann"]["max_score"] == "3"
    assert rows["ann"]["flags"] == "cell 3: uses exec"


@pytest.mark.slow
def test_merge_command_writes_the_gradebook_and_a_csv(tmp_path, empty_db):
    a = _gradebook(empty_db, tmp_path / "a.db", {"ann": 1.0})
    b = _gradebook(empty_db, tmp_path / "b.db", {"bo": 3.0})
    done = autograder(
        "merge", str(a), str(b), "--out", str(tmp_path / "m.db"), "--csv", str(tmp_path / "m.csv")
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 added" in done.stdout
    with open(tmp_path / "m.csv", newline="") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    assert rows["ann"]["score"] == "2" and rows["bo"]["score"] == "3"
    missing = autograder("merge", str(tmp_path / "nope.db"), "--out", str(tmp_path / "m.db"))
    assert missing.returncode == 2 and "no such gradebook" in missing.stdout


@pytest.mark.slow
def test_grade_command_reports_a_missing_folder(tmp_path):
    done = autograder("grade", str(tmp_path / "nope"), "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and "is not a folder" in done.stdout
