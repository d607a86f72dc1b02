"""Checks for notebook 02: split and merge heads, ``MultiHeadAttention``, ``mha_param_count``.

Shape legend: ``B`` batch, ``T`` query length, ``S`` key/value length, ``C`` = d_model,
``nh`` heads, ``hs`` = C // nh (head size). Head ``h`` uses features ``h*hs:(h+1)*hs``.

The oracle is ``torch.nn.MultiheadAttention(batch_first=True)`` holding the learner's own weights
(``in_proj_weight`` = the q, k and v weights stacked). Known-wrong answers are that same module with
transformed weights or inputs: an identity ``out_proj`` is "no output projection", q weights times
√hs is "no scaling", permuted features are "interleaved heads", and so on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
from torch import nn

from autograder.torch_helpers import record_torch_calls

from . import _core, _multihead
from ._core import (
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
    make_generator,
    randint,
    randn,
)
from ._multihead import MHA, PROJECTIONS

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
COUNT = "mha_param_count"

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


def check_mha_structure(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Attributes, Linear shapes, the bias flag, and a ValueError for indivisible d_model."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for C, nh in _multihead.configs(gen, thorough, [(12, 3), (8, 1)]):
        for bias in (True, False):
            module = _multihead.construct(cls, C, nh, bias)
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
    _multihead.expect_matches_torch(cls, seed, thorough)


def check_mha_mask(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """True = may attend; (T, S), (B, 1, T, S), (B, nh, T, S) masks; empty rows give no NaN."""
    __tracebackhide__ = True
    _multihead.expect_mask_use(cls, seed, thorough)


def check_mha_edge_cases(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """nh = 1, nh = C, batch 1, bias=False, gradients reach every projection, float64 kept."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    cases = [(8, 1, True, 2, 5), (6, 6, True, 2, 5), (12, 4, True, 1, 1), (12, 3, False, 2, 5)]
    if thorough:
        cases += [(64, 8, True, 3, 17), (32, 32, False, 1, 9)]
    for C, nh, bias, B, T in cases:
        module, weights = _multihead.build(cls, C, nh, gen, bias)
        context = f"With d_model={C}, num_heads={nh}, bias={bias} and batch {B}, "
        _multihead.compare(module, nh, weights, (randn(gen, B, T, C),), context=context)
        _multihead.compare(
            module, nh, weights, _multihead.cross_inputs(gen, C, B, T, 3), context=context
        )
    _check_gradients(cls, gen)
    module = _multihead.construct(cls, 12, 3)
    for dtype in (torch.float32, torch.float64):
        _multihead.forward(module.to(dtype), 3, (randn(gen, 2, 4, 12, dtype=dtype),))


def _check_gradients(cls, gen) -> None:
    """A loss on ``out`` and ``weights`` gives every projection nn.MultiheadAttention's gradient.

    The gradients are the grader's own: ``torch.autograd.grad`` on the output it holds (in
    classroom grading, recomputed from the learner's operators), so a ``.grad`` that learner code
    left on a parameter plays no part, and an output tied to the weights by a negligible term
    gets a gradient that is not attention's.
    """
    __tracebackhide__ = True
    module, weights = _multihead.build(cls, 12, 3, gen)
    args = _multihead.cross_inputs(gen, 12)
    out, attn = _multihead.forward(module, 3, args, grad=True)
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
    twin = _multihead.torch_twin(weights, 3)
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


def check_mha_param_count(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Equals the parameter count of real modules; GPT-3 sizes without building a module."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    configs = _multihead.configs(gen, thorough, [(8, 2), (12, 4), (16, 1), (6, 6), (64, 8)])
    configs += [(nh * hs, nh) for nh, hs in _core.wide_draws(seed, thorough, 3, (1, 16), (1, 64))]
    with record_torch_calls() as names:
        counts = {
            (C, nh, bias): _core.call_integer(fn, COUNT, (C, nh), {"bias": bias})
            for C, nh in configs
            for bias in (1, 0)
        }
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
        got = _core.call_integer(fn, COUNT, (C, nh), {"bias": bias})
        if got != 4 * C * C + 4 * C * bias:
            fail(_count_mistake(fn, C, nh, bias, got))
