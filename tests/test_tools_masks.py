"""Notebook 03's tools (``autograder.tools.nb03_masks``) draw masks and read SDPA's weights."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from autograder.tools import nb03_masks  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _causal(T, S=None, device=None):
    S = T if S is None else S
    return torch.ones(T, S, dtype=torch.bool, device=device).tril(S - T)


def test_sdpa_weights_are_the_weights_sdpa_applies():
    q, k, v = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 6)
    mask = torch.rand(2, 1, 4, 5) > 0.3
    mask[..., 0] = True
    weights = nb03_masks.sdpa_weights(q, k, mask)  # (2, 3, 4, 5)
    assert weights.shape == (2, 3, 4, 5)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 3, 4))
    assert (weights[~mask.expand_as(weights)] == 0).all()
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.allclose(weights @ v, out, atol=1e-6)


def test_top_left_causal_is_what_is_causal_applies():
    assert torch.equal(nb03_masks.top_left_causal(2, 5), torch.ones(2, 5, dtype=torch.bool).tril())
    assert torch.equal(nb03_masks.top_left_causal(4, 4), _causal(4))


def test_plot_mask_annotates_true_and_false():
    ax = nb03_masks.plot_mask(_causal(2, 3), ["a", "b"], ["x", "y", "z"], title="m")
    assert [t.get_text() for t in ax.texts] == ["T", "T", "F", "T", "T", "T"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["x", "y", "z"]
    assert not nb03_masks.plot_mask(torch.ones(30, 30, dtype=torch.bool)).texts
    with pytest.raises(ValueError, match="T, S"):
        nb03_masks.plot_mask(torch.ones(2, 2, 2))


def test_plot_masks_hides_spare_panels():
    fig = nb03_masks.plot_masks({"a": _causal(3), "b": _causal(2, 3), "c": _causal(1, 3)}, ncols=2)
    assert sum(ax.axison for ax in fig.axes) == 3
    with pytest.raises(ValueError):
        nb03_masks.plot_masks({})


@pytest.mark.parametrize("shape", [(3, 1, 4, 4), (3, 4, 4), (3, 4)])
def test_plot_batch_mask_draws_one_panel_per_sequence(shape):
    fig = nb03_masks.plot_batch_mask(torch.ones(shape, dtype=torch.bool), [["a"], ["b", "c"], []])
    assert len(fig.axes) == 3
    assert [t.get_text() for t in fig.axes[1].get_xticklabels()] == ["b", "c", "<pad>", "<pad>"]
    with pytest.raises(ValueError):
        nb03_masks.plot_batch_mask(torch.ones(2, 2, 3, 3, dtype=torch.bool))


def test_causal_alignment_widget_builds():
    fig = nb03_masks.draw_causal_alignment(_causal, 2, 5)
    assert len([ax for ax in fig.axes if ax.axison]) == 2
    box = nb03_masks.causal_alignment_widget(_causal, T=3, S=2)  # S < T is raised to T
    assert len(box.children) == 3
