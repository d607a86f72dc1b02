"""One line instead of a traceback when an example needs an exercise the learner has not done.

Examples, plots and widgets between the exercises call the learner's functions. Before an
exercise is written, its ``raise NotImplementedError()`` would surface as a traceback through
course code, and the cells after it as ``NameError``s for names that cell never defined.
:func:`install` (run by ``autograder.checks`` when a notebook imports it) makes IPython show
those two errors as one line each:

- ``needs `split_heads`: it is not written yet (replace its `raise NotImplementedError()`), then
  run this cell again.``
- ```torch_mha` is not defined: the cell that defines it stopped, as it needs `MultiHeadAttention`
  …``: the exercise that stopped the cell that sets that name (``device = get_device()``), or,
  for an answer cell's variable, that its cell is not answered yet; the latest exercise that
  stopped a cell only when no stopped cell sets the name (the name is misspelt, or its cell
  never ran);
- an answer cell that is itself the stub (``answer_x = None`` then ``raise
  NotImplementedError()``, notebooks 05 and 10) is named by the variables it sets: not answered
  yet, or answered (its test cell and the grade count the value) with the ``raise`` line still to
  delete.

The error itself is unchanged (its name and message, which nbgrader grades by), only what is
shown. Widgets use :func:`describe` for the same line inside their output.
"""

from __future__ import annotations

import dis
import linecache
import re
import types

_waiting: list[str] = []  # the unfinished exercises that stopped a cell, latest last
# A name a stopped cell would have set -> the exercise it waited for (None: an answer not given).
_unset_by: dict[str, str | None] = {}
# In an answer cell's stub, the commented line that says which variable to set.
_COMMENTED_ASSIGNMENT = re.compile(r"^#\s*([A-Za-z_]\w*)\s*=", re.MULTILINE)


def _is_course_file(filename: str) -> bool:
    return "/autograder/" in filename.replace("\\", "/") or "/site-packages/" in filename


def _stub_frame(exc: BaseException) -> types.FrameType | None:
    """The learner's frame where a bare ``raise NotImplementedError()`` raised ``exc``, or None."""
    if type(exc) is not NotImplementedError or exc.args:
        return None
    tb = exc.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:  # the innermost frame: where the stub raised
        tb = tb.tb_next
    return None if _is_course_file(tb.tb_frame.f_code.co_filename) else tb.tb_frame


def _answer_names(frame: types.FrameType) -> list[str]:
    """The names a cell's top-level code assigns (``answer_x = ...``), in order."""
    names = []
    for op in dis.get_instructions(frame.f_code):
        if op.opname in ("STORE_NAME", "STORE_GLOBAL") and op.argval not in names:
            names.append(op.argval)
    return names


def _cell_frame(exc: BaseException) -> types.FrameType | None:
    """The top-level frame of the learner's cell that ``exc`` stopped, or None."""
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "<module>" and not _is_course_file(code.co_filename):
            return tb.tb_frame
        tb = tb.tb_next
    return None


def _note_unset(exc: BaseException, exercise: str | None) -> None:
    """Remember the names the stopped cell did not get to set, and why: ``exercise``, or (None)
    an answer cell not answered yet, whose stub names its variable only in a comment."""
    frame = _cell_frame(exc)
    if frame is None:
        return
    names = _answer_names(frame)
    if exercise is None:
        source = "".join(linecache.getlines(frame.f_code.co_filename))
        names += _COMMENTED_ASSIGNMENT.findall(source)
    for name in names:
        if frame.f_globals.get(name) is None:
            _unset_by[name] = exercise


def _undefined(what: str, name: str | None) -> str:
    """The line for a NameError of ``name`` (shown as ``what``)."""
    if name in _unset_by:
        exercise = _unset_by[name]
        if exercise is None:
            return (
                f"{what} is not defined: its answer cell is not answered yet. Set it there, "
                "delete that cell's `raise NotImplementedError()` line and run it again."
            )
        return (
            f"{what} is not defined: the cell that sets it stopped, as it needed `{exercise}`, "
            "not written yet then. Run the cells from there again once it is written."
        )
    if _waiting:
        return (
            f"{what} is not defined: the cell that defines it stopped (it needed "
            f"`{_waiting[-1]}`, not written yet then), or the name is misspelt. Run the "
            "cells from there again once it is written."
        )
    return f"{what} is not defined: run the cells above this one first."


def unfinished_exercise(exc: BaseException) -> str | None:
    """The learner's function or class whose stub raised ``exc``, or None (also for an answer
    cell whose own top-level code raised: see :func:`describe`)."""
    frame = _stub_frame(exc)
    if frame is None or frame.f_code.co_name == "<module>":
        return None
    code = frame.f_code
    owner, _, method = code.co_qualname.rpartition(".")
    if owner and method in ("__init__", "forward", "__call__"):
        return owner.split(".")[-1]
    return code.co_qualname.split(".")[-1]


def _answer_cell(frame: types.FrameType) -> str:
    """The line for an answer cell whose own ``raise NotImplementedError()`` line raised."""
    names = _answer_names(frame)
    unset = [f"`{n}`" for n in names if frame.f_globals.get(n) is None]
    if unset or not names:
        return (
            f"{', '.join(unset) or 'This cell'}: not answered yet. Set "
            f"{'them' if len(unset) > 1 else 'it'} in this cell, delete the cell's `raise "
            "NotImplementedError()` line and run the cell again."
        )
    return (
        f"{', '.join(f'`{n}`' for n in names)}: set, and the test cell below grades the value "
        "as it is; but this cell still has its `raise NotImplementedError()` line: delete that "
        "line and run the cell again."
    )


def describe(exc: BaseException) -> str:
    """One line for a learner about an error an example, plot or widget ran into."""
    frame = _stub_frame(exc)
    if frame is not None and frame.f_code.co_name == "<module>":
        _note_unset(exc, None)
        return _answer_cell(frame)
    name = unfinished_exercise(exc)
    if name is not None:
        if name not in _waiting:
            _waiting.append(name)
        _note_unset(exc, name)
        return (
            f"needs `{name}`: it is not written yet (replace its `raise NotImplementedError()` "
            "with your code and run that cell), then run this cell again."
        )
    if isinstance(exc, NameError):
        missing = re.search(r"'([^']+)'", str(exc))
        what = f"`{missing.group(1)}`" if missing else "a name"
        return _undefined(what, missing.group(1) if missing else None)
    return f"{type(exc).__name__}: {exc}"


def _shown(shell, etype, value, tb, tb_offset=None) -> None:
    """IPython's custom exception handler: show the error (same name and message) in one line."""
    if etype is NotImplementedError and _stub_frame(value) is None:
        stb = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
    else:
        stb = [f"{etype.__name__}: {describe(value)}"]
    shell._showtraceback(etype, value, stb)


def install() -> None:
    """Show unfinished exercises and the names they left undefined as one line (in IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        shell.set_custom_exc((NotImplementedError, NameError), _shown)
