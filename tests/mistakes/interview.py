"""Right and wrong answers to notebook 10's quiz, and wrong fixes of its find-the-bug exercises.

Shape legend: ``B`` batch, ``T`` query length, ``S`` key/value length, ``C`` = d_model, ``nh``
heads, ``nkv`` key/value heads, ``hs`` = C // nh.

``RIGHT_NUMBERS`` / ``RIGHT_CHOICES`` list every spelling a check must accept. ``WRONG_NUMBERS``
and ``WRONG_CHOICES`` pair a wrong answer with a substring of the diagnosis it must get: each
is a misconception a candidate really has. ``MISTAKES`` are wrong fixes of the buggy functions,
graded by the checks of notebook 02 and of `nb10_bugs`, `nb10_rotary` and `nb10_live`, and
``FIXES`` the right ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks.nb10_beyond import BEYOND_CHOICES
from autograder.checks.nb10_bugs import check_packed_attention
from autograder.checks.nb10_live import check_causal_gqa_live
from autograder.checks.nb10_loop import LOOP_CHOICES
from autograder.checks.nb10_ported import check_fixed_mha_mask, check_fixed_mha_matches_torch
from autograder.checks.nb10_rotary import check_rope_decoding, check_rope_full_pass
from autograder.checks.nb10_serving import SERVING_CHOICES

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
    "window_cache_bytes": [536_870_912, 2 * 32 * 8 * 128 * 4096 * 2],
    "mla_bytes_per_token": [70_272, 61 * (512 + 64) * 2],
    "swiglu_params": [135_266_304, 3 * 4096 * 11008],
    "block_bytes": [8_388_608, 2 * 32 * 32 * 128 * 16 * 2, 8 * 2**20],
    "chunked_prefill_steps": [17, math.ceil(8000 / 480), 17.0],
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
    WrongAnswer("window_cache_bytes", 2 * 32 * 8 * 128 * 32_768 * 2, "only the last W"),
    WrongAnswer("window_cache_bytes", 2 * 8 * 128 * 4096 * 2, "32 layers"),
    WrongAnswer("window_cache_bytes", 2 * 32 * 32 * 128 * 4096 * 2, "not its 32 query heads"),
    WrongAnswer("window_cache_bytes", 536_870_912 * 2, "2 bytes per value"),
    WrongAnswer("mla_bytes_per_token", 61 * 512 * 2, "decoupled RoPE key"),
    WrongAnswer("mla_bytes_per_token", 61 * 128 * (128 + 64 + 128) * 2, "after the up-proj"),
    WrongAnswer("mla_bytes_per_token", (512 + 64) * 2, "61 layers"),
    WrongAnswer("mla_bytes_per_token", 70_272 * 2, "bf16"),
    WrongAnswer("mla_bytes_per_token", 61 * (2 * 512 + 64) * 2, "cached once"),
    WrongAnswer("swiglu_params", 2 * 4096 * 11008, "three matrices"),
    WrongAnswer("swiglu_params", 2 * 4096 * 4 * 4096, "GELU MLP of width 4C"),
    WrongAnswer("swiglu_params", 3 * 4096 * 11008 + 2 * 11008 + 4096, "no biases"),
    WrongAnswer("block_bytes", 32 * 32 * 128 * 16 * 2, "keys and values"),
    WrongAnswer("block_bytes", 2 * 32 * 128 * 16 * 2, "all 32 layers"),
    WrongAnswer("block_bytes", 2 * 32 * 32 * 128 * 16 * 4, "2 bytes"),
    WrongAnswer("block_bytes", 2 * 32 * 32 * 128 * 2, "one token"),
    WrongAnswer("chunked_prefill_steps", math.ceil(8000 / 512), "decoding requests take"),
    WrongAnswer("chunked_prefill_steps", 1, "spread over several"),
    WrongAnswer("chunked_prefill_steps", 8000 / 480, "whole number"),
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
    "ring_buffer": ["c"],
    "mla_absorb": ["c"],
    "mla_intensity": ["a"],
    "mla_tensor_parallel": ["b"],
    "rope_scaling": ["b"],
    "dynamic_ntk_cache": ["d"],
    "alibi": ["b"],
    "rmsnorm": ["d"],
    "swiglu_width": ["b"],
    "flash_backward_d": ["a"],
    "paged_block_size": ["c"],
    "prefix_caching": ["b"],
    "continuous_batching": ["a"],
    "varlen_mask": ["d"],
    "chunked_prefill": ["b"],
    "split_kv_merge": ["c"],
    "speculative_rule": ["d"],
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
    for question, (notes, _) in (LOOP_CHOICES | BEYOND_CHOICES | SERVING_CHOICES).items()
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
    """Notebook 10's multi-head attention; each class attribute switches one of its bugs."""

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


