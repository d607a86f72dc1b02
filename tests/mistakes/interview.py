"""Right and wrong answers to notebook 08's quiz, and wrong fixes of its find-the-bug exercises.

Shape legend: ``B`` batch, ``T`` query length, ``S`` key/value length, ``C`` = d_model, ``nh``
heads, ``nkv`` key/value heads, ``hs`` = C // nh.

``RIGHT_NUMBERS`` / ``RIGHT_CHOICES`` list every spelling a check must accept. ``WRONG_NUMBERS``
and ``WRONG_CHOICES`` pair a wrong answer with a substring of the diagnosis it must get: each
is a misconception a candidate really has. ``MISTAKES`` are wrong fixes of the buggy functions,
graded by the checks of notebook 02 and of `nb08_bugs`, and ``FIXES`` the right ones.
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
from autograder.checks.nb08_bugs import (
    check_causal_mha_live,
    check_packed_attention,
    check_rope_decoding,
    check_rope_full_pass,
)
from autograder.checks.nb08_loop import LOOP_CHOICES

from . import HIDDEN, Correct, Mistake, stub, tried


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
    "crossover_seq_len": [10_240, 2 * 5120, 10240.0],
    "prefill_intensity": [2048, 2 * 2048 * 5120**2 / (2 * 5120**2)],
    "decode_intensity": [1, 1.0, np.float32(1.0)],
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
    WrongAnswer("crossover_seq_len", 5120, "only half the projections"),
    WrongAnswer("crossover_seq_len", 2560, "upside down"),
    WrongAnswer("crossover_seq_len", 4 * 5120, "count both attention products"),
    WrongAnswer("crossover_seq_len", 5120**2, "grows linearly with C"),
    WrongAnswer("crossover_seq_len", 10_000, "set them equal"),
    WrongAnswer("prefill_intensity", 1024, "2 FLOPs per multiply-add"),
    WrongAnswer("prefill_intensity", 4096, "2 bytes"),
    WrongAnswer("prefill_intensity", 2048 * 5120, "not of one row"),
    WrongAnswer("decode_intensity", 0.5, "2 FLOPs per multiply-add"),
    WrongAnswer("decode_intensity", 2, "2 bytes"),
    WrongAnswer("decode_intensity", 2048, "prefill"),
    WrongAnswer("decode_intensity", 0.3, "whole number"),
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
    "complexity": ["c"],
    "flash_exact": ["a"],
    "flash_io": ["d"],
    "flash_backward": ["b"],
    "gqa_tradeoff": ["c"],
    "tp_kv_heads": ["a"],
    "sliding_window": ["b"],
    "attention_sinks": ["d"],
    "rope_cache": ["c"],
    "pre_ln": ["a"],
    "dropout_where": ["d"],
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

# Section 5: every wrong letter gets the start of its own note.
WRONG_CHOICES += [
    WrongAnswer(question, letter, note[:40])
    for question, (notes, _) in LOOP_CHOICES.items()
    for letter, note in notes.items()
    if letter != RIGHT_CHOICES[question][0]
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


# ------------------------------------------------- fresh bugs: packed qkv, rotary cache


class Packed(nn.Module):
    """Notebook 08 §3.2's packed attention; each class attribute switches one of its bugs."""

    layout = "q, k, v"  # the bug: "per head" (viewed as (B, T, nh, 3, hs)); or "k, q, v"
    scale = "before"  # the bug: "after" the softmax; also "none"
    causal = True

    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x):
        return packed_attention(
            x,
            self.qkv.weight,
            self.proj.weight,
            self.num_heads,
            self.layout,
            self.scale,
            self.causal,
        )


