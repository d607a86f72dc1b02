"""Problems from notebooks 01 and 03: attention with a mask, causal masks for a KV cache.

Shape legend: ``B`` batch, ``T`` query length, ``S`` key/value length, ``C`` = d_model, ``nh``
heads, ``d_k`` / ``d_v`` key / value width, ``...`` any leading dimensions.

Each adapter turns a variant's contract into the interface of the course's check, so the check
(hidden cases included) judges the answer and names the mistake.
"""

from __future__ import annotations

import torch

from autograder.checks import nb01_attention as nb01
from autograder.checks import nb03_masking as masking

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

# ------------------------------------------------------------------------------ attention


def eye_values(q: torch.Tensor, S: int) -> torch.Tensor:
    """Identity values ``(..., S, S)``: attending with them returns the weights themselves."""
    return torch.eye(S, dtype=q.dtype).expand(*q.shape[:-2], S, S)


def _attention_blocked(fn):
    def sdpa(q, k, v, mask=None):
        kwargs = {} if mask is None else {"blocked": ~mask}
        out = one_tensor(fn(q, k, v, **kwargs), "attention", "`out`")
        weights = one_tensor(fn(q, k, eye_values(q, k.shape[-2]), **kwargs), "attention", "`out`")
        return out, weights

    return sdpa


def _attention_bias(fn):
    def sdpa(q, k, v, mask=None):
        if mask is None:
            return fn(q, k, v)
        bias = torch.zeros(mask.shape, dtype=q.dtype).masked_fill(~mask, float("-inf"))
        return fn(q, k, v, bias=bias)

    return sdpa


def _attention_seq_first(fn):
    def sdpa(q, k, v, mask=None):
        kwargs = {} if mask is None else {"mask": mask}
        result = fn(q.movedim(-2, 0), k.movedim(-2, 0), v.movedim(-2, 0), **kwargs)
        out, weights = tensors(result, "attention", ("out", "weights"))
        T, lead = q.shape[-2], q.shape[:-2]
        shaped(out, (T, *lead, v.shape[-1]), "attention", "`out`", "(T, ..., d_v)")
        return out.movedim(0, -2), weights

    return sdpa


def _attention_task(
    name: str, signature: str, contract: str, adapt, rewrites=(), replacements=()
) -> Task:
    graders = tuple(
        course_check(check, adapt)
        for check in (nb01.check_sdpa_values, nb01.check_sdpa_mask, nb01.check_sdpa_properties)
    )
    return Task(name, signature, contract, graders, (nb01.SDPA,), rewrites, replacements)


# The checks speak of a bool `mask` (True = may attend); the bias variant is told of its `bias`.
_BIAS_REWRITES = (
    (
        "Your mask is inverted",
        "Your `attention` reads `bias` the wrong way round: 0 means the query may attend to that "
        "key and -inf that it may not, so add `bias` to the scaled scores as it is.",
    ),
    (
        "applied after the softmax",
        "Your blocked weights are 0 but the rows no longer sum to 1: `bias` was applied after "
        "the softmax; add it to the scaled scores before the softmax instead.",
    ),
    (
        "Masked positions still get weight",
        "Keys whose `bias` is -inf still get weight: add `bias` to the scaled scores before the "
        "softmax (ignoring it, or multiplying the scores by something, leaves them weight).",
    ),
    (
        "mask.any(-1) is False",
        "A query row whose `bias` is -inf for every key gave NaN: softmax over a row of -inf is "
        "0/0, so set the weights of such rows to 0.",
    ),
)
_BIAS_WORDS = (
    (r"mask=\(([^)]*)\) bool", r"bias=(\1) float"),
    ("the mask must broadcast", "`bias` must broadcast"),
    ("so use it as given", "so add it as given"),
)


_NO_BUILTIN = "Do not call `F.scaled_dot_product_attention` or any softmax of PyTorch's own."
_EMPTY_ROW = "A query row that may attend to no key gets all-zero weights and output, never NaN."

