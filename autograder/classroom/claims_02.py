"""Claims of notebook 02: split and merge heads, ``MultiHeadAttention``, ``mha_param_count``.

Shape legend: ``B`` batch, ``T`` query length, ``S`` key/value length, ``C`` = d_model,
``nh`` heads, ``hs`` = C // nh (head size). Head ``h`` holds features ``h*hs:(h+1)*hs``.

The class is re-checked the way its checks test it: in the kernel, the learner's module is built,
the claim's seeded weights are loaded into ``q_proj``, ``k_proj``, ``v_proj`` and ``out_proj`` (the
names the contract fixes) and ``(out, weights)`` are sent back; the trusted side runs
``nn.MultiheadAttention`` holding the same weights.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from autograder.checks import multihead as checks
from autograder.checks._core import mixed_mask

from .claims import Claim, _gen, _mismatch, _pair, _verify_counts, _with_kwargs

# (B, T, nh, hs): plain, batch 1, head size 1, one head, odd sizes; as the checks' cases
_HEAD_SHAPES = [(2, 5, 3, 4), (1, 4, 2, 4), (3, 2, 6, 1), (2, 3, 1, 8), (2, 7, 4, 5)]

# --------------------------------------------------------------------- split and merge heads


def _split_cases() -> list[tuple]:
    gen = _gen(201)
    return [(torch.randn(B, T, nh * hs, generator=gen), nh) for B, T, nh, hs in _HEAD_SHAPES]


def _verify_split(cases: list[tuple], outputs: list) -> str | None:
    for (x, nh), out in zip(cases, outputs, strict=True):
        what = f"`split_heads` of x {tuple(x.shape)} into {nh} heads"
        problem = _mismatch(out, checks._by_definition(x, nh), what)
        if problem:
            return problem
    return None


def _merge_cases() -> list[tuple]:
    """Heads laid out contiguously, then the same values as a strided (transposed) view."""
    gen = _gen(202)
    cases = []
    for B, T, nh, hs in _HEAD_SHAPES:
        x = torch.randn(B, T, nh * hs, generator=gen)  # (B, T, C)
        cases.append((checks._by_definition(x, nh),))  # (B, nh, T, hs)
        cases.append((torch.stack(x.split(hs, dim=-1), dim=2).transpose(1, 2),))  # (B, nh, T, hs)
    return cases


def _verify_merge(cases: list[tuple], outputs: list) -> str | None:
    for (heads,), out in zip(cases, outputs, strict=True):
        merged = torch.cat(heads.unbind(1), dim=-1)  # nh × (B, T, hs) -> (B, T, C)
        problem = _mismatch(out, merged, f"`merge_heads` of heads {tuple(heads.shape)}")
        if problem:
            return problem
    return None


# ----------------------------------------------------------------------- MultiHeadAttention


def _weights(gen, C: int, bias: bool) -> dict[str, tuple]:
    """Seeded ``(weight (C, C), bias (C,) or None)`` for each projection, as the checks draw."""
    weights = {}
    for name in checks.PROJECTIONS:
        w = torch.randn(C, C, generator=gen, dtype=torch.float64) / math.sqrt(C)  # (C, C)
        b = torch.randn(C, generator=gen, dtype=torch.float64) / 2 if bias else None  # (C,)
        weights[name] = (w, b)
    return weights


def _inputs(gen, C: int, B: int, T: int, S: int | None = None) -> tuple:
    """Self-attention ``(x,)`` when S is None, else cross-attention ``(query, key, value)``."""

    def r(n):
        return torch.randn(B, n, C, generator=gen, dtype=torch.float64)  # (B, n, C)

    return (r(T),) if S is None else (r(T), r(S), r(S))


def _matches_cases() -> list[tuple]:
    """The checks' sizes: self, (x, x, x) and cross-attention, then the edge cases."""
    gen = _gen(203)
    cases = []
    for C, nh in [(12, 3), (16, 4)]:
        weights = _weights(gen, C, True)
        (x,) = _inputs(gen, C, 2, 5)  # (B, T, C)
        for inputs in [(x,), (x, x, x), _inputs(gen, C, 2, 4, 6), _inputs(gen, C, 2, 4, 4)]:
            cases.append((C, nh, True, weights, inputs, None))
    edge_cases = [(8, 1, True, 2, 5), (6, 6, True, 2, 5), (12, 4, True, 1, 1), (12, 3, False, 2, 5)]
    for C, nh, bias, B, T in edge_cases:
        weights = _weights(gen, C, bias)
        for inputs in [_inputs(gen, C, B, T), _inputs(gen, C, B, T, 3)]:
            cases.append((C, nh, bias, weights, inputs, None))
    return cases


