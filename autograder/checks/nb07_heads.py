"""Checks for notebook 07: ``head_entropy`` and ``previous_token_score``.

Shape legend: ``B`` batch, ``nh`` heads, ``T`` queries, ``S`` keys, ``n_layers`` blocks, ``...`` any
number of leading dimensions.

PyTorch is the oracle: ``torch.special.entr`` (−p·ln p, with 0 at p = 0) for the entropy,
``torch.diagonal(..., offset=-1)`` for the previous-token score. Known-wrong answers are the same
oracles applied to the wrong axis or offset. ``head_importance`` is checked in
:mod:`.nb07_importance`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import torch

from . import operators
from ._core import (
    call,
    close,
    expect_dtype,
    expect_tensor,
    expect_unmodified,
    fail,
    first_match,
    fmt_shape,
    has_nan_or_inf,
    make_generator,
    randint,
    randn,
)

#: The ATen operators learner code may run under these checks:
#: the learner's functions run the tiny transformer.
OPERATORS = operators.DEFAULT | operators.SDPA | operators.MODEL

#: Learner-importable names that would compute this notebook's graded answers. In the grading
#: sandbox of any notebook whose test cells use these checks, they keep their names but raise.
ANSWERS_IN_TOOLS: dict[str, str] = {
    "autograder.tools.nb07_head_stats.entropy": "head_entropy: both cells",
    "autograder.tools.nb07_head_stats.previous_token": "previous_token_score: both cells",
}

ENTROPY = "head_entropy"
PREVIOUS = "previous_token_score"


# ----------------------------------------------------------------------------- attention weights


def _weights(gen, *shape, causal=False, sharpness=2.0, dtype=torch.float64) -> torch.Tensor:
    """Random attention weights ``shape = (..., T, S)``: rows sum to 1, causal rows keep k <= q."""
    scores = sharpness * randn(gen, *shape, dtype=dtype)
    if causal:
        T, S = shape[-2:]
        allowed = torch.ones(T, S, dtype=torch.bool).tril(S - T)  # (T, S)
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1)  # (..., T, S)


def _shape_cases(gen, thorough: bool, square: bool) -> Iterator[tuple[int, ...]]:
    """Shapes ``(..., nh, T, S)``: fixed ones (no batch, batch, two leading dims), then random."""
    fixed = [(4, 5, 7), (2, 3, 6, 9), (2, 2, 3, 4, 5), (1, 1, 4, 3)]
    for shape in fixed:
        yield (*shape[:-1], shape[-2]) if square else shape
    for _ in range(6 if thorough else 1):
        lead = tuple(randint(gen, 1, 3) for _ in range(randint(gen, 0, 2)))
        nh, T = randint(gen, 1, 6), randint(gen, 2, 12)
        yield (*lead, nh, T, T if square else randint(gen, 2, 12))


def _call_stat(fn, name: str, w: torch.Tensor) -> torch.Tensor:
    """Call a per-head statistic and check it returns ``(..., nh)``."""
    __tracebackhide__ = True
    out = expect_tensor(call(fn, name, (w,)), name)
    *lead, nh, T, S = w.shape
    want = (*lead, nh)
    if tuple(out.shape) == want:
        return out
    if tuple(out.shape) == (*lead, nh, T):
        why = "one value per query: also take the mean over the queries"
    elif tuple(out.shape) == (*lead, nh, S) and S != T:
        why = "one value per key: reduce the keys first (dim=-1), then average the queries"
    elif tuple(out.shape) == (*lead, T) and nh != T:
        why = (
            "the mean is over the heads (dim=-2) instead of the queries: average dim=-1 after "
            "reducing the keys"
        )
    elif tuple(out.shape) == tuple(lead) or out.ndim == 0:
        why = "the heads were averaged away: keep one value per head, reduce only the last two dims"
    else:
        why = "reduce the keys (dim=-1) and then the queries (dim=-1 of what is left)"
    fail(
        f"`{name}` returned shape {fmt_shape(out.shape)} for weights of shape {fmt_shape(w.shape)} "
        f"but should return {fmt_shape(want)}, one value per head: {why}."
    )


# ----------------------------------------------------------------------------------- entropy


def _entropy(w: torch.Tensor) -> torch.Tensor:
    return torch.special.entr(w).sum(-1).mean(-1)  # (..., nh, T, S) -> (..., nh)


def _entropy_variants(w: torch.Tensor) -> dict[str, torch.Tensor]:
    good = _entropy(w)
    T, S = w.shape[-2:]
    variants = {
        f"`{ENTROPY}` uses log base 2 (bits): the contract is nats, so use the natural log "
        "torch.log.": good / math.log(2),
        f"`{ENTROPY}` uses log base 10: the contract is nats, so use the natural log "
        "torch.log.": good / math.log(10),
        f"`{ENTROPY}` is negative: entropy is −Σ p·log p, so keep the minus sign.": -good,
        f"`{ENTROPY}` is the entropy of the average row: compute each query's entropy first, "
        "then average over queries.": torch.special.entr(w.mean(-2)).sum(-1),
        f"`{ENTROPY}` sums over the query axis: sum −p·log p over the keys (dim=-1), then "
        "average over the queries.": torch.special.entr(w).sum(-2).mean(-1),
    }
    if T > 1:
        variants[f"`{ENTROPY}` sums the queries' entropies: take their mean instead."] = good * T
    if S > 1:
        variants[
            f"`{ENTROPY}` averages −p·log p over the keys: sum over the keys (dim=-1), then "
            "average over the queries."
        ] = good / S
    return variants


def check_head_entropy_values(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``head_entropy`` equals the mean over queries of each row's entropy in nats, per head."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for shape in _shape_cases(gen, thorough, square=False):
        w = _weights(gen, *shape, sharpness=1.0 + 2.0 * float(torch.rand(1, generator=gen)))
        out = _call_stat(fn, ENTROPY, w)
        expected = _entropy(w)
        if has_nan_or_inf(out):
            fail(
                f"`{ENTROPY}` returned NaN or inf for ordinary weights of shape "
                f"{fmt_shape(w.shape)}: check the log of the weights."
            )
        if not close(out, expected):
            fail(
                first_match(out, _entropy_variants(w))
                or f"`{ENTROPY}` differs from the mean over queries of −Σ_k p·ln p for weights "
                f"of shape {fmt_shape(w.shape)}: sum over keys, then average over queries (an "
                "epsilon or clamp above ~1e-12 inside the log also shifts the result)."
            )


def check_head_entropy_zero_weights(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Zero weights count as 0·log 0 = 0: one-hot rows, causal weights and all-zero rows, no NaN."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    nan = (
        f"`{ENTROPY}` returned NaN where some weights are exactly 0: 0 * log(0) is 0 * -inf = NaN "
        "in floating point, so use torch.special.entr, torch.xlogy(p, p), or torch.where to "
        "count those terms as 0."
    )
    eye = torch.eye(5, dtype=torch.float64).expand(2, 3, 5, 5)  # (B, nh, T, S): one-hot rows
    cases = [("one-hot rows", eye, torch.zeros(2, 3, dtype=torch.float64))]
    causal = _weights(gen, 2, 4, 6, 6, causal=True)  # (B, nh, T, T)
    cases.append(("causal weights", causal, _entropy(causal)))
    empty = _weights(gen, 2, 3, 5, 7, causal=True)
    empty[:, :, 1] = 0.0  # a query that may attend to nothing gets all-zero weights
    cases.append(("a query row of zeros", empty, _entropy(empty)))
    uniform = torch.full((3, 4, 8), 1 / 8, dtype=torch.float64)  # (nh, T, S)
    cases.append(("uniform rows", uniform, torch.full((3,), math.log(8), dtype=torch.float64)))
    if thorough:
        for _ in range(4):
            w = _weights(
                gen, randint(gen, 1, 3), randint(gen, 1, 4), 9, 9, causal=True, sharpness=8.0
            )
            cases.append(("sharp causal weights", w, _entropy(w)))
    for what, w, expected in cases:
        before = w.clone()
        out = _call_stat(fn, ENTROPY, w)
        expect_unmodified([before], [w], ENTROPY)
        if torch.isnan(out).any():
            fail(nan)
        if not close(out, expected):
            fail(
                first_match(out, _entropy_variants(w))
                or f"`{ENTROPY}` is wrong for {what} of shape {fmt_shape(w.shape)} (expected "
                f"{expected.flatten()[0].item():.4f} for the first head): a zero weight adds "
                "nothing, and a large clamp or epsilon inside the log changes the result."
            )
    for dtype in (torch.float32, torch.float64):
        w = _weights(gen, 2, 3, 4, 4, causal=True, dtype=dtype)
        expect_dtype(_call_stat(fn, ENTROPY, w), dtype, f"The output of `{ENTROPY}`")


# ----------------------------------------------------------------------- previous-token score


def _previous(w: torch.Tensor) -> torch.Tensor:
    return torch.diagonal(w, offset=-1, dim1=-2, dim2=-1).mean(-1)  # (..., nh, T-1) -> (..., nh)


def _previous_variants(w: torch.Tensor) -> dict[str, torch.Tensor]:
    T = w.shape[-1]
    sub = torch.diagonal(w, offset=-1, dim1=-2, dim2=-1)  # (..., nh, T-1)
    rolled = sub.sum(-1) + w[..., 0, T - 1]  # query 0 "reads" key T-1 when indices wrap around
    return {
        f"`{PREVIOUS}` reads the main diagonal (each query's weight on itself): the previous "
        "token of query t is key t−1, torch.diagonal(w, offset=-1, dim1=-2, dim2=-1).": (
            torch.diagonal(w, dim1=-2, dim2=-1).mean(-1)
        ),
        f"`{PREVIOUS}` reads the weight on the next token (key t+1, above the diagonal): use "
        "offset=-1, below the diagonal.": torch.diagonal(w, offset=1, dim1=-2, dim2=-1).mean(-1),
        f"`{PREVIOUS}` divides by T instead of T−1: query 0 has no previous token, so average "
        "over queries 1…T−1 only.": sub.sum(-1) / T,
        f"`{PREVIOUS}` wraps around (query 0 reads key T−1, e.g. via torch.roll or index -1): "
        "query 0 has no previous token, so leave it out.": rolled / T,
        f"`{PREVIOUS}` sums over the queries: take the mean over queries 1…T−1.": sub.sum(-1),
        f"`{PREVIOUS}` averages a whole column (every query's weight on one key), not the "
        "diagonal below the main one.": w[..., :, :-1].mean(-2).mean(-1),
    }


def check_previous_token_score_values(
    fn: Callable, *, seed: int = 0, thorough: bool = False
) -> None:
    """``previous_token_score`` equals the mean over queries 1..T-1 of ``w[..., t, t-1]``."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for i, shape in enumerate(_shape_cases(gen, thorough, square=True)):
        w = _weights(gen, *shape, causal=i % 2 == 1)  # non-causal first: catches t+1
        before = w.clone()
        out = _call_stat(fn, PREVIOUS, w)
        expect_unmodified([before], [w], PREVIOUS)
        if not close(out, _previous(w)):
            fail(
                first_match(out, _previous_variants(w))
                or f"`{PREVIOUS}` differs from the mean over queries 1…T−1 of w[..., t, t−1] "
                f"for weights of shape {fmt_shape(w.shape)}: take the diagonal below the main "
                "one (offset=-1) of the last two dimensions."
            )
    for dtype in (torch.float32, torch.float64):
        w = _weights(gen, 2, 3, 4, 4, causal=True, dtype=dtype)
        expect_dtype(_call_stat(fn, PREVIOUS, w), dtype, f"The output of `{PREVIOUS}`")


