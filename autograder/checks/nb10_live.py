"""Check for notebook 10 §5.8, the live-coding round: causal grouped-query self-attention from
bare weight tensors.

Shape legend: ``B`` batch, ``T`` sequence length, ``C`` = d_model, ``nh`` query heads, ``nkv``
key/value heads, ``hs`` = C // nh, ``n_rep`` = nh // nkv.

The oracle is ``nn.MultiheadAttention``: grouped-query attention equals multi-head attention
whose key and value weights repeat each kv head's rows for the ``n_rep`` query heads that read
it, so PyTorch's own module, holding those repeated weights, gives the answer. A known-wrong
output is the same computation done one wrong way (keys and values swapped, heads tiled instead
of grouped, the output projection not transposed, ...), with its diagnosis.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from autograder.torch_helpers import one_thread

from . import operators
from ._core import (
    call,
    close,
    describe,
    expect_dtype,
    expect_shape,
    expect_tensor,
    fail,
    make_generator,
    randint,
    randn,
)

#: Learner code may use PyTorch's attention.
OPERATORS = operators.DEFAULT | operators.SDPA

#: No tool of the course computes this answer.
ANSWERS_IN_TOOLS: dict[str, str] = {}

LIVE = "causal_gqa_live"


def _grouped(w: torch.Tensor, nkv: int, n_rep: int) -> torch.Tensor:
    """``(nkv·hs, C)`` kv weights -> ``(nh·hs, C)``: kv head j's rows for query heads j·n_rep …"""
    return w.view(nkv, -1, w.shape[-1]).repeat_interleave(n_rep, dim=0).flatten(0, 1)


def _torch_gqa(x, w_q, w_kv, w_out, nh, nkv) -> torch.Tensor:
    """Causal ``nn.MultiheadAttention`` (no biases) holding the kv rows repeated per group."""
    C = x.shape[-1]
    w_k, w_v = w_kv.chunk(2)  # (nkv·hs, C) each
    twin = nn.MultiheadAttention(C, nh, bias=False, batch_first=True, dtype=x.dtype)
    with torch.no_grad():
        n_rep = nh // nkv
        twin.in_proj_weight.copy_(
            torch.cat([w_q, _grouped(w_k, nkv, n_rep), _grouped(w_v, nkv, n_rep)])
        )
        twin.out_proj.weight.copy_(w_out)
        T = x.shape[1]
        blocked = ~torch.ones(T, T, dtype=torch.bool).tril()  # (T, T): True = blocked
        out, _ = twin(x, x, x, attn_mask=blocked, need_weights=False)
    return out  # (B, T, C)


def _variant(x, w_q, w_kv, w_out, nh, nkv, how: str) -> torch.Tensor:
    """Grouped-query attention computed one known-wrong way."""
    B, T, C = x.shape
    hs, n_rep = C // nh, nh // nkv
    w_k, w_v = w_kv.chunk(2)  # (nkv·hs, C) each
    if how == "swapped":
        w_k, w_v = w_v, w_k
    if how == "per head":  # each kv head's key rows, then its value rows (GPT-NeoX style)
        w_k, w_v = (t.reshape(nkv * hs, C) for t in w_kv.view(nkv, 2, hs, C).unbind(1))
    q = F.linear(x, w_q).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
    k, v = (F.linear(x, w).view(B, T, nkv, hs).transpose(1, 2) for w in (w_k, w_v))
    if how == "tiled":
        k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)  # (B, nh, T, hs)
    else:
        k, v = k.repeat_interleave(n_rep, 1), v.repeat_interleave(n_rep, 1)  # (B, nh, T, hs)
    scale = {"width": 1 / math.sqrt(C), "none": 1.0, "after": 1.0}.get(how, 1 / math.sqrt(hs))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=how != "not causal", scale=scale)
    if how == "after":
        out = out / math.sqrt(hs)  # weights @ v is linear in the weights
    out = out.transpose(1, 2).reshape(B, T, C)  # (B, T, C)
    return out @ w_out if how == "out not transposed" else out @ w_out.T


#: Known-wrong ways, in the order they are tried, and what each tells the learner.
MISTAKES = {
    "swapped": "w_kv stacks the keys first, then the values ([W_k; W_v]); yours reads the first "
    "half as values",
    "per head": "w_kv holds all kv heads' keys, then all their values; yours reads it as each "
    "head's keys followed by its values (GPT-NeoX's packed layout)",
    "tiled": "query head h reads kv head h % nkv, as torch.repeat / .repeat tile the heads; "
    "consecutive query heads share a kv head, so head h reads kv head h // n_rep "
    "(repeat_interleave)",
    "out not transposed": "the output projection is applied as y @ w_out; w_out is laid out "
    "like nn.Linear's weight, (out features, in features), so use y @ w_out.T",
    "not causal": "every query reads later positions: apply a causal mask",
    "width": "the scores are scaled by √d_model: one head compares hs numbers, so divide by √hs",
    "none": "the scores are not scaled: divide them by √hs before the softmax",
    "after": "the 1/√hs scale is applied after the softmax, which shrinks every weight: divide "
    "the scores, before the softmax",
}


def _cases(gen, thorough: bool) -> list[tuple[int, int, int, int, int]]:
    """``(B, T, C, nh, nkv)``: GQA with groups of two first, then MQA, MHA and random ones."""
    cases = [(2, 5, 16, 4, 2), (1, 6, 24, 6, 3), (2, 4, 12, 3, 1), (1, 5, 16, 2, 2)]
    for _ in range(3 if thorough else 0):
        nkv, n_rep, hs = randint(gen, 1, 3), randint(gen, 1, 3), randint(gen, 2, 5)
        cases.append((randint(gen, 1, 2), randint(gen, 2, 7), nkv * n_rep * hs, nkv * n_rep, nkv))
    return cases


@one_thread
def check_causal_gqa_live(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``fn(x, w_q, w_kv, w_out, num_heads, num_kv_heads)`` equals causal PyTorch attention."""
    __tracebackhide__ = True
    gen = make_generator(seed + 100)
    dtypes = [torch.float32] + ([torch.float64] if thorough else [])
    for dtype, (B, T, C, nh, nkv) in itertools.product(dtypes, _cases(gen, thorough)):
        hs = C // nh
        x = randn(gen, B, T, C, dtype=dtype)  # (B, T, C)
        w_q = randn(gen, C, C, dtype=dtype) / math.sqrt(C)  # (C, C)
        w_kv = randn(gen, 2 * nkv * hs, C, dtype=dtype) / math.sqrt(C)  # (2·nkv·hs, C)
        w_out = randn(gen, C, C, dtype=dtype) / math.sqrt(C)  # (C, C)
        args = (x, w_q, w_kv, w_out, nh, nkv)
        inputs = describe(args)
        out = expect_tensor(call(fn, LIVE, args), LIVE, "a tensor `out` (B, T, C)")
        expect_shape(out, x.shape, "`out`", inputs)
        expect_dtype(out, x.dtype, "`out`")
        if close(out, _torch_gqa(x, w_q, w_kv, w_out, nh, nkv)):
            continue
        for how, why in MISTAKES.items():
            if close(out, _variant(x, w_q, w_kv, w_out, nh, nkv, how), 1e-4, 1e-3):
                fail(f"Your output for inputs {inputs} matches attention in which {why}.")
        fail(
            f"Your output differs from causal grouped-query attention for inputs {inputs}: check "
            "which rows of w_kv hold keys and which values, which kv head each query head "
            "reads, the 1/√hs scale, the causal mask, and the output projection (y @ w_out.T)."
        )
