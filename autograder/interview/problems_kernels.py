"""Problems from notebooks 04 §8 and 06: rotary embeddings at explicit positions, merging two
online-softmax blocks.

Shape legend: ``B`` batch, ``nh`` heads, ``T`` query length, ``S`` key/value length, ``hs``
head size, ``C`` = d_model, ``...`` any leading dimensions.
"""

from __future__ import annotations

import math

import torch

from autograder.checks import nb04_rope as rope
from autograder.checks import nb06_gpu as gpu

from .task import (
    Problem,
    Task,
    Variant,
    course_check,
    layout_moved,
    one_tensor,
    shaped,
    tensors,
    worded,
)

# ------------------------------------------------------------------------------------- RoPE


def _rope_interleaved(fn):
    def apply_rope(x, positions, **base):
        h = x.shape[-1] // 2
        pairs = torch.stack((x[..., :h], x[..., h:]), -1).flatten(-2)  # (x0, x_h), (x1, x_h+1)…
        out = one_tensor(fn(pairs, positions, **base), "apply_rope", "the rotated tensor")
        shaped(out, x.shape, "apply_rope", "the rotated tensor", "(..., T, hs)")
        return torch.cat((out[..., 0::2], out[..., 1::2]), -1)  # back to halves

    return apply_rope


def _rope_heads_third(fn):
    def apply_rope(x, positions, **base):
        bthd = x.unsqueeze(-2) if x.dim() < 3 else x.transpose(-3, -2)  # (..., T, nh, hs)
        out = one_tensor(fn(bthd, positions, **base), "apply_rope", "the rotated tensor")
        shaped(out, bthd.shape, "apply_rope", "the rotated tensor", "(..., T, nh, hs)")
        return out.squeeze(-2) if x.dim() < 3 else out.transpose(-3, -2)

    return apply_rope


def _rope_cos_sin(fn):
    def apply_rope(x, positions, base=rope.BASE):
        hs = x.shape[-1]
        theta = base ** -(torch.arange(0, hs, 2, dtype=torch.float64) / hs)  # (hs/2,)
        angles = positions.to(torch.float64)[:, None] * theta  # (T, hs/2)
        return fn(x, angles.cos().float(), angles.sin().float())

    return apply_rope


def _rope_task(signature: str, contract: str, adapt, rewrites=()) -> Task:
    graders = tuple(
        course_check(check, adapt)
        for check in (rope.check_apply_rope_values, rope.check_apply_rope_relative)
    )
    return Task("apply_rope", signature, contract, graders, (rope.ROPE,), rewrites)


_ROPE = (
    "Pair i of a head's hs features turns by the angle position · θ_i, θ_i = "
    "base^(−2i/hs), base = 10000 by default; `positions` (T,) are integers, the tokens' places "
    "in the text (not always 0 … T−1). Keep the shape and the dtype (compute the angles in "
    "float32 or wider, cast back) and do not change `x`."
)
_PAIRS = (
    "Your `apply_rope` does not rotate neighbouring features (x0, x1), (x2, x3), … as pairs by "
    "position · θ_i: this variant uses the interleaved layout, not halves (i, i + hs/2)."
)

# The extension's two calls ask for different layouts: each diagnosis names the call's own.
_DEFAULT_HALVES = (
    (
        rope.HALVES,
        "Your `apply_rope` with `interleaved=False`, the default, does not rotate split halves: "
        "by default features i and i + hs/2 form pair i (rotate_half(x) = cat(-x2, x1)), "
        "turned by position · θ_i.",
    ),
)
_FLAG_PAIRS = (
    (
        rope.HALVES,
        "Your `apply_rope` with `interleaved=True` does not rotate neighbouring features (x0, "
        "x1), (x2, x3), … as pairs by position · θ_i: with the flag set, features (2i, 2i + 1) "
        "form pair i, not halves (i, i + hs/2).",
    ),
)

ROPE = Problem(
    "rope",
    "Rotary position embeddings at explicit positions",
    "notebook 04 §8",
    "Rotate queries or keys by their positions, as a model with a KV cache must: the new "
    "tokens' positions continue after the cached ones.",
    (
        Variant(
            "interleaved",
            _rope_task(
                "def apply_rope(x, positions, base=10000.0):",
                f"`x` (..., T, hs). **Interleaved pairs**, the RoFormer paper's and Meta's own "
                f"Llama code's layout: features (2i, 2i + 1) form pair i. {_ROPE}",
                _rope_interleaved,
                ((rope.HALVES, _PAIRS), ("interleaved layout", _PAIRS)),
            ),
        ),
        Variant(
            "heads_third",
            layout_moved(
                _rope_task(
                    "def apply_rope(x, positions, base=10000.0):",
                    "`x` is **(..., T, nh, hs)**, positions before heads (Hugging Face's layout "
                    "before the transpose); features i and i + hs/2 form pair i (split halves, "
                    f"`rotate_half`). {_ROPE}",
                    _rope_heads_third,
                )
            ),
        ),
        Variant(
            "cos_sin",
            _rope_task(
                "def apply_rope(x, cos, sin):",
                "`x` (..., T, hs); `cos` and `sin` (T, hs/2), float32, are already computed "
                "for every position and pair. Features i and i + hs/2 form pair i (split "
                "halves); rotate each pair by its angle. Keep `x`'s shape and dtype and do not "
                "change `x`.",
                _rope_cos_sin,
            ),
        ),
    ),
    Task(
        "apply_rope",
        "def apply_rope(x, positions, base=10000.0, interleaved=False):",
        "Now a second checkpoint uses the other layout: support both, split halves by "
        "default and neighbouring pairs with `interleaved=True`, with `x` (..., T, hs).",
        (
            worded(course_check(rope.check_apply_rope_values, lambda fn: fn), _DEFAULT_HALVES),
            worded(
                course_check(
                    rope.check_apply_rope_values,
                    lambda fn: _rope_interleaved(lambda x, p, **b: fn(x, p, interleaved=True, **b)),
                ),
                _FLAG_PAIRS,
            ),
        ),
        (rope.ROPE,),
    ),
    ("rope_cache", "sliding_window"),
    written=("rope_relative",),
    numeric=("rope_wavelength",),
    box_minutes=15,
)

