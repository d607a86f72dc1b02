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
    NotWrittenYet,
    call,
    close,
    describe,
    expect_shape,
    expect_tensor,
    expect_unmodified,
    fail,
    first_match,
    fmt_shape,
    make_generator,
    randint,
    randn,
)
from .nb04_gqa import OPERATORS as GQA_OPERATORS
from .nb04_gqa import _build, _forward, _heads

#: What learner code may run: notebook 04's operators, complex numbers (a rotation written
#: as ``torch.view_as_complex(...) * torch.polar(...)`` is as correct as ``rotate_half``), and
#: dtype arithmetic (``torch.promote_types`` picks the float32 the angles are computed in).
OPERATORS = GQA_OPERATORS | frozenset(
    f"aten::{name}"
    for name in (
        "view_as_complex view_as_real polar complex real imag promote_types result_type"
    ).split()
)

#: Learner-importable names that would compute these answers: none, no tool rotates queries or
#: keys (nb04_gqa's declarations hold for the notebook, whose cells import both modules).
ANSWERS_IN_TOOLS: dict[str, str] = {}

ROPE = "apply_rope"
ROTARY = "RotaryGroupedQueryAttention"
FORWARD = f"{ROTARY}.forward"
BASE = 10000.0
LLAMA3_BASE = 500_000.0  # Llama 3's rope_theta: a default copied from its config
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
    if out.dim() > x.dim() and tuple(out.shape[-x.dim() :]) == tuple(x.shape):
        fail(
            f"Your `{ROPE}` returns {fmt_shape(out.shape)} for a {fmt_shape(x.shape)} input: "
            "cos and sin built as (1, 1, T, hs) add leading dimensions; build them as (T, hs/2) "
            "or (T, hs), which broadcast against any leading dimensions."
        )
    expect_shape(out, x.shape, f"The output of `{ROPE}`", inputs, "rotating keeps the shape")
    if out.dtype != x.dtype:
        fail(
            f"The output of `{ROPE}` is {out.dtype} for {x.dtype} inputs: compute the angles "
            "in float32 (or wider) if you like, but cast the result back with .to(x.dtype)."
        )
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
        f"Your `{ROPE}` rotates every row one position too far (positions + 1): the first token "
        "sits at position 0, so use the positions exactly as given.": rotate(
            x, positions + 1, used
        ),
        f"Your `{ROPE}` rotates every row one position short (positions - 1): use the positions "
        "exactly as given.": rotate(x, positions - 1, used),
    }
    if base is None:
        variants[
            f"Your `{ROPE}` uses base {LLAMA3_BASE:,.0f} by default, Llama 3's: the course's "
            "default, and the original RoPE's, is base = 10000.0."
        ] = rotate(x, positions, LLAMA3_BASE)
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
    """``(shape (..., T, hs), positions kind, base)``; base None means the default.

    Leading dimensions vary: ``(B, nh, T, hs)``, ``(nh, T, hs)`` and ``(T, hs)``.
    """
    cases = [
        ((2, 3, 5, 8), "from 0", None),
        ((1, 2, 4, 16), "offset", None),
        ((3, 5, 8), "offset", None),
        ((6, 4), "scattered", None),
        ((2, 2, 6, 8), "scattered", None),
        ((1, 1, 3, 2), "offset", None),
        ((1, 4, 3, 64), "offset", 500.0),
    ]
    for _ in range(5 if thorough else 0):
        T, hs = randint(gen, 1, 7), 2 * randint(gen, 1, 16)
        leading = [(), (randint(gen, 1, 4),), (randint(gen, 1, 2), randint(gen, 1, 4))]
        shape = (*leading[randint(gen, 0, 2)], T, hs)
        kind = ("from 0", "offset", "scattered")[randint(gen, 0, 2)]
        cases.append((shape, kind, (None, 100.0, 1e6)[randint(gen, 0, 2)]))
    return cases


def _positions(gen, T: int, kind: str) -> torch.Tensor:
    """Integer positions ``(T,)``: ``0 … T-1``, ``P … P+T-1`` with a random past, scattered,
    or ``far``: ``P … P+T-1`` with ``P`` in the thousands, where half precision rounds."""
    if kind == "from 0":
        return torch.arange(T)
    if kind == "offset":
        start = randint(gen, 1, 60)
        return torch.arange(start, start + T)
    if kind == "far":
        start = randint(gen, 4000, 8000)
        return torch.arange(start, start + T)
    return torch.randperm(100, generator=gen)[:T]


