"""Learner implementations of notebook 08's ``window_cache_bytes``: correct formulas and the
classic mistakes."""

from __future__ import annotations

import torch

from autograder.checks import nb08_numbers as checks

from . import Mistake, correct, stub


def bytes_min(
    num_layers, num_kv_heads, head_dim, seq_len, window=None, batch_size=1, bytes_per_value=2
):
    held = seq_len if window is None else min(seq_len, window)
    return 2 * num_layers * num_kv_heads * head_dim * held * batch_size * bytes_per_value


def bytes_per_token(
    num_layers, num_kv_heads, head_dim, seq_len, window=None, batch_size=1, bytes_per_value=2
):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_value  # K and V, all layers
    if window is not None and seq_len > window:
        seq_len = window  # the ring is full: older positions were overwritten
    return per_token * seq_len * batch_size


def _ignores_window(
    num_layers, num_kv_heads, head_dim, seq_len, window=None, batch_size=1, bytes_per_value=2
):
    return bytes_min(num_layers, num_kv_heads, head_dim, seq_len, None, batch_size, bytes_per_value)


def _always_window(
    num_layers, num_kv_heads, head_dim, seq_len, window=None, batch_size=1, bytes_per_value=2
):
    held = seq_len if window is None else window
    return bytes_min(num_layers, num_kv_heads, head_dim, held, None, batch_size, bytes_per_value)


def _no_two(
    num_layers, num_kv_heads, head_dim, seq_len, window=None, batch_size=1, bytes_per_value=2
):
    return (
        bytes_min(num_layers, num_kv_heads, head_dim, seq_len, window, batch_size, bytes_per_value)
        // 2
    )


def _measured(
    num_layers, num_kv_heads, head_dim, seq_len, window=None, batch_size=1, bytes_per_value=2
):
    held = seq_len if window is None else min(seq_len, window)
    ring = torch.empty(
        batch_size, num_kv_heads, held, head_dim, dtype=torch.bfloat16, device="meta"
    )
    return 2 * num_layers * ring.numel() * bytes_per_value


CHECK = checks.check_window_cache_bytes
CORRECT = correct([CHECK], {"min": bytes_min, "per_token": bytes_per_token})
MISTAKES = [
    Mistake("window bytes: ignores the window", _ignores_window, CHECK, "ignores the window"),
    Mistake("window bytes: always W", _always_window, CHECK, "before the text is that long"),
    Mistake("window bytes: no factor 2", _no_two, CHECK, "multiply by 2"),
    Mistake("window bytes: measured", _measured, CHECK, "creates tensors"),
]
STUBS = [(CHECK, stub)]
REPLAY = [CHECK]


# ------------------------------------------------ issue 45: one position, one factor


def _window_plus_one(
    num_layers, num_kv_heads, head_dim, seq_len, window=None, batch_size=1, bytes_per_value=2
):
    held = seq_len if window is None else min(seq_len, window + 1)
    return 2 * num_layers * num_kv_heads * head_dim * held * batch_size * bytes_per_value


def _no_bytes(
    num_layers, num_kv_heads, head_dim, seq_len, window=None, batch_size=1, bytes_per_value=2
):
    return bytes_min(num_layers, num_kv_heads, head_dim, seq_len, window, batch_size, 1)


def _no_heads(
    num_layers, num_kv_heads, head_dim, seq_len, window=None, batch_size=1, bytes_per_value=2
):
    return bytes_min(num_layers, 1, head_dim, seq_len, window, batch_size, bytes_per_value)


MISTAKES += [
    Mistake("window bytes: window + 1", _window_plus_one, CHECK, "window + 1 positions"),
    Mistake("window bytes: no bytes_per_value", _no_bytes, CHECK, "leaves out bytes_per_value"),
    Mistake("window bytes: no kv heads", _no_heads, CHECK, "leaves out num_kv_heads"),
]