class MHAZeroFill(MHA):
    """'Fixed' the mask by filling the blocked scores with 0 instead of -inf."""

    def forward(self, query, key=None, value=None, mask=None):
        if mask is None:
            return super().forward(query, key, value)
        key = query if key is None else key
        value = query if value is None else value
        (B, T, C), S = query.shape, key.shape[1]
        nh, hs = self.num_heads, C // self.num_heads
        q = self.q_proj(query).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = self.k_proj(key).view(B, S, nh, hs).transpose(1, 2)  # (B, nh, S, hs)
        v = self.v_proj(value).view(B, S, nh, hs).transpose(1, 2)  # (B, nh, S, hs)
        scores = (q @ k.transpose(-2, -1) * self.scale).masked_fill(~mask, 0.0)  # (B, nh, T, S)
        weights = torch.softmax(scores, dim=-1)  # (B, nh, T, S)
        out = (weights @ v).transpose(1, 2).reshape(B, T, C)  # (B, T, C)
        return self.out_proj(out), weights


class MHANanRows(MHA):
    """Both fixed, but the zeros for rows with no allowed key were dropped with the old fill."""

    zero_empty_rows = False


# ------------------------------------------------- fresh bugs: packed qkv, rotary cache


class Packed(nn.Module):
    """Notebook 10 §3.2's packed attention; each class attribute switches one of its bugs."""

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


class PackedValuesFirst(Packed):
    """Unpacked in the order of a codebase that packs values first."""

    layout = "v, k, q"


class PackedScaleRemoved(Packed):
    scale = "none"


class PackedNotCausal(Packed):
    causal = False


class PackedWithBias(Packed):
    """Kept nn.Linear's default bias=True: the reference has no biases."""

    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)


def rope(x, positions, base=10_000.0):
    """Rotate x (..., T, hs) at integer positions (T,): pair (i, i + hs/2) turns by pos · θ_i."""
    half = x.shape[-1] // 2
    theta = base ** (-torch.arange(half, dtype=torch.float32) / half)  # (hs/2,)
    angle = positions.float()[:, None] * theta  # (T, hs/2), float32 whatever x.dtype is
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


