"""Learner implementations of notebook 01: correct ones and a catalogue of classic mistakes.

Shape legend: ``T`` query length, ``S`` key/value length, ``d_k`` / ``d_v`` key / value width,
``...`` any leading dimensions.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from autograder.checks import nb01_attention as checks

from . import Mistake, correct, stub

# ----------------------------------------------------------------------------- softmax


def softmax_max(x, dim=-1):
    e = (x - x.max(dim=dim, keepdim=True).values).exp()
    return e / e.sum(dim=dim, keepdim=True)


def softmax_logsumexp(x, dim=-1):
    shifted = x - x.amax(dim, keepdim=True)
    return (shifted - shifted.logsumexp(dim, keepdim=True)).exp()


def softmax_amax(x, dim=-1):
    e = torch.exp(x - torch.amax(x, dim=dim, keepdim=True))
    return e / torch.sum(e, dim=dim, keepdim=True)


def softmax_online_tiles(x, dim=-1):
    """The online softmax of FlashAttention's inner loop (Milakov and Gimelshein, 2018): one pass
    over tiles of 32 columns keeps the running max m and the running sum of e^(x - m), rescaled
    by e^(m_old - m_new) whenever the max grows; a second pass normalises."""
    x = x.movedim(dim, -1)
    m = x.new_full((*x.shape[:-1], 1), float("-inf"))  # (..., 1)
    total = x.new_zeros((*x.shape[:-1], 1))  # (..., 1)
    for tile in x.split(32, dim=-1):  # (..., <=32) each
        m_new = torch.maximum(m, tile.amax(-1, keepdim=True))
        total = total * torch.exp(m - m_new) + torch.exp(tile - m_new).sum(-1, keepdim=True)
        m = m_new
    return (torch.exp(x - m) / total).movedim(-1, dim)


CORRECT_SOFTMAX = {
    "max_subtraction": softmax_max,
    "logsumexp": softmax_logsumexp,
    "amax_keepdim": softmax_amax,
    "FlashAttention online softmax, tiles": softmax_online_tiles,
}


def softmax_ignores_dim(x, dim=-1):
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


def softmax_fixed_dim_minus_2(x, dim=-1):
    e = (x - x.amax(-2, keepdim=True)).exp()  # stable, but along the wrong dimension
    return e / e.sum(-2, keepdim=True)


def softmax_no_keepdim(x, dim=-1):
    e = (x - x.amax(dim, keepdim=True)).exp()
    return e / e.sum(dim)


def softmax_whole_sum(x, dim=-1):
    e = (x - x.amax(dim, keepdim=True)).exp()
    return e / e.sum()


def softmax_no_max(x, dim=-1):
    return x.exp() / x.exp().sum(dim, keepdim=True)


def softmax_global_max(x, dim=-1):
    e = (x - x.max()).exp()
    return e / e.sum(dim, keepdim=True)


def softmax_clamped(x, dim=-1):
    e = x.clamp(-30, 30).exp()
    return e / e.sum(dim, keepdim=True)


def softmax_in_place(x, dim=-1):
    x -= x.amax(dim, keepdim=True)
    x.exp_()
    return x / x.sum(dim, keepdim=True)


def softmax_float64(x, dim=-1):
    return softmax_max(x.double(), dim)


SOFTMAX_MISTAKES = [
    Mistake("ignores dim", softmax_ignores_dim, checks.check_softmax_values, "ignores `dim`"),
    # The stability check must not contradict the values check's diagnosis (issue 16).
    Mistake(
        "dim=-2 (stable)",
        softmax_fixed_dim_minus_2,
        checks.check_softmax_stable,
        "normalised along dim 0: use `dim` in every reduction",
    ),
    Mistake("sum without keepdim", softmax_no_keepdim, checks.check_softmax_values, "keepdim=True"),
    Mistake(
        "sum over whole tensor", softmax_whole_sum, checks.check_softmax_values, "whole tensor"
    ),
    Mistake("no max subtraction", softmax_no_max, checks.check_softmax_stable, "row's maximum"),
    Mistake("global max", softmax_global_max, checks.check_softmax_stable, "row's own maximum"),
    Mistake(
        "clamps inputs", softmax_clamped, checks.check_softmax_properties, "constant c per row"
    ),
    Mistake("modifies input", softmax_in_place, checks.check_softmax_properties, "in place"),
    Mistake("returns float64", softmax_float64, checks.check_softmax_properties, "input dtype"),
    Mistake(
        "calls torch.softmax",
        lambda x, dim=-1: torch.softmax(x, dim),
        checks.check_softmax_no_builtin,
        "built-in `torch.softmax`",
    ),
    Mistake(
        "calls Tensor.softmax",
        lambda x, dim=-1: x.softmax(dim),
        checks.check_softmax_no_builtin,
        "built-in `torch.Tensor.softmax`",
    ),
    Mistake(
        "calls F.log_softmax",
        lambda x, dim=-1: F.log_softmax(x, dim).exp(),
        checks.check_softmax_no_builtin,
        "log_softmax",
    ),
    Mistake(
        "uses nn.Softmax",
        lambda x, dim=-1: torch.nn.Softmax(dim)(x),
        checks.check_softmax_no_builtin,
        "softmax`",
    ),
    Mistake(
        "calls the ATen op directly",
        lambda x, dim=-1: torch.ops.aten._softmax(x, dim, False),
        checks.check_softmax_no_builtin,
        "aten._softmax`",
    ),
]

# ------------------------------------------------------------ scaled dot-product attention


def sdpa_matmul(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)  # (..., T, S)
    return weights @ v, weights  # (..., T, d_v), (..., T, S)


def sdpa_einsum(q, k, v, mask=None):
    scores = torch.einsum("...td,...sd->...ts", q, k) * q.shape[-1] ** -0.5  # (..., T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    top = scores.amax(-1, keepdim=True)  # (..., T, 1)
    e = (scores - torch.where(top.isinf(), 0, top)).exp()
    total = e.sum(-1, keepdim=True)  # (..., T, 1)
    weights = torch.where(total > 0, e / total, 0)  # (..., T, S)
    return torch.einsum("...ts,...sd->...td", weights, v), weights


def sdpa_float64_inside(q, k, v, mask=None):
    dtype = q.dtype
    q, k, v = q.double(), k.double(), v.double()
    scores = q @ k.mT / math.sqrt(q.shape[-1])  # (..., T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, -1).masked_fill(~mask.any(-1, keepdim=True), 0)
    else:
        weights = torch.softmax(scores, -1)
    return (weights @ v).to(dtype), weights.to(dtype)


def sdpa_finite_fill(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T, S)
    if mask is None:
        weights = softmax_max(scores)
    else:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        weights = softmax_max(scores) * mask.any(-1, keepdim=True)
    return weights @ v, weights


def sdpa_nanogpt(q, k, v, mask=None):
    """nanoGPT's CausalSelfAttention, its manual path: scores times 1.0 / math.sqrt(k.size(-1)),
    blocked scores filled with -inf where ``mask == 0``, F.softmax; a row that may see no key
    (never there in a causal model) is zeroed afterwards."""
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (..., T, S)
    if mask is not None:
        att = att.masked_fill(mask == 0, float("-inf"))
    att = F.softmax(att, dim=-1)
    if mask is not None:
        att = att.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    y = att @ v  # (..., T, S) @ (..., S, d_v) -> (..., T, d_v)
    return y, att


def sdpa_hf_eager(query, key, value, mask=None):
    """Hugging Face's eager_attention_forward: ``scaling = head_dim**-0.5``, the mask added as a
    float mask (0 where allowed, the dtype's min where blocked, as its mask converter builds
    it), softmax in float32 and cast back; a row that may see no key is zeroed."""
    scaling = query.shape[-1] ** -0.5
    attn_weights = torch.matmul(query, key.transpose(-2, -1)) * scaling  # (..., T, S)
    if mask is not None:
        min_value = torch.finfo(attn_weights.dtype).min
        causal_mask = torch.zeros(mask.shape, dtype=attn_weights.dtype, device=mask.device)
        attn_weights = attn_weights + causal_mask.masked_fill(~mask, min_value)
    attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    if mask is not None:
        attn_weights = torch.where(mask.any(-1, keepdim=True), attn_weights, 0.0)
    attn_output = torch.matmul(attn_weights, value)  # (..., T, d_v)
    return attn_output, attn_weights


CORRECT_SDPA = {
    "matmul": sdpa_matmul,
    "einsum": sdpa_einsum,
    "float64_inside": sdpa_float64_inside,
    "finite_fill": sdpa_finite_fill,
    "nanoGPT": sdpa_nanogpt,
    "Hugging Face eager_attention_forward": sdpa_hf_eager,
}


def _attend(q, k, v, mask=None, scale=None, dim=-1):
    """The usual recipe with one knob per classic mistake."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=dim)
    return weights @ v, weights


