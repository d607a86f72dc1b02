"""Checks for notebook 04, section 8: ``apply_rope``.

Shape legend: ``B`` batch, ``T`` new positions, ``P`` cached positions, ``S`` = P + T, ``C`` =
d_model, ``nh`` query heads, ``nkv`` key/value heads, ``hs`` = C // nh (even), ``hs/2`` pairs.

The convention graded is split halves (GPT-NeoX, Hugging Face's Llama ``rotate_half``): feature
``i`` and feature ``i + hs/2`` form pair ``i``, rotated by ``position · base^(-2i/hs)``. The
interleaved layout (pairs ``(2i, 2i + 1)``: the RoFormer paper, Meta's own Llama code) is the same
idea on permuted features, so it passes the relative-position check but fails the values check
with a diagnosis that names the convention: weights trained with one layout are wrong with the
other.

PyTorch is the oracle (:mod:`._rope`): each pair is a complex number ``x_i + i·x_{i+hs/2}``
multiplied by ``torch.polar(1, angle)`` in float64. Known-wrong answers are the same oracle fed
the wrong way (interleaved pairs, turned backwards, other frequencies, shifted positions...). The
module that uses it, ``RotaryGroupedQueryAttention``, is checked in :mod:`.nb04_rotary`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from autograder.torch_helpers import one_thread

from . import operators
from ._core import (
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
from ._rope import BASE, COMPLEX, HALVES, LLAMA3_BASE, rotate

#: What learner code may run: notebook 04's operators and complex rotations (:mod:`._rope`).
OPERATORS = operators.DEFAULT | operators.SDPA | COMPLEX

#: Learner-importable names that would compute these answers: none, no tool rotates queries or
#: keys (nb04_gqa's declarations hold for the notebook, whose cells import both modules).
ANSWERS_IN_TOOLS: dict[str, str] = {}

ROPE = "apply_rope"


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
