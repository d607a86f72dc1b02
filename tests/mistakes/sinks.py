"""Learner implementations of notebook 08's ``sink_attention`` (StreamingLLM): correct ones and
the classic mistakes.

Shape legend: ``B`` batch, ``nh`` query heads, ``nkv`` key/value heads, ``n`` kept positions,
``hs`` head size.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from autograder.checks import nb08_sinks as checks

from . import Mistake, correct, stub
from .long_context import rope


def _sink(*, sinks=True, extra=0, q_shift=0, store_rotated=False, manual=False):
    """A ``sink_attention`` with one knob turned at a time (all off: correct)."""

    def sink_attention(q, k, v, past_k, past_v, n_sink, window):
        if store_rotated:  # rotate the new key once, at its place in the cache, and keep it so
            k = rope(k, torch.tensor([past_k.shape[2]]))
        keys, values = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
        keep = window + extra
        if keys.shape[2] > n_sink + keep:  # evict the oldest token after the sinks
            if sinks:
                keys = torch.cat([keys[:, :, :n_sink], keys[:, :, -keep:]], dim=2)
                values = torch.cat([values[:, :, :n_sink], values[:, :, -keep:]], dim=2)
            else:
                keys, values = keys[:, :, -(n_sink + keep) :], values[:, :, -(n_sink + keep) :]
        n = keys.shape[2]
        positions = torch.arange(n)  # inside the cache, not in the text
        query = rope(q, positions[-1:] + q_shift)
        rotated = keys if store_rotated else rope(keys, positions)
        if manual:
            n_rep = q.shape[1] // keys.shape[1]
            rotated, vals = rotated.repeat_interleave(n_rep, 1), values.repeat_interleave(n_rep, 1)
            weights = (query @ rotated.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(-1)
            out = weights @ vals  # (B, nh, 1, hs)
        else:
            out = F.scaled_dot_product_attention(query, rotated, values, enable_gqa=True)
        return out, (keys, values)

    return sink_attention


def sink_streaming_llm(q, k, v, past_k, past_v, n_sink, window):
    """StreamingLLM's ``StartRecentKVCache``: slice ``[:start_size]`` and ``[-recent_size:]``
    along the sequence dimension, then rotate the kept keys at ``0 … n-1``."""
    k_cat, v_cat = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
    seq_len = k_cat.size(2)
    if seq_len > n_sink + window:
        k_cat = torch.cat([k_cat[:, :, :n_sink], k_cat[:, :, seq_len - window : seq_len]], dim=2)
        v_cat = torch.cat([v_cat[:, :, :n_sink], v_cat[:, :, seq_len - window : seq_len]], dim=2)
    position_ids = torch.arange(k_cat.size(2))
    out = F.scaled_dot_product_attention(
        rope(q, position_ids[-1:]), rope(k_cat, position_ids), v_cat, enable_gqa=True
    )
    return out, (k_cat, v_cat)


def sink_keep_list(q, k, v, past_k, past_v, n_sink, window):
    """The positions kept (the sinks, then the window) as a Python list made a tensor."""
    keys, values = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
    n = keys.shape[2]
    if n > n_sink + window:
        keep = torch.tensor(list(range(n_sink)) + list(range(n - window, n)))  # (n_sink + W,)
        keys, values = keys[:, :, keep], values[:, :, keep]
    positions = torch.arange(keys.shape[2])
    out = F.scaled_dot_product_attention(
        rope(q, positions[-1:]), rope(keys, positions), values, enable_gqa=True
    )
    return out, (keys, values)


SINK = checks.check_sink_attention
CORRECT = correct(
    [SINK],
    {
        "sdpa": _sink(),
        "by_hand": _sink(manual=True),
        "streaming_llm": sink_streaming_llm,
        "keep_list": sink_keep_list,
    },
)
MISTAKES = [
    Mistake("sinks: none kept", _sink(sinks=False), SINK, "dropped the sinks"),
    Mistake("sinks: window + 1", _sink(extra=1), SINK, "window + 1"),
    Mistake("sinks: query at n", _sink(q_shift=1), SINK, "one past the newest key"),
    Mistake("sinks: rotated keys cached", _sink(store_rotated=True), SINK, "holds rotated keys"),
]
STUBS = [(SINK, stub)]
REPLAY = [SINK]


# ------------------------------------------------- issue 45: the window's count, the query


def _sinks_inside_window(q, k, v, past_k, past_v, n_sink, window):
    """Evicts once the cache holds ``window`` tokens, sinks included."""
    keys, values = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
    if keys.shape[2] > window:
        recent = window - n_sink
        keys = torch.cat([keys[:, :, :n_sink], keys[:, :, keys.shape[2] - recent :]], dim=2)
        values = torch.cat([values[:, :, :n_sink], values[:, :, values.shape[2] - recent :]], 2)
    positions = torch.arange(keys.shape[2])
    out = F.scaled_dot_product_attention(
        rope(q, positions[-1:]), rope(keys, positions), values, enable_gqa=True
    )
    return out, (keys, values)


def _sink_query_at_zero(q, k, v, past_k, past_v, n_sink, window):
    """The query rotated at position 0, the keys at their cache positions."""
    keys, values = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
    if keys.shape[2] > n_sink + window:
        keys = torch.cat([keys[:, :, :n_sink], keys[:, :, -window:]], dim=2)
        values = torch.cat([values[:, :, :n_sink], values[:, :, -window:]], dim=2)
    positions = torch.arange(keys.shape[2])
    out = F.scaled_dot_product_attention(
        rope(q, positions[:1]), rope(keys, positions), values, enable_gqa=True
    )
    return out, (keys, values)


MISTAKES += [
    Mistake("sinks: counted inside the window", _sinks_inside_window, SINK, "counts the sinks"),
    Mistake("sinks: query at 0", _sink_query_at_zero, SINK, "rotated at position 0"),
]
