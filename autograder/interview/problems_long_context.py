"""Problems from notebook 08: the sliding-window mask, then a rolling cache.

Shape legend: ``T`` new positions (queries), ``S`` keys, ``W`` the window, ``B`` batch, ``nkv``
key/value heads, ``hs`` head size.
"""

from __future__ import annotations

import torch

from autograder.checks import nb08_window as window

from .problems_attention import mask_additive, mask_blocked
from .task import Problem, Task, Variant, course_check


def _past_len(fn):
    def sliding_window_mask(T, W, S=None):
        return fn(T, W) if S is None else fn(T, W, past_len=S - T)

    return sliding_window_mask


def _placed(mask):
    """The variants' contracts name no device, the course's check asks for one: the grader
    places the candidate's mask there."""

    def sliding_window_mask(*args, device=None, **kwargs):
        out = mask(*args, **kwargs)
        return out.to(device) if device is not None and isinstance(out, torch.Tensor) else out

    return sliding_window_mask


def _window_task(name: str, signature: str, contract: str, adapt, inverted: str = "") -> Task:
    grader = course_check(window.check_sliding_window_mask_values, lambda fn: _placed(adapt(fn)))
    rewrites = (("is inverted: True must mean", inverted),) if inverted else ()
    return Task(name, signature, contract, (grader,), (window.MASK,), rewrites)


_WINDOW = (
    "A window of `window` = W keys: the query at position p sees the keys at p − W + 1 … p, "
    "itself included, as Hugging Face and vLLM count it (Mistral's paper writes p − W … p, one "
    "key more: conventions differ by one, so say which you use). The `T` queries are the "
    "**last** T of the `S` positions (a cache holds the first S − T)."
)

SLIDING_WINDOW = Problem(
    "sliding_window",
    "A sliding-window attention mask",
    "notebook 08 §1",
    "Build the mask of sliding-window attention, which caps what each query reads at the W most "
    "recent keys.",
    (
        Variant(
            "blocked",
            _window_task(
                "sliding_window_mask",
                "def sliding_window_mask(T, window, S=None):",
                f"{_WINDOW} `S` defaults to `T`. Return a (T, S) bool tensor in which **True "
                "means blocked** (`nn.MultiheadAttention`'s `attn_mask`).",
                lambda fn: mask_blocked(fn, window.MASK),
                "is inverted: in this variant True means blocked, so mark the keys outside each "
                "query's window.",
            ),
        ),
        Variant(
            "past_len",
            _window_task(
                "sliding_window_mask",
                "def sliding_window_mask(T, window, past_len=0):",
                f"{_WINDOW} Here you are given `past_len` = S − T, the number of cached "
                "positions. Return a (T, past_len + T) bool tensor, True = may attend.",
                _past_len,
            ),
        ),
        Variant(
            "additive",
            _window_task(
                "sliding_window_bias",
                "def sliding_window_bias(T, window, S=None):",
                f"{_WINDOW} `S` defaults to `T`. Return an **additive** float32 mask (T, S): 0.0 "
                "inside the window, `-inf` outside.",
                lambda fn: mask_additive(fn, "sliding_window_bias"),
                "is inverted: 0 goes inside each query's window, -inf outside it.",
            ),
        ),
    ),
    Task(
        window.UPDATE,
        "def rolling_cache_update(buffer, new, start):",
        "Now keep only W positions in memory, Mistral's rotating cache: `buffer` (B, nkv, W, hs) "
        "holds position p < start in slot p % W; `new` (B, nkv, T, hs), 1 ≤ T ≤ W, holds "
        "positions start … start + T − 1. Return `(buffer, recent)`: a new buffer with the new "
        "positions written in their slots (the input left unchanged), and the positions the new "
        "queries can see, max(0, start − W + 1) … start + T − 1, oldest first.",
        (course_check(window.check_rolling_cache_update, lambda fn: fn),),
        (window.UPDATE,),
    ),
    ("sliding_window", "ring_buffer", "attention_sinks"),
    written=("window_reach", "sinks_why"),
    numeric=("mistral_window",),
    box_minutes=15,
)
