"""Checks for notebook 04, section 8: ``apply_rope`` and ``RotaryGroupedQueryAttention``.

Shape legend: ``B`` batch, ``T`` new positions, ``P`` cached positions, ``S`` = P + T, ``C`` =
d_model, ``nh`` query heads, ``nkv`` key/value heads, ``hs`` = C // nh (even), ``hs/2`` pairs.

The convention graded is split halves (GPT-NeoX, Hugging Face's Llama ``rotate_half``): feature
``i`` and feature ``i + hs/2`` form pair ``i``, rotated by ``position · base^(-2i/hs)``. The
interleaved layout (pairs ``(2i, 2i + 1)``: the RoFormer paper, Meta's own Llama code) is the same
idea on permuted features, so it passes the relative-position check but fails the values check
with a diagnosis that names the convention: weights trained with one layout are wrong with the
other.

PyTorch is the oracle: each pair is a complex number ``x_i + i·x_{i+hs/2}`` multiplied by
``torch.polar(1, angle)`` in float64, then ``F.scaled_dot_product_attention(...,
enable_gqa=True)`` on the learner's own projection weights. Known-wrong answers are the same
oracle fed the wrong way (interleaved pairs, positions restarting at 0, rotated values...).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from autograder.torch_helpers import one_thread

from ._core import (
    RUN_AGAIN,
    call,
    close,
    describe,
    expect_dtype,
    expect_shape,
    expect_tensor,
    expect_unmodified,
    fail,
    first_match,
    make_generator,
    randint,
    randn,
)
from .nb04_gqa import OPERATORS as GQA_OPERATORS
from .nb04_gqa import _build, _forward, _heads

#: What learner code may run: notebook 04's operators, and complex numbers (a rotation written
#: as ``torch.view_as_complex(...) * torch.polar(...)`` is as correct as ``rotate_half``).
OPERATORS = GQA_OPERATORS | frozenset(
    f"aten::{name}" for name in "view_as_complex view_as_real polar complex real imag".split()
)

#: Learner-importable names that would compute these answers: none, no tool rotates queries or
#: keys (nb04_gqa's declarations hold for the notebook, whose cells import both modules).
ANSWERS_IN_TOOLS: dict[str, str] = {}

ROPE = "apply_rope"
ROTARY = "RotaryGroupedQueryAttention"
FORWARD = f"{ROTARY}.forward"
BASE = 10000.0
HALVES = (
    "this course, like GPT-NeoX and Hugging Face's Llama, pairs feature i with feature i + hs/2 "
    "(split halves: rotate_half(x) = cat(-x2, x1))"
)
STUB_GQA = (
    f"`{ROTARY}` builds on your `GroupedQueryAttention`, not written yet: finish exercise 3, "
    f"{RUN_AGAIN}."
)


def rotate(
    x: torch.Tensor,
    positions: torch.Tensor,
    base: float = BASE,
    *,
    layout: str = "halves",
    sign: float = 1.0,
    exponent: float = 2.0,
) -> torch.Tensor:
    """The oracle: ``x (..., T, hs)``, pair ``i`` turned by ``positions · base^(-exponent·i/hs)``.

    ``layout="interleaved"`` pairs features ``(2i, 2i + 1)``; ``sign=-1`` turns the other way.
    Computed with complex numbers in float64, returned in ``x.dtype``.
    """
    hs = x.shape[-1]
    half = hs // 2
    theta = base ** (-exponent * torch.arange(half, dtype=torch.float64) / hs)  # (hs/2,)
    angle = sign * positions.to(torch.float64)[:, None] * theta  # (T, hs/2)
    wide = x.to(torch.float64)
    if layout == "halves":
        re, im = wide[..., :half], wide[..., half:]  # (..., T, hs/2) each
    else:
        re, im = wide[..., 0::2], wide[..., 1::2]  # (..., T, hs/2) each
    turned = torch.complex(re, im) * torch.polar(torch.ones_like(angle), angle)  # (..., T, hs/2)
    if layout == "halves":
        out = torch.cat([turned.real, turned.imag], dim=-1)  # (..., T, hs)
    else:
        out = torch.stack([turned.real, turned.imag], dim=-1).flatten(-2)  # (..., T, hs)
    return out.to(x.dtype)


def _rope(fn: Callable, x: torch.Tensor, positions: torch.Tensor, base: float | None):
    """The learner's ``apply_rope`` on ``x``, checked for shape, dtype and in-place changes."""
    __tracebackhide__ = True
    kwargs = {} if base is None else {"base": base}
    before = x.clone(), positions.clone()
    hint = "rotate the last dimension (hs) in two halves of hs/2 features"
    out = expect_tensor(call(fn, ROPE, (x, positions), kwargs, hint), ROPE)
    expect_unmodified(before, (x, positions), ROPE)
    inputs = describe((x, positions), kwargs)
    expect_shape(out, x.shape, f"The output of `{ROPE}`", inputs, "rotating keeps the shape")
    expect_dtype(out, x.dtype, f"The output of `{ROPE}`")
    return out


