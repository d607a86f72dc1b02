"""Problems from notebook 08 §3–4 and 06 §6: the attention-sink cache, multi-head latent
attention (naive, then absorbed decode) and the tiled backward pass.

Shape legend: ``B`` batch, ``nh`` query heads, ``nkv`` key/value heads, ``S`` kept positions,
``hs`` head size, ``T`` new positions, ``C`` = d_model, ``dc`` = d_latent, ``dr`` = d_rope.
"""

from __future__ import annotations

import math

import torch

from autograder.checks import nb06_backward as backward
from autograder.checks import nb08_mla as mla
from autograder.checks import nb08_sinks as sinks

from .problems_long_context import SLIDING_WINDOW
from .task import Problem, Task, Variant, course_check, layout_moved

# ----------------------------------------------------------------------------- sink cache


def _sink_bshd(fn):
    """The check's (B, heads, S, hs) tensors in flash-attn's (B, S, heads, hs) layout."""

    def sink_attention(q, k, v, past_k, past_v, n_sink, window):
        moved = (t.transpose(1, 2) for t in (q, k, v, past_k, past_v))
        out, (keys, values) = fn(*moved, n_sink, window)
        return out.transpose(1, 2), (keys.transpose(1, 2), values.transpose(1, 2))

    return sink_attention


def _sink_stacked(fn):
    """The check's cache ``(past_k, past_v)`` as one stacked tensor ``(2, B, nkv, S, hs)``."""

    def sink_attention(q, k, v, past_k, past_v, n_sink, window):
        out, cache = fn(q, k, v, torch.stack((past_k, past_v)), n_sink, window)
        return out, (cache[0], cache[1])

    return sink_attention


_SINKS = (
    "Decode one token with StreamingLLM's cache: append the new key and value, then keep only "
    "the first `n_sink` tokens and the last `window` ones. Rotate queries and keys (RoPE, "
    "split halves, base 10000) at their places **in the cache**, 0 … n − 1, the query at "
    "n − 1; store the keys unrotated. Grouped heads: nh is a multiple of nkv."
)

SINK_CACHE = Problem(
    "sink_cache",
    "A streaming cache with attention sinks",
    "notebook 08 §3",
    "Keep a bounded cache for endless generation without breaking the model.",
    (
        Variant(
            "bshd",
            layout_moved(
                Task(
                    "sink_attention",
                    "def sink_attention(q, k, v, past_k, past_v, n_sink, window):",
                    f"{_SINKS} flash-attn's layout: `q` (B, 1, nh, hs), `k` and `v` (B, 1, "
                    "nkv, hs), the cache `past_k`, `past_v` (B, S, nkv, hs). Return `(out, "
                    "(keys, values))`: `out` (B, 1, nh, hs), the new cache in the same layout.",
                    (course_check(sinks.check_sink_attention, _sink_bshd),),
                    (sinks.SINK,),
                )
            ),
        ),
        Variant(
            "stacked",
            Task(
                "sink_attention",
                "def sink_attention(q, k, v, past_kv, n_sink, window):",
                f"{_SINKS} `q` (B, nh, 1, hs), `k` and `v` (B, nkv, 1, hs); the cache is one "
                "tensor `past_kv` (2, B, nkv, S, hs), keys then values. Return `(out, kv)`: "
                "`out` (B, nh, 1, hs) and the new stacked cache.",
                (course_check(sinks.check_sink_attention, _sink_stacked),),
                (sinks.SINK,),
            ),
        ),
    ),
    SLIDING_WINDOW.extension,
    ("attention_sinks", "sliding_window"),
    written=("sinks_why", "window_reach"),
    numeric=("mistral_window",),
    box_minutes=20,
)

# ------------------------------------------------------------------------------------ MLA


def _packed(cls):
    """The learner's class, whose cache is one tensor ``(B, S, dc + dr)``, as the check's
    ``(c_kv, k_rope)``."""

    class Packed(cls):
        def forward(self, x, past_kv=None):
            args = (x,) if past_kv is None else (x, torch.cat(past_kv, dim=-1))
            out, cache = super().forward(*args)
            return out, cache.split([self.d_latent, self.d_rope], dim=-1)

    return Packed


def _keyed(cls):
    """The learner's class, whose cache is ``{"latent": …, "k_rope": …}``."""

    class Keyed(cls):
        def forward(self, x, past_kv=None):
            args = (
                (x,)
                if past_kv is None
                else (x, dict(zip(("latent", "k_rope"), past_kv, strict=True)))
            )
            out, cache = super().forward(*args)
            return out, (cache["latent"], cache["k_rope"])

    return Keyed


_MLA = (
    "DeepSeek's multi-head latent attention, `__init__(self, d_model, num_heads, d_latent, "
    "head_dim, d_rope)` storing those four sizes as attributes, bias-free `nn.Linear`s: `wq` "
    "(C → nh · (head_dim + d_rope), each head's [q_nope | q_rope]), `wkv_a` (C → d_latent + "
    "d_rope: the latent, then one RoPE key shared by every head), `kv_norm = "
    "nn.RMSNorm(d_latent)`, `wkv_b` (d_latent → nh · 2 · head_dim, each head's [k_nope | v]), "
    "`wo` (nh · head_dim → C). Scores (q_nope · k_nope + q_rope · k_rope) / √(head_dim + "
    "d_rope), causal over the cache; RoPE split halves, base 10000, at positions P … P + T − 1 "
    "after P cached ones. `forward(x, past_kv=None)` with `x` (B, T, C) returns `(out, "
    "cache)`, `out` (B, T, C); the cache holds the normalised latent and the rotated RoPE key "
    "of every position so far, nothing up-projected,"
)

