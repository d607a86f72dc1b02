"""Correct and wrong ``tiled_attention_backward`` for notebook 06's backward checks.

Shape legend: ``B`` batch, ``nh`` heads, ``T`` query length, ``S`` key/value length, ``hs`` head
size. Each function takes ``(q, k, v, o, lse, do, block_size=64, causal=False)`` and returns
``(dq, dk, dv)``; causal is bottom-right aligned (key j allowed iff ``j <= i + S - T``).
"""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F

from autograder.checks import nb06_backward as checks

from . import HIDDEN, MISSED, VISIBLE, VISIBLE_AND_HIDDEN, Mistake, correct, stub, tried

LOG2E = 1.0 / math.log(2.0)


def backward_key_blocks(q, k, v, o, lse, do, block_size=64, causal=False):
    """The notebook's loop: one key block at a time against every query."""
    T, S, hs = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(hs)
    D = (do * o).sum(-1, keepdim=True)  # (B, nh, T, 1)
    dq = torch.zeros_like(q)
    dk, dv = torch.zeros_like(k), torch.zeros_like(v)
    last_key = torch.arange(T)[:, None] + S - T  # (T, 1)
    for start in range(0, S, block_size):
        kb, vb = k[..., start : start + block_size, :], v[..., start : start + block_size, :]
        s = q @ kb.transpose(-2, -1) * scale  # (B, nh, T, b)
        if causal:
            cols = torch.arange(start, start + kb.shape[-2])
            s = s.masked_fill(cols > last_key, float("-inf"))
        p = torch.exp(s - lse[..., None])  # (B, nh, T, b)
        dv[..., start : start + block_size, :] = p.transpose(-2, -1) @ do
        ds = p * (do @ vb.transpose(-2, -1) - D)  # (B, nh, T, b)
        dq = dq + ds @ kb * scale
        dk[..., start : start + block_size, :] = ds.transpose(-2, -1) @ q * scale
    return dq, dk, dv


def backward_flash2_algorithm2(Q, K, V, O, L, dO, block_size=64, causal=False):  # noqa: E741
    """Algorithm 2 of Dao (2023): outer loop over key tiles j, inner over query tiles i; dK_j
    and dV_j accumulate on chip, dQ_i is read, updated and written back each step."""
    T, S = Q.shape[-2], K.shape[-2]
    scale = Q.shape[-1] ** -0.5
    D = (dO * O).sum(-1)  # (B, nh, T)
    dQ, dK, dV = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
    for j0 in range(0, S, block_size):
        K_j, V_j = K[..., j0 : j0 + block_size, :], V[..., j0 : j0 + block_size, :]
        dK_j, dV_j = torch.zeros_like(K_j), torch.zeros_like(V_j)
        k_pos = torch.arange(j0, j0 + K_j.shape[-2])[None, :]
        for i0 in range(0, T, block_size):
            rows = slice(i0, i0 + block_size)
            Q_i, dO_i = Q[..., rows, :], dO[..., rows, :]
            S_ij = Q_i @ K_j.transpose(-2, -1) * scale  # (B, nh, Br, Bc)
            if causal:
                q_pos = torch.arange(i0, i0 + Q_i.shape[-2])[:, None] + S - T
                S_ij = S_ij.masked_fill(k_pos > q_pos, float("-inf"))
            P_ij = torch.exp(S_ij - L[..., rows, None])
            dV_j = dV_j + P_ij.transpose(-2, -1) @ dO_i
            dP_ij = dO_i @ V_j.transpose(-2, -1)
            dS_ij = P_ij * (dP_ij - D[..., rows, None])
            dQ[..., rows, :] += dS_ij @ K_j * scale
            dK_j = dK_j + dS_ij.transpose(-2, -1) @ Q_i * scale
        dK[..., j0 : j0 + block_size, :] = dK_j
        dV[..., j0 : j0 + block_size, :] = dV_j
    return dQ, dK, dV


