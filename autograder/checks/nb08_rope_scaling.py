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
- ``llama3`` (Llama 3.1, Meta's ``apply_scaling``): per pair, by its wavelength ``λ_i = 2π / θ_i``
  against the trained length: ``θ_i`` where ``λ_i < L_orig / high_freq_factor``, ``θ_i / factor``
  where ``λ_i > L_orig / low_freq_factor``, and between them ``(1 - smooth) · θ_i / factor +
  smooth · θ_i`` with ``smooth = (L_orig / λ_i - low_freq_factor) / (high_freq_factor -
  low_freq_factor)``; attention factor 1.

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


def _theta(hs: int, base: float, over_hs: bool = False) -> torch.Tensor:
    """``θ_i = base^(-2i/hs)``, ``(hs/2,)``; ``over_hs``: the slip ``base^(-i/hs)``."""
    if over_hs:
        return base ** (-torch.arange(hs // 2, dtype=torch.float64) / hs)  # (hs/2,)
    return base ** (-torch.arange(0, hs, 2, dtype=torch.float64) / hs)  # (hs/2,)


def _dynamic_base(hs, base, factor, original, seq_len, *, exponent=True, clamp=True) -> float:
    L = seq_len if seq_len is not None else original
    if clamp:
        L = max(L, original)
    scale = factor * L / original - (factor - 1)
    return base * scale ** (hs / (hs - 2) if exponent else 1.0)


def _ramp(
    hs, base, original, beta_fast, beta_slow, *, rounded=True, features=False
) -> torch.Tensor:
    """YaRN's ramp ``(hs/2,)``: 0 for pairs kept as they are, 1 for pairs interpolated."""

    def correction_dim(rotations: float) -> float:
        return hs * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if rounded:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, hs - 1)
    if low == high:
        high += 0.001  # Hugging Face's guard against a zero-width ramp
    index = torch.arange(0, hs, 2) if features else torch.arange(hs // 2)  # (hs/2,)
    return ((index.double() - low) / (high - low)).clamp(0, 1)


def _llama3(theta, factor, original, low_freq_factor, high_freq_factor, **wrong) -> torch.Tensor:
    """Llama 3.1's frequencies ``(hs/2,)``, written as Meta's ``apply_scaling`` states them."""
    swapped = wrong.get("thresholds_swapped")  # which band the slip tests first
    if swapped:
        low_freq_factor, high_freq_factor = high_freq_factor, low_freq_factor
    long_wave, short_wave = original / low_freq_factor, original / high_freq_factor
    scaled = []
    for freq in theta.tolist():
        wavelength = freq if wrong.get("frequency") else 2 * math.pi / freq
        if swapped == "divide first" and wavelength > long_wave:
            scaled.append(freq / factor)
        elif wavelength < short_wave:
            scaled.append(freq)
        elif wavelength > long_wave:
            scaled.append(freq / factor)
        else:
            smooth = (original / wavelength - low_freq_factor) / (
                high_freq_factor - low_freq_factor
            )
            if wrong.get("smooth_inverted"):
                smooth = 1 - smooth
            scaled.append((1 - smooth) * freq / factor + smooth * freq)
    return torch.tensor(scaled, dtype=torch.float64)


def expected(
    rope_type,
    hs,
    base,
    factor,
    original,
    seq_len,
    beta_fast,
    beta_slow,
    low_freq_factor=1.0,
    high_freq_factor=4.0,
    **wrong,
):
    """The oracle ``(inv_freq (hs/2,) float64, attention_factor)``; ``wrong`` names a mistake."""
    over_hs = bool(wrong.get("over_hs"))
    theta = _theta(hs, base, over_hs)
    if rope_type == "default":
        return theta, 1.0
    if rope_type == "llama3":
        bands = (factor, original, low_freq_factor, high_freq_factor)
        return _llama3(theta, *bands, **wrong), 1.0
    if rope_type == "linear":
        return (theta * factor if wrong.get("times") else theta / factor), 1.0
    if rope_type == "dynamic":
        if wrong.get("static"):  # the first NTK-aware formula: the factor, whatever the length
            return _theta(hs, base * factor ** (hs / (hs - 2)), over_hs), 1.0
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
        return _theta(hs, new_base, over_hs), 1.0
    if wrong.get("swapped"):
        beta_fast, beta_slow = beta_slow, beta_fast
    ramp = _ramp(
        hs,
        base,
        original,
        beta_fast,
        beta_slow,
        rounded=not wrong.get("unrounded"),
        features=bool(wrong.get("features")),
    )
    if wrong.get("reversed"):
        ramp = 1 - ramp
    inv_freq = theta * (1 - ramp) + theta / factor * ramp  # (hs/2,)
    attention = 0.1 * math.log(factor) + 1.0
    if wrong.get("no_attention"):
        attention = 1.0
    if wrong.get("sqrt_attention"):
        attention = math.sqrt(attention)
    if wrong.get("log10"):
        attention = 0.1 * math.log10(factor) + 1.0
    return inv_freq, attention


def _variants(case: dict, rope_type: str) -> dict[str, dict]:
    """Known mistakes of ``rope_type``: diagnosis -> the oracle's ``wrong`` options."""
    at = f"With rope_type={rope_type!r} and factor={case['factor']}"
    over_hs = {
        f"{at}, your θ_i are base^(-i/hs): the exponent is -2i/hs over the pairs i = 0 … "
        "hs/2 - 1, i.e. i/(hs/2), torch.arange(0, hs, 2) / hs.": {"over_hs": True}
    }
    return over_hs | {
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
            f"{at}, your ramp's bounds are swapped: low = floor(d(beta_fast)) comes from the "
            "fast rotations (beta_fast, 32), high = ceil(d(beta_slow)) from the slow ones "
            "(beta_slow, 1), so low < high.": {"swapped": True},
            f"{at}, your ramp runs over the feature index 0, 2, 4 …: it runs over the pair "
            "index i = 0 … hs/2 - 1, torch.arange(hs // 2), the same i as θ_i.": {"features": True},
            f"{at}, your ramp's ends are not rounded: low = floor(d(beta_fast)) and high = "
            "ceil(d(beta_slow)), as Hugging Face computes them.": {"unrounded": True},
            f"{at}, the attention factor is 1: YaRN multiplies cos and sin by 0.1 · ln(factor) "
            "+ 1 (its 'temperature'), so return that number.": {"no_attention": True},
            f"{at}, the attention factor uses log10: YaRN's is 0.1 · ln(factor) + 1, the "
            "natural logarithm (math.log).": {"log10": True},
            f"{at}, the attention factor is the square root of YaRN's: it multiplies cos and "
            "sin, so the scores grow by its square; return 0.1 · ln(factor) + 1.": {
                "sqrt_attention": True
            },
        },
        "llama3": {
            f"{at}, the pairs between the two wavelengths blend the wrong way: smooth = "
            "(L_orig / λ - low_freq_factor) / (high_freq_factor - low_freq_factor) is 1 at "
            "the short end, where θ_i is kept, so the blend is (1 - smooth) · θ_i / factor + "
            "smooth · θ_i.": {"smooth_inverted": True},
            f"{at}, your inv_freq are the unscaled θ_i, as when the frequency θ_i is compared "
            "where the rule compares the wavelength λ_i = 2π / θ_i (tokens per turn) with "
            "L_orig / high_freq_factor and L_orig / low_freq_factor: every θ_i ≤ 1 is below "
            "both, so every pair is kept.": {"frequency": True},
            f"{at}, your two thresholds are swapped: every pair slower than L_orig / "
            "high_freq_factor is divided by the factor. The short one, L_orig / "
            "high_freq_factor, bounds the pairs kept as they are, the long one, L_orig / "
            "low_freq_factor, the pairs divided.": {"thresholds_swapped": "divide first"},
            f"{at}, your two thresholds are swapped: every pair faster than L_orig / "
            "low_freq_factor is kept. The short one, L_orig / high_freq_factor, bounds the "
            "pairs kept as they are, the long one, L_orig / low_freq_factor, the pairs "
            "divided.": {"thresholds_swapped": "keep first"},
        },
    }.get(rope_type, {})


def _call(fn: Callable, case: dict) -> tuple[torch.Tensor, float]:
    __tracebackhide__ = True
    args = (case["rope_type"], case["hs"], case["base"])
    kwargs = {k: case[k] for k in ("factor", "original_max_position", "seq_len")}
    kwargs |= {k: case[k] for k in ("beta_fast", "beta_slow") if case["rope_type"] == "yarn"}
    bands = ("low_freq_factor", "high_freq_factor")
    kwargs |= {k: case[k] for k in bands if case["rope_type"] == "llama3"}
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
    fixed = [  # (hs, base, factor, original, seq_len): Llama 2-, Llama 3.1- and Qwen-like
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
            low_freq_factor=1.0 if i % 3 != 2 else 2.0,  # Llama 3.1's 1 and 4 first
            high_freq_factor=4.0 if i % 3 != 2 else 8.0,
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
            case["low_freq_factor"],
            case["high_freq_factor"],
        )
        inv_freq, attention = _call(fn, case)
        right, right_attention = expected(*oracle_args)
        # tighter than TOLERANCE: the lowest frequencies are 1e-6 or less, below its atol
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
    "llama3": "Llama 3.1's rule by wavelength: θ_i below L_orig / high_freq_factor, θ_i / factor "
    "above L_orig / low_freq_factor, the smooth blend between",
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


@one_thread
def check_rope_llama3(rope_parameters: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``rope_type="llama3"``: kept, interpolated or blended by wavelength; attention factor 1."""
    __tracebackhide__ = True
    _check(rope_parameters, "llama3", seed, thorough)
