"""Correct and wrong ``get_device`` and ``tiled_attention`` for notebook 06's checks.

Shape legend: ``B`` batch, ``nh`` heads, ``T`` query length, ``S`` key/value length,
``hs`` head size. Causal attention is bottom-right aligned: query i may attend key j iff
``j <= i + S - T``. The Triton kernels live in :mod:`mistakes.gpu_triton`.
"""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F

from autograder.checks import nb06_gpu as checks

from . import HIDDEN, MISSED, VISIBLE, VISIBLE_AND_HIDDEN, Mistake, correct, stub, tried

# ----------------------------------------------------------------------------- get_device


def device_standard():
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def device_accelerator():
    if not torch.accelerator.is_available():
        return torch.device("cpu")
    return torch.accelerator.current_accelerator()


def device_one_liner():
    mps = torch.backends.mps.is_available()
    return torch.device("cuda:0" if torch.cuda.is_available() else "mps" if mps else "cpu")


CORRECT_GET_DEVICE = {
    "if-chain": device_standard,
    "torch.accelerator": device_accelerator,
    "one line, cuda:0": device_one_liner,
}

# ----------------------------------------------------------------------------- tiled_attention


def tiled_reference_style(q, k, v, block_size=64, causal=False):
    """The textbook loop: running max m, sum l_i and output acc, with a guard for empty rows."""
    B, nh, T, hs = q.shape
    S = k.shape[-2]
    m = q.new_full((B, nh, T, 1), float("-inf"))
    l_i = q.new_zeros((B, nh, T, 1))
    acc = q.new_zeros((B, nh, T, v.shape[-1]))
    last_key = torch.arange(T)[:, None] + S - T  # (T, 1): last key each query may see
    for start in range(0, S, block_size):
        kb, vb = k[..., start : start + block_size, :], v[..., start : start + block_size, :]
        s = q @ kb.transpose(-2, -1) / math.sqrt(hs)  # (B, nh, T, b)
        if causal:
            cols = torch.arange(start, start + kb.shape[-2])  # (b,)
            s = s.masked_fill(cols[None, :] > last_key, float("-inf"))
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))  # (B, nh, T, 1)
        m_ref = torch.where(torch.isinf(m_new), 0.0, m_new)
        alpha = torch.exp(m - m_ref)
        p = torch.exp(s - m_ref)  # (B, nh, T, b)
        l_i = l_i * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ vb  # (B, nh, T, hs)
        m = m_new
    return torch.where(l_i > 0, acc / l_i, 0.0)


def tiled_two_dimensional(q, k, v, block_size=64, causal=False):
    """Tiles queries too (like a GPU kernel), float32 accumulators, a large finite mask value."""
    B, nh, T, hs = q.shape
    S = k.shape[-2]
    out = torch.empty_like(q)
    neg = torch.finfo(torch.float32).min
    for q0 in range(0, T, block_size):
        qb = q[..., q0 : q0 + block_size, :].float() * hs**-0.5  # (B, nh, bq, hs)
        rows = torch.arange(q0, q0 + qb.shape[-2])[:, None] + S - T  # (bq, 1)
        m = torch.full((*qb.shape[:-1], 1), neg)
        l_i = torch.zeros_like(m)
        acc = torch.zeros_like(qb)
        for k0 in range(0, S, block_size):
            kb = k[..., k0 : k0 + block_size, :].float()  # (B, nh, bk, hs)
            vb = v[..., k0 : k0 + block_size, :].float()
            s = qb @ kb.transpose(-2, -1)  # (B, nh, bq, bk)
            ok = (torch.arange(k0, k0 + kb.shape[-2])[None, :] <= rows) if causal else None
            if ok is not None:
                s = s.masked_fill(~ok, neg)
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            p = torch.exp(s - m_new)
            if ok is not None:
                p = p * ok
            alpha = torch.exp(m - m_new)
            l_i, acc, m = l_i * alpha + p.sum(-1, keepdim=True), acc * alpha + p @ vb, m_new
        res = torch.where(l_i > 0, acc / l_i.clamp_min(1e-30), 0.0)
        out[..., q0 : q0 + block_size, :] = res.to(q.dtype)
    return out


