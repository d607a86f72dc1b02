"""Checks for notebook 06's forward and backward joined: the saved log-sum-exp, ``FlashAttention``.

Shape legend: ``B`` batch, ``nh`` heads, ``T`` query length, ``S`` key/value length,
``hs`` head size; q, o and dO are ``(B, nh, T, hs)``, k and v ``(B, nh, S, hs)``, the
log-sum-exp ``(B, nh, T)``.

``tiled_attention(..., return_lse=True)`` returns ``(o, lse)``: ``lse`` is ``m + log(l)`` after
the last block, the log-sum-exp of each query's scaled scores, ``-inf`` (or FlashAttention's
``+inf``) for a query with no allowed key. ``FlashAttention`` is the learner's
``torch.autograd.Function``: ``forward(ctx, q, k, v, causal=False)`` returns ``o`` and saves what
the backward needs, ``backward(ctx, do)`` returns one gradient per input of ``forward``.

Its gradients are judged the way ``torch.autograd.gradcheck`` judges a Function, in float64,
against a stricter reference: autograd's exact gradients through SDPA in float64
(:mod:`._attention_grads`), to 1e-9, where gradcheck's finite differences allow 1e-3. In float32
a correct Function misses finite differences by more than that (which is why gradcheck needs
float64), and a Function that computes in float32 whatever its input passes every float32 test:
the float64 cases are the ones that catch it.

The checks call the Function through the notebook's ``gradients_through`` (passed by the test
cell), forward and backward in one call: in classroom grading that one call is what the kernel
records and the grader recomputes, the learner's backward included (a backward the check started
afterwards would run on the grader's recomputed forward instead). The memory rule is the
backward's, every tensor of the forward and backward alive at once counted: a Function that saves
the weights, rebuilds ``lse`` from the whole score table or lets autograd differentiate the tiled
forward holds ``T·S`` numbers.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import torch

from autograder.tools.nb06_gpu import gradients_through
from autograder.torch_helpers import one_thread

from ._attention_grads import gradients, log_sum_exp, lse_variants, variants
from ._core import (
    CheckFailure,
    call,
    describe,
    expect_shape,
    expect_tensor,
    fail,
    has_nan_or_inf,
    make_generator,
    randint,
)
from ._online_softmax import oracle
from .measure import measure

#: Learner-importable names that would compute the graded answers: autograd through either gives
#: the gradients. In the grading sandbox they keep their names but raise.
ANSWERS_IN_TOOLS: dict[str, str] = {
    "autograder.tools.nb06_gpu_timing.naive_attention": "FlashAttention's cells, through autograd",
    "autograder.tools.nb06_gpu_timing.sdpa": "FlashAttention's cells, through autograd",
}

TILED = "tiled_attention"
FUNCTION = "FlashAttention"
_GRADS = ("dQ", "dK", "dV")
_LSE_TOL = {torch.float32: 1e-4, torch.float64: 1e-9}
_GRAD_TOL = {torch.float32: 1e-4, torch.float64: 1e-9}


def _qkv(gen, B, nh, T, S, hs, dtype=torch.float32) -> list[torch.Tensor]:
    return [torch.randn(B, nh, n, hs, generator=gen, dtype=dtype) for n in (T, S, S)]


# ----------------------------------------------------------------------------- the saved lse


def _lse_close(got: torch.Tensor, want: torch.Tensor, tol: float) -> bool:
    """Equal where the query has a key; ``±inf`` (never NaN) where it has none."""
    got = got.detach().double()
    empty = torch.isinf(want)
    if torch.isnan(got[empty]).any() or not torch.isinf(got[empty]).all():
        return False
    return torch.allclose(got[~empty], want[~empty], atol=tol, rtol=tol)


def _lse_case(fn, q, k, v, block, causal, memory=False) -> None:
    __tracebackhide__ = True
    T, S = q.shape[-2], k.shape[-2]
    inputs = describe((q, k, v), {"block_size": block, "causal": causal, "return_lse": True})
    with measure() as ran:
        got = call(
            fn, TILED, (q, k, v), {"block_size": block, "causal": causal, "return_lse": True}
        )
    if isinstance(got, torch.Tensor):
        fail(
            f"`{TILED}(..., return_lse=True)` returned one tensor: return the pair (out, lse), "
            "lse = m + log(l) of each query after the last block, which the backward needs."
        )
    if not isinstance(got, tuple | list) or len(got) != 2:
        fail(f"`{TILED}(..., return_lse=True)` should return (out, lse), got {type(got).__name__}.")
    out = expect_tensor(got[0], TILED, "a tensor as out (first item)")
    lse = expect_tensor(got[1], TILED, "a tensor as lse (second item)")
    if out.shape == (*q.shape[:-2], T) and lse.shape == q.shape:
        fail(f"`{TILED}` returned (lse, out): return (out, lse), the output first.")
    expect_shape(out, q.shape, "out", inputs)
    if lse.shape == (*q.shape[:-1], 1):
        fail(
            f"lse has shape {tuple(lse.shape)}: one number per query, (B, nh, T); drop the last "
            "dimension of m + log(l) (.squeeze(-1))."
        )
    if S != T and lse.shape == (*q.shape[:-2], S):
        fail(
            f"lse has one number per key, shape {tuple(lse.shape)}: the log-sum-exp runs over "
            "each query's row of scores, one number per query, (B, nh, T)."
        )
    expect_shape(lse, q.shape[:-1], "lse", inputs, "one number per query, (B, nh, T)")
    if lse.dtype not in (q.dtype, torch.float32):
        fail(f"lse is {lse.dtype} for {q.dtype} inputs: keep q's dtype (or float32).")
    if not torch.allclose(out.double(), oracle(q, k, v, causal), atol=2e-5, rtol=2e-5):
        fail(f"out is wrong for inputs {inputs}: make return_lse=False's answer right first.")
    want = log_sum_exp(q, k, causal)
    tol = _LSE_TOL[torch.float32 if torch.float32 in (q.dtype, lse.dtype) else torch.float64]
    if not _lse_close(lse, want, tol):
        fail(_lse_diagnosis(lse, want, q, k, block, causal, tol, inputs))
    if memory and ran.peak >= T * S:
        fail(
            f"`{TILED}` held {ran.peak:,} numbers at once for T={T}, S={S}, block_size={block}, "
            "as many as one head's (T, S) score matrix: take lse from the loop's m and l, "
            "not from torch.logsumexp over the whole table."
        )


def _lse_diagnosis(lse, want, q, k, block, causal, tol, inputs) -> str:
    empty = torch.isinf(want)
    if torch.isnan(lse.detach()).any():
        return (
            f"lse holds NaN for inputs {inputs}: a query with no allowed key has l = 0, and "
            "its lse is log(0) = -inf (FlashAttention stores +inf), never NaN."
        )
    if empty.any() and not torch.isinf(lse.detach()[empty]).all():
        return (
            "lse is finite for a query that may attend no key (causal, S < T): its sum is 0, "
            "so its lse is log(0) = -inf (FlashAttention stores +inf)."
        )
    got = lse.detach().double()[~empty]
    for why, wrong in lse_variants(q, k, causal, block).items():
        if torch.allclose(got, wrong[~empty], atol=tol, rtol=tol):
            return why
    return (
        f"lse differs from logsumexp(q kᵀ/√hs) over each query's allowed keys for inputs "
        f"{inputs}: after the last block it is m + log(l)."
    )


def _lse_cases(gen, thorough: bool):
    """``(B, nh, T, S, hs, block, causal)``: ragged blocks, T ≠ S, empty causal rows."""
    yield 1, 2, 6, 9, 8, 4, False
    yield 2, 1, 5, 11, 4, 3, True
    yield 1, 1, 7, 4, 8, 3, True  # S < T: the first three queries have no key
    for _ in range(3 if thorough else 1):
        causal = bool(randint(gen, 0, 1))
        T, S = randint(gen, 1, 20), randint(gen, 1, 20)
        yield (
            randint(gen, 1, 2),
            randint(gen, 1, 2),
            T,
            S,
            randint(gen, 1, 12),
            randint(gen, 1, 9),
            causal,
        )


@one_thread
def check_tiled_lse(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``tiled_attention(..., return_lse=True)`` returns ``(out, lse)``: lse is the log-sum-exp of
    each query's allowed scaled scores, ``(B, nh, T)``, from the loop, never from the table."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for B, nh, T, S, hs, block, causal in _lse_cases(gen, thorough):
        _lse_case(fn, *_qkv(gen, B, nh, T, S, hs), block, causal)
    _lse_case(fn, *_qkv(gen, 1, 1, 64, 512, 8), 32, True, memory=True)
    if thorough:
        _lse_case(fn, *_qkv(gen, 1, 2, 7, 13, 8, torch.float64), 4, False)


# ----------------------------------------------------------------------------- FlashAttention


def _function_call(fn, through, q, k, v, do, causal) -> tuple:
    """The Function's ``(dq, dk, dv)`` from one forward and backward, and what the call ran."""
    __tracebackhide__ = True
    with measure() as ran:
        try:
            got = call(through, FUNCTION, (fn, q, k, v, do, causal))
        except CheckFailure as err:
            fail(_error_diagnosis(str(err), q, k, causal))
    if ran.sdpa:
        fail(
            f"`{FUNCTION}` calls `{ran.sdpa}`, PyTorch's own attention: its forward calls your "
            "tiled_attention, its backward your tiled_attention_backward."
        )
    if not isinstance(got, tuple | list) or len(got) != 3:
        fail(f"`{FUNCTION}` gave {type(got).__name__} as gradients: backward returns dq, dk, dv.")
    for grad, like, name in zip(got, (q, k, v), _GRADS, strict=True):
        expect_tensor(grad, FUNCTION, f"a tensor as {name}")
        expect_shape(grad, like.shape, name, describe((q, k, v), {"causal": causal}))
    return tuple(got), ran


