"""The one-line messages a learner reads about a test cell, written once for every command.

``check``, ``grade``, nbgrader's Validate and the feedback all explain a failing test cell with
:func:`cell_message`; nothing else formats a cell's error for a learner.
"""

from __future__ import annotations

import re

NOT_PASSED = "this test did not pass"
# Error names the grader itself writes into a cell: their value is already the learner's sentence.
GRADER_ERRORS = ("NotRun", "NotVerified")
# Error names that say only that an exercise is not written yet: the learner's own stub raised, or
# a check reached one or an unset answer (the checks' ``NotWrittenYet``). ``check`` lists these
# cells together. A cell the grader did not run ("not run: the kernel died in cell 7 …", a budget,
# a function that hung) keeps its own line: its reason is the learner's next step.
UNFINISHED_ERRORS = ("NotImplementedError", "NotWrittenYet")


def _first_line(text: str) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def explain_error(ename: str, evalue: str) -> str:
    """One line for a learner from a test cell's exception."""
    evalue = _first_line(re.sub(r"\x1b\[[0-9;]*m", "", evalue))
    if ename in GRADER_ERRORS:  # the cell could not run or was not verified, and why
        return evalue
    if ename == "NotImplementedError":
        return "not implemented yet: replace `raise NotImplementedError()` with your code"
    if ename == "NameError":
        name = re.search(r"'([^']+)'", evalue)
        what = f"`{name.group(1)}`" if name else "a name this test needs"
        return (
            f"{what} is not defined: run the cell that defines it, and check that cell "
            "ran without an error and that nothing was renamed"
        )
    if ename in {"CellTimeoutError", "TimeoutError", "DeadKernelError"} or "timed out" in evalue:
        detail = f" ({evalue})" if evalue else ""
        return f"the test did not finish in time{detail}: look for an endless loop"
    if ename in {"AssertionError", "CheckFailure", "NotWrittenYet"}:
        return evalue or "an assertion failed (it gave no message)"
    return f"{ename}: {evalue}" if evalue else ename


def is_unfinished(ename: str) -> bool:
    """Whether a cell that failed with this error name failed only because its exercise is not
    written yet."""
    return ename in UNFINISHED_ERRORS


def _last_error(cell) -> dict:
    errors = [o for o in (cell or {}).get("outputs", []) if o.get("output_type") == "error"]
    return errors[-1] if errors else {}


def cell_message(cell) -> str:
    """Why a graded cell did not pass, from its last error output (or a generic line)."""
    error = _last_error(cell)
    if not error:
        return NOT_PASSED
    return explain_error(error.get("ename", ""), str(error.get("evalue", "")))


def cell_unfinished(cell) -> bool:
    """Whether a graded cell failed only because its exercise is not written yet."""
    return is_unfinished(_last_error(cell).get("ename", ""))
