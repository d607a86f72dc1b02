"""Checks used by the notebooks' test cells, one module per notebook.

Every ``check_*`` function takes the learner's callable, runs it on random and adversarial inputs,
compares with PyTorch's own implementation and raises :class:`CheckFailure` (an ``AssertionError``)
with one sentence that names the probable mistake. No reference solution lives here.
"""

from autograder.checks import _cell_feedback
from autograder.checks._core import CheckFailure, calls_through, run_here

__all__ = ["CheckFailure", "calls_through", "run_here"]

_cell_feedback.register()  # "✓ ... pass" under each test cell that passed (in IPython only)
