"""Right and wrong answers to notebook 08's quiz, and wrong fixes of its find-the-bug exercises.

Shape legend: ``B`` batch, ``T`` query length, ``S`` key/value length, ``C`` = d_model, ``nh``
heads, ``nkv`` key/value heads, ``hs`` = C // nh.

``RIGHT_NUMBERS`` / ``RIGHT_CHOICES`` list every spelling a check must accept. ``WRONG_NUMBERS``
and ``WRONG_CHOICES`` pair a wrong answer with a substring of the diagnosis it must get: each
is a misconception a candidate really has. ``MISTAKES`` are wrong fixes of the buggy functions,
graded by the checks of notebooks 02-04, and ``FIXES`` the right ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks.nb02_multihead import check_mha_mask, check_mha_matches_torch
from autograder.checks.nb03_masking import (
    check_attention_mask_padding_invariance,
    check_attention_mask_values,
)
from autograder.checks.nb04_gqa import check_gqa_decoding, check_gqa_kv_cache

from . import Mistake, stub


@dataclass(frozen=True)
class WrongAnswer:
    """A wrong answer to ``question`` and a substring of the diagnosis it must get."""

    question: str
    value: Any
    diagnosis: str

    def __str__(self) -> str:  # readable pytest ids
        return f"{self.question}={self.value!r}"


# ---------------------------------------------------------------------------- numbers

RIGHT_NUMBERS: dict[str, list[Any]] = {
    "gpt3_head_size": [128, 128.0, np.int64(128), torch.tensor(128), 12_288 // 96],
    "params_gpt2_small": [2_360_064, 4 * 768**2 + 768, np.float64(2_360_064)],
    "params_mha": [67_108_864, 4 * 4096**2],
    "params_gqa": [41_943_040, 2 * 4096**2 + 2 * 4096 * 1024],
    "kv_bytes_per_token": [327_680, 2 * 80 * 8 * 128 * 2],
    "attention_matrix_bytes": [402_653_184, 8 * 12 * 1024**2 * 4],
    "flops": [603_979_776, 8 * 2 * 128 * 512**2 + 4 * 2 * 128**2 * 512],
    "matmuls_loop": [61, 5 * 12 + 1],
    "matmuls_packed": [4, 4.0],
}

WRONG_NUMBERS = [
    WrongAnswer("gpt3_head_size", 64, "GPT-2 small"),
    WrongAnswer("gpt3_head_size", 12_288, "whole width"),
    WrongAnswer("gpt3_head_size", 96, "number of heads"),
    WrongAnswer("gpt3_head_size", 12_288 * 96, "divide rather than multiply"),
    WrongAnswer("gpt3_head_size", 127.5, "whole number"),
    WrongAnswer("gpt3_head_size", 100, "equal slice"),
    WrongAnswer("params_gpt2_small", 2_362_368, "biases for q, k and v"),
    WrongAnswer("params_gpt2_small", 2_359_296, "output projection's bias"),
    WrongAnswer("params_gpt2_small", 4 * 768**2 + 3 * 768, "other way round"),
    WrongAnswer("params_gpt2_small", 12 * 2_360_064, "head count does not change"),
    WrongAnswer("params_gpt2_small", 3 * 768**2 + 768, "four C × C matrices"),
    WrongAnswer("params_mha", 4 * 4096**2 + 4 * 4096, "no biases"),
    WrongAnswer("params_mha", 32 * 4 * 4096**2, "does not multiply"),
    WrongAnswer("params_mha", 3 * 4096**2, "four C × C matrices"),
    WrongAnswer("params_gqa", 67_108_864, "multi-head count"),
    WrongAnswer("params_gqa", 4 * 4096 * 1024, "keeps all 32 query heads"),
    WrongAnswer("params_gqa", 3 * 4096 * 1024 + 4096**2, "q_proj stays"),
    WrongAnswer("params_gqa", 2 * 4096**2 + 2 * 4096 * 1024 + 2 * 4096 + 2 * 1024, "no biases"),
    WrongAnswer("params_gqa", 2 * 4096**2 + 2 * 4096 * 128, "multi-query attention"),
    WrongAnswer("params_gqa", 2 * 4096**2 + 2 * 4096 * 8 * 4096, "hs = d_model / nh"),
    WrongAnswer("kv_bytes_per_token", 2_621_440, "not the 64 query heads"),
    WrongAnswer("kv_bytes_per_token", 2_621_440, "bits"),
    WrongAnswer("kv_bytes_per_token", 163_840, "keys and values"),
    WrongAnswer("kv_bytes_per_token", 4_096, "80 layers"),
    WrongAnswer("kv_bytes_per_token", 655_360, "2 bytes per value, not 4"),
    WrongAnswer("kv_bytes_per_token", 81_920, "count keys and values"),
    WrongAnswer("kv_bytes_per_token", 2 * 80 * 8 * 8192 * 2, "hs = 128 wide"),
    WrongAnswer("attention_matrix_bytes", 403, "megabytes"),
    WrongAnswer("attention_matrix_bytes", 402.65, "megabytes"),
    WrongAnswer("attention_matrix_bytes", 384, "MiB"),
    WrongAnswer("attention_matrix_bytes", 0.4027, "gigabytes"),
    WrongAnswer("attention_matrix_bytes", 8 * 1024**2 * 4, "every head"),
    WrongAnswer("attention_matrix_bytes", 12 * 1024**2 * 4, "every sequence"),
    WrongAnswer("attention_matrix_bytes", 8 * 12 * 1024**2 * 2, "not 2"),
    WrongAnswer("attention_matrix_bytes", 8 * 12 * 1024**2 * 8, "not 8"),
    WrongAnswer("attention_matrix_bytes", 8 * 1024 * 768 * 4, "(B, T, C) activations"),
    WrongAnswer("attention_matrix_bytes", 8 * 12 * 1024**2, "counts values"),
    WrongAnswer("attention_matrix_bytes", 8 * 12 * 1024**2 * 32, "counts bits"),
    WrongAnswer("flops", 301_989_888, "multiply-adds"),
    WrongAnswer("flops", 8 * 2 * 128 * 512**2, "attention products"),
    WrongAnswer("flops", 4 * 2 * 128**2 * 512, "four projections"),
    WrongAnswer("flops", 6 * 2 * 128 * 512**2 + 4 * 2 * 128**2 * 512, "output projection"),
    WrongAnswer("flops", 8 * 603_979_776, "head count cancels"),
    WrongAnswer("flops", 8 * 2 * 128 * 512**2 + 8 * 4 * 2 * 128**2 * 512, "hs = C / nh"),
    WrongAnswer("flops", 8 * 2 * 128 * 512**2 + 2 * 2 * 128**2 * 512, "two attention products"),
    WrongAnswer("flops", 10**9, "2·m·n·k"),
    WrongAnswer("flops", 6.04e8, "exact count"),
    WrongAnswer("params_gqa", 41_900_000, "do not round"),
    WrongAnswer("matmuls_loop", 60, "once, after the loop"),
    WrongAnswer("matmuls_loop", 72, "not once per head"),
    WrongAnswer("matmuls_loop", 37, "two attention products"),
    WrongAnswer("matmuls_loop", 49, "two attention products"),
    WrongAnswer("matmuls_loop", 6, "batched version"),
    WrongAnswer("matmuls_loop", 6, "one head"),
    WrongAnswer("matmuls_loop", 12, "for every head"),
    WrongAnswer("matmuls_packed", 6, "three separate"),
    WrongAnswer("matmuls_packed", 3, "two products"),
    WrongAnswer("matmuls_packed", 5, "packed projection is one product"),
    WrongAnswer("matmuls_packed", 61, "no loop over heads"),
    WrongAnswer("matmuls_packed", 48, "batch dimension"),
    WrongAnswer("matmuls_packed", 2, "nothing repeats per head"),
]

NOT_A_NUMBER = [
    WrongAnswer("gpt3_head_size", None, "not set yet"),
    WrongAnswer("gpt3_head_size", "", "not set yet"),
    WrongAnswer("gpt3_head_size", "128", "not a string"),
    WrongAnswer("gpt3_head_size", True, "to a number"),
    WrongAnswer("gpt3_head_size", [128], "to a number"),
    WrongAnswer("gpt3_head_size", math.nan, "to a number"),
    WrongAnswer("flops", math.inf, "to a number"),
]

# ---------------------------------------------------------------------------- choices

RIGHT_CHOICES: dict[str, list[Any]] = {
    "head_count": ["b", "B", "(b)", " b ", "b."],
    "wide_head_params": ["c"],
    "heads_jobs": ["d"],
    "more_heads": ["a"],
    "heads_cost": ["b"],
    "parallel_why": ["d"],
    "why_heads": ["c"],
    "gqa": ["b"],
    "sqrt_dk": ["d"],
    "mask_after_softmax": ["b"],
    "pruning": ["c"],
    "pushback": ["bcf", "fcb", "b, c, f", ["b", "c", "f"], {"f", "b", "c"}, "BCF"],
}

WRONG_CHOICES = [
    WrongAnswer("head_count", "a", "grows with the model"),
    WrongAnswer("head_count", "c", "single dimension"),
    WrongAnswer("head_count", "d", "separate choices that often coincide"),
    WrongAnswer("wide_head_params", "a", "no parameter disappears"),
    WrongAnswer("wide_head_params", "b", "do not get matrices of their own"),
    WrongAnswer("wide_head_params", "d", "no square root"),
    WrongAnswer("heads_jobs", "a", "nobody assigns relations"),
    WrongAnswer("heads_jobs", "b", "different random weights"),
    WrongAnswer("heads_jobs", "c", "evidence, not an explanation"),
    WrongAnswer("more_heads", "b", "not a free gain"),
    WrongAnswer("more_heads", "c", "does not change with the head count"),
    WrongAnswer("more_heads", "d", "batched"),
    WrongAnswer("heads_cost", "a", "the heads split the width"),
    WrongAnswer("heads_cost", "c", "removes none"),
    WrongAnswer("heads_cost", "d", "no square root"),
    WrongAnswer("parallel_why", "a", "same arithmetic"),
    WrongAnswer("parallel_why", "b", "its own softmax"),
    WrongAnswer("parallel_why", "c", "weights are identical"),
    WrongAnswer("why_heads", "a", "parameter count is exactly the same"),
    WrongAnswer("why_heads", "b", "speed is not the reason"),
    WrongAnswer("why_heads", "d", "one weighting per query, not one token"),
    WrongAnswer("gqa", "a", "all 64 query heads stay"),
    WrongAnswer("gqa", "c", "head size stays 128"),
    WrongAnswer("gqa", "d", "every past token is still cached"),
    WrongAnswer("sqrt_dk", "a", "statistics of the scores"),
    WrongAnswer("sqrt_dk", "b", "whatever the scale"),
    WrongAnswer("sqrt_dk", "c", "values are untouched"),
    WrongAnswer("mask_after_softmax", "a", "sum to less than 1"),
    WrongAnswer("mask_after_softmax", "c", "masking the values"),
    WrongAnswer("mask_after_softmax", "d", "normalises over the keys"),
    WrongAnswer("pruning", "a", "did not show that training with fewer heads"),
    WrongAnswer("pruning", "b", "does not mean a head learned nothing"),
    WrongAnswer("pruning", "d", "at random hurts more"),
    WrongAnswer("pushback", "bc", "misses at least one claim"),
    WrongAnswer("pushback", "b", "misses at least one claim"),
    WrongAnswer("pushback", "abcf", "includes (a), which holds up"),
    WrongAnswer("pushback", "bcdf", "includes (d), which holds up: each head works in C/nh"),
    WrongAnswer("pushback", "bcef", "includes (e), which holds up"),
    WrongAnswer("pushback", "abcdef", "includes (a)"),
]

NOT_A_CHOICE = [
    WrongAnswer("gqa", None, "not set yet"),
    WrongAnswer("gqa", "  ", "not set yet"),
    WrongAnswer("gqa", "e", "one letter"),
    WrongAnswer("gqa", "ab", "one letter"),
    WrongAnswer("gqa", 2, "one letter"),
    WrongAnswer("gqa", "option b", "one letter"),
    WrongAnswer("pushback", None, "not set yet"),
    WrongAnswer("pushback", "bcg", "every letter that applies"),
    WrongAnswer("pushback", 3, "every letter that applies"),
]

# -------------------------------------------------------- wrong fixes of the buggy code


class MHA(nn.Module):
    """Notebook 08's multi-head attention; each class attribute switches one of its bugs."""

    scale_by_width = False  # the bug: 1/√C instead of 1/√hs
    unscaled = False
    blocked_means_true = False  # the bug: nn.MultiheadAttention's mask convention
    zero_empty_rows = True

    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (
            nn.Linear(d_model, d_model, bias=bias) for _ in range(4)
        )
        width = d_model if self.scale_by_width else d_model // num_heads
        self.scale = 1.0 if self.unscaled else 1 / math.sqrt(width)

    def forward(self, query, key=None, value=None, mask=None):
        key = query if key is None else key
        value = query if value is None else value
        (B, T, C), S = query.shape, key.shape[1]
        nh, hs = self.num_heads, C // self.num_heads
        q = self.q_proj(query).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = self.k_proj(key).view(B, S, nh, hs).transpose(1, 2)  # (B, nh, S, hs)
        v = self.v_proj(value).view(B, S, nh, hs).transpose(1, 2)  # (B, nh, S, hs)
        scores = q @ k.transpose(-2, -1) * self.scale  # (B, nh, T, S)
        blocked = None if mask is None else (mask if self.blocked_means_true else ~mask)
        if blocked is not None:
            scores = scores.masked_fill(blocked, float("-inf"))
        weights = torch.softmax(scores, dim=-1)  # (B, nh, T, S)
        if blocked is not None and self.zero_empty_rows:
            weights = weights.masked_fill(blocked, 0.0)
        out = (weights @ v).transpose(1, 2).reshape(B, T, C)  # (B, T, C)
        return self.out_proj(out), weights


