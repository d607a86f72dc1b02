"""Checks for notebook 08, section 6: ALiBi's ``alibi_slopes`` and ``alibi_bias``.

Shape legend: ``B`` batch, ``nh`` heads, ``T`` queries (the last T of the S positions), ``S``
keys, ``hs`` head size.

Slopes follow the ALiBi paper (Press et al. 2022) and BLOOM's ``build_alibi_tensor``: for ``n``
heads, a power of two, head ``h`` (from 0) gets ``2^(-8(h+1)/n)``; otherwise the ``2^⌊log2 n⌋``
slopes of the nearest lower power of two come first, then every other slope of twice that
count (the 1st, 3rd, ...) until there are ``n``.

The bias is graded by what attention does with it: ``F.scaled_dot_product_attention`` with the
learner's ``(nh, T, S)`` float bias as ``attn_mask`` must equal softmax(q·kᵀ/√hs - m_h·(p - j))
over keys ``j <= p`` (``p = S - T + i``), computed here in float64. BLOOM's form, ``+m_h·j``,
differs from it by a constant per query row and passes, as it should: softmax ignores such
constants.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from autograder.torch_helpers import one_thread

from ._core import (
    call,
    close,
    describe,
    expect_shape,
    expect_tensor,
    fail,
    first_match,
    make_generator,
    randint,
    randn,
    wide_draws,
)

#: Learner-importable names that would compute these answers: none.
ANSWERS_IN_TOOLS: dict[str, str] = {}

SLOPES = "alibi_slopes"
BIAS = "alibi_bias"


def slopes(n: int) -> list[float]:
    """The paper's ``get_slopes(n)``, in Python floats."""
    if math.log2(n).is_integer():
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))  # 2^(-8/n)
        return [start ** (h + 1) for h in range(n)]
    lower = 2 ** math.floor(math.log2(n))
    return slopes(lower) + slopes(2 * lower)[0::2][: n - lower]


def _geometric(n: int) -> list[float]:
    return [2 ** (-8 * (h + 1) / n) for h in range(n)]


def _slope_variants(n: int) -> dict[str, list[float]]:
    lower = 2 ** math.floor(math.log2(n))
    return {
        f"With {n} heads (not a power of two), your slopes are 2^(-8(h+1)/{n}): the paper takes "
        f"the {lower} slopes of {lower} heads, then every other slope of {2 * lower} heads "
        "(the 1st, 3rd, 5th...) for the rest.": _geometric(n),
        f"With {n} heads, the extra slopes are the 2nd, 4th, ... of {2 * lower} heads: take the "
        "1st, 3rd, 5th... ([0::2]), which fall between the first ones.": slopes(lower)
        + slopes(2 * lower)[1::2][: n - lower],
        f"With {n} heads, the extra slopes are the first {n - lower} of {2 * lower} heads': "
        "take every other one ([0::2]) before cutting the list at n, so that they fall between "
        "the first ones.": slopes(lower) + slopes(2 * lower)[: n - lower],
        f"With {n} heads, your slopes are sorted: the paper keeps the {lower} slopes of "
        f"{lower} heads first, then the extra ones.": sorted(slopes(n), reverse=True),
        "Your slopes start at 1: head h (from 0) gets 2^(-8(h+1)/n), so the first is 2^(-8/n).": [
            2 ** (-8 * h / n) for h in range(n)
        ],
        "Your slopes run the wrong way: the first head has the steepest slope, 2^(-8/n), and "
        "they shrink from there.": slopes(n)[::-1],
    }


@one_thread
def check_alibi_slopes(alibi_slopes: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``alibi_slopes(n)`` equals the paper's slopes, powers of two and not (12, 24, 40...)."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    counts = [8, 16, 1, 2, 12, 6, 40, 96]
    counts += [randint(gen, 3, 130) for _ in range(4 if thorough else 0)]
    counts += [n for (n,) in wide_draws(seed, thorough, 2, (3, 200))]
    for n in counts:
        out = expect_tensor(call(alibi_slopes, SLOPES, (n,)), SLOPES)
        expect_shape(out, (n,), f"The output of `{SLOPES}`", describe((n,)), "one slope per head")
        right = torch.tensor(slopes(n), dtype=torch.float64)
        # tighter than TOLERANCE: a float32 slope is within 6e-8 of the paper's float, and the
        # catalogue's wrong slopes are told apart at this margin
        if close(out.double(), right, atol=1e-7, rtol=1e-5):
            if out.dtype != torch.float32:
                fail(
                    f"`{SLOPES}({n})` returned {out.dtype} slopes with the right values: the "
                    "contract is float32, the dtype of the scores they bias, so build them with "
                    "dtype=torch.float32 or end with .float()."
                )
            continue
        variants = {
            why: torch.tensor(wrong, dtype=torch.float64)
            for why, wrong in _slope_variants(n).items()
        }
        fail(
            first_match(out.double(), {w: t for w, t in variants.items() if not close(t, right)})
            or f"`{SLOPES}({n})` differs from the ALiBi paper's slopes: 2^(-8(h+1)/n) for a power "
            "of two, else those of the lower power of two then every other one of the next."
        )


# ------------------------------------------------------------------------- the bias


def _distance(T: int, S: int) -> torch.Tensor:
    """``(T, S)``: ``p - j`` with ``p = S - T + i`` the query's position."""
    return (torch.arange(S - T, S)[:, None] - torch.arange(S)[None, :]).to(torch.float64)


def _attend(q, k, v, bias) -> torch.Tensor:
    """Attention with a float bias ``(nh, T, S)`` (−inf = blocked), in float64 by hand."""
    scores = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.shape[-1]) + bias.double()
    return scores.softmax(-1) @ v.double()  # (B, nh, T, hs)


