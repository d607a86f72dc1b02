"""Checks for notebook 05: heads one at a time vs all at once, their values and their loops.

Shape legend: ``B`` batch, ``T`` sequence length, ``C`` = d_model, ``nh`` heads,
``hs`` = C // nh (head size).

Oracles are PyTorch's own: the output of ``TorchMultiHeadAttention`` (``F.multi_head_attention_
forward``), and operation counts from a ``TorchDispatchMode``
(:class:`autograder.tools.timing.OpCounter`). Nothing is graded by timing. Known-wrong outputs are
the oracle run on altered weights (transposed, re-indexed, zeroed). The FLOPs checks are in
:mod:`.nb05_flops`, the quiz in :mod:`.nb05_quiz`.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import torch

from autograder.tools.timing import OpCounter

from . import _parallel, operators
from ._core import (
    LOOSE,
    close,
    expect_dtype,
    expect_shape,
    fail,
    first_match,
    make_generator,
    randint,
    randn,
)
from ._parallel import PAR, SEQ

#: The ATen operators learner code may run under these checks:
#: a head may be computed with PyTorch's attention.
OPERATORS = operators.DEFAULT | operators.SDPA


#: Learner-importable names that would compute this notebook's graded answers. In the grading
#: sandbox of any notebook whose test cells use these checks, they keep their names but raise.
ANSWERS_IN_TOOLS: dict[str, str] = {
    "autograder.tools.nb05_parallel_heads.loop_heads": (
        "mha_sequential: its two cells and its half of the same-FLOPs cell"
    ),
    "autograder.tools.nb05_parallel_heads.batched_heads": (
        "mha_parallel: its two cells and its half of the same-FLOPs cell"
    ),
    "autograder.tools.nb05_parallel_heads.fused_heads": (
        "mha_parallel (SDPA is allowed there), as batched_heads does"
    ),
    "autograder.tools.nb05_parallel_heads.IMPLEMENTATIONS": (
        "holds loop_heads, batched_heads and fused_heads"
    ),
    "autograder.tools.nb05_parallel_heads._split": "part of mha_parallel: the head split",
}

_GRAD_MODES = {"no_grad": torch.no_grad, "inference_mode": torch.inference_mode}


# ----------------------------------------------------------------------- equal to mha(x)[0]


def _altered(mha, x, **changes) -> torch.Tensor:
    """The oracle on a copy of ``mha`` whose projections get ``changes[name] = (weight, bias)``."""
    twin = copy.deepcopy(mha)
    with torch.no_grad():
        for proj, (weight, bias) in changes.items():
            lin = getattr(twin, proj)
            lin.weight.copy_(weight)
            if lin.bias is not None:
                lin.bias.copy_(bias)
    return _parallel.oracle(twin, x)


def _wb(lin, rows=None, scale=1.0, bias=True):
    """(weight, bias) of ``lin``: rows re-indexed by ``rows``, scaled, bias kept or zeroed."""
    w, b = lin.weight, lin.bias
    if rows is not None:
        w, b = w[rows], None if b is None else b[rows]
    if b is not None:
        b = scale * b if bias else torch.zeros_like(b)
    return scale * w, b


def _qkv(mha, **how) -> dict:
    """The same change applied to the q, k and v projections."""
    return {p: _wb(getattr(mha, p), **how) for p in ("q_proj", "k_proj", "v_proj")}


def _variants(mha, x) -> dict[str, torch.Tensor]:
    """Diagnosis -> output of a classic mistake, computed by the oracle on altered weights."""
    C, nh = x.shape[-1], mha.num_heads
    hs = C // nh
    q, k, o = mha.q_proj, mha.k_proj, mha.out_proj
    strided = torch.cat([torch.arange(h, C, nh) for h in range(nh)])  # head h: features h::nh
    shifted = torch.cat([torch.arange(h, h + hs) for h in range(nh)])  # head h starts at h
    reversed_heads = torch.arange(C).view(nh, hs).flip(0).reshape(C)  # heads concatenated h..0
    transposed = {
        p: (getattr(mha, p).weight.T, getattr(mha, p).bias) for p in ("q_proj", "k_proj", "v_proj")
    }
    owner = "head h owns rows h*hs:(h+1)*hs of each projection weight"
    changes = {
        f"takes every nh-th feature (h::nh) for head h: {owner}, one consecutive block.": _qkv(
            mha, rows=strided
        ),
        f"starts head h at feature h instead of h*hs: {owner}.": _qkv(mha, rows=shifted),
        "uses columns of the projection weights (weight[:, h*hs:(h+1)*hs], or x @ weight "
        "without .T): nn.Linear stores weight as (out, in), so take rows weight[h*hs:(h+1)*hs] "
        "and compute F.linear(x, w_h, b_h).": transposed,
        "is the concatenated heads without the output projection: finish with mha.out_proj(...).": {
            "out_proj": (torch.eye(C, dtype=x.dtype), _wb(o, bias=False)[1])
        },
        "divides the scores by √C: each head's dot products have hs = C // nh terms, so divide "
        "by √hs.": {"q_proj": _wb(q, scale=math.sqrt(hs / C))},
        "does not scale the scores: divide q @ kᵀ by √hs (hs = C // nh) before the softmax.": {
            "q_proj": _wb(q, scale=math.sqrt(hs))
        },
        "concatenates the heads in the wrong order: head h's output must land in features "
        "h*hs:(h+1)*hs, the order out_proj expects.": {
            "out_proj": (o.weight[:, reversed_heads], o.bias)
        },
        "uses the keys as values: v comes from v_proj's slice.": {"v_proj": _wb(k)},
    }
    if o.bias is not None:
        changes.update(
            {
                "leaves out the biases of the q/k/v slices: slice them too, "
                "bias[h*hs:(h+1)*hs].": _qkv(mha, bias=False),
                "misses the output projection's bias: use mha.out_proj(...) or F.linear with "
                "out_proj.bias.": {"out_proj": _wb(o, bias=False)},
                "adds out_proj.bias once per head: when each head is projected separately, add the "
                "bias once, after summing the heads.": {"out_proj": (o.weight, nh * o.bias)},
            }
        )
    right = _parallel.oracle(mha, x)
    outputs = {why: _altered(mha, x, **change) for why, change in changes.items()}
    return {why: out for why, out in outputs.items() if not close(out, right, *LOOSE)}


def _value_cases(gen, thorough):
    """``(B, T, C, nh, bias)``: bias and none, nh = 1, nh = C, batch 1, T = 1, then random."""
    yield from [
        (2, 5, 12, 3, True),
        (2, 4, 12, 3, False),
        (1, 6, 8, 1, True),
        (2, 3, 6, 6, True),
        (1, 1, 8, 2, False),
        (3, 7, 16, 4, True),
    ]
    for _ in range(6 if thorough else 1):
        nh, hs = randint(gen, 1, 6), randint(gen, 1, 6)
        yield randint(gen, 1, 3), randint(gen, 1, 10), nh * hs, nh, bool(randint(gen, 0, 1))


def _check_values(fn: Callable, name: str, seed: int, thorough: bool, extra: str) -> None:
    __tracebackhide__ = True
    gen = make_generator(seed)
    for B, T, C, nh, bias in _value_cases(gen, thorough):
        mha = _parallel.make_mha(gen, C, nh, bias)
        x = randn(gen, B, T, C)  # (B, T, C)
        out = _parallel.run(fn, name, x, mha)
        inputs = f"x {tuple(x.shape)}, nh={nh}, bias={bias}"
        expect_shape(out, (B, T, C), f"The output of `{name}`", inputs)
        if close(out, _parallel.oracle(mha, x)):
            continue
        why = first_match(out, _variants(mha, x))
        fail(
            f"`{name}` ({inputs}) {why}"
            if why
            else f"`{name}` differs from mha(x)[0] for {inputs}: {extra}."
        )
    mha = _parallel.make_mha(gen, 8, 2, dtype=torch.float32)
    out = _parallel.run(fn, name, randn(gen, 2, 3, 8, dtype=torch.float32), mha)
    expect_dtype(out, torch.float32, f"The output of `{name}`")


def check_mha_sequential_values(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``mha_sequential(x, mha)`` equals ``mha(x)[0]``: bias or not, nh = 1, nh = C, batch 1."""
    __tracebackhide__ = True
    _check_values(
        fn,
        SEQ,
        seed,
        thorough,
        "for each head slice rows h*hs:(h+1)*hs of q/k/v weights and biases, attend "
        "with scores / √hs, concatenate the heads in order, then apply mha.out_proj",
    )


