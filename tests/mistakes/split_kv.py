"""Learner implementations of notebook 09's split-KV decoding: ``attend_chunk``,
``merge_splits`` and ``split_kv_decode``, written the way FlashAttention's combine step, vLLM's
``merge_attn_states`` and a plain softmax write them, and the classic mistakes of the merge."""

from __future__ import annotations

import math

import torch

from autograder.checks import nb09_split_kv as checks

from . import Mistake, correct, stub

ATTEND = checks.check_attend_chunk
MERGE = checks.check_merge_splits
SPLIT = checks.check_split_kv_decode


# ----------------------------------------------------------------------------- attend_chunk


def attend_logsumexp(q, k, v):
    """lse first, then the weights exp(s - lse): no max needed, empty chunks fall out."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    lse = torch.logsumexp(scores, dim=-1)
    return torch.exp(scores - lse[..., None]) @ v, lse


def attend_flash(q, k, v):
    """FlashAttention's state: running max m and sum l, lse = m + log(l), an empty row guarded."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    m = torch.cat([scores, scores.new_full((*scores.shape[:-1], 1), float("-inf"))], -1).amax(-1)
    m_safe = torch.where(torch.isinf(m), 0.0, m)
    p = torch.exp(scores - m_safe[..., None])
    l = p.sum(-1)  # noqa: E741 (FlashAttention's name)
    o = (p @ v) / torch.where(l > 0, l, 1.0)[..., None]
    return o, m_safe + torch.log(l)


def attend_softmax(q, k, v):
    """torch.softmax for o, torch.logsumexp for lse."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, -1) @ v, scores.logsumexp(-1)


def _attend_max(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    m = scores.amax(-1, keepdim=True)
    p = torch.exp(scores - m)
    return p @ v / p.sum(-1, keepdim=True), (m + p.sum(-1, keepdim=True).log())[..., 0]


def _attend_no_max(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    p = torch.exp(scores)
    return p @ v / p.sum(-1, keepdim=True), p.sum(-1).log()


def _attend_lse_is_max(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, -1) @ v, torch.cat(
        [scores, scores.new_full((*scores.shape[:-1], 1), float("-inf"))], -1
    ).amax(-1)


def _attend_unscaled_lse(q, k, v):
    scores = q @ k.transpose(-2, -1)
    return torch.softmax(scores / math.sqrt(q.shape[-1]), -1) @ v, scores.logsumexp(-1)


def _attend_keepdim(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, -1) @ v, scores.logsumexp(-1, keepdim=True)


def _attend_unnormalised(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    m = torch.cat([scores, scores.new_zeros((*scores.shape[:-1], 1))], -1).amax(-1, keepdim=True)
    return torch.exp(scores - m) @ v, scores.logsumexp(-1)


# ----------------------------------------------------------------------------- merge_splits


def merge_flash_combine(outputs, lses):
    """FlashAttention's split-KV combine: lse_max, lse_logsum, then scales exp(lse - logsum)."""
    lse_max = lses.amax(0)
    lse_sum = torch.exp(lses - lse_max).sum(0)
    lse_logsum = torch.log(lse_sum) + lse_max
    scales = torch.exp(lses - lse_logsum)
    return (scales[..., None] * outputs).sum(0), lse_logsum


def merge_vllm_pairwise(outputs, lses):
    """vLLM's ``merge_attn_states``, two states at a time, its -inf max set to 0; two empty states
    (both sums 0) divide by 1 instead of 0."""
    out, lse = outputs[0], lses[0]
    for p in range(1, outputs.shape[0]):
        max_lse = torch.maximum(lse, lses[p])
        max_lse = torch.where(torch.isinf(max_lse), 0.0, max_lse)
        p_se, s_se = torch.exp(lse - max_lse), torch.exp(lses[p] - max_lse)
        out_se = p_se + s_se
        total = torch.where(out_se > 0, out_se, 1.0)
        out = (out * p_se[..., None] + outputs[p] * s_se[..., None]) / total[..., None]
        lse = torch.log(out_se) + max_lse
    return out, lse


def merge_softmax(outputs, lses):
    """The weights are a softmax of the lses over the splits."""
    weights = torch.softmax(lses, dim=0)
    return torch.einsum("p...,p...d->...d", weights, outputs), torch.logsumexp(lses, dim=0)


def _merge_mean(outputs, lses):
    return outputs.mean(0), torch.logsumexp(lses, 0)


def _merge_no_max(outputs, lses):
    w = torch.exp(lses)
    return (w[..., None] * outputs).sum(0) / w.sum(0)[..., None], torch.log(w.sum(0))


def _merge_running_unguarded(outputs, lses):
    out, lse = torch.zeros_like(outputs[0]), torch.full_like(lses[0], float("-inf"))
    for p in range(outputs.shape[0]):
        m = torch.maximum(lse, lses[p])
        a, b = torch.exp(lse - m), torch.exp(lses[p] - m)
        out = (out * a[..., None] + outputs[p] * b[..., None]) / (a + b)[..., None]
        lse = m + torch.log(a + b)
    return out, lse


