"""Checks for notebook 02: split and merge heads, ``MultiHeadAttention``, ``mha_param_count``.

Shape legend: ``B`` batch, ``T`` query length, ``S`` key/value length, ``C`` = d_model,
``nh`` heads, ``hs`` = C // nh (head size). Head ``h`` uses features ``h*hs:(h+1)*hs``.

The oracle is ``torch.nn.MultiheadAttention(batch_first=True)`` holding the learner's own weights
(``in_proj_weight`` = the q, k and v weights stacked). Known-wrong answers are that same module with
transformed weights or inputs: an identity ``out_proj`` is "no output projection", q weights times
√hs is "no scaling", permuted features are "interleaved heads", and so on.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterator

import torch
from torch import nn
from torch.nn.utils import skip_init

from autograder.torch_helpers import record_torch_calls

from . import _core
from ._core import (
    SOFTMAX_OVER_QUERIES,
    CheckFailure,
    call,
    close,
    describe,
    expect_dtype,
    expect_shape,
    expect_tensor,
    fail,
    first_match,
    fmt_shape,
    has_nan_or_inf,
    make_generator,
    mixed_mask,
    randint,
    randn,
    rows_sum_to_one,
)

#: Learner-importable names that would compute this notebook's graded answers. In the grading
#: sandbox of any notebook whose test cells use these checks, they keep their names but raise.
ANSWERS_IN_TOOLS: dict[str, str] = {
    "autograder.tools.modules.TorchMultiHeadAttention": (
        "MultiHeadAttention: the structure, matches-torch and mask cells"
    ),
    "autograder.tools.nb05_parallel_heads._split": "split_heads",
    "autograder.tools.tiny_model.TinyTransformer": (
        "hands out TorchMultiHeadAttention (its default attention class)"
    ),
    "autograder.tools.tiny_model.load_checkpoint": (
        "hands out TorchMultiHeadAttention: type(load_checkpoint().blocks[0].attn)"
    ),
}

SPLIT = "split_heads"
MERGE = "merge_heads"
MHA = "MultiHeadAttention"
COUNT = "mha_param_count"
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

# --------------------------------------------------------------------- split and merge heads


def _head_cases(gen: torch.Generator, thorough: bool) -> Iterator[tuple[int, int, int, int]]:
    """``(B, T, nh, hs)``: plain, batch 1, head size 1, one head, then random ones."""
    yield from [(2, 5, 3, 4), (1, 4, 2, 4), (3, 2, 6, 1), (2, 3, 1, 8), (2, 7, 4, 5)]
    for _ in range(8 if thorough else 1):
        yield tuple(randint(gen, 1, 8 if thorough else 4) for _ in range(4))


def _by_definition(x: torch.Tensor, nh: int) -> torch.Tensor:
    """``(B, T, C) -> (B, nh, T, hs)`` where head ``h`` holds features ``h*hs:(h+1)*hs``."""
    return torch.stack(x.split(x.shape[-1] // nh, dim=-1), dim=1)  # (B, nh, T, hs)


def check_split_heads(split_heads: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``(B, T, C) -> (B, nh, T, hs)`` in the nn.MultiheadAttention layout; input untouched."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for B, T, nh, hs in _head_cases(gen, thorough):
        x = randn(gen, B, T, nh * hs, dtype=torch.float32)  # (B, T, C)
        before = x.clone()
        out = expect_tensor(call(split_heads, SPLIT, (x, nh)), SPLIT)
        _core.expect_unmodified([before], [x], SPLIT)
        if out.shape == (B, T, nh, hs) and T != nh:
            fail(
                f"`{SPLIT}` returned (B, T, nh, hs): heads belong in dim 1, so add transpose(1, 2)."
            )
        expect_shape(out, (B, nh, T, hs), f"The output of `{SPLIT}`", describe((x, nh)))
        expect_dtype(out, x.dtype, f"The output of `{SPLIT}`")
        if close(out, _by_definition(x, nh)):
            continue
        variants = {
            f"`{SPLIT}` reshaped (B, T, C) straight to (B, nh, T, hs), which mixes tokens "
            "between heads: view as (B, T, nh, hs) first, then transpose(1, 2).": x.reshape(
                B, nh, T, hs
            ),
            f"`{SPLIT}` gives head h every nh-th feature (a view as (B, T, hs, nh)): head h must "
            "hold features h*hs:(h+1)*hs, so view as (B, T, nh, hs).": x.reshape(
                B, T, hs, nh
            ).permute(0, 3, 1, 2),
        }
        fail(
            first_match(out, variants)
            or f"`{SPLIT}` puts the wrong features in head h for input {fmt_shape(x.shape)}: "
            "head h must hold features h*hs:(h+1)*hs of every token (nn.MultiheadAttention's "
            "layout)."
        )


def check_merge_heads(merge_heads: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``(B, nh, T, hs) -> (B, T, C)``, the inverse of the nn.MultiheadAttention head layout."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for B, T, nh, hs in _head_cases(gen, thorough):
        x = randn(gen, B, T, nh * hs, dtype=torch.float32)  # (B, T, C)
        contiguous = _by_definition(x, nh)  # (B, nh, T, hs)
        strided = torch.stack(x.split(hs, dim=-1), dim=2).transpose(1, 2)  # (B, nh, T, hs)
        for heads in (contiguous, strided):
            out = expect_tensor(call(merge_heads, MERGE, (heads,)), MERGE)
            if out.shape == (B, T, nh, hs) and nh != 1:
                fail(f"`{MERGE}` returned (B, T, nh, hs): flatten the last two dimensions too.")
            expect_shape(out, (B, T, nh * hs), f"The output of `{MERGE}`", describe((heads,)))
            expect_dtype(out, x.dtype, f"The output of `{MERGE}`")
            if close(out, x):
                continue
            variants = {
                f"`{MERGE}` reshaped (B, nh, T, hs) straight to (B, T, C), which mixes tokens: "
                "transpose(1, 2) to (B, T, nh, hs) first, then reshape.": heads.reshape(B, T, -1),
                f"`{MERGE}` interleaves the heads' features: head h must fill features "
                "h*hs:(h+1)*hs, so go through (B, T, nh, hs), not (B, T, hs, nh).": heads.permute(
                    0, 2, 3, 1
                ).reshape(B, T, -1),
            }
            fail(
                first_match(out, variants)
                or f"`{MERGE}` does not undo the head split for input {fmt_shape(heads.shape)}: "
                "head h must become features h*hs:(h+1)*hs of every token."
            )


# ----------------------------------------------------------------------- MultiHeadAttention


def _construct(cls: Callable, C: int, nh: int, bias: bool = True) -> nn.Module:
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


def _build(cls, C, nh, gen, bias=True) -> tuple[nn.Module, dict]:
    """The learner's module in float64 with seeded weights, and a copy of those weights."""
    __tracebackhide__ = True
    module = _construct(cls, C, nh, bias)
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


