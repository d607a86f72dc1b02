"""Checks for notebook 09, section 5: split-KV decoding (FlashDecoding), ``attend_chunk``,
``merge_splits`` and ``split_kv_decode``.

Shape legend: ``B`` batch, ``nh`` heads, ``T`` queries (1 when decoding), ``n`` keys of one
chunk, ``L`` keys in all, ``P`` splits, ``hs`` head size.

A chunk of keys gives each query its output ``o`` and the log-sum-exp ``lse`` of its scores; an
empty chunk gives ``o = 0`` and ``lse = -inf`` (no weight at all). The states of ``P`` chunks of
one cache merge exactly: weights ``exp(lse_p - lse)`` with ``lse = logsumexp_p(lse_p)``, the
rescaling of notebook 06's online softmax done once per chunk instead of once per block.

PyTorch is the oracle: ``F.scaled_dot_product_attention`` over the whole cache for ``o`` and
``torch.logsumexp`` of the scaled scores for ``lse``, in float64, for float32 inputs. One case
has scores in the hundreds, where ``exp`` of a score or of an ``lse`` overflows float32: only a
merge that subtracts the largest ``lse`` first survives it, as FlashAttention's does. Learner code
may not call SDPA here (it gives no ``lse``): every operator is written by hand.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from autograder.checks import operators
from autograder.torch_helpers import one_thread

from ._core import (
    LOOSE,
    call,
    close,
    describe,
    expect_pair,
    expect_shape,
    expect_tensor,
    expect_unmodified,
    fail,
    first_match,
    has_nan_or_inf,
    make_generator,
    randint,
    randn,
)

#: By hand: the (o, lse) state is what SDPA does not return.
OPERATORS = operators.DEFAULT

#: Notebook 06's tool computes attention by hand, which is split_kv_decode's answer.
ANSWERS_IN_TOOLS: dict[str, str] = {
    "autograder.tools.nb06_gpu_timing.naive_attention": "split_kv_decode, in one piece",
}

ATTEND = "attend_chunk"
MERGE = "merge_splits"
SPLIT = "split_kv_decode"
HUGE = 100.0  # scales q so that scores reach the hundreds: exp overflows float32 past 88.7
#: A score in the hundreds keeps ~1e-5 in float32, and so do the weights: a looser tolerance.
HUGE_TOL = LOOSE


def state(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(o (B, nh, T, hs), lse (B, nh, T))`` of ``q`` over a chunk ``(B, nh, n, hs)``, in
    float64; ``o = 0`` and ``lse = -inf`` when the chunk is empty."""
    q, k, v = (t.double() for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, nh, T, hs) @ (B, nh, hs, n)
    return torch.softmax(scores, -1) @ v, torch.logsumexp(scores, -1)  # (B, nh, T, hs), (B, nh, T)


def _inputs(gen, B: int, nh: int, T: int, L: int, hs: int, huge: bool):
    """float32 ``q (B, nh, T, hs)``, ``k, v (B, nh, L, hs)``; ``huge`` scales q by :data:`HUGE`."""
    q = randn(gen, B, nh, T, hs, dtype=torch.float32) * (HUGE if huge else 1.0)
    k, v = (randn(gen, B, nh, L, hs, dtype=torch.float32) for _ in range(2))
    return q, k, v