def tiled_logsumexp_merge(q, k, v, block_size=64, causal=False):
    """Merges normalised block results through their log-sum-exp (as FlashAttention's
    split-KV decoding does); torch.softmax on a block is allowed."""
    T, S = q.shape[-2], k.shape[-2]
    out, lse = None, None
    for start in range(0, S, block_size):
        kb, vb = k[..., start : start + block_size, :], v[..., start : start + block_size, :]
        s = (q @ kb.transpose(-2, -1)) * q.shape[-1] ** -0.5  # (B, nh, T, b)
        if causal:
            cols = torch.arange(start, start + kb.shape[-2])
            s = s.masked_fill(cols[None, :] > torch.arange(T)[:, None] + S - T, float("-inf"))
        blk_lse = torch.logsumexp(s, -1, keepdim=True)  # (B, nh, T, 1)
        blk_out = torch.nan_to_num(torch.softmax(s, -1)) @ vb  # (B, nh, T, hs)
        if out is None:
            out, lse = blk_out, blk_lse
            continue
        new = torch.logaddexp(lse, blk_lse)
        w_old = torch.nan_to_num(torch.exp(lse - new))
        w_blk = torch.nan_to_num(torch.exp(blk_lse - new))
        out, lse = out * w_old + blk_out * w_blk, new
    return out


def tiled_flash2_float32(Q, K, V, block_size=64, causal=False):
    """FlashAttention-2's forward as public PyTorch ports write it (Algorithm 1 of Dao, 2023):
    query tiles Q_i and key tiles K_j from ``split``, the state m_i, l_i, O_i in float32
    whatever the input dtype (float64 too), one cast back at the end. Off by up to about 5e-7
    from float64: held to float32's tolerance, as the exercise allows."""
    T, S = Q.shape[-2], K.shape[-2]
    scale = Q.shape[-1] ** -0.5
    out = torch.empty_like(Q)
    for i0, Q_i in zip(range(0, T, block_size), Q.split(block_size, dim=-2), strict=True):
        Q_i = Q_i.float()  # (B, nh, Br, hs)
        q_pos = torch.arange(i0, i0 + Q_i.shape[-2])[:, None] + S - T  # (Br, 1)
        m_i = torch.full(Q_i.shape[:-1], float("-inf"))  # (B, nh, Br), float32
        l_i = torch.zeros(Q_i.shape[:-1])  # (B, nh, Br)
        O_i = torch.zeros(Q_i.shape)  # (B, nh, Br, hs)
        tiles = zip(K.split(block_size, dim=-2), V.split(block_size, dim=-2), strict=True)
        for j, (K_j, V_j) in enumerate(tiles):
            S_ij = Q_i @ K_j.float().transpose(-2, -1) * scale  # (B, nh, Br, Bc)
            if causal:
                k_pos = torch.arange(j * block_size, j * block_size + K_j.shape[-2])[None, :]
                S_ij = S_ij.masked_fill(k_pos > q_pos, float("-inf"))
            m_new = torch.maximum(m_i, S_ij.amax(-1))  # (B, nh, Br)
            m_safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            P_ij = torch.exp(S_ij - m_safe[..., None])  # (B, nh, Br, Bc)
            correction = torch.exp(m_i - m_safe)  # (B, nh, Br)
            l_i = correction * l_i + P_ij.sum(-1)
            O_i = correction[..., None] * O_i + P_ij @ V_j.float()  # (B, nh, Br, hs)
            m_i = m_new
        O_i = torch.where(l_i[..., None] > 0, O_i / l_i[..., None], 0.0)
        out[..., i0 : i0 + block_size, :] = O_i.to(Q.dtype)
    return out


