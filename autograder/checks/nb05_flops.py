"""Checks for notebook 05, FLOPs: ``attention_flops`` and the same FLOPs for both versions.

Shape legend: ``B`` batch, ``T`` sequence length, ``C`` = d_model, ``nh`` heads, ``hs`` = C // nh.

The oracle is ``torch.utils.flop_counter.FlopCounterMode``: what one forward of PyTorch's module
measures (on the meta device), and what the learner's two versions (:mod:`._parallel`) measure
while they run. Known-wrong FLOP counts are sums of the oracle's own per-operation counts.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from autograder.tools.modules import TorchMultiHeadAttention
from autograder.torch_helpers import record_torch_calls

from . import _parallel, operators
from ._core import by_arithmetic, call, close, fail, make_generator, randint, randn, wide_draws
from ._parallel import PAR, SEQ

#: The ATen operators learner code may run under these checks:
#: a head may be computed with PyTorch's attention.
OPERATORS = operators.DEFAULT | operators.SDPA

#: Learner-importable names that would compute these answers. In the grading sandbox of any
#: notebook whose test cells use these checks, they keep their names but raise.
ANSWERS_IN_TOOLS: dict[str, str] = {
    "autograder.tools.nb05_parallel_heads.loop_heads": "mha_sequential: its half of this cell",
    "autograder.tools.nb05_parallel_heads.batched_heads": "mha_parallel: its half of this cell",
    "autograder.tools.nb05_parallel_heads.fused_heads": (
        "mha_parallel (SDPA is allowed there), as batched_heads does"
    ),
    "autograder.tools.nb05_parallel_heads.IMPLEMENTATIONS": (
        "holds loop_heads, batched_heads and fused_heads"
    ),
    "autograder.tools.nb06_gpu.attention_flops": (
        "part of attention_flops: the 4·B·T²·C of the attention products"
    ),
}

FLOPS = "attention_flops"


def _measured_flops(B: int, T: int, C: int, nh: int) -> tuple[int, int, int]:
    """(total, projections, attention products) of one MHA forward, by FlopCounterMode on meta."""
    mha = TorchMultiHeadAttention(C, nh, bias=False).to("meta")
    counter = FlopCounterMode(display=False)
    with counter:
        mha(torch.empty(B, T, C, device="meta"))
    by_op = {str(op).rsplit(".", 1)[-1]: n for op, n in counter.get_flop_counts()["Global"].items()}
    proj = by_op.get("mm", 0) + by_op.get("addmm", 0)
    attn = by_op.get("bmm", 0) + by_op.get("baddbmm", 0)
    return counter.get_total_flops(), proj, attn


def _flop_variants(B, nh, proj, attn) -> dict[str, float]:
    """Diagnosis -> the count a classic mistake gives, built from the oracle's parts."""
    return {
        "counts 1 FLOP per multiply-add: FlopCounterMode counts 2 (a multiply and an add), so "
        "double every term.": (proj + attn) / 2,
        "leaves out the attention products: q @ kᵀ and weights @ v cost 2·B·T²·C FLOPs each, "
        "summed over the heads.": proj,
        "leaves out the projections: q, k, v and out each cost 2·B·T·C·C FLOPs.": attn,
        "misses the output projection: there are four C×C projections, q, k, v and out.": proj
        * 3
        / 4
        + attn,
        "counts only one of the two attention products: q @ kᵀ and weights @ v cost "
        "2·B·T²·C FLOPs each.": proj + attn / 2,
        "counts each head at the full width C: a head works on hs = C // nh features, so "
        "the heads together cost what one head of width C costs.": proj + nh * attn,
        "counts the attention of a single head: multiply a head's cost by nh (or use C "
        "instead of hs).": proj + attn / nh,
        "counts the projections of one head only: each projection is C×C in total.": proj / nh
        + attn,
        "leaves out the batch: every term is proportional to B.": (proj + attn) / B,
    }


