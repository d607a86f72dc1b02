"""Claims of notebook 03: causal_mask, padding_mask, attention_mask, to_nn_mha_masks.

Shape legend: ``B`` batch, ``T`` query length, ``S`` key length. Masks are bool, True = may
attend, except the pair of ``to_nn_mha_masks`` (``nn.MultiheadAttention``'s, True = blocked).

The oracles are the checks' own: PyTorch's bottom-right causal bias, ``pad_sequence`` for the real
tokens and ``nn.MultiheadAttention.merge_masks`` to combine them. ``to_nn_mha_masks`` may answer
in several correct ways (bool or float masks, no ``attn_mask`` when not causal), so its masks are
judged, as by its check, by what ``nn.MultiheadAttention`` computes with them.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
from torch import nn

from autograder.checks import masking as checks

from .claims import Claim, _gen, _mismatch, _pair, _with_kwargs

# ------------------------------------------------------------------------------ bool masks


def _mask_mismatch(actual, expected: torch.Tensor, what: str) -> str | None:
    """Why ``actual`` is not the bool mask ``expected``, or None."""
    if not isinstance(actual, torch.Tensor):
        return f"{what}: {actual}"
    if tuple(actual.shape) != tuple(expected.shape):
        return f"{what} has shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
    if actual.dtype != torch.bool:
        return f"{what} is not a bool tensor"
    if not torch.equal(actual, expected):
        return f"{what} differs from PyTorch's mask"
    return None


def _verify_masks(name: str, oracle: Callable, rows: Callable | None = None) -> Callable:
    """Verify masks against ``oracle(*case)``; ``rows(*case)`` selects the rows that count."""

    def verify(cases: list[tuple], outputs: list) -> str | None:
        for case, out in zip(cases, outputs, strict=True):
            expected, what = oracle(*case), f"`{name}` on {_text(case)}"
            if rows is not None and isinstance(out, torch.Tensor) and out.shape == expected.shape:
                keep = rows(*case)  # (B, 1, T, 1): the rows the claim is about
                out, expected = out.where(keep, False), expected.where(keep, False)
            problem = _mask_mismatch(out, expected, what)
            if problem:
                return problem
        return None

    return verify


def _text(case: tuple) -> str:
    """A case by its sizes: ``lengths (3,), max_len=4, causal=True`` or ``T=2, S=6``."""
    if isinstance(case[0], torch.Tensor):
        parts = [f"lengths {tuple(case[0].shape)}", f"max_len={case[1]}"]
        parts += [f"{k}={v}" for k, v in (case[2] if len(case) > 2 else {}).items()]
        return ", ".join(parts)
    return ", ".join(f"{n}={v}" for n, v in zip("TS", case, strict=False))


def _causal(T: int, S: int | None = None) -> torch.Tensor:
    return checks._causal(T, T if S is None else S)  # (T, S)


def _combined(lengths: torch.Tensor, max_len: int, kwargs: dict) -> torch.Tensor:
    return checks._combined(checks._real(lengths, max_len), kwargs["causal"])  # (B, 1, T, T)


def _real_queries(lengths: torch.Tensor, max_len: int, kwargs: dict) -> torch.Tensor:
    """``(B, 1, T, 1)``: the rows of real queries; a padded query's row is don't-care."""
    return checks._real(lengths, max_len)[:, None, :, None]


def _lengths(*rows: list[int], dtype=torch.int64) -> list[torch.Tensor]:
    return [torch.tensor(row, dtype=dtype) for row in rows]


def _values_cases() -> list[tuple]:
    return [(5,), (4, 4), (2, 6), (1, 5), (3, 7), (1,), (6, 11), (8, 8)]


def _no_leak_cases() -> list[tuple]:
    return [(5,), (1,), (8,), (2, 6), (1, 5), (4, 7), (3, 20)]


def _padding_cases() -> list[tuple]:
    lengths = _lengths([3, 1, 4], [0, 2], [5], [1, 6, 0, 3])
    cases = list(zip(lengths, [4, 3, 5, 7], strict=True))
    cases.append((torch.tensor([2, 2, 2], dtype=torch.int32), 6))
    return cases


def _attention_cases() -> list[tuple]:
    lengths = _lengths([2, 5], [3, 1, 4], [1], [6, 2, 4, 1])
    lengths += _lengths([0, 2, 5], dtype=torch.int32)
    sizes = [(5, False), (4, True), (3, False), (6, True), (5, True)]
    return [(n, T, {"causal": c}) for n, (T, c) in zip(lengths, sizes, strict=True)]


def _invariance_cases() -> list[tuple]:
    lengths = _lengths([4, 2, 6, 1], [3, 5], [2, 3, 1]) + _lengths([1, 4, 2], dtype=torch.int32)
    sizes = [(6, True), (5, False), (3, False), (4, True)]
    return [(n, T, {"causal": c}) for n, (T, c) in zip(lengths, sizes, strict=True)]


# ---------------------------------------------------------------------- to_nn_mha_masks

_NN_CASES = [([3, 5, 1], 5, True), ([2, 4], 4, False), ([4, 2], 4, True), ([1, 3, 2], 3, False)]


def _nn_cases() -> list[tuple]:
    return [(torch.tensor(n), T, {"causal": causal}) for n, T, causal in _NN_CASES]


def _seeded_mha(C: int = 8, nh: int = 2) -> nn.MultiheadAttention:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(305)
        return nn.MultiheadAttention(C, nh, batch_first=True).double().eval()


def _verify_nn_masks(cases: list[tuple], outputs: list) -> str | None:
    """``nn.MultiheadAttention`` given the masks attends, for real queries, as the course's mask."""
    mha, gen = _seeded_mha(), _gen(306)
    for (lengths, T, kwargs), out in zip(cases, outputs, strict=True):
        what = f"`to_nn_mha_masks` on {_text((lengths, T, kwargs))}"
        pair = _pair(out, "(attn_mask, key_padding_mask)")
        if isinstance(pair, str):
            return f"{what}: {pair}"
        attn_mask, padding = pair
        if isinstance(attn_mask, str) or isinstance(padding, str):
            return f"{what}: {attn_mask if isinstance(attn_mask, str) else padding}"
        B = len(lengths)
        if not isinstance(padding, torch.Tensor) or tuple(padding.shape) != (B, T):
            return f"{what}: key_padding_mask is not a (B, T) tensor"
        if attn_mask is not None and not isinstance(attn_mask, torch.Tensor):
            return f"{what}: attn_mask is neither a tensor nor None"
        x = torch.randn(B, T, mha.embed_dim, generator=gen, dtype=torch.float64)  # (B, T, C)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                got, _ = mha(x, x, x, attn_mask=attn_mask, key_padding_mask=padding)  # (B, T, C)
            except (RuntimeError, TypeError, ValueError, AssertionError) as err:
                return f"{what}: nn.MultiheadAttention rejects the masks ({type(err).__name__})"
            real = checks._real(lengths, T)  # (B, T): padded queries are don't-care
            expected = checks._reference_mha(mha, x, _combined(lengths, T, kwargs))  # (B, T, C)
        problem = _mismatch(got[real], expected[real], f"{what}: the attention output")
        if problem:
            return problem
    return None


def claims() -> dict[str, Claim]:
    """Test grade id -> the claim its passing establishes."""
    causal, attention = _verify_masks("causal_mask", _causal), "attention_mask"
    return {
        "test_causal_mask_values": Claim("causal_mask", _values_cases, causal),
        "test_causal_mask_no_leak": Claim("causal_mask", _no_leak_cases, causal),
        "test_padding_mask_values": Claim(
            "padding_mask", _padding_cases, _verify_masks("padding_mask", checks._real)
        ),
        "test_attention_mask_values": Claim(
            attention, _attention_cases, _verify_masks(attention, _combined), call=_with_kwargs
        ),
        "test_attention_mask_padding_invariance": Claim(
            attention,
            _invariance_cases,
            _verify_masks(attention, _combined, rows=_real_queries),
            call=_with_kwargs,
        ),
        "test_to_nn_mha_masks_equivalent": Claim(
            "to_nn_mha_masks", _nn_cases, _verify_nn_masks, call=_with_kwargs
        ),
    }
