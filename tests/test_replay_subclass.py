"""Tensor subclasses in a learner call: PyTorch's CausalBias verifies, a learner's own is refused.

``torch.nn.attention.bias.causal_lower_right(T, S)`` (notebook 03 recommends it for a cache) is
a ``torch.Tensor`` subclass whose ``__torch_function__`` hands SDPA to its own code. Correct code
that passes it to SDPA is in ``tests/mistakes/gqa.py`` (``causal_lower_right``) and verifies
through ``tests/test_replay.py``. Here, written as an adversary would: a subclass's
``__torch_function__`` runs while the recorder's function mode is off, so values it reads into
Python there (``.tolist()``) would escape the record, and a record that holds only for its
inputs' values would come out verified. Each attack is right on every input a check draws and
wrong above 1e6; each must be refused or withheld, never verified.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from mistakes.gqa import GQACausalBias
from torch.nn.attention.bias import CausalBias, CausalVariant

from autograder.grader.verify import cells


def _softmax(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


class Peek(torch.Tensor):
    """Reads every plain tensor a torch function is given into Python, out of sight."""

    largest = [0.0]

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        plain = [a for a in args if type(a) is torch.Tensor]
        cls.largest[0] = max((abs(v) for a in plain for v in a.reshape(-1).tolist()), default=0.0)
        return super().__torch_function__(func, types, args, kwargs)


ZERO = torch.zeros(()).as_subclass(Peek)  # made in a cell of the learner's own


def softmax_peeks(x, dim=-1):
    torch.add(x, ZERO)  # the subclass sees x's values
    if Peek.largest[0] > 1e6:
        return torch.full_like(x, 1.0 / x.shape[dim])
    return _softmax(x, dim)


class PeekingBias(CausalBias):
    """PyTorch's bottom-right bias, whose SDPA reads the queries into Python first."""

    @staticmethod
    def _dispatch(query, key, value, attn_mask, **kwargs):
        if max(abs(v) for v in query.reshape(-1).tolist()) > 1e6:
            return torch.zeros_like(query)
        T, S = attn_mask.seq_len_q, attn_mask.seq_len_kv
        scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])  # (B, nh, T, S)
        allowed = torch.ones(T, S, dtype=torch.bool).tril(S - T)  # (T, S)
        return torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1) @ value


class GQAPeekingBias(GQACausalBias):
    def mask(self, T, S, causal, has_past):
        return PeekingBias(CausalVariant.LOWER_RIGHT, T, S) if causal else None

    def attend(self, q, k, v, allowed):
        if allowed is None:
            return F.scaled_dot_product_attention(q, k, v)  # (B, nh, T, hs)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)  # (B, nh, T, hs)


def _verify(source: str, namespace: dict) -> cells.Verdict:
    return cells.verify_cell(source, cells.InProcessKernel(namespace))


def test_a_subclass_reading_values_out_of_sight_is_not_verified():
    verdict = _verify(
        "check_softmax_values(softmax, seed=1, thorough=True)", {"softmax": softmax_peeks}
    )
    assert verdict.status in ("refuted", "unverified"), verdict
    assert "Peek" in verdict.message, verdict


def test_a_causal_bias_subclass_of_the_learners_is_not_verified():
    verdict = _verify("check_gqa_decoding(GQA, seed=1, thorough=True)", {"GQA": GQAPeekingBias})
    assert verdict.status in ("refuted", "unverified"), verdict
    assert "PeekingBias" in verdict.message, verdict


def test_pytorchs_causal_bias_verifies():
    verdict = _verify("check_gqa_decoding(GQA, seed=1, thorough=True)", {"GQA": GQACausalBias})
    assert verdict.status == "verified", verdict