ATTENTION = Problem(
    "attention",
    "Scaled dot-product attention with a mask",
    "notebook 01 §3–5",
    "Write attention for queries `q`, keys `k` and values `v`: scores scaled by 1/√d_k, a "
    "softmax over the keys, the weighted sum of the values, and an optional mask.",
    (
        Variant(
            "blocked",
            _attention_task(
                "attention",
                "def attention(q, k, v, blocked=None):",
                "`q` (..., T, d_k), `k` (..., S, d_k), `v` (..., S, d_v); `blocked` is an "
                "optional bool tensor broadcastable to (..., T, S) where **True means the query "
                "may not attend to that key** (the convention of `nn.MultiheadAttention`'s "
                "`attn_mask`). Return `out` (..., T, d_v) alone, in the input's dtype. "
                f"{_EMPTY_ROW} {_NO_BUILTIN}",
                _attention_blocked,
                (
                    (
                        "Your mask is inverted",
                        "Your `blocked` is read the wrong way round: in this variant True means "
                        "the query may not attend that key, so fill the scores with -inf where "
                        "`blocked` is True.",
                    ),
                ),
            ),
        ),
        Variant(
            "bias",
            _attention_task(
                "attention",
                "def attention(q, k, v, bias=None):",
                "`q` (..., T, d_k), `k` (..., S, d_k), `v` (..., S, d_v); `bias` is an optional "
                "float tensor broadcastable to (..., T, S) **added to the scaled scores** "
                "(0 where allowed, `-inf` where blocked: an additive mask, as Hugging Face "
                "models pass it). Return `(out, weights)`: (..., T, d_v) and (..., T, S). "
                f"{_EMPTY_ROW} {_NO_BUILTIN}",
                _attention_bias,
                _BIAS_REWRITES,
                _BIAS_WORDS,
            ),
        ),
        Variant(
            "seq_first",
            layout_moved(
                _attention_task(
                    "attention",
                    "def attention(q, k, v, mask=None):",
                    "**Sequence first**, as `nn.MultiheadAttention` with its default "
                    "`batch_first=False`: `q` (T, ..., d_k), `k` (S, ..., d_k), `v` (S, ..., d_v). "
                    "`mask` is an optional bool tensor broadcastable to (..., T, S), True = may "
                    "attend. Return `(out, weights)` with `out` sequence first (T, ..., d_v) and "
                    f"`weights` (..., T, S). {_EMPTY_ROW} {_NO_BUILTIN}",
                    _attention_seq_first,
                )
            ),
        ),
    ),
    Task(
        "causal_mask",
        "def causal_mask(T, S=None, device=None):",
        "Now decode with a KV cache: `T` new queries are the **last** T of `S` positions "
        "(S defaults to T). Return the (T, S) bool mask, True = may attend, that lets each "
        "query see every key at or before its own position, on `device`.",
        tuple(
            course_check(check, lambda fn: fn)
            for check in (masking.check_causal_mask_values, masking.check_causal_mask_no_leak)
        ),
        (masking.CAUSAL,),
    ),
    ("sqrt_dk", "mask_after_softmax", "complexity"),
    written=("why_scale", "why_heads"),
    numeric=("attn_flops_gpt2", "score_matrix"),
    box_minutes=15,
)

# ---------------------------------------------------------------------------- causal mask


def mask_blocked(fn, name: str = "causal_mask"):
    """A True = blocked mask, as the checks' True = may attend."""

    def mask(*args, **kwargs):
        out = one_tensor(fn(*args, **kwargs), name, "the mask")
        if out.dtype != torch.bool:
            fail(f"`{name}` returned {out.dtype}: return a bool mask (True = blocked).")
        return ~out

    return mask


def _mask_past_len(fn):
    def causal_mask(T, S=None, device=None):
        kwargs = {"device": device} if device is not None else {}
        return fn(T, **kwargs) if S is None else fn(T, S - T, **kwargs)

    return causal_mask


