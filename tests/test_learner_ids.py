"""Learner ids, printed text, markdown links and capped sockets folders (issue 42, items 5-6).

Fast unit tests of what ``tests/test_hostile_ids.py`` reads from the class run.
"""

from __future__ import annotations

import csv
import subprocess
import sys

import nbformat
import pytest

from autograder.classroom.grade import _lost_result
from autograder.classroom.learner_ids import printable, refusal
from autograder.classroom.submissions import discover
from autograder.grader.feedback import safe_markdown, sanitize
from autograder.grader.gradebook import export_csv, open_gradebook

SAFE = ("ada", "Ada.Lovelace", "a_b-c", "ada@example.org", "0042", "s1234567")
UNSAFE = ("<img src=x onerror=alert(1)>", "=1+2", "@SUM(A1)", "-rf", "_x", ".x", "a b", "a\rb")
UNSAFE += ("a\x1b[2Jb", "a/b", "ä", "a\u202eb", "")


@pytest.mark.parametrize("learner", SAFE)
def test_safe_ids_pass(learner):
    assert refusal(learner) == ""


@pytest.mark.parametrize("learner", UNSAFE)
def test_unsafe_ids_are_refused_in_one_printable_line(learner):
    why = refusal(learner)
    assert "refused" in why and printable(why) == why and "\n" not in why


def test_printable_escapes_control_and_format_characters():
    assert printable("a\x1b[2J\rb\u202ec\td") == "a\\x1b[2J\\rb\\u202ec\\td"
    assert printable("plain <b>text</b> = 1") == "plain <b>text</b> = 1"


def test_discover_refuses_an_unsafe_folder_per_assignment(tmp_path):
    for learner in ("ada", "<img src=x>", "=1+2"):
        (tmp_path / learner / "hw").mkdir(parents=True)
    jobs, _ = discover(tmp_path, ["hw"])
    refused = {j.student: j.refused for j in jobs}
    assert refused["ada"] == "" and "learner id" in refused["<img src=x>"]
    assert "learner id" in refused["=1+2"]


@pytest.fixture
def empty_db(tmp_path):
    with open_gradebook(tmp_path / "g.db"):
        pass
    return tmp_path / "g.db"


def test_a_refused_id_is_inert_in_grades_csv(tmp_path, empty_db):
    (tmp_path / "s" / "a\rb\x1b[2J" / "hw").mkdir(parents=True)
    (tmp_path / "s" / "=1+2" / "hw").mkdir(parents=True)
    jobs, _ = discover(tmp_path / "s", ["hw"])
    results = [_lost_result(j, j.refused, retry=False) for j in jobs]
    export_csv(empty_db, results, tmp_path / "g.csv")
    with open(tmp_path / "g.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["student_id"] for r in rows) == ["'=1+2", "a\\rb\\x1b[2J"]
    assert all(r["status"] == "error" and "learner id" in r["error"] for r in rows)


@pytest.mark.parametrize(
    "source",
    [
        "[x](javascript:alert(1))",
        "[x](JaVaScRiPt:alert(1))",
        "[x](  javascript:alert(1))",
        "[x](jav&#x61;script:alert(1))",
        "![x](data:image/svg+xml;base64,PHN2Zz4=)",
        "[x][r]\n\n[r]: javascript:alert(1)",
        "[x](vbscript:msgbox(1))",
    ],
)
def test_markdown_with_an_unsafe_link_is_shown_as_text(source):
    assert not safe_markdown(source)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(source)])
    nb.cells.append(nbformat.v4.new_code_cell(""))
    nb.cells[1].outputs = [
        nbformat.v4.new_output("display_data", data={"text/markdown": source, "text/plain": "x"})
    ]
    sanitize(nb)
    assert nb.cells[0].source.startswith("<pre>") and safe_markdown(nb.cells[0].source)
    assert safe_markdown(nb.cells[1].outputs[0].data["text/markdown"])


@pytest.mark.parametrize(
    "source", ["[paper](https://arxiv.org/abs/1706.03762)", "[s](#sec) ![i](fig.png)", "$a<b$"]
)
def test_honest_markdown_is_kept(source):
    assert safe_markdown(source)


FLOOD = """
import os, sys
from pathlib import Path
from autograder.grader import sockets as s
s.own_mounts()
base = Path(sys.argv[1])
runtime = s.fresh_runtime(base, size=4 << 20)
try:
    with open(runtime / s.SOCKETS / "flood", "wb") as f:
        f.write(b"x" * (8 << 20))
except OSError as err:
    print("stopped", err.errno)
print("full", s.sockets_full(runtime))
s.remove_runtime(runtime)
print("left", os.listdir(base))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="mount namespaces are Linux's")
def test_a_capped_sockets_folder_stops_a_flood_and_says_so(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", FLOOD, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    if "unshare" in done.stderr:
        pytest.skip("no mount namespace for this user here")
    assert done.stdout.split("\n")[:3] == ["stopped 28", "full True", "left []"], (
        done.stdout + done.stderr
    )
