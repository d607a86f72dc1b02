"""Learner implementations of notebook 08's ``rope_parameters``: Hugging Face's ``rope_type``
functions, the YaRN authors' code, Meta's Llama 3.1 ``apply_scaling``, plain Python, and the
classic mistakes.

Shape legend: ``hs`` head size (``dim`` in Hugging Face's code), ``hs/2`` rotation pairs.
"""

from __future__ import annotations

import math

import torch

from autograder.checks import nb08_rope_scaling as checks

from . import Mistake, correct, stub

# ---------------------------------------------------------------- Hugging Face's layout


def _hf_default(dim, base):
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def _hf_linear(dim, base, factor, **_):
    return _hf_default(dim, base) / factor, 1.0


def _hf_dynamic(dim, base, factor, max_position_embeddings, seq_len, **_):
    seq_len = (
        seq_len
        if seq_len is not None and seq_len > max_position_embeddings
        else max_position_embeddings
    )
    base = base * ((factor * seq_len / max_position_embeddings) - (factor - 1)) ** (dim / (dim - 2))
    return _hf_default(dim, base), 1.0


def _hf_yarn(dim, base, factor, max_position_embeddings, beta_fast, beta_slow, **_):
    attention_factor = 0.1 * math.log(factor) + 1.0

    def find_correction_dim(num_rotations):
        return (dim * math.log(max_position_embeddings / (num_rotations * 2 * math.pi))) / (
            2 * math.log(base)
        )

    low = max(math.floor(find_correction_dim(beta_fast)), 0)
    high = min(math.ceil(find_correction_dim(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    extrapolation_factor = 1 - ramp
    inv_freq = interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor
    return inv_freq, attention_factor


def _hf_llama3(dim, base, factor, max_position_embeddings, low_freq_factor, high_freq_factor, **_):
    inv_freq = _hf_default(dim, base)
    old_context_len = max_position_embeddings
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (
        high_freq_factor - low_freq_factor
    )
    smoothed_inv_freq = (
        1 - smooth_factor
    ) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama), 1.0


ROPE_INIT_FUNCTIONS = {
    "linear": _hf_linear,
    "dynamic": _hf_dynamic,
    "yarn": _hf_yarn,
    "llama3": _hf_llama3,
}


def params_hf(
    rope_type,
    head_dim,
    base=10000.0,
    factor=1.0,
    original_max_position=4096,
    seq_len=None,
    beta_fast=32.0,
    beta_slow=1.0,
    low_freq_factor=1.0,
    high_freq_factor=4.0,
):
    """A dispatch table, as Hugging Face's ``ROPE_INIT_FUNCTIONS``."""
    if rope_type == "default":
        return _hf_default(head_dim, base), 1.0
    return ROPE_INIT_FUNCTIONS[rope_type](
        dim=head_dim,
        base=base,
        factor=factor,
        max_position_embeddings=original_max_position,
        seq_len=seq_len,
        beta_fast=beta_fast,
        beta_slow=beta_slow,
        low_freq_factor=low_freq_factor,
        high_freq_factor=high_freq_factor,
    )


def params_meta(
    rope_type,
    head_dim,
    base=10000.0,
    factor=1.0,
    original_max_position=4096,
    seq_len=None,
    low_freq_factor=1.0,
    high_freq_factor=4.0,
):
    """Meta's ``llama/model.py`` ``apply_scaling``: a Python loop over the frequencies, one
    branch per band, and ``torch.tensor`` of the list (``llama3`` only)."""
    freqs = 1.0 / (base ** (torch.arange(0, head_dim, 2)[: (head_dim // 2)].float() / head_dim))
    low_freq_wavelen = original_max_position / low_freq_factor
    high_freq_wavelen = original_max_position / high_freq_factor
    new_freqs = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            new_freqs.append(freq)
        elif wavelen > low_freq_wavelen:
            new_freqs.append(freq / factor)
        else:
            smooth = (original_max_position / wavelen - low_freq_factor) / (
                high_freq_factor - low_freq_factor
            )
            new_freqs.append((1 - smooth) * freq / factor + smooth * freq)
    return torch.tensor(new_freqs, dtype=freqs.dtype), 1.0


def params_yarn_repo(
    rope_type,
    head_dim,
    base=10000.0,
    factor=1.0,
    original_max_position=4096,
    seq_len=None,
    beta_fast=32.0,
    beta_slow=1.0,
    **bands,
):
    """The YaRN authors' ``_yarn_find_correction_range`` / ``_yarn_linear_ramp_mask`` style:
    an extrapolation mask, and ``_yarn_get_mscale`` for the attention factor."""
    if rope_type != "yarn":
        return params_hf(rope_type, head_dim, base, factor, original_max_position, seq_len, **bands)
    dim = head_dim

    def correction_dim(rotations):
        return (dim * math.log(original_max_position / (rotations * 2 * math.pi))) / (
            2 * math.log(base)
        )

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), dim - 1)
    high = high + 0.001 if low == high else high
    linear = (torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)
    inv_freq_mask = 1 - torch.clamp(linear, 0, 1)  # 1: keep the pair as trained
    pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)
    inv_freq = (1.0 / (factor * pos_freqs)) * (1 - inv_freq_mask) + (
        1.0 / pos_freqs
    ) * inv_freq_mask
    mscale = 1.0 if factor <= 1 else 0.1 * math.log(factor) + 1.0
    return inv_freq, mscale


def params_python(
    rope_type,
    head_dim,
    base=10000.0,
    factor=1.0,
    original_max_position=4096,
    seq_len=None,
    beta_fast=32.0,
    beta_slow=1.0,
    low_freq_factor=1.0,
    high_freq_factor=4.0,
):
    """Every number in Python floats first, one tensor at the end."""
    pairs = range(head_dim // 2)
    attention = 1.0
    if rope_type == "dynamic":
        length = max(seq_len or 0, original_max_position)
        scale = factor * length / original_max_position - (factor - 1)
        base = base * scale ** (head_dim / (head_dim - 2))
    theta = [base ** (-2 * i / head_dim) for i in pairs]
    if rope_type == "linear":
        theta = [t / factor for t in theta]
    if rope_type == "yarn":
        d = [
            head_dim * math.log(original_max_position / (r * 2 * math.pi)) / (2 * math.log(base))
            for r in (beta_fast, beta_slow)
        ]
        low, high = max(math.floor(d[0]), 0), min(math.ceil(d[1]), head_dim - 1)
        width = (high - low) or 0.001
        ramp = [min(max((i - low) / width, 0.0), 1.0) for i in pairs]
        theta = [t * (1 - r) + t / factor * r for t, r in zip(theta, ramp, strict=True)]
        attention = 0.1 * math.log(factor) + 1.0
    if rope_type == "llama3":
        turns = [original_max_position * t / (2 * math.pi) for t in theta]  # L / wavelength
        width = high_freq_factor - low_freq_factor
        smooth = [min(max((n - low_freq_factor) / width, 0.0), 1.0) for n in turns]
        theta = [t / factor * (1 - m) + t * m for t, m in zip(theta, smooth, strict=True)]
    return torch.tensor(theta, dtype=torch.float64), attention


# ---------------------------------------------------------------------------- mistakes


def _wrong(rope_type_wrong, make):
    """``params_hf`` with ``rope_type_wrong`` answered by ``make(...)`` instead."""

    def rope_parameters(
        rope_type,
        head_dim,
        base=10000.0,
        factor=1.0,
        original_max_position=4096,
        seq_len=None,
        beta_fast=32.0,
        beta_slow=1.0,
        low_freq_factor=1.0,
        high_freq_factor=4.0,
    ):
        args = (head_dim, base, factor, original_max_position, seq_len, beta_fast, beta_slow)
        bands = (low_freq_factor, high_freq_factor)
        if rope_type == rope_type_wrong:
            return make(*args, *bands) if rope_type == "llama3" else make(*args)
        return params_hf(rope_type, *args, *bands)

    return rope_parameters


def _dynamic_on_positions(dim, base, factor, original, seq_len, *_):
    length = max(seq_len or 0, original)
    scale = factor * length / original - (factor - 1)
    return _hf_default(dim, base) / scale, 1.0  # positions divided by the NTK scale


def _dynamic_no_exponent(dim, base, factor, original, seq_len, *_):
    length = max(seq_len or 0, original)
    return _hf_default(dim, base * (factor * length / original - (factor - 1))), 1.0


def _dynamic_static(dim, base, factor, *_):
    return _hf_default(dim, base * factor ** (dim / (dim - 2))), 1.0


def _dynamic_no_clamp(dim, base, factor, original, seq_len, *_):
    length = original if seq_len is None else seq_len
    scale = factor * length / original - (factor - 1)
    return _hf_default(dim, base * scale ** (dim / (dim - 2))), 1.0


def _yarn_with(*, flip=False, attention=lambda a: a):
    def make(dim, base, factor, original, seq_len, beta_fast, beta_slow):
        inv_freq, a = _hf_yarn(dim, base, factor, original, beta_fast, beta_slow)
        if flip:
            theta = _hf_default(dim, base)
            ramp = (theta - inv_freq) / (theta - theta / factor)  # recover the ramp, then flip it
            inv_freq = theta * ramp + theta / factor * (1 - ramp)
        return inv_freq, attention(a)

    return make


LINEAR = checks.check_rope_linear
DYNAMIC = checks.check_rope_dynamic
YARN = checks.check_rope_yarn
LLAMA3 = checks.check_rope_llama3
CHECKS = [LINEAR, DYNAMIC, YARN, LLAMA3]
MISTAKES = [
    Mistake(
        "linear: multiplied",
        _wrong("linear", lambda d, b, f, *_: (_hf_default(d, b) * f, 1.0)),
        LINEAR,
        "multiplied by the factor",
    ),
    Mistake(
        "linear: unscaled",
        _wrong("linear", lambda d, b, *_: (_hf_default(d, b), 1.0)),
        LINEAR,
        "unscaled",
    ),
    Mistake(
        "dynamic: NTK on positions",
        _wrong("dynamic", _dynamic_on_positions),
        DYNAMIC,
        "instead of the base",
    ),
    Mistake(
        "dynamic: no exponent",
        _wrong("dynamic", _dynamic_no_exponent),
        DYNAMIC,
        "without the exponent",
    ),
    Mistake("dynamic: static NTK", _wrong("dynamic", _dynamic_static), DYNAMIC, "static"),
    Mistake("dynamic: no clamp", _wrong("dynamic", _dynamic_no_clamp), DYNAMIC, "shrinks the base"),
    Mistake("yarn: ramp reversed", _wrong("yarn", _yarn_with(flip=True)), YARN, "wrong way"),
    Mistake(
        "yarn: no attention factor",
        _wrong("yarn", _yarn_with(attention=lambda a: 1.0)),
        YARN,
        "the attention factor is 1",
    ),
    Mistake(
        "yarn: square root",
        _wrong("yarn", _yarn_with(attention=math.sqrt)),
        YARN,
        "square root",
    ),
]
# params_python writes its tensor from a list of Python numbers: rope_parameters is given no
# tensor, so the grader's replay accepts it as the function of its arguments it is.
CORRECT = correct(
    CHECKS, {"hf": params_hf, "yarn_repo": params_yarn_repo, "python": params_python}
) + correct([LLAMA3], {"meta": params_meta})
STUBS = [(check, stub) for check in CHECKS]
REPLAY = CHECKS


# ------------------------------------------- issue 45: the ramp's bounds and index, θ_i


def _yarn_swapped(dim, base, factor, original, seq_len, beta_fast, beta_slow):
    return _hf_yarn(dim, base, factor, original, beta_slow, beta_fast)


def _yarn_log10(dim, base, factor, original, seq_len, beta_fast, beta_slow):
    inv_freq, _ = _hf_yarn(dim, base, factor, original, beta_fast, beta_slow)
    return inv_freq, 0.1 * math.log10(factor) + 1.0


def _yarn_feature_ramp(dim, base, factor, original, seq_len, beta_fast, beta_slow):
    """The ramp evaluated at the feature index 0, 2, 4 … instead of the pair index."""
    d = [
        dim * math.log(original / (r * 2 * math.pi)) / (2 * math.log(base))
        for r in (beta_fast, beta_slow)
    ]
    low, high = max(math.floor(d[0]), 0), min(math.ceil(d[1]), dim - 1)
    high = high + 0.001 if low == high else high
    ramp = ((torch.arange(0, dim, 2).float() - low) / (high - low)).clamp(0, 1)
    theta = _hf_default(dim, base)
    return theta * (1 - ramp) + theta / factor * ramp, 0.1 * math.log(factor) + 1.0


def _linear_over_hs(dim, base, factor, *_):
    """θ_i = base^(-i/hs) over the pair index: the exponent over hs instead of hs/2."""
    return 1.0 / base ** (torch.arange(dim // 2).float() / dim) / factor, 1.0


MISTAKES += [
    Mistake("yarn: bounds swapped", _wrong("yarn", _yarn_swapped), YARN, "bounds are swapped"),
    Mistake("yarn: log10", _wrong("yarn", _yarn_log10), YARN, "uses log10"),
    Mistake("yarn: feature index", _wrong("yarn", _yarn_feature_ramp), YARN, "feature index"),
    Mistake("linear: θ over hs", _wrong("linear", _linear_over_hs), LINEAR, "base^(-i/hs)"),
]


# ------------------------------------------- issue 47: Llama 3.1's bands by wavelength


def _llama3_with(*, invert=False, frequency=False, swap=False):
    """Hugging Face's ``_compute_llama3_parameters`` with one slip."""

    def make(dim, base, factor, original, seq_len, beta_fast, beta_slow, low, high):
        if swap:
            low, high = high, low
        inv_freq = _hf_default(dim, base)
        wavelen = inv_freq if frequency else 2 * math.pi / inv_freq
        kept = torch.where(wavelen > original / low, inv_freq / factor, inv_freq)
        smooth = (original / wavelen - low) / (high - low)
        if invert:
            smooth = 1 - smooth
        blended = (1 - smooth) * kept / factor + smooth * kept
        medium = ~(wavelen < original / high) * ~(wavelen > original / low)
        return torch.where(medium, blended, kept), 1.0

    return make


MISTAKES += [
    Mistake(
        "llama3: smooth inverted",
        _wrong("llama3", _llama3_with(invert=True)),
        LLAMA3,
        "blend the wrong way",
    ),
    Mistake(
        "llama3: frequency for wavelength",
        _wrong("llama3", _llama3_with(frequency=True)),
        LLAMA3,
        "the frequency θ_i is compared",
    ),
    Mistake(
        "llama3: thresholds swapped",
        _wrong("llama3", _llama3_with(swap=True)),
        LLAMA3,
        "thresholds are swapped",
    ),
]
