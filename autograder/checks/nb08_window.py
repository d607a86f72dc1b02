"""Checks for notebook 08, sections 1-2: ``sliding_window_mask`` and the rolling KV cache.

Shape legend: ``B`` batch, ``T`` new positions (queries), ``S`` keys, ``W`` the window, ``nh``
query heads, ``nkv`` key/value heads, ``hs`` head size.

A window of ``W`` lets the query at position ``p`` see the keys at positions ``p - W + 1 … p``
(``W`` keys, itself included: Mistral's and Hugging Face's convention). Queries are the last
``T`` of the ``S`` positions (bottom-right aligned, as in notebook 03's ``causal_mask``).

PyTorch is the oracle: notebook 03's bottom-right causal mask (``causal_lower_right`` read off
SDPA's weights) with the keys older than the window taken away, and SDPA itself for attention.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from autograder.torch_helpers import one_thread

from . import _masks as masks
from ._core import (
    call,
    close,
    describe,
    expect_pair,
    expect_shape,
    expect_unmodified,
    fail,
    first_match,
    fmt_shape,
    make_generator,
    randint,
    randn,
)

#: Learner-importable names that would compute these answers: notebook 03's tool hands out the
#: causal half of the window mask (its notebook withholds it too).
ANSWERS_IN_TOOLS: dict[str, str] = {
    "autograder.tools.nb03_masks.top_left_causal": (
        "the causal half of sliding_window_mask, as top_leftcausal(S, S)[S - T:]"
    ),
}

MASK = "sliding_window_mask"


def _mask_variants(T: int, S: int, W: int) -> dict[str, torch.Tensor]:
    at = f"`{MASK}({T}, {W}, S={S})`"
    variants = [
        (
            f"lets each query see {W + 1} keys, one too many: a window of W keeps keys p - W + 1 "
            "… p (itself included), so drop key p - W (use > p - W, not >= p - W).",
            masks.band(T, S, W, 0),
        ),
        (
            f"lets each query see only {W - 1} keys: a window of W includes the query itself, so "
            "keep keys p - W + 1 … p (W of them).",
            masks.band(T, S, W - 2, 0),
        ),
        (
            "is the plain causal mask: also drop the keys W or more positions behind each query "
            "(key j allowed iff p - W < j <= p).",
            masks.causal(T, S),
        ),
        (
            "lets queries see future keys: the window is one-sided, keys p - W + 1 … p, never "
            "after p.",
            masks.band(T, S, W - 1, W - 1),
        ),
        (
            "is inverted: True must mean the query may attend (the keys inside its window).",
            ~masks.window_mask(T, S, W),
        ),
        (
            "is aligned top-left: when S > T the queries are the last T positions, so query i sits "
            "at position p = S - T + i.",
            masks.tril(T, S, 0) & ~masks.tril(T, S, -W),
        ),
    ]
    return {f"{at} {why}": mask for why, mask in variants}


def _call_mask(fn: Callable, T: int, W: int, S: int | None) -> torch.Tensor:
    __tracebackhide__ = True
    kwargs = {} if S is None else {"S": S}
    out = call(fn, MASK, (T, W), kwargs)
    S = T if S is None else S
    hints = {
        (S, T): "rows are queries (T) and columns are keys (S), so it is transposed",
        (T, W): "the mask covers every key (S columns), the window only decides which are True",
        (1, 1, T, S): "return a plain (T, S) mask; broadcasting adds batch and head dimensions",
    }
    return masks.expect_mask(out, MASK, (T, S), describe((T, W), kwargs), hints)


@one_thread
def check_sliding_window_mask_values(
    sliding_window_mask: Callable, *, seed: int = 0, thorough: bool = False
) -> None:
    """``sliding_window_mask(T, window, S)``: query p sees keys p - W + 1 … p; S defaults to T;
    the mask is made on ``device``."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    cases = [(6, 3, None), (5, 1, None), (2, 3, 7), (1, 4, 9), (4, 8, 6), (5, 5, None)]
    for _ in range(6 if thorough else 0):
        T, W = randint(gen, 1, 12), randint(gen, 1, 10)
        cases.append((T, W, T + randint(gen, 0, 12)))
    for T, W, S in cases:
        out = _call_mask(sliding_window_mask, T, W, S)
        if S is None and not torch.equal(out, _call_mask(sliding_window_mask, T, W, T)):
            fail(f"`{MASK}({T}, {W})` should equal `{MASK}({T}, {W}, S={T})`: S defaults to T.")
        S = T if S is None else S
        generic = (
            f"`{MASK}({T}, {W}, S={S})` is not the sliding-window mask: entry [i, j] must be True "
            "exactly when p - W < j <= p, with p = S - T + i the query's position."
        )
        masks.diagnose(
            out, masks.window_mask(T, S, W), functools.partial(_mask_variants, T, S, W), generic
        )
    hint = "create the positions on `device` (torch.arange(S, device=device))"
    for device in (masks.META, "meta"):
        out = masks.call_on_meta(
            sliding_window_mask, MASK, (3, 2), {"S": 5, "device": device}, hint
        )
        if isinstance(out, torch.Tensor) and out.device != masks.META:
            fail(f"`{MASK}` returned a mask on {out.device} for device={device!r}: {hint}.")


# ------------------------------------------------------------------- the rolling cache

UPDATE = "rolling_cache_update"


