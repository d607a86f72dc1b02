"""Pictures for notebook 04: which kv head each query head reads, cache memory, decoding speed.

Shape legend: ``B`` batch, ``nh`` query heads, ``nkv`` key/value heads, ``S`` positions,
``hs`` head size, ``n_rep`` = nh // nkv.

Functions that draw on one Axes take ``ax=None`` and return that Axes; multi-panel pictures return
the Figure. Nothing here calls ``plt.show()``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from autograder.tools.nb04_gqa import DecodeBenchmark
from autograder.tools.plots import to_numpy

_COLOURS = plt.get_cmap("tab10").colors


def _box(ax: Axes, x: float, y: float, text: str, colour, edge: str = "black") -> None:
    ax.add_patch(
        plt.Rectangle((x - 0.4, y - 0.3), 0.8, 0.6, facecolor=colour, edgecolor=edge, alpha=0.75)
    )
    ax.text(x, y, text, ha="center", va="center", fontsize=10)


def plot_head_sharing(num_heads: int = 8, kv_heads: Sequence[int] = (8, 2, 1)) -> Figure:
    """One panel per ``nkv``: query heads (top) joined to the key/value head each one reads.

    Query head ``h`` reads kv head ``h // n_rep``; colour = kv head. ``nkv = nh`` is multi-head
    attention, ``nkv = 1`` multi-query attention, anything between grouped-query attention.
    """
    # about 9.6 in wide: drawn at its own size in a 1400 px window, so the labels stay legible
    fig, axes = plt.subplots(1, len(kv_heads), figsize=(3.2 * len(kv_heads), 2.6), squeeze=False)
    for ax, nkv in zip(axes[0], kv_heads, strict=True):
        if num_heads % nkv:
            raise ValueError(f"num_heads={num_heads} is not divisible by nkv={nkv}")
        n_rep = num_heads // nkv
        kv_x = [(g + 0.5) * n_rep - 0.5 for g in range(nkv)]  # centre each kv head under its group
        for h in range(num_heads):
            g = h // n_rep
            ax.plot([h, kv_x[g]], [1.7, 0.3], color=_COLOURS[g % 10], lw=1)
            _box(ax, h, 2.0, f"Q{h}", _COLOURS[g % 10])
        for g, x in enumerate(kv_x):
            _box(ax, x, 0.0, f"KV{g}", _COLOURS[g % 10])
        kind = "MHA" if nkv == num_heads else "MQA" if nkv == 1 else "GQA"
        ax.set_title(
            f"{kind}: {num_heads} query heads, {nkv} kv head{'s' * (nkv > 1)}\n"
            f"KV cache = {nkv}/{num_heads} of MHA's",
            fontsize=10,
        )
        ax.set_xlim(-0.7, num_heads - 0.3)
        ax.set_ylim(-0.5, 2.5)
        ax.axis("off")
    fig.tight_layout()
    return fig


def plot_kv_grouping(
    num_heads: int = 8, num_kv_heads: int = 2, repeat_fn: Callable | None = None
) -> Figure:
    """Which kv head lands in each query head's slot after repeating, and whether it should.

    Top row: query heads coloured by their group ``h // n_rep``. Then one row per way of
    repeating a ``(1, nkv, 1, 1)`` tensor that holds each kv head's index: ``repeat_interleave``
    gives ``[K0, K0, K1, K1]`` (each query head meets its own group's kv head), ``repeat`` gives
    ``[K0, K1, K0, K1]`` (most meet a stranger's). ``repeat_fn(x, n_rep)`` adds a row.
    """
    n_rep = num_heads // num_kv_heads
    labels = torch.arange(num_kv_heads, dtype=torch.float64).view(1, num_kv_heads, 1, 1)
    rows = {
        "repeat_interleave(x, n_rep, dim=1)": labels.repeat_interleave(n_rep, dim=1),
        "x.repeat(1, n_rep, 1, 1)  (wrong)": labels.repeat(1, n_rep, 1, 1),
    }
    if repeat_fn is not None:
        rows["your repeat_kv"] = repeat_fn(labels, n_rep)
    fig, ax = plt.subplots(figsize=(0.9 * num_heads + 3.5, 0.9 * (len(rows) + 1) + 0.4))
    for h in range(num_heads):
        _box(ax, h, 0, f"Q{h}", _COLOURS[(h // n_rep) % 10])
    ax.text(-0.7, 0, f"query heads (group = h // {n_rep})", ha="right", va="center", fontsize=9)
    for r, (name, out) in enumerate(rows.items(), start=1):
        got = to_numpy(out).reshape(-1).astype(int)
        if got.shape != (num_heads,):
            raise ValueError(f"{name} gave {got.shape[0]} heads, expected {num_heads}")
        for h, g in enumerate(got):
            ok = g == h // n_rep
            _box(ax, h, -r, f"K{g}", _COLOURS[g % 10], edge="black" if ok else "red")
            ax.text(
                h + 0.32, -r + 0.22, "✓" if ok else "✗", fontsize=8, color="green" if ok else "red"
            )
        ax.text(-0.7, -r, name, ha="right", va="center", fontsize=9)
    ax.set_xlim(-0.6, num_heads - 0.4)
    ax.set_ylim(-len(rows) - 0.5, 0.5)
    ax.axis("off")
    ax.set_title(
        f"{num_heads} query heads share {num_kv_heads} kv heads: which kv head does "
        "each query head read?",
        fontsize=10,
    )
    fig.tight_layout()
    return fig


def plot_kv_cache_memory(
    seq_lens: Sequence[int],
    series: Mapping[str, Sequence[float]],
    limit_bytes: float | None = None,
    limit_label: str = "",
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """KV-cache size (GB = 1e9 bytes) against sequence length, one line per configuration."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 3.8))
    lens = np.asarray(seq_lens, dtype=np.float64)
    for i, (name, values) in enumerate(series.items()):
        gb = to_numpy(values) / 1e9
        ax.plot(lens, gb, "o-", color=_COLOURS[i % 10], label=name)
        ax.annotate(
            f"{gb[-1]:,.1f} GB",
            (lens[-1], gb[-1]),
            textcoords="offset points",
            xytext=(4, 0),
            va="center",
            fontsize=8,
        )
    if limit_bytes is not None:
        ax.axhline(limit_bytes / 1e9, color="grey", ls="--", lw=1, label=limit_label or None)
    ax.set(xscale="log", yscale="log", xlabel="sequence length (tokens)", ylabel="KV cache (GB)")
    ax.minorticks_off()
    ax.set_xlim(lens[0] / 1.3, lens[-1] * 2.2)  # room for the labels at the right
    ax.set_xticks(lens, [f"{int(n) // 1024}k" if n >= 1024 else str(int(n)) for n in lens])
    ax.legend(fontsize=8, loc="lower right")
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def plot_decode_benchmark(bench: DecodeBenchmark) -> Figure:
    """Left: median time of each decoding step; right: tokens per second, with the speed-up."""
    fig, (ax_step, ax_rate) = plt.subplots(
        1, 2, figsize=(11.0, 3.6), gridspec_kw={"width_ratios": [2, 1]}
    )
    names = list(bench.runs)
    for i, name in enumerate(names):
        ms = bench.step_ms(name)
        ax_step.plot(range(1, len(ms)), ms[1:], color=_COLOURS[i], lw=1, label=name)
    ax_step.set(
        xlabel="generated token",
        ylabel="time per step (ms, median)",
        yscale="log",
        title="Each new token: recompute everything vs read the cache",
    )
    ax_step.legend(fontsize=8)
    rates = [bench.tokens_per_s(name) for name in names]
    bars = ax_rate.bar(names, rates, color=_COLOURS[: len(names)])
    ax_rate.bar_label(bars, labels=[f"{r:,.0f} tok/s" for r in rates], padding=2, fontsize=8)
    ax_rate.set_ylim(0, max(rates) * 1.2)
    ax_rate.set(
        ylabel="tokens per second (median)",
        title=f"{bench.new_tokens} tokens: {bench.speedup:.1f}× faster with the cache",
    )
    fig.tight_layout()
    return fig


def plot_conversion_error(
    kv_heads: Sequence[int],
    errors: Mapping[str, Sequence[float]],
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Relative error of converted models against ``nkv``: one line per way of building k/v."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6.0, 3.6))
    x = np.asarray(kv_heads, dtype=np.float64)
    for i, (name, values) in enumerate(errors.items()):
        ax.plot(x, to_numpy(values), "o-", color=_COLOURS[i % 10], label=name)
    ax.set(xscale="log", xlabel="kv heads (nkv)", ylabel="relative error of the output")
    ax.minorticks_off()
    ax.set_xticks(x, [str(int(n)) for n in x])
    ax.text(x.min(), ax.get_ylim()[0], "  MQA", va="bottom", fontsize=8)
    ax.text(x.max(), ax.get_ylim()[0], "MHA  ", va="bottom", ha="right", fontsize=8)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title, fontsize=10)
    return ax
