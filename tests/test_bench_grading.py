"""Smoke test of the grading benchmark at tiny size: it runs both ways and the scores agree."""

import json
import sys

import pytest

from autograder import paths
from conftest import run

pytestmark = pytest.mark.slow


def test_quick_benchmark_runs_both_ways_and_agrees(tmp_path):
    if "01_attention_from_scratch" not in paths.notebook_ids():
        pytest.skip("notebook 01 is not in solutions/")
    report = tmp_path / "report.json"
    done = run(
        [sys.executable, "-m", "autograder.bench.grading", "--quick", "--report", str(report)]
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ratio:" in done.stdout and "serial nbgrader autograde" in done.stdout
    numbers = json.loads(report.read_text())
    assert numbers["submissions"] == 2 and numbers["disagreements"] == []
    assert numbers["baseline_s"] > 0 and numbers["grade_s"] > 0