def _mask_cases() -> list[tuple]:
    """Masks of shape (T, S), (B, 1, T, S) and (B, nh, T, S), then a query with no allowed key."""
    gen = _gen(204)
    C, nh = 12, 3
    weights = _weights(gen, C, True)
    (x,) = _inputs(gen, C, 2, 5)  # (B, T, C)
    cases = [(C, nh, True, weights, (x,), mixed_mask(gen, *s)) for s in [(5, 5), (2, 1, 5, 5)]]
    cases.append((C, nh, True, weights, (x,), mixed_mask(gen, 2, nh, 5, 5)))
    cases.append((C, nh, True, weights, _inputs(gen, C, 2, 4, 6), mixed_mask(gen, 2, nh, 4, 6)))
    empty = mixed_mask(gen, 2, 1, 5, 5)  # (B, 1, T, S)
    empty[0, 0, 1] = False  # query 1 of batch 0 may attend to nothing
    cases.append((C, nh, True, weights, (x,), empty))
    return cases


def _run_mha(cls, case: tuple) -> object:
    """In the kernel: the learner's module holding the case's weights, run on its inputs."""
    C, nh, bias, weights, inputs, mask = case
    module = checks._construct(cls, C, nh, bias)  # keeps the global RNG; checks the projections
    module.to(torch.float64).eval()
    with torch.no_grad():
        for name, (w, b) in weights.items():
            getattr(module, name).weight.copy_(w)
            if b is not None:
                getattr(module, name).bias.copy_(b)
        return module(*inputs) if mask is None else module(*inputs, mask=mask)


def _mha_reference(nh: int, weights: dict, inputs: tuple, mask) -> tuple:
    """nn.MultiheadAttention's ``(out, weights)``; a query with no allowed key reads nothing."""
    query = inputs[0]
    key, value = (inputs[1], inputs[2]) if len(inputs) == 3 else (query, query)
    out, attn = checks._reference(weights, nh, query, key, value, None if mask is None else ~mask)
    if mask is None:
        return out, attn  # (B, T, C), (B, nh, T, S)
    (B, T, _), S = query.shape, key.shape[1]
    empty = ~mask.expand(B, nh, T, S).any(-1)  # (B, nh, T): torch gives these rows NaN
    attn = attn.masked_fill(empty[..., None], 0.0)  # (B, nh, T, S)
    out_bias = weights["out_proj"][1]
    silent = empty.all(1)[..., None]  # (B, T, 1): no head reads anything, out = out_proj(0)
    return torch.where(silent, 0.0 if out_bias is None else out_bias, out), attn


def _verify_mha(cases: list[tuple], outputs: list) -> str | None:
    for (C, nh, bias, weights, inputs, mask), out in zip(cases, outputs, strict=True):
        what = f"`MultiHeadAttention({C}, {nh}, bias={bias})` on query {tuple(inputs[0].shape)}"
        if len(inputs) == 3:
            what += f", key {tuple(inputs[1].shape)}"
        if mask is not None:
            what += f", mask {tuple(mask.shape)}"
        pair = _pair(out)
        if isinstance(pair, str):
            return f"{what}: {pair}"
        expected = _mha_reference(nh, weights, inputs, mask)
        for name, actual, ref in zip(("out", "weights"), pair, expected, strict=True):
            problem = _mismatch(actual, ref, f"{what}: {name}")
            if problem:
                return problem
    return None


# ------------------------------------------------------------------------ parameter count


def _count_cases() -> list[tuple]:
    """As the checks call it: ``bias`` 1 or 0, the default, then GPT-3's sizes."""
    sizes = [(8, 2), (12, 4), (16, 1), (6, 6), (64, 8), (20, 5)]
    cases = [(C, nh, {"bias": bias}) for C, nh in sizes for bias in (1, 0)]
    cases.append((8, 2, {}))
    cases += [(12288, 96, {"bias": bias}) for bias in (True, False)]
    return cases


def _real_count(C: int, nh: int, bias: bool = True) -> int:
    """Parameters of nn.MultiheadAttention, built on the meta device."""
    real = nn.MultiheadAttention(C, nh, bias=bool(bias), device="meta")
    return sum(p.numel() for p in real.parameters())


def claims() -> dict[str, Claim]:
    """Test grade id -> the claim its passing establishes."""
    mha, count = "MultiHeadAttention", "mha_param_count"
    return {
        "test_split_heads_layout": Claim("split_heads", _split_cases, _verify_split),
        "test_merge_heads_layout": Claim("merge_heads", _merge_cases, _verify_merge),
        "test_MultiHeadAttention_matches_torch": Claim(
            mha, _matches_cases, _verify_mha, call=_run_mha
        ),
        "test_MultiHeadAttention_mask": Claim(mha, _mask_cases, _verify_mha, call=_run_mha),
        "test_mha_param_count_values": Claim(
            count, _count_cases, _verify_counts(count, _real_count), call=_with_kwargs
        ),
    }