#: Half-precision inputs: ``(dtype, name)``. Their tolerance is what float32 angles achieve.
HALF = ((torch.bfloat16, "bfloat16"), (torch.float16, "float16"))


def _relative_error(out: torch.Tensor, expected: torch.Tensor) -> float:
    """``|out - expected| / |expected|`` over the whole tensor, in float64."""
    out, expected = out.to(torch.float64), expected.to(torch.float64)
    return ((out - expected).norm() / expected.norm()).item()


def _expect_half_precision(apply_rope: Callable, gen, shape: tuple[int, ...]) -> None:
    """bfloat16 and float16 inputs at positions in the thousands, as close as float32 angles.

    Angles computed in float32 and a result rounded to the input's dtype stay within about one
    rounding unit of that dtype (``finfo.eps``: 2⁻⁷ for bfloat16, 2⁻¹⁰ for float16); twice that
    is allowed. Angles computed in the input's dtype are off by 20-70%: bfloat16 keeps 8
    significant bits, so positions 4000 … 4007 are all the same number to it.
    """
    __tracebackhide__ = True
    for dtype, name in HALF:
        x = randn(gen, *shape, dtype=torch.float32).to(dtype)  # (..., T, hs)
        positions = _positions(gen, shape[-2], "far")  # (T,)
        out = _rope(apply_rope, x, positions, None)
        error = _relative_error(out, rotate(x.to(torch.float64), positions))
        if error > 2 * torch.finfo(dtype).eps:
            first, last = positions[0].item(), positions[-1].item()
            fail(
                f"Your `{ROPE}` on {name} input at positions {first} … {last} is off by "
                f"{error:.0%} of the vectors' size (float32 angles stay under "
                f"{2 * torch.finfo(dtype).eps:.1%}): {name} keeps too few bits to tell such "
                "positions apart, so compute positions and θ in float32 "
                "(positions.float()[:, None] * theta), rotate, and cast the result back to "
                "x.dtype."
            )


