"""Notebook 02, section 9: cross_attend, correct and wrong.

Shape legend: ``B`` batch, ``T`` decoder length, ``S`` encoder length, ``C`` = d_model,
``nh`` heads. The MultiHeadAttention they use is the catalogue's correct one.
"""

from __future__ import annotations

import torch

from autograder.checks import nb02_cross as checks

from . import Mistake, correct, stub
from .multihead import MHASeparate


def cross_arange(mha, decoder_x, encoder_out, encoder_lengths):
    S = encoder_out.shape[1]
    keep = torch.arange(S, device=encoder_out.device) < encoder_lengths[:, None]  # (B, S)
    return mha(decoder_x, encoder_out, encoder_out, mask=keep[:, None, None, :])


def cross_view(mha, decoder_x, encoder_out, encoder_lengths):
    B, S, _ = encoder_out.shape
    positions = torch.arange(S).expand(B, S)  # (B, S)
    keep = positions < encoder_lengths.view(B, 1)
    return mha(decoder_x, key=encoder_out, value=encoder_out, mask=keep.view(B, 1, 1, S))


def cross_einops_style(mha, decoder_x, encoder_out, encoder_lengths):
    keep = (
        torch.ones_like(encoder_out[..., 0], dtype=torch.bool).cumsum(-1)
        <= encoder_lengths[:, None]
    )  # (B, S)
    return mha(decoder_x, encoder_out, encoder_out, keep.unsqueeze(1).unsqueeze(1))


def cross_fairseq(mha, decoder_x, encoder_out, encoder_lengths):
    """fairseq keeps an encoder_padding_mask, True = pad; the course's mask is its negation."""
    encoder_padding_mask = torch.arange(encoder_out.size(1))[None, :] >= encoder_lengths[:, None]
    return mha(
        query=decoder_x,
        key=encoder_out,
        value=encoder_out,
        mask=~encoder_padding_mask[:, None, None, :],
    )


def cross_annotated(mha, decoder_x, encoder_out, encoder_lengths):
    """The Annotated Transformer: src_mask (B, 1, S), then unsqueeze(1) for the heads."""
    S = encoder_out.size(1)
    src_mask = (torch.arange(S) < encoder_lengths.unsqueeze(-1)).unsqueeze(-2)  # (B, 1, S)
    return mha(decoder_x, encoder_out, encoder_out, mask=src_mask.unsqueeze(1))


def cross_hf_expanded(mha, decoder_x, encoder_out, encoder_lengths):
    """Hugging Face expands the encoder attention mask to (B, 1, T, S)."""
    (B, T, _), S = decoder_x.shape, encoder_out.shape[1]
    keep = torch.arange(S) < encoder_lengths[:, None]  # (B, S)
    return mha(decoder_x, encoder_out, encoder_out, mask=keep[:, None, None, :].expand(B, 1, T, S))


CORRECT_CROSS = {
    "arange": cross_arange,
    "view": cross_view,
    "cumsum": cross_einops_style,
    "fairseq": cross_fairseq,
    "annotated": cross_annotated,
    "hf_expanded": cross_hf_expanded,
}


def _keep(encoder_out, encoder_lengths):
    return torch.arange(encoder_out.shape[1]) < encoder_lengths[:, None]  # (B, S)


def cross_no_mask(mha, decoder_x, encoder_out, encoder_lengths):
    return mha(decoder_x, encoder_out, encoder_out)


def cross_inverted(mha, decoder_x, encoder_out, encoder_lengths):
    S = encoder_out.shape[1]
    ignore = torch.arange(S) >= encoder_lengths[:, None]  # key_padding_mask's meaning
    return mha(decoder_x, encoder_out, encoder_out, mask=ignore[:, None, None, :])


def cross_wrong_axis(mha, decoder_x, encoder_out, encoder_lengths):
    keep = _keep(encoder_out, encoder_lengths)
    return mha(decoder_x, encoder_out, encoder_out, mask=keep[:, None, :])  # (B, 1, S)


def cross_two_dims(mha, decoder_x, encoder_out, encoder_lengths):
    return mha(decoder_x, encoder_out, encoder_out, mask=_keep(encoder_out, encoder_lengths))


def cross_on_queries(mha, decoder_x, encoder_out, encoder_lengths):
    T = decoder_x.shape[1]
    keep = torch.arange(T) < encoder_lengths[:, None]  # (B, T): the decoder side
    return mha(decoder_x, encoder_out, encoder_out, mask=keep[:, None, :, None])