def tiled_flash1(q, k, v, block_size=64, causal=False):
    """FlashAttention's Algorithm 1 (Dao et al., 2022), its output kept normalised: per key tile
    the block's row max m̃_ij, P̃_ij = exp(S_ij - m̃_ij) and ℓ̃_ij = rowsum(P̃_ij), then
    m_new = max(m_i, m̃_ij), ℓ_new = e^(m_i - m_new) ℓ_i + e^(m̃_ij - m_new) ℓ̃_ij and
    O_i = diag(ℓ_new)^-1 (diag(ℓ_i) e^(m_i - m_new) O_i + e^(m̃_ij - m_new) P̃_ij V_j), the state
    in at least float32."""
    T, S = q.shape[-2], k.shape[-2]
    wide = torch.float64 if q.dtype == torch.float64 else torch.float32
    scale = 1.0 / math.sqrt(q.shape[-1])
    O_i = torch.zeros(q.shape, dtype=wide)  # (B, nh, T, hs)
    ell = torch.zeros((*q.shape[:-1], 1), dtype=wide)  # (B, nh, T, 1)
    m = torch.full((*q.shape[:-1], 1), float("-inf"), dtype=wide)  # (B, nh, T, 1)
    q_pos = torch.arange(T)[:, None] + S - T  # (T, 1)
    for j in range(0, S, block_size):
        K_j, V_j = k[..., j : j + block_size, :].to(wide), v[..., j : j + block_size, :].to(wide)
        S_ij = q.to(wide) @ K_j.transpose(-2, -1) * scale  # (B, nh, T, Bc)
        if causal:
            S_ij = S_ij.masked_fill(torch.arange(j, j + K_j.shape[-2]) > q_pos, float("-inf"))
        m_ij = S_ij.amax(-1, keepdim=True)  # (B, nh, T, 1)
        P_ij = torch.exp(S_ij - torch.where(m_ij.isneginf(), 0.0, m_ij))  # (B, nh, T, Bc)
        l_ij = P_ij.sum(-1, keepdim=True)
        m_new = torch.maximum(m, m_ij)
        m_ref = torch.where(m_new.isneginf(), 0.0, m_new)
        old, new = torch.exp(m - m_ref), torch.exp(m_ij - m_ref)
        l_new = old * ell + new * l_ij
        O_i = (ell * old * O_i + new * (P_ij @ V_j)) / torch.where(l_new > 0, l_new, 1.0)
        m, ell = m_new, l_new
    return O_i.to(q.dtype)


def tiled_padded(q, k, v, block_size=64, causal=False, return_lse=False):
    """K and V padded with ``F.pad`` to whole blocks, so every tile has ``block_size`` keys; the
    padded keys are masked out with the future ones. With ``return_lse``, also each query's
    log-sum-exp ``m + log l`` (``-inf`` where no key is allowed), as notebook 06 asks."""
    B, nh, T, hs = q.shape
    S = k.shape[-2]
    extra = -S % block_size
    k, v = F.pad(k, (0, 0, 0, extra)), F.pad(v, (0, 0, 0, extra))  # (B, nh, S + extra, hs)
    m = q.new_full((B, nh, T, 1), float("-inf"))
    l_i = q.new_zeros((B, nh, T, 1))
    acc = q.new_zeros((B, nh, T, v.shape[-1]))
    last_key = torch.arange(T)[:, None] + S - T if causal else torch.full((T, 1), S - 1)
    for start in range(0, S + extra, block_size):
        kb, vb = k[..., start : start + block_size, :], v[..., start : start + block_size, :]
        s = q @ kb.transpose(-2, -1) / math.sqrt(hs)  # (B, nh, T, b)
        cols = torch.arange(start, start + block_size)  # (b,)
        s = s.masked_fill(cols[None, :] > last_key, float("-inf"))
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))  # (B, nh, T, 1)
        m_ref = torch.where(torch.isinf(m_new), 0.0, m_new)
        alpha = torch.exp(m - m_ref)
        p = torch.exp(s - m_ref)  # (B, nh, T, b)
        l_i = l_i * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ vb  # (B, nh, T, hs)
        m = m_new
    out = torch.where(l_i > 0, acc / l_i, 0.0)
    return (out, (m + torch.log(l_i)).squeeze(-1)) if return_lse else out


CORRECT_TILED = {
    "FlashAttention Algorithm 1, normalised each tile": tiled_flash1,
    "textbook": tiled_reference_style,
    "2-D tiles, fp32 accumulators": tiled_two_dimensional,
    "log-sum-exp merge": tiled_logsumexp_merge,
    "FlashAttention-2 port, fp32 state for every dtype": tiled_flash2_float32,
    "K and V padded to whole blocks with F.pad": tiled_padded,
}


