"""Checks for notebook 08, section 5: ``rope_parameters``, RoPE stretched to longer contexts.

Shape legend: ``hs`` head size (even), ``hs/2`` rotation pairs; ``inv_freq (hs/2,)`` holds the
angle per position of each pair, ``θ_i = base^(-2i/hs)`` before any scaling.

The graded definitions are Hugging Face's ``rope_type`` values, written out here from the
formulas that ``transformers.modeling_rope_utils`` publishes (transformers is not needed):

- ``default``: ``θ_i``; attention factor 1.
- ``linear`` (position interpolation, Chen et al. 2023): ``θ_i / factor``, the same as dividing
  every position by ``factor``.
- ``dynamic`` (dynamic NTK-aware scaling): the *base* grows, ``base · (factor · L / L_orig -
  (factor - 1)) ** (hs / (hs - 2))`` with ``L = max(seq_len, L_orig)``: untouched up to the
  trained length, high frequencies almost unchanged, low ones interpolated.
- ``yarn`` (Peng et al. 2023): per pair, a ramp between the original θ_i (pairs that turn many
  times over the trained length, index below ``floor(d(beta_fast))``) and ``θ_i / factor`` (pairs
  that turn less than ``beta_slow`` times, index above ``ceil(d(beta_slow))``), with
  ``d(r) = hs · ln(L_orig / (2π r)) / (2 ln base)``; and an attention factor ``0.1 ln(factor) +
  1`` that multiplies cos and sin.

The oracle computes them in float64 from Python numbers; known-wrong variants (scaling the
positions instead of the base, the ramp reversed, the attention factor left out...) are the
same formulas with one change.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from autograder.torch_helpers import one_thread

from ._core import (
    call,
    close,
    describe,
    expect_tensor,
    fail,
    fmt_shape,
    make_generator,
    randint,
    wide_draws,
)

#: Learner-importable names that would compute these answers: none.
ANSWERS_IN_TOOLS: dict[str, str] = {}

PARAMS = "rope_parameters"


def _theta(hs: int, base: float) -> torch.Tensor:
    return base ** (-torch.arange(0, hs, 2, dtype=torch.float64) / hs)  # (hs/2,)


def _dynamic_base(hs, base, factor, original, seq_len, *, exponent=True, clamp=True) -> float:
    L = seq_len if seq_len is not None else original
    if clamp:
        L = max(L, original)
    scale = factor * L / original - (factor - 1)
    return base * scale ** (hs / (hs - 2) if exponent else 1.0)


def _ramp(hs, base, original, beta_fast, beta_slow, *, rounded=True) -> torch.Tensor:
    """YaRN's ramp ``(hs/2,)``: 0 for pairs kept as they are, 1 for pairs interpolated."""

    def correction_dim(rotations: float) -> float:
        return hs * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if rounded:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, hs - 1)
    if low == high:
        high += 0.001  # Hugging Face's guard against a zero-width ramp
    return ((torch.arange(hs // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)


def expected(rope_type, hs, base, factor, original, seq_len, beta_fast, beta_slow, **wrong):
    """The oracle ``(inv_freq (hs/2,) float64, attention_factor)``; ``wrong`` names a mistake."""
    theta = _theta(hs, base)
    if rope_type == "default":
        return theta, 1.0
    if rope_type == "linear":
        return (theta * factor if wrong.get("times") else theta / factor), 1.0
    if rope_type == "dynamic":
        if wrong.get("static"):  # the first NTK-aware formula: the factor, whatever the length
            return _theta(hs, base * factor ** (hs / (hs - 2))), 1.0
        if wrong.get("positions"):  # the NTK ratio applied like interpolation, base untouched
            return theta / _dynamic_base(hs, 1.0, factor, original, seq_len, exponent=False), 1.0
        new_base = _dynamic_base(
            hs,
            base,
            factor,
            original,
            seq_len,
            exponent=not wrong.get("no_exponent"),
            clamp=not wrong.get("no_clamp"),
        )
        return _theta(hs, new_base), 1.0
    ramp = _ramp(hs, base, original, beta_fast, beta_slow, rounded=not wrong.get("unrounded"))
    if wrong.get("reversed"):
        ramp = 1 - ramp
    inv_freq = theta * (1 - ramp) + theta / factor * ramp  # (hs/2,)
    attention = 0.1 * math.log(factor) + 1.0
    if wrong.get("no_attention"):
        attention = 1.0
    if wrong.get("sqrt_attention"):
        attention = math.sqrt(attention)
    return inv_freq, attention


def _variants(case: dict, rope_type: str) -> dict[str, dict]:
    """Known mistakes of ``rope_type``: diagnosis -> the oracle's ``wrong`` options."""
    at = f"With rope_type={rope_type!r} and factor={case['factor']}"
    return {
        "linear": {
            f"{at}, your frequencies are multiplied by the factor: interpolation divides them "
            "(positions squeezed by the factor turn the pairs more slowly).": {"times": True},
        },
        "dynamic": {
            f"{at}, you scale the frequencies (as if the positions were divided) instead of the "
            "base: NTK-aware scaling raises the base, base · scale ** (hs / (hs - 2)), so the "
            "fastest pairs barely change.": {"positions": True},
            f"{at}, the base is multiplied by the scale without the exponent hs / (hs - 2): "
            "that exponent makes the slowest pair interpolate by exactly the scale.": {
                "no_exponent": True
            },
            f"{at}, you raise the base by the factor whatever the length (the first, static "
            "NTK-aware formula): the dynamic one uses the scale factor · L / L_orig - (factor - 1) "
            "with L = max(seq_len, original_max_position).": {"static": True},
            f"{at}, a sequence shorter than the trained length shrinks the base: use L = "
            "max(seq_len, original_max_position), so nothing changes up to that length.": {
                "no_clamp": True
            },
        },
        "yarn": {
            f"{at}, your ramp runs the wrong way: pairs that turn many times over the trained "
            "length (the first ones) keep θ_i, the slow ones (the last) get θ_i / factor.": {
                "reversed": True
            },
            f"{at}, your ramp's ends are not rounded: low = floor(d(beta_fast)) and high = "
            "ceil(d(beta_slow)), as Hugging Face computes them.": {"unrounded": True},
            f"{at}, the attention factor is 1: YaRN multiplies cos and sin by 0.1 · ln(factor) "
            "+ 1 (its 'temperature'), so return that number.": {"no_attention": True},
            f"{at}, the attention factor is the square root of YaRN's: it multiplies cos and "
            "sin, so the scores grow by its square; return 0.1 · ln(factor) + 1.": {
                "sqrt_attention": True
            },
        },
    }.get(rope_type, {})


def _call(fn: Callable, case: dict) -> tuple[torch.Tensor, float]:
    __tracebackhide__ = True
    args = (case["rope_type"], case["hs"], case["base"])
    kwargs = {k: case[k] for k in ("factor", "original_max_position", "seq_len")}
    kwargs |= {k: case[k] for k in ("beta_fast", "beta_slow") if case["rope_type"] == "yarn"}
    result = call(fn, PARAMS, args, kwargs)
    if not isinstance(result, tuple | list) or len(result) != 2:
        fail(
            f"`{PARAMS}` should return `(inv_freq, attention_factor)`, got {type(result).__name__}."
        )
    inv_freq = expect_tensor(result[0], PARAMS, "a tensor as `inv_freq` (first item)")
    try:
        attention = float(result[1])
    except (TypeError, ValueError, RuntimeError):
        fail(f"`{PARAMS}` should return a number as `attention_factor` (second item).")
    if tuple(inv_freq.shape) != (case["hs"] // 2,):
        fail(
            f"`{PARAMS}({describe(args, kwargs)})` returned inv_freq of shape "
            f"{fmt_shape(inv_freq.shape)}: one frequency per pair, ({case['hs'] // 2},)."
        )
    return inv_freq, attention


def _cases(rope_type: str, gen, thorough: bool, seed: int) -> list[dict]:
    fixed = [  # (hs, base, factor, original, seq_len): Llama 2-, Llama 3- and Qwen-like
        (128, 10000.0, 4.0, 4096, None),
        (128, 500000.0, 8.0, 8192, 32768),
        (64, 10000.0, 2.0, 2048, 1024),
        (16, 1000.0, 3.0, 512, 4096),
    ]
    for _ in range(3 if thorough else 0):
        fixed.append(
            (
                2 * randint(gen, 4, 64),
                float(10 ** randint(gen, 3, 6)),
                float(randint(gen, 2, 16)),
                256 * randint(gen, 1, 32),
                (None, 256 * randint(gen, 1, 128))[randint(gen, 0, 1)],
            )
        )
    wide = wide_draws(seed, thorough, 2, (4, 64), (3, 6), (2, 32), (1, 64), (1, 256))
    fixed += [(2 * h, float(10**b), f / 2, 256 * o, 256 * s) for h, b, f, o, s in wide]
    return [
        dict(
            rope_type=rope_type,
            hs=hs,
            base=base,
            factor=factor,
            original_max_position=original,
            seq_len=seq_len,
            beta_fast=32.0 if i % 2 == 0 else 16.0,
            beta_slow=1.0 if i % 2 == 0 else 2.0,
        )
        for i, (hs, base, factor, original, seq_len) in enumerate(fixed)
    ]


def _check(fn: Callable, rope_type: str, seed: int, thorough: bool) -> None:
    __tracebackhide__ = True
    gen = make_generator(seed)
    for case in _cases(rope_type, gen, thorough, seed):
        oracle_args = (
            rope_type,
            case["hs"],
            case["base"],
            case["factor"],
            case["original_max_position"],
            case["seq_len"],
            case["beta_fast"],
            case["beta_slow"],
        )
        inv_freq, attention = _call(fn, case)
        right, right_attention = expected(*oracle_args)
        good = close(inv_freq.double(), right, atol=1e-9, rtol=1e-5)
        if good and math.isclose(attention, right_attention, rel_tol=1e-6):
            continue
        for why, wrong in _variants(case, rope_type).items():
            freq, att = expected(*oracle_args, **wrong)
            if close(inv_freq.double(), freq, atol=1e-9, rtol=1e-5) and math.isclose(
                attention, att, rel_tol=1e-6
            ):
                fail(why)
        if not good and close(inv_freq.double(), _theta(case["hs"], case["base"]), 1e-9, 1e-5):
            fail(
                f"With rope_type={rope_type!r} and factor={case['factor']}, your inv_freq are "
                "the unscaled θ_i = base^(-2i/hs): apply the scaling of this rope_type."
            )
        at = f"`{PARAMS}` with rope_type={rope_type!r}, hs={case['hs']}, base={case['base']:g}"
        if good:
            fail(
                f"{at} returns attention_factor {attention:g}, which should be {right_attention:g}."
            )
        fail(
            f"{at}, factor={case['factor']:g} gives frequencies that differ from "
            f"{_DEFINITION[rope_type]}."
        )


_DEFINITION = {
    "linear": "θ_i / factor",
    "dynamic": "θ_i with the base raised to base · (factor · L / L_orig - factor + 1) ** (hs / "
    "(hs - 2)), L = max(seq_len, L_orig)",
    "yarn": "YaRN's blend θ_i · (1 - ramp_i) + θ_i / factor · ramp_i",
}


@one_thread
def check_rope_linear(rope_parameters: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``rope_type="linear"``: every frequency divided by the factor; attention factor 1."""
    __tracebackhide__ = True
    _check(rope_parameters, "linear", seed, thorough)


@one_thread
def check_rope_dynamic(rope_parameters: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``rope_type="dynamic"``: the base raised by the NTK formula beyond the trained length."""
    __tracebackhide__ = True
    _check(rope_parameters, "dynamic", seed, thorough)


@one_thread
def check_rope_yarn(rope_parameters: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``rope_type="yarn"``: the per-pair ramp and the attention factor 0.1 ln(factor) + 1."""
    __tracebackhide__ = True
    _check(rope_parameters, "yarn", seed, thorough)
