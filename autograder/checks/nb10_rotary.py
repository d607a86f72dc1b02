"""Checks for notebook 10 §3.3: a rotary (RoPE) attention layer with a cache of rotated keys.

Shape legend: ``B`` batch, ``T`` new positions, ``S`` all positions, ``P`` cached positions,
``C`` = d_model, ``nh`` heads, ``hs`` = C // nh (head size).

The oracle is PyTorch's: each head's feature pair ``(i, i + hs/2)`` as one complex number turned
by ``torch.polar`` (a different formulation from the notebook's rotate-half helper), then
``F.scaled_dot_product_attention`` with a bottom-right causal mask. This is a find-the-bug
exercise, so the given code's own bug is reported by its symptom (which property fails, on which
input); the cause is the notebook's hints' job. Wrong fixes that earlier notebooks teach (no
rotation, rotated values, positions restarting at 0, a top-left mask) are named.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from autograder.torch_helpers import one_thread

from . import _rope, operators
from ._core import (
    LOOSE,
    call,
    close,
    describe,
    expect_shape,
    expect_tensor,
    fail,
    make_generator,
    randint,
    randn,
)
from ._decoding import Cache, chunkings, decode

#: Learner code may use PyTorch's attention.
OPERATORS = operators.DEFAULT | operators.SDPA

#: No tool of the course computes these answers.
ANSWERS_IN_TOOLS: dict[str, str] = {}

ROTARY = "RotaryCausalAttention"
FORWARD = f"{ROTARY}.forward"
SHIFT = 100  # how far the symptom probe moves every position
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")


def _heads(module, x, name: str) -> torch.Tensor:
    B, T, C = x.shape
    return getattr(module, name)(x).view(B, T, module.num_heads, -1).transpose(1, 2)


def _oracle(module, x, positions=None, chunks=None, *, rotate=True, values=False, top_left=False):
    """PyTorch's outputs ``(B, S, C)`` when ``x (B, S, C)`` arrives in ``chunks``, and the keys
    ``(B, nh, S, hs)`` a cache would hold.

    ``positions (S,)`` default to ``0 … S-1``. Known-wrong variants: ``rotate=False`` (no RoPE),
    ``values`` (v rotated too), ``top_left`` (``is_causal=True`` with a cache).
    """
    S = x.shape[1]
    chunks = chunks or [S]
    positions = torch.arange(S) if positions is None else positions  # (S,)
    q, k, v = (_heads(module, x, p) for p in PROJECTIONS[:3])  # (B, nh, S, hs) each
    if rotate:
        q, k = _rope.rotate(q, positions), _rope.rotate(k, positions)
    if values:
        v = _rope.rotate(v, positions)
    outs = []
    for s, n in zip(itertools.accumulate([0, *chunks[:-1]]), chunks, strict=True):
        allowed = torch.ones(n, s + n, dtype=torch.bool).tril(0 if top_left else s)  # (T, S)
        outs.append(
            F.scaled_dot_product_attention(
                q[:, :, s : s + n], k[:, :, : s + n], v[:, :, : s + n], attn_mask=allowed
            )
        )  # (B, nh, T, hs)
    out = torch.cat(outs, dim=2)  # (B, nh, S, hs)
    B, nh, _, hs = out.shape
    return module.out_proj(out.transpose(1, 2).reshape(B, S, nh * hs)), k, v


def _build(cls, C, nh, gen) -> nn.Module:
    """The learner's module with seeded weights, in eval mode; no biases, as in the given code."""
    __tracebackhide__ = True
    module = call(cls, ROTARY, (C, nh))
    for proj in PROJECTIONS:
        layer = getattr(module, proj, None)
        if not isinstance(layer, nn.Linear) or tuple(layer.weight.shape) != (C, C):
            fail(f"`{ROTARY}({C}, {nh})` needs `self.{proj}` = nn.Linear({C}, {C}, bias=False).")
        if layer.bias is not None:
            fail(
                f"`self.{proj}` of your `{ROTARY}` has a bias; the given code has none: "
                f"nn.Linear({C}, {C}, bias=False)."
            )
    if getattr(module, "num_heads", None) != nh:
        fail(f"`{ROTARY}` should store `self.num_heads = num_heads` (expected {nh}).")
    module.eval()
    with torch.no_grad():
        for proj in PROJECTIONS:
            getattr(module, proj).weight.copy_(randn(gen, C, C) / math.sqrt(C))
    return module


