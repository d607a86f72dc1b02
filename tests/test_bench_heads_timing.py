"""The heads benchmark runs end to end at tiny sizes, and its three versions agree with PyTorch."""

import json

import pytest
import torch

from autograder.bench import heads_timing
from autograder.tools.modules import TorchMultiHeadAttention
from autograder.tools.timing import time_interleaved


@pytest.mark.parametrize("name", heads_timing.IMPLEMENTATIONS)
@pytest.mark.parametrize("bias", [True, False])
def test_implementations_equal_pytorch(name, bias):
    torch.manual_seed(0)
    mha = TorchMultiHeadAttention(24, 4, bias=bias).double()
    x = torch.randn(2, 7, 24, dtype=torch.float64)  # (B, T, C)
    torch.testing.assert_close(heads_timing.IMPLEMENTATIONS[name](x, mha), mha(x)[0])


def test_quick_run_prints_both_sweeps_and_writes_json(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert heads_timing.main(["--quick", "--repeats", "1", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "## by heads" in printed and "## by length" in printed
    results = json.loads(out.read_text())
    by_heads = results["by_heads"]
    assert [r["nh"] for r in by_heads] == [1, 2, 4]
    assert [r["big_ops"]["loop"] for r in by_heads] == [6, 11, 21]  # 5·nh + 1
    assert {r["big_ops"]["batched"] for r in by_heads} == {6}
    assert {r["big_ops"]["fused"] for r in by_heads} == {5}  # 4 projections + 1 fused call
    assert all(t > 0 for r in by_heads + results["by_length"] for t in r["median_s"].values())


def test_time_interleaved_warms_up_then_rotates_the_order():
    calls = []
    fns = {name: (lambda name=name: calls.append(name)) for name in "abc"}
    times = time_interleaved(fns, repeats=3, warmup=2)
    assert calls[:6] == list("aabbcc")  # warm-up, untimed
    assert calls[6:] == list("abcbcacab")  # each round starts one later
    assert {name: len(t) for name, t in times.items()} == {"a": 3, "b": 3, "c": 3}
    assert all(s >= 0 for t in times.values() for s in t)