def _error_diagnosis(message: str, q, k, causal) -> str:
    """The check's sentence for a Function that raised, from autograd's own message."""
    if "not implemented yet" in message:
        return message
    found = re.search(r"raised (\w+) \((.*?)\) on inputs", message)
    raised = f"{found[1]} ({found[2]})" if found else message.rstrip(".")
    if "incorrect number of gradients" in message:
        return (
            f"`{FUNCTION}.backward` returns a different number of gradients than forward takes "
            "inputs: one per input of forward, in order, None for causal: "
            "return dq, dk, dv, None."
        )
    if "invalid gradient at index" in message:
        return (
            f"`{FUNCTION}.backward` returns a gradient of the wrong shape ({raised}): return "
            "them in forward's order, dq, dk, dv, None."
        )
    if "return the output o alone" in message:
        return (
            f"`{FUNCTION}.forward` returns more than o: return o alone and save lse with "
            "ctx.save_for_backward(q, k, v, o, lse), as FlashAttention does."
        )
    if "must implement either the backward" in message:
        return (
            f"`{FUNCTION}` has no backward: write backward(ctx, do) with @staticmethod, "
            "returning tiled_attention_backward's gradients from ctx.saved_tensors."
        )
    return (
        f"`{FUNCTION}` raised {raised} for q {tuple(q.shape)}, k {tuple(k.shape)}, "
        f"causal={causal}: check that forward saves (q, k, v, o, lse) with "
        "ctx.save_for_backward and backward unpacks ctx.saved_tensors in the same order."
    )