def _merge_lse_max(outputs, lses):
    return torch.softmax(lses, 0)[..., None].mul(outputs).sum(0), lses.amax(0)


def _merge_wrong_dim(outputs, lses):
    return (torch.softmax(lses, -1)[..., None] * outputs).sum(0), torch.logsumexp(lses, 0)


# -------------------------------------------------------------------------- split_kv_decode


def split_tensor_split(q, k, v, num_splits):
    """torch.tensor_split: even splits, empty ones when num_splits > L."""
    states = [
        attend_logsumexp(q, kc, vc)
        for kc, vc in zip(
            torch.tensor_split(k, num_splits, dim=-2),
            torch.tensor_split(v, num_splits, dim=-2),
            strict=True,
        )
    ]
    outputs, lses = torch.stack([o for o, _ in states]), torch.stack([s for _, s in states])
    return merge_softmax(outputs, lses)[0]


def split_flash_decoding(q, k, v, num_splits):
    """FlashDecoding's layout: ceil(L / num_splits) keys per split, the last ones short or empty,
    each split's state written to a buffer, then one combine."""
    L = k.shape[-2]
    size = -(-L // num_splits)
    outputs, lses = [], []
    for split in range(num_splits):
        start, stop = min(split * size, L), min((split + 1) * size, L)
        o, lse = attend_flash(q, k[..., start:stop, :], v[..., start:stop, :])
        outputs.append(o)
        lses.append(lse)
    return merge_flash_combine(torch.stack(outputs), torch.stack(lses))[0]


def _split_with(merge, sizes_of):
    def split_kv_decode(q, k, v, num_splits):
        sizes = sizes_of(k.shape[-2], num_splits)
        states = [
            attend_logsumexp(q, kc, vc)
            for kc, vc in zip(k.split(sizes, -2), v.split(sizes, -2), strict=True)
        ]
        outputs = torch.stack([o for o, _ in states])
        lses = torch.stack([s for _, s in states])
        return merge(outputs, lses, torch.tensor(sizes, dtype=q.dtype))

    return split_kv_decode


def _even(L, P):
    return checks.layouts(L, P)["even"]


def _dropped(L, P):
    return [L // P] * P + [L - L // P * P]


def _by_length(outputs, lses, lengths):
    return (lengths[:, None, None, None, None] / lengths.sum() * outputs).sum(0)


def _mean_of_nonempty(outputs, lses, lengths):
    return outputs[lengths > 0].mean(0)


def _without_remainder(outputs, lses, lengths):
    return merge_softmax(outputs[:-1], lses[:-1])[0]


CORRECT = [
    *correct(
        [ATTEND],
        {
            "logsumexp first": attend_logsumexp,
            "FlashAttention m, l": attend_flash,
            "softmax + logsumexp": attend_softmax,
        },
    ),
    *correct(
        [MERGE],
        {
            "FlashAttention combine": merge_flash_combine,
            "vLLM merge_attn_states": merge_vllm_pairwise,
            "softmax of lses": merge_softmax,
        },
    ),
    *correct([SPLIT], {"tensor_split": split_tensor_split, "FlashDecoding": split_flash_decoding}),
]
MISTAKES = [
    Mistake("attend: amax of an empty chunk", _attend_max, ATTEND, "an empty chunk"),
    Mistake("attend: exp without the max", _attend_no_max, ATTEND, "subtract each row's max"),
    Mistake("attend: lse is the max", _attend_lse_is_max, ATTEND, "is the row max m alone"),
    Mistake("attend: lse unscaled", _attend_unscaled_lse, ATTEND, "unscaled scores"),
    Mistake("attend: lse keepdim", _attend_keepdim, ATTEND, "drop the last dimension"),
    Mistake("attend: not normalised", _attend_unnormalised, ATTEND, "without the division"),
    Mistake("merge: plain average", _merge_mean, MERGE, "averages the outputs"),
    Mistake("merge: exp(lse) without max", _merge_no_max, MERGE, "overflows float32"),
    Mistake("merge: running, NaN on empty", _merge_running_unguarded, MERGE, "a split is empty"),
    Mistake("merge: lse is the max", _merge_lse_max, MERGE, "largest split's lse"),
    Mistake("merge: softmax over heads", _merge_wrong_dim, MERGE, "wrong dimension"),
    Mistake("split: weighted by length", _split_with(_by_length, _even), SPLIT, "number of keys"),
    Mistake(
        "split: plain average", _split_with(_mean_of_nonempty, _even), SPLIT, "averages the splits"
    ),
    Mistake(
        "split: remainder dropped",
        _split_with(_without_remainder, _dropped),
        SPLIT,
        "drops the last",
    ),
]
STUBS = [(ATTEND, stub), (MERGE, stub), (SPLIT, stub)]
REPLAY = [ATTEND, MERGE, SPLIT]
