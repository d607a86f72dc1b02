"""Checks for notebook 05: heads one at a time vs all at once, FLOPs, and the quiz.

Shape legend: ``B`` batch, ``T`` sequence length, ``C`` = d_model, ``nh`` heads,
``hs`` = C // nh (head size).

Oracles are PyTorch's own: the output of ``TorchMultiHeadAttention`` (``F.multi_head_attention_
forward``), FLOPs from ``torch.utils.flop_counter.FlopCounterMode``, and operation counts from a
``TorchDispatchMode`` (:class:`autograder.tools.timing.OpCounter`). Nothing is graded by timing.
Known-wrong outputs are the oracle run on altered weights (transposed, re-indexed, zeroed);
known-wrong FLOP counts are sums of the oracle's own per-operation counts.
"""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Callable

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from autograder.tools.modules import TorchMultiHeadAttention
from autograder.tools.timing import OpCounter
from autograder.torch_helpers import record_torch_calls

from . import operators
from ._core import (
    by_arithmetic,
    call,
    calls_packaged_mha,
    close,
    expect_dtype,
    expect_shape,
    expect_tensor,
    expect_unmodified,
    fail,
    first_match,
    make_generator,
    not_written,
    randint,
    randn,
    wide_draws,
)

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
    "autograder.tools.nb06_gpu.attention_flops": (
        "part of attention_flops: the 4·B·T²·C of the attention products"
    ),
    "autograder.tools.nb09_deck.DECK": (
        "quiz q1 and q3 in words, and the 5·nh + 1 and 6 of the matmul predictions"
    ),
    "autograder.tools.nb09_flashcards.deck_markdown": "prints DECK",
    "autograder.tools.nb09_flashcards.Schedule": "holds DECK (its default deck)",
    "autograder.tools.nb09_flashcards.flashcard_widget": "holds DECK (its default deck)",
}

SEQ, PAR, FLOPS = "mha_sequential", "mha_parallel", "attention_flops"
_GRAD_MODES = {"no_grad": torch.no_grad, "inference_mode": torch.inference_mode}


class _WatchedMHA(TorchMultiHeadAttention):
    """PyTorch's MHA that counts how often it is called whole (the learner must not)."""

    calls = 0

    def forward(self, *args, **kwargs):
        self.calls += 1
        return super().forward(*args, **kwargs)


def _make_mha(gen, C, nh, bias=True, dtype=torch.float64) -> _WatchedMHA:
    """An MHA with weights drawn from ``gen``; biases large enough to matter."""
    mha = _WatchedMHA(C, nh, bias=bias).to(dtype)
    with torch.no_grad():
        for lin in (mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj):
            lin.weight.copy_(randn(gen, C, C, dtype=dtype) / math.sqrt(C))
            if bias:
                lin.bias.copy_(0.5 * randn(gen, C, dtype=dtype))
    return mha


def _oracle(mha, x) -> torch.Tensor:
    with torch.no_grad():
        return TorchMultiHeadAttention.forward(mha, x)[0]  # (B, T, C), not counted as a call


class _HeadBatches(TorchDispatchMode):
    """The batch sizes of the batched products (bmm, baddbmm) and fused attention calls seen."""

    def __init__(self):
        super().__init__()
        self.batches: set[int] = set()

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name.removeprefix("aten::")
        first = args[0] if args else None
        if name in ("bmm", "baddbmm") and isinstance(
            args[-1 if name == "bmm" else 1], torch.Tensor
        ):
            self.batches.add(int(args[-1 if name == "bmm" else 1].shape[0]))
        elif "scaled_dot_product" in name and isinstance(first, torch.Tensor) and first.dim() == 4:
            self.batches.add(int(first.shape[0] * first.shape[1]))
        return func(*args, **(kwargs or {}))


def _run(
    fn: Callable, name: str, x: torch.Tensor, mha: _WatchedMHA, heads_rule: bool = True
) -> torch.Tensor:
    """Call the learner's ``fn(x, mha)``; fail if it hands the work to the module itself."""
    __tracebackhide__ = True
    mha.calls = 0
    before = [t.clone() for t in mha.state_dict().values()]
    with record_torch_calls() as names, _HeadBatches() as seen:
        out = call(fn, name, (x, mha))
    expect_unmodified(before, list(mha.state_dict().values()), name)  # its oracle reads mha
    if mha.calls or calls_packaged_mha(names):
        fail(
            f"`{name}` calls `mha(x)` (or F.multi_head_attention_forward) itself: compute the "
            "result from mha.q_proj, k_proj, v_proj and out_proj instead."
        )
    all_at_once = x.shape[0] * mha.num_heads in seen.batches and mha.num_heads > 1
    if heads_rule and name == SEQ and all_at_once:
        fail(
            f"`{SEQ}` computes all heads in one batched product (batch B·nh), as mha(x) does: "
            "loop over the heads (for h in range(mha.num_heads)) with one slice of the weights "
            "per head."
        )
    if isinstance(out, tuple | list):
        fail(f"`{name}` returned a {type(out).__name__}: return only the output tensor (B, T, C).")
    return expect_tensor(out, name, "the output tensor (B, T, C)")


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
    return _oracle(twin, x)


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
    right = _oracle(mha, x)
    outputs = {why: _altered(mha, x, **change) for why, change in changes.items()}
    return {why: out for why, out in outputs.items() if not close(out, right, 1e-4, 1e-3)}


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
        mha = _make_mha(gen, C, nh, bias)
        x = randn(gen, B, T, C)  # (B, T, C)
        out = _run(fn, name, x, mha)
        inputs = f"x {tuple(x.shape)}, nh={nh}, bias={bias}"
        expect_shape(out, (B, T, C), f"The output of `{name}`", inputs)
        if close(out, _oracle(mha, x)):
            continue
        why = first_match(out, _variants(mha, x))
        fail(
            f"`{name}` ({inputs}) {why}"
            if why
            else f"`{name}` differs from mha(x)[0] for {inputs}: {extra}."
        )
    mha = _make_mha(gen, 8, 2, dtype=torch.float32)
    out = _run(fn, name, randn(gen, 2, 3, 8, dtype=torch.float32), mha)
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
        mha = _make_mha(gen, 16, nh)
        x = randn(gen, 2, 5, 16)  # (B, T, C)
        with _GRAD_MODES[grad_mode](), OpCounter() as counter, _HeadBatches() as seen:
            out = _run(fn, name, x, mha, heads_rule=False)
        counter.all_heads_at_once = 2 * nh in seen.batches
        if not close(out, _oracle(mha, x)):  # a count means nothing for a wrong result
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


