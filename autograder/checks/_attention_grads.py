"""The oracle of notebook 06's backward pass, and the closed forms of its classic mistakes.

Shape legend: ``B`` batch, ``nh`` heads, ``T`` query length, ``S`` key/value length, ``hs`` head
size. Causal attention is aligned bottom-right, as in the forward exercise: query ``i`` may attend
key ``j`` iff ``j <= i + S - T``; the backward checks use ``S >= T`` when causal, so every query
has a key and the log-sum-exp is finite.

The right gradients are autograd's, through ``F.scaled_dot_product_attention`` in float64 on the
CPU. Each wrong answer is what a classic slip in FlashAttention-2's backward computes, written
from full ``(T, S)`` matrices, which only the checker may afford. With the scale ``c = 1/√hs``,
scores ``s = c·q kᵀ``, the saved ``L = logsumexp(s)`` per query and ``D = rowsum(dO ∘ O)``:

    P = exp(s − L),  dV = Pᵀ dO,  dP = dO Vᵀ,  dS = P ∘ (dP − D),  dQ = c·dS K,  dK = c·dSᵀ Q.

:func:`variants` swaps one piece of that chain for the mistaken one; :func:`lse_variants` is what
a forward that returns the wrong log-sum-exp returns instead of ``L``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._online_softmax import _per_block, allowed_keys

Grads = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def f64(*ts: torch.Tensor) -> list[torch.Tensor]:
    """Detached float64 copies on the CPU."""
    return [t.detach().to("cpu", torch.float64) for t in ts]


def forward(q, k, v, causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``(o, lse)`` in float64: the output ``(B, nh, T, hs)`` and the log-sum-exp of each
    query's scaled scores ``(B, nh, T)``, what a FlashAttention forward saves."""
    q, k, v = f64(q, k, v)
    allowed = allowed_keys(q.shape[-2], k.shape[-2], causal)
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    return o, torch.logsumexp(_scores(q, k, allowed), -1)


def log_sum_exp(q, k, causal: bool) -> torch.Tensor:
    """``(B, nh, T)`` float64: ``logsumexp`` of each query's allowed scaled scores; ``-inf`` for
    a query with no allowed key (causal with ``S < T``), the log of an empty sum."""
    q, k = f64(q, k)
    return torch.logsumexp(_scores(q, k, allowed_keys(q.shape[-2], k.shape[-2], causal)), -1)


def lse_variants(q, k, causal: bool, block: int) -> dict[str, torch.Tensor]:
    """Diagnosis -> the ``(B, nh, T)`` a classic wrong ``lse`` holds here (float64)."""
    q, k = f64(q, k)
    T, S = q.shape[-2], k.shape[-2]
    allowed = allowed_keys(T, S, causal)
    s = _scores(q, k, allowed)  # (B, nh, T, S)
    m = s.amax(-1)  # (B, nh, T)
    out = {
        "Your lse is the running maximum m alone: the log-sum-exp is m + log(l), the maximum "
        "plus the log of the running sum, both taken after the last block.": m,
        "Your lse is log(l) alone: l is measured relative to the running maximum, so "
        "L = m + log(l).": torch.logsumexp(s, -1) - m,
        "Your lse is in base 2 (m and l kept with exp2, as the Triton tutorial does): the "
        "backward's exp(S − L) needs the natural log, L = ln 2 · (base-2 value).": (
            torch.logsumexp(s, -1) / math.log(2.0)
        ),
        "Your lse is taken over q kᵀ without the 1/√hs scale: L is the log-sum-exp of the "
        "scaled scores, the ones the softmax saw.": torch.logsumexp(
            _scores(q, k, allowed, 1.0), -1
        ),
    }
    if math.ceil(S / block) > 1:
        last = s[..., (math.ceil(S / block) - 1) * block :]  # (B, nh, T, last block)
        out[
            "Your lse covers only the last key block: take m + log(l) after the loop, when m and "
            "l have seen every block."
        ] = torch.logsumexp(last, -1)
    if causal:
        out[
            "Your lse ignores the causal mask: the masked keys are not in the softmax, so they "
            "are not in its log-sum-exp either."
        ] = torch.logsumexp(_scores(q, k, None), -1)
    return out


