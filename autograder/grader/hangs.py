"""A learner function that hangs once ends the notebook's waiting once.

When a test cell runs past its time limit inside a function of the learner's, every later test
cell that calls that function (directly, or through the learner's other functions) would wait out
its own limit again. :class:`Hangs` remembers the function from the interrupted cell's
traceback, and names the later test cells that would reach it, so they are reported "not run"
at once.
"""

from __future__ import annotations

import ast
import re

from autograder.grader.names import bindings, reached_names
from autograder.grader.scan import parse

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# IPython's frame header for code run from a cell: "Cell In[3], line 4, in M.forward(self, x)"
FRAME = re.compile(r"Cell In\[(\d+)\], line \d+, in ([\w.<>]+)\(")


def innermost_function(traceback: list[str], learner_counts: set[int]) -> str | None:
    """The top-level name (function or class) of the innermost frame of ``traceback`` that runs
    code from one of the learner's cells (their execution counts); None if no frame does."""
    text = ANSI.sub("", "\n".join(str(line) for line in traceback))
    for count, qualname in reversed(FRAME.findall(text)):
        top = qualname.split(".")[0]
        if int(count) in learner_counts and not top.startswith("<"):
            return top
    return None


class Hangs:
    """The learner functions that ran past a cell's time limit, and where."""

    def __init__(self) -> None:
        self._hung: dict[str, str] = {}  # function name -> the cell where it hung

    def record(self, traceback: list[str], learner_counts: set[int], where: str) -> str | None:
        """Remember the function an interrupted cell hung in; its name, if there was one."""
        name = innermost_function(traceback, learner_counts)
        if name is not None:
            self._hung.setdefault(name, where)
        return name

    def blocking(self, test_source: str, learner_sources: list[str]) -> str | None:
        """Why a test cell is not run, if it would call a function that hung; else None."""
        if not self._hung:
            return None
        tree = parse(test_source)
        if tree is None:
            return None
        cells = [b for b in (parse(s) for s in learner_sources) if b is not None]
        reached = reached_names(
            {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)},
            [bindings(c) for c in cells],
        )
        for name, where in self._hung.items():
            if name in reached:
                return (
                    f"`{name}` did not return within the time limit in {where}; "
                    "this test calls it too"
                )
        return None