def _function_diagnosis(got, q, k, v, do, causal, tol) -> str:
    inputs = describe((q, k, v, do), {"causal": causal})
    if any(has_nan_or_inf(g) for g in got):
        return f"`{FUNCTION}`'s gradients hold NaN or inf for inputs {inputs}."
    want = gradients(q, k, v, do, causal)
    if q.dtype == torch.float64 and all(
        torch.allclose(g.double(), w, atol=1e-4, rtol=1e-4) for g, w in zip(got, want, strict=True)
    ):
        return (
            f"`{FUNCTION}`'s float64 gradients are right only to float32's precision: it "
            "computes in float32 whatever its input (.float(), or float32 buffers). gradcheck "
            "needs float64 all the way; accumulate in torch.promote_types(q.dtype, "
            "torch.float32) instead."
        )
    if got[0].shape == got[1].shape and all(
        torch.allclose(g.double(), w, atol=tol, rtol=tol)
        for g, w in zip((got[1], got[0], got[2]), want, strict=True)
    ):
        return f"`{FUNCTION}.backward` returns dk before dq: return dq, dk, dv, None."
    for why, wrong in variants(q, k, v, do, causal, 64).items():
        if all(
            torch.allclose(g.double(), w, atol=max(tol, 1e-4), rtol=max(tol, 1e-4))
            for g, w in zip(got, wrong, strict=True)
        ):
            if "without the causal mask" in why:
                return (
                    f"`{FUNCTION}`'s causal backward ignores the mask: the backward never learns "
                    "causal; keep it on ctx in forward (ctx.causal = causal) and pass it to "
                    "tiled_attention_backward."
                )
            return f"`{FUNCTION}`: {why}"
    return (
        f"`{FUNCTION}`'s gradients differ from autograd's for inputs {inputs}: its forward "
        "should save (q, k, v, o, lse) from tiled_attention(..., return_lse=True) and its "
        "backward return tiled_attention_backward's (dq, dk, dv) from them."
    )


