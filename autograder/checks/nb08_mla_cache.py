"""Checks for notebook 08, section 4: ``mla_cache_bytes``, the size of a latent cache.

The oracle is the cache itself: per layer a latent ``(B, S, d_latent)`` and a RoPE key
``(B, S, d_rope)``, made on the meta device (no memory) and measured with ``.nbytes``. The
learner's formula may run no PyTorch (the GUIDE's rule for formula cells) and is also checked on
sizes drawn from a secret during classroom verification.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from autograder.torch_helpers import one_thread, record_torch_calls

from ._core import by_arithmetic, call_integer, fail, make_generator, randint, wide_draws

#: Learner-importable names that would compute these answers: none.
ANSWERS_IN_TOOLS: dict[str, str] = {}

BYTES = "mla_cache_bytes"
_DTYPES = {1: torch.int8, 2: torch.bfloat16, 4: torch.float32, 8: torch.float64}
_NAMES = ("num_layers", "d_latent", "d_rope", "seq_len", "batch_size", "bytes_per_value")


def _meta_bytes(L: int, dc: int, dr: int, S: int, B: int, width: int) -> int:
    """Bytes of ``L`` layers' latent and RoPE-key caches, built on the meta device."""
    dtype = _DTYPES[width]
    per_layer = [torch.empty(B, S, d, dtype=dtype, device="meta") for d in (dc, dr)]
    return L * sum(t.nbytes for t in per_layer)


# What a known-wrong formula returns, from (L, dc, dr, S, B, width).
_GUESSES = {
    "the latent is one tensor shared by keys and values, so there is no factor 2 (that factor "
    "is for caches of separate K and V)": lambda L, dc, dr, S, B, w: 2 * L * (dc + dr) * S * B * w,
    "the decoupled RoPE key is cached too: add d_rope to d_latent": lambda L, dc, dr, S, B, w: (
        L * dc * S * B * w
    ),
    "multiply by batch_size: every sequence in the batch has its own cache": (
        lambda L, dc, dr, S, B, w: L * (dc + dr) * S * w
    ),
    "multiply by num_layers: every layer caches its own latent": lambda L, dc, dr, S, B, w: (
        (dc + dr) * S * B * w
    ),
    "multiply by seq_len: every position caches its own latent and RoPE key": (
        lambda L, dc, dr, S, B, w: L * (dc + dr) * B * w
    ),
    "that counts values, not bytes: multiply by bytes_per_value": lambda L, dc, dr, S, B, w: (
        L * (dc + dr) * S * B
    ),
}


def _mistake(results: dict[tuple[int, ...], tuple[int, int]], defaulted: set) -> str:
    """Name the known-wrong formula that explains every answer; describe the first wrong one.
    ``defaulted``: the arguments called with batch_size and bytes_per_value left out."""
    args, (got, expected) = next((a, r) for a, r in results.items() if r[0] != r[1])
    call_text = ", ".join(f"{n}={a}" for n, a in zip(_NAMES, args, strict=True))
    if args in defaulted and all(
        g == (2 * e if a in defaulted else e) for a, (g, e) in results.items()
    ):
        call_text = ", ".join(f"{n}={a}" for n, a in zip(_NAMES[:4], args[:4], strict=True))
        return (
            f"`{BYTES}({call_text})` returned {got:,} instead of {expected:,}: bytes_per_value "
            "defaults to 2 (a bfloat16 cache, as DeepSeek serves it), not 4."
        )
    why = next(
        (w for w, f in _GUESSES.items() if all(g == f(*a) for a, (g, _) in results.items())),
        "add d_latent and d_rope, then multiply by every other argument",
    )
    return f"`{BYTES}({call_text})` returned {got:,} instead of {expected:,}: {why}."


@one_thread
def check_mla_cache_bytes(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Equals the bytes of the per-layer latent and RoPE-key tensors; DeepSeek-V3 caches
    70,272 B per token in bfloat16."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    cases = [
        (61, 512, 64, 1, 1, 2),  # DeepSeek-V3, one token of bfloat16 cache
        (60, 512, 64, 131072, 1, 2),  # DeepSeek-V2 at 128k tokens
        (27, 512, 64, 4096, 1, 2),  # DeepSeek-V2-Lite
        (2, 12, 4, 10, 3, 4),
        (4, 6, 2, 7, 2, 8),
        (3, 16, 8, 5, 4, 1),
    ]
    for _ in range(4 if thorough else 0):
        sizes = [randint(gen, 1, n) for n in (64, 1024, 128, 8192, 16)]
        cases.append((*sizes, [1, 2, 4, 8][randint(gen, 0, 3)]))
    ranges = ((1, 128), (1, 2048), (1, 256), (1, 1 << 20), (1, 64), (0, 3))
    drawn = wide_draws(seed, thorough, 3, *ranges)
    wide = [(*sizes, [1, 2, 4, 8][width]) for *sizes, width in drawn]
    for group, defaults in ((cases, 3), (wide, 0)):  # the first 3 public cases use defaults
        results, defaulted = {}, set()
        for i, args in enumerate(group):
            kwargs = dict(zip(_NAMES[4:], args[4:], strict=True)) if i >= defaults else {}
            with record_torch_calls() as seen:
                got = call_integer(fn, BYTES, args[:4], kwargs)
            by_arithmetic(seen, BYTES)
            results[args] = (got, _meta_bytes(*args))
            if i < defaults:
                defaulted.add(args)
        if any(got != expected for got, expected in results.values()):
            fail(_mistake(results, defaulted))