def backward_triton_split(q, k, v, o, lse, do, block_size=64, causal=False):
    """As Triton's fused-attention tutorial splits it: a preprocessing pass for D, one pass per
    key block for dK and dV, one pass per query block for dQ; exp2 with log2(e) folded in,
    float32 accumulators whatever the input dtype."""
    T, S = q.shape[-2], k.shape[-2]
    sm_scale = q.shape[-1] ** -0.5
    qk_scale = sm_scale * LOG2E
    lse2 = lse.float() * LOG2E  # (B, nh, T): the tutorial keeps m in base 2
    delta = (o.float() * do.float()).sum(-1)  # (B, nh, T): _attn_bwd_preprocess
    qf, kf, vf, dof = q.float(), k.float(), v.float(), do.float()

    def p_tile(i0, n_q, j0, n_k):
        qk = qf[..., i0 : i0 + n_q, :] @ kf[..., j0 : j0 + n_k, :].transpose(-2, -1)
        p = torch.exp2(qk * qk_scale - lse2[..., i0 : i0 + n_q, None])
        if causal:
            q_pos = torch.arange(i0, i0 + n_q)[:, None] + S - T
            p = torch.where(torch.arange(j0, j0 + n_k)[None, :] <= q_pos, p, 0.0)
        return p  # (B, nh, n_q, n_k)

    dk_blocks, dv_blocks = [], []
    for j0 in range(0, S, block_size):  # _attn_bwd_dkdv
        n_k = min(block_size, S - j0)
        dk_j = torch.zeros(*k.shape[:-2], n_k, k.shape[-1])
        dv_j = torch.zeros(*v.shape[:-2], n_k, v.shape[-1])
        for i0 in range(0, T, block_size):
            n_q = min(block_size, T - i0)
            p = p_tile(i0, n_q, j0, n_k)
            do_i = dof[..., i0 : i0 + n_q, :]
            dv_j += p.transpose(-2, -1) @ do_i
            dp = do_i @ vf[..., j0 : j0 + n_k, :].transpose(-2, -1)
            ds = p * (dp - delta[..., i0 : i0 + n_q, None])
            dk_j += ds.transpose(-2, -1) @ qf[..., i0 : i0 + n_q, :]
        dk_blocks.append(dk_j * sm_scale)
        dv_blocks.append(dv_j)
    dq_blocks = []
    for i0 in range(0, T, block_size):  # _attn_bwd_dq
        n_q = min(block_size, T - i0)
        dq_i = torch.zeros(*q.shape[:-2], n_q, q.shape[-1])
        do_i = dof[..., i0 : i0 + n_q, :]
        for j0 in range(0, S, block_size):
            n_k = min(block_size, S - j0)
            p = p_tile(i0, n_q, j0, n_k)
            dp = do_i @ vf[..., j0 : j0 + n_k, :].transpose(-2, -1)
            ds = p * (dp - delta[..., i0 : i0 + n_q, None])
            dq_i += ds @ kf[..., j0 : j0 + n_k, :]
        dq_blocks.append(dq_i * sm_scale)
    cast = partial(torch.Tensor.to, dtype=q.dtype)
    return (
        cast(torch.cat(dq_blocks, -2)),
        cast(torch.cat(dk_blocks, -2)),
        cast(torch.cat(dv_blocks, -2)),
    )


CORRECT_BACKWARD = {
    "key blocks, all queries": backward_key_blocks,
    "FlashAttention-2 Algorithm 2": backward_flash2_algorithm2,
    "Triton tutorial: dK/dV pass, dQ pass, exp2, fp32": backward_triton_split,
}


