"""Claims of notebook 05: ``mha_sequential``, ``mha_parallel`` and ``attention_flops``.

Shape legend: ``B`` batch, ``T`` sequence length, ``C`` = d_model, ``nh`` heads,
``hs`` = C // nh (head size).

Both schedules are re-checked on their values, the way their checks test them: in the kernel the
learner's function gets ``x`` and a ``TorchMultiHeadAttention`` holding the claim's seeded float64
weights; the trusted side runs PyTorch's own forward on the same weights. The kernel's module
refuses to run whole, as the checks refuse an answer that calls ``mha(x)``. ``attention_flops`` is
compared with what ``FlopCounterMode`` counts for one forward on the meta device.

How the heads are scheduled (a loop or one batched product, counted in matrix products) and the
FLOPs each version really does are rules about the computation, not its values: those cells have
no claim, nor have the quiz answers.
"""

from __future__ import annotations

import math

import torch

from autograder.checks import parallel as checks
from autograder.lab.modules import TorchMultiHeadAttention

from .claims import Claim, _gen, _mismatch, _verify_counts, _with_kwargs

_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")

# (B, T, C, nh, bias): the checks' fixed cases (bias or none, nh = 1, nh = C, batch 1, T = 1)
_SIZES = [
    (2, 5, 12, 3, True),
    (2, 4, 12, 3, False),
    (1, 6, 8, 1, True),
    (2, 3, 6, 6, True),
    (1, 1, 8, 2, False),
    (3, 7, 16, 4, True),
    (2, 6, 15, 5, True),
]


class _SealedMHA(TorchMultiHeadAttention):
    """The module the kernel hands over: its projections are readable, running it whole is not."""

    def forward(self, *args, **kwargs):
        raise RuntimeError("compute the result from the projections, not by calling mha(x)")


def _mha_cases() -> list[tuple]:
    """``(nh, bias, {projection: (weight (C, C), bias (C,) or None)}, x (B, T, C))`` in float64."""
    gen = _gen(501)
    cases = []
    for B, T, C, nh, bias in _SIZES:
        weights = {
            proj: (
                torch.randn(C, C, generator=gen, dtype=torch.float64) / math.sqrt(C),  # (C, C)
                0.5 * torch.randn(C, generator=gen, dtype=torch.float64) if bias else None,  # (C,)
            )
            for proj in _PROJECTIONS
        }
        x = torch.randn(B, T, C, generator=gen, dtype=torch.float64)  # (B, T, C)
        cases.append((nh, bias, weights, x))
    return cases


def _module(cls: type, nh: int, bias: bool, weights: dict) -> TorchMultiHeadAttention:
    """A float64 ``cls(C, nh)`` holding ``weights``; the global random state is left alone."""
    C = weights["q_proj"][0].shape[0]
    with torch.random.fork_rng(devices=[]):
        mha = cls(C, nh, bias=bias).to(torch.float64)
    with torch.no_grad():
        for proj, (w, b) in weights.items():
            getattr(mha, proj).weight.copy_(w)
            if b is not None:
                getattr(mha, proj).bias.copy_(b)
    return mha


def _run_schedule(fn, case: tuple) -> object:
    """In the kernel: the learner's ``fn(x, mha)``, with gradients on, as the checks call it."""
    nh, bias, weights, x = case
    return fn(x, _module(_SealedMHA, nh, bias, weights))


def _verify_schedule(name: str):
    def verify(cases: list[tuple], outputs: list) -> str | None:
        for (nh, bias, weights, x), out in zip(cases, outputs, strict=True):
            what = f"`{name}` on x {tuple(x.shape)}, nh={nh}, bias={bias}"
            if isinstance(out, tuple):
                return f"{what} returned a tuple: return only the output tensor (B, T, C)"
            reference = _module(TorchMultiHeadAttention, nh, bias, weights)
            problem = _mismatch(out, checks._oracle(reference, x), what)  # (B, T, C)
            if problem:
                return problem
        return None

    return verify


# ------------------------------------------------------------------------------ FLOPs


def _flop_cases() -> list[tuple]:
    """The checks' sizes (the notebook's, GPT-2 small, nh = 1, nh = C, T = 1), then two more."""
    sizes = [(3, 7, 12, 4), (2, 128, 512, 8), (8, 1024, 768, 12), (1, 1, 8, 1), (1, 5, 6, 6)]
    sizes += [(4, 64, 64, 64), (5, 33, 40, 5), (2, 300, 96, 3)]
    return [(*size, {}) for size in sizes]


def _measured(B: int, T: int, C: int, nh: int) -> int:
    return checks._measured_flops(B, T, C, nh)[0]


def claims() -> dict[str, Claim]:
    """Test grade id -> the claim its passing establishes."""
    seq, par, flops = checks.SEQ, checks.PAR, checks.FLOPS
    return {
        "test_mha_sequential_matches_torch": Claim(
            seq, _mha_cases, _verify_schedule(seq), call=_run_schedule
        ),
        "test_mha_parallel_matches_torch": Claim(
            par, _mha_cases, _verify_schedule(par), call=_run_schedule
        ),
        "test_attention_flops_matches_flop_counter": Claim(
            flops, _flop_cases, _verify_counts(flops, _measured), call=_with_kwargs
        ),
    }
