"""A debug-this-module round: causal self-attention with a packed projection and one planted
bug, to be fixed against the failing test (notebook 10 §3.2's check, whose reference is
``nn.MultiheadAttention``). The bugs differ from the notebook's own two, one per variant: the
heads merged without moving them back, the diagonal masked, the softmax over the queries.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from autograder.checks import nb10_bugs as bugs

from .problems_layers import CAUSAL_MHA
from .task import Problem, Task, Variant, course_check, fail

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


def _reference(module, x: torch.Tensor) -> torch.Tensor:
    """Causal attention with the module's packed weights, by PyTorch."""
    B, T, C = x.shape
    nh = module.num_heads
    q, k, v = (
        t.view(B, T, nh, C // nh).transpose(1, 2)
        for t in F.linear(x, module.qkv.weight).split(C, -1)
    )
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, T, hs)
    return F.linear(y.transpose(1, 2).reshape(B, T, C), module.proj.weight)


def _run(cls, nh: int, x: torch.Tensor):
    """``(module, output)``, or None where the module cannot be run or lacks the packed
    layers: the notebook's check says why, in its words."""
    try:
        module = cls(x.shape[-1], nh).eval()
        if not all(isinstance(getattr(module, n, None), torch.nn.Linear) for n in ("qkv", "proj")):
            return None
        with torch.no_grad():
            out = module(x)
    except Exception:
        return None
    return (module, out) if isinstance(out, torch.Tensor) and out.shape == x.shape else None


def check_behaviour(cls, *, seed: int = 0, thorough: bool = False) -> None:
    """What a debugger sees first, said as a symptom (the bug itself is the candidate's to
    find): NaN outputs, one head right but several wrong, the future leaking into the past.
    Anything else is left to the notebook's check."""
    __tracebackhide__ = True
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 5 + seed, 16, generator=gen)  # (B, T, C)
    four, single = _run(cls, 4, x), _run(cls, 1, x)
    if four is None or single is None:
        return
    (module, out), (one, alone) = four, single
    if out.isnan().any():
        fail("Some outputs are NaN: a row of scores that is -inf everywhere has no softmax.")
    with torch.no_grad():
        right_alone = torch.allclose(alone, _reference(one, x), atol=1e-5)
        right_four = torch.allclose(out, _reference(module, x), atol=1e-5)
    if right_alone and not right_four:
        fail(
            "With one head the module equals the reference; with four it does not: follow "
            "one head's numbers through every reshape."
        )
    later = x.clone()
    later[:, -1] += 1.0  # only the last token changes
    with torch.no_grad():
        if not torch.allclose(module(later)[:, :-1], out[:, :-1], atol=1e-5):
            fail(
                "Changing only the last token changes the outputs of earlier positions: "
                "something lets the future reach the past."
            )


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
        (
            course_check(check_behaviour, lambda cls: cls),
            course_check(bugs.check_packed_attention, lambda cls: cls),
        ),
    )


DEBUG_MODULE = Problem(
    "debug_module",
    "Debug this module: one planted bug",
    "notebook 10 §3.2's find-the-bug, on notebook 02's attention",
    "Find and fix the one bug in a causal self-attention module, against its failing test.",
    tuple(Variant(v, _task(v)) for v in PLANTED),
    CAUSAL_MHA.extension,
    ("mask_after_softmax", "sqrt_dk"),
    written=("debugging", "why_heads"),
    numeric=("attn_flops_gpt2", "block_params_gpt2"),
    box_minutes=15,
)
