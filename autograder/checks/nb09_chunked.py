"""Checks for notebook 09, section 4: chunked prefill, ``prefill_chunk``.

Shape legend: ``nh`` heads, ``L`` the prompt's length, ``T`` the chunk's queries, ``S`` the keys
cached once the chunk is written (``S = start + T``), ``hs`` head size.

A long prompt is prefilled ``c`` tokens at a time: chunk ``i`` holds positions ``start … start +
T - 1`` and attends to the cache of every earlier chunk plus itself, ``S = start + T`` keys. Its
mask is causal aligned bottom-right (query ``t`` sits at position ``S - T + t``), so decoding is
the chunk of one token. The chunks together must give exactly one causal pass over the prompt.

PyTorch is the oracle: ``F.scaled_dot_product_attention(..., is_causal=True)`` over the whole
prompt, cut into the rows of each chunk. The check drives the loop itself, for several chunk
sizes, one that leaves a last, shorter chunk among them, so a one-shot pass cannot stand in for
the chunk. Known mistakes are notebook 03's masks (``_masks``) put in the wrong place: aligned
top-left, the chunk blind to the earlier chunks, the diagonal dropped or one future key let in.
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
    expect_shape,
    expect_tensor,
    expect_unmodified,
    fail,
    first_match,
    make_generator,
    randint,
    randn,
)

#: The chunk may attend with PyTorch's SDPA: the mask is the exercise.
OPERATORS = operators.DEFAULT | operators.SDPA

#: Notebook 03's tool hands out the bottom-right mask, as ``top_left_causal(S, S)[S - T:]``.
ANSWERS_IN_TOOLS: dict[str, str] = {
    "autograder.tools.nb03_masks.top_left_causal": "prefill_chunk's mask, as [S - T:] of (S, S)",
}

CHUNK = "prefill_chunk"
SHAPES = "q is (nh, T, hs), the chunk's queries; k and v are (nh, S, hs), the cache with S >= T"


def chunks(L: int, size: int) -> list[tuple[int, int]]:
    """``(start, stop)`` of each chunk of ``size`` positions; the last one may be shorter."""
    return [(start, min(start + size, L)) for start in range(0, L, size)]


def _cases(gen, thorough: bool) -> list[tuple[int, int, list[int]]]:
    """``(nh, L, chunk sizes)``: one token at a time (decoding), even chunks, a short last chunk,
    one chunk for the whole prompt and a chunk larger than the prompt."""
    cases = [(2, 7, [1, 3, 7, 10]), (1, 8, [2, 5]), (3, 5, [4, 2])]
    for _ in range(3 if thorough else 0):
        L = randint(gen, 2, 16)
        cases.append((randint(gen, 1, 3), L, [randint(gen, 1, L - 1), randint(gen, 1, L)]))
    return cases


@one_thread
def check_prefill_chunk(prefill_chunk: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``prefill_chunk(q, k, v)``: the chunk's ``T`` queries ``(nh, T, hs)``, at the last ``T``
    of ``S`` positions, over the cache ``(nh, S, hs)``; the chunks of a prompt, fed in order, give
    one causal pass over it, for every chunk size."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for nh, L, sizes in _cases(gen, thorough):
        hs = 4
        q, k, v = (randn(gen, nh, L, hs, dtype=torch.float32) for _ in range(3))
        whole = F.scaled_dot_product_attention(
            q.double(), k.double(), v.double(), is_causal=True
        )  # (nh, L, hs)
        for size in sizes:
            for i, (start, stop) in enumerate(chunks(L, size)):
                args = (q[:, start:stop], k[:, :stop], v[:, :stop])
                before = tuple(t.clone() for t in args)
                out = call(prefill_chunk, CHUNK, args, hint=SHAPES)
                expect_unmodified(before, args, CHUNK)
                out = expect_tensor(out, CHUNK)
                where = (
                    f"`{CHUNK}` on chunk {i} (positions {start}…{stop - 1}) of a {L}-token "
                    f"prompt cut in chunks of {size}"
                )
                expect_shape(out, args[0].shape, where, describe(args), "(nh, T, hs), as q")
                if not close(out, whole[:, start:stop]):
                    _diagnose(out, args, where)


def _diagnose(out: torch.Tensor, args, where: str) -> None:
    __tracebackhide__ = True
    q, k, v = (t.double() for t in args)
    T, S = q.shape[-2], k.shape[-2]
    own = torch.zeros(T, S, dtype=torch.bool)
    own[:, S - T :] = masks.tril(T, T, 0)  # causal within the chunk, nothing before it
    wrong = {
        f"{where} aligns its causal mask top-left (SDPA's is_causal=True when T < S): the T "
        "queries are the last T of the S cached positions, so query t may see keys j <= S - T "
        "+ t (tril with diagonal S - T).": masks.top_left(T, S),
        f"{where} does not see the earlier chunks: its queries attend to the whole cache, the "
        "S - T keys written before this chunk included, and causally within the chunk.": own,
        f"{where} lets no query see itself: key j is allowed for j <= S - T + t, the diagonal "
        "included (<=, not <).": masks.tril(T, S, S - T - 1),
        f"{where} lets each query see one key after it: allow j <= S - T + t, not j <= S - T + "
        "t + 1.": masks.tril(T, S, S - T + 1),
        f"{where} has no causal mask: a query must not see the later tokens of its own chunk, "
        "which are in the cache already.": torch.ones(T, S, dtype=torch.bool),
    }
    variants = {why: torch.nan_to_num(masks.attend(q, k, v, mask)) for why, mask in wrong.items()}
    fail(
        first_match(out.detach().double(), variants)
        or f"{where} differs from the rows start…stop - 1 of one causal pass over the whole "
        "prompt: query t of the chunk sits at position S - T + t and attends to the keys at "
        "positions 0 … S - T + t."
    )