MLA = Problem(
    "mla",
    "Multi-head latent attention with its small cache",
    "notebook 08 §4",
    "Write DeepSeek's attention, whose cache is one latent per token.",
    (
        Variant(
            "packed_cache",
            Task(
                mla.MLA,
                f"class {mla.MLA}(nn.Module):",
                f"{_MLA} packed as **one tensor** (B, S, d_latent + d_rope): latent first (as "
                "vLLM stores it).",
                (
                    course_check(mla.check_mla_full_pass, _packed),
                    course_check(mla.check_mla_decoding, _packed),
                ),
            ),
        ),
        Variant(
            "keyed_cache",
            Task(
                mla.MLA,
                f"class {mla.MLA}(nn.Module):",
                f"{_MLA} as a dict {{'latent': (B, S, d_latent), 'k_rope': (B, S, d_rope)}}.",
                (
                    course_check(mla.check_mla_full_pass, _keyed),
                    course_check(mla.check_mla_decoding, _keyed),
                ),
            ),
        ),
    ),
    Task(
        mla.ABSORBED,
        f"class {mla.ABSORBED}(nn.Module):",
        "Now decode without up-projecting the cache: same constructor, weights and outputs, the "
        "cache packed as one tensor (B, S, d_latent + d_rope), but absorb W_UK into the query "
        "and W_UV into the output, so that one decoding step builds nothing as large as the "
        "cache's up-projected keys.",
        (
            course_check(mla.check_absorbed_mla_matches_naive, _packed),
            course_check(mla.check_absorbed_mla_memory, _packed),
        ),
    ),
    ("mla_absorb", "mla_intensity", "mla_tensor_parallel"),
    written=("mla_absorb", "kv_cache_cost"),
    numeric=("mla_deepseek_v3",),
    box_minutes=30,
)

# -------------------------------------------------------------------------- tiled backward


def _not_causal(kwargs: dict) -> dict:
    """The check's keywords without ``causal=False``, which these variants do not take."""
    return {k: v for k, v in kwargs.items() if k != "causal"}


def _log2_lse(fn):
    def tiled_attention_backward(q, k, v, o, lse, do, **kwargs):
        return fn(q, k, v, o, lse / math.log(2), do, **_not_causal(kwargs))

    return tiled_attention_backward


def _log2_lse_causal(fn):
    def tiled_attention_backward(q, k, v, o, lse, do, **kwargs):
        return fn(q, k, v, o, lse / math.log(2), do, **kwargs)

    return tiled_attention_backward


def _delta_given(fn):
    def tiled_attention_backward(q, k, v, o, lse, do, **kwargs):
        delta = (do.float() * o.float()).sum(-1)  # (..., T), float32
        return fn(q, k, v, delta, lse, do, **_not_causal(kwargs))

    return tiled_attention_backward


_BACKWARD = (
    "FlashAttention's backward, by hand, tile by tile (no autograd, no PyTorch attention): "
    "`q` (..., T, d), `k`, `v` (..., S, d), `do` (..., T, d) the output's gradient, scale "
    "1/√d, not causal. Recompute each tile's weights from the saved logsumexp, never holding "
    "a (T, S) matrix; return `(dq, dk, dv)` in the inputs' shapes and dtype, computing in "
    "float32 at least."
)

TILED_BACKWARD = Problem(
    "tiled_backward",
    "The tiled attention backward pass",
    "notebook 06 §6",
    "Write attention's backward pass as FlashAttention does.",
    (
        Variant(
            "log2_lse",
            Task(
                backward.NAME,
                "def tiled_attention_backward(q, k, v, o, lse2, do, block_size=64):",
                f"{_BACKWARD} `o` (..., T, d) is the forward's output and `lse2` (..., T) its "
                "logsumexp **in base 2**, as Triton kernels save it: log2 Σ_j 2^(s_j · log2 e).",
                (course_check(backward.check_backward_values, _log2_lse),),
                (backward.NAME,),
                (
                    (
                        "differ from autograd's",
                        "Your dQ, dK, dV differ from autograd's: `lse2` is in base 2, so each "
                        "tile's weights are P = 2^(s · log2 e − lse2) = exp(s − lse2 · ln 2); "
                        "then dV = Pᵀ dO, dS = P ∘ (dO Vᵀ − rowsum(dO ∘ O)), dQ = dS K/√d, "
                        "dK = dSᵀ Q/√d.",
                    ),
                ),
            ),
        ),
        Variant(
            "delta_given",
            Task(
                backward.NAME,
                "def tiled_attention_backward(q, k, v, delta, lse, do, block_size=64):",
                f"{_BACKWARD} `lse` (..., T) is the natural logsumexp of each score row and "
                "`delta` (..., T) = rowsum(dO ∘ O), already computed (the forward's output is "
                "not given).",
                (course_check(backward.check_backward_values, _delta_given),),
                (backward.NAME,),
            ),
        ),
    ),
    Task(
        backward.NAME,
        "def tiled_attention_backward(q, k, v, o, lse2, do, block_size=64, causal=False):",
        "Now as a Triton kernel's backward: the forward's output `o` and its logsumexp in "
        "base 2, `lse2`, are given, and with `causal=True` the queries are the last T of S "
        "positions under a causal mask: skip the tiles wholly above the diagonal.",
        (course_check(backward.check_backward_causal, _log2_lse_causal),),
        (backward.NAME,),
    ),
    ("flash_backward", "flash_backward_d"),
    written=("flash_backward", "online_softmax"),
    numeric=("backward_p_mib", "score_matrix"),
    box_minutes=30,
)