def gradients(q, k, v, do, causal: bool) -> Grads:
    """``(dq, dk, dv)`` of ``sum(o ∘ do)``: autograd through SDPA in float64."""
    q, k, v, do = (t.requires_grad_() for t in f64(q, k, v, do))
    allowed = allowed_keys(q.shape[-2], k.shape[-2], causal)
    with torch.enable_grad():
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        return torch.autograd.grad(o, (q, k, v), do.detach())


def _scores(q, k, allowed, scale=None) -> torch.Tensor:
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-2, -1) * scale  # (B, nh, T, hs) @ (B, nh, hs, S) -> (B, nh, T, S)
    return s if allowed is None else s.masked_fill(~allowed, float("-inf"))


def _chain(q, k, v, o, do, p, D=None, dq_scale=None, dk_scale=None, minus_d=False) -> Grads:
    """The backward chain from weights ``p`` (B, nh, T, S) on: the right one by default."""
    c = 1 / math.sqrt(q.shape[-1])
    D = (do * o).sum(-1, keepdim=True) if D is None else D  # (B, nh, T, 1)
    dv = p.transpose(-2, -1) @ do  # (B, nh, S, T) @ (B, nh, T, hs) -> (B, nh, S, hs)
    dp = do @ v.transpose(-2, -1)  # (B, nh, T, hs) @ (B, nh, hs, S) -> (B, nh, T, S)
    ds = p * dp - D if minus_d else p * (dp - D)  # (B, nh, T, S)
    dq = ds @ k * (c if dq_scale is None else dq_scale)  # (B, nh, T, hs)
    dk = ds.transpose(-2, -1) @ q * (c if dk_scale is None else dk_scale)  # (B, nh, S, hs)
    return dq, dk, dv


def _exp(s, shift) -> torch.Tensor:
    """exp(s − shift), 0 where the score is masked (-inf)."""
    return torch.where(torch.isinf(s), 0.0, torch.exp(s - shift))


