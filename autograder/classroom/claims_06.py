"""Claims of notebook 06: the values of ``tiled_attention``, plain and causal.

Shape legend: ``B`` batch, ``nh`` heads, ``T`` query length, ``S`` key/value length,
``hs`` head size; q is ``(B, nh, T, hs)``, k and v ``(B, nh, S, hs)``.

The oracle is the checks' own: ``F.scaled_dot_product_attention`` in float64, causal aligned
bottom-right (query ``i`` may attend key ``j`` iff ``j <= i + S - T``), zeros for a query with no
allowed key. The cases are the checks' shapes: T ≠ S, block sizes that do not divide S, one block
larger than S, large scores, the default ``block_size``, and S < T for causal attention.

Left to the checks: the memory rule (no tensor as large as one head's scores), the ban on SDPA,
the output dtype of half-precision inputs, and the Triton kernel, which needs Triton to run at all.
``get_device`` has no claim either: its right answers are known in advance, so values sent back
would prove nothing.
"""

from __future__ import annotations

import torch

from autograder.checks import _online_softmax as online

from .claims import Claim, _gen, _mismatch, _with_kwargs

# The name as the checks spell it; ``autograder.checks.gpu`` itself is not imported, since it
# imports Triton, whose set-up changes the grader's environment.
TILED = "tiled_attention"

# (B, nh, T, S, hs, block): the checks' fixed cases, then one of each kind drawn here
_PLAIN = [
    (2, 2, 9, 9, 8, 4),
    (1, 3, 6, 11, 4, 4),
    (2, 1, 5, 7, 8, 3),
    (1, 2, 1, 10, 8, 4),
    (1, 1, 4, 9, 8, 16),
    (1, 1, 3, 5, 4, 1),
    (2, 3, 17, 23, 6, 7),
]
_CAUSAL = [
    (1, 2, 12, 12, 8, 4),
    (2, 1, 10, 10, 4, 3),
    (1, 2, 5, 13, 8, 4),
    (1, 1, 7, 16, 4, 5),
    (1, 2, 11, 6, 8, 4),  # S < T: the first T - S queries attend to nothing
    (2, 1, 9, 4, 4, 4),
    (2, 2, 19, 25, 6, 8),
]


def _qkv(gen, B, nh, T, S, hs, scale=1.0) -> tuple:
    q = scale * torch.randn(B, nh, T, hs, generator=gen)  # (B, nh, T, hs) float32
    k = torch.randn(B, nh, S, hs, generator=gen)  # (B, nh, S, hs)
    v = torch.randn(B, nh, S, hs, generator=gen)  # (B, nh, S, hs)
    return q, k, v


def _plain_cases() -> list[tuple]:
    """``(q, k, v, keyword arguments)``: float32, then large scores, the default block, float64."""
    gen = _gen(601)
    cases = []
    for B, nh, T, S, hs, block in _PLAIN:
        cases.append((*_qkv(gen, B, nh, T, S, hs), {"block_size": block, "causal": False}))
    # scores spread over hundreds: exp overflows unless the running max is subtracted
    cases.append((*_qkv(gen, 1, 2, 6, 24, 8, scale=60.0), {"block_size": 5, "causal": False}))
    cases.append((*_qkv(gen, 1, 1, 100, 100, 8), {}))  # block_size=64 leaves a partial block
    q, k, v = (t.to(torch.float64) for t in _qkv(gen, 1, 2, 7, 13, 8))
    cases.append((q, k, v, {"block_size": 4, "causal": False}))
    return cases


def _causal_cases() -> list[tuple]:
    gen = _gen(602)
    return [
        (*_qkv(gen, B, nh, T, S, hs), {"block_size": block, "causal": True})
        for B, nh, T, S, hs, block in _CAUSAL
    ]


def _call_text(case: tuple) -> str:
    q, k, _, kwargs = case
    options = "".join(f", {key}={value}" for key, value in kwargs.items())
    return f"`{TILED}` on q {tuple(q.shape)}, k {tuple(k.shape)}{options}"


def _verify_tiled(cases: list[tuple], outputs: list) -> str | None:
    for case, out in zip(cases, outputs, strict=True):
        q, k, v, kwargs = case
        what = _call_text(case)
        if isinstance(out, tuple):
            return f"{what} returned a tuple: return only the output tensor (B, nh, T, hs)"
        if isinstance(out, torch.Tensor) and not torch.isfinite(out).all():
            return f"{what} returned NaN or inf"
        expected = online.oracle(q, k, v, kwargs.get("causal", False))  # (B, nh, T, hs)
        problem = _mismatch(out, expected, what)
        if problem:
            return problem
    return None


def claims() -> dict[str, Claim]:
    """Test grade id -> the claim its passing establishes."""
    return {
        "test_tiled_attention_matches_sdpa": Claim(
            TILED, _plain_cases, _verify_tiled, call=_with_kwargs
        ),
        "test_tiled_attention_causal": Claim(
            TILED, _causal_cases, _verify_tiled, call=_with_kwargs
        ),
    }
