"""Notebook 02, section 10: attention_with_dropout, correct and wrong.

Shape legend: ``T`` query length, ``S`` key/value length, ``d`` q/k width; any leading dimensions.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks import nb02_dropout as checks

from . import Mistake, correct, stub


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


def dropout_llama_eager(q, k, v, p, training=True):
    """Hugging Face's eager attention: scale by head_dim ** -0.5, softmax in float32."""
    scaling = q.shape[-1] ** -0.5
    attn_weights = torch.matmul(q, k.transpose(-2, -1)) * scaling
    attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(q.dtype)
    attn_weights = F.dropout(attn_weights, p=p, training=training)
    return torch.matmul(attn_weights, v), attn_weights


def dropout_einsum(q, k, v, p, training=True):
    scores = torch.einsum("...td,...sd->...ts", q, k) / q.shape[-1] ** 0.5
    weights = F.dropout(scores.softmax(dim=-1), p if training else 0.0)
    return torch.einsum("...ts,...sd->...td", weights, v), weights


CORRECT_DROPOUT = {
    "functional": dropout_functional,
    "module": dropout_module,
    "by_hand": dropout_by_hand,
    "bernoulli": dropout_bernoulli,
    "llama_eager": dropout_llama_eager,
    "einsum": dropout_einsum,
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


def dropout_module_in_train_mode(q, k, v, p, training=True):
    drop = nn.Dropout(p)  # a new module is in training mode; `training` never reaches it
    weights = drop(torch.softmax(_scores(q, k), dim=-1))
    return weights @ v, weights


def dropout_default_false(q, k, v, p, training=False):
    return dropout_functional(q, k, v, p, training)


def dropout_unscaled(q, k, v, p, training=True):
    weights = F.dropout(torch.softmax(q @ k.transpose(-2, -1), dim=-1), p, training)
    return weights @ v, weights


def dropout_by_sqrt_keys(q, k, v, p, training=True):
    scores = q @ k.transpose(-2, -1) / math.sqrt(k.size(-2))  # the number of keys, not d
    weights = F.dropout(torch.softmax(scores, dim=-1), p, training)
    return weights @ v, weights


def dropout_twice(q, k, v, p, training=True):
    weights = F.dropout(torch.softmax(_scores(q, k), dim=-1), p, training)
    weights = F.dropout(weights, p, training)  # once more, "to be sure"
    return weights @ v, weights


def dropout_over_queries(q, k, v, p, training=True):
    weights = F.dropout(torch.softmax(_scores(q, k), dim=-2), p, training)
    return weights @ v, weights


def dropout_on_output(q, k, v, p, training=True):
    weights = torch.softmax(_scores(q, k), dim=-1)
    return F.dropout(weights @ v, p, training), weights


def dropout_on_v(q, k, v, p, training=True):
    weights = torch.softmax(_scores(q, k), dim=-1)
    return weights @ F.dropout(v, p, training), weights


def dropout_sdpa_output(q, k, v, p, training=True):
    weights = F.dropout(torch.softmax(_scores(q, k), dim=-1), p, training)
    return F.scaled_dot_product_attention(q, k, v, dropout_p=p), weights  # eval never reaches it


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
MISTAKES = [
    Mistake("dropout: before softmax", dropout_before_softmax, TRAINING, "before the softmax"),
    Mistake("dropout: no rescale (hand)", dropout_no_rescale, TRAINING, "not rescaled"),
    Mistake("dropout: no rescale (F)", dropout_no_rescale_f, TRAINING, "not rescaled"),
    Mistake("dropout: active in eval", dropout_always, EVAL, "active with training=False"),
    Mistake(
        "dropout: nn.Dropout in train mode",
        dropout_module_in_train_mode,
        EVAL,
        "active with training=False",
    ),
    Mistake("dropout: training defaults to False", dropout_default_false, TRAINING, "default"),
    Mistake("dropout: unscaled scores", dropout_unscaled, TRAINING, "scores are not scaled"),
    Mistake("dropout: scaled by sqrt(S)", dropout_by_sqrt_keys, TRAINING, "√S, the number"),
    Mistake("dropout: twice", dropout_twice, TRAINING, "dropout twice"),
    Mistake("dropout: softmax over queries", dropout_over_queries, TRAINING, "query axis"),
    Mistake("dropout: on the output", dropout_on_output, TRAINING, "entries of the output"),
    Mistake("dropout: on v", dropout_on_v, TRAINING, "entries of v"),
    Mistake("dropout: SDPA's dropout_p in eval", dropout_sdpa_output, EVAL, "dropout_p=p if"),
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

# ------------------------------------------------------------- dropout through SDPA, in a module


class SDPANanoGPT(nn.Module):
    """nanoGPT's CausalSelfAttention, its attention call: dropout only while training."""

    def __init__(self, p):
        super().__init__()
        self.dropout = p

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0
        )


class SDPAHuggingFace(nn.Module):
    """Hugging Face's sdpa_attention_forward: dropout=0.0 if not module.training."""

    def __init__(self, attention_dropout):
        super().__init__()
        self.attention_dropout = attention_dropout

    def forward(self, query, key, value):
        dropout = 0.0 if not self.training else self.attention_dropout
        return torch.nn.functional.scaled_dot_product_attention(
            query, key, value, dropout_p=dropout, scale=None
        )


class SDPAByHandModule(nn.Module):
    """The weights written out, with an nn.Dropout module that eval() switches off."""

    def __init__(self, p):
        super().__init__()
        self.attn_dropout = nn.Dropout(p)

    def forward(self, q, k, v):
        return self.attn_dropout(torch.softmax(_scores(q, k), dim=-1)) @ v


CORRECT_SDPA = {"nanogpt": SDPANanoGPT, "hf": SDPAHuggingFace, "nn_dropout": SDPAByHandModule}


class SDPAAlways(SDPANanoGPT):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout)


