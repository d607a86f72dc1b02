"""Attacks on the grading machine win nothing (issue 27, class 6), read from the class run.

:mod:`hostile.machine` puts its learners in the session's one ``grade`` run
(:mod:`hostile.class_run`, ``--jobs 2``):

- three learners swap every entry of their kernel's runtime folder for a link to a root-owned
  canary, in a loop, turn ``kernel.json`` into a folder, and leave notes and a big file for the
  next learner: the canary keeps its mode, owner and content, every one of them (and everyone
  after them) is graded, and no learner prints a note another left.
"""

from __future__ import annotations

import os
import stat

import nbformat
import pytest
from hostile import machine

pytestmark = pytest.mark.slow


def _outputs_text(graded, learner: str) -> str:
    name = machine.NB01
    nb = nbformat.read(graded.out / "autograded" / learner / name / f"{name}.ipynb", as_version=4)
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            parts.append(str(out.get("text", "")))
            parts += [str(v) for v in out.get("data", {}).values()]
    return "\n".join(parts)


def test_no_root_operation_follows_a_link_a_kernel_made(class_run):
    canary = machine.canary(class_run.out.parent)
    info = os.lstat(canary)
    assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600, oct(info.st_mode)
    assert info.st_uid == os.geteuid()
    assert canary.read_text() == machine.CANARY_TEXT


def test_runtime_attackers_and_those_after_them_are_all_graded(class_run):
    for learner in machine.RUNTIME_LEARNERS:
        result = class_run.results[(machine.NB01, learner)]
        assert result["status"] == "graded", result
    workers = [class_run.results[(machine.NB01, w)]["worker"] for w in machine.RUNTIME_LEARNERS]
    assert len(set(workers)) < len(workers), workers  # two of them shared a worker
    unstarted = [
        (r["student"], r["error"])
        for r in class_run.results.values()
        if r["status"] != "graded" and "could not start" in (r.get("error") or "")
    ]
    assert not unstarted, unstarted


def test_no_learner_reads_what_another_left(class_run):
    for learner in machine.RUNTIME_LEARNERS:
        text = _outputs_text(class_run, learner)
        assert "FOUND " + machine.NOTE not in text, (learner, text[:2000])