def _function_case(fn, through, q, k, v, do, causal):
    __tracebackhide__ = True
    got, ran = _function_call(fn, through, q, k, v, do, causal)
    tol = _GRAD_TOL[q.dtype]
    want = gradients(q, k, v, do, causal)
    if not all(
        g.dtype == q.dtype and torch.allclose(g.double(), w, atol=tol, rtol=tol)
        for g, w in zip(got, want, strict=True)
    ):
        fail(_function_diagnosis(got, q, k, v, do, causal, tol))
    return ran


def _function_cases(gen, thorough: bool):
    """``(B, nh, T, S, hs, causal, dtype)``: float64 first, as gradcheck runs (S >= T causal)."""
    yield 1, 2, 6, 9, 8, False, torch.float64
    yield 2, 1, 5, 11, 4, True, torch.float64
    yield 1, 1, 7, 7, 4, True, torch.float64
    yield 1, 2, 70, 70, 8, True, torch.float32  # more than one block of the default 64
    for _ in range(2 if thorough else 0):
        T, S = sorted((randint(gen, 1, 24), randint(gen, 1, 24)))
        causal = bool(randint(gen, 0, 1))
        yield (
            randint(gen, 1, 2),
            randint(gen, 1, 2),
            T,
            S,
            randint(gen, 1, 8),
            causal,
            (torch.float64),
        )


@one_thread
def check_flash_function(
    fn: Callable, through: Callable = gradients_through, *, seed: int = 0, thorough: bool = False
) -> None:
    """``FlashAttention``'s gradients, through ``through`` (the notebook's
    ``gradients_through``), equal autograd's through SDPA to 1e-9 in float64, gradcheck's dtype,
    and to 1e-4 in float32; causal is bottom-right with ``S >= T``."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for B, nh, T, S, hs, causal, dtype in _function_cases(gen, thorough):
        q, k, v = _qkv(gen, B, nh, T, S, hs, dtype)
        do = torch.randn(B, nh, T, hs, generator=gen, dtype=dtype)
        _function_case(fn, through, q, k, v, do, causal)


@one_thread
def check_flash_memory(
    fn: Callable, through: Callable = gradients_through, *, seed: int = 0, thorough: bool = False
) -> None:
    """Forward and backward through ``FlashAttention`` never hold ``T * S`` numbers at once
    (the default block of 64 keys, T = 64), and the gradients are right."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for causal in (False, True) if thorough else (True,):
        T, S = 64, 1024
        q, k, v = _qkv(gen, 1, 1, T, S, 8)
        do = torch.randn(1, 1, T, 8, generator=gen)
        ran = _function_case(fn, through, q, k, v, do, causal)
        if ran.peak >= T * S:
            fail(
                f"`{FUNCTION}` held {ran.peak:,} numbers at once for T={T}, S={S} (its largest "
                f"tensor: {ran.largest.shape}), as many as the (T, S) table: save (q, k, v, o, "
                "lse), never the weights; take lse from tiled_attention, not from the table; "
                "and write the backward by hand (autograd through the tiled forward keeps "
                "every tile's weights alive)."
            )
