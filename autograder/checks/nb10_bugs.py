"""Checks for notebook 10 §3.2: causal attention with a packed q, k, v projection.

Shape legend: ``B`` batch, ``T`` positions, ``C`` = d_model, ``nh`` heads, ``hs`` = C // nh.

The oracle is PyTorch's ``nn.MultiheadAttention`` holding the packed ``(3C, C)`` weights (its
``in_proj_weight`` stacks all queries, then all keys, then all values). This is a find-the-bug
exercise: the given code's own two bugs (a per-head view of the packed output, the scale after
the softmax) are reported by their symptom on one position, where attention must copy each
token's value; the notebook's hints lead to the cause. Other wrong fixes are named: the same
oracle on re-ordered weights, without the mask or with another scale. The rotary layer
of §3.3 is checked in :mod:`.nb10_rotary`, the live round of §5.8 in :mod:`.nb10_live`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from autograder.torch_helpers import one_thread

from . import operators
from ._core import (
    LOOSE,
    call,
    close,
    describe,
    expect_dtype,
    expect_shape,
    expect_tensor,
    fail,
    fmt_shape,
    make_generator,
    randint,
    randn,
)

#: Learner code may use PyTorch's attention.
OPERATORS = operators.DEFAULT | operators.SDPA

#: No tool of the course computes these answers.
ANSWERS_IN_TOOLS: dict[str, str] = {}

PACKED = "PackedCausalSelfAttention"

# ------------------------------------------------------------------- packed q, k, v


def _torch_packed(x, w_qkv, w_out, nh, causal=True) -> torch.Tensor:
    """nn.MultiheadAttention (no biases) holding ``w_qkv (3C, C)`` and ``w_out (C, C)``."""
    C = x.shape[-1]
    twin = nn.MultiheadAttention(C, nh, bias=False, batch_first=True, dtype=x.dtype)
    with torch.no_grad():
        twin.in_proj_weight.copy_(w_qkv)
        twin.out_proj.weight.copy_(w_out)
        T = x.shape[1]
        blocked = ~torch.ones(T, T, dtype=torch.bool).tril() if causal else None  # True = blocked
        out, _ = twin(x, x, x, attn_mask=blocked, need_weights=False)
    return out  # (B, T, C)


def _variant(x, w_qkv, w_out, nh, scale: str, causal: bool) -> torch.Tensor:
    """Attention with the scale moved: ``"after"`` the softmax, ``"none"``, or by ``"width"``."""
    B, T, C = x.shape
    hs = C // nh
    q, k, v = (
        t.view(B, T, nh, hs).transpose(1, 2) for t in F.linear(x, w_qkv).split(C, dim=-1)
    )  # (B, nh, T, hs) each
    factor = {"after": 1.0, "none": 1.0, "width": 1 / math.sqrt(C)}[scale]
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=factor)
    if scale == "after":
        out = out / math.sqrt(hs)  # weights @ v is linear in the weights
    return F.linear(out.transpose(1, 2).reshape(B, T, C), w_out)  # (B, T, C)


def _layouts(w_qkv: torch.Tensor, nh: int) -> dict[str, torch.Tensor]:
    """Weights that, read the right way, give what a wrong split reads from ``w_qkv``."""
    C = w_qkv.shape[1]
    hs = C // nh
    chunks = dict(zip("qkv", w_qkv.split(C), strict=True))
    found = {
        "the packed output was viewed as (B, T, nh, 3, hs), as if each head's q, k and v sat "
        "next to each other; the packed projection stacks all queries, then all keys, then all "
        "values, so view it as (B, T, 3, nh, hs) or split it into three C-wide chunks along "
        "the last dim": w_qkv.view(nh, 3, hs, C).transpose(0, 1).reshape(3 * C, C),
    }
    for order in itertools.permutations("qkv"):
        if order != ("q", "k", "v"):
            got = ", ".join(order)
            found[
                f"the three chunks of the packed projection are unpacked as ({got}); in this "
                "layout they come as (q, k, v), queries first"
            ] = torch.cat([chunks[n] for n in order])
    return found


def _packed_mistake(x, out, w_qkv, w_out, nh) -> str | None:
    """The diagnosis of a known-wrong output: the layout first, then the scale, then the mask."""
    hs = x.shape[-1] // nh
    layouts = {"": w_qkv, **_layouts(w_qkv, nh)}
    scales = {
        "": "right",
        "the 1/√hs scale is applied after the softmax, which shrinks every weight instead of "
        "sharpening or flattening the scores: divide the scores, before the softmax": "after",
        "the scores are not scaled: divide them by √hs before the softmax": "none",
        "the scores are scaled by √d_model: one head compares hs numbers, so divide by √hs": (
            "width"
        ),
    }
    if hs == 1:
        scales = {why: s for why, s in scales.items() if s in ("right", "after")}
    for (layout, w), (scale_why, scale), causal in itertools.product(
        layouts.items(), scales.items(), (True, False)
    ):
        if scale == "right":
            expected = _torch_packed(x, w, w_out, nh, causal)
        else:
            expected = _variant(x, w, w_out, nh, scale, causal)
        if not close(out, expected, *LOOSE):
            continue
        mask_why = "" if causal else "every query reads later positions: apply a causal mask"
        reasons = [r for r in (layout, scale_why, mask_why) if r]
        if reasons:
            more = " (fix that first, then look again)" if len(reasons) > 1 else ""
            return f"Your output matches attention in which {reasons[0]}{more}."
    return None


def _packed_inputs(gen, thorough: bool) -> list[tuple[int, int, int, int]]:
    """``(B, T, C, nh)`` cases, several heads and causal lengths > 1 first."""
    cases = [(2, 5, 16, 4), (1, 7, 24, 3), (2, 4, 12, 2)]
    for _ in range(3 if thorough else 0):
        nh, hs = randint(gen, 1, 4), randint(gen, 2, 6)
        cases.append((randint(gen, 1, 3), randint(gen, 2, 8), nh * hs, nh))
    return cases


def _packed_symptom(module, x, nh) -> str | None:
    """The symptom of the given code's own bugs, seen on one position, where attention must copy
    each token's value through ``proj``; None when one position comes out right."""
    one = x[:, :1]  # (B, 1, C)
    with torch.no_grad():
        out = call(module, f"{PACKED}.forward", (one,))
    w_qkv, w_out = module.qkv.weight, module.proj.weight
    expected = _torch_packed(one, w_qkv, w_out, nh)
    if not isinstance(out, torch.Tensor) or out.shape != one.shape or close(out, expected):
        return None
    hs = x.shape[-1] // nh
    where = f"With a single position (x of shape {fmt_shape(one.shape)}, num_heads={nh})"
    if close(out, expected / math.sqrt(hs), 1e-4, 1e-3):
        return (
            f"{where}, where the one attention weight must be 1 and the output is that token's "
            f"value through proj, your output is {1 / math.sqrt(hs):.2f} times PyTorch's: your "
            "attention weights do not sum to 1."
        )
    per_head = next(iter(_layouts(w_qkv, nh).values()))  # (3C, C): what the per-head view reads
    for factor in (1.0, 1 / math.sqrt(hs)):
        if close(out, factor * _torch_packed(one, per_head, w_out, nh), 1e-4, 1e-3):
            return (
                f"{where}, where attention has nothing to mix and the output is each token's "
                "value through proj, yours differs from nn.MultiheadAttention's: your heads do "
                "not read their values from the features PyTorch reads in the same packed weight."
            )
    return None


