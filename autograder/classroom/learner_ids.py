"""Which learner ids reach nbgrader, and how any text a learner wrote is printed.

A learner id is the name of a folder the learner (or whoever collected the work) chose, and
nbgrader passes it on as it is: the formgrader writes it into its pages unescaped (a folder named
``<img src=x onerror=…>`` runs script in the instructor's browser), ``nbgrader export`` writes it
raw into a CSV (``=1+2`` runs in a spreadsheet, a carriage return starts a forged row), and a
terminal runs the escape sequences in it. So ``grade`` grades only ids made of letters, digits,
``.``, ``_``, ``-`` and ``@`` that start with a letter or a digit (e-mail addresses and Unix
account names pass); any other folder is refused with :func:`refusal`'s one line. Whatever the
grader prints or writes of a refused id, or of any other text a learner chose, goes through
:func:`printable` first.
"""

from __future__ import annotations

import re
import unicodedata

SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]*")
INVISIBLE = {"Cc", "Cf", "Zl", "Zp"}  # control, format (bidi overrides), line/paragraph breaks


def printable(text: str) -> str:
    """``text`` with every control or format character written as its escape (``\\x1b``)."""
    return "".join(
        ch.encode("unicode_escape").decode("ascii") if unicodedata.category(ch) in INVISIBLE else ch
        for ch in text
    )


def refusal(learner: str) -> str:
    """Why ``learner`` (a folder name) is not graded, in one line; "" for a safe id."""
    if SAFE_ID.fullmatch(learner):
        return ""
    return (
        f"the learner id '{printable(learner)}' is refused: a learner folder's name must start "
        "with a letter or digit and hold only letters, digits, '.', '_', '-' and '@' "
        "(rename the folder to grade it)"
    )
