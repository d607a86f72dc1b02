"""Checks for notebook 08, section 3: ``sink_attention``, StreamingLLM's cache of sinks + window.

Shape legend: ``B`` batch, ``nh`` query heads, ``nkv`` key/value heads, ``P`` kept positions
before this token, ``n`` kept after it, ``hs`` head size (even).

The graded choice is StreamingLLM's (Xiao et al. 2024, §3.2): the cache keeps the first
``n_sink`` tokens and the ``window`` most recent ones (the new token included), stores keys
*before* rotation, and numbers positions **inside the cache**: the kept keys are rotated at
``0 … n-1`` and the new query at ``n - 1``, at every step. Distances then never exceed what the
model saw in training, however long the stream. Rotating at the positions in the text instead is
the mistake this check names (Hugging Face's former ``SinkCache`` kept rotated keys and turned
them back by the shift, which gives the same numbers as the graded choice).

PyTorch is the oracle: the kept tokens chosen by index, notebook 04's rotation oracle at the
cache's positions, ``F.scaled_dot_product_attention(..., enable_gqa=True)``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from autograder.checks import operators
from autograder.torch_helpers import one_thread

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
from ._rope import rotate

#: Learner code attends with PyTorch's SDPA.
OPERATORS = operators.DEFAULT | operators.SDPA

#: Learner-importable names that would compute these answers: none.
ANSWERS_IN_TOOLS: dict[str, str] = {}

SINK = "sink_attention"


def kept(t: int, n_sink: int, window: int) -> torch.Tensor:
    """The text positions the cache holds after token ``t``: ``(n,)``."""
    if t + 1 <= n_sink + window:
        return torch.arange(t + 1)
    return torch.cat([torch.arange(n_sink), torch.arange(t - window + 1, t + 1)])


def oracle(
    q, k, v, t, n_sink, window, *, text_positions=False, keep=None, q_shift: int | None = 0
) -> torch.Tensor:
    """The new token ``t``'s output ``(B, nh, 1, hs)`` through the sink cache (or a mistake's;
    ``q_shift=None`` rotates the query at position 0)."""
    held = kept(t, n_sink, window) if keep is None else keep  # (n,)
    n = held.shape[0]
    k_pos = held if text_positions else torch.arange(n)  # (n,)
    q_pos = torch.tensor([t] if text_positions else [0 if q_shift is None else n - 1 + q_shift])
    return F.scaled_dot_product_attention(
        rotate(q[:, :, t : t + 1], q_pos),
        rotate(k[:, :, held], k_pos),
        v[:, :, held],
        enable_gqa=True,
    )  # (B, nh, 1, hs)


def _mistake(q, k, v, t, n_sink, window, out) -> str:
    at = f"At token {t} with n_sink={n_sink} and window={window}"
    recent = torch.arange(max(0, t - window), t + 1)
    variants = {
        f"{at}, you rotate at the positions in the text: StreamingLLM numbers positions inside "
        "the cache (kept keys at 0 … n-1, the query at n - 1), so distances stay within what "
        "the model was trained on.": dict(text_positions=True),
        f"{at}, your query is rotated at n, one past the newest key: the new token is the "
        "last one in the cache, at position n - 1.": dict(q_shift=1),
        f"{at}, your cache dropped the sinks: keep the first n_sink tokens for good, besides "
        "the window.": dict(keep=torch.arange(max(0, t - window - n_sink + 1), t + 1)),
        f"{at}, you keep window + 1 recent tokens: the window counts the new token too.": dict(
            keep=torch.cat([torch.arange(n_sink), recent[recent >= n_sink]])
        ),
    }
    if t + 1 > window:  # the window counts the sinks: window - n_sink recent tokens
        inside = torch.arange(max(n_sink, t - window + n_sink + 1), t + 1)
        variants[
            f"{at}, your window counts the sinks: keep n_sink sinks and window recent tokens "
            "besides them, n_sink + window in all once the stream is that long."
        ] = dict(keep=torch.cat([torch.arange(min(n_sink, t + 1)), inside]))
    variants[
        f"{at}, your query is rotated at position 0: it is the newest token in the cache, at "
        "n - 1, after every kept key."
    ] = dict(q_shift=None)
    found = first_match(
        out, {why: oracle(q, k, v, t, n_sink, window, **how) for why, how in variants.items()}
    )
    return found or (
        f"{at}, your output differs from attention over the first n_sink and the last window "
        "tokens, rotated at their places in the cache (0 … n-1, the query at n - 1)."
    )


@one_thread
def check_sink_attention(sink_attention: Callable, *, seed: int = 0, thorough: bool = False):
    """Token by token, the output is attention over the sinks and the window at their cache
    positions, and the cache holds exactly those tokens' raw keys and values, in order."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    configs = [(4, 2, 8, 2, 3), (2, 2, 4, 1, 4), (3, 1, 6, 3, 2)]  # nh, nkv, hs, n_sink, window
    for _ in range(1 if thorough else 0):
        nkv = randint(gen, 1, 2)
        configs.append(
            (
                nkv * randint(gen, 1, 2),
                nkv,
                2 * randint(gen, 1, 4),
                randint(gen, 1, 3),
                randint(gen, 1, 4),
            )
        )
    for nh, nkv, hs, n_sink, window in configs:
        S = n_sink + window + 3
        q = randn(gen, 2, nh, S, hs, dtype=torch.float32)  # (B, nh, S, hs)
        k = randn(gen, 2, nkv, S, hs, dtype=torch.float32)  # (B, nkv, S, hs)
        v = randn(gen, 2, nkv, S, hs, dtype=torch.float32)  # (B, nkv, S, hs)
        past = torch.zeros(2, nkv, 0, hs), torch.zeros(2, nkv, 0, hs)  # an empty cache
        for t in range(S):
            new = (x[:, :, t : t + 1] for x in (q, k, v))
            args = (*new, *past, n_sink, window)
            result = call(sink_attention, SINK, args)
            out, past = _expect_result(result, args)
            if not close(out, oracle(q, k, v, t, n_sink, window)):
                fail(_mistake(q, k, v, t, n_sink, window, out))
            held = kept(t, n_sink, window)
            if not (close(past[0], k[:, :, held]) and close(past[1], v[:, :, held])):
                if past[0].shape == k[:, :, held].shape and close(
                    past[0], rotate(k[:, :, held], torch.arange(held.shape[0]))
                ):
                    fail(
                        f"After token {t}, your cache holds rotated keys: StreamingLLM keeps them "
                        "unrotated, because a kept key's place in the cache moves whenever one is "
                        "evicted, and rotates them at every step."
                    )
                fail(
                    f"After token {t} (n_sink={n_sink}, window={window}), your cache should hold "
                    f"the raw keys and values of text positions {held.tolist()}, in that order."
                )


def _expect_result(result, args):
    __tracebackhide__ = True
    q = args[0]
    if not isinstance(result, tuple | list) or len(result) != 2:
        fail(f"`{SINK}` should return `(out, (past_k, past_v))`, got {type(result).__name__}.")
    out = expect_tensor(result[0], SINK, "a tensor as `out` (first item)")
    expect_shape(out, q.shape, f"The output of `{SINK}`", describe(args), "(B, nh, 1, hs)")
    past = expect_pair(result[1], SINK, "past_k", "past_v")
    return out, past
