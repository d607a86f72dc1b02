"""Right and wrong answers to notebook 08's quiz, and wrong fixes of its find-the-bug exercises.

Shape legend: ``B`` batch, ``T`` query length, ``S`` key/value length, ``C`` = d_model, ``nh``
heads, ``nkv`` key/value heads, ``hs`` = C // nh.

``RIGHT_NUMBERS`` / ``RIGHT_CHOICES`` list every spelling a check must accept. ``WRONG_NUMBERS``
and ``WRONG_CHOICES`` pair a wrong answer with a substring of the diagnosis it must get: each
is a misconception a candidate really has. ``MISTAKES`` are wrong fixes of the buggy functions,
graded by the checks of notebooks 01-04.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from autograder.checks.attention import check_sdpa_mask, check_sdpa_values
from autograder.checks.gqa import check_repeat_kv
from autograder.checks.masking import check_causal_mask_no_leak, check_causal_mask_values
from autograder.checks.multihead import check_merge_heads, check_split_heads

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
    WrongAnswer("pushback", "bcdf", "includes (d), which holds up"),
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


def attention_as_given(q, k, v, mask=None):
    """The notebook's buggy attention: no scaling, softmax over queries, mask after softmax."""
    weights = torch.softmax(q @ k.transpose(-2, -1), dim=-2)  # (..., T, S)
    if mask is not None:
        weights = weights * mask
    return weights @ v, weights


def attention_axis_fixed(q, k, v, mask=None):
    """Softmax over the keys now, still unscaled and masked after the softmax."""
    weights = torch.softmax(q @ k.transpose(-2, -1), dim=-1)  # (..., T, S)
    if mask is not None:
        weights = weights * mask
    return weights @ v, weights


def attention_scale_fixed(q, k, v, mask=None):
    """Scaled now, still over the query axis."""
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-2)
    return weights @ v, weights


def attention_mask_after(q, k, v, mask=None):
    """Scale and axis fixed; the mask still multiplies the weights after the softmax."""
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    if mask is not None:
        weights = weights * mask
    return weights @ v, weights


def attention_nan_rows(q, k, v, mask=None):
    """-inf before the softmax, but a query with no allowed key is left with NaN."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def attention_large_negative(q, k, v, mask=None):
    """-1e9 instead of -inf: a query with no allowed key gets uniform weights."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def attention_divide_by_dk(q, k, v, mask=None):
    """Scaled by 1/d_k instead of 1/√d_k."""
    weights = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1], dim=-1)
    return weights @ v, weights


def split_as_given(x, num_heads):
    B, T, C = x.shape
    return x.view(B, num_heads, T, C // num_heads)  # (B, nh, T, hs), tokens scrambled


def split_without_transpose(x, num_heads):
    B, T, C = x.shape
    return x.view(B, T, num_heads, C // num_heads)  # (B, T, nh, hs): heads not in dim 1


def merge_as_given(x):
    B, nh, T, hs = x.shape
    return x.reshape(B, T, nh * hs)  # (B, T, C), tokens scrambled


def merge_view_after_transpose(x):
    B, nh, T, hs = x.shape
    return x.transpose(1, 2).view(B, T, nh * hs)  # fails: not contiguous after transpose


def causal_as_given(T, S=None, device=None):
    S = T if S is None else S
    return torch.ones(T, S, dtype=torch.bool, device=device).tril(diagonal=-1)


def causal_top_left(T, S=None, device=None):
    """Diagonal fixed, but aligned top-left (like is_causal=True) when S > T."""
    S = T if S is None else S
    return torch.ones(T, S, dtype=torch.bool, device=device).tril()


def causal_offset_minus_one(T, S=None, device=None):
    """Bottom-right, but the diagonal still excluded."""
    S = T if S is None else S
    return torch.ones(T, S, dtype=torch.bool, device=device).tril(diagonal=S - T - 1)


def repeat_as_given(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)  # [K0, K1, K0, K1]


def repeat_on_positions(x, n_rep):
    return x.repeat_interleave(n_rep, dim=2)  # repeats positions, not heads


MISTAKES = [
    Mistake("attention_stub", stub, check_sdpa_values, "not implemented yet"),
    Mistake("attention_as_given", attention_as_given, check_sdpa_values, "query axis (dim=-2)"),
    Mistake("attention_as_given_mask", attention_as_given, check_sdpa_mask, "after the softmax"),
    Mistake("attention_axis_fixed", attention_axis_fixed, check_sdpa_values, "without scaling"),
    Mistake("attention_scale_fixed", attention_scale_fixed, check_sdpa_values, "query axis"),
    Mistake("attention_divide_by_dk", attention_divide_by_dk, check_sdpa_values, "divided by d_k"),
    Mistake("attention_mask_after", attention_mask_after, check_sdpa_mask, "after the softmax"),
    Mistake("attention_nan_rows", attention_nan_rows, check_sdpa_mask, "gave NaN"),
    Mistake("attention_large_negative", attention_large_negative, check_sdpa_mask, "uniform"),
    Mistake("split_stub", stub, check_split_heads, "not implemented yet"),
    Mistake("split_as_given", split_as_given, check_split_heads, "mixes tokens between heads"),
    Mistake("split_without_transpose", split_without_transpose, check_split_heads,
            "heads belong in dim 1"),
    Mistake("merge_stub", stub, check_merge_heads, "not implemented yet"),
    Mistake("merge_as_given", merge_as_given, check_merge_heads, "which mixes tokens"),
    Mistake("merge_view_after_transpose", merge_view_after_transpose, check_merge_heads,
            "use .reshape"),
    Mistake("causal_stub", stub, check_causal_mask_values, "not implemented yet"),
    Mistake("causal_as_given", causal_as_given, check_causal_mask_values,
            "excludes the diagonal"),
    Mistake("causal_as_given_leak", causal_as_given, check_causal_mask_no_leak, "ignores its own"),
    Mistake("causal_top_left", causal_top_left, check_causal_mask_values, "aligned top-left"),
    Mistake("causal_top_left_decoding", causal_top_left, check_causal_mask_no_leak,
            "what is_causal=True gives"),
    Mistake("causal_offset_minus_one", causal_offset_minus_one, check_causal_mask_values,
            "excludes the diagonal"),
    Mistake("repeat_stub", stub, check_repeat_kv, "not implemented yet"),
    Mistake("repeat_as_given", repeat_as_given, check_repeat_kv, "repeat_interleave"),
    Mistake("repeat_on_positions", repeat_on_positions, check_repeat_kv, "not along positions"),
]

# The bugs of each buggy function shown in the notebook, in the order the checks report them.
NOTEBOOK_BUGS = {
    "buggy_attention": [
        (check_sdpa_values, "query axis (dim=-2)"),
        (check_sdpa_mask, "the mask was applied after the softmax"),
    ],
    "buggy_split_heads": [(check_split_heads, "mixes tokens between heads")],
    "buggy_merge_heads": [(check_merge_heads, "which mixes tokens")],
    "buggy_causal_mask": [
        (check_causal_mask_values, "excludes the diagonal"),
        (check_causal_mask_no_leak, "ignores its own key"),
    ],
    "buggy_repeat_kv": [(check_repeat_kv, "repeat_interleave")],
}