def _buggy(q, k, v, o, lse, do, block_size=64, causal=False, *, bug: str):
    """The notebook's loop with one classic mistake switched on; query tiles for the bugs that
    need them."""
    T, S, hs = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(hs)
    s_scale = {"p_no_scale": 1.0, "p_over_hs": 1 / hs}.get(bug, scale)
    D = (do * o).sum(-1, keepdim=True)
    if bug == "no_D":
        D = torch.zeros_like(D)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    shift = T - S if bug == "causal_top_left" else 0
    q_block = block_size if bug == "overwrite_dkdv" else T
    for start in range(0, S, block_size):
        kb, vb = k[..., start : start + block_size, :], v[..., start : start + block_size, :]
        cols = torch.arange(start, start + kb.shape[-2])
        for i0 in range(0, T, q_block):
            rows = slice(i0, i0 + q_block)
            s = q[..., rows, :] @ kb.transpose(-2, -1) * s_scale
            if causal and bug != "causal_ignored":
                last_key = torch.arange(i0, i0 + s.shape[-2])[:, None] + S - T + shift
                s = s.masked_fill(cols > last_key, float("-inf"))
            L = lse[..., rows, None]
            p = torch.exp(s) if bug == "p_without_L" else torch.exp(s - L)
            if bug == "p_block_softmax":
                p = torch.softmax(s, -1)
            dp = do[..., rows, :] @ vb.transpose(-2, -1)
            ds = p * dp - D[..., rows, :] if bug == "ds_minus_D" else p * (dp - D[..., rows, :])
            contribution = ds @ kb * (1.0 if bug in ("dq_no_scale",) else scale)
            if bug == "overwrite_dq":
                dq = contribution
            else:
                dq[..., rows, :] += contribution
            k_scale = 1.0 if bug == "dk_no_scale" else scale
            dk_tile = ds.transpose(-2, -1) @ q[..., rows, :] * k_scale
            dv_tile = p.transpose(-2, -1) @ do[..., rows, :]
            keys = slice(start, start + block_size)
            if bug == "overwrite_dkdv":
                dk[..., keys, :], dv[..., keys, :] = dk_tile, dv_tile
            else:
                dk[..., keys, :] += dk_tile
                dv[..., keys, :] += dv_tile
    return dq, dk, dv


def _bug(name: str, check, diagnosis: str) -> Mistake:
    return Mistake(name, partial(_buggy, bug=name), check, diagnosis)


def backward_drop_ragged(q, k, v, o, lse, do, block_size=64, causal=False):
    S = k.shape[-2]
    whole = S // block_size * block_size
    dq, dk, dv = backward_key_blocks(
        q, k[..., :whole, :], v[..., :whole, :], o, lse, do, block_size, causal
    )
    lost = k.new_zeros(*k.shape[:-2], S - whole, k.shape[-1])  # the partial block's rows
    return dq, torch.cat([dk, lost], -2), torch.cat([dv, lost], -2)


def backward_materialised(q, k, v, o, lse, do, block_size=64, causal=False):
    return backward_key_blocks(q, k, v, o, lse, do, k.shape[-2], causal)


def backward_autograd(q, k, v, o, lse, do, block_size=64, causal=False):
    """Autograd through a tiled forward: right, small, and not the exercise."""
    from mistakes.gpu import tiled_reference_style

    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    with torch.enable_grad():
        out = tiled_reference_style(q, k, v, block_size, causal)
        return torch.autograd.grad(out, (q, k, v), do)


def backward_sdpa_kernel(q, k, v, o, lse, do, block_size=64, causal=False):
    T, S = q.shape[-2], k.shape[-2]
    mask = torch.ones(T, S, dtype=torch.bool).tril(S - T) if causal else None
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    with torch.enable_grad():
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return torch.autograd.grad(out, (q, k, v), do)


def backward_float_dtype(q, k, v, o, lse, do, block_size=64, causal=False):
    return tuple(g.float() for g in backward_key_blocks(q, k, v, o, lse, do, block_size, causal))


BACKWARD_CHECKS = [
    checks.check_backward_values,
    checks.check_backward_causal,
    checks.check_backward_memory,
    checks.check_backward_by_hand,
]

