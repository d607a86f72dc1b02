"""The head explorer and notebook 07's pictures, driven from Python (no browser: Agg backend)."""

import matplotlib

matplotlib.use("Agg")

import json  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from autograder.tools import nb07_head_plots, nb07_head_stats, toy_data  # noqa: E402
from autograder.tools.nb07_explorer import HeadExplorer, draw_head  # noqa: E402
from autograder.tools.tiny_model import DATA_DIR, load_checkpoint  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
    plt.close("all")


@pytest.fixture(scope="module")
def explorer(tmp_path_factory):
    return HeadExplorer(
        load_checkpoint(),
        eval_batch=toy_data.make_batch(32, 1),
        export_dir=tmp_path_factory.mktemp("exports"),
    )


def test_controls_redraw_the_figure(explorer):
    first = bytes(explorer.image.value)
    assert first.startswith(b"\x89PNG")
    draws = explorer.draws
    explorer.head.value = 2
    assert bytes(explorer.image.value) != first and explorer.draws == draws + 1
    explorer.layer.value = 1
    explorer.view.value = "lines"
    assert explorer.draws == draws + 3
    assert "L1H2" in explorer.table.value and "font-weight:bold" in explorer.table.value


def test_switching_a_head_off_updates_loss_table_and_figure(explorer):
    before_score, before_image = explorer.score.value, bytes(explorer.image.value)
    explorer.switches[1].value = False  # L0H1, the previous-token head
    assert explorer.mask[0, 1] == 0 and "1 head(s) off" in explorer.score.value
    assert explorer.score.value != before_score and "L0H1 (off)" in explorer.table.value
    assert bytes(explorer.image.value) != before_image
    explorer.switches[1].value = True
    assert explorer.mask.eq(1).all()


def test_typed_and_long_inputs(explorer):
    explorer.text.value = "<s> A " + "qrstuv" * 20  # 122 tokens: cut to the model's 32
    assert explorer.example.value == "(typed)"
    assert len(explorer.tokens()) == explorer.model.config.max_len
    draws = explorer.draws
    explorer.text.value = "hello!"
    assert "unknown tokens" in explorer.typo.value and explorer.draws == draws
    explorer.example.value = "recall"
    assert explorer.text.value == toy_data.example_texts()["recall"] and not explorer.typo.value


def test_typed_input_says_how_it_is_read(explorer):
    """Spaces are no tokens: the line under the box shows what the model reads."""
    explorer.text.value = "hello world"
    assert "read as 11 tokens" in explorer.typo.value, explorer.typo.value
    assert "&lt;s&gt; h e l l o w o r l d" in explorer.typo.value
    explorer.text.value = "<s> A " + "qrstuv" * 20
    assert f"cut to the model's {explorer.model.config.max_len}" in explorer.typo.value
    explorer.example.value = "recall"
    assert not explorer.typo.value


def test_export_writes_png_and_svg_and_says_where(explorer):
    for fmt in ("png", "svg"):
        path = explorer.export(fmt)
        assert path.is_file() and path.stat().st_size > 1000
        assert str(path) in explorer.saved.value
    assert path.read_text().lstrip().startswith("<?xml")
    explorer.head.value = (explorer.head.value + 1) % explorer.model.num_heads
    assert not explorer.saved.value, "the saved file no longer shows the figure"


def test_learner_functions_are_used_and_a_broken_one_falls_back():
    def double_entropy(w):
        return 2 * nb07_head_stats.entropy(w)

    def unfinished(w):
        raise NotImplementedError()

    model = load_checkpoint()
    batch = toy_data.make_batch(16, 2)
    ex = HeadExplorer(model, entropy_fn=double_entropy, previous_fn=unfinished, eval_batch=batch)
    with torch.no_grad():
        _, weights = model(batch.inputs)
    builtin = nb07_head_stats.head_table(weights, batch.inputs)
    torch.testing.assert_close(ex.stats["entropy"], 2 * builtin["entropy"])
    torch.testing.assert_close(ex.stats["previous"], builtin["previous"])
    assert "raised NotImplementedError" in ex.note.value
    assert ex.note.value.endswith("using the built-in one instead.</i>"), ex.note.value
    both = HeadExplorer(model, entropy_fn=unfinished, previous_fn=unfinished, eval_batch=batch)
    assert "your entropy function raised" in both.note.value
    assert "your previous function raised" in both.note.value
    assert both.note.value.endswith("using the built-in ones instead.</i>"), both.note.value


def test_draw_head_thins_labels_of_long_inputs():
    w = torch.softmax(torch.randn(60, 60), -1)
    fig = draw_head(w, [f"t{i}" for i in range(60)], "long", view="heatmap")
    assert len(fig.axes[0].get_xticklabels()) <= 40


def test_notebook_pictures_draw_from_the_stored_json():
    model = load_checkpoint()
    with torch.no_grad():
        _, weights = model(toy_data.encode(toy_data.example_texts()["copy"])[None])
    fig = nb07_head_plots.draw_all_heads([w[0] for w in weights], ["x"] * weights[0].shape[-1])
    assert len(fig.axes) == 8
    assert nb07_head_plots.plot_head_grid(torch.rand(2, 4), "importance").axes
    study = json.loads((DATA_DIR / "pruning.json").read_text())
    assert len(nb07_head_plots.plot_pruning(study).axes[0].lines) == 3
    sweep = json.loads((DATA_DIR / "nh_sweep.json").read_text())
    assert len(nb07_head_plots.plot_nh_sweep(sweep).axes[0].lines) == len(sweep["runs"])


def test_no_static_copy_and_exports_record_the_state(explorer):
    plt.close("all")
    explorer.head.value = 3
    assert plt.get_fignums() == [], "a pyplot figure would be printed under the live widget"
    explorer.switches[1].value = False  # L0H1
    try:
        for fmt in ("png", "svg"):
            data = explorer.export(fmt).read_bytes()
            assert b"heads off: L0H1" in data and explorer.text.value[4:].encode() in data, fmt
    finally:
        explorer.switches[1].value = True
    assert b"all heads on" in explorer.export("png").read_bytes()


def test_heatmap_labels_are_readable():
    fig = draw_head(torch.softmax(torch.randn(20, 20), -1), list("abcdefghijklmnopqrst"))
    labels = fig.axes[0].get_xticklabels()
    assert all(t.get_rotation() == 0 and t.get_fontsize() >= 10 for t in labels)
