"""The KV-cache benchmark and notebook 04's pictures run at tiny sizes (a smoke test, not timed)."""

import json

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from autograder.bench import kv_cache  # noqa: E402
from autograder.tools import nb04_gqa_plots  # noqa: E402
from autograder.tools.nb04_gqa import (  # noqa: E402
    TinyDecoder,
    benchmark_decoding,
    cache_nbytes,
    generate,
    meta_cache,
)
from autograder.torch_helpers import one_thread  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_quick_benchmark_runs_and_reports(tmp_path, capsys):
    out = tmp_path / "results.json"
    assert kv_cache.main(["--quick", "--json", str(out), "--plot", str(tmp_path)]) == 0
    results = json.loads(out.read_text())
    assert results["same_tokens"] is True
    assert results["cache_bytes"]["measured"] == results["cache_bytes"]["formula_fp32"]
    assert results["memory_bytes"]["GQA (8 kv heads)"][0] == 327_680 * 1024  # Llama 2 70B
    assert set(results["tokens_per_s"]) == {"no cache", "KV cache"}
    assert (tmp_path / "kv_cache_speed.png").stat().st_size > 0
    assert (tmp_path / "kv_cache_memory.png").stat().st_size > 0
    assert "speed-up" in capsys.readouterr().out


@one_thread  # not the module: a test below measures that the benchmark restores the threads
def test_cached_generation_equals_recomputation_in_float64():
    torch.manual_seed(0)
    model = (
        TinyDecoder(
            vocab_size=32, d_model=16, num_layers=2, num_heads=4, num_kv_heads=2, max_len=24
        )
        .double()
        .eval()
    )
    prompt = torch.randint(0, 32, (2, 3))
    cached = generate(model, prompt, 12, use_cache=True)
    full = generate(model, prompt, 12, use_cache=False)
    assert torch.equal(cached.tokens, full.tokens)
    assert len(cached.step_s) == 12 and cached.tokens_per_s > 0
    with torch.inference_mode():
        logits_full, caches = model(torch.cat([prompt, full.tokens], dim=1))
        logits_step, past = model(prompt)
        for t in range(full.tokens.shape[1]):
            logits_t, past = model(full.tokens[:, t : t + 1], past)
            torch.testing.assert_close(logits_t[:, 0], logits_full[:, 3 + t])
    assert all(k.shape == (2, 2, 15, 4) for k, _ in caches)


def test_benchmark_restores_threads_and_counts_repeats():
    model = TinyDecoder(
        vocab_size=16, d_model=8, num_layers=1, num_heads=2, num_kv_heads=1, max_len=16
    )
    before = torch.get_num_threads()
    bench = benchmark_decoding(model, torch.zeros(1, 2, dtype=torch.long), 4, repeats=2)
    assert torch.get_num_threads() == before
    assert [len(runs) for runs in bench.runs.values()] == [2, 2]
    assert len(bench.step_ms("KV cache")) == 4 and bench.speedup > 0


def test_meta_cache_uses_no_memory_and_counts_bytes():
    caches = meta_cache(80, 8, 128, 32768, dtype=torch.float16)
    assert all(t.device.type == "meta" for kv in caches for t in kv)
    assert cache_nbytes(caches) == 327_680 * 32768


def test_decoder_rejects_sequences_longer_than_max_len():
    model = TinyDecoder(
        vocab_size=8, d_model=8, num_layers=1, num_heads=2, num_kv_heads=1, max_len=4
    )
    with pytest.raises(ValueError, match="max_len"):
        model(torch.zeros(1, 5, dtype=torch.long))


def test_pictures_draw():
    def tiled(x, n_rep):
        return x.repeat(1, n_rep, 1, 1)

    fig = nb04_gqa_plots.plot_head_sharing(8, (8, 4, 1))
    assert len(fig.axes) == 3
    fig = nb04_gqa_plots.plot_kv_grouping(8, 2, repeat_fn=tiled)
    assert sum(t.get_text() == "✗" for t in fig.axes[0].texts) == 8  # 4 wrong per wrong row
    memory = {"a": [1e9, 2e9]}
    ax = nb04_gqa_plots.plot_kv_cache_memory([1024, 2048], memory, 80e9, "GPU", title="t")
    assert ax.get_title() == "t"
    ax = nb04_gqa_plots.plot_conversion_error([8, 4, 2, 1], {"mean": [0, 0.5, 0.7, 0.8]})
    assert len(ax.lines) == 1
    with pytest.raises(ValueError, match="divisible"):
        nb04_gqa_plots.plot_head_sharing(6, (4,))
