"""The head explorer of notebook 07: plain ipywidgets and matplotlib, no JavaScript, no CDN.

Shape legend: ``B`` batch, ``T`` tokens, ``nh`` heads, ``n_layers`` blocks.

Pick a layer and a head, type or pick an input, and see that head's attention as a heatmap and
as token-to-token lines; a table gives every head's statistics on a held-out batch; switching
heads off updates the table, the loss and the accuracy at once; two buttons save the figure as
PNG and SVG. The figure is an ``ipywidgets.Image`` (PNG bytes), so it renders the same way in
JupyterLab, VS Code and Colab. Every control uses ``continuous_update=False``, and inputs longer
than the model's context are cut to it, with tick labels thinned, so long inputs stay responsive.
"""

from __future__ import annotations

import html
import io
from collections.abc import Callable
from pathlib import Path

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure

from autograder.tools import nb07_head_stats, toy_data
from autograder.tools.plots import to_numpy

_PAD = "padding:1px 8px;text-align:right"
_MAX_LABELS = 40  # above this many tokens, label every k-th one only
# Sized for a 1400 px browser window: the PNG (100 dpi) is about as wide as the notebook, so a
# 10 pt label shows about 13 px high.
_DPI = 100
_LABEL_PT = 10


def _thin(labels: list[str]) -> tuple[list[int], list[str]]:
    step = max(1, -(-len(labels) // _MAX_LABELS))
    ticks = list(range(0, len(labels), step))
    return ticks, [labels[i] for i in ticks]


def draw_head(
    weights, tokens: list[str], title: str = "", view: str = "both", threshold: float = 0.05
) -> Figure:
    """One head's ``(T, T)`` weights as a heatmap and/or lines from each query to its keys.

    ``view`` is ``"heatmap"``, ``"lines"`` or ``"both"``. Lines are drawn for weights above
    ``threshold``, with opacity and width growing with the weight. The figure is not pyplot's,
    so a notebook cell that makes one never shows it by itself (the explorer shows it live).
    """
    w = to_numpy(weights)
    T = w.shape[0]
    panels = ["heatmap", "lines"] if view == "both" else [view]
    # one panel alone is drawn smaller: shown at its own size it still fits a laptop screen
    fig = Figure(figsize=(12.8, 5.6) if len(panels) == 2 else (5.2, 4.6))
    axes = fig.subplots(1, len(panels), squeeze=False)
    ticks, labels = _thin(tokens)
    upright = max(map(len, labels), default=0) <= 3  # single letters read best unrotated
    for ax, panel in zip(axes[0], panels, strict=True):
        if panel == "heatmap":
            image = ax.imshow(w, cmap="Blues", vmin=0.0, vmax=1.0)
            ax.set_xticks(ticks, labels, rotation=0 if upright else 90, fontsize=_LABEL_PT)
            ax.set_yticks(ticks, labels, fontsize=_LABEL_PT)
            ax.set_xlabel("key (attended to)", fontsize=_LABEL_PT + 1)
            ax.set_ylabel("query (attending)", fontsize=_LABEL_PT + 1)
            fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
        else:
            for side, x in ((0, 0.0), (1, 1.0)):
                for i in ticks:
                    ax.text(
                        x + (-0.04 if side == 0 else 0.04),
                        -i,
                        tokens[i],
                        fontsize=_LABEL_PT,
                        ha="right" if side == 0 else "left",
                        va="center",
                    )
            rows, cols = (w > threshold).nonzero()
            for q, k in zip(rows, cols, strict=True):
                ax.plot(
                    [0, 1],
                    [-q, -k],
                    color="tab:blue",
                    alpha=float(min(w[q, k], 1.0)),
                    lw=0.5 + 2.5 * float(w[q, k]),
                )
            ax.set(xlim=(-0.35, 1.35), ylim=(-T + 0.5, 0.5))
            ax.axis("off")
            ax.set_title("query → key", fontsize=_LABEL_PT + 1)
    if title:
        fig.suptitle(title, fontsize=_LABEL_PT + 2)
    fig.tight_layout()
    return fig


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=_DPI)
    return buffer.getvalue()


def _table_html(
    table: dict[str, torch.Tensor], selected: tuple[int, int], mask: torch.Tensor
) -> str:
    names = list(nb07_head_stats.STATISTICS)
    stats = nb07_head_stats.STATISTICS
    head = "".join(f"<th style='{_PAD}' title='{html.escape(stats[n])}'>{n}</th>" for n in names)
    rows = []
    n_layers, nh = table[names[0]].shape
    for layer in range(n_layers):
        for h in range(nh):
            style = "font-weight:bold;background:#e8f0fe" if (layer, h) == selected else ""
            off = "" if mask[layer, h] else " (off)"
            cells = "".join(
                f"<td style='{_PAD}'>{float(table[n][layer, h]):.2f}</td>" for n in names
            )
            label = html.escape(nb07_head_stats.describe_head(table, layer, h))
            name = f"<td style='{_PAD}'>L{layer}H{h}{off}</td>"
            rows.append(f"<tr style='{style}'>{name}{cells}<td style='{_PAD}'>{label}</td></tr>")
    return (
        "<table style='font-size:12px;border-collapse:collapse' class='head-stats'>"
        f"<tr><th style='{_PAD}'>head</th>{head}<th style='{_PAD}'>strongest</th></tr>"
        f"{''.join(rows)}</table>"
    )


def _fallback_note(reasons: list[str]) -> str:
    """The line under the figure when learner functions raised, naming each one replaced."""
    if not reasons:
        return ""
    which = "the built-in ones" if len(reasons) > 1 else "the built-in one"
    return f"<i>{html.escape('; '.join(reasons))}: using {which} instead.</i>"


class HeadExplorer:
    """The explorer for a :class:`~autograder.tools.tiny_model.TinyTransformer`; show ``.widget``.

    ``entropy_fn`` and ``previous_fn`` (weights ``(..., nh, T, S)`` -> ``(..., nh)``) replace the
    built-in statistics, e.g. with the learner's own; if one raises, the built-in one is used and
    a note says so. ``export_dir`` is where the PNG and SVG buttons write.
    """

    def __init__(
        self,
        model,
        entropy_fn: Callable | None = None,
        previous_fn: Callable | None = None,
        eval_batch: toy_data.Batch | None = None,
        export_dir: str | Path = ".",
        texts: dict[str, str] | None = None,
    ):
        self.model = model.eval()
        self.fns = {
            "entropy": entropy_fn or nb07_head_stats.entropy,
            "previous": previous_fn or nb07_head_stats.previous_token,
        }
        self.batch = eval_batch if eval_batch is not None else toy_data.make_batch(256, 10_000)
        self.export_dir = Path(export_dir)
        self.texts = texts or toy_data.example_texts()
        self.mask = torch.ones(model.n_layers, model.num_heads)
        self.figure: Figure | None = None
        self.draws = 0
        first = next(iter(self.texts))
        style = {"description_width": "initial"}
        self.example = widgets.Dropdown(
            options=[*self.texts, "(typed)"], value=first, description="input", style=style
        )
        self.text = widgets.Text(
            value=self.texts[first],
            continuous_update=False,
            description="tokens",
            style=style,
            layout=widgets.Layout(width="520px"),
        )
        self.layer = widgets.ToggleButtons(
            options=list(range(model.n_layers)), description="layer", style={"button_width": "40px"}
        )
        self.head = widgets.ToggleButtons(
            options=list(range(model.num_heads)), description="head", style={"button_width": "40px"}
        )
        self.view = widgets.ToggleButtons(
            options=["both", "heatmap", "lines"], description="view", style={"button_width": "80px"}
        )
        self.switches = [
            widgets.ToggleButton(
                value=True,
                description=f"L{layer}H{h}",
                tooltip="on/off",
                layout=widgets.Layout(width="64px"),
            )
            for layer in range(model.n_layers)
            for h in range(model.num_heads)
        ]
        self.image = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
        self.table = widgets.HTML()
        self.score = widgets.HTML()
        self.note = widgets.HTML()
        self.typo = widgets.HTML()
        self.png_button = widgets.Button(description="Save PNG", icon="download")
        self.svg_button = widgets.Button(description="Save SVG", icon="download")
        self.saved = widgets.HTML()
        self.base_acc, self.base_loss = nb07_head_stats.accuracy_and_loss(model, self.batch)
        self.example.observe(self._pick_example, names="value")
        self.text.observe(self._typed, names="value")
        for control in (self.text, self.layer, self.head, self.view):
            control.observe(self._redraw, names="value")
        for switch in self.switches:
            switch.observe(self._toggle, names="value")
        self.png_button.on_click(lambda _: self.export("png"))
        self.svg_button.on_click(lambda _: self.export("svg"))
        grid = widgets.GridBox(
            self.switches,
            layout=widgets.Layout(grid_template_columns=f"repeat({model.num_heads}, 70px)"),
        )
        self.attention = type(model.blocks[0].attn).__name__
        self.widget = widgets.VBox(
            [
                widgets.HTML(
                    f"<b>Head explorer</b> · attention module: <code>{self.attention}</code>"
                ),
                widgets.HBox([self.example, self.text]),
                self.typo,
                widgets.HBox([self.layer, self.head]),
                self.view,
                self.image,
                self.note,
                widgets.HBox([self.png_button, self.svg_button, self.saved]),
                widgets.HTML("<b>Heads on/off</b> (click to remove a head from the model)"),
                grid,
                self.score,
                self.table,
            ]
        )
        self._refresh_table()
        self._redraw()

    # -------------------------------------------------------------------------------- state

    def tokens(self) -> torch.Tensor:
        """The current input's ids, cut to the model's context."""
        return toy_data.encode(self.text.value)[: self.model.config.max_len]

    def _stat(self, name: str, weights: torch.Tensor) -> tuple[torch.Tensor, str]:
        """The statistic ``name`` of ``weights``, and why the built-in one was used ("" if not)."""
        try:
            return self.fns[name](weights), ""
        except Exception as exc:  # noqa: BLE001 - a learner's unfinished function
            stats = nb07_head_stats
            builtin = {"entropy": stats.entropy, "previous": stats.previous_token}
            return builtin[name](weights), f"your {name} function raised {type(exc).__name__}"

    @torch.no_grad()
    def _refresh_table(self) -> None:
        _, weights = self.model(self.batch.inputs, self.mask)  # n_layers x (B, nh, T, T)
        table = nb07_head_stats.head_table(weights, self.batch.inputs)
        notes = []
        for name in ("entropy", "previous"):
            values = []
            for w in weights:
                value, why = self._stat(name, w)
                values.append(value.mean(0))
                notes += [why] if why and why not in notes else []
            table[name] = torch.stack(values).float()
        self.stats = table
        acc, loss = nb07_head_stats.accuracy_and_loss(self.model, self.batch, self.mask)
        off = int((self.mask == 0).sum())
        self.score.value = (
            f"<b>Held-out batch</b> ({self.batch.inputs.shape[0]} sequences), {off} head(s) off: "
            f"loss {loss:.3f} ({loss - self.base_loss:+.3f}), accuracy {acc:.1%} "
            f"({100 * (acc - self.base_acc):+.1f} points)"
        )
        self.table.value = _table_html(table, (self.layer.value, self.head.value), self.mask)
        self.note.value = _fallback_note(notes)

    @torch.no_grad()
    def _redraw(self, _change=None) -> None:
        try:
            ids = self.tokens()
        except ValueError as exc:  # a typo in the typed input: say so, keep the last figure
            self.typo.value = f"<i>{html.escape(str(exc))}</i>"
            return
        self.typo.value = self._read_as(ids)
        self.saved.value = ""  # a new figure: the last saved file no longer shows it
        _, weights = self.model(ids[None], self.mask)  # n_layers x (1, nh, T, T)
        w = weights[self.layer.value][0, self.head.value]  # (T, T)
        entropy, _ = self._stat("entropy", w[None])
        previous, _ = self._stat("previous", w[None]) if len(ids) > 1 else (torch.zeros(1), "")
        off = "" if self.mask[self.layer.value, self.head.value] else " (switched off)"
        title = (
            f"layer {self.layer.value} head {self.head.value}{off}: entropy "
            f"{float(entropy[0]):.2f} nats, previous-token {float(previous[0]):.2f}, "
            f"first-token {float(w[1:, 0].mean()) if len(ids) > 1 else 1.0:.2f}"
        )
        self.figure = draw_head(w, toy_data.decode(ids), title, self.view.value)
        self.image.value = _png(self.figure)
        width = round(self.figure.get_figwidth() * _DPI)
        self.image.layout.width = f"{width}px"  # its own size: never stretched to the output
        self.draws += 1
        if self.table.value:
            self.table.value = _table_html(
                self.stats, (self.layer.value, self.head.value), self.mask
            )

    def _read_as(self, ids: torch.Tensor) -> str:
        """For typed input: the tokens the model reads (each character is one, spaces are none),
        so that "hello world" is seen to be the ten tokens h e l l o w o r l d after ``<s>``."""
        if self.texts.get(self.example.value) == self.text.value:
            return ""
        tokens = html.escape(" ".join(toy_data.decode(ids)))
        cut = len(toy_data.encode(self.text.value)) > len(ids)
        limit = f", cut to the model's {len(ids)}" if cut else ""
        return (
            f"<i>read as {len(ids)} tokens{limit}: <code>{tokens}</code> (every character is one "
            "token; spaces only separate them)</i>"
        )

    def _pick_example(self, change) -> None:
        if change["new"] in self.texts:
            self.text.value = self.texts[change["new"]]

    def _typed(self, change) -> None:
        if self.texts.get(self.example.value) != change["new"]:
            self.example.value = "(typed)"

    def _toggle(self, _change=None) -> None:
        for switch in self.switches:
            switch.button_style = "" if switch.value else "danger"
        flags = torch.tensor([float(s.value) for s in self.switches])
        self.mask = flags.view(self.model.n_layers, self.model.num_heads)
        self._refresh_table()
        self._redraw()

    def state(self) -> str:
        """The settings behind the current figure, in one line: input and heads switched off."""
        off = [s.description for s in self.switches if not s.value]
        heads = "heads off: " + ", ".join(off) if off else "all heads on"
        return f"input: {self.text.value}; {heads}; attention: {self.attention}"

    def export(self, fmt: str) -> Path:
        """Write the current figure as ``fmt`` (png or svg) into ``export_dir``; say where.

        The file records the state under the figure and in its metadata (PNG ``Description``,
        SVG ``dc:description``), so a saved picture says which input and heads made it.
        """
        self.export_dir.mkdir(parents=True, exist_ok=True)
        path = (self.export_dir / f"head_L{self.layer.value}H{self.head.value}.{fmt}").resolve()
        caption = self.figure.text(0.01, 0.0, self.state(), fontsize=_LABEL_PT - 1, va="top")
        try:
            self.figure.savefig(
                path,
                format=fmt,
                dpi=150 if fmt == "png" else None,
                bbox_inches="tight",
                metadata={"Description": self.state()},
            )
        finally:
            caption.remove()
        self.saved.value = f"saved <code>{html.escape(str(path))}</code>"
        return path


def head_explorer(model, **kwargs) -> widgets.VBox:
    """The explorer's widget for ``model`` (see :class:`HeadExplorer` for the options)."""
    return HeadExplorer(model, **kwargs).widget