def _rope_mistake(x, positions, base, out) -> str:
    """Why ``out`` is not ``x`` rotated at ``positions``: the first known-wrong variant it is."""
    used = BASE if base is None else base
    T = x.shape[-2]
    variants = {
        f"Your `{ROPE}` returns its input unchanged: rotate each pair by position · θ_i.": x,
        f"Your `{ROPE}` pairs neighbouring features (x0, x1), (x2, x3), …: that is the interleaved "
        "layout of the RoFormer paper and Meta's original Llama code, but "
        f"{HALVES}.": rotate(x, positions, used, layout="interleaved"),
        f"Your `{ROPE}` turns each pair the wrong way (by -position · θ_i): rotate_half(x) is "
        "cat(-x2, x1), so the first half becomes x1·cos - x2·sin.": rotate(
            x, positions, used, sign=-1
        ),
        f"Your `{ROPE}` uses frequencies base^(-i/hs): pair i turns at θ_i = base^(-2i/hs), "
        "that is base ** -(torch.arange(0, hs, 2) / hs).": rotate(x, positions, used, exponent=1),
        f"Your `{ROPE}` uses frequencies base^(+2i/hs), which grow: θ_i = base^(-2i/hs) falls "
        "from 1 for the first pair to about 1/base for the last.": rotate(
            x, positions, used, exponent=-2
        ),
        f"Your `{ROPE}` rotates by 0 … T-1 whatever the `positions` argument says: use the "
        "positions you are given (with a cache they start after the past).": rotate(
            x, torch.arange(T), used
        ),
    }
    if used != BASE:
        variants[
            f"Your `{ROPE}` ignores its `base` argument: use θ_i = base^(-2i/hs) with the base "
            "passed in (10000 is only the default)."
        ] = rotate(x, positions, BASE)
    return first_match(out, variants) or (
        f"`{ROPE}` on {describe((x, positions))} is not each pair rotated by position · θ_i with "
        f"θ_i = base^(-2i/hs): {HALVES}, then x1·cos - x2·sin and x2·cos + x1·sin."
    )


def _rope_cases(gen, thorough: bool) -> list[tuple[tuple[int, ...], str, float | None]]:
    """``(shape (B, nh, T, hs), positions kind, base)``; base None means the default."""
    cases = [
        ((2, 3, 5, 8), "from 0", None),
        ((1, 2, 4, 16), "offset", None),
        ((2, 2, 6, 8), "scattered", None),
        ((1, 1, 3, 2), "offset", None),
        ((1, 4, 3, 64), "offset", 500.0),
    ]
    for _ in range(5 if thorough else 0):
        shape = (
            randint(gen, 1, 2),
            randint(gen, 1, 4),
            randint(gen, 1, 7),
            2 * randint(gen, 1, 16),
        )
        kind = ("from 0", "offset", "scattered")[randint(gen, 0, 2)]
        cases.append((shape, kind, (None, 100.0, 1e6)[randint(gen, 0, 2)]))
    return cases


def _positions(gen, T: int, kind: str) -> torch.Tensor:
    """Integer positions ``(T,)``: ``0 … T-1``, ``P … P+T-1`` with a random past, or scattered."""
    if kind == "from 0":
        return torch.arange(T)
    if kind == "offset":
        start = randint(gen, 1, 60)
        return torch.arange(start, start + T)
    return torch.randperm(100, generator=gen)[:T]


