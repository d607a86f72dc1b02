"""Notebook 02, sections 9-11: cross-attention, attention dropout, the block; correct and wrong.

Shape legend: ``B`` batch, ``T`` decoder length, ``S`` encoder length, ``C`` = d_model,
``nh`` heads, ``d`` q/k width. The MultiHeadAttention they use is the catalogue's correct one.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks import nb02_block as checks

from . import Mistake, correct, stub
from .multihead import MHAFused, MHASeparate

# ---------------------------------------------------------------------------- cross-attention


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


CORRECT_CROSS = {"arange": cross_arange, "view": cross_view, "cumsum": cross_einops_style}


def cross_no_mask(mha, decoder_x, encoder_out, encoder_lengths):
    return mha(decoder_x, encoder_out, encoder_out)


def cross_inverted(mha, decoder_x, encoder_out, encoder_lengths):
    S = encoder_out.shape[1]
    ignore = torch.arange(S) >= encoder_lengths[:, None]  # key_padding_mask's meaning
    return mha(decoder_x, encoder_out, encoder_out, mask=ignore[:, None, None, :])


def cross_wrong_axis(mha, decoder_x, encoder_out, encoder_lengths):
    S = encoder_out.shape[1]
    keep = torch.arange(S) < encoder_lengths[:, None]
    return mha(decoder_x, encoder_out, encoder_out, mask=keep[:, None, :])  # (B, 1, S)


def cross_on_queries(mha, decoder_x, encoder_out, encoder_lengths):
    T = decoder_x.shape[1]
    keep = torch.arange(T) < encoder_lengths[:, None]  # (B, T): the decoder side
    return mha(decoder_x, encoder_out, encoder_out, mask=keep[:, None, :, None])


def cross_off_by_one(mha, decoder_x, encoder_out, encoder_lengths):
    S = encoder_out.shape[1]
    keep = torch.arange(S) <= encoder_lengths[:, None]
    return mha(decoder_x, encoder_out, encoder_out, mask=keep[:, None, None, :])


def cross_swapped(mha, decoder_x, encoder_out, encoder_lengths):
    return mha(encoder_out, decoder_x, decoder_x)


def cross_self(mha, decoder_x, encoder_out, encoder_lengths):
    return mha(decoder_x)


def _cross(impl, seed=0, thorough=False):
    checks.check_cross_attend(impl, MHASeparate, seed=seed, thorough=thorough)


CROSS_MISTAKES = [
    Mistake("cross: no mask", cross_no_mask, _cross, "ignores the encoder padding"),
    Mistake("cross: key_padding_mask meaning", cross_inverted, _cross, "True = ignore"),
    Mistake("cross: mask (B, 1, S)", cross_wrong_axis, _cross, "(B, 1, 1, S)"),
    Mistake("cross: mask on queries", cross_on_queries, _cross, "never mask decoder positions"),
    Mistake("cross: off by one", cross_off_by_one, _cross, "off by one"),
    Mistake("cross: query from encoder", cross_swapped, _cross, "queries come from decoder_x"),
    Mistake("cross: self-attention", cross_self, _cross, "attend over encoder_out"),
]

# ------------------------------------------------------------------------- attention dropout


def _scores(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., T, S)


def dropout_functional(q, k, v, p, training=True):
    weights = F.dropout(torch.softmax(_scores(q, k), dim=-1), p=p, training=training)
    return weights @ v, weights


def dropout_module(q, k, v, p, training=True):
    drop = nn.Dropout(p)
    drop.train(training)
    weights = drop(_scores(q, k).softmax(-1))
    return weights @ v, weights


def dropout_by_hand(q, k, v, p, training=True):
    weights = torch.softmax(_scores(q, k), dim=-1)
    if training and p > 0:
        keep = torch.rand_like(weights) >= p
        weights = weights * keep / (1 - p)
    return weights @ v, weights


def dropout_bernoulli(q, k, v, p, training=True):
    weights = torch.softmax(_scores(q, k), dim=-1)
    if training:
        weights = weights * torch.empty_like(weights).bernoulli_(1 - p) / (1 - p)
    return torch.matmul(weights, v), weights


CORRECT_DROPOUT = {
    "functional": dropout_functional,
    "module": dropout_module,
    "by_hand": dropout_by_hand,
    "bernoulli": dropout_bernoulli,
}


def dropout_before_softmax(q, k, v, p, training=True):
    weights = torch.softmax(F.dropout(_scores(q, k), p, training), dim=-1)
    return weights @ v, weights


def dropout_no_rescale(q, k, v, p, training=True):
    weights = torch.softmax(_scores(q, k), dim=-1)
    if training:
        weights = weights * (torch.rand_like(weights) >= p)
    return weights @ v, weights


def dropout_no_rescale_f(q, k, v, p, training=True):
    weights = torch.softmax(_scores(q, k), dim=-1)
    if training:
        weights = F.dropout(weights, p) * (1 - p)  # "undo" the scaling
    return weights @ v, weights


def dropout_always(q, k, v, p, training=True):
    weights = F.dropout(torch.softmax(_scores(q, k), dim=-1), p)  # training defaults to True
    return weights @ v, weights


def dropout_on_output(q, k, v, p, training=True):
    weights = torch.softmax(_scores(q, k), dim=-1)
    return F.dropout(weights @ v, p, training), weights


def dropout_keep_probability(q, k, v, p, training=True):
    weights = F.dropout(torch.softmax(_scores(q, k), dim=-1), 1 - p, training)
    return weights @ v, weights


def dropout_renormalised(q, k, v, p, training=True):
    weights = F.dropout(torch.softmax(_scores(q, k), dim=-1), p, training)
    weights = weights / weights.sum(-1, keepdim=True).clamp_min(1e-12)
    return weights @ v, weights


def dropout_eval_scaled(q, k, v, p, training=True):
    weights = torch.softmax(_scores(q, k), dim=-1)
    if training:
        weights = weights * (torch.rand_like(weights) >= p)
    else:
        weights = weights * (1 - p)
    return weights @ v, weights


def dropout_fixed_generator(q, k, v, p, training=True):
    weights = torch.softmax(_scores(q, k), dim=-1)
    if training:
        gen = torch.Generator().manual_seed(0)
        keep = torch.rand(weights.shape, generator=gen, dtype=weights.dtype) >= p
        weights = weights * keep / (1 - p)
    return weights @ v, weights


def dropout_undropped_weights(q, k, v, p, training=True):
    weights = torch.softmax(_scores(q, k), dim=-1)
    return F.dropout(weights, p, training) @ v, weights


TRAINING = checks.check_dropout_training
EVAL = checks.check_dropout_eval
DROPOUT_MISTAKES = [
    Mistake("dropout: before softmax", dropout_before_softmax, TRAINING, "before the softmax"),
    Mistake("dropout: no rescale (hand)", dropout_no_rescale, TRAINING, "not rescaled"),
    Mistake("dropout: no rescale (F)", dropout_no_rescale_f, TRAINING, "not rescaled"),
    Mistake("dropout: active in eval", dropout_always, EVAL, "active with training=False"),
    Mistake("dropout: on the output", dropout_on_output, TRAINING, "entries of the output"),
    Mistake("dropout: keep probability", dropout_keep_probability, TRAINING, "probability 1 - p"),
    Mistake("dropout: renormalised", dropout_renormalised, TRAINING, "renormalised"),
    Mistake("dropout: scaled in eval", dropout_eval_scaled, EVAL, "scaled the weights by 1 - p"),
    Mistake("dropout: fixed generator", dropout_fixed_generator, TRAINING, "Another seed"),
    Mistake(
        "dropout: none",
        lambda q, k, v, p, training=True: dropout_functional(q, k, v, p, False),
        TRAINING,
        "unchanged in training mode",
    ),
    Mistake(
        "dropout: weights before dropout", dropout_undropped_weights, TRAINING, "`out` is right"
    ),
]

# ------------------------------------------------------------------------ transformer block


class BlockSequential(nn.Module):
    def __init__(self, d_model, num_heads, attention=MHASeparate):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = attention(d_model, num_heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model)
        )

    def forward(self, x, mask=None):
        x = x + self.attn(self.ln1(x), mask=mask)[0]  # (B, T, C)
        return x + self.mlp(self.ln2(x))  # (B, T, C)


class MLP(nn.Module):
    """nanoGPT's layout: c_fc, GELU, c_proj."""

    def __init__(self, d_model):
        super().__init__()
        self.c_fc = nn.Linear(d_model, 4 * d_model)
        self.c_proj = nn.Linear(4 * d_model, d_model)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))


