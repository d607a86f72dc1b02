"""Checks for notebook 09, section 3: packed sequences, ``pack`` and ``varlen_attention``.

Shape legend: ``B`` sequences, ``S`` the padded length, ``N`` tokens in all (the sum of the
lengths), ``nh`` query heads, ``nkv`` key/value heads, ``hs`` head size.

FlashAttention's varlen layout: the ``B`` sequences' tokens one after another in one ``(N, …)``
tensor, and ``cu_seqlens (B + 1,)`` int32, the running sum of the lengths from 0, so sequence
``b`` is rows ``cu_seqlens[b] : cu_seqlens[b + 1]``. A sequence may be empty (two equal
boundaries).

PyTorch is the oracle: boolean indexing ``x[attention_mask]`` packs a padded batch, and
``F.scaled_dot_product_attention(..., is_causal=causal, enable_gqa=True)`` run on each sequence
alone is what attention over the packed tensor must give. Known mistakes are rebuilt as masks
over the packed tensor (a causal mask with no sequence boundaries, boundaries one token off, a
block-diagonal mask that forgets ``causal``) and named when the result equals one of them.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from autograder.checks import operators
from autograder.torch_helpers import one_thread

from ._core import (
    call,
    close,
    describe,
    expect_pair,
    expect_shape,
    expect_tensor,
    expect_unmodified,
    fail,
    first_match,
    make_generator,
    randint,
    randn,
)

#: Learner code may call PyTorch's SDPA on each sequence, or with a mask over the packed tensor.
OPERATORS = operators.DEFAULT | operators.SDPA

#: Learner-importable names that would compute these answers: none.
ANSWERS_IN_TOOLS: dict[str, str] = {}

PACK = "pack"
VARLEN = "varlen_attention"


def cu_seqlens_of(lengths: list[int]) -> torch.Tensor:
    """``(B + 1,)`` int32: 0, then the running sum of ``lengths``."""
    return F.pad(torch.tensor(lengths).cumsum(0), (1, 0)).to(torch.int32)


# ------------------------------------------------------------------- pack


def _padded(lengths: list[int], S: int, left: bool) -> torch.Tensor:
    """``(B, S)`` bool: ``lengths[b]`` real tokens, padded on the left or on the right."""
    mask = torch.arange(S)[None] < torch.tensor(lengths)[:, None]  # (B, S), real tokens first
    return mask.flip(1) if left else mask


def _pack_cases(gen, thorough: bool) -> list[tuple[list[int], int, bool, tuple[int, ...]]]:
    """``(lengths, S, left padding, trailing shape)``."""
    cases = [([3, 5, 1], 5, False, (4,)), ([2, 4, 4], 6, True, (2, 3)), ([4], 4, False, (2,))]
    for _ in range(3 if thorough else 0):
        S = randint(gen, 2, 6)
        lengths = [randint(gen, 0, S) for _ in range(randint(gen, 2, 4))]
        lengths[0] = max(lengths[0], 1)
        cases.append((lengths, S, bool(randint(gen, 0, 1)), (randint(gen, 1, 3), 2)))
    return cases


@one_thread
def check_pack(pack: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``pack(x, attention_mask)``: ``x (B, S, …)`` and its ``(B, S)`` bool mask (True where a
    token is real, padding on either side) give ``(packed (N, …), cu_seqlens (B + 1,) int32)``,
    sequence after sequence, each in its order."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for lengths, S, left, rest in _pack_cases(gen, thorough):
        x = randn(gen, len(lengths), S, *rest, dtype=torch.float32)
        mask = _padded(lengths, S, left)
        args = (x, mask)
        before = (x.clone(), mask.clone())
        result = call(pack, PACK, args, hint="x is (B, S, ...), attention_mask (B, S)")
        expect_unmodified(before, args, PACK)
        packed, cu = expect_pair(result, PACK, "packed", "cu_seqlens")
        where = f"`{PACK}` of sequences of lengths {lengths} padded to {S} on the " + (
            "left" if left else "right"
        )
        _expect_cu_seqlens(cu, lengths, where)
        expected = x[mask]  # (N, ...): row-major, so sequence after sequence
        expect_shape(packed, expected.shape, f"The packed tensor of {where}", describe(args))
        if close(packed, expected):
            continue
        right = torch.cat([x[b, :n] for b, n in enumerate(lengths)])
        fail(
            first_match(
                packed,
                {
                    f"{where} takes each sequence's first tokens: with padding on the left they "
                    "are padding. Keep the positions where attention_mask is True.": right,
                    f"{where} packs position by position (the first token of every sequence, "
                    "then the second...): each sequence's tokens must stay together, "
                    "x[attention_mask] reads row by row.": x.transpose(0, 1)[mask.T],
                },
            )
            or f"{where} does not hold each sequence's real tokens, in order, one sequence "
            "after another."
        )


def _expect_cu_seqlens(cu: torch.Tensor, lengths: list[int], where: str) -> None:
    __tracebackhide__ = True
    expected = cu_seqlens_of(lengths)
    sums = expected[1:]
    if cu.shape == sums.shape and torch.equal(cu.long(), sums.long()):
        fail(
            f"The cu_seqlens of {where} lack the leading 0: B sequences have B + 1 boundaries, "
            "0 first, so that sequence b is rows cu_seqlens[b] : cu_seqlens[b + 1]."
        )
    if cu.shape != expected.shape:
        fail(
            f"The cu_seqlens of {where} have shape {tuple(cu.shape)}: B + 1 boundaries, "
            f"{tuple(expected.shape)} here."
        )
    if torch.equal(cu.long(), expected.long()):
        if cu.dtype != torch.int32:
            fail(
                f"The cu_seqlens of {where} are {cu.dtype}: FlashAttention's varlen kernels "
                "take int32 boundaries (cumsum(..., dtype=torch.int32))."
            )
        return
    if torch.equal(cu.long(), F.pad(torch.tensor(lengths), (1, 0))):
        fail(
            f"The cu_seqlens of {where} hold the lengths: they are the running sum of the "
            "lengths (cumsum), from 0."
        )
    if torch.equal(cu.long(), expected.long() - 1) or torch.equal(cu.long()[1:], sums - 1):
        fail(
            f"The cu_seqlens of {where} are one lower than the boundaries: cu_seqlens[b + 1] "
            "is where sequence b ends, exclusive (its last row plus one)."
        )
    fail(
        f"The cu_seqlens of {where} are not 0 and the running sum of the sequences' "
        "lengths (attention_mask.sum(1))."
    )


# ------------------------------------------------------------------- varlen_attention


def attend_packed(q, k, v, cu_seqlens, causal: bool, **how) -> torch.Tensor:
    """Attention over the packed tensors with a mask, ``(N, nh, hs)``: block-diagonal (and
    causal inside each block) unless ``how`` says otherwise: ``leak`` (no blocks), ``flat``
    (blocks, never causal), ``always_causal``, ``shifted`` (each sequence's first token counted
    in the sequence before), ``tiled`` (key heads repeated, not interleaved)."""
    N = q.shape[0]
    pos = torch.arange(N)
    seq = torch.searchsorted(cu_seqlens.long(), pos, right=not how.get("shifted"))  # (N,)
    allowed = torch.ones(N, N, dtype=torch.bool) if how.get("leak") else seq[:, None] == seq
    if (causal and not how.get("flat")) or how.get("always_causal"):
        allowed &= pos[None] <= pos[:, None]  # (N, N): key position <= query position
    qh, kh, vh = (t.transpose(0, 1) for t in (q, k, v))  # (nh, N, hs), (nkv, N, hs) twice
    if how.get("tiled"):
        group = q.shape[1] // k.shape[1]
        kh, vh = kh.repeat(group, 1, 1), vh.repeat(group, 1, 1)
    out = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=allowed, enable_gqa=True)
    return out.transpose(0, 1)  # (nh, N, N) @ (nh, N, hs) -> (nh, N, hs) -> (N, nh, hs)


def _one_by_one(q, k, v, lengths: list[int], causal: bool) -> torch.Tensor:
    """Each sequence alone through SDPA: the oracle, ``(N, nh, hs)``."""
    outs, start = [], 0
    for n in lengths:
        qs, ks, vs = (t[start : start + n].transpose(0, 1) for t in (q, k, v))  # (nh|nkv, n, hs)
        o = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, enable_gqa=True)
        outs.append(o.transpose(0, 1))  # (n, nh, hs)
        start += n
    return torch.cat(outs)


def _varlen_configs(gen, thorough: bool) -> list[tuple[int, int, list[int], bool]]:
    """``(nh, nkv, lengths, causal)``: GQA, MHA, MQA, one sequence, causal and not."""
    configs = [
        (4, 2, [3, 5, 1], True),
        (2, 2, [4, 2, 3], False),
        (3, 1, [1, 6, 2], True),
        (2, 1, [5], True),
    ]
    for _ in range(3 if thorough else 0):
        nkv = randint(gen, 1, 2)
        lengths = [randint(gen, 0, 6) for _ in range(randint(gen, 2, 4))]
        lengths[-1] = max(lengths[-1], 1)
        configs.append((nkv * randint(gen, 1, 2), nkv, lengths, bool(randint(gen, 0, 1))))
    return configs


@one_thread
def check_varlen_attention(
    varlen_attention: Callable, *, seed: int = 0, thorough: bool = False
) -> None:
    """``varlen_attention(q (N, nh, hs), k (N, nkv, hs), v, cu_seqlens (B + 1,), causal=...)``
    equals attention over each sequence alone (causal inside it when ``causal``), the outputs
    packed the same way."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for nh, nkv, lengths, causal in _varlen_configs(gen, thorough):
        N, hs = sum(lengths), 4
        q = randn(gen, N, nh, hs, dtype=torch.float32)
        k = randn(gen, N, nkv, hs, dtype=torch.float32)
        v = randn(gen, N, nkv, hs, dtype=torch.float32)
        cu = cu_seqlens_of(lengths)
        args, kwargs = (q, k, v, cu), {"causal": causal}
        before = tuple(t.clone() for t in args)
        out = call(varlen_attention, VARLEN, args, kwargs, hint="q is (N, nh, hs)")
        expect_unmodified(before, args, VARLEN)
        out = expect_tensor(out, VARLEN)
        where = f"`{VARLEN}` with lengths {lengths}, nh={nh}, nkv={nkv}, causal={causal}"
        expect_shape(out, q.shape, f"The output of {where}", describe(args, kwargs), "like q")
        if close(out, _one_by_one(q, k, v, lengths, causal)):
            continue
        _diagnose(out, args, causal, where)


