"""Checks for notebook 02, section 12: the Llama block's MLP width and parameter count.

Shape legend: ``C`` = d_model, ``h`` the MLP's hidden width, ``nh`` query heads, ``nkv``
key/value heads, ``hs`` = C // nh.

Both answers are formulas, checked by the rule of ``block_param_count``: integer arithmetic, no
PyTorch (:func:`_core.by_arithmetic`), on public and, during classroom verification, secret
configurations. The count's oracle is ``sum(p.numel())`` of the block's modules built on the
meta device: two ``nn.RMSNorm``, GQA's four bias-free projections, SwiGLU's three bias-free
matrices. The width's is the rule of Meta's Llama code, ``int(2 · 4C / 3)``, times
``ffn_dim_multiplier`` when given (truncated to an int), rounded **up** to a multiple of
``multiple_of``; it must also give the published widths of Llama 2 7B, 13B and 70B and Llama 3 8B.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from torch import nn

from autograder.torch_helpers import record_torch_calls

from . import _core
from ._core import call, fail, make_generator, randint

ANSWERS_IN_TOOLS: dict[str, str] = {}

HIDDEN, COUNT = "swiglu_hidden", "llama_block_param_count"
#: (d_model, multiple_of, ffn_dim_multiplier) -> the width in the model's published config.
PUBLISHED = {
    (4096, 256, None): 11008,  # Llama 2 7B
    (5120, 256, None): 13824,  # Llama 2 13B
    (8192, 4096, 1.3): 28672,  # Llama 2 70B
    (4096, 1024, 1.3): 14336,  # Llama 3 8B
}


def _int(fn, name, args, kwargs) -> int:
    __tracebackhide__ = True
    got = call(fn, name, args, kwargs)
    if isinstance(got, float) and kwargs.get("ffn_dim_multiplier") is not None:
        fail(
            f"`{name}` returned a float with ffn_dim_multiplier={kwargs['ffn_dim_multiplier']}: "
            "the multiplier times the width is a float, so truncate it, "
            "int(ffn_dim_multiplier * h), before rounding up."
        )
    if type(got) is not int:
        fail(
            f"`{name}` returned a {type(got).__name__}: a width or a count is an int, so use "
            "integer arithmetic (//, int(...))."
        )
    return got


# ----------------------------------------------------------------------------- hidden width


def _width(
    C, multiple_of=256, multiplier=None, *, third=True, up=True, late=False, exact=False
) -> int:
    """Meta's rule, or one of its classic slips (``third``, ``up``, ``late``, ``exact`` off the
    rule; ``up="next"``: always the next multiple, even from an exact one)."""
    m = multiple_of
    h = int(2 * 4 * C / 3) if third else 4 * C
    if multiplier is not None and not late:
        h = multiplier * h if exact else int(multiplier * h)
    if up == "next":
        h = m * (int(h) // m + 1)
    else:
        h = m * math.ceil(h / m) if exact else m * ((h + m - 1) // m) if up else h // m * m
    return int(multiplier * h) if multiplier is not None and late else h


def _hidden_guesses(C, m, mult) -> list[tuple[int, str]]:
    """``(value, why)`` of each classic slip at ``(C, m, mult)``."""
    return [
        (
            _width(C, m, mult, third=False),
            "keeps 4·d_model: SwiGLU's third matrix is paid for by "
            "taking 2/3 of it, int(2 * 4 * d_model / 3)",
        ),
        (
            int(2 * 4 * C / 3),
            "is 2/3 of 4·d_model without rounding up to a multiple of multiple_of",
        ),
        (
            _width(C, m, None),
            "ignores ffn_dim_multiplier: multiply the 2/3 width by it (then "
            "take int) before rounding",
        ),
        (
            _width(C, m, mult, up=False),
            "rounds down: round up to the next multiple of multiple_of, m * ((h + m - 1) // m)",
        ),
        (
            _width(C, m, mult, up="next"),
            "always adds a multiple: a width that is already a multiple of multiple_of stays as "
            "it is, so round up with m * ((h + m - 1) // m), not m * (h // m + 1)",
        ),
        (
            _width(C, m, mult, late=True),
            "applies ffn_dim_multiplier after rounding: multiply first, then round up",
        ),
        (
            _width(C, m, mult, exact=True),
            "rounds ffn_dim_multiplier · h up without truncating it first: take "
            "int(ffn_dim_multiplier * h), then round up, as Meta's code does",
        ),
    ]


def _hidden_mistake(got: dict[tuple, int]) -> str:
    """Name the slip that explains every answer in ``got`` (else one that explains the first
    wrong one); describe the first wrong one."""
    right = {c: PUBLISHED.get(c, _width(*c)) for c in got}
    (C, m, mult), value = next((c, v) for c, v in got.items() if v != right[c])
    where = f"`{HIDDEN}({C}, multiple_of={m}, ffn_dim_multiplier={mult})` returned {value:,}"
    table = {c: _hidden_guesses(*c) for c in got}
    everywhere = (
        why
        for i, (guess, why) in enumerate(table[(C, m, mult)])
        if guess == value and all(table[c][i][0] == v for c, v in got.items())
    )
    here = (why for guess, why in table[(C, m, mult)] if guess == value)
    why = next(everywhere, None) or next(here, None)
    rule = "int(2 * 4 * d_model / 3), times ffn_dim_multiplier if given, rounded up to a multiple"
    return f"{where}, which {why}." if why else f"{where}, which is wrong: {rule}."


def check_swiglu_hidden(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Meta's Llama hidden width, by integer arithmetic: the published Llama 2 and 3 widths,
    and the rule on other sizes (the default multiple_of=256, no multiplier)."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    # (768, 256): 2/3 of 4C is a multiple already; (3, 10, 1.3): int(1.3 · 8) is one, 10.4 not
    configs = list(PUBLISHED) + [(768, 256, None), (100, 64, 1.5), (3, 10, 1.3)]
    if thorough:
        configs += [(randint(gen, 1, 5000), 2 ** randint(gen, 0, 10), None) for _ in range(3)]
    configs += [(C, 2**e, None) for C, e in _core.wide_draws(seed, thorough, 3, (1, 9000), (0, 12))]
    with record_torch_calls() as names:
        got = {
            c: _int(fn, HIDDEN, (c[0],), {"multiple_of": c[1], "ffn_dim_multiplier": c[2]})
            for c in configs
        }
        default = _int(fn, HIDDEN, (4096,), {})
    _core.by_arithmetic(names, HIDDEN)
    if any(value != PUBLISHED.get(c, _width(*c)) for c, value in got.items()):
        fail(_hidden_mistake(got))
    if default != 11008:
        fail(
            f"`{HIDDEN}(4096)` returned {default:,}, not Llama 2 7B's 11,008: the defaults are "
            "multiple_of=256 and ffn_dim_multiplier=None."
        )


# --------------------------------------------------------------------------- block count


def _meta_count(C, nh, nkv, h) -> int:
    hs = C // nh
    parts = [nn.RMSNorm(C, device="meta"), nn.RMSNorm(C, device="meta")]
    parts += [nn.Linear(C, n, bias=False, device="meta") for n in (C, nkv * hs, nkv * hs)]
    parts += [nn.Linear(C, C, bias=False, device="meta")]  # the output projection
    parts += [nn.Linear(C, h, bias=False, device="meta") for _ in range(2)]  # gate, up
    parts += [nn.Linear(h, C, bias=False, device="meta")]  # down
    return sum(p.numel() for m in parts for p in m.parameters())


def _count_mistake(C, nh, nkv, h, got) -> str:
    where = f"`{COUNT}({C}, {nh}, {nkv}, {h})` returned {got:,}"
    hs = C // nh
    attn, mlp, norms = 2 * C * C + 2 * C * nkv * hs, 3 * C * h, 2 * C
    guesses = [
        (4 * C * C + mlp + norms, "ignores GQA: k_proj and v_proj are C × nkv·hs, not C × C"),
        (
            attn + 2 * C * h + norms,
            "counts two MLP matrices: SwiGLU has three (w1, w3: C → h; w2: h → C)",
        ),
        (attn + mlp + 2 * norms, "gives RMSNorm a bias: it has a scale only, C per norm"),
        (attn + mlp, "forgets the two RMSNorms' scales (C each)"),
        (attn + mlp + C, "counts one RMSNorm: a block has two, before the attention and the MLP"),
        (
            2 * C * C + 2 * C * nkv * C + mlp + norms,
            "uses C for the head size: k_proj and v_proj map C to nkv · hs with hs = C // nh",
        ),
        (attn + 4 * C + mlp + 2 * h + C + norms, "adds biases: Llama's linear layers have none"),
    ]
    why = next((why for value, why in guesses if value == got), None)
    return (
        f"{where}, which {why}."
        if why
        else f"{where}, which is wrong: count q_proj and o_proj "
        "(C × C), k_proj and v_proj (C × nkv·hs), SwiGLU's three matrices and two RMSNorm scales."
    )


def check_llama_block_param_count(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Equals the parameters of a Llama block's modules on the meta device (RMSNorm ×2, GQA,
    SwiGLU, no biases), by integer arithmetic; Llama 2 7B and 70B included."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    configs = [(16, 4, 2, 40), (12, 3, 3, 32), (4096, 32, 32, 11008), (8192, 64, 8, 28672)]
    if thorough:
        configs += [(nh * randint(gen, 1, 16), nh, 1, randint(gen, 1, 200)) for nh in (2, 4, 8)]
    configs += [
        (nh * hs, nh, nh, h)
        for nh, hs, h in _core.wide_draws(seed, thorough, 2, (1, 64), (1, 128), (1, 9999))
    ]
    with record_torch_calls() as names:
        got = {c: _int(fn, COUNT, c, {}) for c in configs}
    _core.by_arithmetic(names, COUNT)
    for (C, nh, nkv, h), value in got.items():
        if value != _meta_count(C, nh, nkv, h):
            fail(_count_mistake(C, nh, nkv, h, value))
