"""Small matplotlib pictures used by the notebooks.

Shape legend: ``B`` batch, ``T`` query length, ``S`` key/value length, ``C`` = d_model,
``nh`` heads, ``hs`` = C // nh (head size).

Every function accepts torch tensors or NumPy arrays. Functions that draw on one Axes take
``ax=None`` (a new figure is made when it is None) and return that Axes; multi-panel pictures
return the Figure.
Nothing here calls ``plt.show()``: the notebook decides when to show.
"""

from collections.abc import Callable, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure


def to_numpy(x) -> np.ndarray:
    """A float64 NumPy copy of a tensor, array or sequence (detached, on the CPU)."""
    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu", torch.float64).numpy()
    return np.asarray(x, dtype=np.float64)


def _new_ax(ax: Axes | None, figsize: tuple[float, float]) -> Axes:
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def label_grid(ax: Axes, T: int, S: int, query_labels, key_labels, ylabel: str, xlabel: str):
    """Tick labels (positions by default) and axis names of a ``(T, S)`` query-by-key grid."""
    ax.set_xticks(range(S), key_labels if key_labels is not None else range(S), rotation=45)
    ax.set_yticks(range(T), query_labels if query_labels is not None else range(T))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)


def write_cells(ax: Axes, values, text: Callable, colour: Callable, fontsize: float = 7) -> None:
    """Write ``text(v)`` in ``colour(v)`` at the centre of each cell of a 2-D array."""
    for t, row in enumerate(values):
        for s, v in enumerate(row):
            ax.text(s, t, text(v), ha="center", va="center", fontsize=fontsize, color=colour(v))


def attention_heatmap(
    weights,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    annotate: bool | None = None,
) -> Axes:
    """Draw one attention matrix: row ``t`` is how query ``t`` spreads its weight over the keys.

    ``weights`` is ``(T, S)``. Labels default to positions. ``annotate`` writes each weight in its
    cell; by default only when the matrix has at most 100 cells. The colour scale is fixed to [0, 1]
    so that maps drawn side by side can be compared.
    """
    w = to_numpy(weights)
    if w.ndim != 2:
        raise ValueError(f"attention_heatmap expects a (T, S) matrix, got shape {w.shape}")
    T, S = w.shape
    ax = _new_ax(ax, (0.5 * S + 2.0, 0.45 * T + 1.5))
    image = ax.imshow(w, cmap="Blues", vmin=0.0, vmax=1.0)
    label_grid(ax, T, S, query_labels, key_labels, "query (attending)", "key (attended to)")
    if annotate if annotate is not None else T * S <= 100:
        write_cells(ax, w, lambda v: f"{v:.2f}", lambda v: "white" if v > 0.6 else "black")
    if title:
        ax.set_title(title)
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax


def attention_heatmaps(
    weights,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    titles: Sequence[str] | None = None,
    ncols: int = 4,
    suptitle: str | None = None,
) -> Figure:
    """One heatmap per head, in a grid: ``weights`` is ``(nh, T, S)`` (one batch element)."""
    w = to_numpy(weights)
    if w.ndim != 3:
        raise ValueError(f"attention_heatmaps expects (nh, T, S), got shape {w.shape}")
    nh, T, S = w.shape
    ncols = min(ncols, nh)
    nrows = -(-nh // ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(ncols * (0.45 * S + 2.2), nrows * (0.45 * T + 1.6)), squeeze=False
    )
    for h, ax in enumerate(axes.flat):
        if h >= nh:
            ax.axis("off")
            continue
        title = titles[h] if titles is not None else f"head {h}"
        attention_heatmap(w[h], query_labels, key_labels, ax=ax, title=title)
    if suptitle:
        fig.suptitle(suptitle)
    fig.tight_layout()
    return fig