def ring(sequence: torch.Tensor, end: int, window: int, gen) -> torch.Tensor:
    """The ring buffer ``(B, nkv, W, hs)`` after positions ``0 … end-1`` of ``sequence``: position
    ``p`` in slot ``p % W``; a slot never written holds noise (a cache is allocated, not zeroed)."""
    buffer = torch.randn(*sequence.shape[:2], window, sequence.shape[-1], generator=gen)
    buffer = buffer.to(sequence.dtype)  # (B, nkv, W, hs)
    positions = torch.arange(max(0, end - window), end)  # (n,): the positions still held
    buffer[:, :, positions % window] = sequence[:, :, positions]
    return buffer


def recent(sequence: torch.Tensor, start: int, T: int, window: int) -> torch.Tensor:
    """What the new queries at ``start … start+T-1`` can see: positions ``max(0, start - W + 1)
    … start + T - 1`` of ``sequence``, oldest first: ``(B, nkv, n, hs)``."""
    return sequence[:, :, max(0, start - window + 1) : start + T]


def _update_variants(sequence, buffer, start, T, W) -> dict[str, torch.Tensor]:
    """Known-wrong ``recent`` tensors for one update, by diagnosis."""
    past = min(start, W - 1)
    slots = torch.arange(start - past, start) % W  # (past,): where the old positions sit
    new = sequence[:, :, start : start + T]  # (B, nkv, T, hs)
    written = buffer.clone()  # (B, nkv, W, hs): the ring after the write
    written[:, :, torch.arange(start, start + T) % W] = new
    always = torch.arange(start - W + 1, start) % W  # (W - 1,): full or not
    variants = {
        f"`{UPDATE}` returns the cached keys in slot order: once the ring has wrapped, slot 0 no "
        "longer holds the oldest position, so read slots (start - n) % W … (start - 1) % W, "
        "oldest position first (torch.roll by -(start % W), or index with positions % W).": (
            torch.cat([buffer[:, :, slots.sort().values], new], dim=2)
        ),
        f"`{UPDATE}` returns W old positions besides the new ones: the first new query (at "
        "position start) sees only start - W + 1 … start, so W - 1 old positions are enough.": (
            sequence[:, :, max(0, start - W) : start + T]
        ),
        f"`{UPDATE}` returns the whole buffer before the cache is full: slots that were never "
        "written hold garbage, so return only the positions written so far.": torch.cat(
            [buffer, new], dim=2
        ),
        f"`{UPDATE}` reads the old positions after writing the new ones: position p + W lands "
        "on the slot of position p, which the first new queries still need, so read the old "
        "positions before you write.": torch.cat([written[:, :, slots], new], dim=2),
        f"`{UPDATE}` returns W - 1 old positions before the ring holds that many: slots never "
        "written hold garbage, so take only min(start, W - 1) old positions.": torch.cat(
            [buffer[:, :, always], new], dim=2
        ),
    }
    return variants


def _expect_ring(out, sequence, start, T, W) -> None:
    """The buffer after the update: the new positions in slots ``p % W``, the rest untouched."""
    __tracebackhide__ = True
    positions = torch.arange(max(0, start + T - W), start + T)  # (n,): the positions held now
    if not torch.equal(out[:, :, positions % W], sequence[:, :, positions]):
        fail(
            f"After `{UPDATE}` with start={start} and {T} new position(s), the buffer does not "
            f"hold position p in slot p % W (W={W}): write the new keys at slots "
            "torch.arange(start, start + T) % W, and never overwrite a position still needed."
        )


@one_thread
def check_rolling_cache_update(
    rolling_cache_update: Callable, *, seed: int = 0, thorough: bool = False
) -> None:
    """Writes positions ``start …`` into slots ``p % W`` of a copy of the ring, and returns the
    positions the new queries can see, ``max(0, start - W + 1) … start + T - 1``, oldest first."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    cases = [(4, 0, 3), (4, 2, 1), (4, 5, 1), (4, 9, 2), (3, 3, 3), (5, 7, 4), (1, 6, 1)]
    for _ in range(5 if thorough else 0):
        W = randint(gen, 1, 8)
        cases.append((W, randint(gen, 0, 3 * W), randint(gen, 1, W)))
    for W, start, T in cases:
        B, nkv, hs = 2, randint(gen, 1, 3), 4
        sequence = randn(gen, B, nkv, start + T, hs, dtype=torch.float32)  # (B, nkv, S, hs)
        buffer = ring(sequence, start, W, gen)  # (B, nkv, W, hs)
        new = sequence[:, :, start:].clone()  # (B, nkv, T, hs)
        before = buffer.clone(), new.clone()
        result = call(rolling_cache_update, UPDATE, (buffer, new, start))
        expect_unmodified(before, (buffer, new), UPDATE)
        inputs = describe((buffer, new, start))
        out, seen = expect_pair(result, UPDATE, "buffer", "recent")
        expect_shape(out, buffer.shape, f"The buffer `{UPDATE}` returns", inputs, "W slots")
        expected = recent(sequence, start, T, W)  # (B, nkv, n, hs)
        if not close(seen, expected):
            variants = _update_variants(sequence, buffer, start, T, W)
            fail(
                first_match(seen, variants)
                or f"`{UPDATE}(buffer, new, start={start})` with W={W}, T={T} should return "
                f"positions {max(0, start - W + 1)} … {start + T - 1}, oldest first, "
                f"{fmt_shape(expected.shape)}: got {fmt_shape(seen.shape)} that differ."
            )
        _expect_ring(out, sequence, start, T, W)
