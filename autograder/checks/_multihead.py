"""Notebook 02's ``MultiHeadAttention`` as the checks drive it, and its two central properties.

Shape legend: ``B`` batch, ``T`` query length, ``S`` key/value length, ``C`` = d_model,
``nh`` heads, ``hs`` = C // nh (head size). Head ``h`` uses features ``h*hs:(h+1)*hs``.

The oracle is ``torch.nn.MultiheadAttention(batch_first=True)`` holding the learner's own weights
(``in_proj_weight`` = the q, k and v weights stacked). Known-wrong answers are that same module with
transformed weights or inputs: an identity ``out_proj`` is "no output projection", q weights times
√hs is "no scaling", permuted features are "interleaved heads", and so on.

Notebook 02 grades the module (:mod:`.nb02_multihead`), its block and cross-attention build on it
(:mod:`.nb02_block`, :mod:`.nb02_cross`), and notebook 10's ported module is graded by the same two
properties (:mod:`.nb10_ported`), so the module's harness and those properties live here.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn
from torch.nn.utils import skip_init

from autograder.torch_helpers import record_torch_calls

from . import _core
from ._core import (
    SOFTMAX_OVER_QUERIES,
    call,
    close,
    describe,
    expect_dtype,
    expect_shape,
    fail,
    first_match,
    has_nan_or_inf,
    make_generator,
    mixed_mask,
    randint,
    randn,
    rows_sum_to_one,
)

MHA = "MultiHeadAttention"
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")
_MIXES_TOKENS = (
    "Your heads mix tokens (permuting the input tokens should permute the output rows the same "
    "way): (B, T, C) was probably reshaped straight to (B, nh, T, hs), or back, without "
    "transpose(1, 2)."
)
_CONVENTION = (
    "Your output equals nn.MultiheadAttention given your mask unchanged, but its attn_mask means "
    "True = blocked while this course (like F.scaled_dot_product_attention) means True = may "
    "attend: fill the scores with -inf where ~mask."
)


def configs(gen, thorough, fixed) -> list[tuple[int, int]]:
    """``(C, nh)`` pairs: ``fixed`` then random ones when ``thorough``."""
    extra = [(randint(gen, 1, 8), randint(gen, 1, 8)) for _ in range(4 if thorough else 0)]
    return fixed + [(nh * hs, nh) for nh, hs in extra]


def cross_inputs(gen, C, B=2, T=4, S=6):
    """Query ``(B, T, C)``, key and value ``(B, S, C)``, all different."""
    return randn(gen, B, T, C), randn(gen, B, S, C), randn(gen, B, S, C)


def construct(cls: Callable, C: int, nh: int, bias: bool = True) -> nn.Module:
    """Build the learner's module and check its four projections."""
    __tracebackhide__ = True
    with torch.random.fork_rng(devices=[]):  # the learner's init must not shift their RNG
        module = call(cls, MHA, (C, nh), {} if bias else {"bias": False})
    if not isinstance(module, nn.Module):
        fail(f"`{MHA}` should subclass nn.Module: write `class {MHA}(nn.Module)`.")
    for name in PROJECTIONS:
        layer = getattr(module, name, None)
        if not isinstance(layer, nn.Linear):
            fail(f"`{MHA}` needs an attribute `{name}` that is nn.Linear(d_model, d_model).")
        if (layer.in_features, layer.out_features) != (C, C):
            fail(
                f"`{name}` is nn.Linear({layer.in_features}, {layer.out_features}) for "
                f"d_model={C}, num_heads={nh}: every projection maps d_model to d_model (the heads "
                "split its output, they do not shrink it)."
            )
        if (layer.bias is not None) != bias:
            fail(f"`{name}` ignores bias={bias}: pass bias=bias to every nn.Linear.")
    return module


def build(cls, C, nh, gen, bias=True) -> tuple[nn.Module, dict]:
    """The learner's module in float64 with seeded weights, and a copy of those weights."""
    __tracebackhide__ = True
    module = construct(cls, C, nh, bias)
    module.to(torch.float64).eval()
    weights = {}
    with torch.no_grad():
        for name in PROJECTIONS:
            layer = getattr(module, name)
            layer.weight.copy_(randn(gen, C, C) / math.sqrt(C))
            if bias:
                layer.bias.copy_(randn(gen, C) / 2)
            weights[name] = (
                layer.weight.clone(),
                None if layer.bias is None else layer.bias.clone(),
            )
    return module, weights