class MHAAsGiven(MHA):
    scale_by_width = blocked_means_true = True


class MHAScaleFixed(MHA):
    """Scaled by 1/√hs now; the mask is still read as True = blocked."""

    blocked_means_true = True


class MHAMaskFixed(MHA):
    """The mask is read as True = may attend now; still scaled by 1/√C."""

    scale_by_width = True


class MHAScaleRemoved(MHA):
    """'Fixed' the scale by deleting it."""

    unscaled = True


class MHANanRows(MHA):
    """Both fixed, but the zeros for rows with no allowed key were dropped with the old fill."""

    zero_empty_rows = False


def _real_keys(lengths, max_len):
    positions = torch.arange(max_len, device=lengths.device)  # (T,)
    allowed = (positions < lengths[:, None])[:, None, :].expand(-1, max_len, -1)  # (B, T, S)
    return allowed, positions


def attention_mask_as_given(lengths, max_len, causal=True):
    allowed, positions = _real_keys(lengths, max_len)
    if causal:
        allowed = allowed & (positions[None, :] <= positions[:, None])
    return allowed  # (B, T, S): lines the batch up with the heads


def attention_mask_head_last(lengths, max_len, causal=True):
    return attention_mask_as_given(lengths, max_len, causal)[:, :, None]  # (B, T, 1, S)


