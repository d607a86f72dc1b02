"""Interactive pictures (plain ipywidgets, no JavaScript of our own, no CDN): they work offline.

Shape legend: ``nh`` heads, ``T`` query length, ``S`` key length, ``d_k`` query/key size.

Each widget is a ``VBox`` of controls above an ``Output`` that redraws a matplotlib figure
whenever a control changes. The drawing functions (``draw_*``) are public and return the Figure,
so a notebook can also call them directly (e.g. to save a PNG with ``fig.savefig``).
"""

import math
from collections.abc import Callable, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from IPython.display import display
from matplotlib.figure import Figure

from autograder.tools import plots, unfinished


def live_figure(
    draw: Callable[..., Figure], controls: dict[str, widgets.ValueWidget]
) -> widgets.VBox:
    """Controls above an output showing ``draw(**{name: control.value})``, redrawn on change."""
    out = widgets.Output()

    def redraw(_change=None) -> None:
        with out:
            out.clear_output(wait=True)
            try:
                fig = draw(**{name: control.value for name, control in controls.items()})
            except Exception as exc:  # noqa: BLE001 - the learner's function, unfinished or wrong
                print(unfinished.describe(exc))
                return
            display(fig)
            plt.close(fig)

    for control in controls.values():
        control.observe(redraw, names="value")
    redraw()
    return widgets.VBox([*controls.values(), out])


def _entropy(p: torch.Tensor) -> float:
    """Entropy in nats of a probability vector, 0·log 0 counted as 0."""
    return float(-(p * p.clamp_min(1e-30).log()).sum())


def draw_dk_softmax(d_k: int, scaled: bool, n_keys: int = 8, seed: int = 0) -> Figure:
    """Softmax of one query against ``n_keys`` keys, components drawn i.i.d. from N(0, 1).

    The same seed gives the same vectors for a given ``d_k``, so toggling ``scaled`` compares the
    very same scores with and without the division by √d_k.
    """
    g = torch.Generator().manual_seed(seed * 10_007 + d_k)
    q = torch.randn(d_k, generator=g, dtype=torch.float64)  # (d_k,)
    k = torch.randn(n_keys, d_k, generator=g, dtype=torch.float64)  # (S, d_k)
    scores = k @ q  # (S, d_k) @ (d_k,) -> (S,)
    if scaled:
        scores = scores / math.sqrt(d_k)
    p = torch.softmax(scores, dim=-1)
    fig, ax = plt.subplots(figsize=(6.0, 3.0))
    label = "q·k / √d_k" if scaled else "q·k"
    plots.softmax_bars(
        p,
        labels=[f"k{s}" for s in range(n_keys)],
        ax=ax,
        title=f"d_k = {d_k}, scores = {label}: spread (std) {scores.std():.1f}, "
        f"max weight {p.max():.2f}, entropy {_entropy(p):.2f} of {math.log(n_keys):.2f}",
    )
    ax.title.set_fontsize(9)
    fig.tight_layout()
    return fig


def dk_softmax_widget(
    n_keys: int = 8,
    d_ks: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
    seed: int = 0,
) -> widgets.VBox:
    """A d_k slider and a "divide by √d_k" switch over the softmax bars of random q, k."""
    controls = {
        "d_k": widgets.SelectionSlider(
            options=list(d_ks),
            value=d_ks[len(d_ks) // 2],
            description="d_k",
            continuous_update=False,
        ),
        "scaled": widgets.Checkbox(value=False, description="divide scores by √d_k"),
    }
    return live_figure(lambda d_k, scaled: draw_dk_softmax(d_k, scaled, n_keys, seed), controls)


def draw_temperature_softmax(
    scores, temperature: float, labels: Sequence[str] | None = None
) -> Figure:
    """Bars of ``softmax(scores / temperature)`` for a score vector ``(S,)``."""
    s = torch.as_tensor(plots.to_numpy(scores)).reshape(-1)
    p = torch.softmax(s / temperature, dim=-1)
    fig, ax = plt.subplots(figsize=(6.0, 3.0))
    plots.softmax_bars(
        p,
        labels=labels,
        ax=ax,
        title=f"temperature {temperature:.2f}: max weight {p.max():.2f}, "
        f"entropy {_entropy(p):.2f} nats",
    )
    fig.tight_layout()
    return fig


def temperature_widget(scores, labels: Sequence[str] | None = None) -> widgets.VBox:
    """A log-scale temperature slider over the softmax bars of fixed ``scores`` ``(S,)``.

    Dividing scores by √d_k is the same as a temperature of √d_k: low temperature sharpens the
    weights towards one-hot, high temperature flattens them towards uniform.
    """
    controls = {
        "temperature": widgets.FloatLogSlider(
            value=1.0,
            base=10,
            min=-1.5,
            max=1.5,
            step=0.05,
            description="temperature",
            continuous_update=False,
            style={"description_width": "initial"},
        ),
    }
    return live_figure(
        lambda temperature: draw_temperature_softmax(scores, temperature, labels), controls
    )


def attention_heads_widget(
    weights,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
) -> widgets.VBox:
    """Pick a head with a slider and see its attention map; ``weights`` is ``(nh, T, S)``."""
    w = plots.to_numpy(weights)
    if w.ndim != 3:
        raise ValueError(f"attention_heads_widget expects (nh, T, S), got shape {w.shape}")

    def draw(head: int) -> Figure:
        fig, ax = plt.subplots(figsize=(0.5 * w.shape[2] + 2.5, 0.45 * w.shape[1] + 1.5))
        plots.attention_heatmap(w[head], query_labels, key_labels, ax=ax, title=f"head {head}")
        fig.tight_layout()
        return fig

    controls = {
        "head": widgets.IntSlider(
            value=0, min=0, max=w.shape[0] - 1, description="head", continuous_update=False
        ),
    }
    return live_figure(draw, controls)
