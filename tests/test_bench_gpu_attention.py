"""The GPU-attention benchmark runs end to end at tiny size (in Triton's interpreter on a CPU)."""

import csv
import sys

import pytest

from autograder.tools import triton_support
from conftest import run


@pytest.mark.slow
def test_quick_benchmark_writes_its_figures(tmp_path):
    result = run(
        [sys.executable, "-m", "autograder.bench.gpu_attention", "--quick", "--out", str(tmp_path)]
    )
    assert result.returncode == 0, result.stdout + result.stderr
    if not triton_support.AVAILABLE:
        assert triton_support.SKIP_MESSAGE in result.stdout
        return
    with (tmp_path / "gpu_attention_quick.csv").open(encoding="utf-8") as f:
        checks = list(csv.DictReader(f))
    assert len(checks) == 8 and all(row["ok"] == "True" for row in checks), checks
    with (tmp_path / "gpu_attention.csv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {row["method"] for row in rows} == {"triton (notebook)", "sdpa", "naive"}
    assert all(float(row["tflops"]) >= 0 for row in rows), rows
    assert (tmp_path / "gpu_attention.png").stat().st_size > 10_000
