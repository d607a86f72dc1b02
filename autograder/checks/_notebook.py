"""How a failing check looks in a notebook: the diagnosis first, then only the learner's frames.

IPython shows an exception through its ``_render_traceback_`` when it has one (so do ipykernel,
nbclient, nbgrader's Validate and autograde: the cell still fails with ename ``CheckFailure``).
A :class:`~autograder.checks._core.CheckFailure` renders as its one sentence. When learner code
raised the error behind it, the lines of the learner's own code that led there follow the
sentence: never a frame of the course's package, of PyTorch or of any other library (those sent
the one-line diagnosis under some 45 lines of ``_call_impl`` and "skipping hidden frame").
"""

from __future__ import annotations

import sysconfig
import types
from pathlib import Path

COURSE_DIR = str(Path(__file__).resolve().parents[1])  # autograder/
# The standard library and installed packages (PyTorch among them): not the learner's code.
LIBRARY_DIRS = tuple(
    sorted({str(Path(sysconfig.get_paths()[key]).resolve()) for key in ("stdlib", "purelib")})
)
RED, RESET = "\x1b[0;31m", "\x1b[0m"
NOTE = "The check called your code, which raised this error in your own lines:"


def _learners(filename: str) -> bool:
    """A frame of the learner's code: a notebook cell or a file of theirs, not a library's."""
    if filename.startswith("<frozen "):
        return False
    resolved = str(Path(filename).resolve())
    return not any(resolved.startswith(d + "/") for d in (COURSE_DIR, *LIBRARY_DIRS))


def _learner_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The traceback ``tb`` with only the frames of the learner's own code."""
    kept = []
    while tb is not None:
        if _learners(tb.tb_frame.f_code.co_filename):
            kept.append(tb)
        tb = tb.tb_next
    rebuilt = None
    for frame in reversed(kept):
        rebuilt = types.TracebackType(rebuilt, frame.tb_frame, frame.tb_lasti, frame.tb_lineno)
    return rebuilt


def _learner_traceback(cause: BaseException) -> list[str]:
    """IPython's own rendering of the learner's error, through the learner's frames only."""
    tb = _learner_frames(cause.__traceback__)
    if tb is None:
        return []
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is None:
            return []
        lines = shell.InteractiveTB.structured_traceback(type(cause), cause, tb)
    except Exception:  # rendering must never hide the diagnosis
        return []
    return ["", NOTE, *lines]


def render(failure: BaseException) -> list[str]:
    """The lines IPython shows for a failing check (its "structured traceback"): the sentence
    first, then where the learner's code raised (when it did)."""
    lines = [f"{RED}{type(failure).__name__}{RESET}: {failure}"]
    if failure.__cause__ is not None:
        lines += _learner_traceback(failure.__cause__)
    return lines
