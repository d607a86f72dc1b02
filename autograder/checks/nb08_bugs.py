"""Checks for notebook 08's fresh bugs and its live-coding round: packed QKV attention and a
rotary (RoPE) KV cache.

Shape legend: ``B`` batch, ``T`` new positions, ``S`` all positions, ``P`` cached positions,
``C`` = d_model, ``nh`` heads, ``hs`` = C // nh (head size).

The oracles are PyTorch's: ``nn.MultiheadAttention`` holding the packed ``(3C, C)`` weights (its
``in_proj_weight`` stacks all queries, then all keys, then all values), and for RoPE a rotation
written with complex numbers (``torch.polar``), a different formulation from the notebook's
rotate-half helper, followed by ``F.scaled_dot_product_attention``. A known-wrong output is the
same oracle on re-ordered weights, a moved scale or restarted positions, with its diagnosis.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from autograder.torch_helpers import one_thread

from ._core import (
    call,
    close,
    describe,
    expect_dtype,
    expect_shape,
    expect_tensor,
    fail,
    fmt_shape,
    make_generator,
    randint,
    randn,
)
from .replay import operators

#: Learner code may use PyTorch's attention for both exercises.
OPERATORS = operators.DEFAULT | operators.SDPA

#: No tool of the course computes these answers.
ANSWERS_IN_TOOLS: dict[str, str] = {}

PACKED = "PackedCausalSelfAttention"
LIVE = "causal_mha_live"
ROTARY = "RotaryCausalAttention"
ROPE_BASE = 10_000.0

# ------------------------------------------------------------------- packed q, k, v


def _torch_packed(x, w_qkv, w_out, nh, causal=True) -> torch.Tensor:
    """nn.MultiheadAttention (no biases) holding ``w_qkv (3C, C)`` and ``w_out (C, C)``."""
    C = x.shape[-1]
    twin = nn.MultiheadAttention(C, nh, bias=False, batch_first=True, dtype=x.dtype)
    with torch.no_grad():
        twin.in_proj_weight.copy_(w_qkv)
        twin.out_proj.weight.copy_(w_out)
        T = x.shape[1]
        blocked = ~torch.ones(T, T, dtype=torch.bool).tril() if causal else None  # True = blocked
        out, _ = twin(x, x, x, attn_mask=blocked, need_weights=False)
    return out  # (B, T, C)


def _variant(x, w_qkv, w_out, nh, scale: str, causal: bool) -> torch.Tensor:
    """Attention with the scale moved: ``"after"`` the softmax, ``"none"``, or by ``"width"``."""
    B, T, C = x.shape
    hs = C // nh
    q, k, v = (
        t.view(B, T, nh, hs).transpose(1, 2) for t in F.linear(x, w_qkv).split(C, dim=-1)
    )  # (B, nh, T, hs) each
    factor = {"after": 1.0, "none": 1.0, "width": 1 / math.sqrt(C)}[scale]
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=factor)
    if scale == "after":
        out = out / math.sqrt(hs)  # weights @ v is linear in the weights
    return F.linear(out.transpose(1, 2).reshape(B, T, C), w_out)  # (B, T, C)


def _layouts(w_qkv: torch.Tensor, nh: int) -> dict[str, torch.Tensor]:
    """Weights that, read the right way, give what a wrong split reads from ``w_qkv``."""
    C = w_qkv.shape[1]
    hs = C // nh
    chunks = dict(zip("qkv", w_qkv.split(C), strict=True))
    found = {
        "the packed output was viewed as (B, T, nh, 3, hs), as if each head's q, k and v sat "
        "next to each other; the packed projection stacks all queries, then all keys, then all "
        "values, so view it as (B, T, 3, nh, hs) or split it into three C-wide chunks along "
        "the last dim": w_qkv.view(nh, 3, hs, C).transpose(0, 1).reshape(3 * C, C),
    }
    for order in itertools.permutations("qkv"):
        if order != ("q", "k", "v"):
            got = ", ".join(order)
            found[
                f"the three chunks of the packed projection are unpacked as ({got}); in this "
                "layout they come as (q, k, v), queries first"
            ] = torch.cat([chunks[n] for n in order])
    return found


def _packed_mistake(x, out, w_qkv, w_out, nh) -> str | None:
    """The diagnosis of a known-wrong output: the layout first, then the scale, then the mask."""
    hs = x.shape[-1] // nh
    layouts = {"": w_qkv, **_layouts(w_qkv, nh)}
    scales = {
        "": "right",
        "the 1/√hs scale is applied after the softmax, which shrinks every weight instead of "
        "sharpening or flattening the scores: divide the scores, before the softmax": "after",
        "the scores are not scaled: divide them by √hs before the softmax": "none",
        "the scores are scaled by √d_model: one head compares hs numbers, so divide by √hs": (
            "width"
        ),
    }
    if hs == 1:
        scales = {why: s for why, s in scales.items() if s in ("right", "after")}
    for (layout, w), (scale_why, scale), causal in itertools.product(
        layouts.items(), scales.items(), (True, False)
    ):
        if scale == "right":
            expected = _torch_packed(x, w, w_out, nh, causal)
        else:
            expected = _variant(x, w, w_out, nh, scale, causal)
        if not close(out, expected, 1e-4, 1e-3):
            continue
        mask_why = "" if causal else "every query reads later positions: apply a causal mask"
        reasons = [r for r in (layout, scale_why, mask_why) if r]
        if reasons:
            more = " (fix that first, then look again)" if len(reasons) > 1 else ""
            return f"Your output matches attention in which {reasons[0]}{more}."
    return None


def _packed_inputs(gen, thorough: bool) -> list[tuple[int, int, int, int]]:
    """``(B, T, C, nh)`` cases, several heads and causal lengths > 1 first."""
    cases = [(2, 5, 16, 4), (1, 7, 24, 3), (2, 4, 12, 2)]
    for _ in range(3 if thorough else 0):
        nh, hs = randint(gen, 1, 4), randint(gen, 2, 6)
        cases.append((randint(gen, 1, 3), randint(gen, 2, 8), nh * hs, nh))
    return cases


def _compare_packed(out, x, w_qkv, w_out, nh, name: str, inputs: str) -> None:
    __tracebackhide__ = True
    out = expect_tensor(out, name, "a tensor `out` (B, T, C)")
    expect_shape(out, x.shape, "`out`", inputs)
    expect_dtype(out, x.dtype, "`out`")
    if close(out, _torch_packed(x, w_qkv, w_out, nh)):
        return
    fail(
        _packed_mistake(x, out, w_qkv, w_out, nh)
        or f"Your output differs from nn.MultiheadAttention holding the same packed weights for "
        f"inputs {inputs}: check the unpacking of q, k and v, the head split, the 1/√hs scale, "
        "the causal mask and the merge."
    )


@one_thread
def check_packed_attention(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``cls(d_model, num_heads)`` with packed ``qkv`` and ``proj`` equals causal PyTorch MHA."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    dtypes = [torch.float32] + ([torch.float64] if thorough else [])
    for dtype, (B, T, C, nh) in itertools.product(dtypes, _packed_inputs(gen, thorough)):
        module = call(cls, PACKED, (C, nh))
        for attr, shape in (("qkv", (3 * C, C)), ("proj", (C, C))):
            layer = getattr(module, attr, None)
            if not isinstance(layer, nn.Linear) or tuple(layer.weight.shape) != shape:
                fail(
                    f"`{PACKED}({C}, {nh})` needs `self.{attr}` = nn.Linear({shape[1]}, "
                    f"{shape[0]}, bias=False), as in the given code."
                )
        module.to(dtype).eval()
        with torch.no_grad():
            module.qkv.weight.copy_(randn(gen, 3 * C, C) / math.sqrt(C))
            module.proj.weight.copy_(randn(gen, C, C) / math.sqrt(C))
        x = randn(gen, B, T, C, dtype=dtype)  # (B, T, C)
        with torch.no_grad():
            out = call(module, f"{PACKED}.forward", (x,))
        _compare_packed(
            out, x, module.qkv.weight, module.proj.weight, nh, f"{PACKED}.forward", describe((x,))
        )


@one_thread
def check_causal_mha_live(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``fn(x, w_qkv, w_out, num_heads)`` equals causal nn.MultiheadAttention, same weights."""
    __tracebackhide__ = True
    gen = make_generator(seed + 100)
    dtypes = [torch.float32] + ([torch.float64] if thorough else [])
    for dtype, (B, T, C, nh) in itertools.product(dtypes, _packed_inputs(gen, thorough)):
        x = randn(gen, B, T, C, dtype=dtype)  # (B, T, C)
        w_qkv = randn(gen, 3 * C, C, dtype=dtype) / math.sqrt(C)  # (3C, C): q, k, v stacked
        w_out = randn(gen, C, C, dtype=dtype) / math.sqrt(C)  # (C, C)
        args = (x, w_qkv, w_out, nh)
        out = call(fn, LIVE, args)
        _compare_packed(out, x, w_qkv, w_out, nh, LIVE, describe(args))


