"""Correct and wrong ``head_entropy``, ``previous_token_score`` and ``head_importance``.

Shape legend: ``nh`` heads, ``T`` queries, ``S`` keys, ``n_layers`` blocks.
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch
import torch.nn.functional as F

from autograder.checks import nb07_heads as ck
from autograder.checks import nb07_importance as importance

from . import Mistake, correct, stub

# ----------------------------------------------------------------------------------- entropy


def entropy_entr(w):
    return torch.special.entr(w).sum(-1).mean(-1)


def entropy_xlogy(w):
    return -torch.xlogy(w, w).sum(-1).mean(-1)


def entropy_where(w):
    plogp = torch.where(w > 0, w * w.log(), torch.zeros_like(w))  # (..., nh, T, S)
    return -plogp.sum(-1).mean(-1)


def entropy_clamp(w):
    return -(w * w.clamp_min(1e-30).log()).sum(-1).mean(-1)


def entropy_nan_to_num(w):
    return -(w * w.log()).nan_to_num(0.0).sum(-1).mean(-1)


CORRECT_ENTROPY = {
    "entr": entropy_entr,
    "xlogy": entropy_xlogy,
    "where": entropy_where,
    "clamp": entropy_clamp,
    "nan_to_num": entropy_nan_to_num,
}


def entropy_log2(w):
    return -torch.xlogy(w, w).sum(-1).mean(-1) / math.log(2)


def entropy_naive(w):
    return -(w * w.log()).sum(-1).mean(-1)


def entropy_mean_over_heads(w):
    return -torch.xlogy(w, w).sum(-1).mean(-2)


def entropy_sum_over_queries(w):
    return -torch.xlogy(w, w).sum(-1).sum(-1)


def entropy_of_mean_row(w):
    p = w.mean(-2)  # (..., nh, S)
    return -torch.xlogy(p, p).sum(-1)


def entropy_axes_swapped(w):
    return -torch.xlogy(w, w).sum(-2).mean(-1)


def entropy_no_minus(w):
    return torch.xlogy(w, w).sum(-1).mean(-1)


def entropy_mean_over_keys(w):
    return -torch.xlogy(w, w).mean(-1).mean(-1)


def entropy_big_epsilon(w):
    return -(w * (w + 1e-3).log()).sum(-1).mean(-1)


def entropy_per_query(w):
    return -torch.xlogy(w, w).sum(-1)


def entropy_float32(w):
    return entropy_entr(w.float())


# ----------------------------------------------------------------------- previous-token score


def previous_diagonal(w):
    return torch.diagonal(w, offset=-1, dim1=-2, dim2=-1).mean(-1)


def previous_slices(w):
    return w[..., 1:, :-1].diagonal(dim1=-2, dim2=-1).mean(-1)


def previous_loop(w):
    T = w.shape[-1]
    total = sum(w[..., t, t - 1] for t in range(1, T))
    return total / (T - 1)


def previous_index(w):
    t = torch.arange(1, w.shape[-1])
    return w[..., t, t - 1].mean(-1)


def previous_mask(w):
    T = w.shape[-1]
    below = torch.diag(torch.ones(T - 1, dtype=w.dtype), -1)  # (T, T): ones at (t, t-1)
    return (w * below).sum((-2, -1)) / (T - 1)


CORRECT_PREVIOUS = {
    "diagonal": previous_diagonal,
    "slices": previous_slices,
    "loop": previous_loop,
    "index": previous_index,
    "mask": previous_mask,
}


def previous_main_diagonal(w):
    return torch.diagonal(w, dim1=-2, dim2=-1).mean(-1)


def previous_next_token(w):
    return torch.diagonal(w, offset=1, dim1=-2, dim2=-1).mean(-1)


def previous_includes_query0(w):
    T = w.shape[-1]
    return torch.diagonal(w, offset=-1, dim1=-2, dim2=-1).sum(-1) / T


def previous_roll(w):
    T = w.shape[-1]
    t = torch.arange(T)
    return w[..., t, t - 1].mean(-1)  # index -1 wraps to key T-1


def previous_sum(w):
    return torch.diagonal(w, offset=-1, dim1=-2, dim2=-1).sum(-1)


def previous_all_heads(w):
    return torch.diagonal(w, offset=-1, dim1=-2, dim2=-1).mean((-2, -1))


def previous_column(w):
    return w[..., :, :-1].mean(-2).mean(-1)


# ---------------------------------------------------------------------------- head importance


def importance_argument(model, batch):
    was_training = model.training
    model.eval()
    with torch.no_grad():
        base = model.loss(batch)
        out = torch.zeros(model.n_layers, model.num_heads)
        for layer in range(model.n_layers):
            for head in range(model.num_heads):
                mask = torch.ones(model.n_layers, model.num_heads)
                mask[layer, head] = 0.0
                out[layer, head] = model.loss(batch, head_mask=mask) - base
    model.train(was_training)
    return out


def importance_buffer(model, batch):
    was_training = model.training
    model.eval()
    out = torch.empty(model.n_layers, model.num_heads)
    with torch.inference_mode():
        base = model.loss(batch).item()
        for layer in range(model.n_layers):
            for head in range(model.num_heads):
                model.head_mask[layer, head] = 0.0
                try:
                    out[layer, head] = model.loss(batch).item() - base
                finally:
                    model.head_mask[layer, head] = 1.0
    model.train(was_training)
    return out


def importance_cross_entropy(model, batch):
    """Scores the logits itself instead of calling model.loss."""
    was_training = model.training
    model.eval()

    def loss(mask=None):
        logits, _ = model(batch.inputs, head_mask=mask)  # (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten())

    rows = []
    with torch.no_grad():
        base = loss()
        for layer in range(model.n_layers):
            row = []
            for head in range(model.num_heads):
                mask = torch.ones(model.n_layers, model.num_heads)
                mask[layer, head] = 0
                row.append(loss(mask) - base)
            rows.append(torch.stack(row))
    model.train(was_training)
    return torch.stack(rows)  # (n_layers, nh)


def importance_edit_weights(model, batch):
    """Zeroes the head's out_proj columns, measures, and puts them back."""
    was_training = model.training
    model.eval()
    hs = model.config.d_model // model.num_heads
    out = torch.zeros(model.n_layers, model.num_heads)
    with torch.no_grad():
        base = model.loss(batch)
        for layer, block in enumerate(model.blocks):
            weight = block.attn.out_proj.weight
            for head in range(model.num_heads):
                cols = slice(head * hs, (head + 1) * hs)
                saved = weight[:, cols].clone()
                weight[:, cols] = 0.0
                out[layer, head] = model.loss(batch) - base
                weight[:, cols] = saved
    model.train(was_training)
    return out


