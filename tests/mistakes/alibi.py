"""Learner implementations of notebook 08's ALiBi: the paper's and BLOOM's slopes, BLOOM's and
MPT's biases, and the classic mistakes.

Shape legend: ``nh`` heads, ``T`` queries (the last T of S positions), ``S`` keys.
"""

from __future__ import annotations

import math

import torch

from autograder.checks import nb08_alibi as checks

from . import Mistake, correct, stub

# ------------------------------------------------------------------------------ slopes


def slopes_bloom(num_heads):
    """BLOOM's ``build_alibi_tensor``: powers of one base, extra heads from the next power."""
    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))), dtype=torch.float32)
    powers = torch.arange(1, 1 + closest_power_of_2, dtype=torch.int32)
    slopes = torch.pow(base, powers)
    if closest_power_of_2 != num_heads:
        extra_base = torch.tensor(
            2 ** (-(2 ** -(math.log2(2 * closest_power_of_2) - 3))), dtype=torch.float32
        )
        num_remaining_heads = min(closest_power_of_2, num_heads - closest_power_of_2)
        extra_powers = torch.arange(1, 1 + 2 * num_remaining_heads, 2, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra_base, extra_powers)], dim=0)
    return slopes


def slopes_exponents(num_heads):
    """Exponents first: -8(h+1)/n for the lower power of two, odd multiples of -8/(2n) after."""
    lower = 2 ** math.floor(math.log2(num_heads))
    first = torch.arange(1, lower + 1, dtype=torch.float64) * (-8 / lower)
    extra = torch.arange(1, 2 * (num_heads - lower) + 1, 2, dtype=torch.float64) * (
        -8 / (2 * lower)
    )
    return torch.pow(2.0, torch.cat([first, extra])).float()  # (nh,)


def slopes_python_list(num_heads):
    """As the ALiBi paper's repository writes it: the slopes as a Python list of floats, made a
    tensor at the end (one literal number per head, 96 and more for the check's head counts)."""

    def power_of_two(n):
        first = 2 ** (-(2 ** -(math.log2(n) - 3)))  # 2^(-8/n)
        return [first * first**h for h in range(n)]

    if math.log2(num_heads).is_integer():
        return torch.tensor(power_of_two(num_heads))
    lower = 2 ** math.floor(math.log2(num_heads))
    return torch.tensor(power_of_two(lower) + power_of_two(2 * lower)[0::2][: num_heads - lower])


def _geometric(num_heads):
    return torch.pow(2.0, torch.arange(1, num_heads + 1) * (-8 / num_heads))


def _extra_odd(num_heads):
    lower = 2 ** math.floor(math.log2(num_heads))
    doubled = _geometric(2 * lower)
    return torch.cat([_geometric(lower), doubled[1::2][: num_heads - lower]])


def _sorted(num_heads):
    return slopes_bloom(num_heads).sort(descending=True).values


SLOPES = checks.check_alibi_slopes
SLOPE_MISTAKES = [
    Mistake("slopes: one geometric sequence", _geometric, SLOPES, "not a power of two"),
    Mistake("slopes: the even extra ones", _extra_odd, SLOPES, "2nd, 4th"),
    Mistake("slopes: sorted", _sorted, SLOPES, "are sorted"),
    Mistake(
        "slopes: start at 1",
        lambda n: torch.pow(2.0, torch.arange(n) * (-8 / n)),
        SLOPES,
        "start at 1",
    ),
    Mistake("slopes: reversed", lambda n: slopes_bloom(n).flip(0), SLOPES, "wrong way"),
]

# -------------------------------------------------------------------------------- bias


def bias_distance(slopes, T, S=None):
    S = T if S is None else S
    distance = torch.arange(S - T, S)[:, None] - torch.arange(S)[None, :]  # (T, S): p - j
    bias = -slopes[:, None, None] * distance  # (nh, T, S)
    return bias.masked_fill(distance < 0, float("-inf"))


def bias_bloom(slopes, T, S=None):
    """BLOOM adds m_h · j (the key's position): a constant per row away from -m_h · (p - j)."""
    S = T if S is None else S
    alibi = slopes[:, None, None] * torch.arange(S)[None, None, :]  # (nh, 1, S)
    causal = torch.ones(T, S, dtype=torch.bool).tril(S - T)  # (T, S)
    return alibi.expand(-1, T, -1).masked_fill(~causal, float("-inf"))