class Rotary(nn.Module):
    """Notebook 10 §3.3's rotary attention; each class attribute switches one of its bugs."""

    split_first = True  # the bug: False, RoPE on the (B, T, C) projection, then split
    restart = False  # positions restart at 0 on every call
    cache_plain = False  # caches the keys before rotation (and rotates the cache every call)
    rotate = True
    rotate_values = False
    top_left = False  # is_causal=True: right without a cache, wrong with one
    use_positions = True
    bias = False

    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (
            nn.Linear(d_model, d_model, bias=self.bias) for _ in range(4)
        )

    def forward(self, x, past_kv=None, positions=None):
        B, T, C = x.shape
        nh, hs = self.num_heads, C // self.num_heads
        P = 0 if past_kv is None else past_kv[0].shape[2]
        if positions is None or not self.use_positions:
            positions = torch.arange(T) if self.restart else torch.arange(P, P + T)  # (T,)
        turn = rope if self.rotate else (lambda t, p: t)
        q, k, v = (p(x) for p in (self.q_proj, self.k_proj, self.v_proj))  # (B, T, C)
        if not self.split_first:
            q, k = turn(q, positions), turn(k, positions)  # pairs (i, i + C/2) across heads
        q, k, v = (t.view(B, T, nh, hs).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
        if self.split_first:
            q = turn(q, positions)
            if not self.cache_plain:
                k = turn(k, positions)
        if self.rotate_values:
            v = turn(v, positions)
        if past_kv is not None:
            k, v = torch.cat([past_kv[0], k], dim=2), torch.cat([past_kv[1], v], dim=2)
        S = k.shape[2]
        keys = turn(k, torch.arange(S)) if self.cache_plain else k  # (B, nh, S, hs)
        if self.top_left:
            out = F.scaled_dot_product_attention(q, keys, v, is_causal=True)  # (B, nh, T, hs)
        else:
            allowed = torch.ones(T, S, dtype=torch.bool).tril(S - T)  # (T, S): bottom-right
            out = F.scaled_dot_product_attention(q, keys, v, attn_mask=allowed)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, C)), (k, v)


class RotaryAsGiven(Rotary):
    split_first = False


class RotaryRestarts(Rotary):
    restart = True


class RotaryCachePlain(Rotary):
    cache_plain = True


class RotaryNone(Rotary):
    rotate = False


class RotaryRotatesValues(Rotary):
    rotate_values = True


class RotaryIsCausal(Rotary):
    top_left = True


class RotaryIgnoresPositions(Rotary):
    use_positions = False


class RotaryWithBias(Rotary):
    bias = True


class RotaryNoPositionsArgument(Rotary):
    """The layer as 04 §8 first taught it: no `positions` argument."""

    def forward(self, x, past_kv=None):
        return super().forward(x, past_kv)