CORRECT_IMPORTANCE = {
    "head_mask argument": importance_argument,
    "head_mask buffer": importance_buffer,
    "own cross-entropy": importance_cross_entropy,
    "edit and restore weights": importance_edit_weights,
}


def _importance_with(mask_of, sign=1.0, subtract_base=True, ratio=False):
    """A ``head_importance`` that uses ``mask_of(L, nh, layer, head)`` as the mask."""

    def impl(model, batch):
        was_training = model.training
        model.eval()
        L, nh = model.n_layers, model.num_heads
        out = torch.zeros(L, nh)
        with torch.no_grad():
            base = model.loss(batch)
            for layer in range(L):
                for head in range(nh):
                    loss = model.loss(batch, head_mask=mask_of(L, nh, layer, head))
                    if ratio:
                        out[layer, head] = loss / base
                    else:
                        out[layer, head] = sign * (loss - (base if subtract_base else 0.0))
        model.train(was_training)
        return out

    return impl


def _one_off(L, nh, layer, head):
    mask = torch.ones(L, nh)
    mask[layer, head] = 0.0
    return mask


def _all_off(L, nh, layer, head):
    return torch.zeros(L, nh)


def _only_on(L, nh, layer, head):
    mask = torch.zeros(L, nh)
    mask[layer, head] = 1.0
    return mask


def _layer_off(L, nh, layer, head):
    mask = torch.ones(L, nh)
    mask[layer] = 0.0
    return mask


def _column_off(L, nh, layer, head):
    mask = torch.ones(L, nh)
    mask[:, head] = 0.0
    return mask


def importance_cumulative(model, batch):
    model.eval()
    mask = torch.ones(model.n_layers, model.num_heads)
    out = torch.zeros(model.n_layers, model.num_heads)
    with torch.no_grad():
        base = model.loss(batch)
        for layer in range(model.n_layers):
            for head in range(model.num_heads):
                mask[layer, head] = 0.0  # never reset
                out[layer, head] = model.loss(batch, head_mask=mask) - base
    return out


def importance_transposed(model, batch):
    return importance_argument(model, batch).T.contiguous()


def importance_flat(model, batch):
    return importance_argument(model, batch).flatten()