@one_thread
def check_apply_rope_values(apply_rope: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Equals pairs ``(x_i, x_{i+hs/2})`` turned by ``position · base^(-2i/hs)``, any positions."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    cases = _rope_cases(gen, thorough)
    dtypes = [torch.float32, torch.float64] + [torch.float32] * len(cases)
    for dtype, (shape, kind, base) in zip(dtypes, cases, strict=False):
        x = randn(gen, *shape, dtype=dtype)  # (B, nh, T, hs)
        positions = _positions(gen, shape[-2], kind)  # (T,)
        out = _rope(apply_rope, x, positions, base)
        if not close(out, rotate(x, positions, BASE if base is None else base)):
            fail(_rope_mistake(x, positions, base, out))


@one_thread
def check_apply_rope_relative(
    apply_rope: Callable, *, seed: int = 0, thorough: bool = False
) -> None:
    """The score of query position m with key position n depends on m - n only, and lengths stay.

    One query vector and one key vector are rotated at many positions; their scores
    ``q_m · k_n`` must not change when both positions move by the same amount, must change with
    the distance, and every rotated vector keeps its length. Both pairing conventions pass.
    """
    __tracebackhide__ = True
    gen = make_generator(seed)
    sizes = [8, 16, 64] + [2 * randint(gen, 2, 32) for _ in range(3 if thorough else 0)]
    for hs in sizes:
        T, shift = 6, randint(gen, 5, 40)
        q = randn(gen, hs, dtype=torch.float64).expand(1, 1, T, hs).clone()  # (1, 1, T, hs)
        k = randn(gen, hs, dtype=torch.float64).expand(1, 1, T, hs).clone()  # (1, 1, T, hs)
        positions = torch.arange(T)  # (T,)
        scores = []
        for start in (0, shift):
            rq = _rope(apply_rope, q, positions + start, None)[0, 0]  # (T, hs)
            rk = _rope(apply_rope, k, positions + start, None)[0, 0]  # (T, hs)
            scores.append(rq @ rk.T)  # (T, hs) @ (hs, T) -> (T, T): query m, key n
        lengths_kept = close(rq.norm(dim=-1), q[0, 0].norm(dim=-1)) and close(
            rk.norm(dim=-1), k[0, 0].norm(dim=-1)
        )
        moved = f"positions m and n both move by {shift}"
        if not close(scores[0], scores[1]):
            if lengths_kept:
                fail(
                    f"With `{ROPE}`, the score q_m · k_n changes when {moved}, although lengths "
                    "are kept: the angle must grow linearly with the position (position · θ_i), "
                    "the same θ_i for queries and keys."
                )
            fail(
                f"With `{ROPE}`, the score q_m · k_n changes when {moved}, and the vectors change "
                "length: that is what adding or scaling by position values does; RoPE rotates "
                "each pair (x1·cos - x2·sin, x2·cos + x1·sin), which keeps lengths and leaves "
                "only m - n in the score."
            )
        if not lengths_kept:
            fail(
                f"Your `{ROPE}` changes the length of the vectors it rotates: a rotation keeps "
                "|x|, so use cos and sin of the same angle on both features of a pair."
            )
        if close(scores[0], scores[0][0, 0].expand_as(scores[0])):
            fail(
                f"With `{ROPE}`, the score q_m · k_n is the same at every distance m - n: the "
                "rotation ignores the positions (angle = position · θ_i)."
            )


# ------------------------------------------------------------------ RoPE with the KV cache


def _rope_oracle(
    module,
    x,
    start: int = 0,
    *,
    k_positions=None,
    q_positions=None,
    rotate_q: bool = True,
    rotate_k: bool = True,
    rotate_v: bool = False,
    **how,
):
    """PyTorch's output for positions ``start:`` of ``x (B, S, C)`` with rotated q and k.

    Keys sit at ``k_positions`` (default ``0 … S-1``), new queries at ``q_positions`` (default
    ``start … S-1``); ``how`` goes to :func:`rotate` (layout, sign, exponent).
    """
    q, k, v = _heads(module, x)  # (B, nh, S, hs), (B, nkv, S, hs) × 2
    S = x.shape[1]
    k_positions = torch.arange(S) if k_positions is None else k_positions  # (S,)
    q_positions = torch.arange(start, S) if q_positions is None else q_positions  # (T,)
    q = q[:, :, start:]  # (B, nh, T, hs)
    if rotate_q:
        q = rotate(q, q_positions, **how)
    if rotate_k:
        k = rotate(k, k_positions, **how)
    if rotate_v:
        v = rotate(v, k_positions, **how)
    T = q.shape[2]
    allowed = torch.ones(T, S, dtype=torch.bool).tril(S - T)  # (T, S), bottom-right
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=True)
    B, nh, T, hs = out.shape
    return module.out_proj(out.transpose(1, 2).reshape(B, T, nh * hs))  # (B, T, C)