def softmax_bars(
    probs,
    labels: Sequence[str] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """A bar chart of one probability vector ``(S,)`` on a fixed [0, 1] axis."""
    p = to_numpy(probs).reshape(-1)
    ax = _new_ax(ax, (6.0, 3.0))
    ax.bar(range(len(p)), p, color="tab:blue")
    ax.set_xticks(range(len(p)), labels if labels is not None else range(len(p)))
    ax.set_ylim(0.0, 1.0)
    ax.set_ylabel("weight")
    if title:
        ax.set_title(title)
    return ax


def plot_scaling_study(
    d_ks: Sequence[int],
    variance: Mapping[str, Sequence[float]],
    max_weight: Mapping[str, Sequence[float]],
    entropy: Mapping[str, Sequence[float]],
    n_keys: int,
) -> Figure:
    """Three panels against ``d_k``: variance of the scores, mean largest weight, mean entropy.

    Each mapping goes from a series name (e.g. ``"q·k"`` and ``"q·k / √d_k"``) to one value per
    ``d_k``. Reference lines: ``variance = d_k``; uniform attention (weight ``1/n_keys``, entropy
    ``log n_keys``) and one-hot attention (weight 1, entropy 0).
    """
    d = np.asarray(d_ks, dtype=np.float64)
    fig, (ax_var, ax_max, ax_ent) = plt.subplots(1, 3, figsize=(14.0, 3.8))
    for name, values in variance.items():
        ax_var.plot(d, to_numpy(values), "o-", label=name)
    ax_var.plot(d, d, "k:", label="d_k (theory)")
    ax_var.set(
        xscale="log",
        yscale="log",
        xlabel="d_k",
        ylabel="variance of the score",
        title="Score variance grows like d_k",
    )
    for ax, series, ylabel, uniform, one_hot in (
        (ax_max, max_weight, "mean largest weight", 1.0 / n_keys, 1.0),
        (ax_ent, entropy, "mean entropy (nats)", float(np.log(n_keys)), 0.0),
    ):
        for name, values in series.items():
            ax.plot(d, to_numpy(values), "o-", label=name)
        ax.axhline(uniform, color="grey", ls="--", lw=1, label="uniform")
        ax.axhline(one_hot, color="grey", ls=":", lw=1, label="one-hot")
        ax.set(xscale="log", xlabel="d_k", ylabel=ylabel)
    ax_max.set_title(f"Softmax over {n_keys} keys: sharpness")
    ax_ent.set_title(f"Softmax over {n_keys} keys: spread")
    for ax in (ax_var, ax_max, ax_ent):
        ax.set_xticks(d, [str(int(v)) for v in d], minor=False)
        ax.tick_params(axis="x", labelrotation=45)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _head_colours(num_heads: int) -> ListedColormap:
    return ListedColormap(plt.get_cmap("tab10").colors[: max(num_heads, 1)])


def _draw_grid(ax: Axes, codes: np.ndarray, C: int, hs: int, num_heads: int, title: str) -> None:
    """Draw encoded cells: colour = the head that owns the feature, text = token + feature."""
    tokens, features = np.divmod(codes.astype(int), C)
    ax.imshow(
        features // hs, cmap=_head_colours(num_heads), vmin=-0.5, vmax=num_heads - 0.5, alpha=0.55
    )
    for (r, c), t in np.ndenumerate(tokens):
        ax.text(c, r, f"{chr(65 + t)}{features[r, c]}", ha="center", va="center", fontsize=8)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title, fontsize=9)


def plot_head_layout(
    T: int = 4,
    C: int = 8,
    num_heads: int = 2,
    split_fn: Callable | None = None,
) -> Figure:
    """Where each number of a ``(1, T, C)`` input lands after splitting it into heads.

    Cell ``A5`` holds feature 5 of token A; its colour is the head that owns feature 5 (head ``h``
    owns features ``h*hs:(h+1)*hs``). Rows show: the input; ``view`` + ``transpose`` (correct:
    every head sees every token, and only its own features); ``view`` alone (wrong: a "head" gets
    a few tokens and features of several heads). With ``split_fn(x, num_heads)`` a last row shows
    what that function does.
    """
    if C % num_heads:
        raise ValueError(f"C={C} is not divisible by num_heads={num_heads}")
    if T > 26:
        raise ValueError("plot_head_layout labels tokens A-Z: use T <= 26")
    hs = C // num_heads
    x = torch.arange(T * C, dtype=torch.float64).view(1, T, C)  # cell value = t * C + c
    variants = {
        "view(B, T, nh, hs).transpose(1, 2)": x.view(1, T, num_heads, hs).transpose(1, 2),
        "view(B, nh, T, hs) alone  (wrong)": x.view(1, num_heads, T, hs),
    }
    if split_fn is not None:
        variants["your split_heads"] = split_fn(x, num_heads)
    fig = plt.figure(
        figsize=(
            max(2.0 * num_heads * hs / 4 + 1.5, 0.55 * C + 1.0),
            1.0 + 0.5 * T * (1 + len(variants)),
        )
    )
    grid = fig.add_gridspec(1 + len(variants), num_heads)
    _draw_grid(
        fig.add_subplot(grid[0, :]),
        to_numpy(x[0]),
        C,
        hs,
        num_heads,
        f"input (B=1, T={T}, C={C}): colour = head that owns the feature",
    )
    for row, (name, split) in enumerate(variants.items(), start=1):
        split = to_numpy(split)
        if split.shape != (1, num_heads, T, hs):
            raise ValueError(
                f"{name} returned shape {split.shape}, expected (1, {num_heads}, {T}, {hs})"
            )
        for h in range(num_heads):
            title = f"{name}\nhead {h}" if h == 0 else f"head {h}"
            _draw_grid(fig.add_subplot(grid[row, h]), split[0, h], C, hs, num_heads, title)
    fig.tight_layout()
    return fig


def plot_param_counts(
    counts: Mapping[str, int],
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """A bar per configuration with its parameter count written on top (thousands separated)."""
    ax = _new_ax(ax, (1.6 * len(counts) + 2.0, 3.2))
    names, values = list(counts), [int(v) for v in counts.values()]
    bars = ax.bar(names, values, color=plt.get_cmap("tab10").colors[: len(values)])
    ax.bar_label(bars, labels=[f"{v:,}" for v in values], padding=2, fontsize=8)
    ax.set_ylabel("parameters")
    ax.set_ylim(0, max(values) * 1.15 if values and max(values) > 0 else 1)
    if title:
        ax.set_title(title)
    return ax


def plot_loss_curves(
    curves: Mapping[str, Sequence[float]],
    ax: Axes | None = None,
    title: str | None = None,
    ylabel: str = "loss",
    logy: bool = True,
) -> Axes:
    """Training losses, one line per named run, against the step number."""
    ax = _new_ax(ax, (6.0, 3.2))
    for name, values in curves.items():
        ax.plot(to_numpy(values), label=name)
    ax.set(xlabel="step", ylabel=ylabel, yscale="log" if logy else "linear")
    if title:
        ax.set_title(title)
    ax.legend()
    return ax