class BlockNanoGPT(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = MHAFused(d_model, num_heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = MLP(d_model)

    def forward(self, x, mask=None):
        attn_out, _ = self.attn(self.ln1(x), mask=mask)
        x = x + attn_out
        x = x + self.mlp(self.ln2(x))
        return x


CORRECT_BLOCK = {"sequential": BlockSequential, "nanogpt": BlockNanoGPT}


class BlockPostLN(BlockSequential):
    def forward(self, x, mask=None):
        x = self.ln1(x + self.attn(x, mask=mask)[0])
        return self.ln2(x + self.mlp(x))


class BlockReLU(BlockSequential):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.mlp[1] = nn.ReLU()


class BlockNoMask(BlockSequential):
    def forward(self, x, mask=None):
        return super().forward(x)


class BlockNoAttnResidual(BlockSequential):
    def forward(self, x, mask=None):
        x = self.attn(self.ln1(x), mask=mask)[0]
        return x + self.mlp(self.ln2(x))


class BlockNoMLPResidual(BlockSequential):
    def forward(self, x, mask=None):
        x = x + self.attn(self.ln1(x), mask=mask)[0]
        return self.mlp(self.ln2(x))


class BlockLn1Twice(BlockSequential):
    def forward(self, x, mask=None):
        x = x + self.attn(self.ln1(x), mask=mask)[0]
        return x + self.mlp(self.ln1(x))


class BlockNarrowMLP(BlockSequential):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, d_model), nn.GELU(), nn.Linear(d_model, d_model)
        )