def _buggy(q, k, v, block_size=64, causal=False, *, bug: str):
    """The textbook loop with one classic mistake switched on."""
    B, nh, T, hs = q.shape
    S = k.shape[-2]
    scale = 1.0 if bug == "no_scale" else 1 / math.sqrt(hs)
    if bug == "dtype_float" and q.dtype in (torch.float16, torch.bfloat16):
        q, k, v = q.float(), k.float(), v.float()  # ... and never cast back
    if bug == "inplace":
        q, scale = q.mul_(scale), 1.0
    m = q.new_full((B, nh, T, 1), float("-inf"))
    l_i = q.new_zeros((B, nh, T, 1))
    acc = q.new_zeros((B, nh, T, hs))
    # causal_offset_reversed: j <= i + T - S, the offset with its sign flipped
    shift = {"causal_strict": -1, "causal_top_left": T - S, "causal_offset_reversed": 2 * (T - S)}
    shift = shift.get(bug, 0)
    last_key = torch.arange(T)[:, None] + S - T + shift
    stop = S - block_size + 1 if bug == "drop_ragged" else S
    for start in range(0, stop, block_size):
        kb, vb = k[..., start : start + block_size, :], v[..., start : start + block_size, :]
        s = q @ kb.transpose(-2, -1) * scale
        if causal and bug != "causal_ignored":
            first = 0 if bug == "causal_local" else start
            cols = torch.arange(first, first + kb.shape[-2])
            fill = torch.finfo(s.dtype).min if bug == "finite_fill" else float("-inf")
            s = s.masked_fill(cols[None, :] > last_key, fill)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        if bug == "max_not_updated":
            m_new = s.amax(-1, keepdim=True) if start == 0 else m
        if bug == "no_max":
            m_new = torch.zeros_like(m)
        m_ref = m_new if bug == "nan_empty_rows" else torch.where(torch.isinf(m_new), 0.0, m_new)
        alpha = torch.exp(m - m_ref)
        if bug in ("no_rescale", "max_not_updated", "no_max"):
            alpha = torch.ones_like(alpha)
        if bug == "inverted":
            alpha = torch.exp(m_ref - m)
        p = torch.exp(s - m_ref)
        l_new = l_i * alpha + p.sum(-1, keepdim=True)
        if bug == "per_block_sum":
            acc = acc + torch.nan_to_num(p / p.sum(-1, keepdim=True)) @ vb
        elif bug == "overwrite_acc":
            acc = p @ vb
        elif bug == "divide_in_loop":
            acc = (acc * alpha + p @ vb) / l_new
        else:
            acc = acc * alpha + p @ vb
        l_i, m = l_new, m_new
    if bug in ("no_division", "per_block_sum", "divide_in_loop"):
        return acc
    if bug == "nan_empty_rows":
        return acc / l_i
    return torch.where(l_i > 0, acc / l_i, 0.0)


def tiled_materialised(q, k, v, block_size=64, causal=False):
    T, S = q.shape[-2], k.shape[-2]
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, nh, T, S): the whole matrix
    if causal:
        s = s.masked_fill(~torch.ones(T, S, dtype=torch.bool).tril(S - T), float("-inf"))
    return torch.nan_to_num(torch.softmax(s, -1)) @ v


def tiled_over_queries(q, k, v, block_size=64, causal=False):
    out = [
        tiled_materialised(q[..., start : start + block_size, :], k, v)
        for start in range(0, q.shape[-2], block_size)
    ]
    if causal:
        return tiled_reference_style(q, k, v, block_size, causal)
    return torch.cat(out, dim=-2)


def tiled_full_mask(q, k, v, block_size=64, causal=False):
    T, S = q.shape[-2], k.shape[-2]
    allowed = torch.arange(S)[None, :] <= torch.arange(T)[:, None] + S - T  # (T, S)
    m = torch.full((*q.shape[:-1], 1), float("-inf"), dtype=q.dtype)
    l_i = torch.zeros_like(m)
    acc = torch.zeros_like(q)
    for start in range(0, S, block_size):
        kb, vb = k[..., start : start + block_size, :], v[..., start : start + block_size, :]
        s = q @ kb.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if causal:
            s = s.masked_fill(~allowed[:, start : start + block_size], float("-inf"))
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        m_ref = torch.where(torch.isinf(m_new), 0.0, m_new)
        p, alpha = torch.exp(s - m_ref), torch.exp(m - m_ref)
        l_i, acc, m = l_i * alpha + p.sum(-1, keepdim=True), acc * alpha + p @ vb, m_new
    return torch.where(l_i > 0, acc / l_i, 0.0)


def tiled_half_precision(q, k, v, block_size=64, causal=False):
    """The right loop run in float16 and cast back: off by about 1e-3 for float32 inputs."""
    half = [t.half() for t in (q, k, v)]
    return tiled_reference_style(*half, block_size, causal).to(q.dtype)