class SDPANever(SDPANanoGPT):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


class SDPAInverted(SDPANanoGPT):
    def forward(self, q, k, v):
        p = 0.0 if self.training else self.dropout
        return F.scaled_dot_product_attention(q, k, v, dropout_p=p)


class SDPATrainingAsProbability(SDPANanoGPT):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.1 * self.training)


class SDPADropoutOnOutput(SDPANanoGPT):
    def __init__(self, p):
        super().__init__(p)
        self.drop = nn.Dropout(p)

    def forward(self, q, k, v):
        return self.drop(F.scaled_dot_product_attention(q, k, v))


class SDPAFunctionalDropoutAlways(SDPAByHandModule):
    def forward(self, q, k, v):
        weights = F.dropout(torch.softmax(_scores(q, k), dim=-1), self.attn_dropout.p)
        return weights @ v


SDPA = checks.check_sdpa_dropout
SDPA_MISTAKES = [
    Mistake("sdpa: dropout_p always", SDPAAlways, SDPA, "keeps dropping after .eval()"),
    Mistake("sdpa: never drops", SDPANever, SDPA, "does not drop in training mode"),
    Mistake("sdpa: inverted condition", SDPAInverted, SDPA, "does not drop in training mode"),
    Mistake("sdpa: fixed probability", SDPATrainingAsProbability, SDPA, "pass the probability"),
    Mistake("sdpa: dropout on the output", SDPADropoutOnOutput, SDPA, "differs from"),
    Mistake("sdpa: F.dropout's default", SDPAFunctionalDropoutAlways, SDPA, "keeps dropping"),
]
MISTAKES += SDPA_MISTAKES

CORRECT = correct([TRAINING, EVAL], CORRECT_DROPOUT) + correct([SDPA], CORRECT_SDPA)


class Stub:
    """The learner's module before answering: ``__init__`` is the nbgrader stub."""

    def __init__(self, p):
        raise NotImplementedError()


STUBS = [(TRAINING, stub), (EVAL, stub), (SDPA, Stub)]
# The dropout checks draw from the global generator, which an in-process kernel shares with the
# grader: test_checks_block verifies these checks on a kernel with its own random state instead.
REPLAY: list = []