def _bias(m: torch.Tensor, T: int, S: int, *, sign=-1.0, causal=True, how="bottom-right"):
    """The oracle bias ``(nh, T, S)`` (``how``, ``sign``, ``causal``: its known-wrong forms)."""
    distance = _distance(T, S)  # (T, S): p - j
    if how == "top-left":
        distance = _distance(T, S) - (S - T)  # query i taken to sit at position i
    if how == "symmetric":
        distance = distance.abs()
    if how == "clamped":
        distance = distance.clamp(min=0)
    bias = sign * m.double()[:, None, None] * distance  # (nh, T, S)
    if causal:
        bias = bias.masked_fill(distance < 0, float("-inf"))
    return bias


def _bias_variants(m, T, S, q, k, v) -> dict[str, torch.Tensor]:
    at = f"`{BIAS}(slopes, {T}, S={S})`"
    forms = {
        f"{at} rewards distance: the bias is -m_h · (p - j), negative for keys further back.": dict(
            sign=1.0
        ),
        f"{at} leaves future keys open: set the bias of keys after the query's position to "
        "-inf (ALiBi folds the causal mask in).": dict(causal=False),
        f"{at} penalises |p - j| in both directions and leaves future keys open: a causal "
        "model adds -inf after the query's position.": dict(causal=False, how="symmetric"),
        f"{at} gives future keys a bias of 0, so they stay open: ALiBi folds the causal mask "
        "in, -inf for keys after the query's position (p - j < 0), not a distance clamped at "
        "0.": dict(causal=False, how="clamped"),
        f"{at} is aligned top-left: when S > T the queries are the last T positions, "
        "p = S - T + i.": dict(how="top-left"),
    }
    return {why: _attend(q, k, v, _bias(m, T, S, **how)) for why, how in forms.items()}


@one_thread
def check_alibi_bias(alibi_bias: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """SDPA with ``alibi_bias(slopes, T, S)`` as its float ``attn_mask`` equals attention with
    ALiBi's causal bias -m_h · (p - j), computed by hand; queries are the last T positions."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    cases = [(4, 5, None), (3, 4, 9), (8, 1, 6), (1, 6, None), (12, 3, 7)]
    for _ in range(3 if thorough else 0):
        T = randint(gen, 1, 8)
        cases.append((randint(gen, 1, 12), T, T + randint(gen, 0, 8)))
    for nh, T, S in cases:
        # (nh,): the paper's slopes, each scaled by a random draw, so no table of answers fits
        m = torch.tensor(slopes(nh)) * (0.5 + torch.rand(nh, generator=gen))
        kwargs = {} if S is None else {"S": S}
        S = T if S is None else S
        bias = expect_tensor(call(alibi_bias, BIAS, (m, T), kwargs), BIAS)
        inputs = describe((m, T), kwargs)
        expect_shape(bias, (nh, T, S), f"The output of `{BIAS}`", inputs, "one (T, S) per head")
        if not bias.is_floating_point():
            fail(
                f"`{BIAS}` returned a {bias.dtype} tensor: the bias is added to the scores, so "
                "it must be a float tensor (a bool mask would only select keys)."
            )
        q, k, v = (randn(gen, 2, nh, n, 8, dtype=torch.float32) for n in (T, S, S))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype))
        expected = _attend(q, k, v, _bias(m, T, S))  # (B, nh, T, hs)
        if close(out.double(), expected):
            continue
        fail(
            first_match(out.double(), _bias_variants(m, T, S, q, k, v))
            or f"With {inputs}, SDPA with your bias differs from ALiBi: query i at p = S - T + i "
            "adds -slopes[h] · (p - j) to the score of key j <= p, and -inf after p."
        )