def check_mha_parallel_values(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``mha_parallel(x, mha)`` equals ``mha(x)[0]``: bias or not, nh = 1, nh = C, batch 1."""
    __tracebackhide__ = True
    _check_values(
        fn,
        PAR,
        seed,
        thorough,
        "split with .view(B, T, nh, hs).transpose(1, 2) (view alone scrambles tokens), "
        "merge with .transpose(1, 2).reshape(B, T, C), and scale by √hs",
    )


# ------------------------------------------------------------- one at a time vs all at once


def _big_op_counts(fn, name, gen, nhs, grad_mode) -> tuple[list[int], list[OpCounter]]:
    """Matmul-family plus fused-attention calls of ``fn`` at each nh (C = 16, B = 2, T = 5).

    Each counter also says whether one batched product covered all B·nh heads at once.
    """
    __tracebackhide__ = True
    counters = []
    for nh in nhs:
        mha = _parallel.make_mha(gen, 16, nh)
        x = randn(gen, 2, 5, 16)  # (B, T, C)
        with _GRAD_MODES[grad_mode](), OpCounter() as counter, _parallel.HeadBatches() as seen:
            out = _parallel.run(fn, name, x, mha, heads_rule=False)
        counter.all_heads_at_once = 2 * nh in seen.batches
        if not close(out, _parallel.oracle(mha, x)):  # a count means nothing for a wrong result
            fail(f"`{name}` is wrong for nh={nh}: make it equal mha(x)[0] first (the test above).")
        counters.append(counter)
    if all(c.big_ops == 0 for c in counters):  # no product at all: every op is evidence
        return [c.total for c in counters], counters
    return [c.big_ops for c in counters], counters


def _count_cases(thorough):
    modes = ("no_grad", "inference_mode") if thorough else ("no_grad",)
    return (2, 4, 8, 16) if thorough else (2, 4, 8), modes


def _listing(nhs, counts) -> str:
    return ", ".join(f"{c} at nh={nh}" for nh, c in zip(nhs, counts, strict=True))


def check_mha_sequential_loops(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``mha_sequential`` runs at least one more matrix product per extra head (it loops)."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    nhs, modes = _count_cases(thorough)
    for mode in modes:
        counts, counters = _big_op_counts(fn, SEQ, gen, nhs, mode)
        steps = zip(nhs, nhs[1:], counts, counts[1:], strict=False)
        if all(c1 - c0 >= n1 - n0 for n0, n1, c0, c1 in steps):
            if any(c.all_heads_at_once for c in counters):  # extra products cannot make up
                fail(
                    f"`{SEQ}` computes all heads in one batched product (batch B·nh): loop over "
                    "the heads (for h in range(mha.num_heads)) with one slice of the weights per "
                    "head."
                )
            continue
        if len(set(counts)) == 1:
            fail(
                f"`{SEQ}` runs {counts[0]} matrix products (or fused attention calls) whatever "
                "the number of heads: it computes all heads at once; loop over the heads "
                "(for h in range(mha.num_heads)) with one slice of the weights per head."
            )
        fail(
            f"`{SEQ}` ran {_listing(nhs, counts)} matrix products: it should take at least one "
            "more per extra head, each head projected and attended on its own inside the loop."
        )


def check_mha_parallel_batches(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``mha_parallel`` takes fewer than one more matrix product per extra head (no loop)."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    nhs, modes = _count_cases(thorough)
    for mode in modes:
        counts, _ = _big_op_counts(fn, PAR, gen, nhs, mode)
        steps = zip(nhs, nhs[1:], counts, counts[1:], strict=False)
        if all(c1 - c0 < n1 - n0 for n0, n1, c0, c1 in steps):  # shapes may shift a few ops
            continue
        fail(
            f"`{PAR}` ran {_listing(nhs, counts)} matrix products: the count grows with the "
            "heads, so something still runs once per head (a for loop, a list comprehension, "
            "torch.split or chunk); keep the heads as dimension 1 of (B, nh, T, hs) and use one "
            "batched @ for all of them."
        )