def _pattern(T: int, key_of: Callable[[int], int], nh: int = 2) -> torch.Tensor:
    """One-hot causal weights ``(1, nh, T, T)``: query t attends only to key ``key_of(t)``."""
    w = torch.zeros(1, nh, T, T, dtype=torch.float64)
    for t in range(T):
        w[..., t, key_of(t)] = 1.0
    return w


def check_previous_token_score_patterns(
    fn: Callable, *, seed: int = 0, thorough: bool = False
) -> None:
    """A perfect previous-token head scores exactly 1; a self or first-token head scores less."""
    __tracebackhide__ = True
    sizes = [5, 8, 2] + ([3, 16, 33] if thorough else [])  # T=2 last: variants coincide
    for T in sizes:
        patterns = [
            (
                "a perfect previous-token head (query 0 can only attend to itself)",
                _pattern(T, lambda t: max(t - 1, 0)),
                1.0,
            ),
            ("a head where every query attends to itself", _pattern(T, lambda t: t), 0.0),
            (
                "a head where every query attends to the first token",
                _pattern(T, lambda t: 0),
                1.0 / (T - 1),
            ),
        ]
        for what, w, value in patterns:
            out = _call_stat(fn, PREVIOUS, w)
            expected = torch.full(w.shape[:-2], value, dtype=w.dtype)
            if not close(out, expected):
                got = out.flatten()[0].item()
                fail(
                    first_match(out, _previous_variants(w))
                    or f"`{PREVIOUS}` gives {got:.4f} for {what} with T={T}, but it should be "
                    f"{value:.4f}: average w[t, t−1] over queries t = 1…T−1."
                )