def _diagnose(out, args, causal: bool, where: str) -> None:
    __tracebackhide__ = True
    cases = {
        f"{where} lets tokens attend to other sequences' tokens (the mask leaks across "
        "sequences): a query of sequence b sees only rows cu_seqlens[b] : cu_seqlens[b + 1] "
        "(a block-diagonal mask).": {"leak": True},
        f"{where} counts the first token of each sequence in the sequence before it: token p "
        "belongs to sequence b when cu_seqlens[b] <= p < cu_seqlens[b + 1] (searchsorted "
        "with right=True, minus 1).": {"shifted": True},
        f"{where} is not causal inside each sequence: with causal=True a token sees its own "
        "sequence's earlier tokens and itself only.": {"flat": True},
        f"{where} is causal though causal=False: then every token sees its whole sequence.": {
            "always_causal": True
        },
        f"{where} gives query head h the key head h % nkv (repeat): with GQA it is h // "
        "(nh // nkv), as repeat_interleave or enable_gqa=True lay them out.": {"tiled": True},
    }
    wrong = {why: attend_packed(*args, causal, **how) for why, how in cases.items()}
    fail(
        first_match(out, wrong)
        or f"{where} differs from attention over each sequence alone: sequence b is rows "
        "cu_seqlens[b] : cu_seqlens[b + 1] of q, k and v, and of the output."
    )
