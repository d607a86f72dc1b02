"""The one ``grade`` run of a test session: every notebook's honest control and its attacks.

``grade --jobs 2`` over one submissions folder that holds, for every notebook of the course:

- its honest control (:data:`hostile.trust.CONTROLS`): the instructor's answers in the whole
  release notebook (:func:`hostile.replay.correct`);
- the replay attacks of :mod:`hostile.replay` (learners ``noop``, ``junk``, ``compare``,
  ``forger``);
- the untouched release (learner :data:`RELEASE`): with the control, what ``validate`` judges;

and the trust-boundary attacks of :mod:`hostile.trust`: attacks on cells, a flood of error
output, and attacks on the folder itself (symlinked folders, formula-like learner ids).

``tests/test_hostile_replay.py``, ``tests/test_hostile_trust.py`` and ``tests/test_validate.py``
read the same run through the ``class_run`` fixture (``conftest.py``), so no notebook is graded
twice for them. The run starts in the background as soon as the session's tests are collected,
and grades while the fast tier runs (a ``grade`` run keeps about 1.7 of 2 cores busy, the fast
tier one); the tests that read it come first in the slow tier, before any other ``grade`` run.
"""

from __future__ import annotations

import csv
import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder import paths
from autograder.build import instructor_notebook_text

from . import replay, trust

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


def write_submissions(subs: Path) -> None:
    pairs = {nb: _pair(nb) for nb in paths.notebook_ids()}
    for nb_id, (solution, release) in pairs.items():
        _write(subs, trust.CONTROLS[nb_id].learner, nb_id, replay.correct(solution, release))
        _write(subs, RELEASE, nb_id, release)
        for learner, nb in replay.submissions(solution, release).items():
            _write(subs, learner, nb_id, nb)
    for attack in [*trust.ATTACKS, trust.ERROR_FLOOD_ATTACK]:
        _write(subs, attack.learner, attack.notebook, trust.build(attack, *pairs[attack.notebook]))
    _write_folder_attacks(subs)


class Running:
    """The class run, started with :meth:`start`; :meth:`result` waits for it and reads it."""

    def __init__(self, root: Path, start):
        """Write the submissions under ``root`` and start ``grade`` over them with
        ``start(argv, log)`` (a ``subprocess.Popen`` writing its output to the open ``log``)."""
        self.root, self.subs, self.out = root, root / "subs", root / "out"
        write_submissions(self.subs)
        self.log = open(root / "grade.log", "w+")  # a file: a pipe would fill and stop grade
        argv = ["grade", str(self.subs), "--out", str(self.out), "--jobs", "2"]
        self.process = start(argv, self.log)
        self._result: ClassRun | None = None

    def stop(self) -> None:
        """Stop the run if it still runs (an interrupted session), its workers and kernels too."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.log.close()

    def result(self, timeout: float = 1800) -> ClassRun:
        if self._result is None:
            returncode = self.process.wait(timeout=timeout)
            self.log.seek(0)
            self._result = ClassRun(self.log.read(), returncode, *_read(self.out), self.out)
        return self._result


def _read(out: Path) -> tuple[dict, list[dict]]:
    results = {}
    for path in (out / "results").glob("*/*.json"):
        results[(path.parent.name, path.stem)] = json.loads(path.read_text())
    rows = []
    if (out / "grades.csv").is_file():
        with open(out / "grades.csv", newline="") as f:
            rows = list(csv.DictReader(f))
    return results, rows
