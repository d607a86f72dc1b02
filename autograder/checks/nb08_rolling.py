"""Checks for notebook 08, section 2: ``sliding_window_attention``, decoding with a rolling cache.

Shape legend: ``B`` batch, ``T`` new positions, ``S`` keys attended, ``W`` the window (the
ring's slots), ``nh`` query heads, ``nkv`` key/value heads, ``hs`` head size (even).

The strongest property: decoding a sequence in pieces (token by token, or chunks of at most
``W``), each piece attending through a ring buffer of ``W`` slots, equals one full pass with the
sliding-window mask. Queries and keys are rotated at their absolute positions (notebook 04's
``apply_rope``, split halves); the ring holds rotated keys and raw values, position ``p`` in slot
``p % W``.

PyTorch is the oracle: ``F.scaled_dot_product_attention(..., enable_gqa=True)`` over the whole
sequence with notebook 04's rotation oracle and the window mask of :mod:`.nb08_window`. Known
mistakes are the same decoding simulated the wrong way (positions from the slot, the ring read in
slot order, a window one too wide...).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from autograder.checks import operators
from autograder.torch_helpers import one_thread

from . import _masks as masks
from ._core import (
    call,
    close,
    describe,
    expect_pair,
    expect_shape,
    expect_tensor,
    fail,
    first_match,
    make_generator,
    randint,
    randn,
)
from ._decoding import chunkings, pieces
from ._rope import rotate

#: Learner code attends with PyTorch's SDPA, as notebook 04's modules do.
OPERATORS = operators.DEFAULT | operators.SDPA

#: Learner-importable names that would compute these answers: none.
ANSWERS_IN_TOOLS: dict[str, str] = {}

STEP = "sliding_window_attention"


def full_pass(q, k, v, window: int) -> torch.Tensor:
    """The oracle ``(B, nh, S, hs)``: everything rotated at ``0 … S-1``, the window mask."""
    S = q.shape[2]
    positions = torch.arange(S)
    return F.scaled_dot_product_attention(
        rotate(q, positions),
        rotate(k, positions),
        v,
        attn_mask=masks.window_mask(S, S, window),
        enable_gqa=True,
    )  # (B, nh, S, hs) @ (B, nh, hs, S) -> (B, nh, S, S) -> (B, nh, S, hs)


def simulate(q, k, v, window, chunks, **how):
    """Decode ``chunks`` through a ring of ``window`` slots, the way a mistaken step would.

    ``how`` switches one mistake on: ``slot_positions`` rotates at ``p % W``, ``restart`` at
    ``0 … T-1`` in every chunk, ``rotate_values`` turns the values too; ``slot_order`` reads the
    ring by slot, ``read`` otherwise (``"written"``: after the write; ``"always"``: W - 1 old
    slots, garbage before the ring is full); ``band`` allows keys
    ``p - band … p`` (-1: causal only) and ``mask`` is ``"none"`` or ``"top-left"``.
    Returns the outputs ``(B, nh, S, hs)`` and the final ring ``(k, v)``.
    """
    W = window
    ring_k = torch.zeros(*k.shape[:2], W, k.shape[-1], dtype=k.dtype)  # (B, nkv, W, hs)
    ring_v = torch.zeros_like(ring_k)  # (B, nkv, W, hs)
    outs, start = [], 0
    for T in chunks:
        positions = torch.arange(start, start + T)  # (T,)
        turned = positions % W if how.get("slot_positions") else positions
        turned = torch.arange(T) if how.get("restart") else turned
        q_new = rotate(q[:, :, start : start + T], turned)  # (B, nh, T, hs)
        k_new = rotate(k[:, :, start : start + T], turned)  # (B, nkv, T, hs)
        v_new = v[:, :, start : start + T]  # (B, nkv, T, hs)
        v_new = rotate(v_new, turned) if how.get("rotate_values") else v_new
        read = how.get("read")
        past = W - 1 if read == "always" else min(start, W - 1)
        slots = torch.arange(start - past, start) % W  # (past,)
        if how.get("slot_order"):
            slots = slots.sort().values
        if read == "written":
            ring_k[:, :, positions % W], ring_v[:, :, positions % W] = k_new, v_new
        keys = torch.cat([ring_k[:, :, slots], k_new], dim=2)  # (B, nkv, S, hs)
        values = torch.cat([ring_v[:, :, slots], v_new], dim=2)  # (B, nkv, S, hs)
        S = past + T
        band = how.get("band")
        mask = masks.band(T, S, W - 1 if band is None else (S if band < 0 else band), 0)  # (T, S)
        if how.get("mask") == "none":
            mask = None
        if how.get("mask") == "top-left":
            mask = torch.ones(T, S, dtype=torch.bool).tril()  # SDPA's is_causal=True
        outs.append(
            F.scaled_dot_product_attention(q_new, keys, values, attn_mask=mask, enable_gqa=True)
        )
        ring_k[:, :, positions % W], ring_v[:, :, positions % W] = k_new, v_new
        start += T
    return torch.cat(outs, dim=2), (ring_k, ring_v)


def _mistake(q, k, v, W, chunks, out) -> str:
    """Why the decoded outputs differ: the first wrong simulation they match."""
    where = f"Decoding in chunks {chunks} with a window of {W}"
    ex2 = (
        "rolling_cache_update's own test, exercise 2, names this too: fix it there, then run "
        "this test cell again"
    )
    variants = {
        f"{where}, your tokens are rotated at their slot p % W: the slot only says where a key "
        "is stored, RoPE needs the absolute position start + t (the distances between slots "
        "wrap around).": {"slot_positions": True},
        f"{where}, your positions restart at 0 in every chunk: rotate q and k at their absolute "
        "positions, torch.arange(start, start + T).": {"restart": True},
        f"{where}, you read the ring in slot order: once it has wrapped, slot 0 is not the "
        "oldest position, so the window mask hides the wrong keys; read the positions oldest "
        f"first ({ex2}).": {"slot_order": True},
        f"{where}, the old keys are read after the new ones were written into the ring, which "
        "overwrote positions the first new queries still need: read the old positions before "
        f"you write ({ex2}).": {"read": "written"},
        f"{where}, your queries attend to W - 1 old slots before the ring holds that many "
        "positions: slots never written hold garbage, so take only min(start, W - 1) old "
        f"positions ({ex2}).": {"read": "always"},
        f"{where}, your values are rotated too: RoPE turns queries and keys only; cache the "
        "values as given.": {"rotate_values": True},
        f"{where}, each query sees W + 1 keys: the window is p - W + 1 … p.": {"band": W},
        f"{where}, each query sees only W - 1 keys: the window includes the query itself.": {
            "band": W - 2
        },
        f"{where}, the queries of a chunk see every key handed to them up to their own "
        "position, older than their window too (a causal mask alone): mask with "
        "sliding_window_mask(T, W, S).": {"band": -1},
        f"{where}, the queries of a chunk see every key handed to them, later ones of the chunk "
        "included: no mask reached attention; pass attn_mask=sliding_window_mask(T, W, S) "
        "to F.scaled_dot_product_attention.": {"mask": "none"},
        f"{where}, your causal mask is aligned top-left (is_causal=True with S > T): the new "
        "queries are the last T of the S keys, so pass attn_mask=sliding_window_mask(T, W, S) "
        "instead.": {"mask": "top-left"},
    }
    found = first_match(
        out,
        {why: simulate(q, k, v, W, chunks, **how)[0] for why, how in variants.items()},
    )
    return found or (
        f"{where}, your outputs differ from one full pass with the sliding-window mask: rotate q "
        "and k at start … start+T-1, take the recent keys from rolling_cache_update, mask with "
        "sliding_window_mask(T, W, S)."
    )


def _configs(gen, thorough: bool) -> list[tuple[int, int, int, int]]:
    """``(nh, nkv, hs, W)``: GQA, MHA, MQA, then random ones."""
    configs = [(4, 2, 8, 3), (2, 2, 4, 4), (3, 1, 6, 2)]
    for _ in range(1 if thorough else 0):
        nkv = randint(gen, 1, 2)
        configs.append((nkv * randint(gen, 1, 3), nkv, 2 * randint(gen, 1, 4), randint(gen, 1, 5)))
    return configs


def _chunkings(S: int, W: int) -> list[list[int]]:
    """Token by token; a prompt of W then single tokens; one token then chunks of W, so that
    the ring has wrapped inside the old positions a chunk reads (their slots are not sorted)."""
    chunked = [1]
    while sum(chunked) < S:
        chunked.append(min(W, S - sum(chunked)))
    return [*chunkings(S, ("single", "prompt"), prompt=min(W, S)), chunked]


@one_thread
def check_sliding_window_decoding(
    sliding_window_attention: Callable, *, seed: int = 0, thorough: bool = False
) -> None:
    """Decoding in pieces through the ring equals one full pass with the window mask; the ring
    then holds rotated keys and raw values, position ``p`` in slot ``p % W``."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for nh, nkv, hs, W in _configs(gen, thorough):
        S = 2 * W + 2 + (randint(gen, 0, 2) if thorough else 0)
        q = randn(gen, 2, nh, S, hs, dtype=torch.float32)  # (B, nh, S, hs)
        k = randn(gen, 2, nkv, S, hs, dtype=torch.float32)  # (B, nkv, S, hs)
        v = randn(gen, 2, nkv, S, hs, dtype=torch.float32)  # (B, nkv, S, hs)
        expected = full_pass(q, k, v, W)  # (B, nh, S, hs)
        for chunks in _chunkings(S, W):
            cache = torch.zeros(2, nkv, W, hs), torch.zeros(2, nkv, W, hs)
            outs = []
            for piece in pieces(chunks):
                new = (t[:, :, piece.start : piece.stop] for t in (q, k, v))
                args = (*new, *cache, piece.start)
                result = call(sliding_window_attention, STEP, args)
                out, cache = _expect_result(result, args, piece.stop - piece.start)
                outs.append(out)
            if not close(torch.cat(outs, dim=2), expected):
                fail(_mistake(q, k, v, W, chunks, torch.cat(outs, dim=2)))
            _expect_cache(q, k, v, W, chunks, cache)


