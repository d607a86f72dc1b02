"""Checks for notebook 10 §3.1: a multi-head attention module ported from another codebase.

Shape legend: ``B`` batch, ``T`` queries, ``S`` keys, ``C`` = d_model, ``nh`` heads, ``hs`` =
C // nh.

The grading is notebook 02's (:func:`._multihead.expect_matches_torch` and
:func:`._multihead.expect_mask_use`, against ``nn.MultiheadAttention``). This is a
find-the-bug exercise, so the given code's own two bugs are reported first by their symptom, on
a probe where they show: attention weights flatter than PyTorch's with the same weights, and a
causal query that reads only the keys its mask forbids. The notebook's hints lead to the cause;
any other mistake gets notebook 02's diagnosis.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from autograder.torch_helpers import one_thread

from . import _multihead
from ._core import call, fail, make_generator, randn

#: No tool of the course computes these answers (notebook 02's declarations cover its checks).
ANSWERS_IN_TOOLS: dict[str, str] = {}

NAME = "MultiHeadAttention"
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")
C, NH, T = 16, 4, 5  # the probe: the notebook's own example sizes


def _probe(cls, seed: int, mask: torch.Tensor | None):
    """The learner's and PyTorch's weights ``(B, nh, T, T)`` on one input, or None when the
    learner's module cannot be probed (then notebook 02's check says why)."""
    gen = make_generator(seed + 7)
    try:
        module = call(cls, NAME, (C, NH)).eval()
        reference = nn.MultiheadAttention(C, NH, batch_first=True).eval()
        with torch.no_grad():
            for name in PROJECTIONS:
                layer = getattr(module, name)
                layer.weight.copy_(randn(gen, C, C, dtype=torch.float32) / math.sqrt(C))
                if layer.bias is not None:
                    layer.bias.zero_()
            reference.in_proj_weight.copy_(
                torch.cat([getattr(module, n).weight for n in PROJECTIONS[:3]])
            )
            reference.in_proj_bias.zero_()
            reference.out_proj.weight.copy_(module.out_proj.weight)
            reference.out_proj.bias.zero_()
            x = randn(gen, 1, T, C, dtype=torch.float32)  # (B, T, C)
            result = call(module, f"{NAME}.forward", (x,), {"mask": mask})
            blocked = None if mask is None else ~mask  # nn.MultiheadAttention: True = blocked
            _, expected = reference(x, x, x, attn_mask=blocked, average_attn_weights=False)
        weights = result[1]
        if not isinstance(weights, torch.Tensor) or weights.shape != expected.shape:
            return None
        return weights, expected
    except (AssertionError, AttributeError, TypeError, IndexError, RuntimeError):
        return None


def _flatter(cls, seed: int) -> str | None:
    """The symptom of a softmax flatter than PyTorch's, with the same weights and no mask."""
    probe = _probe(cls, seed, None)
    if probe is None:
        return None
    yours, theirs = probe[0].max().item(), probe[1].max().item()
    if yours >= theirs - 0.02:
        return None
    return (
        f"With the same weights as nn.MultiheadAttention (d_model={C}, num_heads={NH}, no "
        f"mask), your attention weights are flatter than PyTorch's: largest weight {yours:.2f}, "
        f"PyTorch's {theirs:.2f}. Something sets how peaked your softmax is differently."
    )


def _reads_forbidden_keys(cls, seed: int) -> str | None:
    """The symptom of a mask read the other way round: a causal query reads only the future."""
    allowed = torch.ones(T, T, dtype=torch.bool).tril()  # (T, T): causal, True = may attend
    probe = _probe(cls, seed, allowed)
    if probe is None:
        return None
    row = probe[0][0, 0, 1]  # (T,): query 1 of head 0
    forbidden = [j for j in range(T) if not allowed[1, j] and row[j] > 1e-6]
    if not forbidden or row[allowed[1]].abs().max() > 1e-6:
        return None
    return (
        f"With a causal mask (True = may attend, shape ({T}, {T})), query 1 of your module puts "
        f"all its weight on keys {forbidden}, which the mask forbids, and none on keys 0 and 1, "
        "which it allows. Compare how your code and the mask read True."
    )


@one_thread
def check_fixed_mha_matches_torch(cls: Callable, *, seed: int = 0, thorough: bool = False):
    """Equal to nn.MultiheadAttention with the same weights; a flatter softmax is reported by
    its symptom first."""
    __tracebackhide__ = True
    symptom = _flatter(cls, seed)
    if symptom:
        fail(symptom)
    _multihead.expect_matches_torch(cls, seed, thorough)


@one_thread
def check_fixed_mha_mask(cls: Callable, *, seed: int = 0, thorough: bool = False):
    """True = may attend; a mask read the other way round, then a flatter softmax, are reported
    by their symptoms first."""
    __tracebackhide__ = True
    symptom = _reads_forbidden_keys(cls, seed) or _flatter(cls, seed)
    if symptom:
        fail(symptom)
    _multihead.expect_mask_use(cls, seed, thorough)