def _same_lse(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Equal -inf where ``want`` is -inf, close elsewhere (an lse in the hundreds keeps ~1e-5)."""
    got = got.detach().double()
    empty = torch.isinf(want)
    return (
        got.shape == want.shape
        and torch.equal(got[empty], want[empty])
        and close(got[~empty], want[~empty], 1e-4, 1e-5)
    )


def _lse_shape(lse: torch.Tensor, shape: tuple, name: str, inputs: str) -> None:
    __tracebackhide__ = True
    if tuple(lse.shape) == (*shape, 1):
        fail(
            f"The lse of `{name}` has shape {tuple(lse.shape)}: one number per query, "
            f"{tuple(shape)}; drop the last dimension (keepdim=False)."
        )
    expect_shape(lse, shape, f"The lse of `{name}`", inputs, "one number per query, (B, nh, T)")


# ----------------------------------------------------------------------------- attend_chunk


@one_thread
def check_attend_chunk(attend_chunk: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``attend_chunk(q, k, v) -> (o, lse)``: ``q (B, nh, T, hs)`` over a chunk ``k, v (B, nh,
    n, hs)``; ``o`` is attention over the chunk and ``lse`` the log-sum-exp of the scaled scores;
    an empty chunk (n = 0) gives ``o = 0`` and ``lse = -inf``, never NaN."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    cases = [(1, 2, 1, 5, False), (2, 1, 3, 4, False), (1, 2, 1, 1, False), (1, 2, 1, 9, True)]
    cases.append((1, 2, 2, 0, False))
    for _ in range(3 if thorough else 0):
        n = randint(gen, 0, 12)
        cases.append((randint(gen, 1, 2), randint(gen, 1, 3), randint(gen, 1, 3), n, False))
    for B, nh, T, n, huge in cases:
        args = _inputs(gen, B, nh, T, n, 8, huge)
        inputs = describe(args)
        before = tuple(t.clone() for t in args)
        if n == 0:
            empty = f"`{ATTEND}` on an empty chunk (n = 0, inputs {inputs})"
            try:
                got = call(attend_chunk, ATTEND, args)
            except AssertionError as failure:
                fail(
                    f"{empty} failed ({failure}): a split of the cache can be empty; its scores "
                    "are (B, nh, T, 0), torch.logsumexp of them is -inf and softmax(...) @ v is "
                    "0, but .max/.amax of an empty row raises, so guard it or avoid it."
                )
        else:
            got = call(attend_chunk, ATTEND, args)
        expect_unmodified(before, args, ATTEND)
        o, lse = expect_pair(got, ATTEND, "o", "lse")
        want_o, want_lse = state(*args)
        expect_shape(o, want_o.shape, f"The o of `{ATTEND}`", inputs, "(B, nh, T, hs), as q")
        _lse_shape(lse, tuple(want_lse.shape), ATTEND, inputs)
        if has_nan_or_inf(o):
            fail(_nan_in_o(n, huge, inputs))
        if not close(o, want_o, *(HUGE_TOL if huge else ())):
            fail(_o_diagnosis(o, args, inputs))
        if not _same_lse(lse, want_lse):
            fail(_lse_diagnosis(lse, args, n, inputs))


def _nan_in_o(n: int, huge: bool, inputs: str) -> str:
    if n == 0:
        return (
            f"The o of `{ATTEND}` holds NaN for an empty chunk (inputs {inputs}): it has no key, "
            "so its output is 0 (and its lse -inf); 0 / 0 from a sum of no weights is NaN."
        )
    if huge:
        return (
            f"The o of `{ATTEND}` holds NaN or inf when scores reach the hundreds (inputs "
            f"{inputs}): exp of a score above 88.7 overflows float32; subtract each row's max "
            "(or the lse) before exp."
        )
    return f"The o of `{ATTEND}` holds NaN or inf (inputs {inputs}): softmax over the keys, dim=-1."


def _o_diagnosis(o, args, inputs: str) -> str:
    q, k, v = (t.double() for t in args)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, nh, T, n)
    m = s.amax(-1, keepdim=True)  # (B, nh, T, 1)
    variants = {
        f"The o of `{ATTEND}` is exp(s - max) @ v without the division by the sum of the "
        "weights: divide by exp(s - max).sum(-1) (or use exp(s - lse)).": torch.exp(s - m) @ v,
        f"The o of `{ATTEND}` has no 1/√hs scaling: scale the scores q·kᵀ by 1/√hs (hs = "
        "q.shape[-1]).": torch.softmax(s * math.sqrt(q.shape[-1]), -1) @ v,
        f"The o of `{ATTEND}` is a softmax over the queries: take it over the keys, dim=-1.": (
            torch.softmax(s, -2) @ v
        ),
    }
    return first_match(o.detach().double(), variants) or (
        f"The o of `{ATTEND}` differs from attention over the chunk (inputs {inputs}): o = "
        "softmax(q·kᵀ/√hs) @ v over the chunk's n keys."
    )


def _lse_diagnosis(lse, args, n: int, inputs: str) -> str:
    q, k, _ = (t.double() for t in args)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, nh, T, n)
    if n == 0:
        return (
            f"The lse of `{ATTEND}` is not -inf for an empty chunk (inputs {inputs}): the sum of "
            "no weights is 0 and log(0) = -inf, which gives the chunk no weight when merged."
        )
    if torch.isnan(lse.detach()).any():
        return f"The lse of `{ATTEND}` holds NaN (inputs {inputs}): lse = m + log(Σ exp(s - m))."
    m, lse_right = s.amax(-1), torch.logsumexp(s, -1)
    variants = {
        "is the row max m alone: add log(Σ exp(s - m)), lse = m + log(l).": m,
        "is log(Σ exp(s - m)) without m: add the max back, lse = m + log(l).": lse_right - m,
        "is the log-sum-exp of unscaled scores: use the scores divided by √hs, the ones the "
        "softmax used.": torch.logsumexp(s * math.sqrt(q.shape[-1]), -1),
        "is in base 2 (log2 of Σ 2^s, as a Triton kernel keeps it): use the natural log, "
        "torch.logsumexp.": lse_right / math.log(2),
        "is the sum of the weights, not its log: lse = log(Σ exp(s)).": lse_right.exp(),
    }
    why = first_match(lse.detach().double(), variants)
    return (
        f"The lse of `{ATTEND}` {why}"
        if why
        else (
            f"The lse of `{ATTEND}` differs from torch.logsumexp(q·kᵀ/√hs, -1) (inputs {inputs})."
        )
    )


# ----------------------------------------------------------------------------- merge_splits


def _split_states(q, k, v, sizes: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 ``(outputs (P, B, nh, T, hs), lses (P, B, nh, T))`` of consecutive chunks."""
    states = [
        state(q, kc, vc) for kc, vc in zip(k.split(sizes, -2), v.split(sizes, -2), strict=True)
    ]
    outputs = torch.stack([o for o, _ in states]).float()
    return outputs, torch.stack([lse for _, lse in states]).float()


def merged(outputs: torch.Tensor, lses: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact merge, in float64: softmax of the lses over the splits weighs the outputs."""
    outputs, lses = outputs.double(), lses.double()
    weights = torch.softmax(lses, 0)  # (P, B, nh, T)
    return (weights[..., None] * outputs).sum(0), torch.logsumexp(lses, 0)


@one_thread
def check_merge_splits(merge_splits: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``merge_splits(outputs, lses) -> (o, lse)``: the states ``(P, B, nh, T, hs)`` and ``(P, B,
    nh, T)`` of ``P`` chunks of one cache merge into attention over the whole cache and its lse,
    for any number of splits, empty ones (lse = -inf) anywhere, scores in the hundreds."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    cases = [([3, 4, 5], False), ([6], False), ([0, 5, 2], False), ([4, 0, 0, 3], False)]
    cases += [([1] * 8, False), ([5, 3, 7], True), ([0, 0, 4, 0], False)]
    for _ in range(3 if thorough else 0):
        sizes = [randint(gen, 0, 5) for _ in range(randint(gen, 1, 6))]
        sizes[randint(gen, 0, len(sizes) - 1)] += 1
        cases.append((sizes, False))
    for sizes, huge in cases:
        q, k, v = _inputs(gen, 1, 2, 2, sum(sizes), 8, huge)
        outputs, lses = _split_states(q, k, v, sizes)
        args = (outputs, lses)
        inputs = f"{describe(args)}, chunks of {sizes} keys"
        got = call(merge_splits, MERGE, args)
        expect_unmodified((outputs.clone(), lses.clone()), args, MERGE)
        o, lse = expect_pair(got, MERGE, "o", "lse")
        want_o, want_lse = merged(outputs, lses)
        expect_shape(o, want_o.shape, f"The o of `{MERGE}`", inputs, "(B, nh, T, hs)")
        _lse_shape(lse, tuple(want_lse.shape), MERGE, inputs)
        if has_nan_or_inf(o) or has_nan_or_inf(lse):
            fail(_merge_nan(sizes, huge, inputs))
        if not close(o, want_o, *(HUGE_TOL if huge else ())):
            fail(_merge_diagnosis(o, outputs, lses, inputs))
        if not _same_lse(lse, want_lse):
            fail(_merge_lse_diagnosis(lse, lses, inputs))


def _merge_nan(sizes: list[int], huge: bool, inputs: str) -> str:
    if huge:
        return (
            f"`{MERGE}` gives NaN or inf when the lses reach the hundreds ({inputs}): exp(lse) "
            "overflows float32 past 88.7; subtract the largest lse first, weights exp(lse_p - "
            "max) / Σ exp(lse_q - max), as FlashAttention's combine step does."
        )
    if 0 in sizes:
        return (
            f"`{MERGE}` gives NaN when a split is empty ({inputs}): its lse is -inf, and exp(-inf "
            "- (-inf)) is NaN; subtract the max over all splits (finite as long as one split has "
            "keys), or start a running merge from the first non-empty split."
        )
    return f"`{MERGE}` gives NaN or inf ({inputs}): weights exp(lse_p - max), divided by their sum."


def _merge_diagnosis(o, outputs, lses, inputs: str) -> str:
    outputs, lses = outputs.double(), lses.double()
    variants = {
        f"`{MERGE}` averages the outputs: chunks carry different total weights, so weigh each by "
        "exp(lse_p - lse), lse = logsumexp over the splits.": outputs.mean(0),
        f"`{MERGE}` adds the outputs: weigh each by exp(lse_p - lse), weights that sum to 1.": (
            outputs.sum(0)
        ),
        f"`{MERGE}` weighs the outputs by exp(lse_p) without dividing by their sum: divide by "
        "Σ exp(lse_q), i.e. use exp(lse_p - logsumexp(lses)).": (
            (lses.exp()[..., None] * outputs).sum(0)
        ),
        f"`{MERGE}` takes a softmax of the lses over the wrong dimension: the weights run over "
        "the splits, dim=0.": (torch.softmax(lses, -1)[..., None] * outputs).sum(0),
        f"`{MERGE}` keeps the output of the split with the largest lse: every split contributes, "
        "weighted by exp(lse_p - lse).": torch.gather(
            outputs, 0, lses.argmax(0)[None, ..., None].expand(1, *outputs.shape[1:])
        )[0],
    }
    return first_match(o.detach().double(), variants) or (
        f"`{MERGE}` does not give attention over the whole cache ({inputs}): o = Σ_p exp(lse_p - "
        "lse) · o_p with lse = logsumexp over the splits of lse_p."
    )


def _merge_lse_diagnosis(lse, lses, inputs: str) -> str:
    lses = lses.double()
    variants = {
        "is the largest split's lse: the total is logsumexp over the splits, which adds every "
        "split's mass.": lses.amax(0),
        "is the sum of the splits' lses: sums of weights add, so their logs combine by "
        "logsumexp, not by +.": lses.sum(0),
        "is the mean of the splits' lses: use torch.logsumexp(lses, 0).": lses.mean(0),
    }
    why = first_match(lse.detach().double().nan_to_num(), variants)
    return (
        f"The lse of `{MERGE}` {why}"
        if why
        else (f"The lse of `{MERGE}` differs from torch.logsumexp(lses, 0) ({inputs}).")
    )


# -------------------------------------------------------------------------- split_kv_decode


def layouts(L: int, P: int) -> dict[str, list[int]]:
    """How learner code may cut ``L`` keys into ``P`` splits: FlashDecoding's ``ceil(L / P)``
    keys each (the last ones shorter or empty) and ``torch.tensor_split``'s even sizes."""
    size = -(-L // P)
    ceil = [max(0, min(size, L - i * size)) for i in range(P)]
    even = [L // P + (1 if i < L % P else 0) for i in range(P)]
    return {"ceil": ceil, "even": even}


@one_thread
def check_split_kv_decode(
    split_kv_decode: Callable, *, seed: int = 0, thorough: bool = False
) -> None:
    """``split_kv_decode(q, k, v, num_splits)``: ``q (B, nh, T, hs)`` over ``k, v (B, nh, L, hs)``
    cut into ``num_splits`` chunks whose states are merged: attention over the whole cache, for
    any number of splits, more splits than keys included."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    cases = [(10, 1, False), (10, 3, False), (10, 4, False), (5, 8, False), (7, 7, False)]
    cases += [(1, 3, False), (12, 5, True)]
    for _ in range(3 if thorough else 0):
        L = randint(gen, 1, 20)
        cases.append((L, randint(gen, 1, L + 3), False))
    for L, P, huge in cases:
        q, k, v = _inputs(gen, randint(gen, 1, 2), 2, 1, L, 8, huge)
        args = (q, k, v, P)
        before = tuple(t.clone() for t in args[:3])
        out = call(split_kv_decode, SPLIT, args)
        expect_unmodified(before, args[:3], SPLIT)
        out = expect_tensor(out, SPLIT)
        inputs = describe(args)
        expect_shape(out, q.shape, f"The output of `{SPLIT}`", inputs, "(B, nh, T, hs), as q")
        want = F.scaled_dot_product_attention(q.double(), k.double(), v.double())
        if close(out, want, *(HUGE_TOL if huge else ())):
            continue
        if has_nan_or_inf(out):
            fail(
                f"`{SPLIT}` gives NaN or inf for {L} keys in {P} splits: "
                + (
                    "with more splits than keys some are empty; each must give o = 0, lse = "
                    "-inf, and the merge must survive them (check attend_chunk and merge_splits)."
                    if P > L
                    else "scores in the hundreds overflow exp in float32: subtract the max."
                )
            )
        fail(_split_diagnosis(out, q, k, v, L, P))


def _split_diagnosis(out, q, k, v, L: int, P: int) -> str:
    where = f"`{SPLIT}` with {L} keys in {P} splits"
    variants = {}
    for sizes in layouts(L, P).values():
        outputs, lses = _split_states(q, k, v, sizes)
        outputs = outputs.double()
        lengths = torch.tensor(sizes, dtype=torch.float64)[:, None, None, None, None]
        variants |= {
            f"{where} averages the splits' outputs: weigh each by exp(lse_p - lse), not 1/P.": (
                outputs[lengths.flatten() > 0].mean(0)
            ),
            f"{where} weighs each split by its number of keys: a split's weight is its share of "
            "the softmax's mass, exp(lse_p - lse), which depends on its scores.": (
                (lengths / L * outputs).sum(0)
            ),
        }
    size = L // P
    if size and size * P < L:
        variants[
            f"{where} drops the last {L - size * P} key(s): with chunks of L // P keys the "
            "remainder is lost; use ceil(L / P) keys per split (the last ones shorter, maybe "
            "empty) or torch.tensor_split."
        ] = F.scaled_dot_product_attention(
            q.double(), k[..., : size * P, :].double(), v[..., : size * P, :].double()
        )
    return first_match(out.detach().double(), variants) or (
        f"{where} differs from attention over the whole cache: every key in exactly one split, "
        "each split's (o, lse) from attend_chunk, merged by merge_splits."
    )
