"""Correct and wrong forwards that return the log-sum-exp, and ``FlashAttention`` Functions.

Shape legend: ``B`` batch, ``nh`` heads, ``T`` query length, ``S`` key/value length, ``hs`` head
size. A forward takes ``(q, k, v, block_size=64, causal=False, return_lse=False)`` and returns
``out`` or ``(out, lse)`` with ``lse`` ``(B, nh, T)``; a Function is a ``torch.autograd.Function``
with ``forward(ctx, q, k, v, causal=False)`` and ``backward(ctx, do)``. Causal is bottom-right
aligned (key j allowed iff ``j <= i + S - T``).
"""

from __future__ import annotations

import math
from functools import partial

import torch

from autograder.checks import nb06_function as checks

from . import VISIBLE, VISIBLE_AND_HIDDEN, Mistake, correct, stub, tried
from .gpu_backward import backward_key_blocks

LN2 = math.log(2.0)

# ----------------------------------------------------------------------------- forwards


def forward_key_blocks(q, k, v, block_size=64, causal=False, return_lse=False):
    """The notebook's loop; ``lse = m + log(l)`` after the last block (-inf with no key)."""
    B, nh, T, hs = q.shape
    S = k.shape[-2]
    m_i = q.new_full((B, nh, T, 1), float("-inf"))
    l_i = q.new_zeros((B, nh, T, 1))
    acc = q.new_zeros((B, nh, T, v.shape[-1]))
    last_key = torch.arange(T)[:, None] + S - T  # (T, 1)
    for start in range(0, S, block_size):
        kb, vb = k[..., start : start + block_size, :], v[..., start : start + block_size, :]
        s = q @ kb.transpose(-2, -1) / math.sqrt(hs)  # (B, nh, T, b)
        if causal:
            s = s.masked_fill(torch.arange(start, start + kb.shape[-2]) > last_key, -math.inf)
        m_new = torch.maximum(m_i, s.amax(-1, keepdim=True))
        m_ref = torch.where(torch.isinf(m_new), 0.0, m_new)
        alpha = torch.exp(m_i - m_ref)
        p = torch.exp(s - m_ref)
        l_i = l_i * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ vb
        m_i = m_new
    out = torch.where(l_i > 0, acc / l_i, 0.0)
    return (out, (m_i + torch.log(l_i)).squeeze(-1)) if return_lse else out


def forward_flash2(Q, K, V, block_size=64, causal=False, return_lse=False):
    """FlashAttention-2's forward: query tiles outside, key tiles inside, key tiles above the
    diagonal skipped, float32 accumulators; L = m + log(l), +inf for a row with no key (as
    flash-attn stores it, so that exp(S − L) is 0 in the backward)."""
    T, S = Q.shape[-2], K.shape[-2]
    acc_dtype = torch.promote_types(Q.dtype, torch.float32)
    O = torch.zeros_like(Q)  # noqa: E741
    L = torch.empty(Q.shape[:-1], dtype=acc_dtype)
    scale = Q.shape[-1] ** -0.5
    for i0 in range(0, T, block_size):
        Q_i = Q[..., i0 : i0 + block_size, :].to(acc_dtype)
        n_q = Q_i.shape[-2]
        q_pos = torch.arange(i0, i0 + n_q)[:, None] + S - T
        m = torch.full((*Q_i.shape[:-1], 1), -math.inf, dtype=acc_dtype)
        l = torch.zeros_like(m)  # noqa: E741
        acc = torch.zeros_like(Q_i)
        stop = min(S, i0 + n_q + S - T) if causal else S  # tiles past the diagonal: skipped
        for j0 in range(0, max(stop, 0), block_size):
            K_j = K[..., j0 : j0 + block_size, :].to(acc_dtype)
            V_j = V[..., j0 : j0 + block_size, :].to(acc_dtype)
            S_ij = Q_i @ K_j.transpose(-2, -1) * scale
            if causal:
                k_pos = torch.arange(j0, j0 + K_j.shape[-2])[None, :]
                S_ij = S_ij.masked_fill(k_pos > q_pos, -math.inf)
            m_new = torch.maximum(m, S_ij.amax(-1, keepdim=True))
            m_safe = torch.where(torch.isinf(m_new), 0.0, m_new)
            P = torch.exp(S_ij - m_safe)
            corr = torch.exp(m - m_safe)
            l = l * corr + P.sum(-1, keepdim=True)  # noqa: E741
            acc = acc * corr + P @ V_j
            m = m_new
        O[..., i0 : i0 + n_q, :] = torch.where(l > 0, acc / l, 0.0).to(Q.dtype)
        L[..., i0 : i0 + n_q] = torch.where(l > 0, m + torch.log(l), math.inf).squeeze(-1)
    return (O, L) if return_lse else O