def _compare_packed(module, out, x, nh, inputs: str) -> None:
    __tracebackhide__ = True
    name, w_qkv, w_out = f"{PACKED}.forward", module.qkv.weight, module.proj.weight
    out = expect_tensor(out, name, "a tensor `out` (B, T, C)")
    expect_shape(out, x.shape, "`out`", inputs)
    expect_dtype(out, x.dtype, "`out`")
    if close(out, _torch_packed(x, w_qkv, w_out, nh)):
        return
    fail(
        _packed_symptom(module, x, nh)
        or _packed_mistake(x, out, w_qkv, w_out, nh)
        or f"Your output differs from nn.MultiheadAttention holding the same packed weights for "
        f"inputs {inputs}: check the unpacking of q, k and v, the head split, the 1/√hs scale, "
        "the causal mask and the merge."
    )


@one_thread
def check_packed_attention(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``cls(d_model, num_heads)`` with packed ``qkv`` and ``proj`` equals causal PyTorch MHA."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    dtypes = [torch.float32] + ([torch.float64] if thorough else [])
    for dtype, (B, T, C, nh) in itertools.product(dtypes, _packed_inputs(gen, thorough)):
        module = call(cls, PACKED, (C, nh))
        for attr, shape in (("qkv", (3 * C, C)), ("proj", (C, C))):
            layer = getattr(module, attr, None)
            if not isinstance(layer, nn.Linear) or tuple(layer.weight.shape) != shape:
                fail(
                    f"`{PACKED}({C}, {nh})` needs `self.{attr}` = nn.Linear({shape[1]}, "
                    f"{shape[0]}, bias=False), as in the given code."
                )
            if layer.bias is not None:
                fail(
                    f"`self.{attr}` of your `{PACKED}` has a bias; the given code has none "
                    f"(the reference is nn.MultiheadAttention(bias=False)): nn.Linear("
                    f"{shape[1]}, {shape[0]}, bias=False)."
                )
        module.to(dtype).eval()
        with torch.no_grad():
            module.qkv.weight.copy_(randn(gen, 3 * C, C) / math.sqrt(C))
            module.proj.weight.copy_(randn(gen, C, C) / math.sqrt(C))
        x = randn(gen, B, T, C, dtype=dtype)  # (B, T, C)
        with torch.no_grad():
            out = call(module, f"{PACKED}.forward", (x,))
        _compare_packed(module, out, x, nh, describe((x,)))