def sdpa_scaled_after_softmax(q, k, v, mask=None):
    weights = torch.softmax(q @ k.mT, -1) / math.sqrt(q.shape[-1])
    return weights @ v, weights


def sdpa_mask_after_softmax(q, k, v, mask=None):
    weights = torch.softmax(q @ k.mT / math.sqrt(q.shape[-1]), -1)
    if mask is not None:
        weights = weights * mask
    return weights @ v, weights


def sdpa_masked_with_zero(q, k, v, mask=None):
    scores = q @ k.mT / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores * mask
    weights = torch.softmax(scores, -1)
    return weights @ v, weights


def sdpa_zero_times_inf(q, k, v, mask=None):
    scores = q @ k.mT / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores + (~mask) * float("-inf")
    weights = torch.softmax(scores, -1)
    return weights @ v, weights


def sdpa_finite_fill_no_zeroing(q, k, v, mask=None):
    scores = q @ k.mT / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    weights = torch.softmax(scores, -1)
    return weights @ v, weights


def sdpa_heads_mask(q, k, v, mask=None):
    return _attend(q, k, v, None if mask is None else mask.unsqueeze(1))


def sdpa_causal_inside(q, k, v, mask=None):
    T, S = q.shape[-2], k.shape[-2]
    causal = torch.ones(T, S, dtype=torch.bool).tril(S - T)
    return _attend(q, k, v, causal if mask is None else mask & causal)


