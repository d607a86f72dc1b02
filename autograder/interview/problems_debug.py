"""A debug-this-module round: causal self-attention with a packed projection and one planted
bug, to be fixed against the failing test (notebook 09 §3.2's check, whose reference is
``nn.MultiheadAttention``). The bugs differ from the notebook's own two, one per variant: the
heads merged without moving them back, the diagonal masked, the softmax over the queries.
"""

from __future__ import annotations

from autograder.checks import nb09_bugs as bugs

from .problems_layers import CAUSAL_MHA
from .task import Problem, Task, Variant, course_check

FIXED = """class PackedCausalSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)  # all q, then k, then v
        self.proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x):  # (B, T, C) -> (B, T, C)
        B, T, C = x.shape
        hs = C // self.num_heads
        q, k, v = self.qkv(x).split(C, dim=-1)  # (B, T, C) each
        q, k, v = (t.view(B, T, self.num_heads, hs).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(hs)  # (B, nh, T, T)
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.proj(y)"""

#: variant -> (the line as fixed, the line as planted)
PLANTED = {
    "merge": ("y = y.transpose(1, 2).reshape(B, T, C)", "y = y.reshape(B, T, C)"),
    "diagonal": (".triu(1)", ".triu(0)"),
    "softmax_dim": ("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-2)"),
}


def planted(variant: str) -> str:
    """The module's source with ``variant``'s bug planted."""
    right, wrong = PLANTED[variant]
    return FIXED.replace(right, wrong)


def _task(variant: str) -> Task:
    return Task(
        bugs.PACKED,
        f"class {bugs.PACKED}(nn.Module):",
        "A colleague's module fails its test: it should equal causal "
        "`nn.MultiheadAttention(d_model, num_heads, bias=False)` holding the same packed "
        "weights (`qkv` stacks all queries, then all keys, then all values; `proj` is the "
        "output projection), for `x` (B, T, C). There is **one** bug. Copy it into the empty "
        "cell, run the tests to see it fail, find the bug and fix it (with `import math, "
        f"torch` and `from torch import nn`):\n\n```python\n{planted(variant)}\n```",
        (course_check(bugs.check_packed_attention, lambda cls: cls),),
    )


DEBUG_MODULE = Problem(
    "debug_module",
    "Debug this module: one planted bug",
    "notebook 09 §3.2's find-the-bug, on notebook 02's attention",
    "Find and fix the one bug in a causal self-attention module, against its failing test.",
    tuple(Variant(v, _task(v)) for v in PLANTED),
    CAUSAL_MHA.extension,
    ("mask_after_softmax", "sqrt_dk"),
    written=("debugging", "why_heads"),
    numeric=("attn_flops_gpt2", "block_params_gpt2"),
    box_minutes=15,
)
