"""The learner tools in ``autograder.tools`` build figures and widgets without error (Agg)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from autograder.tools import plots, widgets  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _split_heads(x, num_heads):
    B, T, C = x.shape
    return x.view(B, T, num_heads, C // num_heads).transpose(1, 2)


def test_to_numpy_accepts_tensors_arrays_and_lists():
    t = torch.ones(2, 3, dtype=torch.float16, requires_grad=False)
    assert plots.to_numpy(t).dtype == np.float64
    assert plots.to_numpy([[1, 2]]).shape == (1, 2)


def test_attention_heatmap_labels_and_annotations():
    w = torch.softmax(torch.randn(3, 5), dim=-1)
    ax = plots.attention_heatmap(w, ["a", "b", "c"], list("vwxyz"), title="t")
    assert [t.get_text() for t in ax.get_xticklabels()] == list("vwxyz")
    assert len(ax.texts) == 15
    ax = plots.attention_heatmap(torch.rand(20, 20))
    assert len(ax.texts) == 0


def test_attention_heatmap_rejects_wrong_rank():
    with pytest.raises(ValueError, match="T, S"):
        plots.attention_heatmap(torch.rand(2, 3, 4))


def test_attention_heatmaps_grid_hides_spare_axes():
    fig = plots.attention_heatmaps(torch.rand(5, 3, 4), ncols=3, suptitle="heads")
    visible = [ax for ax in fig.axes if ax.get_visible() and ax.axison and ax.images]
    assert len(visible) == 5


def test_softmax_bars_and_param_counts_and_loss_curves():
    assert len(plots.softmax_bars(torch.tensor([0.2, 0.8]), ["x", "y"]).patches) == 2
    ax = plots.plot_param_counts({"1 head": 2_362_368, "12 heads": 2_362_368}, title="p")
    assert [t.get_text() for t in ax.texts] == ["2,362,368", "2,362,368"]
    ax = plots.plot_loss_curves({"a": [1.0, 0.5, 0.1], "b": np.array([1.0, 0.9, 0.8])})
    assert len(ax.lines) == 2


def test_plot_scaling_study_has_three_panels():
    d_ks = [1, 4, 16]
    fig = plots.plot_scaling_study(
        d_ks,
        variance={"raw": [1.0, 4.0, 16.0], "scaled": [1.0, 1.0, 1.0]},
        max_weight={"raw": [0.3, 0.6, 0.9], "scaled": [0.3, 0.3, 0.3]},
        entropy={"raw": [1.5, 1.0, 0.3], "scaled": [1.5, 1.5, 1.5]},
        n_keys=8,
    )
    assert len(fig.axes) == 3


def test_plot_head_layout_with_and_without_split_fn():
    assert len(plots.plot_head_layout(T=3, C=6, num_heads=3).axes) == 1 + 2 * 3
    assert len(plots.plot_head_layout(split_fn=_split_heads).axes) == 1 + 3 * 2


def test_plot_head_layout_reports_a_wrong_split_shape():
    with pytest.raises(ValueError, match="expected"):
        plots.plot_head_layout(split_fn=lambda x, nh: x)
    with pytest.raises(ValueError, match="divisible"):
        plots.plot_head_layout(C=7, num_heads=2)


def test_draw_functions_return_figures():
    assert isinstance(widgets.draw_dk_softmax(64, scaled=True), plt.Figure)
    assert isinstance(widgets.draw_temperature_softmax([1.0, 2.0, 3.0], 0.5), plt.Figure)


def test_dk_widget_redraws_on_change():
    w = widgets.dk_softmax_widget(n_keys=4, d_ks=(1, 16, 256))
    slider, checkbox, out = w.children
    slider.value = 256
    checkbox.value = True
    assert isinstance(out, widgets.widgets.Output)
    assert plt.get_fignums() == []  # every drawn figure was closed after display


def test_temperature_and_heads_widgets_build_and_redraw():
    w = widgets.temperature_widget(torch.tensor([2.0, 1.0, 0.0]), ["a", "b", "c"])
    w.children[0].value = 10.0
    assert w.children[0].style.description_width == "initial"  # "temperature", not "temperat…"
    h = widgets.attention_heads_widget(torch.rand(3, 4, 4), list("abcd"), list("abcd"))
    h.children[0].value = 2
    with pytest.raises(ValueError, match="nh, T, S"):
        widgets.attention_heads_widget(torch.rand(4, 4))


def test_mha_fanout_draws_every_head_up_to_four_then_elides():
    from autograder.tools.nb02_mha_diagram import drawn_heads, plot_mha_fanout

    assert drawn_heads(3) == [0, 1, 2]
    assert drawn_heads(12) == [0, 1, None, 11]
    ax = plot_mha_fanout(3)
    texts = [t.get_text() for t in ax.texts]
    heads = [t.split("\n")[0] for t in texts if t.startswith("head ")]
    assert heads == ["head 0", "head 1", "head 2"]
    assert sum(t.startswith("attention ") for t in texts) == 3
    ax = plot_mha_fanout(12, d_model=768)
    texts = " ".join(t.get_text() for t in ax.texts)
    assert "head 11" in texts and "⋮" in texts and "(768 × 64 each)" in texts
    with pytest.raises(ValueError, match="divisible"):
        plot_mha_fanout(5, d_model=768)
    with pytest.raises(ValueError, match="at least 1"):
        plot_mha_fanout(0)
