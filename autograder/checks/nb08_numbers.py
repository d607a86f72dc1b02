"""Checks for notebook 08, section 7: ``window_cache_bytes``, the KV cache of a sliding window.

The oracle is the cache itself: per layer, K and V of shape ``(B, nkv, min(S, W), hs)`` (a
window keeps at most ``W`` positions; without a window, all ``S``), made on the meta device by
notebook 04's ``meta_cache`` and measured with ``.nbytes``. The learner's formula may run no
PyTorch (the GUIDE's rule for formula cells) and is also checked on sizes drawn from a secret
during classroom verification.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from autograder.tools.nb04_gqa import cache_nbytes, meta_cache
from autograder.torch_helpers import one_thread, record_torch_calls

from ._core import by_arithmetic, call_integer, fail, make_generator, randint, wide_draws

#: Learner-importable names that would compute these answers: notebook 04's tools measure a
#: cache, they do not hand out this formula.
ANSWERS_IN_TOOLS: dict[str, str] = {}

BYTES = "window_cache_bytes"
_DTYPES = {1: torch.int8, 2: torch.bfloat16, 4: torch.float32}


def expected(L: int, nkv: int, hd: int, S: int, W: int | None, B: int, width: int) -> int:
    held = S if W is None else min(S, W)  # positions the cache holds
    return cache_nbytes(meta_cache(L, nkv, hd, held, B, dtype=_DTYPES[width]))


_GUESSES = {
    "it ignores the window: a sliding-window cache keeps at most `window` positions, so use "
    "min(seq_len, window)": lambda L, nkv, hd, S, W, B, w: expected(L, nkv, hd, S, None, B, w),
    "it counts `window` positions before the text is that long: the cache holds only the "
    "min(seq_len, window) positions seen so far": lambda L, nkv, hd, S, W, B, w: expected(
        L, nkv, hd, W or S, None, B, w
    ),
    "the cache holds two tensors per layer, K and V: multiply by 2": (
        lambda L, nkv, hd, S, W, B, w: expected(L, nkv, hd, S, W, B, w) // 2
    ),
    "it holds window + 1 positions: a window of W keeps the W most recent, min(seq_len, "
    "window), the new token included": lambda L, nkv, hd, S, W, B, w: expected(
        L, nkv, hd, S, None if W is None else W + 1, B, w
    ),
    **{
        f"it leaves out {name}: multiply by it too": (
            lambda *a, i=i: expected(*a) // a[i] if expected(*a) % a[i] == 0 else -1
        )
        for i, name in (
            (0, "num_layers"),
            (1, "num_kv_heads"),
            (2, "head_dim"),
            (5, "batch_size"),
            (6, "bytes_per_value"),
        )
    },
}


@one_thread
def check_window_cache_bytes(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Equals the bytes of the per-layer K and V rings: Mistral 7B holds 0.5 GiB at any length
    from 4096 tokens on, and a cache without a window (``window=None``) grows with the text."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    cases = [  # (L, nkv, hd, S, W, B, bytes per value)
        (32, 8, 128, 32768, 4096, 1, 2),  # Mistral 7B v0.1 at 32k tokens: capped at 4096
        (32, 8, 128, 1000, 4096, 1, 2),  # ... before the window fills
        (32, 8, 128, 32768, None, 1, 2),  # Llama 3 8B: no window
        (2, 4, 16, 10, 3, 3, 4),
        (26, 4, 256, 8192, 512, 2, 2),  # Gemma-2-2B-like local layers
    ]
    for _ in range(4 if thorough else 0):
        S = randint(gen, 1, 1 << 16)
        W = (None, randint(gen, 1, 8192))[randint(gen, 0, 1)]
        sizes = (randint(gen, 1, 64), randint(gen, 1, 16), 2 * randint(gen, 1, 128))
        cases.append((*sizes, S, W, randint(gen, 1, 8), (1, 2, 4)[randint(gen, 0, 2)]))
    ranges = ((1, 128), (1, 64), (1, 256), (1, 1 << 20), (1, 1 << 16), (1, 16), (0, 2))
    cases += [(*c[:6], (1, 2, 4)[c[6]]) for c in wide_draws(seed, thorough, 3, *ranges)]
    results = []
    for L, nkv, hd, S, W, B, width in cases:
        kwargs = {"window": W, "batch_size": B, "bytes_per_value": width}
        with record_torch_calls() as seen:
            got = call_integer(fn, BYTES, (L, nkv, hd, S), kwargs)
        by_arithmetic(seen, BYTES)
        results.append(((L, nkv, hd, S, W, B, width), got))
    wrong = [(args, got) for args, got in results if got != expected(*args)]
    if wrong:
        fail(_mistake(results, *wrong[0]))


def _mistake(results, args, got) -> str:
    """The slip that explains every answer (else the first wrong one), for the first wrong one."""
    L, nkv, hd, S, W, B, width = args
    where = (
        f"`{BYTES}({L}, {nkv}, {hd}, seq_len={S}, window={W}, batch_size={B}, "
        f"bytes_per_value={width})` returned {got:,} instead of {expected(*args):,}"
    )
    everywhere = (w for w, f in _GUESSES.items() if all(f(*a) == g for a, g in results))
    here = (w for w, f in _GUESSES.items() if f(*args) == got)
    why = next(everywhere, None) or next(
        here,
        "multiply 2 (K and V) by layers, kv heads, head size, batch, bytes per value and the "
        "positions held, min(seq_len, window)",
    )
    return f"{where}: {why}."
