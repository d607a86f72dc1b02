"""Pictures for notebook 07: all heads at once, head importance, pruning curves, the nh sweep.

Shape legend: ``nh`` heads, ``T`` tokens, ``n_layers`` blocks.
Every function returns the Figure and never calls ``plt.show()``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from autograder.tools.plots import to_numpy


def draw_all_heads(
    weights: Sequence, tokens: Sequence[str], titles: Mapping[tuple[int, int], str] | None = None
) -> Figure:
    """A grid of heatmaps, one row per layer: ``weights`` holds one ``(nh, T, T)`` per layer."""
    maps = [to_numpy(w) for w in weights]
    n_layers, (nh, T, _) = len(maps), maps[0].shape
    fig, axes = plt.subplots(n_layers, nh, figsize=(2.9 * nh, 3.0 * n_layers), squeeze=False)
    step = max(1, -(-T // 12))
    ticks = list(range(0, T, step))
    for layer, row in enumerate(axes):
        for h, ax in enumerate(row):
            ax.imshow(maps[layer][h], cmap="Blues", vmin=0.0, vmax=1.0)
            ax.set_xticks(ticks, [tokens[i] for i in ticks], fontsize=6, rotation=90)
            ax.set_yticks(ticks, [tokens[i] for i in ticks], fontsize=6)
            title = (titles or {}).get((layer, h), "")
            ax.set_title(f"L{layer}H{h}" + (f"\n{title}" if title else ""), fontsize=8)
    fig.supxlabel("key (attended to)", fontsize=9)
    fig.supylabel("query (attending)", fontsize=9)
    fig.tight_layout()
    return fig


def plot_head_grid(values, title: str, fmt: str = "{:.2f}", cmap: str = "Reds") -> Figure:
    """A ``(n_layers, nh)`` table of numbers as a coloured grid with the values written in."""
    v = to_numpy(values)
    n_layers, nh = v.shape
    fig, ax = plt.subplots(figsize=(1.1 * nh + 1.8, 0.9 * n_layers + 1.2))
    image = ax.imshow(v, cmap=cmap)
    for (layer, h), value in np.ndenumerate(v):
        bright = value > v.min() + 0.6 * (v.max() - v.min())
        ax.text(
            h,
            layer,
            fmt.format(value),
            ha="center",
            va="center",
            fontsize=9,
            color="white" if bright else "black",
        )
    ax.set_xticks(range(nh), [f"head {h}" for h in range(nh)])
    ax.set_yticks(range(n_layers), [f"layer {layer}" for layer in range(n_layers)])
    ax.set_title(title, fontsize=10)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    return fig


def plot_pruning(study: Mapping, metric: str = "accuracy", title: str | None = None) -> Figure:
    """Accuracy (or loss) against the number of heads removed, in three orders.

    ``study`` is what :func:`autograder.tools.nb07_head_stats.pruning_study` returns (or its JSON).
    """
    removed = np.asarray(study["removed"])
    randoms = np.asarray(study[f"random_{metric}"])  # (n_random, n_heads + 1)
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    ax.fill_between(
        removed,
        randoms.min(0),
        randoms.max(0),
        color="grey",
        alpha=0.2,
        label=f"random order (range of {len(randoms)})",
    )
    ax.plot(removed, randoms.mean(0), "o--", color="grey", label="random order (mean)")
    ax.plot(
        removed,
        study["least_important_first"][metric],
        "o-",
        color="tab:green",
        label="least important first",
    )
    ax.plot(
        removed,
        study["most_important_first"][metric],
        "o-",
        color="tab:red",
        label="most important first",
    )
    ax.set(xlabel="heads removed", ylabel=metric, title=title or f"Pruning heads: {metric}")
    ax.set_xticks(removed)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_nh_sweep(sweep: Mapping) -> Figure:
    """Left: accuracy during training, one line per head count; right: final losses against nh."""
    runs = sweep["runs"]
    fig, (ax_curve, ax_loss) = plt.subplots(1, 2, figsize=(12.0, 3.8))
    for nh, run in runs.items():
        steps = [e["step"] for e in run["history"]]
        ax_curve.plot(
            steps, [e["accuracy"] for e in run["history"]], label=f"nh={nh} (hs={run['head_size']})"
        )
    ax_curve.set(
        xlabel="training step",
        ylabel="accuracy (predictable positions)",
        title=f"d_model = {sweep['d_model']}, {sweep['n_layers']} layers",
    )
    ax_curve.legend(fontsize=8)
    nhs = [int(n) for n in runs]
    for key, colour in (("loss", "tab:orange"), ("filler_loss", "tab:green")):
        if key in runs[str(nhs[0])]["final"]:
            ax_loss.plot(
                nhs,
                [runs[str(n)]["final"][key] for n in nhs],
                "o-",
                color=colour,
                label=key.replace("_", " "),
            )
    ax_loss.axhline(np.log(4), color="tab:green", ls=":", lw=1, label="ln 4 (best filler loss)")
    ax_loss.set_xscale("log", base=2)
    ax_loss.set_xticks(nhs, [f"{n}\nhs={runs[str(n)]['head_size']}" for n in nhs])
    ax_loss.set(
        xlabel="heads (nh)",
        ylabel="loss after training (nats)",
        title=f"After {sweep['steps']} steps",
    )
    ax_loss.legend(fontsize=8)
    fig.tight_layout()
    return fig
