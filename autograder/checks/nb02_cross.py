"""Checks for notebook 02, section 9: cross-attention over a padded encoder output.

Shape legend: ``B`` batch, ``T`` query (decoder) length, ``S`` key/value (encoder) length,
``C`` = d_model, ``nh`` heads.

The oracle is ``nn.MultiheadAttention`` holding the weights of the learner's own
``MultiHeadAttention``, with a ``key_padding_mask``. When ``cross_attend`` raises, the check runs it
once more where ``T = S`` and ``B = 1``, where any mix-up of the inputs and any mask layout
broadcasts, and names the call of ``mha`` whose result it returned.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch

from . import _multihead as mha
from . import operators
from ._core import (
    CheckFailure,
    call,
    close,
    describe,
    expect_pair,
    expect_shape,
    fail,
    first_match,
    make_generator,
    randint,
    randn,
)

OPERATORS = operators.DEFAULT | operators.MODEL

#: No tool computes these answers (TorchMultiHeadAttention is withheld by nb02_multihead).
ANSWERS_IN_TOOLS: dict[str, str] = {}

CROSS = "cross_attend"
DEC, ENC = "decoder_x", "encoder_out"
_SHAPES = (
    "the query is decoder_x (B, T, C), key and value are encoder_out (B, S, C), and the mask "
    "(B, 1, 1, S) must broadcast against the weights (B, nh, T, S)"
)


def _padding(lengths: torch.Tensor, S: int) -> torch.Tensor:
    """``(B,) -> (B, S)``: True for the real (not padded) encoder positions."""
    return torch.arange(S) < lengths[:, None]  # (B, S)


def _reference(weights, nh, query, key, value=None, blocked_keys=None, blocked=None):
    """nn.MultiheadAttention: ``blocked_keys`` is its key_padding_mask (B, S), True = ignore;
    ``blocked`` an attn_mask (B, nh, T, S), True = blocked."""
    twin = mha.torch_twin(weights, nh)
    (B, T), S = query.shape[:2], key.shape[1]
    if blocked is not None:
        blocked = blocked.expand(B, nh, T, S).reshape(B * nh, T, S)  # torch's mask layout
    with torch.no_grad():
        return twin(
            query,
            key,
            key if value is None else value,
            key_padding_mask=blocked_keys,
            attn_mask=blocked,
            average_attn_weights=False,
        )


def _cross_mistake(weights, nh, dec, enc, lengths, out, attn) -> str:
    """One sentence naming the probable mistake in ``cross_attend``'s result."""
    B, S = enc.shape[0], enc.shape[1]
    keep = _padding(lengths, S)  # (B, S)
    padded = ~keep[:, None, None, :]  # (B, 1, 1, S)
    if torch.equal(attn.ne(0).any(1).any(1), _padding(lengths - 1, S)):
        return (
            "Your mask drops the last real encoder position: sequence b's real positions are "
            "0 … encoder_lengths[b] − 1, so keep s < encoder_lengths[b], not "
            "s < encoder_lengths[b] − 1."
        )
    if (attn.sum(-1) == 0).any():
        return (
            "Some decoder queries got no weight at all: the padding is on the encoder's keys "
            "(the last axis, S), so build the mask from arange(S) < encoder_lengths[:, None] "
            "and never mask decoder positions."
        )
    if (attn * padded).abs().sum() == 0:
        return ""
    candidates = {
        "Your cross-attention ignores the encoder padding: pass mask=... with True for the real "
        "encoder positions, shaped (B, 1, 1, S) so it broadcasts over heads and queries.": (
            _reference(weights, nh, dec, enc)[0]
        ),
        "Your mask lets the padded encoder positions through and blocks the real ones: "
        "nn.MultiheadAttention's key_padding_mask means True = ignore, but MultiHeadAttention's "
        "mask means True = may attend.": _reference(weights, nh, dec, enc, blocked_keys=keep)[0],
        "Your mask is off by one: encoder position s is real iff s < encoder_lengths[b], "
        "not <=.": _reference(weights, nh, dec, enc, blocked_keys=~_padding(lengths + 1, S))[0],
        "Your mask uses one length, the longest, for every sequence: build it per sequence, "
        "arange(S) < encoder_lengths[:, None].": _reference(
            weights, nh, dec, enc, blocked_keys=~_padding(lengths.max().expand(B), S)
        )[0],
    }
    if B == nh:
        lined_up = ~keep[None, :, None, :]  # (1, nh=B, 1, S): sequence h's padding on head h
        why = (
            "Your (B, 1, S) padding mask lines the batch up with the heads (it broadcasts as "
            "(1, B, 1, S) against (B, nh, T, S)): shape it (B, 1, 1, S)."
        )
        candidates[why] = _reference(weights, nh, dec, enc, blocked=lined_up)[0]
    return first_match(out, candidates) or (
        "Padded encoder positions still get weight: the mask must be False exactly where "
        "s >= encoder_lengths[b], shaped (B, 1, 1, S)."
    )


def _probe(cross_attend, module, gen, B, L, C):
    """``cross_attend`` where ``T = S = L``: its inputs and ``out``, or None when it raises."""
    dec, enc = randn(gen, B, L, C), randn(gen, B, L, C)  # (B, L, C) each
    lengths = torch.tensor([3, 5, 2, 4][:B])  # (B,): padding in most sequences
    try:
        result = call(cross_attend, CROSS, (module, dec, enc, lengths))
        out, _ = expect_pair(result, CROSS, "out", "weights")
    except CheckFailure:
        return None
    return {DEC: dec, ENC: enc}, lengths, out