class RotaryHF(Rotary):
    """Hugging Face style: position_ids from cache_position, cos/sin (1, 1, T, hs) in float32,
    ``q * cos + rotate_half(q) * sin``, SDPA with an explicit bottom-right mask."""

    def forward(self, x, past_kv=None, positions=None):
        B, T, C = x.shape
        nh, hs = self.num_heads, C // self.num_heads
        past = 0 if past_kv is None else past_kv[0].shape[-2]
        position_ids = torch.arange(past, past + T) if positions is None else positions
        inv_freq = 1.0 / (10_000.0 ** (torch.arange(0, hs, 2).float() / hs))  # (hs/2,)
        freqs = position_ids.float()[:, None] * inv_freq  # (T, hs/2)
        emb = torch.cat((freqs, freqs), dim=-1)[None, None]  # (1, 1, T, hs)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)

        def rotate_half(t):
            return torch.cat((-t[..., hs // 2 :], t[..., : hs // 2]), dim=-1)

        q, k, v = (
            p(x).view(B, T, nh, hs).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj)
        )  # (B, nh, T, hs)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        if past_kv is not None:
            k, v = torch.cat([past_kv[0], k], dim=-2), torch.cat([past_kv[1], v], dim=-2)
        S = k.shape[-2]
        mask = torch.ones(T, S, dtype=torch.bool).tril(S - T)  # (T, S)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, nh, T, hs)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, C)), (k, v)


class RotaryComplexManual(Rotary):
    """Meta style: complex multiplication (halves as real and imaginary parts), and a softmax
    written out with -inf on the blocked scores."""

    def forward(self, x, past_kv=None, positions=None):
        B, T, C = x.shape
        nh, hs = self.num_heads, C // self.num_heads
        P = 0 if past_kv is None else past_kv[0].shape[2]
        positions = torch.arange(P, P + T) if positions is None else positions
        freqs = 1.0 / (10_000.0 ** (torch.arange(0, hs, 2).float() / hs))  # (hs/2,)
        angles = torch.outer(positions.float(), freqs)  # (T, hs/2)
        freqs_cis = torch.polar(torch.ones_like(angles), angles)  # (T, hs/2) complex64

        def turn(t):
            z = torch.complex(*t.float().chunk(2, dim=-1)) * freqs_cis  # (B, nh, T, hs/2)
            return torch.cat([z.real, z.imag], dim=-1).type_as(t)

        q, k, v = (
            p(x).view(B, T, nh, hs).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj)
        )  # (B, nh, T, hs)
        q, k = turn(q), turn(k)
        if past_kv is not None:
            k, v = torch.cat([past_kv[0], k], dim=2), torch.cat([past_kv[1], v], dim=2)
        S = k.shape[2]
        scores = q @ k.transpose(-2, -1) / math.sqrt(hs)  # (B, nh, T, S)
        blocked = torch.ones(T, S, dtype=torch.bool).triu(S - T + 1)  # (T, S): the future
        weights = torch.softmax(scores.masked_fill(blocked, float("-inf")), dim=-1)
        out = (weights @ v).transpose(1, 2).reshape(B, T, C)  # (B, T, C)
        return self.out_proj(out), (k, v)


# ------------------------------------------------------ the live round: grouped-query attention


def gqa_live(x, w_q, w_kv, w_out, num_heads, num_kv_heads, how="right"):
    """Causal GQA from bare weights, written out by hand; ``how`` switches one mistake."""
    B, T, C = x.shape
    nh, nkv = num_heads, num_kv_heads
    hs, n_rep = C // nh, nh // nkv
    w_k, w_v = w_kv.split(nkv * hs)  # (nkv·hs, C) each: keys first
    if how == "swapped":
        w_k, w_v = w_v, w_k
    if how == "per head":
        w_k, w_v = (t.reshape(nkv * hs, C) for t in w_kv.view(nkv, 2, hs, C).unbind(1))
    q = (x @ w_q.T).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
    k = (x @ w_k.T).view(B, T, nkv, hs).transpose(1, 2)  # (B, nkv, T, hs)
    v = (x @ w_v.T).view(B, T, nkv, hs).transpose(1, 2)  # (B, nkv, T, hs)
    if how == "tiled":
        k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)  # [K0, K1, K0, K1]
    else:
        k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
    scale = {"width": C**-0.5, "none": 1.0, "after": 1.0}.get(how, hs**-0.5)
    scores = q @ k.transpose(-2, -1) * scale  # (B, nh, T, T)
    if how != "not causal":
        future = torch.ones(T, T, dtype=torch.bool).triu(1)  # (T, T)
        scores = scores.masked_fill(future, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # (B, nh, T, T)
    if how == "after":
        weights = weights * hs**-0.5
    out = (weights @ v).transpose(1, 2).reshape(B, T, C)  # (B, T, C)
    return out @ w_out if how == "out not transposed" else out @ w_out.T


def _live(how):
    def causal_gqa_live(x, w_q, w_kv, w_out, num_heads, num_kv_heads):
        return gqa_live(x, w_q, w_kv, w_out, num_heads, num_kv_heads, how)

    return causal_gqa_live


def gqa_live_sdpa(x, w_q, w_kv, w_out, num_heads, num_kv_heads):
    """PyTorch's attention groups the heads itself (enable_gqa=True)."""
    B, T, C = x.shape
    hs = C // num_heads
    q = F.linear(x, w_q).unflatten(-1, (num_heads, hs)).transpose(1, 2)  # (B, nh, T, hs)
    k, v = F.linear(x, w_kv).unflatten(-1, (2, num_kv_heads, hs)).permute(2, 0, 3, 1, 4)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    return F.linear(out.transpose(1, 2).flatten(2), w_out)  # (B, T, C)


def gqa_live_grouped_einsum(x, w_q, w_kv, w_out, num_heads, num_kv_heads):
    """No repeat at all: queries reshaped into (B, nkv, n_rep, T, hs) groups."""
    B, T, C = x.shape
    nkv, n_rep, hs = num_kv_heads, num_heads // num_kv_heads, C // num_heads
    q = (x @ w_q.T).view(B, T, nkv, n_rep, hs).permute(0, 2, 3, 1, 4)  # (B, nkv, n_rep, T, hs)
    k, v = (x @ w_kv.T).view(B, T, 2, nkv, hs).permute(2, 0, 3, 1, 4)  # (B, nkv, T, hs) each
    scores = torch.einsum("bgrtd,bgsd->bgrts", q, k) / math.sqrt(hs)  # (B, nkv, n_rep, T, T)
    scores = scores + torch.full((T, T), float("-inf")).triu(1)  # causal
    out = torch.einsum("bgrts,bgsd->bgrtd", scores.softmax(-1), v)  # (B, nkv, n_rep, T, hs)
    return out.permute(0, 3, 1, 2, 4).reshape(B, T, C) @ w_out.T  # (B, T, C)


def gqa_live_hf_repeat_kv(x, w_q, w_kv, w_out, num_heads, num_kv_heads):
    """Hugging Face's repeat_kv (expand then reshape) and SDPA with an explicit mask."""
    B, T, C = x.shape
    hs, n_rep = C // num_heads, num_heads // num_kv_heads
    w_k, w_v = w_kv.chunk(2, dim=0)

    def repeat_kv(t):
        b, h, s, d = t.shape
        return t[:, :, None, :, :].expand(b, h, n_rep, s, d).reshape(b, h * n_rep, s, d)

    q = F.linear(x, w_q).view(B, T, -1, hs).transpose(1, 2)  # (B, nh, T, hs)
    k = repeat_kv(F.linear(x, w_k).view(B, T, -1, hs).transpose(1, 2))  # (B, nh, T, hs)
    v = repeat_kv(F.linear(x, w_v).view(B, T, -1, hs).transpose(1, 2))  # (B, nh, T, hs)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, nh, T, hs)
    return F.linear(out.transpose(1, 2).reshape(B, T, C), w_out)


MISTAKES = [
    Mistake("mha_stub", stub, check_fixed_mha_matches_torch, "not implemented yet"),
    Mistake("mha_as_given", MHAAsGiven, check_fixed_mha_matches_torch, "flatter than PyTorch's"),
    Mistake("mha_as_given_mask", MHAAsGiven, check_fixed_mha_mask, "which the mask forbids"),
    Mistake("mha_scale_fixed", MHAScaleFixed, check_fixed_mha_mask, "which the mask forbids"),
    Mistake("mha_mask_fixed", MHAMaskFixed, check_fixed_mha_matches_torch, "flatter"),
    Mistake("mha_mask_fixed_masked", MHAMaskFixed, check_fixed_mha_mask, "flatter"),
    Mistake("mha_scale_removed", MHAScaleRemoved, check_fixed_mha_matches_torch, "not scaled"),
    Mistake("mha_nan_rows", MHANanRows, check_fixed_mha_mask, "gave NaN"),
    Mistake("mha_zero_fill", MHAZeroFill, check_fixed_mha_mask, "Masked positions still get"),
    Mistake("packed_stub", stub, check_packed_attention, "not implemented yet"),
    Mistake("packed_as_given", PackedAsGiven, check_packed_attention, "do not read their values"),
    Mistake("packed_split_fixed", PackedSplitFixed, check_packed_attention, "do not sum to 1"),
    Mistake("packed_scale_fixed", PackedScaleFixed, check_packed_attention, "not read their"),
    Mistake("packed_v_first", PackedValuesFirst, check_packed_attention, "unpacked as (v, k, q)"),
    Mistake("packed_swapped", PackedSwapped, check_packed_attention, "unpacked as (k, q, v)"),
    Mistake("packed_unscaled", PackedScaleRemoved, check_packed_attention, "not scaled"),
    Mistake("packed_not_causal", PackedNotCausal, check_packed_attention, "causal mask"),
    Mistake("rotary_stub", stub, check_rope_full_pass, "not implemented yet"),
    Mistake("rotary_as_given", RotaryAsGiven, check_rope_full_pass, "every position moves by 100"),
    Mistake("rotary_as_given_dec", RotaryAsGiven, check_rope_decoding, "changes when every"),
    Mistake("rotary_cache_plain", RotaryCachePlain, check_rope_full_pass, "before rotation"),
    Mistake("rotary_none", RotaryNone, check_rope_full_pass, "without any rotation"),
    Mistake("rotary_none_decoding", RotaryNone, check_rope_decoding, "without any rotation"),
    Mistake("rotary_restarts", RotaryRestarts, check_rope_decoding, "as if they were at"),
    Mistake("rotary_is_causal", RotaryIsCausal, check_rope_decoding, "bottom-right mask"),
    Mistake("rotary_values", RotaryRotatesValues, check_rope_full_pass, "values rotated too"),
    Mistake("rotary_ignores_positions", RotaryIgnoresPositions, check_rope_full_pass, "ignores"),
    Mistake("rotary_bias", RotaryWithBias, check_rope_full_pass, "has a bias"),
    Mistake(
        "rotary_no_positions", RotaryNoPositionsArgument, check_rope_full_pass, "no `positions`"
    ),
    Mistake("live_stub", stub, check_causal_gqa_live, "not implemented yet"),
    Mistake("live_swapped", _live("swapped"), check_causal_gqa_live, "keys first"),
    Mistake("live_per_head", _live("per head"), check_causal_gqa_live, "GPT-NeoX"),
    Mistake("live_tiled", _live("tiled"), check_causal_gqa_live, "h % nkv"),
    Mistake("live_out", _live("out not transposed"), check_causal_gqa_live, "output projection"),
    Mistake("live_no_mask", _live("not causal"), check_causal_gqa_live, "causal mask"),
    Mistake("live_width", _live("width"), check_causal_gqa_live, "√d_model"),
    Mistake("live_unscaled", _live("none"), check_causal_gqa_live, "not scaled"),
    Mistake("live_after", _live("after"), check_causal_gqa_live, "after the softmax"),
    Mistake("packed_bias", PackedWithBias, check_packed_attention, "has a bias"),
]

# The right fixes, with the checks of sections 3 and 5 that must pass on them.
FIXES = [
    (MHA, (check_fixed_mha_matches_torch, check_fixed_mha_mask)),
    (Packed, (check_packed_attention,)),
    (Rotary, (check_rope_full_pass, check_rope_decoding)),
    (RotaryHF, (check_rope_full_pass, check_rope_decoding)),
    (RotaryComplexManual, (check_rope_full_pass, check_rope_decoding)),
    (_live("right"), (check_causal_gqa_live,)),
    (gqa_live_sdpa, (check_causal_gqa_live,)),
    (gqa_live_grouped_einsum, (check_causal_gqa_live,)),
    (gqa_live_hf_repeat_kv, (check_causal_gqa_live,)),
]

# The bugs of each buggy piece of code shown in the notebook, in the order the checks report them.
NOTEBOOK_BUGS = {
    "BuggyMultiHeadAttention": [
        (check_fixed_mha_matches_torch, "your attention weights are flatter than PyTorch's"),
        (check_fixed_mha_mask, "puts all its weight on keys [2, 3, 4], which the mask forbids"),
    ],
    "BuggyPackedCausalSelfAttention": [
        (check_packed_attention, "With a single position"),
    ],
    "BuggyRotaryCausalAttention": [
        (check_rope_full_pass, "Your output changes when every position moves by 100"),
    ],
}

MISTAKES = tried(MISTAKES, runs=(HIDDEN,), caught=({},))  # the visible test catches them too
CORRECT = [
    Correct(check, fix.__name__, fix, runs=({}, HIDDEN))
    for fix, fix_checks in FIXES
    for check in fix_checks
]
STUBS = [(check, stub) for _, fix_checks in FIXES for check in fix_checks]
REPLAY: list = []  # notebook 10 is not verified on a kernel's record in test_replay
