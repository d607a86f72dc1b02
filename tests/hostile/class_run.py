"""The one ``grade`` run of a test session: every notebook's honest control and its attacks.

``grade --jobs 2`` over one submissions folder that holds, for every notebook of the course:

- its honest control (:data:`hostile.trust.CONTROLS`): the instructor's answers in the whole
  release notebook (:func:`hostile.replay.correct`);
- the replay attacks of :mod:`hostile.replay` (learners ``noop``, ``junk``, ``compare``,
  ``forger``);
- the untouched release (learner :data:`RELEASE`): with the control, what ``validate`` judges;

the trust-boundary attacks of :mod:`hostile.trust`: attacks on cells, a flood of error
output, and attacks on the folder itself (symlinked folders, formula-like learner ids); answers
computed out of the recorder's sight (:mod:`hostile.threads`); rules read by their letter
(:mod:`hostile.loopholes`); "how" rules read off the replayed record (:mod:`hostile.records`);
and the
attacks on the grading machine of :mod:`hostile.machine` (runtime folders, scripts in outputs).

``tests/test_hostile_replay.py``, ``tests/test_hostile_trust.py``,
``tests/test_hostile_machine.py`` and ``tests/test_validate.py`` read the same run through the
``class_run`` fixture (``conftest.py``), so no notebook is graded twice for them. It is a
background job (``tests/background.py``): it grades while the fast tier runs.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import nbformat
from background import Job

from autograder import paths
from autograder.build import instructor_notebook_text

from . import (
    allowlist,
    ids,
    integers,
    loopholes,
    machine,
    records,
    replay,
    serving_chunks,
    serving_sharing,
    serving_speculative,
    threads,
    trust,
)

RELEASE = "release"  # the learner who handed in the untouched release notebook


@dataclass
class ClassRun:
    stdout: str
    returncode: int
    results: dict  # (assignment, learner) -> result JSON
    rows: list[dict]  # grades.csv
    out: Path


def _pair(notebook: str):
    """The instructor notebook (from its jupytext source) and the committed release."""
    solution = nbformat.reads(instructor_notebook_text(notebook), as_version=4)
    return solution, nbformat.read(paths.release_notebook(notebook), as_version=4)


def _write(subs: Path, learner: str, notebook: str, nb) -> None:
    folder = subs / learner / notebook
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / f"{notebook}.ipynb")


def _write_folder_attacks(subs: Path) -> None:
    for attack in trust.FOLDER_ATTACKS:
        folder = subs / attack.learner
        if attack.kind == "student_link":
            folder.symlink_to(attack.points_at)
        elif attack.kind == "assignment_link":
            folder.mkdir()
            (folder / trust.NB01).symlink_to(Path("..") / attack.points_at / trust.NB01)
        else:  # formula_id: a folder with no notebook is graded (as an error) at once
            (folder / trust.NB01).mkdir(parents=True)
            (folder / trust.NB01 / "README.txt").write_text("see attached\n")


def write_submissions(subs: Path, canary_folder: Path) -> None:
    pairs = {nb: _pair(nb) for nb in paths.notebook_ids()}
    for nb_id, (solution, release) in pairs.items():
        _write(subs, trust.CONTROLS[nb_id].learner, nb_id, replay.correct(solution, release))
        _write(subs, RELEASE, nb_id, release)
        for learner, nb in replay.submissions(solution, release).items():
            _write(subs, learner, nb_id, nb)
    machine.write_canary(canary_folder)
    attacks = [
        *trust.ATTACKS,
        *threads.ATTACKS,
        *allowlist.ATTACKS,
        *loopholes.attacks(),
        *records.ATTACKS,
        *serving_sharing.attacks(),
        *serving_chunks.attacks(),
        *serving_speculative.ATTACKS,
        trust.ERROR_FLOOD_ATTACK,
    ]
    for attack in [*attacks, *integers.submissions(), *machine.attacks(canary_folder)]:
        _write(subs, attack.learner, attack.notebook, trust.build(attack, *pairs[attack.notebook]))
    _write_folder_attacks(subs)
    ids.write(subs, trust.build, pairs)


def start(folder: Path, autograder_job) -> Job:
    """Write the submissions under ``folder`` and start ``grade --jobs 2`` over them with
    ``autograder_job(folder, *args)`` (``conftest``)."""
    write_submissions(folder / "subs", folder)
    return autograder_job(
        folder, "grade", str(folder / "subs"), "--out", str(folder / "out"), "--jobs", "2"
    )


def read(job: Job) -> ClassRun:
    """Wait for the run and read its results, gradebook CSV and output."""
    done = job.wait()
    out = job.folder / "out"
    return ClassRun(done.stdout + done.stderr, done.returncode, *_read(out), out)


def _read(out: Path) -> tuple[dict, list[dict]]:
    results = {}
    for path in (out / "results").glob("*/*.json"):
        results[(path.parent.name, path.stem)] = json.loads(path.read_text())
    rows = []
    if (out / "grades.csv").is_file():
        with open(out / "grades.csv", newline="") as f:
            rows = list(csv.DictReader(f))
    return results, rows