def _expect_result(result, args, T: int):
    """``(out (B, nh, T, hs), (cache_k, cache_v))`` with the shapes of the inputs."""
    __tracebackhide__ = True
    q, _, _, cache_k, cache_v, _ = args
    if not isinstance(result, tuple | list) or len(result) != 2:
        fail(f"`{STEP}` should return `(out, (cache_k, cache_v))`, got {type(result).__name__}.")
    out, cache = result
    inputs = describe(args)
    out = expect_tensor(out, STEP, "a tensor as `out` (first item)")
    expect_shape(
        out, q.shape, f"The output of `{STEP}`", inputs, "one row per query, (B, nh, T, hs)"
    )
    new_k, new_v = expect_pair(cache, STEP, "cache_k", "cache_v")
    expect_shape(
        new_k, cache_k.shape, f"The cache_k `{STEP}` returns", inputs, "the ring keeps W slots"
    )
    expect_shape(
        new_v, cache_v.shape, f"The cache_v `{STEP}` returns", inputs, "the ring keeps W slots"
    )
    return out, (new_k, new_v)


def _expect_cache(q, k, v, W, chunks, cache) -> None:
    """The final ring: rotated keys at absolute positions and raw values, in slots ``p % W``."""
    __tracebackhide__ = True
    S = k.shape[2]
    held = torch.arange(max(0, S - W), S)  # (n,): positions the ring holds at the end
    got_k, got_v = (t[:, :, held % W] for t in cache)
    if close(got_k, k[:, :, held]):
        fail(
            "After decoding, your ring holds the keys unrotated: rotate each new key at its "
            "position once and store it rotated, as notebook 04's cache does."
        )
    if not close(got_k, rotate(k, torch.arange(S))[:, :, held]) or not close(got_v, v[:, :, held]):
        fail(
            f"After decoding in chunks {chunks}, the ring does not hold position p in slot p % W "
            f"(W={W}), keys rotated at p and values as given: return the buffers "
            "rolling_cache_update wrote."
        )