# -------------------------------------------------------------- merging online-softmax blocks


def _tiled(fn, unnormalised: bool):
    """``tiled_attention`` that attends block by block itself and merges with ``fn``."""

    def tiled_attention(q, k, v, block_size=64, causal=False):
        T, S = q.shape[-2], k.shape[-2]
        dtype = q.dtype
        work = torch.float32 if q.element_size() < 4 else dtype  # half inputs merge in float32
        q, k, v = (t.to(work) for t in (q, k, v))
        position = torch.arange(T)[:, None] + S - T  # (T, 1): each query's place
        state = None
        for start in range(0, S, block_size):
            kb, vb = k[..., start : start + block_size, :], v[..., start : start + block_size, :]
            s = q @ kb.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T, b)
            if causal:
                s = s.masked_fill(torch.arange(start, start + kb.shape[-2]) > position, -math.inf)
            m = s.amax(-1)  # (..., T): -inf for a row with no key in this block
            finite = torch.where(m.isinf(), 0.0, m)
            p = torch.exp(s - finite[..., None])  # (..., T, b)
            total, acc = p.sum(-1), p @ vb  # (..., T), (..., T, hs)
            if unnormalised:
                part = (acc, m, total)
            else:
                normed = torch.where(total[..., None] > 0, acc / total[..., None], 0.0)
                part = (normed, finite + total.log())
            state = part if state is None else fn(*state, *part)
            state = tensors(state, "merge", ("acc", "m", "l") if unnormalised else ("o", "lse"))
        out = state[0]
        if unnormalised:
            out = torch.where(state[2][..., None] > 0, out / state[2][..., None], 0.0)
        return out.to(dtype)

    return tiled_attention


def _merge_task(signature: str, contract: str, unnormalised: bool) -> Task:
    graders = tuple(
        course_check(check, lambda fn: _tiled(fn, unnormalised))
        for check in (gpu.check_tiled_values, gpu.check_tiled_causal)
    )
    return Task("merge", signature, contract, graders, (gpu.TILED,))


_MERGE = (
    "Attention over a long key sequence is computed block by block (FlashAttention, split-KV "
    "decoding, ring attention): each block of keys gives a partial result for every query, and "
    "two partial results must merge into the one that attending to both blocks gives. A row "
    "with no allowed key in a block (causal masking) has "
)

ONLINE_MERGE = Problem(
    "online_merge",
    "Merge two online-softmax blocks",
    "notebook 06 §5",
    "Combine the partial attention results of two key blocks exactly, without the scores.",
    (
        Variant(
            "lse",
            _merge_task(
                "def merge(o1, lse1, o2, lse2):",
                f"{_MERGE}`lse = -inf` and `o = 0`. Each partial result is `o` (..., T, hs), "
                "the block's normalised output, and `lse` (..., T), the log-sum-exp of the "
                "block's scaled scores. Return the merged `(o, lse)`; two empty blocks merge "
                "into an empty one (zeros and -inf, never NaN).",
                unnormalised=False,
            ),
        ),
        Variant(
            "running",
            _merge_task(
                "def merge(acc1, m1, l1, acc2, m2, l2):",
                f"{_MERGE}`m = -inf`, `l = 0`, `acc = 0`. Each partial result is "
                "FlashAttention-2's running state: `m` (..., T) the row maximum of the scaled "
                "scores, `l` (..., T) "
                "the sum of exp(score − m), `acc` (..., T, hs) the sum of exp(score − m)·v "
                "(not yet divided by l). Return the merged `(acc, m, l)`, never NaN.",
                unnormalised=True,
            ),
        ),
    ),
    Task(
        "tiled_attention",
        "def tiled_attention(q, k, v, block_size=64, causal=False):",
        "Now the whole loop: `q` (B, nh, T, hs), `k`, `v` (B, nh, S, hs); attend block by "
        "block of `block_size` keys with an online softmax, causal aligned bottom-right when "
        "asked, and return `out` (B, nh, T, hs) in q's dtype.",
        (course_check(gpu.check_tiled_values, lambda fn: fn),),
        (gpu.TILED,),
    ),
    ("flash_exact", "flash_io", "flash_backward"),
    written=("online_softmax",),
    numeric=("score_matrix",),
)