def importance_gradient(model, batch):
    """Michel et al.'s first-order proxy |dL/dmask|; also leaves .grad in the parameters."""
    was_training = model.training
    model.eval()
    gate = torch.ones(model.n_layers, model.num_heads, requires_grad=True)
    model.loss(batch, head_mask=gate).backward()
    model.train(was_training)
    return gate.grad.abs()


def importance_leaves_head_masked(model, batch):
    was_training = model.training
    model.eval()
    out = torch.zeros(model.n_layers, model.num_heads)
    with torch.no_grad():
        base = model.loss(batch)
        for layer in range(model.n_layers):
            for head in range(model.num_heads):
                model.head_mask.fill_(1.0)
                model.head_mask[layer, head] = 0.0
                out[layer, head] = model.loss(batch) - base
    model.train(was_training)
    return out


def importance_eval_not_restored(model, batch):
    model.eval()
    with torch.no_grad():
        return importance_argument(model, batch)


def importance_always_train_after(model, batch):
    out = importance_argument(model.eval(), batch)
    model.train()
    return out


def importance_train_mode(model, batch):
    out = torch.zeros(model.n_layers, model.num_heads)
    with torch.no_grad():
        base = model.loss(batch)
        for layer in range(model.n_layers):
            for head in range(model.num_heads):
                out[layer, head] = (
                    model.loss(
                        batch, head_mask=_one_off(model.n_layers, model.num_heads, layer, head)
                    )
                    - base
                )
    return out


def importance_with_grad(model, batch):
    was_training = model.training
    model.eval()
    base = model.loss(batch)
    out = torch.zeros(model.n_layers, model.num_heads)
    for layer in range(model.n_layers):
        for head in range(model.num_heads):
            mask = _one_off(model.n_layers, model.num_heads, layer, head)
            out[layer, head] = model.loss(batch, head_mask=mask) - base
    model.train(was_training)
    return out


def importance_grad_switched_off(model, batch):
    torch.set_grad_enabled(False)
    was_training = model.training
    model.eval()
    base = model.loss(batch)
    out = torch.zeros(model.n_layers, model.num_heads)
    for layer in range(model.n_layers):
        for head in range(model.num_heads):
            mask = _one_off(model.n_layers, model.num_heads, layer, head)
            out[layer, head] = model.loss(batch, head_mask=mask) - base
    model.train(was_training)
    return out


def importance_edit_weights_no_restore(model, batch):
    was_training = model.training
    model.eval()
    hs = model.config.d_model // model.num_heads
    out = torch.zeros(model.n_layers, model.num_heads)
    with torch.no_grad():
        base = model.loss(batch)
        for layer, block in enumerate(model.blocks):
            for head in range(model.num_heads):
                weight = block.attn.out_proj.weight
                saved = weight.clone()
                weight[:, head * hs : (head + 1) * hs] = 0.0
                out[layer, head] = model.loss(batch) - base
                weight.copy_(saved * 1.0001)  # "restored", but not exactly
    model.train(was_training)
    return out


def importance_freezes_parameters(model, batch):
    for p in model.parameters():
        p.requires_grad_(False)
    return importance_argument(model, batch)


V, Z = ck.check_head_entropy_values, ck.check_head_entropy_zero_weights
P, Q = ck.check_previous_token_score_values, ck.check_previous_token_score_patterns
IV, IS = (
    importance.check_head_importance_values,
    importance.check_head_importance_leaves_model_unchanged,
)

