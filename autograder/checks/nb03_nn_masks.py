"""Checks for notebook 03: ``to_nn_mha_masks``, the course's masks in ``nn.MultiheadAttention``'s
convention.

Shape legend: ``B`` batch, ``T`` length (queries and keys), ``C`` = d_model, ``nh`` heads.

The pair returned means True = blocked (``nn.MultiheadAttention``'s convention), the reverse of
the course's masks (checked in :mod:`.nb03_masking`). PyTorch is the oracle:
``nn.MultiheadAttention`` run with the learner's masks must equal SDPA given the course's mask
(:mod:`._masks`), on the same weights; known-wrong pairs (not inverted, no causal mask, the
diagonal blocked) are named.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from . import _masks as masks
from ._core import call, describe, expect_tensor, fail, fmt_shape, make_generator, randn

#: Learner-importable names that would compute this answer: none.
ANSWERS_IN_TOOLS: dict[str, str] = {}

NN_MASKS = "to_nn_mha_masks"


def _reference_mha(mha: nn.MultiheadAttention, x: torch.Tensor, allowed: torch.Tensor):
    """The output of ``mha`` (batch_first) computed with SDPA and a True = may-attend mask."""
    B, T, C = x.shape
    q, k, v = F.linear(x, mha.in_proj_weight, mha.in_proj_bias).chunk(3, dim=-1)  # 3 × (B, T, C)
    heads = [t.view(B, T, mha.num_heads, -1).transpose(1, 2) for t in (q, k, v)]  # (B, nh, T, hs)
    out = masks.attend(*heads, allowed)  # (B, nh, T, hs)
    return mha.out_proj(out.transpose(1, 2).reshape(B, T, C))  # (B, T, C)


def _nn_variants(lengths, max_len, causal) -> dict[str, tuple]:
    real = masks.real(lengths, max_len)  # (B, T)
    future = ~masks.causal(max_len, max_len)  # (T, T), True = blocked
    variants = {
        f"`{NN_MASKS}` returned the course's meaning (True = may attend) for both masks: "
        "nn.MultiheadAttention blocks where they are True, so invert both.": (~future, real),
        f"`{NN_MASKS}` returned a key_padding_mask with True for real tokens: "
        "nn.MultiheadAttention wants True for padding.": (future, real),
    }
    if causal:
        variants |= {
            f"`{NN_MASKS}` returned an attn_mask with True for allowed pairs: "
            "nn.MultiheadAttention wants True where the key is in the future.": (~future, ~real),
            f"`{NN_MASKS}` returned no attn_mask although causal=True: block future keys with "
            "a (T, T) mask that is True above the diagonal.": (None, ~real),
            f"`{NN_MASKS}` blocks the diagonal as well: a query may attend to itself, so only "
            "keys strictly after it are True (triu with diagonal=1).": (
                ~masks.tril(max_len, max_len, -1),
                ~real,
            ),
        }
    return variants


def _same_masks(mine, ref) -> bool:
    if mine is None or ref is None:
        return mine is None and ref is None
    return isinstance(mine, torch.Tensor) and mine.shape == ref.shape and torch.equal(mine, ref)


def check_to_nn_mha_masks(to_nn_mha_masks: Callable, *, seed: int = 0, thorough: bool = False):
    """``nn.MultiheadAttention(batch_first=True)`` with your masks equals SDPA with the course's."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    C, nh = 8, 2
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        mha = nn.MultiheadAttention(C, nh, batch_first=True).double().eval()
    cases = [(torch.tensor([3, 5, 1]), 5, True), (torch.tensor([2, 4]), 4, False)]
    if thorough:
        cases += [(torch.randint(1, 9, (3,), generator=gen), 8, c) for c in (True, False)]
    for lengths, T, causal in cases:
        inputs = describe((lengths, T), {"causal": causal})
        pair = call(to_nn_mha_masks, NN_MASKS, (lengths, T), {"causal": causal})
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            what = type(pair).__name__
            fail(f"`{NN_MASKS}` should return a pair `(attn_mask, key_padding_mask)`, got {what}.")
        attn_mask, key_padding_mask = pair
        B = len(lengths)
        padding = expect_tensor(key_padding_mask, NN_MASKS, "a tensor as key_padding_mask")
        if tuple(padding.shape) != (B, T):
            fail(
                f"`{NN_MASKS}` returned a key_padding_mask of shape {fmt_shape(padding.shape)} "
                f"for inputs {inputs}, but nn.MultiheadAttention wants (B, T) = {fmt_shape((B, T))}"
                " whatever batch_first says."
            )
        x = randn(gen, B, T, C)  # (B, T, C)
        with torch.no_grad():
            given = {"attn_mask": attn_mask, "key_padding_mask": key_padding_mask}
            hint = f"it expects attn_mask (T, T) and key_padding_mask (B, T) for inputs {inputs}"
            out, _ = call(mha, "nn.MultiheadAttention", (x, x, x), given, hint)  # (B, T, C)
            allowed = masks.combined(masks.real(lengths, T), causal)  # (B, 1, T, T)
            expected = _reference_mha(mha, x, allowed)  # (B, T, C)
        real = masks.real(lengths, T)  # compare real queries only: padded rows are don't-care
        if torch.allclose(out[real], expected[real], atol=1e-9):  # float64 both: rounding only
            continue
        for why, (ref_attn, ref_pad) in _nn_variants(lengths, T, causal).items():
            if _same_masks(attn_mask, ref_attn) and _same_masks(key_padding_mask, ref_pad):
                fail(why)
        if out.isnan().any():
            fail(
                f"nn.MultiheadAttention returned NaN with your masks for inputs {inputs}: a "
                "query has no allowed key, so block only future keys and padding keys."
            )
        fail(
            f"nn.MultiheadAttention with your masks differs from attention with the course's "
            f"mask for inputs {inputs}: attn_mask must be True for future keys and "
            "key_padding_mask True for padding."
        )