def packed_attention(x, w_qkv, w_out, num_heads, layout="q, k, v", scale="before", causal=True):
    B, T, C = x.shape
    nh, hs = num_heads, C // num_heads
    qkv = x @ w_qkv.T  # (B, T, 3C)
    if layout == "per head":
        q, k, v = qkv.view(B, T, nh, 3, hs).unbind(dim=3)  # (B, T, nh, hs) each
    else:
        parts = dict(zip(layout.split(", "), qkv.split(C, dim=-1), strict=True))
        q, k, v = (parts[n].view(B, T, nh, hs) for n in "qkv")  # (B, T, nh, hs) each
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
    scores = q @ k.transpose(-2, -1)  # (B, nh, T, T)
    if scale == "before":
        scores = scores / math.sqrt(hs)
    if causal:
        allowed = torch.ones(T, T, dtype=torch.bool).tril()  # (T, T)
        scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # (B, nh, T, T)
    if scale == "after":
        weights = weights / math.sqrt(hs)
    out = (weights @ v).transpose(1, 2).reshape(B, T, C)  # (B, T, C)
    return out @ w_out.T  # (B, T, C)


class PackedAsGiven(Packed):
    layout, scale = "per head", "after"


class PackedSplitFixed(Packed):
    """Unpacked as (q, k, v) chunks now; the scale still comes after the softmax."""

    scale = "after"


class PackedScaleFixed(Packed):
    """Scaled before the softmax now; the packed output is still read per head."""

    layout = "per head"


class PackedSwapped(Packed):
    """'Fixed' the split into chunks, but in the order of a codebase that packs k first."""

    layout = "k, q, v"


class PackedScaleRemoved(Packed):
    scale = "none"


class PackedNotCausal(Packed):
    causal = False


def rope(x, positions, base=10_000.0):
    """Rotate x (..., T, hs) at integer positions (T,): pair (i, i + hs/2) turns by pos · θ_i."""
    half = x.shape[-1] // 2
    theta = base ** (-torch.arange(half, dtype=x.dtype, device=x.device) / half)  # (hs/2,)
    angle = positions.to(x.dtype)[:, None] * theta  # (T, hs/2)
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)  # (..., T, hs)


class Rotary(nn.Module):
    """Notebook 08 §3.3's rotary attention; each class attribute switches one of its bugs."""

    restart = False  # the bug: positions restart at 0 on every call
    cache_plain = False  # caches the keys before rotation (and rotates the cache every call)
    rotate = True

    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (
            nn.Linear(d_model, d_model, bias=False) for _ in range(4)
        )

    def forward(self, x, past_kv=None):
        B, T, C = x.shape
        nh, hs = self.num_heads, C // self.num_heads
        q, k, v = (
            p(x).view(B, T, nh, hs).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj)
        )  # (B, nh, T, hs)
        P = 0 if past_kv is None else past_kv[0].shape[2]
        positions = torch.arange(T) if self.restart else torch.arange(P, P + T)  # (T,)
        if self.rotate:
            q = rope(q, positions)
            if not self.cache_plain:
                k = rope(k, positions)
        if past_kv is not None:
            k, v = torch.cat([past_kv[0], k], dim=2), torch.cat([past_kv[1], v], dim=2)
        S = k.shape[2]
        keys = rope(k, torch.arange(S)) if self.cache_plain else k  # (B, nh, S, hs)
        allowed = torch.ones(T, S, dtype=torch.bool).tril(S - T)  # (T, S): bottom-right
        out = F.scaled_dot_product_attention(q, keys, v, attn_mask=allowed)  # (B, nh, T, hs)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, C)), (k, v)


class RotaryAsGiven(Rotary):
    restart = True


class RotaryCachePlain(Rotary):
    cache_plain = True


class RotaryNone(Rotary):
    rotate = False


def causal_mha_live_swapped(x, w_qkv, w_out, num_heads):
    return packed_attention(x, w_qkv, w_out, num_heads, layout="k, q, v")


def causal_mha_live_no_mask(x, w_qkv, w_out, num_heads):
    return packed_attention(x, w_qkv, w_out, num_heads, causal=False)


def causal_mha_live(x, w_qkv, w_out, num_heads):
    return packed_attention(x, w_qkv, w_out, num_heads)


