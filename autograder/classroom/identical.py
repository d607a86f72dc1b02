"""Identical submissions of different learners: a flag for a person, never a grade change.

Two learners' submissions of one assignment are identical when their notebook files have the
same bytes, or when their answer cells hold the same sources once whitespace is normalised
(re-indenting or re-running a copy changes neither). A submission whose answers are still the
release's (nothing done yet) is left out: every untouched copy is alike.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder import nbcell
from autograder.grader.files import write_json
from autograder.grader.structure import (
    MAX_NOTEBOOK_BYTES,
    SubmissionError,
    choose_notebooks,
    restore_structure,
    submission_files,
)

FLAG = "identical to the submission"  # every flag of this module starts so (recomputed each run)
SAME_ANSWERS = "the same answers, whitespace aside"


@dataclass(frozen=True)
class Fingerprint:
    data: str  # sha256 of the graded notebooks' bytes
    answers: str | None  # sha256 of the normalised answer sources, None if unreadable
    untouched: bool  # the answers are the release's


def _normalised(source: str) -> str:
    return " ".join(source.split())


def answers_of(nb) -> dict[str, str]:
    """Answer cell grade id -> its source, whitespace normalised."""
    return {nbcell.grade_id(c): _normalised(c.source) for c in nb.cells if nbcell.is_answer(c)}


def _digest(parts: dict) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def fingerprint(folder: Path, releases: dict) -> Fingerprint | None:
    """What two identical submissions share; None when no expected notebook can be read.

    ``releases``: notebook file name -> its release notebook (read).
    """
    try:
        chosen = choose_notebooks(folder, submission_files(folder, []), releases, [])
    except SubmissionError:
        return None
    if any(path.stat().st_size > MAX_NOTEBOOK_BYTES for path in chosen.values()):
        return None
    raw = {name: path.read_bytes() for name, path in chosen.items()}
    data = _digest({name: hashlib.sha256(b).hexdigest() for name, b in raw.items()})
    answers = {}
    try:
        for name, text in raw.items():
            nb = nbformat.reads(text.decode("utf-8"), as_version=4)
            restore_structure(nb, releases[name])
            answers[name] = answers_of(nb)
    except Exception:  # noqa: BLE001 (a corrupt notebook: its bytes still compare)
        return Fingerprint(data, None, False)
    untouched = answers == {name: answers_of(nb) for name, nb in releases.items()}
    return Fingerprint(data, _digest(answers), untouched)


def identical_groups(prints: dict[str, Fingerprint]) -> list[tuple[list[str], str]]:
    """Groups of two or more learners (sorted) sharing answers or bytes, with what they share."""
    by_answers: dict[str, list[str]] = {}
    by_data: dict[str, list[str]] = {}
    for student, fp in sorted(prints.items()):
        if not fp.untouched:
            by_data.setdefault(fp.data, []).append(student)
            if fp.answers is not None:
                by_answers.setdefault(fp.answers, []).append(student)
    found = []
    for students in by_answers.values():
        if len(students) > 1:
            exact = len({prints[s].data for s in students}) == 1
            found.append((students, "the same notebook bytes" if exact else SAME_ANSWERS))
    for students in by_data.values():  # bytes alike but answers unreadable (a corrupt file)
        if len(students) > 1 and not any(set(students) <= set(g) for g, _ in found):
            found.append((students, "the same notebook bytes"))
    return sorted(found)


def flag_identical(out: Path, jobs, results: list[dict]) -> list[str]:
    """Add an ``identical to ...`` flag to each affected result (rewriting only results whose
    flags change) and return one summary line per group. Links (refused jobs) are not read."""
    by_key = {(r["assignment"], r["student"]): r for r in results}
    lines = []
    for assignment in sorted({j.assignment for j in jobs}):
        releases = {
            p.name: nbformat.read(p, as_version=4)
            for p in sorted((out / "release" / assignment).glob("*.ipynb"))
        }
        prints = {}
        for job in jobs:
            if job.assignment == assignment and not job.refused and releases:
                fp = fingerprint(Path(job.folder), releases)
                prints.update({job.student: fp} if fp else {})
        flags: dict[str, list[str]] = {}
        for students, what in identical_groups(prints):
            lines.append(f"{assignment}: {', '.join(students)} ({what})")
            for student in students:
                others = [s for s in students if s != student]
                plural = "s" if len(others) > 1 else ""
                flag = f"{FLAG}{plural} of {', '.join(others)} ({what})"
                flags.setdefault(student, []).append(flag)
        for job in (j for j in jobs if j.assignment == assignment):
            result = by_key.get((assignment, job.student))
            if result is None:
                continue
            kept = [f for f in result.get("flags", []) if not f.startswith(FLAG)]
            new = flags.get(job.student, []) + kept
            if new != result.get("flags", []):
                result["flags"] = new
                write_json(out / "results" / assignment / f"{job.student}.json", result)
    return lines
