"""Learner implementations of notebook 02: correct ones and a catalogue of classic mistakes.

Shape legend: ``B`` batch, ``T`` query length, ``S`` key/value length, ``C`` = d_model,
``nh`` heads, ``hs`` = C // nh.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks import nb02_multihead as checks

from . import Mistake, correct, stub
from .attention import _attend, sdpa_einsum, sdpa_float64_inside, sdpa_matmul

# --------------------------------------------------------------------- split and merge heads


def split_view_transpose(x, num_heads):
    B, T, C = x.shape
    return x.view(B, T, num_heads, C // num_heads).transpose(1, 2)  # (B, nh, T, hs)


def split_unflatten(x, num_heads):
    return x.unflatten(-1, (num_heads, -1)).permute(0, 2, 1, 3)  # (B, nh, T, hs)


def split_chunks(x, num_heads):
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)  # (B, nh, T, hs)


def merge_transpose_reshape(x):
    B, nh, T, hs = x.shape
    return x.transpose(1, 2).reshape(B, T, nh * hs)  # (B, T, C)


def merge_contiguous_view(x):
    B, nh, T, hs = x.shape
    return x.transpose(1, 2).contiguous().view(B, T, -1)  # (B, T, C)


def merge_cat(x):
    return torch.cat(x.unbind(1), dim=-1)  # (B, T, C)


CORRECT_SPLIT = {"view_transpose": split_view_transpose, "unflatten": split_unflatten}
CORRECT_SPLIT["chunks"] = split_chunks
CORRECT_MERGE = {"transpose_reshape": merge_transpose_reshape, "cat": merge_cat}
CORRECT_MERGE["contiguous_view"] = merge_contiguous_view


def split_no_transpose(x, num_heads):
    B, T, C = x.shape
    return x.view(B, T, num_heads, C // num_heads)


def split_view_only(x, num_heads):
    B, T, C = x.shape
    return x.view(B, num_heads, T, C // num_heads)


def split_interleaved(x, num_heads):
    B, T, C = x.shape
    return x.view(B, T, C // num_heads, num_heads).permute(0, 3, 1, 2)


def split_wrong_transpose(x, num_heads):
    return split_no_transpose(x, num_heads).transpose(2, 3)


def merge_view_only(x):
    B, nh, T, hs = x.shape
    return x.reshape(B, T, nh * hs)


def merge_transpose_view(x):
    B, nh, T, hs = x.shape
    return x.transpose(1, 2).view(B, T, nh * hs)


def merge_interleaved(x):
    B, nh, T, hs = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, T, nh * hs)


HEAD_MISTAKES = [
    Mistake("split: no transpose", split_no_transpose, checks.check_split_heads, "transpose(1, 2)"),
    Mistake("split: view only", split_view_only, checks.check_split_heads, "mixes tokens"),
    Mistake("split: interleaved", split_interleaved, checks.check_split_heads, "every nh-th"),
    Mistake(
        "split: transposes dims 2, 3",
        split_wrong_transpose,
        checks.check_split_heads,
        "should have",
    ),
    Mistake("merge: view only", merge_view_only, checks.check_merge_heads, "mixes tokens"),
    Mistake(
        "merge: view after transpose", merge_transpose_view, checks.check_merge_heads, ".reshape("
    ),
    Mistake("merge: interleaved", merge_interleaved, checks.check_merge_heads, "interleaves"),
    Mistake("merge: no flatten", lambda x: x.transpose(1, 2), checks.check_merge_heads, "flatten"),
]

# ----------------------------------------------------------------------- MultiHeadAttention


class MHASeparate(nn.Module):
    """Four projections, split, attend, merge, project; each step a swappable method."""

    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def split(self, x):
        return split_view_transpose(x, self.num_heads)  # (B, nh, T, hs)

    def merge(self, x):
        return merge_transpose_reshape(x)  # (B, T, C)

    def attend(self, q, k, v, mask):
        return sdpa_matmul(q, k, v, mask)

    def project(self, query, key, value):
        return self.q_proj(query), self.k_proj(key), self.v_proj(value)

    def forward(self, query, key=None, value=None, mask=None):
        key = query if key is None else key
        value = query if value is None else value
        q, k, v = (self.split(t) for t in self.project(query, key, value))  # (B, nh, T|S, hs)
        out, weights = self.attend(q, k, v, mask)  # (B, nh, T, hs), (B, nh, T, S)
        return self.out_proj(self.merge(out)), weights


class MHAFused(MHASeparate):
    """One fused matmul for q, k and v in self-attention; einsum attention."""

    def project(self, query, key, value):
        if key is not query or value is not query:
            return super().project(query, key, value)
        layers = (self.q_proj, self.k_proj, self.v_proj)
        weight = torch.cat([layer.weight for layer in layers])  # (3C, C)
        bias = None if self.q_proj.bias is None else torch.cat([layer.bias for layer in layers])
        return F.linear(query, weight, bias).chunk(3, dim=-1)  # 3 x (B, T, C)

    def split(self, x):
        return split_unflatten(x, self.num_heads)

    def attend(self, q, k, v, mask):
        return sdpa_einsum(q, k, v, mask)


class MHAPerHead(MHASeparate):
    """A Python loop over heads using slices of the projection weights."""

    def forward(self, query, key=None, value=None, mask=None):
        key = query if key is None else key
        value = query if value is None else value
        (B, T, C), S = query.shape, key.shape[1]
        hs = C // self.num_heads
        if mask is not None:
            mask = mask.expand(B, self.num_heads, T, S)
        outs, weights = [], []
        for h in range(self.num_heads):
            rows = slice(h * hs, (h + 1) * hs)
            q, k, v = (
                F.linear(x, layer.weight[rows], None if layer.bias is None else layer.bias[rows])
                for x, layer in ((query, self.q_proj), (key, self.k_proj), (value, self.v_proj))
            )  # (B, T|S, hs)
            out, w = sdpa_float64_inside(q, k, v, None if mask is None else mask[:, h])
            outs.append(out)
            weights.append(w)
        return self.out_proj(torch.cat(outs, dim=-1)), torch.stack(weights, dim=1)


CORRECT_MHA = {"separate": MHASeparate, "fused_qkv": MHAFused, "per_head": MHAPerHead}


class MHAViewOnly(MHASeparate):
    def split(self, x):
        B, T, C = x.shape
        return x.reshape(B, self.num_heads, T, C // self.num_heads)

    def merge(self, x):
        B, nh, T, hs = x.shape
        return x.reshape(B, T, nh * hs)


class MHAInterleaved(MHASeparate):
    def split(self, x):
        return split_interleaved(x, self.num_heads)

    def merge(self, x):
        return merge_interleaved(x)


class MHANoOutProj(MHASeparate):
    def forward(self, query, key=None, value=None, mask=None):
        key = query if key is None else key
        value = query if value is None else value
        q, k, v = (self.split(t) for t in self.project(query, key, value))
        out, weights = self.attend(q, k, v, mask)
        return self.merge(out), weights


class MHAQueryEverywhere(MHASeparate):
    def project(self, query, key, value):
        return super().project(query, query, query)


class MHAKeyAsValue(MHASeparate):
    def project(self, query, key, value):
        return super().project(query, key, key)


class MHASwappedProjections(MHASeparate):
    def project(self, query, key, value):
        return self.q_proj(query), self.v_proj(key), self.k_proj(value)


class MHAUnscaled(MHASeparate):
    def attend(self, q, k, v, mask):
        return _attend(q, k, v, mask, scale=1.0)


class MHAScaledByModelWidth(MHASeparate):
    def attend(self, q, k, v, mask):
        return _attend(q, k, v, mask, scale=1 / math.sqrt(q.shape[1] * q.shape[-1]))


class MHASoftmaxOverQueries(MHASeparate):
    def attend(self, q, k, v, mask):
        return _attend(q, k, v, mask, dim=-2)


class MHAAveragedWeights(MHASeparate):
    def forward(self, query, key=None, value=None, mask=None):
        out, weights = super().forward(query, key, value, mask)
        return out, weights.mean(1)


class MHAMaskPolarity(MHASeparate):
    def attend(self, q, k, v, mask):
        return sdpa_matmul(q, k, v, None if mask is None else ~mask)


class MHAMaskIgnored(MHASeparate):
    def attend(self, q, k, v, mask):
        return sdpa_matmul(q, k, v)


class MHANaNOnEmptyRows(MHASeparate):
    def attend(self, q, k, v, mask):
        return _attend(q, k, v, mask)


class MHAMaskAfterSoftmax(MHASeparate):
    def attend(self, q, k, v, mask):
        out, weights = sdpa_matmul(q, k, v)
        weights = weights if mask is None else weights * mask
        return weights @ v, weights


class MHADetached(MHASeparate):
    def merge(self, x):
        return merge_transpose_reshape(x).detach()


class MHAReturnsFloat32(MHASeparate):
    def forward(self, query, key=None, value=None, mask=None):
        out, weights = super().forward(query, key, value, mask)
        return out.float(), weights.float()


class MHANoValueError(MHASeparate):
    def __init__(self, d_model, num_heads, bias=True):
        super().__init__(d_model, num_heads if d_model % num_heads == 0 else 1, bias)
        self.num_heads = num_heads


class MHAAssert(MHASeparate):
    def __init__(self, d_model, num_heads, bias=True):
        assert d_model % num_heads == 0
        super().__init__(d_model, num_heads, bias)


class MHAIgnoresBias(MHASeparate):
    def __init__(self, d_model, num_heads, bias=True):
        super().__init__(d_model, num_heads)


class MHAHeadSizedProjections(MHASeparate):
    def __init__(self, d_model, num_heads, bias=True):
        super().__init__(d_model, num_heads, bias)
        self.q_proj = nn.Linear(d_model, d_model // num_heads, bias=bias)


class MHAFusedAttribute(nn.Module):
    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        self.num_heads = num_heads
        self.qkv_proj = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)


class MHANoSuperInit(MHASeparate):
    def __init__(self, d_model, num_heads, bias=True):
        self.num_heads = num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)


MHA_MISTAKES = [
    Mistake("MHA: view without transpose", MHAViewOnly, checks.check_mha_matches_torch, "mix tok"),
    Mistake("MHA: interleaved heads", MHAInterleaved, checks.check_mha_matches_torch, "interleav"),
    Mistake("MHA: no out_proj", MHANoOutProj, checks.check_mha_matches_torch, "without `out_proj`"),
    Mistake(
        "MHA: no out_proj (edge cases)", MHANoOutProj, checks.check_mha_edge_cases, "`out_proj`"
    ),
    Mistake(
        "MHA: query everywhere",
        MHAQueryEverywhere,
        checks.check_mha_matches_torch,
        "project `key` with k_proj",
    ),
    Mistake(
        "MHA: key as value", MHAKeyAsValue, checks.check_mha_matches_torch, "where `value` belongs"
    ),
    Mistake(
        "MHA: k/v projections swapped",
        MHASwappedProjections,
        checks.check_mha_matches_torch,
        "swapped",
    ),
    Mistake("MHA: no scaling", MHAUnscaled, checks.check_mha_matches_torch, "not scaled"),
    Mistake(
        "MHA: scaled by sqrt(d_model)",
        MHAScaledByModelWidth,
        checks.check_mha_matches_torch,
        "√d_model",
    ),
    Mistake(
        "MHA: softmax over queries",
        MHASoftmaxOverQueries,
        checks.check_mha_matches_torch,
        "query axis",
    ),
    Mistake("MHA: averaged weights", MHAAveragedWeights, checks.check_mha_matches_torch, "average"),
    Mistake("MHA: mask polarity", MHAMaskPolarity, checks.check_mha_mask, "True = blocked"),
    Mistake("MHA: mask ignored", MHAMaskIgnored, checks.check_mha_mask, "ignores the mask"),
    Mistake("MHA: NaN on empty rows", MHANaNOnEmptyRows, checks.check_mha_mask, "gave NaN"),
    Mistake(
        "MHA: mask after softmax", MHAMaskAfterSoftmax, checks.check_mha_mask, "after the softmax"
    ),
    Mistake("MHA: detached", MHADetached, checks.check_mha_edge_cases, "No gradient reaches"),
    Mistake("MHA: returns float32", MHAReturnsFloat32, checks.check_mha_edge_cases, "input dtype"),
    Mistake(
        "MHA: no ValueError",
        MHANoValueError,
        checks.check_mha_structure,
        "should raise ValueError",
    ),
    Mistake("MHA: assert", MHAAssert, checks.check_mha_structure, "raised AssertionError"),
    Mistake("MHA: ignores bias", MHAIgnoresBias, checks.check_mha_structure, "bias=bias"),
    Mistake(
        "MHA: head-sized projection",
        MHAHeadSizedProjections,
        checks.check_mha_structure,
        "maps d_model to d_model",
    ),
    Mistake(
        "MHA: fused attribute only",
        MHAFusedAttribute,
        checks.check_mha_structure,
        "attribute `q_proj`",
    ),
    Mistake(
        "MHA: no super().__init__()",
        MHANoSuperInit,
        checks.check_mha_structure,
        "super().__init__()",
    ),
]

# ------------------------------------------------------------------------ parameter count


def count_formula(d_model, num_heads, bias=True):
    return 4 * d_model * d_model + (4 * d_model if bias else 0)


def count_per_projection(d_model, num_heads, bias=True):
    per_linear = d_model * d_model + d_model * bias
    return 4 * per_linear


CORRECT_COUNT = {"formula": count_formula, "per_projection": count_per_projection}


def count_real_module(d_model, num_heads, bias=True):
    return sum(p.numel() for p in nn.MultiheadAttention(d_model, num_heads, bias=bias).parameters())


COUNT_MISTAKES = [
    Mistake(
        "count: no biases",
        lambda d_model, num_heads, bias=True: 4 * d_model * d_model,
        checks.check_mha_param_count,
        "forgets the biases",
    ),
    Mistake(
        "count: 3 projections",
        lambda d_model, num_heads, bias=True: 3 * (d_model * d_model + d_model * bias),
        checks.check_mha_param_count,
        "counts only q_proj, k_proj and v_proj",
    ),
    Mistake(
        "count: out_proj bias missing",
        lambda d_model, num_heads, bias=True: 4 * d_model * d_model + 3 * d_model * bias,
        checks.check_mha_param_count,
        "only 3 projections",
    ),
    Mistake(
        "count: ignores bias flag",
        lambda d_model, num_heads, bias=True: 4 * d_model * d_model + 4 * d_model,
        checks.check_mha_param_count,
        "ignores bias=False",
    ),
    Mistake(
        "count: float",
        lambda d_model, num_heads, bias=True: count_formula(d_model, num_heads, bias) / 1,
        checks.check_mha_param_count,
        "should return an int",
    ),
    Mistake(
        "count: per-head sized",
        lambda d_model, num_heads, bias=True: 4 * d_model * (d_model // num_heads + bias),
        checks.check_mha_param_count,
        "num_heads must not matter",
    ),
    Mistake(
        "count: builds a module",
        count_real_module,
        checks.check_mha_param_count,
        "integer arithmetic",
    ),
]

MISTAKES = HEAD_MISTAKES + MHA_MISTAKES + COUNT_MISTAKES

MHA_CHECKS = [
    checks.check_mha_structure,
    checks.check_mha_matches_torch,
    checks.check_mha_mask,
    checks.check_mha_edge_cases,
]
CORRECT = (
    correct([checks.check_split_heads], CORRECT_SPLIT)
    + correct([checks.check_merge_heads], CORRECT_MERGE)
    + correct(MHA_CHECKS, CORRECT_MHA)
    + correct([checks.check_mha_param_count], CORRECT_COUNT)
)


class Stub:
    """The learner's class before answering: every method is the nbgrader stub."""

    def __init__(self, d_model, num_heads, bias=True):
        raise NotImplementedError()


STUBS = (
    [(checks.check_split_heads, stub), (checks.check_merge_heads, stub)]
    + [(check, Stub) for check in MHA_CHECKS]
    + [(checks.check_mha_param_count, stub)]
)
REPLAY = [checks.check_merge_heads, checks.check_mha_edge_cases]