def cross_over_T(mha, decoder_x, encoder_out, encoder_lengths):
    B, T, _ = decoder_x.shape
    keep = torch.arange(T) < encoder_lengths[:, None]  # (B, T): sized by the wrong sequence
    return mha(decoder_x, encoder_out, encoder_out, mask=keep[:, None, None, :])


def cross_off_by_one(mha, decoder_x, encoder_out, encoder_lengths):
    S = encoder_out.shape[1]
    keep = torch.arange(S) <= encoder_lengths[:, None]
    return mha(decoder_x, encoder_out, encoder_out, mask=keep[:, None, None, :])


def cross_minus_one(mha, decoder_x, encoder_out, encoder_lengths):
    S = encoder_out.shape[1]
    keep = torch.arange(S) < encoder_lengths[:, None] - 1  # "the last index is length - 1"
    return mha(decoder_x, encoder_out, encoder_out, mask=keep[:, None, None, :])


def cross_longest(mha, decoder_x, encoder_out, encoder_lengths):
    keep = torch.arange(encoder_out.shape[1]) < encoder_lengths.max()  # (S,)
    return mha(decoder_x, encoder_out, encoder_out, mask=keep[None, None, None, :])


def cross_float_mask(mha, decoder_x, encoder_out, encoder_lengths):
    keep = _keep(encoder_out, encoder_lengths).float()  # 1.0 = real, as in Hugging Face's masks
    return mha(decoder_x, encoder_out, encoder_out, mask=keep[:, None, None, :])


def cross_swapped(mha, decoder_x, encoder_out, encoder_lengths):
    return mha(encoder_out, decoder_x, decoder_x)


def cross_swapped_masked(mha, decoder_x, encoder_out, encoder_lengths):
    keep = _keep(encoder_out, encoder_lengths)
    return mha(encoder_out, decoder_x, decoder_x, mask=keep[:, None, None, :])


def cross_over_decoder(mha, decoder_x, encoder_out, encoder_lengths):
    keep = _keep(encoder_out, encoder_lengths)
    return mha(decoder_x, decoder_x, decoder_x, mask=keep[:, None, None, :])


def cross_value_from_decoder(mha, decoder_x, encoder_out, encoder_lengths):
    keep = _keep(encoder_out, encoder_lengths)
    return mha(decoder_x, encoder_out, decoder_x, mask=keep[:, None, None, :])


def cross_self(mha, decoder_x, encoder_out, encoder_lengths):
    return mha(decoder_x)


def _cross(impl, seed=0, thorough=False):
    checks.check_cross_attend(impl, MHASeparate, seed=seed, thorough=thorough)


MISTAKES = [
    Mistake("cross: no mask", cross_no_mask, _cross, "ignores the encoder padding"),
    Mistake("cross: key_padding_mask meaning", cross_inverted, _cross, "True = ignore"),
    Mistake("cross: mask (B, 1, S)", cross_wrong_axis, _cross, "(B, 1, 1, S)"),
    Mistake("cross: mask (B, S)", cross_two_dims, _cross, "not for a batch of"),
    Mistake("cross: mask on queries", cross_on_queries, _cross, "never mask decoder positions"),
    Mistake("cross: mask sized T", cross_over_T, _cross, "spans the decoder's T positions"),
    Mistake("cross: off by one", cross_off_by_one, _cross, "off by one"),
    Mistake("cross: lengths - 1", cross_minus_one, _cross, "drops the last real encoder"),
    Mistake("cross: one length for all", cross_longest, _cross, "one length, the longest"),
    Mistake("cross: float mask", cross_float_mask, _cross, "not a bool tensor"),
    Mistake("cross: query from encoder", cross_swapped, _cross, "queries come from decoder_x"),
    Mistake("cross: roles swapped, masked", cross_swapped_masked, _cross, "swaps the roles"),
    Mistake("cross: over the decoder", cross_over_decoder, _cross, "attends over the decoder"),
    Mistake("cross: value from decoder", cross_value_from_decoder, _cross, "value=decoder_x"),
    Mistake("cross: self-attention", cross_self, _cross, "attend over encoder_out"),
]

CORRECT = correct([_cross], CORRECT_CROSS)
STUBS = [(_cross, stub)]
# Verified on a kernel with its own random state in tests/test_checks_block.py.
REPLAY: list = []
