"""Decoding in pieces: the harness behind every "a cache gives what one full pass gives" check.

Shape legend: ``B`` batch, ``S`` positions in all, ``T`` new positions, ``P`` cached ones, ``C`` =
d_model.

A module with a KV cache is right when feeding a sequence in pieces, each call handed the cache the
previous one returned, gives the outputs of one full causal pass. Notebooks 04 (GQA, RoPE), 08
(MLA, the rolling window) and 10 (the rotary bug hunt) grade that property; the ways to cut the
sequence and the loop that carries the cache are the same for all of them, so they live here and
each check only says what it compares after every piece.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from ._core import fmt_shape

#: One token at a time, a prompt then two single tokens, uneven chunks.
WAYS = ("single", "after_prompt", "uneven")


def chunkings(S: int, ways: tuple[str, ...] = WAYS, prompt: int = 3) -> list[list[int]]:
    """Ways to cut ``S`` positions into the chunks of successive calls, in the order ``ways``
    names them: ``single`` (``[1] * S``), ``prompt`` (``prompt`` positions, then single ones),
    ``after_prompt`` (``prompt`` positions, then two single ones), ``uneven`` (``[2, 3, S -
    5]``, for ``S > 5``).

    ``after_prompt`` stops where ``prompt`` would only repeat ``single``: each later step is a
    call ``single`` makes too, one new token at the same position after the same cached keys,
    and every step costs the grader a recorded and recomputed call. A check whose cache changes
    with the length of the text (a rolling window) needs the whole ``prompt``.
    """
    made = {
        "single": [1] * S,
        "prompt": [prompt] + [1] * (S - prompt),
        "after_prompt": [prompt, 1, 1],
        "uneven": [2, 3, S - 5],
    }
    return [made[way] for way in ways]


@dataclass(frozen=True)
class Piece:
    """One call of a decoding loop: positions ``start:stop`` are new, ``0:start`` are cached,
    and ``fed`` are the chunks given so far, this one last."""

    start: int
    stop: int
    fed: list[int]


def pieces(chunks: list[int]) -> Iterator[Piece]:
    """The successive calls that feed ``chunks``."""
    start = 0
    for i, size in enumerate(chunks):
        yield Piece(start, start + size, chunks[: i + 1])
        start += size


def decode(
    x: torch.Tensor, chunks: list[int], forward: Callable[..., tuple]
) -> Iterator[tuple[Piece, torch.Tensor, tuple[Any, ...]]]:
    """Feed ``x (B, S, C)`` to ``forward(new (B, T, C), past) -> (out, *cache)`` in ``chunks``,
    each call handed the cache the previous one returned (None first); yields ``(piece, out,
    cache)`` after each call, for the check to compare with one full pass."""
    past = None
    for piece in pieces(chunks):
        out, *cache = forward(x[:, piece.start : piece.stop], past)
        past = tuple(cache)
        yield piece, out, past


class Cache(tuple):
    """A ``(k, v)`` pair handed to learner code; it describes itself by shape only in failure
    messages (they never print hidden inputs)."""

    def __repr__(self) -> str:
        return f"({fmt_shape(self[0].shape)}, {fmt_shape(self[1].shape)}) cache"
