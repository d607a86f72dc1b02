"""Claims of notebook 01: softmax and scaled dot-product attention.

Shape legend: ``T`` queries, ``S`` keys, ``d_k`` / ``d_v`` widths, ``...`` leading dimensions.
"""

from __future__ import annotations

import math

import torch

from .claims import ATOL, RTOL, Claim, _gen, _mismatch, _pair


def _softmax_cases() -> list[tuple]:
    gen = _gen(101)
    cases = []
    for shape, dim in [((4, 7), -1), ((6, 6), 0), ((2, 3, 5), 1), ((3, 4, 5), -2), ((5,), 0)]:
        cases.append((2 * torch.randn(*shape, generator=gen, dtype=torch.float64), dim))
    cases.append((torch.randn(3, 5, generator=gen, dtype=torch.float32),))
    return cases


def _stable_cases() -> list[tuple]:
    gen = _gen(102)
    big = 1e4 + torch.randn(3, 6, generator=gen)  # (3, 6) float32
    mixed = torch.cat([big, -big, 30 * torch.randn(2, 6, generator=gen)])  # (8, 6)
    return [(big, -1), (-big, -1), (mixed, -1), (mixed.T.contiguous(), 0)]


def _softmax_reference(args: tuple) -> torch.Tensor:
    x, dim = (args[0], args[1]) if len(args) > 1 else (args[0], -1)
    return torch.softmax(x.to(torch.float64), dim)


def _verify_softmax(cases: list[tuple], outputs: list, atol=ATOL, rtol=RTOL) -> str | None:
    for args, out in zip(cases, outputs, strict=True):
        dim = args[1] if len(args) > 1 else "default"
        what = f"`softmax(x, dim={dim})` on shape {tuple(args[0].shape)}"
        problem = _mismatch(out, _softmax_reference(args), what, atol, rtol)
        if problem:
            return problem
    return None


def _verify_runs(cases: list[tuple], outputs: list) -> str | None:
    """The function runs and returns a tensor shaped like its input (what the test needs)."""
    for args, out in zip(cases, outputs, strict=True):
        if not isinstance(out, torch.Tensor):
            return f"`softmax` on shape {tuple(args[0].shape)}: {out}"
        if tuple(out.shape) != tuple(args[0].shape):
            return f"`softmax` on shape {tuple(args[0].shape)} returned shape {tuple(out.shape)}"
    return None


def _verify_stable(cases: list[tuple], outputs: list) -> str | None:
    for out in outputs:
        if isinstance(out, torch.Tensor) and not torch.isfinite(out).all():
            return "`softmax` returns NaN or inf for inputs like 1e4"
    return _verify_softmax(cases, outputs, atol=1e-4, rtol=1e-2)


_SDPA_SHAPES = [((), 3, 5, 4, 2), ((2,), 5, 7, 8, 4), ((2, 3), 4, 6, 8, 3), ((1,), 1, 1, 1, 1)]


def _qkv(gen, lead, T, S, d_k, d_v):
    def r(*shape):
        return torch.randn(*lead, *shape, generator=gen, dtype=torch.float64)

    return r(T, d_k), r(S, d_k), r(S, d_v)  # (..., T, d_k), (..., S, d_k), (..., S, d_v)


def _sdpa_cases() -> list[tuple]:
    gen = _gen(103)
    return [_qkv(gen, *shape) for shape in _SDPA_SHAPES]


def _mask_cases() -> list[tuple]:
    gen = _gen(104)
    cases = []
    q, k, v = _qkv(gen, (2,), 5, 7, 8, 4)
    mask = torch.rand(2, 5, 7, generator=gen) > 0.4  # (B, T, S)
    mask[0, 1] = False  # a query with no allowed key
    cases.append((q, k, v, mask))
    key_is_real = torch.tensor([[True] * 5 + [False] * 2])  # (1, S) broadcasts over queries
    cases.append((q, k, v, key_is_real))
    q, k, v = _qkv(gen, (2, 3), 6, 6, 4, 4)
    cases.append((q, k, v, torch.ones(6, 6, dtype=torch.bool).tril()))  # causal (T, S)
    return cases


def _sdpa_reference(q, k, v, mask=None) -> tuple[torch.Tensor, torch.Tensor]:
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # rows with no allowed key -> 0
    return weights @ v, weights  # (..., T, d_v), (..., T, S)


def _verify_sdpa(cases: list[tuple], outputs: list, values: bool = True) -> str | None:
    for args, out in zip(cases, outputs, strict=True):
        pair = _pair(out)
        what = "`scaled_dot_product_attention` on q " + str(tuple(args[0].shape))
        if isinstance(pair, str):
            return f"{what}: {pair}"
        expected = _sdpa_reference(*args)
        for name, actual, ref in zip(("out", "weights"), pair, expected, strict=True):
            if not values:
                shape = tuple(actual.shape) if isinstance(actual, torch.Tensor) else None
                if shape != tuple(ref.shape):
                    return f"{what}: {name} has shape {shape}, expected {tuple(ref.shape)}"
                continue
            problem = _mismatch(actual, ref, f"{what}: {name}")
            if problem:
                return problem
    return None


def claims() -> dict[str, Claim]:
    """Test grade id -> the claim its passing establishes."""
    from autograder.checks.attention import _SDPA_BUILTINS, _SOFTMAX_BUILTINS

    sdpa = "scaled_dot_product_attention"
    return {
        "test_softmax_matches_torch": Claim("softmax", _softmax_cases, _verify_softmax),
        "test_softmax_stable": Claim("softmax", _stable_cases, _verify_stable),
        "test_softmax_no_builtin": Claim(
            "softmax", _softmax_cases, _verify_runs, forbidden=_SOFTMAX_BUILTINS
        ),
        "test_scaled_dot_product_attention_shapes": Claim(
            sdpa, _sdpa_cases, lambda c, o: _verify_sdpa(c, o, values=False)
        ),
        "test_scaled_dot_product_attention_matches_torch": Claim(
            sdpa, _sdpa_cases, _verify_sdpa, forbidden=_SDPA_BUILTINS
        ),
        "test_scaled_dot_product_attention_mask": Claim(sdpa, _mask_cases, _verify_sdpa),
    }
