"""The masks several notebooks grade against, and the helpers that judge a learner's mask.

Shape legend: ``T`` query length (the queries are the last ``T`` positions), ``S`` key length.
Masks mean True = may attend, the convention of ``F.scaled_dot_product_attention``.

PyTorch is the oracle: the lower-right causal bias of ``torch.nn.attention.bias`` and
``is_causal=True``, read off SDPA's own weights; ``pad_sequence`` for which positions are real,
and ``nn.MultiheadAttention.merge_masks`` for combining a causal mask with key padding. Notebook
03 grades these masks; notebook 08's sliding window and rolling cache build on them (a window is
the causal mask minus the keys too far behind), so they live here rather than in either
notebook's check module.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pad_sequence

from ._core import CheckFailure, call, expect_tensor, fail, fmt_shape

META = torch.device("meta")
_DATA_DEPENDENT = ("meta tensor", "on meta tensors")  # errors of code that reads values on meta


def sdpa_allowed(T: int, S: int, **mask_kwargs) -> torch.Tensor:
    """``(T, S)``: where SDPA puts weight when all scores are equal (so every allowed key)."""
    q = torch.zeros(T, 1, dtype=torch.float64)  # (T, 1)
    k = torch.zeros(S, 1, dtype=torch.float64)  # (S, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        weights = F.scaled_dot_product_attention(q, k, torch.eye(S, dtype=q.dtype), **mask_kwargs)
    return weights > 0  # (T, S)


def causal(T: int, S: int) -> torch.Tensor:
    """PyTorch's bottom-right aligned causal mask ``(T, S)``: the queries are the last T."""
    # imported here: torch.nn.attention.bias imports torch._dynamo, 0.8 s of the set-up cell
    from torch.nn.attention.bias import causal_lower_right

    return sdpa_allowed(T, S, attn_mask=causal_lower_right(T, S))


def top_left(T: int, S: int) -> torch.Tensor:
    """The ``(T, S)`` mask that ``is_causal=True`` applies: aligned top-left."""
    return sdpa_allowed(T, S, is_causal=True)


def tril(T: int, S: int, diagonal: int) -> torch.Tensor:
    """``(T, S)`` True on and below ``diagonal`` (0: the main one; S - T: bottom-right)."""
    return torch.ones(T, S, dtype=torch.bool).tril(diagonal)  # (T, S)


def window_mask(T: int, S: int, window: int) -> torch.Tensor:
    """The oracle ``(T, S)``: causal (bottom-right), minus the keys ``window`` or more behind."""
    return causal(T, S) & ~tril(T, S, S - T - window)  # (T, S)


def band(T: int, S: int, low: int, high: int) -> torch.Tensor:
    """``(T, S)``: key ``j`` allowed iff ``p - low <= j <= p + high`` for query position ``p``."""
    return tril(T, S, S - T + high) & ~tril(T, S, S - T - low - 1)  # (T, S)


def real(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """``(B, max_len)``, True for real tokens, built by ``pad_sequence``; lengths are clipped."""
    rows = [torch.ones(min(int(n), max_len), dtype=torch.bool) for n in lengths.clamp_min(0)]
    width = torch.zeros(max_len, dtype=torch.bool)  # forces max_len columns
    return pad_sequence([*rows, width], batch_first=True, padding_value=False)[:-1]  # (B, max_len)


@functools.cache
def _merger() -> nn.MultiheadAttention:
    """A one-head ``nn.MultiheadAttention``, used only for its ``merge_masks``."""
    with torch.random.fork_rng():
        return nn.MultiheadAttention(1, 1, batch_first=True)


def combined(tokens: torch.Tensor, is_causal: bool) -> torch.Tensor:
    """``(B, 1, T, T)`` allowed pairs for the real ``tokens (B, T)``, causal or not, combined by
    ``nn.MultiheadAttention.merge_masks``."""
    B, T = tokens.shape
    blocked_future = ~causal(T, T) if is_causal else torch.zeros(T, T, dtype=torch.bool)  # (T, T)
    blocked, _ = _merger().merge_masks(
        blocked_future, ~tokens, torch.zeros(B, T, 1)
    )  # (B, 1, T, T)
    return ~blocked


def attend(q, k, v, mask=None, is_causal=False) -> torch.Tensor:
    """SDPA with a True = may-attend ``mask`` (its warnings about empty rows silenced)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)


def expect_mask(out, name: str, shape: tuple[int, ...], inputs: str, hints: dict) -> torch.Tensor:
    """Fail unless ``out`` is a bool tensor of ``shape``; ``hints`` maps wrong shapes to advice."""
    __tracebackhide__ = True
    out = expect_tensor(out, name, "a bool tensor")
    if tuple(out.shape) != shape:
        hint = hints.get(tuple(out.shape), "")
        fail(
            f"`{name}({inputs})` returned shape {fmt_shape(out.shape)} but should return "
            f"{fmt_shape(shape)}{': ' + hint if hint else ''}."
        )
    if out.dtype != torch.bool:
        fail(
            f"`{name}` returned a {str(out.dtype).removeprefix('torch.')} tensor but a mask "
            "must be bool (True = may attend): SDPA adds a float mask to the scores instead of "
            "selecting keys, so build it with a comparison or torch.ones(..., dtype=torch.bool)."
        )
    return out


def diagnose(out: torch.Tensor, expected: torch.Tensor, variants: Callable, generic: str) -> None:
    """Pass when ``out`` equals ``expected``, else fail naming the known-wrong variant it equals.

    ``variants()`` returns ``{diagnosis: wrong mask}``; it is only built when ``out`` is wrong.
    """
    __tracebackhide__ = True
    out = out.cpu()
    if torch.equal(out, expected):
        return
    wrong = {why: m for why, m in variants().items() if not torch.equal(m, expected)}
    fail(next((why for why, m in wrong.items() if torch.equal(out, m)), generic))


def call_on_meta(fn: Callable, name: str, args, kwargs, hint: str) -> torch.Tensor | None:
    """Call ``fn`` with meta-device inputs; None when its code reads values (cannot run on meta)."""
    __tracebackhide__ = True
    try:
        return call(fn, name, args, kwargs, hint)
    except CheckFailure as failure:
        if any(s in str(failure.__cause__ or "") for s in _DATA_DEPENDENT):
            return None
        raise