def tiled_uses_sdpa(q, k, v, block_size=64, causal=False):
    T, S = q.shape[-2], k.shape[-2]
    mask = torch.ones(T, S, dtype=torch.bool).tril(S - T) if causal else None
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _bug(name: str, check, diagnosis: str) -> Mistake:
    return Mistake(name, partial(_buggy, bug=name), check, diagnosis)


MISTAKES_GET_DEVICE = [
    Mistake("stub", stub, checks.check_get_device, "not implemented yet"),
    Mistake(
        "always cpu", lambda: torch.device("cpu"), checks.check_get_device, "cuda.is_available()"
    ),
    Mistake("string", lambda: "cpu", checks.check_get_device, "torch.device('cpu')"),
    Mistake(
        "mps before cuda",
        lambda: torch.device(
            "mps"
            if torch.backends.mps.is_available()
            else "cuda"
            if torch.cuda.is_available()
            else "cpu"
        ),
        checks.check_get_device,
        "cuda.is_available() first",
    ),
    Mistake(
        "no mps",
        lambda: torch.device("cuda" if torch.cuda.is_available() else "cpu"),
        checks.check_get_device,
        "mps.is_available()",
    ),
    Mistake("always cuda", lambda: torch.device("cuda"), checks.check_get_device, "only pick cuda"),
]

MISTAKES_TILED = [
    Mistake("stub", stub, checks.check_tiled_values, "not implemented yet"),
    _bug("no_rescale", checks.check_tiled_values, "does not rescale"),
    _bug("inverted", checks.check_tiled_values, "exp(m_old − m_new), which is ≤ 1"),
    _bug("max_not_updated", checks.check_tiled_values, "running maximum"),
    _bug("no_max", checks.check_tiled_values, "running maximum"),
    _bug("no_division", checks.check_tiled_values, "without the division"),
    _bug("per_block_sum", checks.check_tiled_values, "sum of per-block softmax"),
    _bug("divide_in_loop", checks.check_tiled_values, "all keys fit in one block"),
    _bug("overwrite_acc", checks.check_tiled_values, "instead of overwriting acc"),
    _bug("drop_ragged", checks.check_tiled_values, "partial block"),
    _bug("no_scale", checks.check_tiled_values, "1/√hs"),
    _bug("inplace", checks.check_tiled_values, "in place"),
    _bug("causal_strict", checks.check_tiled_causal, "excludes the diagonal"),
    _bug("causal_top_left", checks.check_tiled_causal, "top-left"),
    _bug("causal_offset_reversed", checks.check_tiled_causal, "the mask is misaligned"),
    _bug("causal_local", checks.check_tiled_causal, "block's start"),
    _bug("causal_ignored", checks.check_tiled_causal, "is ignored"),
    Mistake("materialised", tiled_materialised, checks.check_tiled_memory, "full (T, S) score"),
    Mistake("query tiles", tiled_over_queries, checks.check_tiled_memory, "tiles the queries"),
    Mistake("full causal mask", tiled_full_mask, checks.check_tiled_memory, "mask"),
    Mistake("uses SDPA", tiled_uses_sdpa, checks.check_tiled_no_sdpa, "calls `"),
    Mistake("float16 inside", tiled_half_precision, checks.check_tiled_values, "loses precision"),
]

# caught only by the hidden (thorough) tests
MISTAKES_TILED_THOROUGH = [
    _bug("nan_empty_rows", checks.check_tiled_causal, "attend to no key"),
    _bug("finite_fill", checks.check_tiled_causal, "must be all zeros"),
    _bug("dtype_float", checks.check_tiled_values, "return the input dtype"),
]

TILED_CHECKS = [
    checks.check_tiled_values,
    checks.check_tiled_causal,
    checks.check_tiled_memory,
    checks.check_tiled_no_sdpa,
]
MISTAKES = tried(MISTAKES_GET_DEVICE + MISTAKES_TILED, runs=(VISIBLE,))
MISTAKES += tried(MISTAKES_TILED_THOROUGH, runs=(HIDDEN,), missed=MISSED)
CORRECT = correct([checks.check_get_device], CORRECT_GET_DEVICE, runs=({},)) + correct(
    TILED_CHECKS, CORRECT_TILED, runs=VISIBLE_AND_HIDDEN
)
STUBS = [(checks.check_get_device, stub)] + [(check, stub) for check in TILED_CHECKS]
REPLAY = [checks.check_get_device, checks.check_tiled_memory, checks.check_tiled_values]