def forward_triton_exp2(q, k, v, block_size=64, causal=False, return_lse=False):
    """The Triton tutorial's forward: m and l kept in base 2 (exp2, log2(e) folded into the
    scale); the natural-log lse is ln 2 times the base-2 one."""
    T, S = q.shape[-2], k.shape[-2]
    qk_scale = q.shape[-1] ** -0.5 / LN2
    m2 = torch.full((*q.shape[:-1], 1), -math.inf, dtype=q.dtype)
    l_i = torch.zeros_like(m2)
    acc = torch.zeros_like(q)
    q_pos = torch.arange(T)[:, None] + S - T
    for start in range(0, S, block_size):
        kb, vb = k[..., start : start + block_size, :], v[..., start : start + block_size, :]
        s2 = q @ kb.transpose(-2, -1) * qk_scale
        if causal:
            s2 = s2.masked_fill(torch.arange(start, start + kb.shape[-2]) > q_pos, -math.inf)
        m_new = torch.maximum(m2, s2.amax(-1, keepdim=True))
        m_ref = torch.where(torch.isinf(m_new), 0.0, m_new)
        alpha = torch.exp2(m2 - m_ref)
        p = torch.exp2(s2 - m_ref)
        l_i = l_i * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ vb
        m2 = m_new
    out = torch.where(l_i > 0, acc / l_i, 0.0)
    return (out, ((m2 + torch.log2(l_i)) * LN2).squeeze(-1)) if return_lse else out


CORRECT_LSE = {
    "key blocks, lse = m + log l": forward_key_blocks,
    "FlashAttention-2: query tiles, causal skipping, +inf": forward_flash2,
    "Triton tutorial: base 2, converted": forward_triton_exp2,
}


