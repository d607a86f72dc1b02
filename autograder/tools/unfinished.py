"""One line instead of a traceback when an example needs an exercise the learner has not done.

Examples, plots and widgets between the exercises call the learner's functions. Before an
exercise is written, its ``raise NotImplementedError()`` would surface as a traceback through
course code, and the cells after it as ``NameError``s for names that cell never defined.
:func:`install` (run by ``autograder.checks`` when a notebook imports it) makes IPython show
those two errors as one line each:

- ``needs `split_heads`: it is not written yet (replace its `raise NotImplementedError()`), then
  run this cell again.``
- ```torch_mha` is not defined: the cell that defines it stopped, as it needs `MultiHeadAttention`
  …``

The error itself is unchanged (its name and message, which nbgrader grades by), only what is
shown. Widgets use :func:`describe` for the same line inside their output.
"""

from __future__ import annotations

import re

_waiting: list[str] = []  # the unfinished exercises that stopped a cell, latest last


def _is_course_file(filename: str) -> bool:
    return "/autograder/" in filename.replace("\\", "/") or "/site-packages/" in filename


def unfinished_exercise(exc: BaseException) -> str | None:
    """The learner's function or class whose stub raised ``exc``, or None."""
    if type(exc) is not NotImplementedError or exc.args:
        return None
    tb = exc.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:  # the innermost frame: where the stub raised
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    if _is_course_file(code.co_filename):
        return None
    owner, _, method = code.co_qualname.rpartition(".")
    if owner and method in ("__init__", "forward", "__call__"):
        return owner.split(".")[-1]
    return code.co_qualname.split(".")[-1]


def describe(exc: BaseException) -> str:
    """One line for a learner about an error an example, plot or widget ran into."""
    name = unfinished_exercise(exc)
    if name is not None:
        if name not in _waiting:
            _waiting.append(name)
        return (
            f"needs `{name}`: it is not written yet (replace its `raise NotImplementedError()` "
            "with your code and run that cell), then run this cell again."
        )
    if isinstance(exc, NameError):
        missing = re.search(r"'([^']+)'", str(exc))
        what = f"`{missing.group(1)}`" if missing else "a name"
        if _waiting:
            return (
                f"{what} is not defined: the cell that defines it stopped (it needed "
                f"`{_waiting[-1]}`, not written yet then), or the name is misspelt. Run the "
                "cells from there again once it is written."
            )
        return f"{what} is not defined: run the cells above this one first."
    return f"{type(exc).__name__}: {exc}"


def _shown(shell, etype, value, tb, tb_offset=None) -> None:
    """IPython's custom exception handler: show the error (same name and message) in one line."""
    if etype is NotImplementedError and unfinished_exercise(value) is None:
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
