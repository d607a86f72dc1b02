"""Notebook 04's ``GroupedQueryAttention`` as the checks drive it: build, run, and the oracle.

Shape legend: ``B`` batch, ``T`` new positions, ``P`` cached positions, ``S`` = P + T, ``C`` =
d_model, ``nh`` query heads, ``nkv`` key/value heads, ``hs`` = C // nh, ``n_rep`` = nh // nkv.

The learner's module is built with seeded weights and run through :func:`forward`, which checks
the shapes of ``(out, (k, v))``; :func:`oracle` is ``F.scaled_dot_product_attention(...,
enable_gqa=True)`` on the module's own projection weights. The GQA checks and the rotary module's
checks (notebook 04 §8, which extends the same module) both drive the module this way.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ._core import call, describe, expect_dtype, expect_shape, expect_tensor, fail, randint, randn
from ._decoding import Cache

GQA = "GroupedQueryAttention"
FORWARD = f"{GQA}.forward"
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")
TILED = (
    "query head h gets kv head h % num_kv_heads, the tiling of `.repeat(1, n_rep, 1, 1)` "
    "([K0, K1, K0, K1]): use `torch.repeat_interleave(x, n_rep, dim=1)` ([K0, K0, K1, K1]) so "
    "that it gets kv head h // n_rep"
)


def configs(gen, thorough: bool) -> list[tuple[int, int, int, bool]]:
    """``(C, nh, nkv, bias)``: GQA with 1 < nkv < nh first, then MQA and MHA, then random ones."""
    configs = [(16, 4, 2, False), (24, 6, 3, True), (16, 4, 1, False), (12, 4, 4, True)]
    for _ in range(3 if thorough else 0):
        nkv, n_rep, hs = randint(gen, 1, 4), randint(gen, 1, 4), randint(gen, 2, 6)
        configs.append((nkv * n_rep * hs, nkv * n_rep, nkv, randint(gen, 0, 1) == 1))
    return configs


def construct(cls: Callable, C: int, nh: int, nkv: int, bias: bool | None, name: str = GQA):
    """Build the learner's module (``bias=None``: use the default) and check its projections."""
    __tracebackhide__ = True
    kwargs = {} if bias is None else {"bias": bias}
    module = call(cls, name, (C, nh, nkv), kwargs)
    return expect_structure(module, C, nh, nkv, bool(bias), name)


def expect_structure(
    module, C: int, nh: int, nkv: int, bias: bool, name: str, no_bias: str = ""
) -> nn.Module:
    """Fail unless ``module`` has the attributes and projection sizes of the contract."""
    __tracebackhide__ = True
    if not isinstance(module, nn.Module):
        fail(f"`{name}` should give an nn.Module (`class {GQA}(nn.Module)`).")
    for attr, value in (("num_heads", nh), ("num_kv_heads", nkv)):
        if getattr(module, attr, None) != value:
            fail(f"`{name}` should store `self.{attr} = {attr}` (expected {value}).")
    kv = nkv * (C // nh)
    for proj, width in zip(PROJECTIONS, (C, kv, kv, C), strict=True):
        layer = getattr(module, proj, None)
        if not isinstance(layer, nn.Linear):
            fail(f"`{name}` needs an attribute `{proj}` that is an nn.Linear.")
        if (layer.in_features, layer.out_features) == (C, width):
            if (layer.bias is not None) != bias:
                fail(no_bias or f"`{proj}` ignores bias={bias}: pass bias=bias to every nn.Linear.")
            continue
        why = f"it should be nn.Linear({C}, {width})"
        if proj in ("k_proj", "v_proj") and layer.out_features == C:
            why = (
                f"keys and values only need num_kv_heads * hs = {nkv} * {C // nh} = {kv} "
                f"features, one hs-wide slice per kv head: that is where GQA saves parameters "
                "and cache memory"
            )
        fail(
            f"`{proj}` is nn.Linear({layer.in_features}, {layer.out_features}) for "
            f"d_model={C}, num_heads={nh}, num_kv_heads={nkv}: {why}."
        )
    return module


def build(cls, C, nh, nkv, bias, gen, dtype=torch.float32, name: str = GQA) -> nn.Module:
    """The learner's module with seeded weights, in ``dtype``, in eval mode."""
    __tracebackhide__ = True
    module = construct(cls, C, nh, nkv, bias, name)
    module.to(dtype).eval()
    with torch.no_grad():
        for proj in PROJECTIONS:
            layer = getattr(module, proj)
            layer.weight.copy_(randn(gen, *layer.weight.shape) / math.sqrt(C))
            if layer.bias is not None:
                layer.bias.copy_(randn(gen, *layer.bias.shape) / 2)
    return module


def heads(module, x):
    """The oracle's q ``(B, nh, T, hs)``, k and v ``(B, nkv, T, hs)`` from the module's weights."""
    B, T, C = x.shape
    hs = C // module.num_heads
    q, k, v = (
        F.linear(x, getattr(module, p).weight, getattr(module, p).bias) for p in PROJECTIONS[:3]
    )
    return (
        q.view(B, T, module.num_heads, hs).transpose(1, 2),  # (B, nh, T, hs)
        k.view(B, T, module.num_kv_heads, hs).transpose(1, 2),  # (B, nkv, T, hs)
        v.view(B, T, module.num_kv_heads, hs).transpose(1, 2),  # (B, nkv, T, hs)
    )


def oracle(module, x, start=0, mask="bottom-right", tiled=False, scale=None, past=True):
    """PyTorch's output for the positions ``start:`` of ``x (B, S, C)``, keys ``0:S`` cached.

    ``mask``: ``"bottom-right"`` (correct when causal), ``"top-left"``, or ``"none"``;
    ``past=False`` drops the cached keys; ``tiled`` repeats kv heads with ``.repeat``.
    """
    q, k, v = heads(module, x)
    q = q[:, :, start:]  # (B, nh, T, hs)
    if not past:
        k, v = k[:, :, start:], v[:, :, start:]  # (B, nkv, T, hs)
    T, S = q.shape[2], k.shape[2]
    allowed = None
    if mask != "none":
        offset = S - T if mask == "bottom-right" else 0
        allowed = torch.ones(T, S, dtype=torch.bool).tril(offset)  # (T, S)
    if tiled:
        n_rep = module.num_heads // module.num_kv_heads
        k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)  # (B, nh, S, hs)
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=allowed, scale=scale, enable_gqa=not tiled
    )  # (B, nh, T, hs)
    B, nh, T, hs = out.shape
    return module.out_proj(out.transpose(1, 2).reshape(B, T, nh * hs))  # (B, T, C)