def _flop_cases(gen, thorough):
    """``(B, T, C, nh)``: one where every mistake gives its own count (first), the notebook's
    size, GPT-2 small, nh = 1, nh = C, T = 1, then random ones."""
    yield from [
        (3, 7, 12, 4),
        (2, 128, 512, 8),
        (8, 1024, 768, 12),
        (1, 1, 8, 1),
        (1, 5, 6, 6),
        (4, 64, 64, 64),
    ]
    for _ in range(8 if thorough else 2):
        nh = randint(gen, 1, 16)
        yield randint(gen, 1, 16), randint(gen, 1, 4096), nh * randint(gen, 1, 128), nh


def check_attention_flops(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``attention_flops(B, T, C, nh)`` equals what FlopCounterMode measures for one forward."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    wide = wide_draws(seed, thorough, 3, (1, 64), (1, 65536), (1, 16), (1, 64))  # B, T, nh, hs
    for B, T, C, nh in [*_flop_cases(gen, thorough), *((b, t, n * h, n) for b, t, n, h in wide)]:
        args = (B, T, C, nh)
        with record_torch_calls() as names:
            got = call(fn, FLOPS, args)
        total, proj, attn = _measured_flops(*args)
        where = f"`attention_flops{args}`"
        if isinstance(got, bool) or not isinstance(got, numbers.Real):
            fail(f"{where} returned {type(got).__name__}: return a Python int.")
        by_arithmetic(names, FLOPS)  # after the type: a tensor result is told to return an int
        if got == total and not isinstance(got, numbers.Integral):
            fail(
                f"{where} returned a {type(got).__name__}: return an int (use *, + and //, "
                "not /, or wrap the result in int())."
            )
        if got == total:
            continue
        why = next(
            (
                w
                for w, v in _flop_variants(B, nh, proj, attn).items()
                if v != total and math.isclose(got, v, rel_tol=1e-9)
            ),
            None,
        )
        fail(
            f"{where} = {got:,} but FlopCounterMode measures {total:,}: "
            + (
                f"it {why}"
                if why
                else "add 2·B·T·C·C for each of the four projections and "
                "2·B·T²·C for each of the two attention products."
            )
        )


def _learner_flops(fn, name, mha, x) -> int:
    __tracebackhide__ = True
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), sdpa_kernel([SDPBackend.MATH]), counter:  # fused CPU kernels count 0
        out = _parallel.run(fn, name, x, mha)
    if not close(out, _parallel.oracle(mha, x)):  # a count means nothing for a wrong result
        fail(f"`{name}` is wrong for nh={mha.num_heads}: make it equal mha(x)[0] first.")
    return counter.get_total_flops()


def check_same_flops(
    sequential: Callable, parallel: Callable, *, seed: int = 0, thorough: bool = False
) -> None:
    """Both versions do exactly the matmul FLOPs of ``mha(x)`` itself (FlopCounterMode)."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    # hs >= 2: with hs = 1 einsum turns a product into a multiplication, which counts no FLOPs
    cases = [(2, 6, 16, 4)] + ([(1, 9, 24, 6), (3, 4, 8, 4)] if thorough else [])
    for B, T, C, nh in cases:
        mha = _parallel.make_mha(gen, C, nh)
        x = randn(gen, B, T, C)  # (B, T, C)
        expected, proj, _ = _measured_flops(B, T, C, nh)
        for fn, name in ((sequential, SEQ), (parallel, PAR)):
            got = _learner_flops(fn, name, mha, x)
            if got == expected:
                continue
            if got == expected + (nh - 1) * proj * 3 // 4:
                fail(
                    f"`{name}` computes the full q/k/v projections for every head and slices "
                    f"afterwards ({got:,} FLOPs instead of {expected:,}): slice the weights "
                    "first, so each head's product is only (B, T, C) @ (C, hs)."
                )
            fail(
                f"`{name}` does {got:,} matmul FLOPs where mha(x) does {expected:,} (B={B}, "
                f"T={T}, C={C}, nh={nh}): both versions do the same arithmetic, so look for "
                "work repeated per head or products computed and not used."
            )
