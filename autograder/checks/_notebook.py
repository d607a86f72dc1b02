"""How a failing check looks in a notebook: the diagnosis alone, without the checks' own frames.

IPython shows an exception through its ``_render_traceback_`` when it has one (so do ipykernel,
nbclient, nbgrader's Validate and autograde: the cell still fails with ename ``CheckFailure``).
A :class:`~autograder.checks._core.CheckFailure` renders as its one sentence; when learner code
raised the error behind it, that error's traceback comes first, through the learner's lines and
the libraries they called, never through this package.
"""

from __future__ import annotations

import types
from pathlib import Path

CHECKS_DIR = str(Path(__file__).resolve().parent)
RED, RESET = "\x1b[0;31m", "\x1b[0m"


def _outside_checks(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The traceback ``tb`` with the frames of this package's files left out."""
    kept = []
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not str(Path(filename).resolve()).startswith(CHECKS_DIR + "/"):
            kept.append(tb)
        tb = tb.tb_next
    rebuilt = None
    for frame in reversed(kept):
        rebuilt = types.TracebackType(rebuilt, frame.tb_frame, frame.tb_lasti, frame.tb_lineno)
    return rebuilt


def _learner_traceback(cause: BaseException) -> list[str]:
    """IPython's own rendering of the learner's error, without this package's frames."""
    tb = _outside_checks(cause.__traceback__)
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
    note = "The check called your code, which raised the error above."
    return [*lines, "", note, ""]


def render(failure: BaseException) -> list[str]:
    """The lines IPython shows for a failing check (its "structured traceback")."""
    lines = []
    if failure.__cause__ is not None:
        lines += _learner_traceback(failure.__cause__)
    lines.append(f"{RED}{type(failure).__name__}{RESET}: {failure}")
    return lines