def forward(module, x, past=None, causal=None, hint="", name: str = FORWARD, positions=None):
    """Run the learner's forward (``name`` in messages); check the shapes of ``(out, (k, v))``.

    ``positions`` (notebook 04 §8's rotary module) is passed only when given.
    """
    __tracebackhide__ = True
    kwargs = {}
    if past is not None:
        kwargs["past_kv"] = Cache(past)
    if causal is not None:
        kwargs["causal"] = causal
    if positions is not None:
        kwargs["positions"] = positions
    with torch.no_grad():
        result = call(module, name, (x,), kwargs, hint)
    if not isinstance(result, tuple | list) or len(result) != 2:
        fail(f"`{name}` should return `(out, (k, v))`, got {type(result).__name__}.")
    out = expect_tensor(result[0], name, "a tensor `out` as the first item")
    cache = result[1]
    if not isinstance(cache, tuple | list) or len(cache) != 2:
        fail(f"`{name}` should return the cache `(k, v)` as its second item.")
    k = expect_tensor(cache[0], name, "the cached keys `k` in `(out, (k, v))`")
    v = expect_tensor(cache[1], name, "the cached values `v` in `(out, (k, v))`")
    B, T, C = x.shape
    inputs = describe((x,), kwargs)
    expect_shape(out, (B, T, C), "`out`", inputs)
    expect_dtype(out, x.dtype, "`out`")
    P = 0 if past is None else past[0].shape[2]
    _expect_cache(module, k, "k", B, P, T, C, inputs)
    _expect_cache(module, v, "v", B, P, T, C, inputs)
    return out, k, v


def _expect_cache(module, t, name, B, P, T, C, inputs) -> None:
    """Fail with the probable mistake unless the cached ``t`` is ``(B, nkv, P + T, hs)``."""
    __tracebackhide__ = True
    nh, nkv = module.num_heads, module.num_kv_heads
    hs = C // nh
    expected = (B, nkv, P + T, hs)
    shape = tuple(t.shape)
    hint = ""
    if nh != nkv and shape == (B, nh, P + T, hs):
        hint = (
            f"the cache holds all {nh} query heads: store k and v with their {nkv} kv heads, "
            "before repeat_kv (saving that memory is the point of GQA)"
        )
    elif P and shape == (B, nkv, T, hs):
        hint = (
            "it holds only the new positions: append them to the past with "
            "torch.cat([past_k, k], dim=2) so the next step still sees every earlier token"
        )
    elif P:
        for dim in (0, 1, 3):
            wrong = list(expected)
            wrong[2], wrong[dim] = T, (P if dim else B) + wrong[dim]
            if shape == tuple(wrong):
                hint = f"the past was appended along dim {dim}: positions live in dim 2"
    if not hint and shape in ((B, P + T, nkv, hs), (B, P + T, nkv * hs)):
        hint = "return k and v split into kv heads, (B, num_kv_heads, S, hs)"
    expect_shape(t, expected, f"The cached `{name}`", inputs, hint)