MISTAKES_BACKWARD = [
    Mistake("stub", stub, checks.check_backward_values, "not implemented yet"),
    _bug("no_D", checks.check_backward_values, "without D"),
    _bug("ds_minus_D", checks.check_backward_values, "multiplied by P too"),
    _bug("p_without_L", checks.check_backward_values, "without subtracting the saved"),
    _bug("p_block_softmax", checks.check_backward_values, "softmax of each tile"),
    _bug("p_no_scale", checks.check_backward_values, "1/√hs scale left out"),
    _bug("p_over_hs", checks.check_backward_values, "q kᵀ/hs"),
    _bug("dk_no_scale", checks.check_backward_values, "dK is √hs times too large"),
    _bug("dq_no_scale", checks.check_backward_values, "dQ is √hs times too large"),
    _bug("overwrite_dq", checks.check_backward_values, "last key block's contribution"),
    _bug("overwrite_dkdv", checks.check_backward_values, "last query block's contribution"),
    _bug("causal_ignored", checks.check_backward_causal, "without the causal mask"),
    _bug("causal_top_left", checks.check_backward_causal, "top-left"),
    Mistake("drop ragged", backward_drop_ragged, checks.check_backward_values, "partial block"),
    Mistake("materialised", backward_materialised, checks.check_backward_memory, "(T, S) matrix"),
    Mistake("autograd", backward_autograd, checks.check_backward_by_hand, "calls `"),
    Mistake("autograd, memory", backward_autograd, checks.check_backward_memory, "alive"),
    Mistake("SDPA autograd", backward_sdpa_kernel, checks.check_backward_by_hand, "calls `"),
]
# caught only by the hidden (thorough) run, whose float64 case shows the dtype
MISTAKES_BACKWARD_THOROUGH = [
    Mistake("float32 out", backward_float_dtype, checks.check_backward_values, "input dtype"),
]

MISTAKES = tried(MISTAKES_BACKWARD, runs=(VISIBLE,))
MISTAKES += tried(MISTAKES_BACKWARD_THOROUGH, runs=(HIDDEN,), missed=MISSED)
CORRECT = correct(BACKWARD_CHECKS, CORRECT_BACKWARD, runs=VISIBLE_AND_HIDDEN)
STUBS = [(check, stub) for check in BACKWARD_CHECKS]
REPLAY = [checks.check_backward_values, checks.check_backward_causal, checks.check_backward_memory]


# ------------------------------------------------------ issue 45: D, the softmax's correction


def _backward_d(q, k, v, o, lse, do, block_size=64, causal=False, *, d_of):
    """The notebook's loop with ``D`` from ``d_of(p, dp)`` of each key tile."""
    T, S, hs = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(hs)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    last_key = torch.arange(T)[:, None] + S - T  # (T, 1)
    for start in range(0, S, block_size):
        kb, vb = k[..., start : start + block_size, :], v[..., start : start + block_size, :]
        s = q @ kb.transpose(-2, -1) * scale  # (B, nh, T, b)
        if causal:
            s = s.masked_fill(torch.arange(start, start + kb.shape[-2]) > last_key, float("-inf"))
        p = torch.exp(s - lse[..., None])  # (B, nh, T, b)
        dp = do @ vb.transpose(-2, -1)  # (B, nh, T, b)
        ds = p * (dp - d_of(p, dp))
        dq += ds @ kb * scale
        dk[..., start : start + block_size, :] = ds.transpose(-2, -1) @ q * scale
        dv[..., start : start + block_size, :] = p.transpose(-2, -1) @ do
    return dq, dk, dv


def _row_of_ones(p, dp):
    """D = rowsum(P) over the whole row, which the saved log-sum-exp makes 1."""
    return torch.ones_like(p[..., :1])


MISTAKES += tried(
    [
        Mistake(
            "D per tile",
            partial(_backward_d, d_of=lambda p, dp: (p * dp).sum(-1, keepdim=True)),
            checks.check_backward_values,
            "D taken from each tile alone",
        ),
        Mistake(
            "D = rowsum(P)",
            partial(_backward_d, d_of=_row_of_ones),
            checks.check_backward_values,
            "D = rowsum(P) = 1",
        ),
    ],
    runs=(VISIBLE,),
)
