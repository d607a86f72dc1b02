"""Attacks outside the points (issue 42, items 5 and 6), graded in the class run.

Each is in the session's one ``grade`` run (:mod:`.class_run`):


- learner folders named to attack whoever reads their id: HTML that runs script in the
  formgrader (``<img src=x onerror=…>``), ANSI escapes that erase the summary's lines, a carriage
  return that forges a row of a CSV export, a name that starts like a command-line option. Each
  holds notebook 01's release, so today it is graded and its id enters nbgrader's gradebook;
- ``ids_tmp_a``, ``_b``, ``_c`` (notebook 05's release, so their kernels run little): each leaves
  a note in every folder of the sandbox's ``/tmp`` it can write, under names the forkserver's
  reset spared (matplotlib's ``fontlist*.json`` among them), and prints every note another left.
  Three learners on two workers: two share a worker's forkserver;
- ``ids_tmp_a`` also writes ``javascript:`` and ``data:`` links into notebook 05's written
  answer, in markdown syntax and as HTML, beside honest words;
- ``ids_tmp_b`` also floods its kernel's ``sockets/`` folder (on the grading machine's disk
  today) with files, up to :data:`FLOOD_BYTES`, and prints how much it wrote and how it stopped.

Read by ``tests/test_hostile_ids.py``.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from .trust import NB01, NB05, Attack, Edit

UNSAFE_IDS = (
    "<img src=x onerror=alert(1)>",
    "\x1b[2J\x1b[1;1Hall clear",
    "victim\r01_attention_from_scratch,graded,0",
    "-rf",
    "_under",
)
TMP_LEARNERS = ("ids_tmp_a", "ids_tmp_b", "ids_tmp_c")
LINK_LEARNER, FLOOD_LEARNER = TMP_LEARNERS[0], TMP_LEARNERS[1]
NOTE = "note-from-"
FLOOD_BYTES = 1024**3
HONEST_WORDS = "Heads run as one batched matmul"

LEAVE_AND_READ = """import os

_ME = {learner!r}
_NAMES = ("fontlist-{note}" + _ME + ".json", ".{note}" + _ME, "{note}" + _ME)
for _root, _dirs, _files in os.walk("/tmp"):
    for _name in _dirs + _files:
        if "{note}" in _name and _ME not in _name:
            try:
                with open(os.path.join(_root, _name)) as _f:
                    print("FOUND", _name, _f.read())
            except OSError:
                print("FOUND", _name)
    for _name in _NAMES:
        try:
            with open(os.path.join(_root, _name), "w") as _f:
                _f.write("left by " + _ME)
        except OSError:
            pass
"""

FLOOD = """import json, os
from ipykernel.connect import get_connection_file

with open(get_connection_file()) as _f:
    _SOCKETS = os.path.dirname(json.load(_f)["ip"])
_CHUNK, _written, _why = b"x" * (1 << 20), 0, "stopped at the goal"
try:
    for _i in range({total} // (64 << 20)):
        with open(os.path.join(_SOCKETS, f"flood-{{_i}}"), "wb") as _f:
            for _ in range(64):
                _f.write(_CHUNK)
                _f.flush()
                _written += len(_CHUNK)
except OSError as _err:
    _why = f"{{type(_err).__name__}}: {{_err}}"
print("WROTE", _written, _why)
"""

LINKS = f"""{HONEST_WORDS}, [a paper](https://arxiv.org/abs/1706.03762).
[click](javascript:alert('ids')) and [also](JaVaScRiPt:alert(2))
![img](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)
[d](data:text/html,<script>x</script>)
[ref][r] <a href="javascript:alert(3)">html</a>

[r]: javascript:alert(4)
"""


def attacks() -> list[Attack]:
    out = []
    for learner in TMP_LEARNERS:
        edits = [Edit("after", "setup", LEAVE_AND_READ.format(learner=learner, note=NOTE))]
        if learner == LINK_LEARNER:
            edits.append(Edit("answer", "written_answer_parallel_heads", LINKS))
        if learner == FLOOD_LEARNER:
            edits.append(Edit("after", "setup", FLOOD.format(total=FLOOD_BYTES)))
        out.append(
            Attack(
                learner,
                NB05,
                6,
                (),
                "notes left in the sandbox's /tmp for the next learner; links; a sockets/ flood",
                "release",
                tuple(edits),
            )
        )
    return out


def write(subs: Path, build, pairs: dict) -> None:
    """Every attack of this module under ``subs`` (``build(attack, solution, release)``)."""
    for attack in attacks():
        folder = subs / attack.learner / attack.notebook
        folder.mkdir(parents=True)
        nbformat.write(build(attack, *pairs[attack.notebook]), folder / f"{attack.notebook}.ipynb")
    release = pairs[NB01][1]
    for learner in UNSAFE_IDS:
        (subs / learner / NB01).mkdir(parents=True)
        nbformat.write(release, subs / learner / NB01 / f"{NB01}.ipynb")