MISTAKES = [
    # head_entropy
    Mistake("entropy: stub", stub, V, "not implemented yet"),
    Mistake("entropy: stub (zero weights)", stub, Z, "not implemented yet"),
    Mistake("entropy: log base 2", entropy_log2, V, "log base 2"),
    Mistake("entropy: w * log(w) gives NaN at 0", entropy_naive, Z, "0 * log(0)"),
    Mistake("entropy: mean over heads", entropy_mean_over_heads, V, "instead of the queries"),
    Mistake("entropy: sum over queries", entropy_sum_over_queries, V, "take their mean"),
    Mistake("entropy: entropy of the mean row", entropy_of_mean_row, V, "average row"),
    Mistake("entropy: query and key axes swapped", entropy_axes_swapped, V, "query axis"),
    Mistake("entropy: no minus sign", entropy_no_minus, V, "keep the minus sign"),
    Mistake("entropy: mean over keys", entropy_mean_over_keys, V, "averages −p·log p over"),
    Mistake("entropy: epsilon 1e-3 in the log", entropy_big_epsilon, V, "epsilon"),
    Mistake("entropy: one value per query", entropy_per_query, V, "one value per query"),
    Mistake("entropy: casts to float32", entropy_float32, Z, "keep the input dtype"),
    # previous_token_score
    Mistake("previous: stub", stub, P, "not implemented yet"),
    Mistake("previous: stub (patterns)", stub, Q, "not implemented yet"),
    Mistake("previous: main diagonal", previous_main_diagonal, P, "main diagonal"),
    Mistake("previous: main diagonal (patterns)", previous_main_diagonal, Q, "main diagonal"),
    Mistake("previous: next token", previous_next_token, P, "next token"),
    Mistake("previous: query 0 included", previous_includes_query0, P, "divides by T instead"),
    Mistake("previous: query 0 included (patterns)", previous_includes_query0, Q, "T−1"),
    Mistake("previous: index -1 wraps around", previous_roll, P, "wraps around"),
    Mistake("previous: sum over queries", previous_sum, P, "sums over the queries"),
    Mistake("previous: mean over heads too", previous_all_heads, P, "heads were averaged away"),
    Mistake("previous: column mean", previous_column, P, "whole column"),
    # head_importance
    Mistake("importance: stub", stub, IV, "not implemented yet"),
    Mistake("importance: stub (side effects)", stub, IS, "not implemented yet"),
    Mistake("importance: sign flipped", _importance_with(_one_off, sign=-1.0), IV, "wrong sign"),
    Mistake(
        "importance: no baseline",
        _importance_with(_one_off, subtract_base=False),
        IV,
        "subtract the loss of the unchanged model",
    ),
    Mistake("importance: ratio", _importance_with(_one_off, ratio=True), IV, "divides the losses"),
    Mistake("importance: all heads removed", _importance_with(_all_off), IV, "every head removed"),
    Mistake("importance: only one head kept", _importance_with(_only_on), IV, "keeps only one"),
    Mistake("importance: mask never reset", importance_cumulative, IV, "never resets the mask"),
    Mistake("importance: whole layer removed", _importance_with(_layer_off), IV, "whole layer"),
    Mistake(
        "importance: head removed in every layer",
        _importance_with(_column_off),
        IV,
        "in every layer",
    ),
    Mistake("importance: transposed", importance_transposed, IV, "transposed"),
    Mistake("importance: flat", importance_flat, IV, "reshape it to (n_layers, nh)"),
    Mistake("importance: gradient proxy", importance_gradient, IV, "gradient estimate"),
    Mistake("importance: head left masked", importance_leaves_head_masked, IS, "still masked"),
    Mistake(
        "importance: eval mode not restored",
        importance_eval_not_restored,
        IS,
        "changed the model's mode",
    ),
    Mistake(
        "importance: always back to train mode",
        importance_always_train_after,
        IS,
        "changed the model's mode",
    ),
    Mistake("importance: dropout left on", importance_train_mode, IS, "training mode with dropout"),
    Mistake("importance: tracks gradients", importance_with_grad, IS, "tracks gradients"),
    Mistake(
        "importance: set_grad_enabled(False)",
        importance_grad_switched_off,
        IS,
        "switched gradients off",
    ),
    Mistake("importance: gradients left in .grad", importance_gradient, IS, "left gradients"),
    Mistake(
        "importance: weights edited",
        importance_edit_weights_no_restore,
        IS,
        "changed the model's weights",
    ),
    Mistake(
        "importance: parameters frozen", importance_freezes_parameters, IS, "changed requires_grad"
    ),
]
# Importance checks run models, so their mistakes are tried with one seed; the others with two.
MISTAKES = [
    replace(m, runs=({"seed": 0},)) if m.name.startswith("importance") else m for m in MISTAKES
]

ENTROPY_CHECKS = [ck.check_head_entropy_values, ck.check_head_entropy_zero_weights]
PREVIOUS_CHECKS = [ck.check_previous_token_score_values, ck.check_previous_token_score_patterns]
IMPORTANCE_CHECKS = [IV, IS]
CORRECT = (
    correct(ENTROPY_CHECKS, CORRECT_ENTROPY)
    + correct(PREVIOUS_CHECKS, CORRECT_PREVIOUS)
    + correct(IMPORTANCE_CHECKS, CORRECT_IMPORTANCE)
)
STUBS = [(check, stub) for check in ENTROPY_CHECKS + PREVIOUS_CHECKS + IMPORTANCE_CHECKS]
REPLAY = [
    ck.check_head_entropy_zero_weights,
    importance.check_head_importance_leaves_model_unchanged,
    ck.check_previous_token_score_values,  # its "mask" variant builds a diagonal (diag_embed)
]