@one_thread
def check_apply_rope_values(apply_rope: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Equals pairs ``(x_i, x_{i+hs/2})`` turned by ``position · base^(-2i/hs)``, any positions,
    any leading dimensions; in bfloat16 and float16 as close as float32 angles get."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    cases = _rope_cases(gen, thorough)
    dtypes = [torch.float32, torch.float64] + [torch.float32] * len(cases)
    for dtype, (shape, kind, base) in zip(dtypes, cases, strict=False):
        x = randn(gen, *shape, dtype=dtype)  # (..., T, hs)
        positions = _positions(gen, shape[-2], kind)  # (T,)
        out = _rope(apply_rope, x, positions, base)
        if not close(out, rotate(x, positions, BASE if base is None else base)):
            fail(_rope_mistake(x, positions, base, out))
    _expect_half_precision(apply_rope, gen, (2, 2, 6, 32))
    if thorough:
        _expect_half_precision(apply_rope, gen, (3, 2 * randint(gen, 4, 64)))


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
    causal: bool = True,
    **how,
):
    """PyTorch's output for positions ``start:`` of ``x (B, S, C)`` with rotated q and k.

    Keys sit at ``k_positions`` (default ``0 … S-1``), new queries at ``q_positions`` (default
    ``start … S-1``); ``how`` goes to :func:`rotate` (layout, sign, exponent). ``causal=False``
    lets every query read every key.
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
    allowed = torch.ones(T, S, dtype=torch.bool).tril(S - T) if causal else None  # (T, S)
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
        f"Your `{FORWARD}` rotates with base {LLAMA3_BASE:,.0f} (Llama 3's rope_theta): this "
        "course's apply_rope and its default are base 10000.": _rope_oracle(
            module, x, base=LLAMA3_BASE
        ),
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
    if close(k, rotate(k_raw, k_positions + 1)):
        fail(
            "Your cached keys are rotated one position too far (1 … S instead of 0 … S-1): the "
            "outputs agree, since only distances count, but a cache that mixes with anyone "
            "else's is off by one. The first token sits at position 0."
        )
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
        if isinstance(failure, NotWrittenYet):
            fail(STUB_GQA)
        raise


@one_thread
def check_rotary_gqa_full_pass(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Without a cache: q and k rotated at 0 … T-1 (values not), the cache holds rotated keys;
    ``causal=False`` attends to every key."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for C, nh, nkv, bias in _rotary_configs(gen, thorough):
        module = _module(cls, gen, C, nh, nkv, bias)
        x = randn(gen, 2, randint(gen, 4, 8), C, dtype=torch.float32)  # (B, T, C)
        out, k, v = _forward(module, x, name=FORWARD)
        if not close(out, _rope_oracle(module, x)):
            fail(_rotation_mistake(module, x, out))
        _expect_rotated_cache(module, x, k, v, torch.arange(x.shape[1]))
        out, _, _ = _forward(module, x, causal=False, name=FORWARD)
        if not close(out, _rope_oracle(module, x, causal=False)):
            if close(out, _rope_oracle(module, x)):
                fail(
                    f"Your `{FORWARD}` masks the future even with causal=False: build the mask "
                    "only when causal is True, and attend to every key otherwise."
                )
            fail(
                f"Your `{FORWARD}` with causal=False differs from attention over every key with "
                "q and k rotated at 0 … T-1: only the mask depends on `causal`."
            )


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


# ------------------------------------------------------------ positions passed explicitly

WINDOW = 3  # keys a rolling buffer keeps


@one_thread
def check_rotary_gqa_positions(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``forward(x, past_kv, positions=...)`` rotates at the positions given: a chunk that starts
    later in the text, and a rolling buffer that keeps only the last few keys (its length stops
    telling the position)."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for C, nh, nkv, bias in _rotary_configs(gen, thorough):
        module = _module(cls, gen, C, nh, nkv, bias)
        T = randint(gen, 3, 6)
        x = randn(gen, 2, T, C, dtype=torch.float32)  # (B, T, C)
        start = randint(gen, 5, 90)
        positions = torch.arange(start, start + T)  # (T,)
        try:
            out, k, v = _forward(module, x, name=FORWARD, positions=positions)
        except AssertionError as failure:
            if "unexpected keyword argument 'positions'" in str(failure):
                fail(
                    f"Your `{FORWARD}` takes no `positions` argument: add `positions=None` "
                    "after `causal`, and count P … P+T-1 from the cache only when it is None."
                )
            raise
        _, k_raw, _ = _heads(module, x)  # (B, nkv, T, hs)
        counted = torch.arange(T)  # (T,): what the cache's length gives without a cache
        if not close(k, rotate(k_raw, positions)) and close(k, rotate(k_raw, counted)):
            if close(out, _rope_oracle(module, x, k_positions=counted, q_positions=positions)):
                fail(
                    f"Your `{FORWARD}` rotates the queries at the `positions` given but the new "
                    "keys at P … P+T-1 from the cache's length: rotate both at the positions "
                    "given."
                )
            fail(
                f"Your `{FORWARD}` ignores its `positions` argument: given positions "
                f"{start} … {start + T - 1}, it cached keys rotated at 0 … {T - 1}. Use the "
                "positions passed in, and the cache's length only when none are given."
            )
        expected = _rope_oracle(module, x, k_positions=positions, q_positions=positions)
        if not close(out, expected):
            fail(
                f"Your `{FORWARD}` given positions {start} … {start + T - 1} (no cache) differs "
                "from attention with q and k rotated at exactly those positions."
            )
        _expect_rotated_cache(module, x, k, v, positions)
        _expect_rolling_buffer(module, gen, C)


def _expect_rolling_buffer(module, gen, C: int) -> None:
    """Decode token by token keeping only the last ``WINDOW`` keys, positions passed in."""
    __tracebackhide__ = True
    S = WINDOW + 4
    x = randn(gen, 1, S, C, dtype=torch.float32)  # (B, S, C)
    past = None
    for t in range(S):
        out, k, v = _forward(
            module, x[:, t : t + 1], past, name=FORWARD, positions=torch.tensor([t])
        )
        lo = max(0, t - WINDOW)  # the oldest key still in the buffer
        kept = x[:, lo : t + 1]  # (B, n, C): the tokens whose keys the buffer holds
        expected = _rope_oracle(
            module,
            kept,
            kept.shape[1] - 1,
            k_positions=torch.arange(lo, t + 1),
            q_positions=torch.tensor([t]),
        )
        if not close(out, expected):
            fail(
                f"Decoding with a rolling buffer of the last {WINDOW} keys, your token at "
                f"position {t} (passed as positions=[{t}], with {k.shape[2] - 1} keys cached) "
                "is not rotated at that position: the cache's length stops telling the "
                "position once old keys are dropped, so rotate at the positions you are given."
            )
        past = (k[:, :, -WINDOW:], v[:, :, -WINDOW:])  # (B, nkv, ≤ WINDOW, hs): the buffer
