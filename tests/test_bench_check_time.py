"""Smoke test of the check benchmark: one run of notebook 01, full marks, a figure reported."""

import json
import sys

import pytest

from conftest import run

pytestmark = pytest.mark.slow


def test_quick_benchmark_times_a_full_marks_check(tmp_path):
    report = tmp_path / "report.json"
    done = run(
        [sys.executable, "-m", "autograder.bench.check_time", "--quick", "--report", str(report)]
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (figures,) = json.loads(report.read_text()).values()
    assert figures["runs"] == 1 and figures["median_s"] > 0
