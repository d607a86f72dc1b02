"""The picture of multi-head attention: one input fans out to ``nh`` heads, each with its own
projections; their outputs are concatenated and projected (notebook 02, section 1).

Shape legend: ``B`` batch, ``T`` sequence length, ``C`` = d_model, ``nh`` heads,
``hs`` = C // nh (head size).

Nothing here calls ``plt.show()``: the notebook decides when to show.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.patches import FancyBboxPatch

MAX_DRAWN = 4  # heads drawn one by one; with more, the middle ones become a "⋮"


def _box(ax: Axes, x: float, y: float, w: float, h: float, text: str, colour) -> None:
    """A rounded box centred on ``(x, y)`` with ``text`` inside."""
    ax.add_patch(
        FancyBboxPatch(
            (x - w / 2, y - h / 2),
            w,
            h,
            boxstyle="round,pad=0.02",
            facecolor=colour,
            edgecolor="0.3",
            linewidth=1,
        )
    )
    ax.text(x, y, text, ha="center", va="center", fontsize=9)


def _arrow(ax: Axes, start: tuple[float, float], end: tuple[float, float]) -> None:
    ax.annotate("", xy=end, xytext=start, arrowprops={"arrowstyle": "->", "color": "0.3"})


def drawn_heads(num_heads: int) -> list[int | None]:
    """The head indices to draw, top to bottom; ``None`` stands for the elided middle ones."""
    if num_heads < 1:
        raise ValueError(f"num_heads must be at least 1, got {num_heads}.")
    if num_heads <= MAX_DRAWN:
        return list(range(num_heads))
    return [0, 1, None, num_heads - 1]


def plot_mha_fanout(num_heads: int = 3, d_model: int | None = None, ax: Axes | None = None) -> Axes:
    """Draw input -> ``num_heads`` heads (own W_Q, W_K, W_V each) -> concat -> W_O -> output.

    ``d_model``, when given, puts numbers on the shapes (it must be divisible by ``num_heads``).
    Returns the Axes.
    """
    rows = drawn_heads(num_heads)
    if d_model is not None and d_model % num_heads:
        raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}.")
    C = "C" if d_model is None else str(d_model)
    hs = "hs" if d_model is None else str(d_model // num_heads)
    if ax is None:
        _, ax = plt.subplots(figsize=(12, 1.0 + 1.1 * len(rows)))
    ys = [len(rows) - 1 - r for r in range(len(rows))]  # top to bottom
    middle = (len(rows) - 1) / 2
    _box(ax, 0.0, middle, 1.5, 0.7, f"input x\n(B, T, {C})", "0.92")
    for y, head in zip(ys, rows, strict=True):
        if head is None:
            ax.text(3.8, y, "⋮", ha="center", va="center", fontsize=16)
            continue
        colour = (*plt.get_cmap("tab10")(head % 10)[:3], 0.55)  # as in plot_head_layout
        _arrow(ax, (0.75, middle), (1.6, y))
        weights = f"W_Q{head}, W_K{head}, W_V{head}"
        _box(ax, 2.6, y, 2.0, 0.75, f"head {head}\n{weights}\n({C} × {hs} each)", colour)
        _arrow(ax, (3.6, y), (4.1, y))
        _box(ax, 5.0, y, 1.8, 0.75, f"attention {head}\nits own softmax\n(B, T, {hs})", colour)
        _arrow(ax, (5.9, y), (6.6, middle))
    concat = f"concatenate\nhead i → features\ni·{hs} : (i+1)·{hs}\n(B, T, {C})"
    _box(ax, 7.6, middle, 2.0, 1.0, concat, "0.92")
    _arrow(ax, (8.6, middle), (9.1, middle))
    _box(ax, 9.8, middle, 1.4, 0.7, f"W_O\n({C} × {C})", "0.92")
    _arrow(ax, (10.5, middle), (11.15, middle))
    _box(ax, 11.8, middle, 1.3, 0.7, f"output\n(B, T, {C})", "0.92")
    ax.set_xlim(-0.9, 12.6)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.axis("off")
    ax.set_title(
        f"Multi-head attention with nh = {num_heads}: one input, {num_heads} heads, one output"
    )
    return ax