# ------------------------------------------------------------------- rotary cache


class _Cache(tuple):
    """A ``(k, v)`` pair that describes itself by shape only in failure messages."""

    def __repr__(self) -> str:
        return f"({fmt_shape(self[0].shape)}, {fmt_shape(self[1].shape)}) cache"


def _rotate(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """RoPE as complex multiplication: feature pair (i, i + hs/2) turns by position · θ_i."""
    half = x.shape[-1] // 2
    theta = ROPE_BASE ** (-torch.arange(half, dtype=torch.float64) / half)  # (hs/2,)
    angle = positions.double()[:, None] * theta  # (T, hs/2)
    turn = torch.polar(torch.ones_like(angle), angle)  # (T, hs/2) complex: e^(i·angle)
    z = torch.complex(x[..., :half].double(), x[..., half:].double()) * turn
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)  # (..., T, hs)


def _heads(module, x, name: str) -> torch.Tensor:
    B, T, C = x.shape
    return getattr(module, name)(x).view(B, T, module.num_heads, -1).transpose(1, 2)


def _rope_oracle(module, x, chunks=None, restart=False, rotate=True):
    """PyTorch's outputs ``(B, S, C)`` when ``x (B, S, C)`` arrives in ``chunks``.

    ``restart``: every chunk's positions start at 0 (the bug); ``rotate=False``: no RoPE.
    Returns the outputs and the keys ``(B, nh, S, hs)`` as they would be cached.
    """
    S = x.shape[1]
    chunks = chunks or [S]
    q, k, v = (_heads(module, x, p) for p in ("q_proj", "k_proj", "v_proj"))
    starts = list(itertools.accumulate([0] + chunks[:-1]))
    positions = torch.cat(
        [torch.arange(n) + (0 if restart else s) for s, n in zip(starts, chunks, strict=True)]
    )  # (S,)
    if rotate:
        q, k = _rotate(q, positions), _rotate(k, positions)
    outs = []
    for s, n in zip(starts, chunks, strict=True):
        allowed = torch.ones(n, s + n, dtype=torch.bool).tril(s)  # (T, S): bottom-right
        o = F.scaled_dot_product_attention(
            q[:, :, s : s + n], k[:, :, : s + n], v[:, :, : s + n], attn_mask=allowed
        )  # (B, nh, T, hs)
        outs.append(o)
    out = torch.cat(outs, dim=2)  # (B, nh, S, hs)
    B, nh, _, hs = out.shape
    return module.out_proj(out.transpose(1, 2).reshape(B, S, nh * hs)), k, v


