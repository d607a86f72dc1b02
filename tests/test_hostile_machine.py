"""Attacks on the grading machine win nothing (issue 27, class 6), read from the class run.

:mod:`hostile.machine` puts its learners in the session's one ``grade`` run
(:mod:`hostile.class_run`, ``--jobs 2``):

- three learners swap every entry of their kernel's runtime folder for a link to a root-owned
  canary, in a loop, turn ``kernel.json`` into a folder, and leave notes and a big file for the
  next learner: the canary keeps its mode, owner and content, every one of them (and everyone
  after them) is graded, and no learner prints a note another left;
- one learner shows eleven script carriers beside honest text, a PNG and a table: no script of
  theirs reaches the graded notebook's outputs, the feedback or the formgrader's page of it, and
  the honest outputs stay.
"""

from __future__ import annotations

import os
import stat
from html.parser import HTMLParser

import nbformat
import pytest
from hostile import machine

pytestmark = pytest.mark.slow
SAFE_OUTPUTS = {"text/plain", "text/html", "text/markdown", "text/latex", "image/png", "image/jpeg"}
SAFE_OUTPUTS |= {"application/json"}


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


class _Active(HTMLParser):
    """Whatever in a page a browser would run for the learner: their script, an event handler,
    a ``javascript:`` URL, a frame, an object or an embed (escaped text is inert)."""

    def __init__(self):
        super().__init__()
        self.found: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self._in_script = tag == "script"
        if tag in ("iframe", "object", "embed"):
            self.found.append(tag)
        for name, value in attrs:
            value = (value or "").strip().lower()
            learners = "alert(" in value or machine.SCRIPT_MARK in value  # not the page's own
            if (name.startswith("on") and learners) or value.startswith("javascript:"):
                self.found.append(f"{tag} {name}={value}")

    def handle_data(self, data):
        if self._in_script and (machine.SCRIPT_MARK in data or "alert(" in data):
            self.found.append(f"script {data[:60]}")

    def handle_endtag(self, tag):
        self._in_script = False


def _active(html: str) -> list[str]:
    parser = _Active()
    parser.feed(html)
    return parser.found


def test_no_learner_script_reaches_a_page_a_person_opens(class_run):
    from nbconvert import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers

    from autograder.grader.nbgrader_settings import class_config

    learner, name = machine.SCRIPT_LEARNER, machine.NB01
    graded_nb = class_run.out / "autograded" / learner / name / f"{name}.ipynb"
    feedback = class_run.out / "feedback" / learner / name / f"{name}.html"
    nb_text = graded_nb.read_text()
    nb = nbformat.reads(nb_text, as_version=4)
    kinds = {k for c in nb.cells for o in c.get("outputs", []) for k in o.get("data", {})}
    assert kinds <= SAFE_OUTPUTS, kinds - SAFE_OUTPUTS
    assert "image/png" in kinds, kinds
    outputs = "".join(
        str(o.get("data", {}).get(kind, ""))
        for c in nb.cells
        for o in c.get("outputs", [])
        for kind in ("text/html", "text/markdown")
    )
    config = class_config(class_run.out)
    config.HTMLExporter.template_name = "formgrade"  # as the formgrader renders a submission
    config.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    resources = {"assignment_id": name, "notebook_id": name, "submission_id": "s", "index": 0}
    resources |= {
        "total": 1,
        "base_url": "/",
        "student": learner,
        "last_name": "",
        "first_name": "",
    }
    resources["notebook_path"] = "/" + name
    exporter = HTMLExporter(config=config)
    formgrader, _ = exporter.from_filename(str(graded_nb), resources=resources)
    for page, html in (
        ("outputs", outputs),
        ("feedback", feedback.read_text()),
        ("formgrader", formgrader),
    ):
        assert not _active(html), (page, _active(html))
    text = _outputs_text(class_run, learner)
    for honest in machine.HONEST_MARKS:
        assert honest in text, honest
