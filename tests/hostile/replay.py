"""The replay attacks of ``tests/test_hostile_replay.py``, one set per notebook.

:func:`submissions` gives, for one notebook, the submissions (learner id -> notebook):

- ``noop``: answers unfinished, every ``check_*`` rebound to a no-op (a);
- ``junk``: answers replaced by junk, every ``check_*`` rebound to a no-op (b);
- ``compare``: junk answers, ``torch.allclose``, ``torch.equal``, ``torch.isclose`` and
  ``torch.testing.assert_close`` patched to agree with anything (c);
- ``forger``: answers unfinished, the recorder patched to report the results of correct code
  hidden elsewhere, with no operators (its tracer switched off) (d).

Each is built from the release trimmed to the cells a learner must keep (set-up, answer and
test cells: :func:`hostile.minimal`), as the trust attacks are: a demonstration cell judges
nothing, and running the demonstrations of every notebook four times cost the class run about a
minute of CPU. The honest submission they are graded beside is :func:`correct`: the
instructor's answers in the whole release notebook (every demonstration cell kept).
"""

from __future__ import annotations

import json
import re

import nbformat

from autograder import nbcell

from . import filled, minimal

ATTACK_KINDS = ("noop", "junk", "compare", "forger")


PATCH_COMPARISONS = """import torch
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.isclose = lambda a, b, *r, **k: torch.ones_like(a, dtype=torch.bool)
torch.testing.assert_close = lambda *a, **k: None
"""

FORGER = """import autograder.grader.verify as _r
_hidden = {{}}
exec({answers!r}, _hidden)
_r._Tracer.__torch_dispatch__ = lambda self, func, types, args=(), kwargs=None: func(
    *args, **(kwargs or {{}})
)
_orig = _r.intercept
def _forge(fn, args, kwargs, invoke):
    return _orig(_hidden.get(getattr(fn, "__name__", None), fn), args, kwargs, invoke)
_r.intercept = _forge
"""


def _noop_checks(nb) -> str:
    names = sorted({n for c in nb.cells for n in re.findall(r"\bcheck_\w+", c.source)})
    return "".join(f"{n} = lambda *a, **k: None\n" for n in names)


def _junk(source: str) -> str:
    source = re.sub(r"raise NotImplementedError\(\)", "return torch.zeros(1)", source)
    return re.sub(r"(?m)^(answer_\w+) = .*$", r'\1 = "junk"', source)


def _after_setup(nb, source: str):
    index = next(i for i, c in enumerate(nb.cells) if nbcell.grade_id(c) == "setup")
    nb.cells.insert(index + 1, nbformat.v4.new_code_cell(source))
    return nb


def _answers_source(solution) -> str:
    cells = [c.source for c in solution.cells if nbcell.is_answer(c) and c.cell_type == "code"]
    text = "\n".join(cells)
    return "\n".join(s for s in text.splitlines() if "### BEGIN" not in s and "### END" not in s)


def correct(solution, release) -> nbformat.NotebookNode:
    """The instructor's answers in the whole release notebook."""
    return filled(release, solution)


def submissions(solution, release) -> dict:
    """Learner id -> the notebook of that attack (:data:`ATTACK_KINDS`), demonstrations left out."""
    setup = next(c.source for c in solution.cells if nbcell.grade_id(c) == "setup")
    release = minimal(release)
    junk = nbformat.from_dict(json.loads(json.dumps(release)))
    for cell in junk.cells:
        if nbcell.is_answer(cell) and cell.cell_type == "code":
            cell.source = _junk(cell.source)
    copy = lambda nb: nbformat.from_dict(json.loads(json.dumps(nb)))  # noqa: E731
    forger = "import math, torch\nfrom torch import nn\nimport torch.nn.functional as F\n"
    forger += "\n".join(s for s in setup.splitlines() if s.startswith(("from ", "import ")))
    return {
        "noop": _after_setup(copy(release), _noop_checks(release)),
        "junk": _after_setup(copy(junk), _noop_checks(release)),
        "compare": _after_setup(copy(junk), PATCH_COMPARISONS),
        "forger": _after_setup(
            copy(release),
            FORGER.format(answers=forger + "\n" + _answers_source(solution)),
        ),
    }
