"""Checks for notebook 04, section 8: ``RotaryGroupedQueryAttention``, GQA with RoPE and a cache.

Shape legend: ``B`` batch, ``T`` new positions, ``P`` cached positions, ``S`` = P + T, ``C`` =
d_model, ``nh`` query heads, ``nkv`` key/value heads, ``hs`` = C // nh (even), ``hs/2`` pairs.

PyTorch is the oracle: q and k rotated by :func:`._rope.rotate` (complex numbers in float64),
then ``F.scaled_dot_product_attention(..., enable_gqa=True)`` on the learner's own projection
weights (:mod:`._gqa`). Decoding in pieces (:mod:`._decoding`) must equal one full pass, cache
included. Known-wrong answers are the same oracle fed the wrong way (rotated values, positions
restarting at 0, keys rotated again at every step...). ``apply_rope`` itself is checked in
:mod:`.nb04_rope`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F

from autograder.torch_helpers import one_thread

from . import _gqa, operators
from ._core import (
    RUN_AGAIN,
    NotWrittenYet,
    close,
    fail,
    first_match,
    make_generator,
    randint,
    randn,
)
from ._decoding import chunkings, decode
from ._rope import COMPLEX, HALVES, LLAMA3_BASE, restarted, rotate

#: What learner code may run: notebook 04's operators and complex rotations (:mod:`._rope`).
OPERATORS = operators.DEFAULT | operators.SDPA | COMPLEX

#: Learner-importable names that would compute these answers: none, no tool rotates queries or
#: keys (nb04_gqa's declarations hold for the notebook, whose cells import both modules).
ANSWERS_IN_TOOLS: dict[str, str] = {}

ROTARY = "RotaryGroupedQueryAttention"

FORWARD = f"{ROTARY}.forward"

STUB_GQA = (
    f"`{ROTARY}` builds on your `GroupedQueryAttention`, not written yet: finish exercise 3, "
    f"{RUN_AGAIN}."
)


def _rope_oracle(
    module,
    x,
    start: int = 0,
    *,
    k_positions=None,
    q_positions=None,
    rotate_q: bool = True,
    rotate_k: bool = True,
    rotate_v: bool = False,
    causal: bool = True,
    **how,
):
    """PyTorch's output for positions ``start:`` of ``x (B, S, C)`` with rotated q and k.

    Keys sit at ``k_positions`` (default ``0 … S-1``), new queries at ``q_positions`` (default
    ``start … S-1``); ``how`` goes to :func:`rotate` (layout, sign, exponent). ``causal=False``
    lets every query read every key.
    """
    q, k, v = _gqa.heads(module, x)  # (B, nh, S, hs), (B, nkv, S, hs) × 2
    S = x.shape[1]
    k_positions = torch.arange(S) if k_positions is None else k_positions  # (S,)
    q_positions = torch.arange(start, S) if q_positions is None else q_positions  # (T,)
    q = q[:, :, start:]  # (B, nh, T, hs)
    if rotate_q:
        q = rotate(q, q_positions, **how)
    if rotate_k:
        k = rotate(k, k_positions, **how)
    if rotate_v:
        v = rotate(v, k_positions, **how)
    T = q.shape[2]
    allowed = torch.ones(T, S, dtype=torch.bool).tril(S - T) if causal else None  # (T, S)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=True)
    B, nh, T, hs = out.shape
    return module.out_proj(out.transpose(1, 2).reshape(B, T, nh * hs))  # (B, T, C)


def _rotation_mistake(module, x, out) -> str:
    """Why a full pass (no cache) with RoPE gave ``out``."""
    T = x.shape[1]
    variants = {
        f"Your `{FORWARD}` rotates the values too: rotate only queries and keys, since the "
        "angle between them is what makes scores depend on m - n, and the values carry the "
        "content that the output mixes.": _rope_oracle(module, x, rotate_v=True),
        f"Your `{FORWARD}` output is attention without any rotation: apply apply_rope to q "
        "and k at their positions before attending.": _rope_oracle(
            module, x, rotate_q=False, rotate_k=False
        ),
        f"Your `{FORWARD}` rotates the keys but not the queries: both need apply_rope at their "
        "own positions.": _rope_oracle(module, x, rotate_q=False),
        f"Your `{FORWARD}` rotates the queries but not the keys: both need apply_rope at their "
        "own positions.": _rope_oracle(module, x, rotate_k=False),
        f"Your `{FORWARD}` pairs neighbouring features (interleaved, as in Meta's original "
        f"code), but {HALVES}.": _rope_oracle(module, x, layout="interleaved"),
        f"Your `{FORWARD}` output matches rotations by -position · θ_i: rotate_half(x) is "
        "cat(-x2, x1).": _rope_oracle(module, x, sign=-1),
        f"Your `{FORWARD}` rotates with base {LLAMA3_BASE:,.0f} (Llama 3's rope_theta): this "
        "course's apply_rope and its default are base 10000.": _rope_oracle(
            module, x, base=LLAMA3_BASE
        ),
    }
    return first_match(out, variants) or (
        f"Your `{FORWARD}` on {T} positions without a cache differs from grouped-query attention "
        "with q and k rotated at positions 0 … T-1: rotate after splitting into heads and before "
        "repeat_kv and attention."
    )


def _expect_rotated_cache(module, x, k, v, k_positions) -> None:
    """Fail unless the cache holds the keys rotated at their positions and the raw values."""
    __tracebackhide__ = True
    _, k_raw, v_raw = _gqa.heads(module, x)  # (B, nkv, S, hs)
    if not close(v, v_raw):
        if close(v, rotate(v_raw, k_positions)):
            fail(
                "Your cached values are rotated: rotate only the keys, and cache the values "
                "exactly as v_proj gives them."
            )
        fail(
            "Your cached v should be v_proj(x) split into kv heads, past positions first: the "
            "values are never rotated."
        )
    if close(k, rotate(k_raw, k_positions)):
        return
    if close(k, rotate(k_raw, k_positions + 1)):
        fail(
            "Your cached keys are rotated one position too far (1 … S instead of 0 … S-1): the "
            "outputs agree, since only distances count, but a cache that mixes with anyone "
            "else's is off by one. The first token sits at position 0."
        )
    if close(k, k_raw):
        fail(
            "Your cache holds the keys before rotation: rotate the new keys at their positions "
            "first and cache them rotated, so that no later step has to rotate the past again."
        )
    fail(
        "Your cached keys are not the keys rotated once, each at its own position 0 … S-1: "
        "rotate only the new keys (positions P … P+T-1), then append them to the cache."
    )


def _rotary_configs(gen, thorough: bool) -> list[tuple[int, int, int, bool]]:
    """``(C, nh, nkv, bias)`` with an even head size: GQA, MQA, MHA, then random ones."""
    configs = [(16, 2, 1, False), (32, 4, 2, True), (24, 3, 3, False), (32, 2, 2, True)]
    for _ in range(2 if thorough else 0):
        nkv, n_rep, hs = randint(gen, 1, 3), randint(gen, 1, 3), 2 * randint(gen, 1, 5)
        configs.append((nkv * n_rep * hs, nkv * n_rep, nkv, randint(gen, 0, 1) == 1))
    return configs


def _module(cls, gen, C, nh, nkv, bias):
    __tracebackhide__ = True
    try:
        return _gqa.build(cls, C, nh, nkv, bias, gen, name=ROTARY)
    except AssertionError as failure:
        if isinstance(failure, NotWrittenYet):
            fail(STUB_GQA)
        raise


@one_thread
def check_rotary_gqa_full_pass(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Without a cache: q and k rotated at 0 … T-1 (values not), the cache holds rotated keys;
    ``causal=False`` attends to every key."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for C, nh, nkv, bias in _rotary_configs(gen, thorough):
        module = _module(cls, gen, C, nh, nkv, bias)
        x = randn(gen, 2, randint(gen, 4, 8), C, dtype=torch.float32)  # (B, T, C)
        out, k, v = _gqa.forward(module, x, name=FORWARD)
        if not close(out, _rope_oracle(module, x)):
            fail(_rotation_mistake(module, x, out))
        _expect_rotated_cache(module, x, k, v, torch.arange(x.shape[1]))
        out, _, _ = _gqa.forward(module, x, causal=False, name=FORWARD)
        if not close(out, _rope_oracle(module, x, causal=False)):
            if close(out, _rope_oracle(module, x)):
                fail(
                    f"Your `{FORWARD}` masks the future even with causal=False: build the mask "
                    "only when causal is True, and attend to every key otherwise."
                )
            fail(
                f"Your `{FORWARD}` with causal=False differs from attention over every key with "
                "q and k rotated at 0 … T-1: only the mask depends on `causal`."
            )


def _turned_every_call(chunks: list[int]) -> torch.Tensor:
    """Position times the number of calls that rotated it, when every call rotates the whole
    cache again: the angle a cached key ends with, as a position ``(S,)``."""
    starts = torch.tensor([0, *chunks]).cumsum(0)[:-1].tolist()
    calls = len(chunks)
    return torch.cat(
        [
            torch.arange(s, s + size) * (calls - i)
            for i, (s, size) in enumerate(zip(starts, chunks, strict=True))
        ]
    )


def _decoding_mistake(module, x_seen, start, out, chunks) -> str:
    """Why the output for positions ``start:`` of ``x_seen`` is wrong, decoding with RoPE."""
    S = x_seen.shape[1]
    T = S - start
    if start == 0:
        return _rotation_mistake(module, x_seen, out)
    where = (
        f"Decoding with {start} cached position{'s' * (start != 1)} and {T} new one{'s' * (T > 1)}"
    )
    variants = {
        f"{where}, your new tokens are rotated as if they were at positions 0 … T-1: they sit "
        "at P … P+T-1, so use torch.arange(P, P + T) with P = past_kv[0].shape[2] (0 without "
        "a cache).": _rope_oracle(
            module, x_seen, start, k_positions=restarted(chunks), q_positions=torch.arange(T)
        ),
        f"{where}, your cached keys are rotated again at every step: rotate only the new keys, "
        "once, before appending them (the cache already holds rotated keys).": _rope_oracle(
            module, x_seen, start, k_positions=_turned_every_call(chunks)
        ),
    }
    return first_match(out, variants) or (
        f"{where} differs from one full causal pass with RoPE: rotate the new queries and keys "
        "at positions P … P+T-1, append the keys to the cache, attend with the bottom-right mask."
    )


@one_thread
def check_rotary_gqa_decoding(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Decoding in pieces with the cache equals one full causal pass with RoPE, cache included."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for C, nh, nkv, bias in _rotary_configs(gen, thorough):
        module = _module(cls, gen, C, nh, nkv, bias)
        S = 7 + (randint(gen, 0, 4) if thorough else 0)
        x = randn(gen, 2, S, C, dtype=torch.float32)  # (B, S, C)
        forward = functools.partial(_gqa.forward, module, name=FORWARD)
        for chunks in chunkings(S, ("after_prompt", "single", "uneven")):
            for piece, out, (k, v) in decode(x, chunks, forward):
                seen = x[:, : piece.stop]  # (B, S so far, C)
                if not close(out, _rope_oracle(module, seen, piece.start)):
                    fail(_decoding_mistake(module, seen, piece.start, out, piece.fed))
                _expect_decoded_cache(module, seen, k, v, piece.fed)


def _expect_decoded_cache(module, seen, k, v, chunks) -> None:
    """The cache after these chunks: rotated keys at their absolute positions, raw values."""
    __tracebackhide__ = True
    _, k_raw, _ = _gqa.heads(module, seen)  # (B, nkv, S, hs)
    if len(chunks) > 1 and close(k, rotate(k_raw, restarted(chunks))):
        fail(
            "Your cached keys were rotated at positions that restart at 0 in every call: the new "
            "keys sit at P … P+T-1, so use torch.arange(P, P + T) with P = past_kv[0].shape[2]."
        )
    _expect_rotated_cache(module, seen, k, v, torch.arange(seen.shape[1]))


# ------------------------------------------------------------ positions passed explicitly

WINDOW = 3  # keys a rolling buffer keeps


@one_thread
def check_rotary_gqa_positions(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``forward(x, past_kv, positions=...)`` rotates at the positions given: a chunk that starts
    later in the text, and a rolling buffer that keeps only the last few keys (its length stops
    telling the position)."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for C, nh, nkv, bias in _rotary_configs(gen, thorough):
        module = _module(cls, gen, C, nh, nkv, bias)
        T = randint(gen, 3, 6)
        x = randn(gen, 2, T, C, dtype=torch.float32)  # (B, T, C)
        start = randint(gen, 5, 90)
        positions = torch.arange(start, start + T)  # (T,)
        try:
            out, k, v = _gqa.forward(module, x, name=FORWARD, positions=positions)
        except AssertionError as failure:
            if "unexpected keyword argument 'positions'" in str(failure):
                fail(
                    f"Your `{FORWARD}` takes no `positions` argument: add `positions=None` "
                    "after `causal`, and count P … P+T-1 from the cache only when it is None."
                )
            raise
        _, k_raw, _ = _gqa.heads(module, x)  # (B, nkv, T, hs)
        counted = torch.arange(T)  # (T,): what the cache's length gives without a cache
        if not close(k, rotate(k_raw, positions)) and close(k, rotate(k_raw, counted)):
            if close(out, _rope_oracle(module, x, k_positions=counted, q_positions=positions)):
                fail(
                    f"Your `{FORWARD}` rotates the queries at the `positions` given but the new "
                    "keys at P … P+T-1 from the cache's length: rotate both at the positions "
                    "given."
                )
            fail(
                f"Your `{FORWARD}` ignores its `positions` argument: given positions "
                f"{start} … {start + T - 1}, it cached keys rotated at 0 … {T - 1}. Use the "
                "positions passed in, and the cache's length only when none are given."
            )
        expected = _rope_oracle(module, x, k_positions=positions, q_positions=positions)
        if not close(out, expected):
            fail(
                f"Your `{FORWARD}` given positions {start} … {start + T - 1} (no cache) differs "
                "from attention with q and k rotated at exactly those positions."
            )
        _expect_rotated_cache(module, x, k, v, positions)
        _expect_rolling_buffer(module, gen, C)


def _expect_rolling_buffer(module, gen, C: int) -> None:
    """Decode token by token keeping only the last ``WINDOW`` keys, positions passed in."""
    __tracebackhide__ = True
    S = WINDOW + 4
    x = randn(gen, 1, S, C, dtype=torch.float32)  # (B, S, C)
    past = None
    for t in range(S):
        out, k, v = _gqa.forward(
            module, x[:, t : t + 1], past, name=FORWARD, positions=torch.tensor([t])
        )
        lo = max(0, t - WINDOW)  # the oldest key still in the buffer
        kept = x[:, lo : t + 1]  # (B, n, C): the tokens whose keys the buffer holds
        expected = _rope_oracle(
            module,
            kept,
            kept.shape[1] - 1,
            k_positions=torch.arange(lo, t + 1),
            q_positions=torch.tensor([t]),
        )
        if not close(out, expected):
            fail(
                f"Decoding with a rolling buffer of the last {WINDOW} keys, your token at "
                f"position {t} (passed as positions=[{t}], with {k.shape[2] - 1} keys cached) "
                "is not rotated at that position: the cache's length stops telling the "
                "position once old keys are dropped, so rotate at the positions you are given."
            )
        past = (k[:, :, -WINDOW:], v[:, :, -WINDOW:])  # (B, nkv, ≤ WINDOW, hs): the buffer