def _lse_bug(q, k, v, block_size=64, causal=False, return_lse=False, *, bug: str):
    """The notebook's loop, its lse computed the mistaken way."""
    out = forward_key_blocks(q, k, v, block_size, causal)
    if not return_lse:
        return out
    hs, S = q.shape[-1], k.shape[-2]
    scale = {"unscaled": 1.0}.get(bug, 1 / math.sqrt(hs))
    s = q @ k.transpose(-2, -1) * scale  # (B, nh, T, S): the table, as the bug computes it
    if causal and bug != "causal_ignored":
        s = s.masked_fill(
            torch.ones(q.shape[-2], S, dtype=torch.bool).tril(S - q.shape[-2]).logical_not(),
            -math.inf,
        )
    lse = torch.logsumexp(s, -1)  # (B, nh, T)
    wrong = {
        "max_only": lambda: s.amax(-1),
        "log_l_only": lambda: lse - s.amax(-1),
        "base_2": lambda: lse / LN2,
        "keepdim": lambda: lse[..., None],
        "per_key": lambda: torch.logsumexp(s, -2),
        "last_block": lambda: torch.logsumexp(s[..., (S - 1) // block_size * block_size :], -1),
        "swapped": lambda: lse,
        "finite_empty": lambda: torch.where(torch.isinf(lse), -69.0, lse),
    }
    if bug == "swapped":
        return lse, out
    return out, wrong.get(bug, lambda: lse)()


def _lse_mistake(bug: str, diagnosis: str) -> Mistake:
    return Mistake(bug, partial(_lse_bug, bug=bug), checks.check_tiled_lse, diagnosis)


def lse_not_returned(q, k, v, block_size=64, causal=False, return_lse=False):
    return forward_key_blocks(q, k, v, block_size, causal)


def lse_last_query_tile(q, k, v, block_size=64, causal=False, return_lse=False):
    """Query tiles, the lse of each tile written over the last: the wrong rows."""
    out, lse = forward_key_blocks(q, k, v, block_size, causal, return_lse=True)
    T = q.shape[-2]
    return (out, lse[..., (T - 1) // block_size * block_size :]) if return_lse else out


def lse_from_the_table(q, k, v, block_size=64, causal=False, return_lse=False):
    """Right, and it builds the (T, S) table the loop avoided."""
    return _lse_bug(q, k, v, block_size, causal, return_lse, bug="right_from_table")


MISTAKES_LSE = [
    Mistake("stub", stub, checks.check_tiled_lse, "not implemented yet"),
    Mistake("not returned", lse_not_returned, checks.check_tiled_lse, "returned one tensor"),
    Mistake("last query tile", lse_last_query_tile, checks.check_tiled_lse, "one number per query"),
    Mistake("from the table", lse_from_the_table, checks.check_tiled_lse, "torch.logsumexp"),
    _lse_mistake("max_only", "running maximum m alone"),
    _lse_mistake("log_l_only", "log(l) alone"),
    _lse_mistake("base_2", "base 2"),
    _lse_mistake("unscaled", "without the 1/√hs scale"),
    _lse_mistake("keepdim", "drop the last dimension"),
    _lse_mistake("per_key", "one number per key"),
    _lse_mistake("last_block", "only the last key block"),
    _lse_mistake("swapped", "return (out, lse)"),
    _lse_mistake("finite_empty", "finite for a query that may attend no key"),
    _lse_mistake("causal_ignored", "ignores the causal mask"),
]

# ----------------------------------------------------------------------------- Functions


class FlashCS336(torch.autograd.Function):
    """As CS336's second assignment asks: the tiled forward saves L, the backward reads it."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        o, lse = forward_key_blocks(q, k, v, causal=causal, return_lse=True)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.is_causal = causal
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = backward_key_blocks(q, k, v, o, lse, do, causal=ctx.is_causal)
        return dq, dk, dv, None


def _backward_promoted(q, k, v, o, lse, do, causal):
    """FlashAttention-2's backward in float32 accumulators, float64 kept as float64."""
    acc = torch.promote_types(q.dtype, torch.float32)
    grads = backward_key_blocks(*(t.to(acc) for t in (q, k, v, o, lse, do)), causal=causal)
    return [g.to(q.dtype) for g in grads]


class FlashInterface(torch.autograd.Function):
    """As flash-attn's FlashAttnFunc writes it: out and softmax_lse saved, needs_input_grad
    read, float32 accumulators that keep float64 as float64."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        out, softmax_lse = forward_flash2(q, k, v, causal=causal, return_lse=True)
        ctx.save_for_backward(q, k, v, out, softmax_lse)
        ctx.causal = causal
        return out

    @staticmethod
    def backward(ctx, do):
        q, k, v, out, softmax_lse = ctx.saved_tensors
        dq, dk, dv = _backward_promoted(q, k, v, out, softmax_lse, do.contiguous(), ctx.causal)
        wanted = ctx.needs_input_grad
        return (
            dq if wanted[0] else None,
            dk if wanted[1] else None,
            dv if wanted[2] else None,
            None,
        )


CORRECT_FUNCTION = {"CS336": FlashCS336, "flash-attn interface": FlashInterface}


class StubFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        raise NotImplementedError()

    @staticmethod
    def backward(ctx, do):
        raise NotImplementedError()


class ThreeGradients(FlashCS336):
    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        return backward_key_blocks(q, k, v, o, lse, do, causal=ctx.is_causal)


class CausalForgotten(FlashCS336):
    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        return (*backward_key_blocks(q, k, v, o, lse, do), None)


class SwappedGradients(FlashCS336):
    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = backward_key_blocks(q, k, v, o, lse, do, causal=ctx.is_causal)
        return dk, dq, dv, None


class ReturnsLse(FlashCS336):
    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        o, lse = forward_key_blocks(q, k, v, causal=causal, return_lse=True)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.is_causal = causal
        return o, lse


class SavedOutOfOrder(FlashCS336):
    """Saves (q, k, v, lse, o), unpacks (q, k, v, o, lse)."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        o, lse = forward_key_blocks(q, k, v, causal=causal, return_lse=True)
        ctx.save_for_backward(q, k, v, lse, o)
        ctx.is_causal = causal
        return o


class Float32Inside(torch.autograd.Function):
    """Computes in float32 whatever its input: every float32 test passes; gradcheck in float32
    cannot tell (its finite differences are too coarse), in float64 it fails."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        o, lse = forward_key_blocks(q.float(), k.float(), v.float(), causal=causal, return_lse=True)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal = causal
        return o.to(q.dtype)

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        grads = backward_key_blocks(
            q.float(), k.float(), v.float(), o, lse, do.float(), causal=ctx.causal
        )
        return (*(g.to(q.dtype) for g in grads), None)


class SavesWeights(torch.autograd.Function):
    """Saves P, the (T, S) weights, as a naive autograd backward does."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        T, S = q.shape[-2], k.shape[-2]
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if causal:
            s = s.masked_fill(~torch.ones(T, S, dtype=torch.bool).tril(S - T), -math.inf)
        p = torch.softmax(s, -1)
        o = p @ v
        ctx.save_for_backward(q, k, v, o, p)
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, p = ctx.saved_tensors
        c = 1 / math.sqrt(q.shape[-1])
        ds = p * (do @ v.transpose(-2, -1) - (do * o).sum(-1, keepdim=True))
        return ds @ k * c, ds.transpose(-2, -1) @ q * c, p.transpose(-2, -1) @ do, None


class AutogradInside(FlashCS336):
    """Recomputes the tiled forward with autograd on in the backward, and differentiates it."""

    @staticmethod
    def backward(ctx, do):
        q, k, v, _, _ = ctx.saved_tensors
        leaves = [t.detach().requires_grad_() for t in (q, k, v)]
        with torch.enable_grad():
            o = forward_key_blocks(*leaves, causal=ctx.is_causal)
        return (*torch.autograd.grad(o, leaves, do), None)


MISTAKES_FUNCTION = [
    Mistake("three gradients", ThreeGradients, checks.check_flash_function, "dq, dk, dv, None"),
    Mistake("causal forgotten", CausalForgotten, checks.check_flash_function, "ctx.causal"),
    Mistake("dk, dq", SwappedGradients, checks.check_flash_function, "forward's order"),
    Mistake("returns lse", ReturnsLse, checks.check_flash_function, "returns more than o"),
    Mistake("saved out of order", SavedOutOfOrder, checks.check_flash_function, "same order"),
    Mistake("float32 inside", Float32Inside, checks.check_flash_function, "float32's precision"),
    Mistake("saves weights", SavesWeights, checks.check_flash_memory, "never the weights"),
    Mistake("autograd inside", AutogradInside, checks.check_flash_memory, "every tile's weights"),
]

MISTAKES = tried(MISTAKES_LSE + MISTAKES_FUNCTION, runs=(VISIBLE,))
CORRECT = correct([checks.check_tiled_lse], CORRECT_LSE, runs=VISIBLE_AND_HIDDEN) + correct(
    [checks.check_flash_function, checks.check_flash_memory],
    CORRECT_FUNCTION,
    runs=VISIBLE_AND_HIDDEN,
)
STUBS = [(checks.check_tiled_lse, stub), (checks.check_flash_function, StubFunction)]
REPLAY = [checks.check_tiled_lse]