def sdpa_in_place(q, k, v, mask=None):
    q /= math.sqrt(q.shape[-1])
    return _attend(q, k, v, mask, scale=1.0)


def sdpa_returns_float32(q, k, v, mask=None):
    out, weights = sdpa_matmul(q, k, v, mask)
    return out.float(), weights.float()


def sdpa_builtin_out(q, k, v, mask=None):
    _, weights = sdpa_matmul(q, k, v, mask)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), weights


SDPA_MISTAKES = [
    Mistake(
        "no scaling",
        lambda q, k, v, mask=None: _attend(q, k, v, mask, scale=1.0),
        checks.check_sdpa_values,
        "without scaling",
    ),
    Mistake(
        "scales by d_k",
        lambda q, k, v, mask=None: _attend(q, k, v, mask, scale=1 / q.shape[-1]),
        checks.check_sdpa_values,
        "divided by d_k",
    ),
    Mistake(
        "scales by sqrt(d_v)",
        lambda q, k, v, mask=None: _attend(q, k, v, mask, scale=v.shape[-1] ** -0.5),
        checks.check_sdpa_values,
        "√d_v",
    ),
    Mistake(
        "softmax over queries",
        lambda q, k, v, mask=None: _attend(q, k, v, mask, dim=-2),
        checks.check_sdpa_values,
        "query axis (dim=-2)",
    ),
    Mistake(
        "scales after softmax",
        sdpa_scaled_after_softmax,
        checks.check_sdpa_values,
        "before the softmax",
    ),
    Mistake(
        "uses k as v",
        lambda q, k, v, mask=None: _attend(q, k, k, mask),
        checks.check_sdpa_shapes,
        "not by k",
    ),
    Mistake(
        "uses k as v (same widths)",
        lambda q, k, v, mask=None: _attend(q, k, k if k.shape == v.shape else v, mask),
        checks.check_sdpa_properties,
        "k as the values",
    ),
    Mistake(
        "transposes dims 1 and 2",
        lambda q, k, v, mask=None: (lambda w: (w @ v, w))(
            torch.softmax(q @ k.transpose(1, 2) / math.sqrt(q.shape[-1]), -1)
        ),
        checks.check_sdpa_shapes,
        "k.transpose(-2, -1)",
    ),
    Mistake(
        "uses k.T",
        lambda q, k, v, mask=None: (lambda w: (w @ v, w))(
            torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), -1)
        ),
        checks.check_sdpa_shapes,
        "not .T",
    ),
    Mistake(
        "mask after softmax", sdpa_mask_after_softmax, checks.check_sdpa_mask, "after the softmax"
    ),
    Mistake(
        "inverted mask",
        lambda q, k, v, mask=None: sdpa_matmul(q, k, v, None if mask is None else ~mask),
        checks.check_sdpa_mask,
        "mask is inverted",
    ),
    Mistake("masks with 0", sdpa_masked_with_zero, checks.check_sdpa_mask, "still get weight"),
    Mistake("0 * -inf", sdpa_zero_times_inf, checks.check_sdpa_mask, "gives NaN"),
    Mistake(
        "NaN on fully masked row",
        lambda q, k, v, mask=None: _attend(q, k, v, mask),
        checks.check_sdpa_mask,
        "gave NaN",
    ),
    Mistake(
        "-1e9 fill, rows not zeroed",
        sdpa_finite_fill_no_zeroing,
        checks.check_sdpa_mask,
        "uniform weights",
    ),
    Mistake(
        "mask unsqueezed for heads", sdpa_heads_mask, checks.check_sdpa_mask, "mask must broadcast"
    ),
    Mistake("causal mask inside", sdpa_causal_inside, checks.check_sdpa_properties, "Permuting"),
    Mistake("modifies q in place", sdpa_in_place, checks.check_sdpa_properties, "in place"),
    Mistake("returns float32", sdpa_returns_float32, checks.check_sdpa_properties, "input dtype"),
    Mistake(
        "calls F.scaled_dot_product_attention",
        sdpa_builtin_out,
        checks.check_sdpa_properties,
        "built-in attention",
    ),
]

MISTAKES = SOFTMAX_MISTAKES + SDPA_MISTAKES

SOFTMAX_CHECKS = [
    checks.check_softmax_values,
    checks.check_softmax_stable,
    checks.check_softmax_no_builtin,
    checks.check_softmax_properties,
]
SDPA_CHECKS = [
    checks.check_sdpa_shapes,
    checks.check_sdpa_values,
    checks.check_sdpa_mask,
    checks.check_sdpa_properties,
]
CORRECT = correct(SOFTMAX_CHECKS, CORRECT_SOFTMAX) + correct(SDPA_CHECKS, CORRECT_SDPA)
STUBS = [(check, stub) for check in SOFTMAX_CHECKS + SDPA_CHECKS]
REPLAY = [checks.check_softmax_values, checks.check_softmax_no_builtin, checks.check_sdpa_mask]