class BlockExtraNorm(BlockSequential):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.ln_f = nn.LayerNorm(d_model)


class BlockNoLn2(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = MHASeparate(d_model, num_heads)
        self.mlp = BlockSequential(d_model, num_heads).mlp


MATCHES = checks.check_block_matches_torch
STRUCTURE = checks.check_block_structure
BLOCK_MISTAKES = [
    Mistake("block: post-LN", BlockPostLN, MATCHES, "post-LN"),
    Mistake("block: ReLU", BlockReLU, MATCHES, "ReLU"),
    Mistake("block: mask ignored", BlockNoMask, MATCHES, "ignores the mask"),
    Mistake("block: no attention residual", BlockNoAttnResidual, MATCHES, "around the attention"),
    Mistake("block: no MLP residual", BlockNoMLPResidual, MATCHES, "around the MLP"),
    Mistake("block: ln1 twice", BlockLn1Twice, MATCHES, "ln1 twice"),
    Mistake("block: MLP not 4x", BlockNarrowMLP, STRUCTURE, "4x wider"),
    Mistake("block: extra LayerNorm", BlockExtraNorm, STRUCTURE, "parameters where PyTorch's"),
    Mistake("block: no ln2", BlockNoLn2, STRUCTURE, "attribute `ln2`"),
]

# -------------------------------------------------------------------------- block parameters


def count_by_parts(d_model, d_mlp=None, bias=True):
    d_mlp = 4 * d_model if d_mlp is None else d_mlp
    attention = 4 * d_model * d_model + 4 * d_model * bias
    mlp = 2 * d_model * d_mlp + (d_mlp + d_model) * bias
    norms = 2 * d_model * (1 + bias)
    return attention + mlp + norms


def count_compact(d_model, d_mlp=None, bias=True):
    h = d_mlp or 4 * d_model
    linears = [(d_model, d_model)] * 4 + [(d_model, h), (h, d_model)]
    return sum(i * o + o * bias for i, o in linears) + 2 * (d_model + d_model * bias)


CORRECT_COUNT = {"by_parts": count_by_parts, "compact": count_compact}


def _without(part):
    def count(d_model, d_mlp=None, bias=True):
        h = 4 * d_model if d_mlp is None else d_mlp
        total = count_by_parts(d_model, d_mlp, bias)
        return total - {"ln": 2 * d_model * (1 + bias), "mlp_bias": (h + d_model) * bias}[part]

    return count


COUNT = checks.check_block_param_count
COUNT_MISTAKES = [
    Mistake("block count: no LayerNorm", _without("ln"), COUNT, "forgets the two LayerNorms"),
    Mistake("block count: no MLP biases", _without("mlp_bias"), COUNT, "MLP's biases"),
    Mistake(
        "block count: 12 C^2 only",
        lambda d_model, d_mlp=None, bias=True: 12 * d_model**2,
        COUNT,
        "forgets the biases and the LayerNorms",
    ),
    Mistake(
        "block count: ignores d_mlp",
        lambda d_model, d_mlp=None, bias=True: count_by_parts(d_model, None, bias),
        COUNT,
        "ignores d_mlp",
    ),
    Mistake(
        "block count: LN biases kept",
        lambda d_model, d_mlp=None, bias=True: (
            count_by_parts(d_model, d_mlp, bias) + 2 * d_model * (not bias)
        ),
        COUNT,
        "keeps the LayerNorms' biases",
    ),
    Mistake(
        "block count: attention only",
        lambda d_model, d_mlp=None, bias=True: 4 * d_model**2 + 4 * d_model * bias,
        COUNT,
        "counts only the attention",
    ),
    Mistake(
        "block count: builds a module",
        lambda d_model, d_mlp=None, bias=True: sum(
            p.numel() for p in BlockSequential(d_model, 1).parameters()
        ),
        COUNT,
        "integer arithmetic",
    ),
]

MISTAKES = CROSS_MISTAKES + DROPOUT_MISTAKES + BLOCK_MISTAKES + COUNT_MISTAKES

CORRECT = (
    correct([_cross], CORRECT_CROSS)
    + correct([TRAINING, EVAL], CORRECT_DROPOUT)
    + correct([STRUCTURE, MATCHES], CORRECT_BLOCK)
    + correct([COUNT], CORRECT_COUNT)
)


class Stub:
    """The learner's block before answering: ``__init__`` is the nbgrader stub."""

    def __init__(self, d_model, num_heads):
        raise NotImplementedError()


STUBS = [(TRAINING, stub), (EVAL, stub), (STRUCTURE, Stub), (MATCHES, Stub), (COUNT, stub)]
STUBS += [(_cross, stub)]
# The dropout checks draw from the global generator, which an in-process kernel shares with the
# grader: test_checks_block verifies these checks on a kernel with its own random state instead.
REPLAY: list = []