def bias_mpt(slopes, T, S=None):
    """MPT's ``build_alibi_bias``: -|i - j| on a full grid times the slopes, last T rows, then
    the causal mask."""
    S = T if S is None else S
    alibi = torch.arange(1 - S, 1).view(1, 1, S)
    alibi = -(alibi - torch.arange(1 - S, 1).view(1, S, 1)).abs()  # (1, S, S)
    alibi = (alibi * slopes.view(-1, 1, 1))[:, S - T :]  # (nh, T, S)
    causal = torch.ones(T, S, dtype=torch.bool).tril(S - T)
    return alibi.masked_fill(~causal, float("-inf"))


def _bias_positive(slopes, T, S=None):
    S = T if S is None else S
    distance = torch.arange(S - T, S)[:, None] - torch.arange(S)[None, :]
    return (slopes[:, None, None] * distance).masked_fill(distance < 0, float("-inf"))


def _bias_without_causal(slopes, T, S=None):
    S = T if S is None else S
    distance = torch.arange(S - T, S)[:, None] - torch.arange(S)[None, :]
    return -slopes[:, None, None] * distance


def _bias_top_left(slopes, T, S=None):
    S = T if S is None else S
    distance = torch.arange(T)[:, None] - torch.arange(S)[None, :]
    return (-slopes[:, None, None] * distance).masked_fill(distance < 0, float("-inf"))


def _symmetric(slopes, T, S=None):
    S = T if S is None else S
    distance = torch.arange(S - T, S)[:, None] - torch.arange(S)[None, :]
    return -slopes[:, None, None] * distance.abs()


BIAS = checks.check_alibi_bias
BIAS_MISTAKES = [
    Mistake("bias: positive", _bias_positive, BIAS, "rewards"),
    Mistake("bias: future open", _bias_without_causal, BIAS, "leaves future keys open"),
    Mistake("bias: symmetric", _symmetric, BIAS, "both directions"),
    Mistake("bias: top-left", _bias_top_left, BIAS, "aligned top-left"),
    Mistake(
        "bias: bool mask",
        lambda m, T, S=None: bias_distance(m, T, S).isfinite().expand(len(m), -1, -1),
        BIAS,
        "float tensor",
    ),
]


MISTAKES = SLOPE_MISTAKES + BIAS_MISTAKES
CORRECT = correct(
    [SLOPES],
    {"bloom": slopes_bloom, "exponents": slopes_exponents, "python list": slopes_python_list},
) + correct([BIAS], {"distance": bias_distance, "bloom": bias_bloom, "mpt": bias_mpt})
STUBS = [(SLOPES, stub), (BIAS, stub)]
REPLAY = [SLOPES, BIAS]


# ------------------------------------------------------- issue 45: the slopes' dtype


def _slopes_float64(num_heads):
    """The exponents computed in float64 and never cast back: right values, not float32."""
    lower = 2 ** math.floor(math.log2(num_heads))
    first = torch.arange(1, lower + 1, dtype=torch.float64) * (-8 / lower)
    extra = torch.arange(1, 2 * (num_heads - lower) + 1, 2, dtype=torch.float64) * (
        -8 / (2 * lower)
    )
    return torch.pow(2.0, torch.cat([first, extra]))  # (nh,) float64


MISTAKES += [Mistake("slopes: float64", _slopes_float64, SLOPES, "contract is float32")]


def _slopes_next_power_cut(num_heads):
    """The extra heads take the first slopes of twice the lower power of two, not every other."""
    lower = 2 ** math.floor(math.log2(num_heads))
    return torch.cat([_geometric(lower), _geometric(2 * lower)[: num_heads - lower]])


def _bias_future_zero(slopes, T, S=None):
    """The distance clamped at 0: future keys get a bias of 0 instead of -inf."""
    S = T if S is None else S
    distance = torch.arange(S - T, S)[:, None] - torch.arange(S)[None, :]  # (T, S)
    return -slopes[:, None, None] * distance.clamp(min=0)  # (nh, T, S)


MISTAKES += [
    Mistake("slopes: next power of two cut", _slopes_next_power_cut, SLOPES, "before cutting"),
    Mistake("bias: future keys 0", _bias_future_zero, BIAS, "a bias of 0"),
]