def attention_mask_head_first(lengths, max_len, causal=True):
    return attention_mask_as_given(lengths, max_len, causal)[None]  # (1, B, T, S)


class GQA(nn.Module):
    """Notebook 08's grouped-query attention; each class attribute switches one of its bugs."""

    cache_repeated = False  # the bug: the cache holds nh heads instead of nkv
    mask = "bottom-right"  # the bug: "is_causal" (top-left); also "none with a cache"

    def __init__(self, d_model, num_heads, num_kv_heads, bias=False):
        super().__init__()
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.head_size = d_model // num_heads
        kv = num_kv_heads * self.head_size
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, kv, bias=bias)
        self.v_proj = nn.Linear(d_model, kv, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, past_kv=None, causal=True):
        B, T, C = x.shape
        nh, nkv, hs = self.num_heads, self.num_kv_heads, self.head_size
        q = self.q_proj(x).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = self.k_proj(x).view(B, T, nkv, hs).transpose(1, 2)  # (B, nkv, T, hs)
        v = self.v_proj(x).view(B, T, nkv, hs).transpose(1, 2)  # (B, nkv, T, hs)
        if self.cache_repeated:
            k, v = (t.repeat_interleave(nh // nkv, dim=1) for t in (k, v))  # (B, nh, T, hs)
        if past_kv is not None:
            k, v = torch.cat([past_kv[0], k], dim=2), torch.cat([past_kv[1], v], dim=2)
        S = k.shape[2]
        k_rep, v_rep = (t.repeat_interleave(nh // t.shape[1], dim=1) for t in (k, v))
        if not causal:
            out = F.scaled_dot_product_attention(q, k_rep, v_rep)
        elif self.mask == "is_causal":
            out = F.scaled_dot_product_attention(q, k_rep, v_rep, is_causal=True)
        elif self.mask == "none with a cache" and past_kv is not None:
            out = F.scaled_dot_product_attention(q, k_rep, v_rep)
        else:
            allowed = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(S - T)  # (T, S)
            out = F.scaled_dot_product_attention(q, k_rep, v_rep, attn_mask=allowed)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, C)), (k, v)


class GQAAsGiven(GQA):
    cache_repeated = True
    mask = "is_causal"


class GQACacheFixed(GQA):
    """The cache holds nkv heads now; is_causal=True still aligns the mask top-left."""

    mask = "is_causal"


class GQAMaskFixed(GQA):
    """Bottom-right mask now; the cache still holds the repeated heads."""

    cache_repeated = True


class GQANoMaskWithCache(GQA):
    """is_causal=True only without a cache, and no mask at all with one."""

    mask = "none with a cache"


MISTAKES = [
    Mistake("mha_stub", stub, check_mha_matches_torch, "not implemented yet"),
    Mistake("mha_as_given", MHAAsGiven, check_mha_matches_torch, "by √d_model"),
    Mistake("mha_as_given_mask", MHAAsGiven, check_mha_mask, "Masked positions still get weight"),
    Mistake("mha_scale_fixed", MHAScaleFixed, check_mha_mask, "True = blocked"),
    Mistake("mha_mask_fixed", MHAMaskFixed, check_mha_matches_torch, "by √d_model"),
    Mistake("mha_mask_fixed_masked", MHAMaskFixed, check_mha_mask, "by √d_model"),
    Mistake("mha_scale_removed", MHAScaleRemoved, check_mha_matches_torch, "not scaled"),
    Mistake("mha_nan_rows", MHANanRows, check_mha_mask, "gave NaN"),
    Mistake("attention_mask_stub", stub, check_attention_mask_values, "not implemented yet"),
    Mistake(
        "attention_mask_as_given",
        attention_mask_as_given,
        check_attention_mask_values,
        "head dimension is missing",
    ),
    Mistake(
        "attention_mask_as_given_padding",
        attention_mask_as_given,
        check_attention_mask_padding_invariance,
        "head dimension is missing",
    ),
    Mistake(
        "attention_mask_head_last",
        attention_mask_head_last,
        check_attention_mask_values,
        "head dimension must be dim 1",
    ),
    Mistake(
        "attention_mask_head_first",
        attention_mask_head_first,
        check_attention_mask_padding_invariance,
        "head dimension must be dim 1",
    ),
    Mistake("gqa_stub", stub, check_gqa_kv_cache, "not implemented yet"),
    Mistake("gqa_as_given", GQAAsGiven, check_gqa_kv_cache, "holds all"),
    Mistake("gqa_as_given_decoding", GQAAsGiven, check_gqa_decoding, "holds all"),
    Mistake("gqa_cache_fixed", GQACacheFixed, check_gqa_decoding, "aligned top-left"),
    Mistake("gqa_mask_fixed", GQAMaskFixed, check_gqa_kv_cache, "holds all"),
    Mistake(
        "gqa_no_mask_with_cache", GQANoMaskWithCache, check_gqa_decoding, "still need a causal mask"
    ),
]


def attention_mask_fixed(lengths, max_len, causal=True):
    return attention_mask_as_given(lengths, max_len, causal)[:, None]  # (B, 1, T, S)


# The right fixes, with the checks of section 3 that must pass on them.
FIXES = [
    (MHA, (check_mha_matches_torch, check_mha_mask)),
    (attention_mask_fixed, (check_attention_mask_values, check_attention_mask_padding_invariance)),
    (GQA, (check_gqa_kv_cache, check_gqa_decoding)),
]

# The bugs of each buggy piece of code shown in the notebook, in the order the checks report them.
NOTEBOOK_BUGS = {
    "BuggyMultiHeadAttention": [
        (check_mha_matches_torch, "You scaled the scores by √d_model"),
        (check_mha_mask, "Masked positions still get weight"),
    ],
    "buggy_attention_mask": [
        (check_attention_mask_values, "the head dimension is missing"),
        (check_attention_mask_padding_invariance, "the head dimension is missing"),
    ],
    "BuggyGroupedQueryAttention": [
        (check_gqa_kv_cache, "the cache holds all"),
        (check_gqa_decoding, "the cache holds all"),
    ],
}