def _rotation_mistake(module, x, out) -> str:
    """Why a full pass (no cache) with RoPE gave ``out``."""
    T = x.shape[1]
    variants = {
        f"Your `{FORWARD}` rotates the values too: rotate only queries and keys, since the "
        "angle between them is what makes scores depend on m - n, and the values carry the "
        "content that the output mixes.": _rope_oracle(module, x, rotate_v=True),
        f"Your `{FORWARD}` output is attention without any rotation: apply apply_rope to q "
        "and k at their positions before attending.": _rope_oracle(
            module, x, rotate_q=False, rotate_k=False
        ),
        f"Your `{FORWARD}` rotates the keys but not the queries: both need apply_rope at their "
        "own positions.": _rope_oracle(module, x, rotate_q=False),
        f"Your `{FORWARD}` rotates the queries but not the keys: both need apply_rope at their "
        "own positions.": _rope_oracle(module, x, rotate_k=False),
        f"Your `{FORWARD}` pairs neighbouring features (interleaved, as in Meta's original "
        f"code), but {HALVES}.": _rope_oracle(module, x, layout="interleaved"),
        f"Your `{FORWARD}` output matches rotations by -position · θ_i: rotate_half(x) is "
        "cat(-x2, x1).": _rope_oracle(module, x, sign=-1),
    }
    return first_match(out, variants) or (
        f"Your `{FORWARD}` on {T} positions without a cache differs from grouped-query attention "
        "with q and k rotated at positions 0 … T-1: rotate after splitting into heads and before "
        "repeat_kv and attention."
    )


def _expect_rotated_cache(module, x, k, v, k_positions) -> None:
    """Fail unless the cache holds the keys rotated at their positions and the raw values."""
    __tracebackhide__ = True
    _, k_raw, v_raw = _heads(module, x)  # (B, nkv, S, hs)
    if not close(v, v_raw):
        if close(v, rotate(v_raw, k_positions)):
            fail(
                "Your cached values are rotated: rotate only the keys, and cache the values "
                "exactly as v_proj gives them."
            )
        fail(
            "Your cached v should be v_proj(x) split into kv heads, past positions first: the "
            "values are never rotated."
        )
    if close(k, rotate(k_raw, k_positions)):
        return
    if close(k, k_raw):
        fail(
            "Your cache holds the keys before rotation: rotate the new keys at their positions "
            "first and cache them rotated, so that no later step has to rotate the past again."
        )
    fail(
        "Your cached keys are not the keys rotated once, each at its own position 0 … S-1: "
        "rotate only the new keys (positions P … P+T-1), then append them to the cache."
    )


def _rotary_configs(gen, thorough: bool) -> list[tuple[int, int, int, bool]]:
    """``(C, nh, nkv, bias)`` with an even head size: GQA, MQA, MHA, then random ones."""
    configs = [(16, 2, 1, False), (32, 4, 2, True), (24, 3, 3, False), (32, 2, 2, True)]
    for _ in range(2 if thorough else 0):
        nkv, n_rep, hs = randint(gen, 1, 3), randint(gen, 1, 3), 2 * randint(gen, 1, 5)
        configs.append((nkv * n_rep * hs, nkv * n_rep, nkv, randint(gen, 0, 1) == 1))
    return configs


def _module(cls, gen, C, nh, nkv, bias):
    __tracebackhide__ = True
    try:
        return _build(cls, C, nh, nkv, bias, gen, name=ROTARY)
    except AssertionError as failure:
        if "is not implemented yet" in str(failure):
            fail(STUB_GQA)
        raise


