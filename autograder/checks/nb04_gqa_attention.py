"""Checks for notebook 04, the module: ``GroupedQueryAttention``'s structure and one full pass.

Shape legend: ``B`` batch, ``T`` positions, ``C`` = d_model, ``nh`` query heads, ``nkv``
key/value heads, ``hs`` = C // nh, ``n_rep`` = nh // nkv.

PyTorch is the oracle: ``nn.Linear`` parameter counts, ``F.scaled_dot_product_attention(...,
enable_gqa=True)`` fed with the learner's own projection weights (:mod:`._gqa`), and
``nn.MultiheadAttention`` when nkv = nh. Known-wrong answers are the same oracle fed the wrong way
(tiled heads, scores scaled by √d_model or not at all, the mask ignoring ``causal``). The cache,
decoding, counting and conversion checks of the notebook are in :mod:`.nb04_gqa`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch
from torch import nn

from autograder.torch_helpers import one_thread

from . import _gqa, operators
from ._core import call, close, fail, first_match, make_generator, randint, randn
from ._gqa import GQA, PROJECTIONS, TILED

#: The ATen operators learner code may run under these checks:
#: GQA is often written on PyTorch's attention (enable_gqa=True).
OPERATORS = operators.DEFAULT | operators.SDPA

#: Learner-importable names that would compute these answers. In the grading sandbox of any
#: notebook whose test cells use these checks, they keep their names but raise.
ANSWERS_IN_TOOLS: dict[str, str] = {
    "autograder.tools.nb04_gqa.TorchGroupedQueryAttention": (
        "GroupedQueryAttention: the structure and matches-torch cells"
    ),
    "autograder.tools.nb04_gqa.TinyDecoder": (
        "hands out TorchGroupedQueryAttention (its default attention class)"
    ),
}


@one_thread
def check_gqa_structure(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Attributes, narrow k/v projections, the bias flag, ValueError for indivisible sizes."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    configs = [(16, 4, 2, None), (16, 4, 4, True), (24, 6, 1, False), (12, 4, 2, True)]
    for _ in range(4 if thorough else 0):
        nkv, n_rep, hs = randint(gen, 1, 4), randint(gen, 1, 4), randint(gen, 1, 5)
        configs.append((nkv * n_rep * hs, nkv * n_rep, nkv, randint(gen, 0, 1) == 1))
    for C, nh, nkv, bias in configs:
        module = _gqa.construct(cls, C, nh, nkv, bias)
        expected = 2 * C * C + 2 * C * nkv * (C // nh) + bool(bias) * (2 * C + 2 * nkv * (C // nh))
        got = sum(p.numel() for p in module.parameters())
        if got != expected:
            fail(
                f"`{GQA}({C}, {nh}, {nkv}, bias={bool(bias)})` has {got:,} parameters instead "
                f"of {expected:,}: keep only q_proj, k_proj, v_proj and out_proj."
            )
    for C, nh, nkv, what in (
        (10, 3, 1, "d_model % num_heads"),
        (16, 4, 3, "num_heads % num_kv_heads"),
    ):
        try:
            call(cls, GQA, (C, nh, nkv))
        except AssertionError as failure:
            if "raised ValueError" in str(failure):
                continue
            raise
        fail(
            f"`{GQA}({C}, {nh}, {nkv})` should raise a ValueError, because {what} != 0: "
            "check both divisions in __init__."
        )


def _output_mistake(module, x, out, causal: bool) -> str | None:
    """The diagnosis of a known-wrong output of a full (cache-free) forward."""
    hs = x.shape[-1] // module.num_heads
    mask = "bottom-right" if causal else "none"
    oracle = functools.partial(_gqa.oracle, module, x)
    variants = {
        f"Your output matches attention in which {TILED}.": oracle(mask=mask, tiled=True),
        "Your scores are scaled by √d_model: scale by √hs (hs = d_model // num_heads).": oracle(
            mask=mask, scale=1 / math.sqrt(x.shape[-1])
        ),
        "Your scores are not scaled: divide them by √hs.": oracle(mask=mask, scale=1.0),
    }
    if causal:
        why = "With causal=True (the default) each position may only attend to itself and earlier"
        variants[f"{why} ones, but yours attends to every position: apply a causal mask."] = oracle(
            mask="none"
        )
    else:
        why = "With causal=False every position may attend to every position, but yours applies"
        variants[f"{why} a causal mask anyway: use the mask only when `causal` is True."] = oracle()
    if hs == 1:
        variants = {why: t for why, t in variants.items() if "scaled" not in why}
    return first_match(out, variants)


def _matches_mha(module, x, causal: bool) -> bool:
    """With nkv = nh the module should equal nn.MultiheadAttention holding the same weights."""
    C = x.shape[-1]
    bias = module.q_proj.bias is not None
    twin = nn.MultiheadAttention(C, module.num_heads, bias=bias, batch_first=True, dtype=x.dtype)
    with torch.no_grad():
        twin.in_proj_weight.copy_(torch.cat([getattr(module, p).weight for p in PROJECTIONS[:3]]))
        twin.out_proj.weight.copy_(module.out_proj.weight)
        if bias:
            twin.in_proj_bias.copy_(torch.cat([getattr(module, p).bias for p in PROJECTIONS[:3]]))
            twin.out_proj.bias.copy_(module.out_proj.bias)
        T = x.shape[1]
        blocked = ~torch.ones(T, T, dtype=torch.bool).tril() if causal else None  # True = blocked
        expected, _ = twin(x, x, x, attn_mask=blocked, need_weights=False)
    out, _, _ = _gqa.forward(module, x, causal=causal)
    return close(out, expected)


@one_thread
def check_gqa_matches_torch(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Equals SDPA with enable_gqa=True, causal or not; nkv = nh equals nn.MultiheadAttention."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    dtypes = [torch.float32] + ([torch.float64] if thorough else [])
    for dtype in dtypes:
        for C, nh, nkv, bias in _gqa.configs(gen, thorough):
            module = _gqa.build(cls, C, nh, nkv, bias, gen, dtype)
            x = randn(gen, 2, randint(gen, 3, 7), C, dtype=dtype)  # (B, T, C)
            for causal in (None, True, False):
                out, _, _ = _gqa.forward(module, x, causal=causal)
                if close(
                    out, _gqa.oracle(module, x, mask="none" if causal is False else "bottom-right")
                ):
                    continue
                setting = "causal=False" if causal is False else "causal=True"
                fail(
                    _output_mistake(module, x, out, causal is not False)
                    or f"Your output differs from F.scaled_dot_product_attention(..., "
                    f"enable_gqa=True) with your weights for d_model={C}, num_heads={nh}, "
                    f"num_kv_heads={nkv}, {setting}: check the head split, repeat_kv, the mask, "
                    "the merge and out_proj."
                )
            if nkv == nh and not all(_matches_mha(module, x, c) for c in (True, False)):
                fail(
                    f"With num_kv_heads = num_heads = {nh} your module should equal "
                    "nn.MultiheadAttention holding the same weights: check the head layout."
                )
