"""Problems from notebook 04: repeating kv heads, one decoding step with a KV cache.

Shape legend: ``B`` batch, ``T`` new positions, ``P`` cached positions, ``S`` = P + T, ``C`` =
d_model, ``nh`` query heads, ``nkv`` key/value heads, ``hs`` = C // nh, ``n_rep`` = nh // nkv.
"""

from __future__ import annotations

import re

import torch
from torch import nn

from autograder.checks import nb04_gqa as gqa

from .problems_layers import GQA_EXTENSION
from .task import (
    Problem,
    Task,
    Variant,
    course_check,
    fail,
    layout_moved,
    one_tensor,
    shaped,
    tensors,
)

# ------------------------------------------------------------------------------ repeat_kv


def _repeat_bshd(fn):
    def repeat_kv(x, n_rep):
        out = one_tensor(fn(x.transpose(1, 2), n_rep), "repeat_kv", "the repeated tensor")
        B, nkv, S, hs = x.shape
        shaped(out, (B, S, nkv * n_rep, hs), "repeat_kv", "the output", "(B, S, nh, hs)")
        return out.transpose(1, 2)

    return repeat_kv


def _repeat_to_heads(fn):
    def repeat_kv(x, n_rep):
        return fn(x, x.shape[1] * n_rep)

    return repeat_kv


def _repeat_task(name: str, signature: str, contract: str, adapt, replacements=()) -> Task:
    grader = course_check(gqa.check_repeat_kv, adapt)
    return Task(name, signature, contract, (grader,), (gqa.REPEAT,), (), replacements)


_HEADS_THIRD = (  # the check speaks of heads in dim 1; this layout has them in dim 2
    (re.escape(".repeat(1, n_rep, 1, 1)"), ".repeat(1, 1, n_rep, 1)"),
    (re.escape("n_rep, dim=1)"), "n_rep, dim=2)"),
    (re.escape("head dimension (dim=1)"), "head dimension (dim=2)"),
)


_GROUPS = (
    "Consecutive query heads share a kv head: query head h reads kv head h // n_rep, so kv "
    "heads [K0, K1] become [K0, K0, K1, K1] for n_rep = 2. Do not change the input."
)

REPEAT_KV = Problem(
    "repeat_kv",
    "Expand key/value heads for grouped-query attention",
    "notebook 04 §2",
    "Grouped-query attention keeps fewer key/value heads than query heads; before attending, "
    "each kv head is repeated for the query heads that read it.",
    (
        Variant(
            "bshd",
            layout_moved(
                _repeat_task(
                    "repeat_kv",
                    "def repeat_kv(x, n_rep):",
                    "**Heads third**, the `(batch, seqlen, heads, head_dim)` layout of "
                    "FlashAttention's API: `x` (B, S, nkv, hs) -> (B, S, nkv·n_rep, hs). "
                    + _GROUPS,
                    _repeat_bshd,
                    _HEADS_THIRD,
                )
            ),
        ),
        Variant(
            "to_heads",
            _repeat_task(
                "expand_kv",
                "def expand_kv(x, num_heads):",
                "`x` (B, nkv, S, hs) -> (B, num_heads, S, hs): you are given the number of "
                "**query heads**, a multiple of nkv, not the repeat factor. " + _GROUPS,
                _repeat_to_heads,
            ),
        ),
    ),
    GQA_EXTENSION,
    ("gqa", "tp_kv_heads"),
    written=("gqa_tradeoff",),
    numeric=("kv_llama3_8b",),
    box_minutes=10,
)

# --------------------------------------------------------------------- a decoding step


