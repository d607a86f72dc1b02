"""Checks for notebook 06's backward pass: ``tiled_attention_backward``, FlashAttention-2 style.

Shape legend: ``B`` batch, ``nh`` heads, ``T`` query length, ``S`` key/value length,
``hs`` head size; q, o and dO are ``(B, nh, T, hs)``, k and v ``(B, nh, S, hs)``, the saved
log-sum-exp ``(B, nh, T)``.

The learner's function gets ``(q, k, v, o, lse, do)`` and returns ``(dq, dk, dv)``. The oracle is
autograd through ``F.scaled_dot_product_attention`` in float64 (:mod:`._attention_grads`), which
also gives ``o`` and ``lse``. Causal attention is aligned bottom-right with ``S >= T``. A wrong
answer is compared with the closed forms of the classic mistakes, then the learner's function is
called again on easier inputs (whole blocks, a square causal problem, one block) to say which
part of the loop is at fault. Every call is measured on the operators that ran
(:mod:`.measure`: in the grader, the kernel's record as recomputed there): an operator of
PyTorch's attention, or one autograd's engine ran (a backward pass however it was started),
refuses any cell; the memory rule is the forward's, every tensor alive at once counted.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from autograder.torch_helpers import one_thread

from ._attention_grads import Grads, forward, gradients, variants
from ._core import (
    CheckFailure,
    call,
    describe,
    expect_shape,
    expect_tensor,
    expect_unmodified,
    fail,
    few_blocks,
    has_nan_or_inf,
    make_generator,
    randint,
)
from .measure import Created, Measured, measure

#: Learner-importable names that would compute the gradients: autograd through either gives them
#: (the by-hand cell refuses autograd too). In the grading sandbox they keep their names but raise.
ANSWERS_IN_TOOLS: dict[str, str] = {
    "autograder.tools.nb06_gpu_timing.naive_attention": "the backward cells, through autograd",
    "autograder.tools.nb06_gpu_timing.sdpa": "the backward cells, through autograd",
}

NAME = "tiled_attention_backward"
_TOL = {torch.float32: 1e-4, torch.float64: 1e-4}
_GRADS = ("dQ", "dK", "dV")


def _args(gen, B, nh, T, S, hs, causal, dtype=torch.float32) -> tuple[torch.Tensor, ...]:
    """``(q, k, v, o, lse, do)`` in ``dtype``: random inputs and what the forward saved."""
    q, k, v = (torch.randn(B, nh, n, hs, generator=gen, dtype=torch.float64) for n in (T, S, S))
    do = torch.randn(B, nh, T, hs, generator=gen, dtype=torch.float64)
    return _saved(q.to(dtype), k.to(dtype), v.to(dtype), do.to(dtype), causal)


def _saved(q, k, v, do, causal) -> tuple[torch.Tensor, ...]:
    o, lse = forward(q, k, v, causal)
    return q, k, v, o.to(q.dtype), lse.to(q.dtype), do


def _inputs(args, block, causal) -> str:
    return describe(args, {"block_size": block, "causal": causal})


def _call(fn, args, block=None, causal=False) -> Grads:
    __tracebackhide__ = True
    return _measured(fn, args, block, causal)[0]


def _measured(fn, args, block=None, causal=False) -> tuple[Grads, Measured]:
    """The learner's ``(dq, dk, dv)``, checked for type, shape and dtype, and what the call ran;
    ``block=None`` leaves ``block_size`` and ``causal`` at their defaults."""
    __tracebackhide__ = True
    kwargs = {} if block is None else {"block_size": block, "causal": causal}
    with measure() as ran:
        got = call(fn, NAME, args, kwargs)
    if ran.engine:
        fail(
            f"`{NAME}` calls `{ran.engine}` inside autograd's backward pass: write the backward "
            "by hand, tile by tile, from P = exp(S − L), D = rowsum(dO ∘ O) "
            "and dS = P ∘ (dP − D); autograd through a tiled forward also keeps every tile's "
            "weights alive until the backward, T·S numbers in all."
        )
    if ran.sdpa:
        fail(
            f"`{NAME}` calls `{ran.sdpa}`, PyTorch's own attention: write the backward by hand, "
            "tile by tile, without autograd or PyTorch's attention."
        )
    if not isinstance(got, tuple | list) or len(got) != 3:
        fail(f"`{NAME}` should return a tuple (dq, dk, dv), but it returned {type(got).__name__}.")
    q, k, v = args[:3]
    for grad, like, name in zip(got, (q, k, v), _GRADS, strict=True):
        expect_tensor(grad, NAME, f"a tensor as {name}")
        expect_shape(
            grad,
            like.shape,
            f"{name}",
            _inputs(args, block, causal),
            f"{name} has the shape of the tensor it is the gradient of",
        )
        if grad.dtype != q.dtype:
            fail(
                f"{name} is {grad.dtype} for {q.dtype} inputs: accumulate in float32 if you like, "
                "but return the input dtype."
            )
    return tuple(got), ran


def _close(got: Grads, want: Grads, tol: float) -> list[bool]:
    return [
        g.shape == w.shape and torch.allclose(g.detach().double(), w, atol=tol, rtol=tol)
        for g, w in zip(got, want, strict=True)
    ]


def _right(fn, q, k, v, do, block, causal, tol) -> bool:
    args = _saved(q, k, v, do, causal)
    return all(_close(_call(fn, args, block, causal), gradients(q, k, v, do, causal), tol))


def _retries(fn, args, block, causal, tol):
    """``(diagnosis, retry)`` pairs: the same inputs made easier, most specific first."""
    q, k, v, _, _, do = args
    T, S = q.shape[-2], k.shape[-2]
    retries = []
    if (S % block and S > block) or (T % block and T > block):
        t, s = max(T // block * block, min(T, block)), max(S // block * block, min(S, block))
        t = min(t, s) if causal else t  # causal cases keep S >= T
        sub = (q[..., :t, :], k[..., :s, :], v[..., :s, :], do[..., :t, :])
        retries.append(
            (
                f"Your gradients are right when block_size divides T and S but wrong for T={T}, "
                f"S={S}, block_size={block}: the last, partial block is lost or mis-sliced; loop "
                "over range(0, n, block_size) and slice [start:start + block_size].",
                lambda: _right(fn, *sub, block, causal, tol),
            )
        )
    if causal and S != T:
        n = min(T, S)
        square = (q[..., T - n :, :], k[..., S - n :, :], v[..., S - n :, :], do[..., T - n :, :])
        retries.append(
            (
                f"Your causal gradients are right when S = T, and the unmasked ones for T={T}, "
                f"S={S}, but causal with S ≠ T is wrong: the mask is misaligned; query i may "
                f"attend key j iff j <= i + S − T (S − T = {S - T} here).",
                lambda: (
                    _right(fn, *square, block, True, tol)
                    and _right(fn, q, k, v, do, block, False, tol)
                ),
            )
        )
    if block < max(T, S):
        retries.append(
            (
                "Your gradients are right when one block holds every query and key but wrong "
                "with several: accumulate dQ over key blocks and dK, dV over query blocks "
                "(+=, never =), and recompute P = exp(S − L) from each tile's own rows of L.",
                lambda: _right(fn, q, k, v, do, max(T, S), causal, tol),
            )
        )
    return retries


def _diagnose(fn, got: Grads, args, block, causal, tol) -> str:
    q, k, v, _, _, do = args
    inputs = _inputs(args, block, causal)
    if any(has_nan_or_inf(g) for g in got):
        return (
            f"Your gradients hold NaN or inf (inputs {inputs}): P = exp(S − L) with the saved L "
            "is at most 1, so subtract L from the scaled scores before exp, and mask with -inf "
            "before the exp, never by multiplying -inf by 0."
        )
    for why, wrong in variants(q, k, v, do, causal, block).items():
        if all(_close(got, wrong, max(tol, 1e-4))):
            return why
    for why, retry in _retries(fn, args, block, causal, tol):
        try:
            if retry():
                return why
        except CheckFailure:
            pass
    ok = _close(got, gradients(q, k, v, do, causal), tol)
    wrong = " and ".join(name for name, good in zip(_GRADS, ok, strict=True) if not good)
    if ok[2]:
        return (
            f"Your dV is right but {wrong} differ from autograd's for inputs {inputs}: check "
            "dP = dO Vᵀ, D = rowsum(dO ∘ O), dS = P ∘ (dP − D), dQ = dS K/√hs, dK = dSᵀ Q/√hs."
        )
    return (
        f"Your {wrong} differ from autograd's for inputs {inputs}: dV = Pᵀ dO with "
        "P = exp(q kᵀ/√hs − L) recomputed per tile; then dS = P ∘ (dO Vᵀ − D), dQ = dS K/√hs, "
        "dK = dSᵀ Q/√hs."
    )


def _check_case(fn, args, block, causal) -> None:
    __tracebackhide__ = True
    before = [t.clone() for t in args]
    got = _call(fn, args, block, causal)
    expect_unmodified(before, list(args), NAME)
    q, k, v, _, _, do = args
    tol = _TOL[q.dtype]
    if not all(_close(got, gradients(q, k, v, do, causal), tol)):
        fail(_diagnose(fn, got, args, block, causal, tol))


def _cases(gen, causal: bool, thorough: bool):
    """``(B, nh, T, S, hs, block)``: fixed, then random (S >= T when causal; at most 8 blocks
    a side)."""
    if causal:
        fixed = [(1, 2, 8, 8, 8, 4), (2, 1, 5, 11, 4, 3), (1, 1, 7, 7, 4, 5)]
    else:
        fixed = [(1, 2, 6, 9, 8, 4), (2, 1, 5, 5, 4, 3), (1, 1, 1, 7, 8, 4), (1, 2, 9, 4, 8, 4)]
    yield from fixed
    for _ in range(3 if thorough else 1):
        T, S = randint(gen, 1, 24), randint(gen, 1, 24)
        if causal and S < T:
            T, S = S, T
        B, nh = randint(gen, 1, 2), randint(gen, 1, 2)
        hs, block = randint(gen, 1, 12), randint(gen, 1, 9)
        yield B, nh, T, S, hs, few_blocks(block, T, S)


@one_thread
def check_backward_values(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``(dq, dk, dv)`` equal autograd's through SDPA: T ≠ S, ragged blocks, the default block."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for B, nh, T, S, hs, block in _cases(gen, False, thorough):
        _check_case(fn, _args(gen, B, nh, T, S, hs, False), block, False)
    args = _args(gen, 1, 1, 9, 70, 4, False)  # the default block_size (64) leaves a partial block
    q, k, v, _, _, do = args
    if not all(_close(_call(fn, args), gradients(q, k, v, do, False), _TOL[q.dtype])):
        fail(f"`{NAME}` with the default block_size=64 and S=70 is wrong.")
    if thorough:
        _check_case(fn, _args(gen, 1, 2, 7, 13, 8, False, torch.float64), 4, False)


@one_thread
def check_backward_causal(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Causal ``(dq, dk, dv)`` (bottom-right, S >= T) equal autograd's."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for B, nh, T, S, hs, block in _cases(gen, True, thorough):
        _check_case(fn, _args(gen, B, nh, T, S, hs, True), block, True)


def _memory_cases(thorough: bool):
    """``(B, nh, T, S, hs, block, causal)``: one head's (T, S) matrix is at least about twice
    what a tiled backward holds at once (a few (B, nh, T, block) tiles, dQ, dK and dV)."""
    yield 1, 2, 128, 512, 8, 32, False
    yield 1, 1, 128, 256, 8, 16, True
    if thorough:
        yield 2, 1, 128, 384, 8, 16, True


def _memory_advice(big: Created, B, nh, T, S) -> str:
    if big.dtype == torch.bool or big.shape == (T, S):
        return (
            f"it builds a (T, S) = ({T}, {S}) mask: compare the positions of each tile's queries "
            "and keys instead"
        )
    if big.numel >= T * S:
        return (
            "it materialises a full (T, S) matrix (P, dP or dS): recompute them tile by tile "
            "from the saved log-sum-exp, which is why the forward saves it"
        )
    if S in big.shape[-2:]:
        return "it scores a block of queries against all S keys at once: tile the keys too"
    return (
        "it keeps every tile's P (or dS) alive at once, a full matrix in pieces: use each tile "
        "for dV, dK and dQ before computing the next"
    )


@one_thread
def check_backward_memory(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """The tensors the call creates, each alive until its last use, never hold ``T * S`` numbers
    at once, on shapes where a tiled backward holds at most about half of that; the gradients
    are right."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for B, nh, T, S, hs, block, causal in _memory_cases(thorough):
        args = _args(gen, B, nh, T, S, hs, causal)
        got, ran = _measured(fn, args, block, causal)
        if ran.peak >= T * S:
            fail(
                f"`{NAME}` held {ran.peak:,} numbers at once for T={T}, S={S}, "
                f"block_size={block}, as many as one head's (T, S) matrix (its largest tensor: "
                f"{ran.largest.shape}): {_memory_advice(ran.largest, B, nh, T, S)}."
            )
        q, k, v, _, _, do = args
        if not all(_close(got, gradients(q, k, v, do, causal), _TOL[q.dtype])):
            fail(f"`{NAME}` is wrong for {_inputs(args, block, causal)}: fix the values first.")


@one_thread
def check_backward_by_hand(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """The gradients are computed by hand: no operator run by autograd's engine, none of
    PyTorch's attention (every call of the other checks refuses them too)."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for causal in (False, True):
        args = _args(gen, 1, 2, 9, 9, 8, causal)
        got = _call(fn, args, 4, causal)
        q, k, v, _, _, do = args
        if not all(_close(got, gradients(q, k, v, do, causal), _TOL[q.dtype])):
            fail(f"`{NAME}` is wrong for {_inputs(args, 4, causal)}: fix the values first.")
