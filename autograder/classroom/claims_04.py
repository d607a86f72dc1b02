"""Claims of notebook 04: ``repeat_kv``, ``gqa_param_count``, ``kv_cache_bytes``, ``mha_to_gqa``.

Shape legend: ``B`` batch, ``S`` positions, ``C`` = d_model, ``nh`` query heads, ``nkv`` key/value
heads, ``hs`` = C // nh, ``n_rep`` = nh // nkv.

The oracles are the checks' own: ``repeat_interleave``, ``nn.Linear`` layers and cache tensors on
the meta device, and mean pooling of contiguous groups of heads. ``mha_to_gqa`` is re-checked on
the weights it returns: the kernel hands it an MHA holding the claim's seeded weights and sends
back every projection of the result, and of the MHA afterwards (which must be unchanged).
"""

from __future__ import annotations

import math

import torch

from autograder.checks import gqa as checks
from autograder.lab.gqa import cache_nbytes, meta_cache

from .claims import Claim, _gen, _mismatch, _pair, _verify_counts, _with_kwargs

_PARTS = [(proj, part) for proj in checks.PROJECTIONS for part in ("weight", "bias")]

# ----------------------------------------------------------------------------- repeat_kv


def _repeat_cases() -> list[tuple]:
    gen = _gen(401)
    shapes = [(2, 2, 5, 3, 3), (1, 3, 4, 2, 2), (2, 1, 3, 4, 4), (2, 4, 3, 2, 1), (1, 2, 2, 3, 5)]
    dtypes = [torch.float32, torch.float64, torch.bfloat16, torch.float32, torch.float32]
    return [
        (torch.randn(B, nkv, S, hs, generator=gen).to(dtype), n_rep)  # (B, nkv, S, hs)
        for (B, nkv, S, hs, n_rep), dtype in zip(shapes, dtypes, strict=True)
    ]


def _verify_repeat(cases: list[tuple], outputs: list) -> str | None:
    for (x, n_rep), out in zip(cases, outputs, strict=True):
        expected = x.repeat_interleave(n_rep, dim=1)  # (B, nkv*n_rep, S, hs)
        problem = _mismatch(out, expected, f"`repeat_kv` of x {tuple(x.shape)}, n_rep={n_rep}")
        if problem:
            return problem
    return None


# ------------------------------------------------------------------------------ counting


def _count_cases() -> list[tuple]:
    """As the checks call it: ``bias`` both ways, the default, then sizes that must raise."""
    sizes = [(16, 4, 2), (24, 6, 3), (16, 4, 1), (12, 4, 4), (4096, 32, 8), (8192, 64, 8)]
    cases = [(*size, {"bias": bias}) for size in sizes for bias in (True, False)]
    cases.append((16, 4, 2, {}))
    cases += [(10, 3, 1, {}), (16, 4, 3, {})]
    return cases


def _real_count(C: int, nh: int, nkv: int, bias: bool = False) -> int | None:
    """The parameters of the four projections; None (a ValueError) for indivisible sizes."""
    if C % nh or nh % nkv:
        return None
    return checks._real_count(C, nh, nkv, bias)


def _bytes_cases() -> list[tuple]:
    """The checks' sizes (Llama 2 70B, 32k tokens of a 7B model, ...), keywords as they pass."""
    positional = [(80, 8, 128, 1), (32, 32, 128, 32768), (32, 8, 128, 32768)]
    cases = [(*sizes, {}) for sizes in positional]
    with_keywords = [(2, 4, 16, 10, 3, 4), (24, 1, 64, 2048, 8, 1), (3, 2, 8, 5, 2, 8)]
    for *sizes, batch, nbytes in with_keywords:
        cases.append((*sizes, {"batch_size": batch, "bytes_per_value": nbytes}))
    return cases


def _cache_bytes(L: int, nkv: int, hd: int, S: int, batch_size=1, bytes_per_value=2) -> int:
    """Bytes of the per-layer ``(k, v)`` tensors, built on the meta device."""
    dtype = checks._DTYPES[bytes_per_value]
    return cache_nbytes(meta_cache(L, nkv, hd, S, batch_size, dtype=dtype))


# ------------------------------------------------------------------------- MHA -> GQA


def _convert_cases() -> list[tuple]:
    """``(C, nh, nkv, bias, {projection: (weight, bias or None)})`` in float32."""
    gen = _gen(402)
    cases = []
    sizes = [(16, 4, 2, True), (24, 6, 3, False), (16, 4, 1, True), (16, 4, 4, False)]
    for C, nh, nkv, bias in [*sizes, (18, 6, 2, True)]:
        weights = {
            proj: (
                torch.randn(C, C, generator=gen) / math.sqrt(C),  # (C, C)
                torch.randn(C, generator=gen) if bias else None,  # (C,)
            )
            for proj in checks.PROJECTIONS
        }
        cases.append((C, nh, nkv, bias, weights))
    return cases


def _parts(module) -> tuple:
    """Weight and bias of each projection (None when there is none), in ``_PARTS`` order."""
    return tuple(getattr(getattr(module, proj), part) for proj, part in _PARTS)


def _run_convert(fn, case: tuple) -> tuple:
    """In the kernel: convert an MHA holding the case's weights; its parts and the MHA's after."""
    C, nh, nkv, bias, weights = case
    with torch.random.fork_rng(devices=[]), torch.no_grad():  # as the check: no RNG shift
        mha = checks._MHA(C, nh, bias=bias)
        for proj, (w, b) in weights.items():
            getattr(mha, proj).weight.copy_(w)
            if b is not None:
                getattr(mha, proj).bias.copy_(b)
        gqa = fn(mha, nkv)
    return _parts(gqa), _parts(mha)


def _verify_convert(cases: list[tuple], outputs: list) -> str | None:
    for (C, nh, nkv, bias, weights), out in zip(cases, outputs, strict=True):
        what = f"`mha_to_gqa` of an MHA({C}, {nh}, bias={bias}) to {nkv} kv heads"
        pair = _pair(out, "(converted, mha)")
        if isinstance(pair, str) or any(not isinstance(p, tuple) or len(p) != 8 for p in pair):
            return f"{what}: {pair if isinstance(pair, str) else 'malformed output'}"
        sources = [t for proj in checks.PROJECTIONS for t in weights[proj]]
        for (proj, part), got, after, source in zip(_PARTS, *pair, sources, strict=True):
            if source is None:
                continue  # no bias to carry over
            if _mismatch(after, source, ""):
                return f"{what} changes the MHA's `{proj}.{part}`"
            if got is None:
                return f"{what} drops `{proj}.{part}`"
            pooled = proj in ("k_proj", "v_proj")
            expected = checks._pooled(source, nh, nkv) if pooled else source
            problem = _mismatch(got, expected, f"{what}: `{proj}.{part}`")
            if problem:
                return problem
    return None


def claims() -> dict[str, Claim]:
    """Test grade id -> the claim its passing establishes."""
    count, nbytes = "gqa_param_count", "kv_cache_bytes"
    return {
        "test_kv_cache_bytes_values": Claim(
            nbytes, _bytes_cases, _verify_counts(nbytes, _cache_bytes), call=_with_kwargs
        ),
        "test_repeat_kv_grouping": Claim("repeat_kv", _repeat_cases, _verify_repeat),
        "test_gqa_param_count_values": Claim(
            count, _count_cases, _verify_counts(count, _real_count), call=_with_kwargs
        ),
        "test_mha_to_gqa_pooling": Claim(
            "mha_to_gqa", _convert_cases, _verify_convert, call=_run_convert
        ),
    }