def _roles(query, key, value, shapes) -> str:
    """The sentence for ``mha(query, key, value)`` called with the wrong tensors."""
    if query == key == value == DEC:
        lead = "Your cross_attend attends over the decoder itself"
    elif query == ENC and key == value == DEC:
        lead = "Your cross_attend swaps the roles of the two sequences"
    else:
        lead = "Your cross_attend passes the wrong tensors to mha"
    return (
        f"{lead}: it calls mha(query={query}, key={key}, value={value}) with {DEC} "
        f"{shapes[DEC]} and {ENC} {shapes[ENC]}, so the shapes clash; the decoder asks and the "
        f"encoder answers: mha({DEC}, {ENC}, {ENC}, mask=...)."
    )


def _raised(cross_attend, module, weights, nh, dec, enc) -> str:
    """Why ``cross_attend`` raised on ``dec`` (B, T, C) and ``enc`` (B, S, C), or ""."""
    (B, T, C), S = dec.shape, enc.shape[1]
    shapes = {DEC: f"(B, T, C) = {(B, T, C)}", ENC: f"(B, S, C) = {(B, S, C)}"}
    gen = make_generator(17)
    found = _probe(cross_attend, module, gen, 1, 5, C)
    if found is None:
        return ""
    tensors, lengths, out = found
    blocked_keys = ~_padding(lengths, 5)  # (1, S)
    for roles in itertools.product((DEC, ENC), repeat=3):
        q, k, v = (tensors[r] for r in roles)
        if close(out, _reference(weights, nh, q, k, v, blocked_keys)[0]):
            break
    else:
        return ""
    if roles != (DEC, ENC, ENC):
        return _roles(*roles, shapes)
    batch = 2 if nh != 2 else 3
    found = _probe(cross_attend, module, gen, batch, 5, C)
    right = found is not None and close(
        found[2],
        _reference(weights, nh, found[0][DEC], found[0][ENC], None, ~_padding(found[1], 5))[0],
    )
    if not right:
        return (
            f"Your padding mask works for one sequence but not for a batch of {batch}: its batch "
            "axis does not line up with dim 0 of the weights (B, nh, T, S) (a (B, S) mask "
            "broadcasts as (1, 1, B, S), a (B, 1, S) one as (1, B, 1, S)); shape it (B, 1, 1, S) "
            "with keep[:, None, None, :]."
        )
    return (
        f"Your mask spans the decoder's T positions: it works when T = S, but with {DEC} "
        f"{shapes[DEC]} and {ENC} {shapes[ENC]} it cannot fit the weights (B, nh, T, S); the "
        f"padding is on the encoder's keys, so build it from torch.arange({ENC}.shape[1])."
    )


def check_cross_attend(
    cross_attend: Callable, mha_cls: Callable, *, seed: int = 0, thorough: bool = False
) -> None:
    """Decoder queries over padded encoder keys/values equal nn.MultiheadAttention with a
    key_padding_mask, the learner's own ``MultiHeadAttention`` doing the attending."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    cases = [(2, 4, 6, 12, 3), (3, 5, 7, 12, 3), (1, 3, 2, 8, 2)]  # (B, T, S, C, nh)
    if thorough:
        cases += [(4, 6, 9, 16, 4), (2, 7, 3, 12, 6), (5, 2, 8, 10, 1)]
    first = cases[0]
    module, weights = mha.build(mha_cls, first[3], first[4], gen)
    mha.compare(
        module,
        first[4],
        weights,
        mha.cross_inputs(gen, first[3]),
        context="Fix your MultiHeadAttention first (its test cells name the mistake): ",
    )
    for i, (B, T, S, C, nh) in enumerate(cases):
        module, weights = mha.build(mha_cls, C, nh, gen)
        dec, enc = randn(gen, B, T, C), randn(gen, B, S, C)  # (B, T, C), (B, S, C)
        lengths = torch.tensor([randint(gen, 1, max(1, S - 1)) for _ in range(B)])  # (B,)
        if i == 0:
            lengths[0] = 1  # one real encoder position only
        elif B > 1:
            lengths[-1] = S  # one sequence without padding
        args = (module, dec, enc, lengths)
        try:
            result = call(cross_attend, CROSS, args, hint=_SHAPES)
        except CheckFailure as failure:
            if "invert" in str(failure):
                fail(
                    "Your mask is not a bool tensor: MultiHeadAttention fills the scores where "
                    "~mask, so build it with a comparison (True = real encoder position) and "
                    "do not convert it with .float() or .long()."
                )
            why = _raised(cross_attend, module, weights, nh, dec, enc)
            if why:
                fail(why)
            raise
        out, attn = expect_pair(result, CROSS, "out", "weights")
        inputs = describe(args)
        hint = ""
        if out.shape == (B, S, C) and S != T:
            hint = "the queries come from decoder_x: call mha(decoder_x, encoder_out, encoder_out)"
        expect_shape(out, (B, T, C), "`out`", inputs, hint)
        hint = ""
        if attn.shape == (B, nh, T, T):
            hint = "attend over encoder_out: pass it as key and value, decoder_x as query"
        expect_shape(attn, (B, nh, T, S), "`weights`", inputs, hint)
        ref_out, ref_attn = _reference(weights, nh, dec, enc, None, ~_padding(lengths, S))
        if close(out, ref_out) and close(attn, ref_attn):
            continue
        fail(
            _cross_mistake(weights, nh, dec, enc, lengths, out, attn)
            or f"`{CROSS}` differs from nn.MultiheadAttention with the same weights and "
            f"key_padding_mask for inputs {inputs}: the decoder gives the queries, the encoder "
            "the keys and values."
        )