def _decoder(step):
    """A ``GroupedQueryAttention`` of the course's interface whose forward is ``step``."""

    class GroupedQueryAttention(nn.Module):
        def __init__(self, d_model, num_heads, num_kv_heads, bias=False):
            super().__init__()
            kv = num_kv_heads * (d_model // num_heads)
            self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
            self.q_proj = nn.Linear(d_model, d_model, bias=bias)
            self.k_proj = nn.Linear(d_model, kv, bias=bias)
            self.v_proj = nn.Linear(d_model, kv, bias=bias)
            self.out_proj = nn.Linear(d_model, d_model, bias=bias)

        def forward(self, x, past_kv=None, causal=True):
            layers = (self.q_proj, self.k_proj, self.v_proj, self.out_proj)
            return step(x, past_kv, layers, self.num_heads, self.num_kv_heads)

    return GroupedQueryAttention


def _step_bshd(fn):
    def step(x, past, layers, nh, nkv):
        cache = None if past is None else tuple(t.transpose(1, 2) for t in past)  # (B, P, nkv, hs)
        result = fn(x, cache, *layers, nh, nkv)
        if not isinstance(result, tuple | list) or len(result) != 2:
            fail("`decode_step` should return `(out, (k, v))`: the output and the new cache.")
        out = one_tensor(result[0], "decode_step", "`out`")
        k, v = tensors(result[1], "decode_step", ("k", "v"))
        B, T, C = x.shape
        S = T + (0 if past is None else past[0].shape[2])
        for t, name in ((k, "the cached `k`"), (v, "the cached `v`")):
            shaped(t, (B, S, nkv, C // nh), "decode_step", name, "(B, S, nkv, hs)")
        return out, (k.transpose(1, 2), v.transpose(1, 2))

    return step


def _step_static(fn):
    def step(x, past, layers, nh, nkv):
        B, T, C = x.shape
        P = 0 if past is None else past[0].shape[2]
        # slots past P + T hold NaN: attending to them would show
        k_cache, v_cache = (torch.full((B, nkv, P + T + 3, C // nh), torch.nan) for _ in "kv")
        k_cache, v_cache = k_cache.to(x.dtype), v_cache.to(x.dtype)
        if past is not None:
            k_cache[:, :, :P], v_cache[:, :, :P] = past
        out = one_tensor(fn(x, k_cache, v_cache, P, *layers, nh, nkv), "decode_step", "`out`")
        if out.isnan().any():
            fail(
                "Your output is NaN: it reads slots of the cache past pos + T, which hold no "
                "token yet; attend over k_cache[:, :, :pos + T] only."
            )
        return out, (k_cache[:, :, : P + T].clone(), v_cache[:, :, : P + T].clone())

    return step


def _step_task(signature: str, contract: str, step, rewrites=(), replacements=()) -> Task:
    graders = tuple(
        course_check(check, lambda fn: _decoder(step(fn)))
        for check in (gqa.check_gqa_kv_cache, gqa.check_gqa_decoding)
    )
    names = (gqa.FORWARD, gqa.GQA)
    return Task("decode_step", signature, contract, graders, names, rewrites, replacements)


_STEP = (
    "`x` (B, T, C) holds the T ≥ 1 new tokens (a prompt chunk or one token); `q_proj`, "
    "`k_proj`, `v_proj`, `o_proj` are `nn.Linear` layers (k and v project to nkv·hs features). "
    "The new queries are the last T positions: causal, each sees every cached key and the new "
    "ones up to itself. Query head h reads kv head h // n_rep. Return `out` (B, T, C) after "
    "`o_proj`."
)

GQA_DECODE = Problem(
    "gqa_decode",
    "One decoding step of grouped-query attention with a KV cache",
    "notebook 04 §3–6",
    "Serve a grouped-query attention layer token by token: each step projects the new tokens, "
    "extends the cache and attends over everything cached.",
    (
        Variant(
            "bshd",
            _step_task(
                "def decode_step(x, cache, q_proj, k_proj, v_proj, o_proj, num_heads, "
                "num_kv_heads):",
                f"{_STEP} `cache` is None or `(k, v)`, each **(B, P, nkv, hs)** (positions "
                "before heads, FlashAttention's cache layout). Return `(out, (k, v))` with the "
                "cache extended to (B, P + T, nkv, hs).",
                _step_bshd,
                replacements=(
                    (re.escape("torch.cat([past_k, k], dim=2)"), "torch.cat([past_k, k], dim=1)"),
                ),
            ),
        ),
        Variant(
            "static",
            _step_task(
                "def decode_step(x, k_cache, v_cache, pos, q_proj, k_proj, v_proj, o_proj, "
                "num_heads, num_kv_heads):",
                f"{_STEP} A **preallocated cache**, as Hugging Face's `StaticCache` and Meta's "
                "reference code keep it: `k_cache`, `v_cache` (B, nkv, S_max, hs) hold `pos` "
                "cached positions; write the new keys and values into positions pos … "
                "pos + T − 1 **in place**, attend over the first pos + T only, and return `out` "
                "alone.",
                _step_static,
                rewrites=(
                    (
                        "Your cached k and v should be",
                        "After your call, k_cache and v_cache do not hold the new tokens' keys "
                        "and values at positions pos … pos + T − 1: write them there in place, "
                        "k_cache[:, :, pos:pos + T] = (k_proj(x) split into kv heads).",
                    ),
                    (
                        "should be the past keys and values followed",
                        "After your call, k_cache and v_cache do not hold the new tokens' keys "
                        "and values at positions pos … pos + T − 1 behind the cached ones: "
                        "write them there in place.",
                    ),
                ),
            ),
        ),
    ),
    Task(
        "kv_cache_bytes",
        "def kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, "
        "bytes_per_value=2):",
        "Now the interviewer asks what this cache costs at 32k tokens: return the bytes of "
        "the keys and values every layer keeps, by integer arithmetic (no tensors).",
        (course_check(gqa.check_kv_cache_bytes, lambda fn: fn),),
        (gqa.BYTES,),
    ),
    ("gqa_tradeoff", "tp_kv_heads", "rope_cache"),
    written=("kv_cache_cost", "gqa_tradeoff"),
    numeric=("kv_llama3_8b", "decode_ms_h100"),
)