def torch_twin(weights: dict, nh: int) -> nn.MultiheadAttention:
    """``nn.MultiheadAttention(batch_first=True)`` in float64 holding the weights ``weights``."""
    C = weights["q_proj"][0].shape[0]
    bias = weights["q_proj"][1] is not None
    # skip_init: every parameter is overwritten below, and the global RNG stays untouched.
    twin = skip_init(nn.MultiheadAttention, C, nh, bias=bias, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        twin.in_proj_weight.copy_(torch.cat([weights[n][0] for n in PROJECTIONS[:3]]))  # (3C, C)
        twin.out_proj.weight.copy_(weights["out_proj"][0])
        if bias:
            twin.in_proj_bias.copy_(torch.cat([weights[n][1] for n in PROJECTIONS[:3]]))  # (3C,)
            twin.out_proj.bias.copy_(weights["out_proj"][1])
    return twin


def reference(weights, nh, query, key, value, blocked=None):
    """nn.MultiheadAttention holding ``weights``; ``blocked`` is its mask (True = blocked)."""
    twin = torch_twin(weights, nh)
    with torch.no_grad():
        if blocked is not None:
            (B, T), S = query.shape[:2], key.shape[1]
            blocked = blocked.expand(B, nh, T, S).reshape(B * nh, T, S)  # torch's mask layout
        return twin(query, key, value, attn_mask=blocked, average_attn_weights=False)


def forward(module, nh, args, mask=None, grad=False):
    """Run the learner's forward and check the shapes and dtypes of ``(out, weights)``."""
    __tracebackhide__ = True
    kwargs = {} if mask is None else {"mask": mask}
    with torch.set_grad_enabled(grad), record_torch_calls() as names:
        result = call(module, f"{MHA}.forward", args, kwargs)
    if _core.calls_packaged_mha(names):
        fail(
            f"`{MHA}.forward` calls F.multi_head_attention_forward, which is all of "
            "nn.MultiheadAttention: split the heads, attend and merge them yourself."
        )
    out, weights = _core.expect_pair(result, f"{MHA}.forward", "out", "weights")
    (B, T, C), S = args[0].shape, args[-1].shape[1]
    inputs = describe(args, kwargs)
    expect_shape(out, (B, T, C), "`out`", inputs)
    hint = ""
    if weights.shape == (B, T, S):
        hint = "return the weights of every head (B, nh, T, S), not their average"
    elif weights.shape == (B, nh, T, T) and S != T:
        hint = "project `key` with k_proj and `value` with v_proj (they default to `query`)"
    expect_shape(weights, (B, nh, T, S), "`weights`", inputs, hint)
    expect_dtype(out, args[0].dtype, "`out`")
    expect_dtype(weights, args[0].dtype, "`weights`")
    return out, weights


def _wrong_weights(weights, nh) -> dict[str, dict]:
    """Weights that make nn.MultiheadAttention reproduce classic mistakes, by diagnosis."""
    C = weights["q_proj"][0].shape[0]
    hs = C // nh

    def scaled_q(factor):
        w, b = weights["q_proj"]
        return {**weights, "q_proj": (w * factor, None if b is None else b * factor)}

    perm = torch.arange(C).view(hs, nh).T.reshape(-1)  # head h, feature j <- j*nh + h
    interleaved = {n: (w[perm], None if b is None else b[perm]) for n, (w, b) in weights.items()}
    interleaved["out_proj"] = (weights["out_proj"][0][:, perm], weights["out_proj"][1])
    zero_bias = None if weights["out_proj"][1] is None else torch.zeros(C, dtype=torch.float64)
    variants = {
        "Your output matches the merged heads without `out_proj`: apply self.out_proj to the "
        "merged heads.": {**weights, "out_proj": (torch.eye(C, dtype=torch.float64), zero_bias)},
        "Your attention is not scaled: divide the scores by √hs (hs = d_model // num_heads, the "
        "head size).": scaled_q(math.sqrt(hs)),
        "k_proj and v_proj are swapped: keys come from k_proj(key), values from v_proj(value).": {
            **weights,
            "k_proj": weights["v_proj"],
            "v_proj": weights["k_proj"],
        },
    }
    if nh > 1:
        why = "You scaled the scores by √d_model: scale by √hs, the head size d_model // num_heads."
        variants[why] = scaled_q(math.sqrt(hs / C))
    if nh > 1 and hs > 1:
        why = (
            "Your heads take interleaved features (a view as (B, T, hs, nh)): head h must use "
            "features h*hs:(h+1)*hs, so view as (B, T, nh, hs)."
        )
        variants[why] = interleaved
    return variants


def _mha_mistake(module, nh, weights, args, out, attn, blocked) -> str:
    """One sentence naming the probable mistake when ``(out, attn)`` differ from the oracle."""
    query = args[0]
    key, value = (args[1], args[2]) if len(args) == 3 else (query, query)
    live = attn.sum(-1) > 0  # (B, nh, T): rows that attend somewhere
    if has_nan_or_inf(out) or has_nan_or_inf(attn):
        return "Your module returns NaN or inf for ordinary inputs: check the softmax and mask."
    if not rows_sum_to_one(attn[live]):
        if rows_sum_to_one(attn, -2):
            return SOFTMAX_OVER_QUERIES
        return "Your weights' rows do not sum to 1: apply the softmax over the key axis (dim=-1)."
    if len(args) == 1 and blocked is None:  # a mask would have to be permuted too
        perm = torch.arange(query.shape[1]).flip(0)
        p_out, _ = forward(module, nh, (query[:, perm],))
        if not close(p_out, out[:, perm]):
            return _MIXES_TOKENS
    candidates = {
        why: reference(wrong, nh, query, key, value, blocked)[0]
        for why, wrong in _wrong_weights(weights, nh).items()
    }
    if len(args) == 3:
        swaps = [
            (query, "ignores `key` and `value`: use `key` for k_proj and `value` for v_proj"),
            (key, "uses `key` where `value` belongs: v_proj must project `value`"),
            (value, "projects `value` with k_proj: k_proj must project `key`"),
        ]
        for both, why in swaps:
            if both.shape == key.shape:
                candidates[f"Your module {why}."] = reference(
                    weights, nh, query, both, both, blocked
                )[0]
    return first_match(out, candidates) or ""


def compare(module, nh, weights, args, mask=None, context="") -> None:
    """Fail unless the learner's module agrees with nn.MultiheadAttention on ``args``."""
    __tracebackhide__ = True
    out, attn = forward(module, nh, args, mask)
    query = args[0]
    key, value = (args[1], args[2]) if len(args) == 3 else (query, query)
    blocked = None if mask is None else ~mask
    ref_out, ref_attn = reference(weights, nh, query, key, value, blocked)
    if close(out, ref_out) and close(attn, ref_attn):
        return
    if mask is not None:
        _check_mask_use(nh, weights, args, attn, mask)
    why = _mha_mistake(module, nh, weights, args, out, attn, blocked)
    if not why and close(out, ref_out):
        why = "`out` is right but `weights` are not: return the softmax weights of every head."
    why = why or (
        f"Your output differs from nn.MultiheadAttention holding the same weights for inputs "
        f"{describe(args, {'mask': mask})}: check the projections, the head split and merge, "
        "and the scaling by √hs."
    )
    fail(f"{context}{why[0].lower()}{why[1:]}" if context else why)


def _check_mask_use(nh, weights, args, attn, mask) -> None:
    """Fail with a mask-specific diagnosis when one applies."""
    __tracebackhide__ = True
    query = args[0]
    key, value = (args[1], args[2]) if len(args) == 3 else (query, query)

    def why_masked_weight() -> str | None:
        outputs = [reference(weights, nh, query, key, value, b)[1] for b in (mask, None)]
        live = mask.any(-1).expand(attn.shape[:-1])  # (B, nh, T)
        if close(attn[live], outputs[0][live]):
            return _CONVENTION
        if close(attn, outputs[1]):
            return (
                "Your module ignores the mask: pass it to the attention and fill the scores "
                "with -inf where ~mask."
            )
        return None

    _core.check_mask_use(attn, mask, why_masked_weight)


def expect_matches_torch(cls: Callable, seed: int, thorough: bool) -> None:
    """Equal to nn.MultiheadAttention with the same weights: self- and cross-attention."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for C, nh in configs(gen, thorough, [(12, 3), (16, 4)]):
        module, weights = build(cls, C, nh, gen)
        x = randn(gen, 2, 5, C)  # (B, T, C)
        compare(module, nh, weights, (x,))
        compare(module, nh, weights, (x, x, x))
        compare(module, nh, weights, cross_inputs(gen, C))
        compare(module, nh, weights, cross_inputs(gen, C, S=4))


def expect_mask_use(cls: Callable, seed: int, thorough: bool) -> None:
    """True = may attend; (T, S), (B, 1, T, S), (B, nh, T, S) masks; empty rows give no NaN."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for C, nh in configs(gen, thorough, [(12, 3)]):
        module, weights = build(cls, C, nh, gen)
        x = randn(gen, 2, 5, C)  # (B, T, C)
        for mask_shape in [(5, 5), (2, 1, 5, 5), (2, nh, 5, 5)]:
            compare(module, nh, weights, (x,), mixed_mask(gen, *mask_shape))
        cross = cross_inputs(gen, C)
        compare(module, nh, weights, cross, mixed_mask(gen, 2, nh, 4, 6))
        _expect_empty_query(module, nh, weights, x, gen)


def _expect_empty_query(module, nh, weights, x, gen) -> None:
    """A query with no allowed key: zero weights, zero attention output, others unchanged."""
    __tracebackhide__ = True
    mask = mixed_mask(gen, 2, 1, 5, 5)  # (B, 1, T, S)
    mask[0, 0, 1] = False  # query 1 of batch 0 may attend to nothing
    out, attn = forward(module, nh, (x,), mask)
    _check_mask_use(nh, weights, (x,), attn, mask)
    out_bias = weights["out_proj"][1]
    if not close(out[0, 1], torch.zeros_like(out[0, 1]) if out_bias is None else out_bias):
        fail("A query with no allowed key must get a zero attention output, so out = out_proj(0).")
    live = mask.any(-1).squeeze(1)  # (B, T)
    ref_out, ref_attn = reference(weights, nh, x, x, x, ~mask)
    if not (
        close(out[live], ref_out[live])
        and close(attn.transpose(1, 2)[live], ref_attn.transpose(1, 2)[live])
    ):
        fail("With one fully masked query, the other queries' outputs are wrong: mask per row.")
