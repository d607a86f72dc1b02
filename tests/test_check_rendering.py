"""A failing check shows its diagnosis first, then only the learner's own frames (no PyTorch)."""

import re
import types

import IPython
import torch
from IPython.core.ultratb import AutoFormattedTB

from autograder.checks import _core
from autograder.checks._notebook import NOTE

LEARNER = """
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return self.helper(x)

    def helper(self, x):
        return self.proj(x) @ torch.ones(3, 3)  # the learner's shape mistake
"""


def test_the_diagnosis_comes_first_and_only_the_learners_frames_follow(monkeypatch, tmp_path):
    cell = tmp_path / "4021.py"  # where ipykernel keeps a cell's source: outside the libraries
    cell.write_text(LEARNER)
    namespace: dict = {}
    exec(compile(LEARNER, str(cell), "exec"), namespace)
    traceback = AutoFormattedTB(mode="Context", theme_name="nocolor")
    shell = types.SimpleNamespace(InteractiveTB=traceback)
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    block = namespace["Block"]()
    try:
        _core.call(block, "Block", (torch.zeros(2, 4),))
    except _core.CheckFailure as failure:
        lines = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(failure._render_traceback_()))
    assert lines.startswith("CheckFailure: `Block` raised RuntimeError"), lines[:300]
    shown = lines.split(NOTE, 1)[1]
    assert "return self.helper(x)" in shown and "torch.ones(3, 3)" in shown, shown
    for internal in ("_call_impl", "_wrapped_call_impl", "site-packages", "autograder/", "hidden"):
        assert internal not in shown, (internal, shown)