def _forward(module, x, past=None, positions=None):
    """The learner's ``forward``; checks the shapes of ``(out, (k, v))``."""
    __tracebackhide__ = True
    kwargs = {} if past is None else {"past_kv": Cache(past)}
    if positions is not None:
        kwargs["positions"] = positions
    try:
        with torch.no_grad():
            result = call(module, FORWARD, (x,), kwargs)
    except AssertionError as failure:
        if "unexpected keyword argument 'positions'" in str(failure):
            fail(
                f"Your `{FORWARD}` takes no `positions` argument: keep the given signature, "
                "forward(x, past_kv=None, positions=None)."
            )
        raise
    if not isinstance(result, tuple | list) or len(result) != 2 or len(result[1]) != 2:
        fail(f"`{FORWARD}` should return `(out, (k, v))`, got {type(result).__name__}.")
    out = expect_tensor(result[0], FORWARD, "a tensor `out` as the first item")
    k = expect_tensor(result[1][0], FORWARD, "the cached keys `k` in `(out, (k, v))`")
    v = expect_tensor(result[1][1], FORWARD, "the cached values `v` in `(out, (k, v))`")
    B, T, C = x.shape
    P = 0 if past is None else past[0].shape[2]
    inputs = describe((x,), kwargs)
    expect_shape(out, (B, T, C), "`out`", inputs)
    for t, what in ((k, "k"), (v, "v")):
        expect_shape(t, (B, module.num_heads, P + T, C // module.num_heads), f"`{what}`", inputs)
    return out, k, v


def _configs(gen, thorough: bool) -> list[tuple[int, int]]:
    """``(C, nh)``: several heads first (one head hides some bugs), then random ones."""
    configs = [(16, 2), (24, 3), (8, 1)]
    for _ in range(2 if thorough else 0):
        nh, half = randint(gen, 2, 3), randint(gen, 1, 4)
        configs.append((nh * 2 * half, nh))  # hs = 2 · half: RoPE turns feature pairs
    return configs


def _full_pass_mistake(module, x, out) -> str:
    """Why a full pass (no cache) gave ``out``: a named wrong fix, else the symptom."""
    C, nh = x.shape[-1], module.num_heads
    named = {
        "Your output matches attention without any rotation: rotate the queries and the keys "
        "with rope(..., positions) before the scores.": _oracle(module, x, rotate=False)[0],
        "Your output matches attention with the values rotated too: rotate only the queries "
        "and the keys; the values carry the content the weights mix.": _oracle(
            module, x, values=True
        )[0],
    }
    for why, expected in named.items():
        if close(out, expected, *LOOSE):
            return why
    moved, _, _ = _forward(module, x, positions=torch.arange(x.shape[1]) + SHIFT)
    change = (moved - out).abs().max().item()
    if change > 1e-4:
        return (
            f"Your output changes when every position moves by {SHIFT} (positions = "
            f"torch.arange(T) + {SHIFT}: largest change {change:.3g}, d_model={C}, "
            f"num_heads={nh}). With RoPE a score depends only on the distance between query "
            "and key, so the output cannot depend on where the sequence starts."
        )
    return (
        f"Your output differs from causal attention on rotated queries and keys for "
        f"d_model={C}, num_heads={nh}, although it does not change when every position moves: "
        "compare each head's rotated queries and keys with rope() applied to that head alone."
    )


def _expect_cache(module, x, k, v, positions) -> None:
    """The cache holds the keys rotated at ``positions`` and the raw values."""
    __tracebackhide__ = True
    _, k_rot, v_ref = _oracle(module, x, positions)
    _, k_plain, _ = _oracle(module, x, rotate=False)
    if not close(v, v_ref):
        fail("The cached `v` should be the values of every position, never rotated.")
    if close(k, k_rot):
        return
    if close(k, k_plain):
        fail(
            "The cache holds the keys before rotation: store them rotated, so that each key "
            "is rotated once, at its own position, and never again."
        )
    if close(k, _oracle(module, x)[1]):
        fail(
            f"Given positions {positions[0].item()} … {positions[-1].item()}, your cache holds "
            f"keys rotated at 0 … {len(positions) - 1}: `forward` ignores its `positions` "
            "argument; count from the cache only when positions is None."
        )
    fail("The cached `k` should be the rotated keys of every position, (B, nh, S, hs).")


@one_thread
def check_rope_full_pass(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Without a cache: causal attention on rotated q and k, the same when every position moves
    (positions passed in); the cache holds the keys rotated at those positions."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for C, nh in _configs(gen, thorough):
        module = _build(cls, C, nh, gen)
        x = randn(gen, 2, randint(gen, 4, 8), C, dtype=torch.float32)  # (B, T, C)
        out, k, v = _forward(module, x)
        if not close(out, _oracle(module, x)[0]):
            fail(_full_pass_mistake(module, x, out))
        _expect_cache(module, x, k, v, torch.arange(x.shape[1]))
        later = torch.arange(x.shape[1]) + SHIFT  # (T,): the same tokens further on
        moved, k, v = _forward(module, x, positions=later)
        if not close(moved, out):
            fail(_full_pass_mistake(module, x, out))
        _expect_cache(module, x, k, v, later)


def _decoding_mistake(module, x, out, piece, chunks) -> str:
    """Why the output for ``piece`` of ``x`` differs, decoding in ``chunks``."""
    start, stop = piece.start, piece.stop
    named = {
        "the new tokens are rotated as if they were at positions 0 … T-1: with P cached "
        "positions they sit at P … P+T-1, so rotate at torch.arange(P, P + T)": _oracle(
            module, x, _rope.restarted(chunks), chunks
        )[0],
        "the causal mask is aligned top-left (is_causal=True), so a new token reads only the "
        "first keys of the cache: attend with the bottom-right mask, "
        "torch.ones(T, S).tril(S - T)": _oracle(module, x, chunks=chunks, top_left=True)[0],
    }
    for why, expected in named.items():
        if close(out, expected[:, piece], *LOOSE):
            return f"Decoding in pieces {chunks}, at positions {start}–{stop - 1} {why}."
    return (
        f"Decoding in pieces {chunks} with the cache differs from one full pass at positions "
        f"{start}–{stop - 1}: rotate each new query and key once, at its position, keep the "
        "cached keys as they are, and attend with the bottom-right mask."
    )


@one_thread
def check_rope_decoding(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Feeding the sequence in pieces with the cache equals one full causal pass."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for C, nh in _configs(gen, thorough):
        module = _build(cls, C, nh, gen)
        S = 7 + (randint(gen, 0, 4) if thorough else 0)
        x = randn(gen, 2, S, C, dtype=torch.float32)  # (B, S, C)
        expected, _, _ = _oracle(module, x)
        full, _, _ = _forward(module, x)
        if not close(full, expected):
            fail(_full_pass_mistake(module, x, full))
        for chunks in chunkings(S):
            for piece, out, _ in decode(x, chunks, functools.partial(_forward, module)):
                new = slice(piece.start, piece.stop)
                if not close(out, expected[:, new]):
                    fail(_decoding_mistake(module, x, out, new, chunks))