def variants(q, k, v, do, causal: bool, block: int) -> dict[str, Grads]:
    """Diagnosis -> the ``(dq, dk, dv)`` a classic wrong backward returns here (float64)."""
    q, k, v, do = f64(q, k, v, do)
    T, S, hs = q.shape[-2], k.shape[-2], q.shape[-1]
    allowed = allowed_keys(T, S, causal)
    o, lse = forward(q, k, v, causal)
    L = lse[..., None]  # (B, nh, T, 1)
    s = _scores(q, k, allowed)  # (B, nh, T, S)
    p = _exp(s, L)
    c = 1 / math.sqrt(hs)
    out = {
        "Your dQ and dK match a backward without D: dS = P ∘ (dP − D) with D = rowsum(dO ∘ O), "
        "the softmax's correction term, computed once per query before the loop.": _chain(
            q, k, v, o, do, p, D=torch.zeros_like(L)
        ),
        "Your dQ and dK match dS = P ∘ dP − D: D must be multiplied by P too, "
        "dS = P ∘ (dP − D).": _chain(q, k, v, o, do, p, minus_d=True),
        "Your gradients match P = exp(S) without subtracting the saved log-sum-exp: recompute "
        "the softmax weights as P = exp(S − L) with the L the forward saved.": _chain(
            q, k, v, o, do, _exp(s, 0.0)
        ),
        "Your gradients match P recomputed with the 1/√hs scale left out of S: the scores must be "
        "q kᵀ/√hs, exactly as in the forward, before exp(S − L).": _chain(
            q, k, v, o, do, _exp(_scores(q, k, allowed, 1.0), L)
        ),
        "Your gradients match P recomputed from q kᵀ/hs: scale the scores by 1/√hs, as in the "
        "forward.": _chain(q, k, v, o, do, _exp(_scores(q, k, allowed, 1 / hs), L)),
        "Your dK is √hs times too large: dK = dSᵀ Q · (1/√hs), the same scale as the scores.": (
            _chain(q, k, v, o, do, p, dk_scale=1.0)
        ),
        "Your dQ is √hs times too large: dQ = dS K · (1/√hs), the same scale as the scores.": (
            _chain(q, k, v, o, do, p, dq_scale=1.0)
        ),
        "Your dQ and dK are both √hs times too large: multiply dS K and dSᵀ Q by 1/√hs.": _chain(
            q, k, v, o, do, p, dq_scale=1.0, dk_scale=1.0
        ),
        "Your dQ and dK are 1/√hs too small: the scale belongs once in dQ = dS K · (1/√hs), not "
        "also in dS.": _chain(q, k, v, o, do, p, dq_scale=c * c, dk_scale=c * c),
    }
    out[
        "Your dQ and dK match D = rowsum(P) = 1: D is rowsum(dO ∘ O) per query (which equals "
        "rowsum(P ∘ dP) over the whole row), computed once before the loop."
    ] = _chain(q, k, v, o, do, p, D=torch.ones_like(L))
    if math.ceil(S / block) > 1:
        pdp = F.pad(p * (do @ v.transpose(-2, -1)), (0, math.ceil(S / block) * block - S))
        tile_d = pdp.unflatten(-1, (-1, block)).sum(-1).repeat_interleave(block, -1)[..., :S]
        out[
            "Your dQ and dK match D taken from each tile alone, rowsum(P ∘ dP) over the tile's "
            "keys: D = rowsum(dO ∘ O) sums over the whole row (every key block), so compute it "
            "once per query before the loop."
        ] = _chain(q, k, v, o, do, p, D=tile_d)
        _, tile_lse = _per_block(s, block, lambda b: torch.logsumexp(b, -1))  # (B, nh, T, S)
        out[
            "Your gradients match P = softmax of each tile on its own: a tile holds only part of "
            "each row's keys, so recompute P = exp(S − L) with the row's saved log-sum-exp L."
        ] = _chain(q, k, v, o, do, _exp(s, tile_lse))
        last_keys = torch.arange(S) >= (math.ceil(S / block) - 1) * block  # (S,)
        dq_last = (_chain(q, k, v, o, do, p * last_keys)[0], *_chain(q, k, v, o, do, p)[1:])
        out[
            "Your dQ holds only the last key block's contribution: accumulate it across key "
            "blocks, dQ += dS_j K_j · (1/√hs), instead of overwriting it."
        ] = dq_last
    if math.ceil(T / block) > 1:
        last_queries = (torch.arange(T) >= (math.ceil(T / block) - 1) * block)[:, None]  # (T, 1)
        grads = _chain(q, k, v, o, do * last_queries, p * last_queries)
        right = _chain(q, k, v, o, do, p)
        out[
            "Your dK and dV hold only the last query block's contribution: accumulate them "
            "across query blocks (dK_j += ..., dV_j += ...) instead of overwriting them."
        ] = (right[0], grads[1], grads[2])
    if causal:
        out[
            "Your gradients match a backward without the causal mask: mask the recomputed scores "
            "of every tile (key j > i + S − T gets −inf, so P is 0 there) in the backward too."
        ] = _chain(q, k, v, o, do, _exp(_scores(q, k, None), L))
        top_left = torch.ones(T, S, dtype=torch.bool).tril()
        if S != T:
            out[
                "Your backward masks top-left (j <= i): the T queries are the last T of the S "
                "positions, so key j is allowed iff j <= i + S − T, as in the forward."
            ] = _chain(q, k, v, o, do, _exp(_scores(q, k, top_left), L))
    return out