@one_thread
def check_rotary_gqa_full_pass(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Without a cache: q and k rotated at 0 … T-1 (values not), the cache holds rotated keys."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for C, nh, nkv, bias in _rotary_configs(gen, thorough):
        module = _module(cls, gen, C, nh, nkv, bias)
        x = randn(gen, 2, randint(gen, 4, 8), C, dtype=torch.float32)  # (B, T, C)
        out, k, v = _forward(module, x, name=FORWARD)
        if not close(out, _rope_oracle(module, x)):
            fail(_rotation_mistake(module, x, out))
        _expect_rotated_cache(module, x, k, v, torch.arange(x.shape[1]))


def _chunkings(S: int) -> list[list[int]]:
    """A prompt then single tokens, one token at a time, uneven chunks."""
    return [[3] + [1] * (S - 3), [1] * S, [2, 3, S - 5]]


def _restarted(chunks: list[int]) -> torch.Tensor:
    """The positions each key gets when every call counts from 0 again: ``(S,)``."""
    return torch.cat([torch.arange(size) for size in chunks])


def _turned_every_call(chunks: list[int]) -> torch.Tensor:
    """Position times the number of calls that rotated it, when every call rotates the whole
    cache again: the angle a cached key ends with, as a position ``(S,)``."""
    starts = torch.tensor([0, *chunks]).cumsum(0)[:-1].tolist()
    calls = len(chunks)
    return torch.cat(
        [
            torch.arange(s, s + size) * (calls - i)
            for i, (s, size) in enumerate(zip(starts, chunks, strict=True))
        ]
    )


def _decoding_mistake(module, x_seen, start, out, chunks) -> str:
    """Why the output for positions ``start:`` of ``x_seen`` is wrong, decoding with RoPE."""
    S = x_seen.shape[1]
    T = S - start
    if start == 0:
        return _rotation_mistake(module, x_seen, out)
    where = (
        f"Decoding with {start} cached position{'s' * (start != 1)} and {T} new one{'s' * (T > 1)}"
    )
    variants = {
        f"{where}, your new tokens are rotated as if they were at positions 0 … T-1: they sit "
        "at P … P+T-1, so use torch.arange(P, P + T) with P = past_kv[0].shape[2] (0 without "
        "a cache).": _rope_oracle(
            module, x_seen, start, k_positions=_restarted(chunks), q_positions=torch.arange(T)
        ),
        f"{where}, your cached keys are rotated again at every step: rotate only the new keys, "
        "once, before appending them (the cache already holds rotated keys).": _rope_oracle(
            module, x_seen, start, k_positions=_turned_every_call(chunks)
        ),
    }
    return first_match(out, variants) or (
        f"{where} differs from one full causal pass with RoPE: rotate the new queries and keys "
        "at positions P … P+T-1, append the keys to the cache, attend with the bottom-right mask."
    )


@one_thread
def check_rotary_gqa_decoding(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Decoding in pieces with the cache equals one full causal pass with RoPE, cache included."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for C, nh, nkv, bias in _rotary_configs(gen, thorough):
        module = _module(cls, gen, C, nh, nkv, bias)
        S = 7 + (randint(gen, 0, 4) if thorough else 0)
        x = randn(gen, 2, S, C, dtype=torch.float32)  # (B, S, C)
        for chunks in _chunkings(S):
            past, start = None, 0
            for i, size in enumerate(chunks):
                seen = x[:, : start + size]  # (B, S so far, C)
                out, k, v = _forward(module, seen[:, start:], past, name=FORWARD)
                if not close(out, _rope_oracle(module, seen, start)):
                    fail(_decoding_mistake(module, seen, start, out, chunks[: i + 1]))
                _expect_decoded_cache(module, seen, k, v, chunks[: i + 1])
                past, start = (k, v), start + size


def _expect_decoded_cache(module, seen, k, v, chunks) -> None:
    """The cache after these chunks: rotated keys at their absolute positions, raw values."""
    __tracebackhide__ = True
    _, k_raw, _ = _heads(module, seen)  # (B, nkv, S, hs)
    if len(chunks) > 1 and close(k, rotate(k_raw, _restarted(chunks))):
        fail(
            "Your cached keys were rotated at positions that restart at 0 in every call: the new "
            "keys sit at P … P+T-1, so use torch.arange(P, P + T) with P = past_kv[0].shape[2]."
        )
    _expect_rotated_cache(module, seen, k, v, torch.arange(seen.shape[1]))
