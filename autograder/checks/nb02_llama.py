"""Checks for notebook 02, section 12: the Llama-style block's parts, RMSNorm and SwiGLU.

Shape legend: ``B`` batch, ``T`` sequence length, ``C`` = d_model, ``h`` the MLP's hidden width,
``nh`` query heads, ``nkv`` key/value heads, ``hs`` = C // nh.

Oracles: PyTorch's own ``nn.RMSNorm`` holding the learner's weight; SwiGLU written from its
definition, ``W2(SiLU(x W1) ∘ (x W3))`` with the learner's three matrices, read by role under
Meta's names (``w1`` gate, ``w3`` up, ``w2`` down) or Hugging Face's (``gate_proj``, ``up_proj``,
``down_proj``); parameter counts of modules built on the meta device; the hidden width of Meta's
Llama code (``2/3 · 4C``, times an optional multiplier, rounded up to a multiple), anchored on
the published Llama 2 and Llama 3 widths. A wrong output is compared with the classic mistakes
computed from the same weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from autograder.torch_helpers import record_torch_calls

from . import _core, operators
from ._core import (
    call,
    close,
    describe,
    expect_dtype,
    expect_shape,
    expect_tensor,
    fail,
    find_calls,
    first_match,
    make_generator,
    randint,
    randn,
)

#: RMSNorm and SwiGLU by hand; GELU and LayerNorm may run (the mistakes the checks name).
OPERATORS = operators.DEFAULT | operators.MODEL

#: Nothing learner-importable computes these answers.
ANSWERS_IN_TOOLS: dict[str, str] = {}

NORM, MLP, HIDDEN, COUNT = "RMSNorm", "SwiGLU", "swiglu_hidden", "llama_block_param_count"
_FUSED_NORM = ("rms_norm", "_fused_rms_norm")
_ROLES = {"gate": ("w1", "gate_proj"), "up": ("w3", "up_proj"), "down": ("w2", "down_proj")}

# ------------------------------------------------------------------------------- RMSNorm


def _build(cls, name, args, kwargs=None) -> nn.Module:
    __tracebackhide__ = True
    with torch.random.fork_rng(devices=[]):
        module = call(cls, name, args, kwargs)
    if not isinstance(module, nn.Module):
        fail(f"`{name}` should subclass nn.Module: write `class {name}(nn.Module)`.")
    return module.to(torch.float64)


def _norm_weight(norm, C) -> torch.Tensor:
    __tracebackhide__ = True
    weight = getattr(norm, "weight", None)
    if not isinstance(weight, nn.Parameter) or tuple(weight.shape) != (C,):
        fail(
            f"`{NORM}({C})` needs a learnable `weight` of shape ({C},): "
            "self.weight = nn.Parameter(torch.ones(dim)), as nn.RMSNorm and Llama have."
        )
    extra = sum(p.numel() for p in norm.parameters()) - C
    if extra:
        fail(
            f"`{NORM}({C})` holds {extra} parameters besides its weight: RMSNorm has a scale and "
            "no shift (no bias), unlike LayerNorm."
        )
    if not torch.equal(weight.detach(), torch.ones_like(weight)):
        fail(f"`{NORM}`'s weight should start at ones, as nn.RMSNorm's does: torch.ones(dim).")
    return weight


def _rms_variants(x, w, eps) -> dict[str, torch.Tensor]:
    ms = x.pow(2).mean(-1, keepdim=True)  # (..., 1)
    C = x.shape[-1]
    return {
        "Your RMSNorm subtracts the mean and divides by the standard deviation: that is "
        "LayerNorm; RMSNorm divides x by sqrt(mean(x²) + eps) and subtracts nothing.": (
            F.layer_norm(x, (C,), w, None, eps)
        ),
        "Your RMSNorm adds eps outside the square root: x / sqrt(mean(x²) + eps), with eps "
        "inside, as nn.RMSNorm and Llama write it.": x / (ms.sqrt() + eps) * w,
        "Your RMSNorm ignores eps: x / sqrt(mean(x²) + eps), with the eps it was built with.": (
            x / ms.sqrt() * w
        ),
        "Your RMSNorm forgets the weight: multiply the normalised x by self.weight.": (
            x * torch.rsqrt(ms + eps)
        ),
        "Your RMSNorm scales by (1 + weight), Gemma's convention: nn.RMSNorm and Llama multiply "
        "by weight itself, which starts at ones.": x * torch.rsqrt(ms + eps) * (1 + w),
        "Your RMSNorm divides by the L2 norm sqrt(sum(x²)): use the mean of x² over the last "
        "dimension, so the result does not shrink with the width.": (
            x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps) * w
        ),
        "Your RMSNorm normalises over the wrong dimension: take mean(x²) over the last one "
        "(dim=-1, keepdim=True).": x * torch.rsqrt(x.pow(2).mean(0, keepdim=True) + eps) * w,
    }


#: Within these of nn.RMSNorm: float64 inputs; bfloat16 ones, where rounding each step in
#: bfloat16 (as computing in x's dtype does) costs a few of its 2⁻⁸ steps.
_NORM_TOL = {torch.float64: 1e-5, torch.bfloat16: 3e-2}
#: A float64 output this close, but not closer, was computed in half precision somewhere.
_HALF_TOL = 2e-2


def _norm_case(cls, gen, C, eps, lead, scale, dtype=torch.float64) -> None:
    __tracebackhide__ = True
    kwargs = {} if eps is None else {"eps": eps}
    norm = _build(cls, NORM, (C,), kwargs)
    weight = _norm_weight(norm, C)
    with torch.no_grad():
        weight.copy_(1 + randn(gen, C) / 2)
    norm.to(dtype)
    weight = weight.to(dtype).double()  # the weight the module holds, in float64
    x = (scale * randn(gen, *lead, C)).to(dtype)  # (..., C)
    before = x.clone()
    with record_torch_calls() as names, torch.no_grad():
        out = expect_tensor(call(norm, f"{NORM}.forward", (x,)), f"{NORM}.forward")
    found = find_calls(names, _FUSED_NORM)
    if found:
        fail(
            f"`{NORM}` calls `{found[0]}`: compute x / sqrt(mean(x²) + eps) · weight yourself, "
            "with torch.rsqrt or .sqrt()."
        )
    _core.expect_unmodified([before], [x], f"{NORM}.forward")
    expect_shape(out, x.shape, f"The output of `{NORM}`", describe((x,)))
    if dtype != torch.float64 and out.dtype == torch.float32:
        fail(
            f"Your RMSNorm returns float32 for {dtype} input and weight: computing in float32 is "
            "right (nn.RMSNorm and Llama do), but cast the result back to the input's dtype, "
            ".type_as(x) or .to(x.dtype), as nn.RMSNorm returns it."
        )
    expect_dtype(out, x.dtype, f"The output of `{NORM}`")
    eps = 1e-6 if eps is None else eps
    real = nn.RMSNorm(C, eps=eps, dtype=torch.float64)
    with torch.no_grad():
        real.weight.copy_(weight)
        want = real(x.double())
    out, x = out.double(), x.double()
    if close(out, want, _NORM_TOL[dtype], _NORM_TOL[dtype]):
        return
    if kwargs == {} and close(out, nn.RMSNorm(C, eps=1e-5, dtype=torch.float64)(x) * weight):
        fail(f"`{NORM}(dim)` should default to eps=1e-6, Llama's value (nn.LayerNorm's is 1e-5).")
    why = first_match(out, _rms_variants(x, weight.detach(), eps))
    if why is None and close(out, want, _HALF_TOL, _HALF_TOL):
        why = (
            f"Your RMSNorm agrees with nn.RMSNorm to 2 or 3 digits only for {dtype} input: a "
            "step runs in half precision (bfloat16 or float16 keep 3 digits); compute in x's "
            "dtype, or in float32 at least, then cast back to x.dtype."
        )
    fail(
        why
        or f"Your RMSNorm differs from nn.RMSNorm(C, eps={eps}) with the same weight for input "
        f"{describe((x,))}: x · rsqrt(mean(x², dim=-1, keepdim=True) + eps) · weight."
    )


def check_rmsnorm(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``RMSNorm(dim, eps=1e-6)`` equals ``nn.RMSNorm`` holding the same weight: inputs whose
    mean square is near eps (so eps's place shows), the default eps, a weight but no bias; a
    bfloat16 module and input give bfloat16 back, as nn.RMSNorm does."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    cases = [(8, 0.1, (2, 3), 0.3), (5, 1e-6, (4,), 1.0), (6, None, (2, 2), 1e-3)]
    if thorough:
        cases += [(randint(gen, 2, 24), 0.05, (randint(gen, 1, 3), 5), 0.2) for _ in range(2)]
    for C, eps, lead, scale in cases:
        _norm_case(cls, gen, C, eps, lead, scale)
    _norm_case(cls, gen, 16, None, (2, 3), 4.0, torch.bfloat16)


# -------------------------------------------------------------------------------- SwiGLU


def _linears(mlp, C, h) -> dict[str, nn.Linear]:
    """The three matrices by role, under Meta's or Hugging Face's names."""
    __tracebackhide__ = True
    shapes = {"gate": (C, h), "up": (C, h), "down": (h, C)}
    found = {}
    for role, names in _ROLES.items():
        layer = next((getattr(mlp, n) for n in names if hasattr(mlp, n)), None)
        size = shapes[role]
        if not isinstance(layer, nn.Linear) or (layer.in_features, layer.out_features) != size:
            fail(
                f"`{MLP}({C}, {h})` needs `{names[0]}` (or `{names[1]}`), an "
                f"nn.Linear({size[0]}, {size[1]}, bias=False): w1 is the gate, w3 the up "
                "projection, w2 the down projection."
            )
        if layer.bias is not None:
            fail(f"`{names[0]}` has a bias: Llama's SwiGLU has none, nn.Linear(..., bias=False).")
        found[role] = layer
    return found


def _swiglu_variants(x, w) -> dict[str, torch.Tensor]:
    gate, up = F.linear(x, w["gate"]), F.linear(x, w["up"])  # (..., h) each

    def down(h):
        return F.linear(h, w["down"])

    return {
        "Your SwiGLU puts SiLU on the wrong projection: SiLU(x W1) ∘ (x W3), with w1 the gate "
        "(gate_proj in Hugging Face) and w3 the plain up projection.": down(F.silu(up) * gate),
        "Your SwiGLU uses GELU (that is GEGLU): SwiGLU gates with SiLU, x·sigmoid(x), "
        "F.silu.": down(F.gelu(gate) * up),
        "Your SwiGLU uses tanh-approximated GELU: SwiGLU gates with SiLU, F.silu.": down(
            F.gelu(gate, approximate="tanh") * up
        ),
        "Your SwiGLU gates with a plain sigmoid (GLU): SiLU is x·sigmoid(x), F.silu.": down(
            torch.sigmoid(gate) * up
        ),
        "Your SwiGLU applies SiLU to both projections: only the gate goes through SiLU, "
        "SiLU(x W1) ∘ (x W3).": down(F.silu(gate) * F.silu(up)),
        "Your SwiGLU applies SiLU after the product: SiLU(x W1) ∘ (x W3), SiLU on the gate "
        "alone.": down(F.silu(gate * up)),
        "Your SwiGLU drops the up projection: multiply SiLU(x W1) elementwise by x W3 before "
        "w2.": down(F.silu(gate)),
        "Your SwiGLU adds the two branches: the gate multiplies, SiLU(x W1) ∘ (x W3).": down(
            F.silu(gate) + up
        ),
    }


def check_swiglu(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``SwiGLU(d_model, hidden)`` equals ``W2(SiLU(x W1) ∘ (x W3))`` with its own weights; three
    bias-free nn.Linear named as Meta's Llama (w1, w2, w3) or Hugging Face's (gate/up/down_proj)."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    cases = [(8, 12, (2, 3)), (6, 16, (5,)), (4, 4, (1, 2))]  # (C, h, leading dims)
    if thorough:
        cases += [(randint(gen, 1, 16), randint(gen, 1, 40), (2, randint(gen, 1, 6)))]
    for C, h, lead in cases:
        mlp = _build(cls, MLP, (C, h))
        layers = _linears(mlp, C, h)
        weights = {}
        with torch.no_grad():
            for role, layer in layers.items():
                layer.weight.copy_(randn(gen, *layer.weight.shape) / math.sqrt(layer.in_features))
                weights[role] = layer.weight.detach().clone()
        x = randn(gen, *lead, C)
        with torch.no_grad():
            out = expect_tensor(call(mlp, f"{MLP}.forward", (x,)), f"{MLP}.forward")
        expect_shape(out, x.shape, f"The output of `{MLP}`", describe((x,)))
        expect_dtype(out, x.dtype, f"The output of `{MLP}`")
        want = F.linear(
            F.silu(F.linear(x, weights["gate"])) * F.linear(x, weights["up"]), weights["down"]
        )
        if not close(out, want):
            fail(
                first_match(out, _swiglu_variants(x, weights))
                or f"Your SwiGLU differs from w2(SiLU(w1(x)) ∘ w3(x)) for input {describe((x,))}."
            )
