"""What happens outside the points holds (issue 42, items 5 and 6), read from the class run.

:mod:`hostile.ids` puts its learners in the session's one ``grade`` run
(:mod:`hostile.class_run`, ``--jobs 2``):

- a learner folder whose name is not a safe id (HTML, ANSI escapes, a carriage return, a leading
  ``-`` or ``_``) is refused with one line: a ``grades.csv`` row with status ``error``, the
  reason and the id made inert; it never reaches nbgrader's gradebook, and the summary the run
  prints holds no control character;
- no learner reads a note another left in the sandbox's ``/tmp``;
- ``javascript:`` and ``data:`` links of a written answer reach neither the feedback nor the
  formgrader's page of it, and the honest words stay;
- a learner who floods its kernel's ``sockets/`` folder is stopped at the folder's cap, is still
  graded, and the result says so.
"""

from __future__ import annotations

import re
import unicodedata

import nbformat
import pytest
from hostile import ids
from hostile.trust import NB01, NB05

from autograder.grader.gradebook import open_gradebook
from autograder.grader.isolation import Limits

pytestmark = pytest.mark.slow
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
UNSAFE_URL = re.compile(r"""(href|src)\s*=\s*["']?\s*(javascript|data|vbscript):""", re.I)


def _outputs(class_run, learner: str) -> str:
    path = class_run.out / "autograded" / learner / NB05 / f"{NB05}.ipynb"
    nb = nbformat.read(path, as_version=4)
    return "\n".join(
        str(o.get("text", "")) + "".join(str(v) for v in o.get("data", {}).values())
        for c in nb.cells
        for o in c.get("outputs", [])
    )


def test_unsafe_ids_are_refused_with_a_row_each(class_run):
    rows = {row["student_id"]: row for row in class_run.rows}
    with open_gradebook(class_run.out / "gradebook.db") as gb:
        students = {s.id for s in gb.students}
    for learner in ids.UNSAFE_IDS:
        assert learner not in students, learner
        result = class_run.results[(NB01, learner)]
        assert result["status"] == "error" and "learner id" in result["error"], result
        row = next(r for r in rows.values() if r["sha256"] == result["sha256"])
        assert row["status"] == "error" and "learner id" in row["error"], row
        cell = row["student_id"]
        assert not any(unicodedata.category(ch) == "Cc" for ch in cell), repr(cell)
        assert not cell.startswith(FORMULA_STARTS), repr(cell)
        assert len(row["error"].splitlines()) == 1, row["error"]


def test_the_summary_prints_no_control_character(class_run):
    text = class_run.stdout.replace("\n", "")
    found = sorted({repr(ch) for ch in text if unicodedata.category(ch) in ("Cc", "Cf")})
    assert not found, found


def test_no_learner_reads_a_note_left_in_the_sandbox_tmp(class_run):
    workers = [class_run.results[(NB05, learner)]["worker"] for learner in ids.TMP_LEARNERS]
    assert len(set(workers)) < len(workers), workers  # two of them shared a forkserver
    for learner in ids.TMP_LEARNERS:
        assert class_run.results[(NB05, learner)]["status"] == "graded", learner
        text = _outputs(class_run, learner)
        assert "FOUND" not in text, (learner, text[:2000])


def test_no_unsafe_link_of_a_written_answer_reaches_a_page(class_run):
    from nbconvert import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers

    from autograder.grader.nbgrader_settings import class_config

    learner = ids.LINK_LEARNER
    graded_nb = class_run.out / "autograded" / learner / NB05 / f"{NB05}.ipynb"
    feedback = class_run.out / "feedback" / learner / NB05 / f"{NB05}.html"
    config = class_config(class_run.out)
    config.HTMLExporter.template_name = "formgrade"
    config.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    resources = {"assignment_id": NB05, "notebook_id": NB05, "submission_id": "s", "index": 0}
    resources |= {"total": 1, "base_url": "/", "student": learner}
    resources |= {"last_name": "", "first_name": "", "notebook_path": "/" + NB05}
    formgrader, _ = HTMLExporter(config=config).from_filename(str(graded_nb), resources=resources)
    for page, html in (("feedback", feedback.read_text()), ("formgrader", formgrader)):
        assert not UNSAFE_URL.search(html), (page, UNSAFE_URL.findall(html))
        assert ids.HONEST_WORDS in html, page


def test_a_sockets_flood_stops_at_the_cap_with_a_message(class_run):
    result = class_run.results[(NB05, ids.FLOOD_LEARNER)]
    assert result["status"] == "graded", result
    wrote = re.search(r"WROTE (\d+) (.*)", _outputs(class_run, ids.FLOOD_LEARNER))
    assert wrote, _outputs(class_run, ids.FLOOD_LEARNER)[:2000]
    assert int(wrote[1]) <= Limits().sockets_bytes, wrote[0]
    assert "No space left" in wrote[2], wrote[0]
    said = result["flags"] + result["notes"]
    assert any("sockets/" in line and "cap" in line for line in said), said
