"""Learner implementations of notebook 09's packed sequences: ``pack`` and ``varlen_attention``,
written the way FlashAttention's ``unpad_input`` and its tests' padded reference, a block-diagonal
mask and a plain per-sequence loop write them, and the classic mistakes."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from autograder.checks import nb09_varlen as checks

from . import Mistake, correct, stub

PACK = checks.check_pack
VARLEN = checks.check_varlen_attention


# ------------------------------------------------------------------- pack


def pack_boolean(x, attention_mask):
    """The notebook's: boolean indexing, then the running sum of the lengths."""
    lengths = attention_mask.sum(1)
    cu_seqlens = F.pad(torch.cumsum(lengths, 0, dtype=torch.int32), (1, 0))
    return x[attention_mask], cu_seqlens


def pack_flash_attn(x, attention_mask):
    """FlashAttention's ``bert_padding.unpad_input``: flat indices of the real tokens, gathered
    with ``index_select`` from the batch seen as ``(B * S, ...)``."""
    seqlens_in_batch = attention_mask.sum(dim=-1, dtype=torch.int32)
    indices = torch.nonzero(attention_mask.flatten(), as_tuple=False).flatten()
    cu_seqlens = F.pad(torch.cumsum(seqlens_in_batch, dim=0, dtype=torch.int32), (1, 0))
    return x.flatten(0, 1).index_select(0, indices), cu_seqlens


def pack_loop(x, attention_mask):
    """One sequence at a time, as a first version would, the boundaries kept as tensors."""
    rows, bounds = [], [attention_mask.new_zeros((), dtype=torch.int32)]
    for b in range(x.shape[0]):
        rows.append(x[b][attention_mask[b]])
        bounds.append(bounds[-1] + attention_mask[b].sum())
    return torch.cat(rows), torch.stack(bounds).to(torch.int32)


def pack_bounds_read(x, attention_mask):
    """The boundaries summed in Python from lengths read with ``.tolist()``, made a tensor
    again: correct, but to the grader's replay a tensor of values read into Python, which it
    cannot tell from a table of answers (withheld for a person, ``tests/test_replay.py``)."""
    bounds = [0]
    for length in attention_mask.sum(1).tolist():
        bounds.append(bounds[-1] + length)
    return x[attention_mask], torch.tensor(bounds, dtype=torch.int32)


def _pack_with(cu=None, packed=None):
    def pack(x, attention_mask):
        out, cu_seqlens = pack_boolean(x, attention_mask)
        lengths = attention_mask.sum(1)
        if cu == "no zero":
            cu_seqlens = cu_seqlens[1:]
        elif cu == "lengths":
            cu_seqlens = F.pad(lengths, (1, 0)).to(torch.int32)
        elif cu == "minus one":
            cu_seqlens = cu_seqlens - 1
        elif cu == "int64":
            cu_seqlens = cu_seqlens.long()
        if packed == "right":
            out = torch.cat([x[b, :n] for b, n in enumerate(lengths.tolist())])
        elif packed == "by position":
            out = x.transpose(0, 1)[attention_mask.T]
        return out, cu_seqlens

    return pack


# ------------------------------------------------------------------- varlen_attention


def varlen_loop(q, k, v, cu_seqlens, causal=True):
    """The notebook's: each sequence alone through SDPA, outputs concatenated."""
    bounds = cu_seqlens.tolist()
    out = []
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        qs, ks, vs = (t[start:end].transpose(0, 1) for t in (q, k, v))
        o = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, enable_gqa=True)
        out.append(o.transpose(0, 1))
    return torch.cat(out)


def varlen_block_diagonal(q, k, v, cu_seqlens, causal=True):
    """One call over the packed tensor with a block-diagonal mask (sequence ids from the
    boundaries), causal inside each block."""
    total = q.shape[0]
    pos = torch.arange(total)
    seq_id = torch.bucketize(pos, cu_seqlens[1:].long(), right=True)
    mask = seq_id[:, None] == seq_id[None, :]
    if causal:
        mask = mask & (pos[None, :] <= pos[:, None])
    group = q.shape[1] // k.shape[1]
    kh = k.repeat_interleave(group, dim=1).transpose(0, 1)
    vh = v.repeat_interleave(group, dim=1).transpose(0, 1)
    out = F.scaled_dot_product_attention(q.transpose(0, 1), kh, vh, attn_mask=mask)
    return out.transpose(0, 1)


