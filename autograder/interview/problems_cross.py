"""The problem from notebook 02 §9: cross-attention over a padded encoder.

Shape legend: ``B`` batch, ``T`` decoder (query) length, ``S`` encoder (key/value) length, ``C``
= d_model, ``nh`` heads, ``hs`` = C // nh.
"""

from __future__ import annotations

import torch

from autograder.checks import nb02_cross as cross
from autograder.tools.modules import TorchMultiHeadAttention

from .problems_attention import ATTENTION_MASK
from .task import Problem, Task, Variant, course_check, layout_moved, shaped, tensors

# ----------------------------------------------------------------- cross-attention, padded


class _WrittenOutMHA(TorchMultiHeadAttention):
    """The course's ``MultiHeadAttention`` interface, its arithmetic written out: the
    cross-attention check builds its modules from it (and refuses PyTorch's packaged
    function); the learner's answer receives the module's four projections."""

    def forward(self, query, key=None, value=None, mask=None):
        key = query if key is None else key
        value = key if value is None else value
        (B, T, C), S, nh = query.shape, key.shape[1], self.num_heads
        q = self.q_proj(query).view(B, T, nh, C // nh).transpose(1, 2)  # (B, nh, T, hs)
        k, v = (
            proj(t).view(B, S, nh, C // nh).transpose(1, 2)  # (B, nh, S, hs)
            for proj, t in ((self.k_proj, key), (self.v_proj, value))
        )
        scores = q @ k.transpose(-2, -1) / (C // nh) ** 0.5  # (B, nh, T, S)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # (B, nh, T, S)
        out = (weights @ v).transpose(1, 2).reshape(B, T, C)  # (B, T, C)
        return self.out_proj(out), weights


def _cross(fn, mask_of, seq_first: bool):
    def cross_attend(module, dec, enc, lengths):
        layers = (module.q_proj, module.k_proj, module.v_proj, module.out_proj)
        S = enc.shape[1]
        if seq_first:
            dec, enc = dec.transpose(0, 1), enc.transpose(0, 1)  # (T, B, C), (S, B, C)
        result = fn(dec, enc, mask_of(lengths, S), *layers, module.num_heads)
        out, weights = tensors(result, "cross_attention", ("out", "weights"))
        if seq_first:
            shaped(out, dec.shape, "cross_attention", "`out`", "(T, B, C)")
            out = out.transpose(0, 1)
        return out, weights

    return cross_attend


def _cross_task(signature: str, contract: str, mask_of, seq_first=False) -> Task:
    grader = course_check(
        cross.check_cross_attend, lambda fn: _cross(fn, mask_of, seq_first), _WrittenOutMHA
    )
    rewrites = (
        (
            "lets the padded encoder positions through",
            "Your attention lets the padded encoder positions through and blocks the real ones: "
            "read the padding the way this variant gives it.",
        ),
    )
    return Task("cross_attention", signature, contract, (grader,), (cross.CROSS,), rewrites)


_CROSS = (
    "`q_proj`, `k_proj`, `v_proj`, `out_proj` are `nn.Linear(C, C)` layers (with biases): call "
    "them. Return `(out, weights)`, the weights (B, num_heads, T, S)."
)

CROSS_ATTENTION = Problem(
    "cross_attention",
    "Cross-attention over a padded encoder",
    "notebook 02 §9",
    "A decoder's queries attend over an encoder's output; the encoder's sequences are padded "
    "at the end, and no query may attend to padding.",
    (
        Variant(
            "key_padding_mask",
            _cross_task(
                "def cross_attention(decoder_x, encoder_out, key_padding_mask, q_proj, k_proj, "
                "v_proj, out_proj, num_heads):",
                "`decoder_x` (B, T, C), `encoder_out` (B, S, C); `key_padding_mask` (B, S) "
                "bool, **True where the encoder position is padding** (PyTorch's "
                f"`key_padding_mask`). {_CROSS} `out` is (B, T, C).",
                lambda lengths, S: torch.arange(S) >= lengths[:, None],
            ),
        ),
        Variant(
            "seq_first",
            layout_moved(
                _cross_task(
                    "def cross_attention(decoder_x, encoder_out, encoder_lengths, q_proj, k_proj, "
                    "v_proj, out_proj, num_heads):",
                    "**Sequence first**: `decoder_x` (T, B, C), `encoder_out` (S, B, C); "
                    "`encoder_lengths` (B,) holds each encoder sequence's real length. "
                    f"{_CROSS} `out` is (T, B, C).",
                    lambda lengths, S: lengths,
                    seq_first=True,
                )
            ),
        ),
    ),
    ATTENTION_MASK,
    ("mask_after_softmax", "why_heads"),
    written=("cross_attention",),
    numeric=("t5_cross_cache",),
)
