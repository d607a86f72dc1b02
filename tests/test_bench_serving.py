"""The serving benchmark runs tiny and is deterministic; its two simulations count what they say."""

import json

import pytest

from autograder.bench import serving
from autograder.tools.nb09_serving_sim import kv_slots, lognormal_lengths, simulate


def test_tiny_run_is_deterministic_and_reports_both_parts(tmp_path, capsys):
    runs = []
    for name in ("a.json", "b.json"):
        out = tmp_path / name
        assert serving.main(["--quick", "--seed", "3", "--json", str(out)]) == 0
        runs.append(json.loads(out.read_text()))
    assert runs[0] == runs[1]
    printed = capsys.readouterr().out
    assert "## KV memory" in printed and "## batching" in printed
    memory, batching = runs[0]["memory"], runs[0]["batching"]
    assert memory["reserved"]["contiguous"] == 8 * serving.MAX_LEN
    assert memory["reserved"]["paged, bs=1"] == memory["used"]
    assert batching["static"]["tokens"] == batching["continuous"]["tokens"]
    assert batching["continuous"]["steps"] <= batching["static"]["steps"]


def test_slots_count_whole_blocks():
    slots = kv_slots([1, 16, 17], max_len=64, block_sizes=[1, 16])
    assert (slots.used, slots.contiguous) == (34, 192)
    assert slots.paged == {1: 34, 16: 16 + 16 + 32}
    assert slots.wasted(68) == pytest.approx(50.0)


def test_schedules_by_hand():
    # two slots, outputs 1, 4, 2, 2: static runs [1, 4] for 4 steps, then [2, 2] for 2
    static = simulate([1, 4, 2, 2], 2, "static")
    assert static.tokens_per_step == [2, 1, 1, 1, 2, 2]
    # continuous: request 3 takes the slot request 1 frees after step 1, request 4 the one
    # request 3 frees after step 3
    continuous = simulate([1, 4, 2, 2], 2, "continuous")
    assert continuous.tokens_per_step == [2, 2, 2, 2, 1]
    assert static.tokens == continuous.tokens == 9
    assert static.padding == pytest.approx(100 * (1 - 9 / 12))
    assert continuous.throughput == pytest.approx(9 / 5)
    with pytest.raises(ValueError, match="policy"):
        simulate([1], 1, "greedy")


def test_lengths_are_seeded_and_capped():
    assert lognormal_lengths(50, 300, 1.0, 400, seed=1) == lognormal_lengths(50, 300, 1.0, 400, 1)
    assert all(1 <= n <= 400 for n in lognormal_lengths(200, 300, 2.0, 400))