def varlen_padded_reference(q, k, v, cu_seqlens, causal=True):
    """FlashAttention's tests: pad the packed batch to ``(B, max_seqlen, ...)``, attend by hand
    with the key padding mask (and causal), then unpad with the query padding mask."""
    seqlens = (cu_seqlens[1:] - cu_seqlens[:-1]).long()
    batch, max_seqlen = seqlens.shape[0], int(seqlens.max())
    padding_mask = torch.arange(max_seqlen)[None] < seqlens[:, None]  # (B, S)

    def pad_input(x):
        out = x.new_zeros(batch, max_seqlen, *x.shape[1:])
        out[padding_mask] = x
        return out

    qp, kp, vp = pad_input(q), pad_input(k), pad_input(v)
    group = q.shape[1] // k.shape[1]
    kp, vp = kp.repeat_interleave(group, dim=2), vp.repeat_interleave(group, dim=2)
    scores = torch.einsum("bthd,bshd->bhts", qp / q.shape[-1] ** 0.5, kp)
    allowed = padding_mask[:, None, None, :]
    if causal:
        allowed = allowed & torch.ones(max_seqlen, max_seqlen, dtype=torch.bool).tril()
    scores = scores.masked_fill(~allowed, float("-inf"))
    attention = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    out = torch.einsum("bhts,bshd->bthd", attention, vp)
    return out[padding_mask]


def _varlen_with(**how):
    def varlen_attention(q, k, v, cu_seqlens, causal=True):
        return checks.attend_packed(q, k, v, cu_seqlens, causal, **how)

    return varlen_attention


def _varlen_one_past(q, k, v, cu_seqlens, causal=True):
    """Each sequence read one row too far: ``cu_seqlens[b] : cu_seqlens[b + 1] + 1``."""
    bounds = cu_seqlens.tolist()
    out = []
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        qs = q[start:end].transpose(0, 1)
        ks, vs = (t[start : end + 1].transpose(0, 1) for t in (k, v))
        o = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, enable_gqa=True)
        out.append(o.transpose(0, 1))
    return torch.cat(out)


CORRECT = [
    *correct(
        [PACK],
        {
            "boolean index": pack_boolean,
            "unpad_input (flash-attn)": pack_flash_attn,
            "loop": pack_loop,
            "bounds read into Python": pack_bounds_read,
        },
    ),
    *correct(
        [VARLEN],
        {
            "per-sequence loop": varlen_loop,
            "block-diagonal mask": varlen_block_diagonal,
            "padded reference (flash-attn tests)": varlen_padded_reference,
        },
    ),
]
MISTAKES = [
    Mistake("pack: no leading zero", _pack_with(cu="no zero"), PACK, "leading 0"),
    Mistake("pack: lengths", _pack_with(cu="lengths"), PACK, "hold the lengths"),
    Mistake("pack: minus one", _pack_with(cu="minus one"), PACK, "one lower"),
    Mistake("pack: int64", _pack_with(cu="int64"), PACK, "int32"),
    Mistake("pack: right padding assumed", _pack_with(packed="right"), PACK, "on the left"),
    Mistake("pack: by position", _pack_with(packed="by position"), PACK, "position by position"),
    Mistake("varlen: leaks", _varlen_with(leak=True), VARLEN, "leaks across sequences"),
    Mistake("varlen: shifted boundary", _varlen_with(shifted=True), VARLEN, "first token"),
    Mistake("varlen: not causal", _varlen_with(flat=True), VARLEN, "not causal inside"),
    Mistake("varlen: always causal", _varlen_with(always_causal=True), VARLEN, "causal=False"),
    Mistake("varlen: heads tiled", _varlen_with(tiled=True), VARLEN, "repeat_interleave"),
    Mistake("varlen: one past the end", _varlen_one_past, VARLEN, "differs from attention"),
]
STUBS = [(PACK, stub), (VARLEN, stub)]
REPLAY = [PACK, VARLEN]