def mask_additive(fn, name: str = "causal_bias"):
    """An additive float mask (0 where allowed, -inf where blocked), as a bool one."""

    def mask(*args, **kwargs):
        out = one_tensor(fn(*args, **kwargs), name, "the additive mask")
        if not out.is_floating_point():
            fail(f"`{name}` returned {out.dtype}: return a float mask of 0 and -inf.")
        if not out.is_meta and not ((out == 0) | (out == float("-inf"))).all():
            fail(f"`{name}` holds values other than 0 and -inf: 0 where allowed, -inf else.")
        return out == 0

    return mask


def _mask_task(
    name: str, signature: str, contract: str, adapt, inverted: str = "", replacements=()
) -> Task:
    graders = tuple(
        course_check(check, adapt)
        for check in (masking.check_causal_mask_values, masking.check_causal_mask_no_leak)
    )
    rewrites = (("is inverted", inverted),) if inverted else ()
    return Task(name, signature, contract, graders, (masking.CAUSAL,), rewrites, replacements)


# The checks call causal_mask(T, S); the past_len variant is told of its own call and argument.
_PAST_LEN_WORDS = (
    (r"`causal_mask\((\d+), (\d+)\)`", lambda m: f"`causal_mask({m[1]}, {int(m[2]) - int(m[1])})`"),
    ("S defaults to T", "past_len defaults to 0"),
    ("when S > T", "when past_len > 0"),
    ("S - T", "past_len"),
    ("T - S", "-past_len"),
    ("it ignores S;", "it ignores past_len;"),
    (r"\(S\)", "(past_len + T)"),
    (r"\(S, S\)", "(past_len + T, past_len + T)"),
)


_CACHED = (
    "`T` new queries attend over `S ≥ T` positions: the queries are the **last** T of them (a KV "
    "cache holds the first S − T), and each may see every key at or before its own position."
)

ATTENTION_MASK = Task(
    "attention_mask",
    "def attention_mask(lengths, max_len, causal=True):",
    "Now batch sequences of different lengths, padded at the end to `max_len`: `lengths` "
    "(B,) holds each one's real length. Return the (B, 1, max_len, max_len) bool mask, True "
    "= may attend: the key is a real token and, when `causal`, not after the query.",
    (course_check(masking.check_attention_mask_values, lambda fn: fn),),
    ("attention_mask",),
)

CAUSAL_MASK = Problem(
    "causal_mask",
    "A causal mask for cached decoding",
    "notebook 03 §2",
    "Build the causal mask of attention when a KV cache holds earlier positions.",
    (
        Variant(
            "blocked",
            _mask_task(
                "causal_mask",
                "def causal_mask(T, S=None, device=None):",
                f"{_CACHED} `S` defaults to `T`. Return a (T, S) bool tensor on `device` in "
                "which **True means blocked** (`nn.MultiheadAttention`'s `attn_mask`).",
                mask_blocked,
                "`causal_mask` is inverted: in this variant True means blocked, so mark the keys "
                "after each query's position (the complement of the lower triangle).",
            ),
        ),
        Variant(
            "past_len",
            _mask_task(
                "causal_mask",
                "def causal_mask(T, past_len=0, device=None):",
                f"{_CACHED} Here you are given `past_len` = S − T, the number of cached "
                "positions. Return a (T, past_len + T) bool tensor on `device`, True = may "
                "attend.",
                _mask_past_len,
                replacements=_PAST_LEN_WORDS,
            ),
        ),
        Variant(
            "additive",
            _mask_task(
                "causal_bias",
                "def causal_bias(T, S=None, device=None):",
                f"{_CACHED} `S` defaults to `T`. Return an **additive** float32 mask (T, S) on "
                "`device`: 0.0 where the query may attend, `-inf` where it may not.",
                mask_additive,
                "`causal_bias` is inverted: 0 goes where the query may attend (its past and "
                "itself), -inf after it.",
            ),
        ),
    ),
    ATTENTION_MASK,
    ("mask_after_softmax", "sliding_window", "attention_sinks"),
    written=("cache_mask", "kv_cache_cost"),
    numeric=("kv_llama2_7b",),
    box_minutes=10,
)