MISTAKES = [
    Mistake("mha_stub", stub, check_mha_matches_torch, "not implemented yet"),
    Mistake("mha_as_given", MHAAsGiven, check_mha_matches_torch, "by √d_model"),
    Mistake("mha_as_given_mask", MHAAsGiven, check_mha_mask, "Masked positions still get weight"),
    Mistake("mha_scale_fixed", MHAScaleFixed, check_mha_mask, "True = blocked"),
    Mistake("mha_mask_fixed", MHAMaskFixed, check_mha_matches_torch, "by √d_model"),
    Mistake("mha_mask_fixed_masked", MHAMaskFixed, check_mha_mask, "by √d_model"),
    Mistake("mha_scale_removed", MHAScaleRemoved, check_mha_matches_torch, "not scaled"),
    Mistake("mha_nan_rows", MHANanRows, check_mha_mask, "gave NaN"),
    Mistake("packed_stub", stub, check_packed_attention, "not implemented yet"),
    Mistake("packed_as_given", PackedAsGiven, check_packed_attention, "(B, T, nh, 3, hs)"),
    Mistake("packed_as_given_first", PackedAsGiven, check_packed_attention, "fix that first"),
    Mistake("packed_split_fixed", PackedSplitFixed, check_packed_attention, "after the softmax"),
    Mistake("packed_scale_fixed", PackedScaleFixed, check_packed_attention, "(B, T, 3, nh, hs)"),
    Mistake("packed_swapped", PackedSwapped, check_packed_attention, "unpacked as (k, q, v)"),
    Mistake("packed_unscaled", PackedScaleRemoved, check_packed_attention, "not scaled"),
    Mistake("packed_not_causal", PackedNotCausal, check_packed_attention, "causal mask"),
    Mistake("rotary_stub", stub, check_rope_full_pass, "not implemented yet"),
    Mistake("rotary_as_given", RotaryAsGiven, check_rope_decoding, "restart at 0"),
    Mistake("rotary_cache_plain", RotaryCachePlain, check_rope_full_pass, "before rotation"),
    Mistake("rotary_none", RotaryNone, check_rope_full_pass, "without any rotation"),
    Mistake("rotary_none_decoding", RotaryNone, check_rope_decoding, "not rotated at all"),
    Mistake("live_stub", stub, check_causal_mha_live, "not implemented yet"),
    Mistake("live_swapped", causal_mha_live_swapped, check_causal_mha_live, "(k, q, v)"),
    Mistake("live_no_mask", causal_mha_live_no_mask, check_causal_mha_live, "causal mask"),
]

# The right fixes, with the checks of sections 3 and 5 that must pass on them.
FIXES = [
    (MHA, (check_mha_matches_torch, check_mha_mask)),
    (Packed, (check_packed_attention,)),
    (Rotary, (check_rope_full_pass, check_rope_decoding)),
    (causal_mha_live, (check_causal_mha_live,)),
]

# The bugs of each buggy piece of code shown in the notebook, in the order the checks report them.
NOTEBOOK_BUGS = {
    "BuggyMultiHeadAttention": [
        (check_mha_matches_torch, "You scaled the scores by √d_model"),
        (check_mha_mask, "Masked positions still get weight"),
    ],
    "BuggyPackedCausalSelfAttention": [
        (check_packed_attention, "viewed as (B, T, nh, 3, hs)"),
    ],
    "BuggyRotaryCausalAttention": [
        (check_rope_decoding, "positions restart at 0"),
    ],
}

MISTAKES = tried(MISTAKES, runs=(HIDDEN,), caught=({},))  # the visible test catches them too
CORRECT = [
    Correct(check, fix.__name__, fix, runs=({}, HIDDEN))
    for fix, fix_checks in FIXES
    for check in fix_checks
]
STUBS = [(check, stub) for _, fix_checks in FIXES for check in fix_checks]
REPLAY: list = []  # notebook 08 is not verified on a kernel's record in test_replay