def _reference(weights, nh, query, key, value, blocked=None):
    """nn.MultiheadAttention holding ``weights``; ``blocked`` is its mask (True = blocked)."""
    twin = torch_twin(weights, nh)
    with torch.no_grad():
        if blocked is not None:
            (B, T), S = query.shape[:2], key.shape[1]
            blocked = blocked.expand(B, nh, T, S).reshape(B * nh, T, S)  # torch's mask layout
        return twin(query, key, value, attn_mask=blocked, average_attn_weights=False)


def _forward(module, nh, args, mask=None, grad=False):
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
        p_out, _ = _forward(module, nh, (query[:, perm],))
        if not close(p_out, out[:, perm]):
            return _MIXES_TOKENS
    candidates = {
        why: _reference(wrong, nh, query, key, value, blocked)[0]
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
                candidates[f"Your module {why}."] = _reference(
                    weights, nh, query, both, both, blocked
                )[0]
    return first_match(out, candidates) or ""


def _compare(module, nh, weights, args, mask=None, context="") -> None:
    """Fail unless the learner's module agrees with nn.MultiheadAttention on ``args``."""
    __tracebackhide__ = True
    out, attn = _forward(module, nh, args, mask)
    query = args[0]
    key, value = (args[1], args[2]) if len(args) == 3 else (query, query)
    blocked = None if mask is None else ~mask
    ref_out, ref_attn = _reference(weights, nh, query, key, value, blocked)
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


def _configs(gen, thorough, fixed) -> list[tuple[int, int]]:
    """``(C, nh)`` pairs: ``fixed`` then random ones when ``thorough``."""
    extra = [(randint(gen, 1, 8), randint(gen, 1, 8)) for _ in range(4 if thorough else 0)]
    return fixed + [(nh * hs, nh) for nh, hs in extra]


def _cross_inputs(gen, C, B=2, T=4, S=6):
    """Query ``(B, T, C)``, key and value ``(B, S, C)``, all different."""
    return randn(gen, B, T, C), randn(gen, B, S, C), randn(gen, B, S, C)


def check_mha_structure(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Attributes, Linear shapes, the bias flag, and a ValueError for indivisible d_model."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for C, nh in _configs(gen, thorough, [(12, 3), (8, 1)]):
        for bias in (True, False):
            module = _construct(cls, C, nh, bias)
            if getattr(module, "num_heads", None) != nh:
                fail(f"`{MHA}({C}, {nh})` should store the number of heads as self.num_heads.")
            count = sum(p.numel() for p in module.parameters())
            if count != 4 * C * C + 4 * C * bias:
                fail(
                    f"`{MHA}({C}, {nh}, bias={bias})` holds {count} parameters, more than its four "
                    "projections: keep every parameter in q_proj, k_proj, v_proj and out_proj."
                )
    for C, nh in [(10, 3), (12, 5)] + ([(100, 7), (6, 4)] if thorough else []):
        _expect_value_error(cls, C, nh)


def _expect_value_error(cls, C, nh) -> None:
    __tracebackhide__ = True
    try:
        call(cls, MHA, (C, nh))
    except CheckFailure as failure:
        cause = failure.__cause__
        if cause is None:
            raise
        if not isinstance(cause, ValueError):
            fail(
                f"`{MHA}({C}, {nh})` raised {type(cause).__name__}: raise a ValueError with a "
                "message when d_model is not divisible by num_heads."
            )
        if not str(cause).strip():
            fail(f"Give the ValueError of `{MHA}({C}, {nh})` a message saying what is wrong.")
        return
    fail(
        f"`{MHA}({C}, {nh})` should raise ValueError because {C} is not divisible by {nh}: "
        "check d_model % num_heads in __init__."
    )


def check_mha_matches_torch(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Equal to nn.MultiheadAttention with the same weights: self- and cross-attention."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for C, nh in _configs(gen, thorough, [(12, 3), (16, 4)]):
        module, weights = _build(cls, C, nh, gen)
        x = randn(gen, 2, 5, C)  # (B, T, C)
        _compare(module, nh, weights, (x,))
        _compare(module, nh, weights, (x, x, x))
        _compare(module, nh, weights, _cross_inputs(gen, C))
        _compare(module, nh, weights, _cross_inputs(gen, C, S=4))


def _check_mask_use(nh, weights, args, attn, mask) -> None:
    """Fail with a mask-specific diagnosis when one applies."""
    __tracebackhide__ = True
    query = args[0]
    key, value = (args[1], args[2]) if len(args) == 3 else (query, query)

    def why_masked_weight() -> str | None:
        outputs = [_reference(weights, nh, query, key, value, b)[1] for b in (mask, None)]
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


def check_mha_mask(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """True = may attend; (T, S), (B, 1, T, S), (B, nh, T, S) masks; empty rows give no NaN."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for C, nh in _configs(gen, thorough, [(12, 3)]):
        module, weights = _build(cls, C, nh, gen)
        x = randn(gen, 2, 5, C)  # (B, T, C)
        for mask_shape in [(5, 5), (2, 1, 5, 5), (2, nh, 5, 5)]:
            _compare(module, nh, weights, (x,), mixed_mask(gen, *mask_shape))
        cross = _cross_inputs(gen, C)
        _compare(module, nh, weights, cross, mixed_mask(gen, 2, nh, 4, 6))
        _check_empty_query(module, nh, weights, x, gen)


def _check_empty_query(module, nh, weights, x, gen) -> None:
    """A query with no allowed key: zero weights, zero attention output, others unchanged."""
    __tracebackhide__ = True
    mask = mixed_mask(gen, 2, 1, 5, 5)  # (B, 1, T, S)
    mask[0, 0, 1] = False  # query 1 of batch 0 may attend to nothing
    out, attn = _forward(module, nh, (x,), mask)
    _check_mask_use(nh, weights, (x,), attn, mask)
    out_bias = weights["out_proj"][1]
    if not close(out[0, 1], torch.zeros_like(out[0, 1]) if out_bias is None else out_bias):
        fail("A query with no allowed key must get a zero attention output, so out = out_proj(0).")
    live = mask.any(-1).squeeze(1)  # (B, T)
    ref_out, ref_attn = _reference(weights, nh, x, x, x, ~mask)
    if not (
        close(out[live], ref_out[live])
        and close(attn.transpose(1, 2)[live], ref_attn.transpose(1, 2)[live])
    ):
        fail("With one fully masked query, the other queries' outputs are wrong: mask per row.")


def check_mha_edge_cases(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """nh = 1, nh = C, batch 1, bias=False, gradients reach every projection, float64 kept."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    cases = [(8, 1, True, 2, 5), (6, 6, True, 2, 5), (12, 4, True, 1, 1), (12, 3, False, 2, 5)]
    if thorough:
        cases += [(64, 8, True, 3, 17), (32, 32, False, 1, 9)]
    for C, nh, bias, B, T in cases:
        module, weights = _build(cls, C, nh, gen, bias)
        context = f"With d_model={C}, num_heads={nh}, bias={bias} and batch {B}, "
        _compare(module, nh, weights, (randn(gen, B, T, C),), context=context)
        _compare(module, nh, weights, _cross_inputs(gen, C, B, T, 3), context=context)
    _check_gradients(cls, gen)
    module = _construct(cls, 12, 3)
    for dtype in (torch.float32, torch.float64):
        _forward(module.to(dtype), 3, (randn(gen, 2, 4, 12, dtype=dtype),))


def _check_gradients(cls, gen) -> None:
    """A loss on ``out`` and ``weights`` gives every projection nn.MultiheadAttention's gradient.

    The gradients are the grader's own: ``torch.autograd.grad`` on the output it holds (in
    classroom grading, recomputed from the learner's operators), so a ``.grad`` that learner code
    left on a parameter plays no part, and an output tied to the weights by a negligible term
    gets a gradient that is not attention's.
    """
    __tracebackhide__ = True
    module, weights = _build(cls, 12, 3, gen)
    args = _cross_inputs(gen, 12)
    out, attn = _forward(module, 3, args, grad=True)
    if not (out.requires_grad or attn.requires_grad):
        fail(
            f"The output of `{MHA}.forward` is not connected to its weights, so no gradient can "
            "reach them: do not compute it under torch.no_grad() or with .detach() or .data."
        )
    towards = randn(gen, *out.shape), randn(gen, *attn.shape)
    loss = (out * towards[0]).sum() + (attn * towards[1]).sum()
    layers = [getattr(module, name) for name in PROJECTIONS]
    grads = call(
        torch.autograd.grad,
        f"{MHA} backward pass",
        (loss, [layer.weight for layer in layers if layer.weight.requires_grad]),
        {"allow_unused": True},
    )
    grads = iter(grads)
    found = {
        name: next(grads) if layer.weight.requires_grad else None
        for name, layer in zip(PROJECTIONS, layers, strict=True)
    }
    for name, grad in found.items():
        if grad is None or not grad.abs().sum() > 0:
            fail(
                f"No gradient reaches `{name}`: forward must use self.{name} on its input (query, "
                "key, value, or the merged heads for out_proj) without .detach(), .data or "
                "torch.no_grad()."
            )
    expected = _torch_gradients(weights, args, towards)
    for name, grad in found.items():
        if not close(grad, expected[name]):
            fail(
                f"The gradient reaching `{name}` differs from nn.MultiheadAttention's with the "
                "same weights: compute the output from the projections with ordinary tensor "
                "operations, without .detach(), .data or torch.no_grad() anywhere in forward."
            )


def _torch_gradients(weights, args, towards) -> dict[str, torch.Tensor]:
    """The gradients of the same loss through nn.MultiheadAttention, per projection weight."""
    twin = torch_twin(weights, 3)
    with torch.enable_grad():
        out, attn = twin(*args, average_attn_weights=False)
        loss = (out * towards[0]).sum() + (attn * towards[1]).sum()
        packed, out_w = torch.autograd.grad(loss, [twin.in_proj_weight, twin.out_proj.weight])
    return dict(zip(PROJECTIONS, [*packed.chunk(3), out_w], strict=True))


# ------------------------------------------------------------------------ parameter count


def _count_mistake(fn, C, nh, bias, got) -> str:
    """One sentence naming the probable counting mistake."""
    w, b = C * C, C
    where = f"`{COUNT}({C}, {nh}, bias={bias})` returned {got:,}"
    if bias:
        guesses = [
            (4 * w, "forgets the biases: each of the four projections has d_model biases"),
            (
                4 * w + 3 * b,
                "counts biases for only 3 projections: out_proj has d_model biases too",
            ),
        ]
    else:
        guesses = [(4 * w + 4 * b, "ignores bias=False: then only the 4 weight matrices count")]
    guesses += [
        (
            3 * w + 3 * b * bias,
            "counts only q_proj, k_proj and v_proj: out_proj is a fourth "
            "nn.Linear(d_model, d_model)",
        ),
        (
            3 * w,
            "counts only q_proj, k_proj and v_proj, without biases: out_proj is a fourth "
            "nn.Linear(d_model, d_model) and each has d_model biases",
        ),
    ]
    why = next((why for value, why in guesses if value == got), None)
    if why:
        return f"{where}, which {why}."
    if nh > 1 and call(fn, COUNT, (C, 1), {"bias": bias}) == 4 * w + 4 * b * bias:
        return f"{where}: splitting into heads adds no parameters, so num_heads must not matter."
    return (
        f"{where}, which is wrong: count the weights (d_model × d_model) and biases (d_model) "
        "of q_proj, k_proj, v_proj and out_proj."
    )


def _count(fn, C, nh, bias) -> int:
    __tracebackhide__ = True
    got = call(fn, COUNT, (C, nh), {"bias": bias})
    if not isinstance(got, numbers.Integral) or isinstance(got, bool):
        fail(f"`{COUNT}` should return an int, got {type(got).__name__}: use // or int(...).")
    return int(got)


def check_mha_param_count(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Equals the parameter count of real modules; GPT-3 sizes without building a module."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    configs = _configs(gen, thorough, [(8, 2), (12, 4), (16, 1), (6, 6), (64, 8)])
    configs += [(nh * hs, nh) for nh, hs in _core.wide_draws(seed, thorough, 3, (1, 16), (1, 64))]
    with record_torch_calls() as names:
        counts = {(C, nh, bias): _count(fn, C, nh, bias) for C, nh in configs for bias in (1, 0)}
    _core.by_arithmetic(names, COUNT)
    for (C, nh, bias), got in counts.items():
        real = nn.MultiheadAttention(C, nh, bias=bool(bias), device="meta")
        if got != sum(p.numel() for p in real.parameters()):
            fail(_count_mistake(fn, C, nh, bool(bias), got))
    C, nh = configs[0]
    if call(fn, COUNT, (C, nh)) != counts[(C, nh, 1)]:
        fail(f"`{COUNT}(d_model, num_heads)` should count biases: the default is bias=True.")
    for bias in (True, False):
        C, nh = 12288, 96  # GPT-3: 96 heads of size 128
        got = _count(fn, C, nh, bias)
        if got != 4 * C * C + 4 * C * bias:
            fail(_count_mistake(fn, C, nh, bias, got))
