"""Learner implementations of notebook 09's chunked prefill, ``prefill_chunk``: written the way
Hugging Face (a mask from ``cache_position``) and FlashAttention's reference (``col > row + sk -
sq`` masked) write it, PyTorch's own ``causal_lower_right``, and the classic mistakes of the
mask."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right

from autograder.checks import nb09_chunked as checks

from . import Mistake, correct, stub

CHUNK = checks.check_prefill_chunk


def chunk_hugging_face(q, k, v):
    """Hugging Face's ``_prepare_4d_causal_attention_mask_with_cache_position``: an additive mask
    of the dtype's minimum above each query's position."""
    T, S = q.shape[-2], k.shape[-2]
    cache_position = torch.arange(S - T, S)
    min_dtype = torch.finfo(q.dtype).min
    causal_mask = torch.full((T, S), fill_value=min_dtype, dtype=q.dtype)
    causal_mask = causal_mask * (torch.arange(S) > cache_position.reshape(-1, 1))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask)


def chunk_flash_reference(q, k, v):
    """flash-attn's ``attention_ref``: scores by hand, ``col_idx > row_idx + sk - sq`` masked."""
    seqlen_q, seqlen_k = q.shape[-2], k.shape[-2]
    scores = torch.einsum("hqd,hkd->hqk", q / math.sqrt(q.shape[-1]), k)
    row_idx = torch.arange(seqlen_q).reshape(-1, 1)
    col_idx = torch.arange(seqlen_k)
    local_mask = col_idx > row_idx + seqlen_k - seqlen_q
    scores = scores.masked_fill(local_mask, float("-inf"))
    attention = torch.softmax(scores, dim=-1)
    return torch.einsum("hqk,hkd->hqd", attention, v)


def _chunk_with(mask):
    def prefill_chunk(q, k, v):
        T, S = q.shape[-2], k.shape[-2]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask(T, S))

    return prefill_chunk


def _top_left(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def _own_chunk(q, k, v):
    T = q.shape[-2]
    return F.scaled_dot_product_attention(q, k[:, -T:], v[:, -T:], is_causal=True)


CORRECT = correct(
    [CHUNK],
    {
        "Hugging Face cache_position": chunk_hugging_face,
        "flash-attn reference": chunk_flash_reference,
        "tril(S - T)": _chunk_with(lambda T, S: torch.ones(T, S, dtype=torch.bool).tril(S - T)),
        "causal_lower_right (PyTorch)": _chunk_with(causal_lower_right),
    },
)
MISTAKES = [
    Mistake("top-left (is_causal=True)", _top_left, CHUNK, "aligns its causal mask top-left"),
    Mistake("blind to earlier chunks", _own_chunk, CHUNK, "does not see the earlier chunks"),
    Mistake(
        "diagonal dropped",
        _chunk_with(lambda T, S: torch.ones(T, S, dtype=torch.bool).tril(S - T - 1)),
        CHUNK,
        "lets no query see itself",
    ),
    Mistake(
        "one future key",
        _chunk_with(lambda T, S: torch.ones(T, S, dtype=torch.bool).tril(S - T + 1)),
        CHUNK,
        "one key after it",
    ),
    Mistake(
        "no mask",
        _chunk_with(lambda T, S: torch.ones(T, S, dtype=torch.bool)),
        CHUNK,
        "has no causal mask",
    ),
]
STUBS = [(CHUNK, stub)]
REPLAY = [CHUNK]