# ------------------------------------------------------------------------------ FLOPs


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
        out = _run(fn, name, x, mha)
    if not close(out, _oracle(mha, x)):  # a count means nothing for a wrong result
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
        mha = _make_mha(gen, C, nh)
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


# ------------------------------------------------------------------------- quiz answers

_SEQUENTIAL_16 = {
    81: "",
    80: "count the output projection too: it runs once, after the loop",
    96: "the output projection runs once, not once per head",
    97: "the output projection runs once, not once per head",
    65: "each head needs two attention products, q @ kᵀ and weights @ v",
    49: "each head also needs its two attention products, q @ kᵀ and weights @ v",
    33: "each head also needs its own three projections, q, k and v",
}
_PARALLEL_6 = {
    6: "",
    4: "the batched version also has two attention products, q @ kᵀ and weights @ v",
    5: "count q @ kᵀ and weights @ v as two products (one fused SDPA call would replace both)",
    81: "the batched version has no loop: its count does not depend on nh",
    96: "the batched version has no loop: its count does not depend on nh",
}


def _as_int(value, name) -> int:
    __tracebackhide__ = True
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or value != int(value):
        fail(f"Set `{name}` to a whole number (got {value!r}).")
    return int(value)


def check_predicted_matmul_counts(
    sequential, parallel, *, seed: int = 0, thorough: bool = False
) -> None:
    """The predicted matmul counts at nh = 16: 5·nh + 1 for the loop, 6 for the batched form."""
    __tracebackhide__ = True
    for value, name, key, right in (
        (sequential, "answer_matmuls_sequential", _SEQUENTIAL_16, 81),
        (parallel, "answer_matmuls_parallel", _PARALLEL_6, 6),
    ):
        got = _as_int(value, name)
        if got != right:
            why = key.get(got, "count one per projection call and one per @, as in the diagram")
            fail(f"`{name}` = {got} is not the count at nh = 16: {why}.")


_QUIZ = {
    "q1": (
        "c",
        {
            "a": "nh full-size passes would cost nh times more, but the heads split C: each works "
            "on hs = C / nh features",
            "b": "no square root appears: the projections do not depend on nh and the attention "
            "products sum to the same 4·B·T²·C",
            "d": "splitting C into nh heads re-arranges the same products; it removes none of them",
        },
    ),
    "q2": (
        "b",
        {
            "a": "FlopCounterMode measured the same FLOPs for both versions",
            "c": "the Python loop costs the same wherever the tensors live; what differs is how "
            "much parallel hardware one small head-sized product leaves idle",
            "d": "both versions read exactly the same weights, with no copy",
        },
    ),
    "q3": (
        "a",
        {
            "b": "softmax is not linear, and linearity is not what lets heads run side by side",
            "c": "each head computes its own attention weights from its own slices",
            "d": "the output projection mixes all heads, after the concatenation",
        },
    ),
    "q4": (
        "d",
        {
            "a": "one cold run per version measures a single moment of a shared machine",
            "b": "synchronising matters on a GPU, but this was a CPU; the missing warm-up and "
            "repeats are the problem",
            "c": "averaging two cold runs keeps both problems: no warm-up and no repeats",
        },
    ),
}


def check_quiz_answer(question: str, answer, *, seed: int = 0, thorough: bool = False) -> None:
    """``answer`` (one letter) is the right choice for quiz ``question`` (``"q1"``, ...)."""
    __tracebackhide__ = True
    right, wrong = _QUIZ[question]
    name = f"answer_{question}"
    letter = answer.strip(" ().").lower() if isinstance(answer, str) else None
    if letter not in ("a", "b", "c", "d"):
        unset = not_written if answer is None else fail
        unset(f'Set `{name}` to one letter as a string, for example "a" (got {answer!r}).')
    if letter != right:
        fail(f"`{name}` = {letter!r} is not the best choice: {wrong[letter]}.")