def _build_rotary(cls, C, nh, gen) -> nn.Module:
    __tracebackhide__ = True
    module = call(cls, ROTARY, (C, nh))
    for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
        layer = getattr(module, proj, None)
        if not isinstance(layer, nn.Linear) or tuple(layer.weight.shape) != (C, C):
            fail(f"`{ROTARY}({C}, {nh})` needs `self.{proj}` = nn.Linear({C}, {C}, bias=False).")
    if getattr(module, "num_heads", None) != nh:
        fail(f"`{ROTARY}` should store `self.num_heads = num_heads` (expected {nh}).")
    module.eval()
    with torch.no_grad():
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            getattr(module, proj).weight.copy_(randn(gen, C, C) / math.sqrt(C))
            if getattr(module, proj).bias is not None:
                getattr(module, proj).bias.zero_()
    return module


def _rotary_forward(module, x, past=None):
    __tracebackhide__ = True
    kwargs = {} if past is None else {"past_kv": _Cache(past)}
    name = f"{ROTARY}.forward"
    with torch.no_grad():
        result = call(module, name, (x,), kwargs)
    if not isinstance(result, tuple | list) or len(result) != 2 or len(result[1]) != 2:
        fail(f"`{name}` should return `(out, (k, v))`, got {type(result).__name__}.")
    out = expect_tensor(result[0], name, "a tensor `out` as the first item")
    k = expect_tensor(result[1][0], name, "the cached keys `k` in `(out, (k, v))`")
    v = expect_tensor(result[1][1], name, "the cached values `v` in `(out, (k, v))`")
    B, T, C = x.shape
    P = 0 if past is None else past[0].shape[2]
    inputs = describe((x,), kwargs)
    expect_shape(out, (B, T, C), "`out`", inputs)
    for t, what in ((k, "k"), (v, "v")):
        expect_shape(t, (B, module.num_heads, P + T, C // module.num_heads), f"`{what}`", inputs)
    return out, k, v


def _rotary_configs(gen, thorough: bool) -> list[tuple[int, int]]:
    configs = [(16, 2), (24, 3), (8, 1)]
    for _ in range(2 if thorough else 0):
        nh, half = randint(gen, 1, 3), randint(gen, 1, 4)
        configs.append((nh * 2 * half, nh))  # hs = 2 · half: RoPE turns feature pairs
    return configs


@one_thread
def check_rope_full_pass(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Without a cache: causal attention on rotated q and k; the cache holds the rotated keys."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for C, nh in _rotary_configs(gen, thorough):
        module = _build_rotary(cls, C, nh, gen)
        x = randn(gen, 2, randint(gen, 4, 8), C, dtype=torch.float32)  # (B, T, C)
        out, k, v = _rotary_forward(module, x)
        expected, k_rot, v_ref = _rope_oracle(module, x)
        plain, k_plain, _ = _rope_oracle(module, x, rotate=False)
        if not close(out, expected):
            if close(out, plain):
                fail(
                    "Your output matches attention without any rotation: rotate the queries and "
                    "the keys with rope(..., positions) before the scores."
                )
            fail(
                f"Your output differs from causal attention on rotated queries and keys for "
                f"d_model={C}, num_heads={nh}: rotate both q and k (never v) at positions "
                "0 … T−1, then apply the causal mask."
            )
        if not close(v, v_ref):
            fail("The cached `v` should be the values of every position, never rotated.")
        if close(k, k_plain) and not close(k, k_rot):
            fail(
                "The cache holds the keys before rotation: store them rotated, so that each key "
                "is rotated once, at its own position, and never again."
            )
        if not close(k, k_rot):
            fail("The cached `k` should be the rotated keys of every position, (B, nh, S, hs).")


@one_thread
def check_rope_decoding(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Feeding the sequence in pieces with the cache equals one full causal pass."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for C, nh in _rotary_configs(gen, thorough):
        module = _build_rotary(cls, C, nh, gen)
        S = 7 + (randint(gen, 0, 4) if thorough else 0)
        x = randn(gen, 2, S, C, dtype=torch.float32)  # (B, S, C)
        expected, _, _ = _rope_oracle(module, x)
        plain, _, _ = _rope_oracle(module, x, rotate=False)
        for chunks in ([1] * S, [3] + [1] * (S - 3), [2, 3, S - 5]):
            restarted, _, _ = _rope_oracle(module, x, chunks, restart=True)
            past, start = None, 0
            for size in chunks:
                out, k, v = _rotary_forward(module, x[:, start : start + size], past)
                piece = slice(start, start + size)
                if not close(out, expected[:, piece]):
                    if start and close(out, restarted[:, piece]):
                        fail(
                            "Your positions restart at 0 on every call (or the new tokens are "
                            "not rotated at all): with P cached positions the new tokens sit at "
                            "P … P+T−1, so rotate their queries and keys at "
                            "torch.arange(P, P + T)."
                        )
                    if close(out, plain[:, piece]):
                        fail(
                            "Your output matches attention without any rotation: rotate the "
                            "new queries and keys with rope(..., positions) before the scores."
                        )
                    fail(
                        f"Decoding in pieces {chunks} with the cache differs from one full pass "
                        f"at positions {start}–{start + size - 1}: rotate each new query and key "
                        "once, at its absolute position, and keep the cached keys as they are."
                    )
                past, start = (k, v), start + size
