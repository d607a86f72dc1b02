"""Which submissions a class folder holds: one job per learner and assignment folder.

``grade`` reads ``SUBMISSIONS/<student>/<assignment>/`` (nbgrader's submitted layout). Symbolic
links are never followed, and a learner folder whose name is not a safe id never reaches nbgrader:
both become refused jobs, with the reason the summary and ``grades.csv`` show.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from autograder.classroom.learner_ids import refusal


@dataclass
class Job:
    id: str
    student: str
    assignment: str
    folder: str
    sha256: str = ""
    key: str = ""
    refused: str = ""  # why it is not graded (a symbolic link, an unsafe id), or ""


def shard_of(student: str, count: int) -> int:
    return int(hashlib.sha256(student.encode()).hexdigest(), 16) % count


def discover(submissions: Path, assignments: list[str], shard=None) -> tuple[list[Job], list[str]]:
    """Jobs for ``<student>/<assignment>/`` folders, and one line per thing ignored.

    Symbolic links are never followed: a linked learner folder, assignment folder or notebook
    (one learner's link to another's work would grade that work twice) gives a job that is
    refused with the link in its reason, one per assignment this run grades for a linked learner.
    A learner folder whose name is not a safe id (:mod:`.learner_ids`) gives a refused job for
    each assignment folder in it: its id never reaches nbgrader.
    """
    jobs, ignored, linked = [], [], []
    for student_dir in sorted(p for p in submissions.iterdir() if not p.name.startswith(".")):
        theirs = not shard or shard_of(student_dir.name, shard[1]) == shard[0]
        if student_dir.is_symlink():
            linked += [student_dir] if theirs else []
            continue
        if not student_dir.is_dir():
            ignored.append(f"{student_dir.name}: not a student folder")
            continue
        if not theirs:
            continue
        unsafe = refusal(student_dir.name)
        for folder in sorted(p for p in student_dir.iterdir() if not p.name.startswith(".")):
            if folder.name in assignments and (folder.is_symlink() or folder.is_dir()):
                job_id = f"{folder.name}/{student_dir.name}"
                job = Job(job_id, student_dir.name, folder.name, str(folder))
                job.refused = unsafe or _link_in(folder, submissions)
                if not job.refused:
                    job.folder = str(folder.resolve())
                jobs.append(job)
            else:
                ignored.append(f"{student_dir.name}/{folder.name}: not an assignment of the course")
    graded_here = sorted({j.assignment for j in jobs}) or assignments
    for student_dir in linked:
        why = _link_reason(student_dir, submissions)
        jobs += [
            Job(f"{a}/{student_dir.name}", student_dir.name, a, str(student_dir), refused=why)
            for a in graded_here
        ]
    return sorted(jobs, key=lambda j: (j.student, j.assignment)), ignored


def _link_reason(path: Path, submissions: Path) -> str:
    where = path.relative_to(submissions).as_posix()
    return (
        f"{where} is a symbolic link (to {os.readlink(path)}), which grading never follows: "
        "submit the files themselves"
    )


def _link_in(folder: Path, submissions: Path) -> str:
    """Why ``folder`` cannot be graded because it, or a notebook in it, is a link; or ""."""
    from autograder.grader.structure import SKIPPED_DIRS

    if folder.is_symlink():
        return _link_reason(folder, submissions)
    for root, dirs, files in os.walk(folder):  # never descends into linked folders
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        for name in sorted(files + dirs):
            path = Path(root) / name
            if name.endswith(".ipynb") and path.is_symlink():
                return _link_reason(path, submissions)
    return ""
