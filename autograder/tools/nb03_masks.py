"""Pictures and small helpers for notebook 03 (masking).

Shape legend: ``B`` batch, ``T`` query length, ``S`` key/value length, ``nh`` heads,
``d_k`` query/key width.

Every mask here is a bool tensor with the meaning of ``F.scaled_dot_product_attention``:
``mask[t, s]`` is True when query ``t`` may attend to key ``s``. Drawing functions return the
Axes (one panel) or the Figure (several panels) and never call ``plt.show()``.
"""

from collections.abc import Callable, Mapping, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from autograder.tools.plots import label_grid, to_numpy, write_cells
from autograder.tools.widgets import live_figure

_MASK_COLOURS = ListedColormap(["#eeeeee", "#4c9f70"])  # False: light grey, True: green


def sdpa_weights(
    q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None = None, is_causal: bool = False
) -> torch.Tensor:
    """The attention weights ``(..., T, S)`` that ``F.scaled_dot_product_attention`` uses.

    SDPA returns only ``weights @ v``; with the identity matrix as values that product is the
    weights themselves. ``q`` is ``(..., T, d_k)``, ``k`` is ``(..., S, d_k)``, ``mask`` is bool
    and broadcastable to ``(..., T, S)``.
    """
    S = k.shape[-2]
    eye = torch.eye(S, dtype=q.dtype, device=q.device).expand(*k.shape[:-2], S, S)  # (..., S, S)
    return F.scaled_dot_product_attention(q, k, eye, attn_mask=mask, is_causal=is_causal)


def top_left_causal(T: int, S: int) -> torch.Tensor:
    """The ``(T, S)`` mask that ``is_causal=True`` applies, read off PyTorch's own weights."""
    zeros_q = torch.zeros(T, 1, dtype=torch.float64)  # (T, 1): every score is 0
    zeros_k = torch.zeros(S, 1, dtype=torch.float64)  # (S, 1)
    return sdpa_weights(zeros_q, zeros_k, is_causal=True) > 0  # (T, S)


def plot_mask(
    mask,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    annotate: bool | None = None,
) -> Axes:
    """Draw one ``(T, S)`` bool mask: green T = may attend, grey F = blocked.

    ``annotate`` writes T or F in each cell; by default when the mask has at most 400 cells.
    """
    m = to_numpy(mask)
    if m.ndim != 2:
        raise ValueError(f"plot_mask expects a (T, S) mask, got shape {m.shape}")
    T, S = m.shape
    if ax is None:
        _, ax = plt.subplots(figsize=(0.42 * S + 1.6, 0.42 * T + 1.2))
    ax.imshow(m > 0, cmap=_MASK_COLOURS, vmin=0, vmax=1)
    label_grid(ax, T, S, query_labels, key_labels, "query", "key")
    if annotate if annotate is not None else T * S <= 400:
        # one letter per cell, big enough to read at a glance; dark on the light grey of "F"
        letter = lambda v: "T" if v else "F"  # noqa: E731
        write_cells(ax, m > 0, letter, lambda v: "white" if v else "#333333", fontsize=10)
    if title:
        ax.set_title(title, fontsize=11)
    return ax


def plot_masks(
    masks: Mapping[str, object],
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    ncols: int = 4,
    suptitle: str | None = None,
) -> Figure:
    """Several ``(T, S)`` masks side by side, one panel per ``{title: mask}`` entry."""
    arrays = {title: to_numpy(m) for title, m in masks.items()}
    if not arrays:
        raise ValueError("plot_masks needs at least one mask")
    ncols = min(ncols, len(arrays))
    nrows = -(-len(arrays) // ncols)
    T = max(a.shape[0] for a in arrays.values())
    S = max(a.shape[-1] for a in arrays.values())
    fig, axes = plt.subplots(
        nrows, ncols, squeeze=False, figsize=(ncols * (0.42 * S + 1.6), nrows * (0.42 * T + 1.4))
    )
    for ax, (title, m) in zip(axes.flat, arrays.items(), strict=False):
        plot_mask(m, query_labels, key_labels, ax=ax, title=title)
    for ax in list(axes.flat)[len(arrays) :]:
        ax.axis("off")
    if suptitle:
        fig.suptitle(suptitle)
    fig.tight_layout()
    return fig


def plot_batch_mask(
    mask, tokens: Sequence[Sequence[str]] | None = None, suptitle: str | None = None
) -> Figure:
    """One panel per batch element of a ``(B, 1, T, S)``, ``(B, T, S)`` or ``(B, S)`` mask.

    A ``(B, S)`` padding mask is drawn as one row per sequence. ``tokens[b]`` (the real tokens of
    sequence ``b``, padded here with ``<pad>``) labels the columns, and the rows of square panels.
    """
    m = to_numpy(mask)
    if m.ndim == 4 and m.shape[1] == 1:
        m = m[:, 0]  # (B, T, S)
    elif m.ndim == 2:
        m = m[:, None, :]  # (B, 1, S)
    elif m.ndim != 3:
        raise ValueError(f"plot_batch_mask expects (B, 1, T, S), (B, T, S) or (B, S): {m.shape}")
    B, T, S = m.shape
    fig, axes = plt.subplots(1, B, squeeze=False, figsize=(B * (0.42 * S + 1.6), 0.42 * T + 1.6))
    for b, ax in enumerate(axes[0]):
        labels = None
        if tokens is not None:
            labels = list(tokens[b]) + ["<pad>"] * (S - len(tokens[b]))
        plot_mask(m[b], labels if T == S else [""] * T, labels, ax=ax, title=f"sequence {b}")
    if suptitle:
        fig.suptitle(suptitle)
    fig.tight_layout()
    return fig


def draw_causal_alignment(causal_mask: Callable, T: int, S: int) -> Figure:
    """``causal_mask(T, S)`` next to the mask that ``is_causal=True`` applies for the same sizes."""
    first = S - T  # absolute position of the first query when the queries are the last T
    rows = [f"q{first + t}" for t in range(T)] if first >= 0 else None
    keys = [f"k{s}" for s in range(S)]
    fig = plot_masks(
        {
            f"your causal_mask({T}, {S})": causal_mask(T, S),
            "is_causal=True (top-left)": top_left_causal(T, S),
        },
        query_labels=rows,
        key_labels=keys,
        ncols=2,
    )
    return fig


def causal_alignment_widget(causal_mask: Callable, T: int = 2, S: int = 6) -> widgets.VBox:
    """Sliders for ``T`` and ``S`` over :func:`draw_causal_alignment` (``S`` is kept ≥ ``T``)."""
    controls = {
        "T": widgets.IntSlider(
            value=T, min=1, max=10, description="T (queries)", continuous_update=False
        ),
        "S": widgets.IntSlider(
            value=S, min=1, max=12, description="S (keys)", continuous_update=False
        ),
    }
    return live_figure(lambda T, S: draw_causal_alignment(causal_mask, T, max(S, T)), controls)
