"""Smoke test of the check benchmark: one run of notebook 01, full marks, a figure reported.

It runs as a background job (``tests/background.py``), beside the other tests."""

import json
import sys
from pathlib import Path

import background
import pytest

from autograder import paths
from conftest import REPO, _environment

pytestmark = pytest.mark.slow


@background.job("check_bench", cores=0.5, rank=17)
def _start_check_bench(folder: Path) -> background.Job:
    report = str(folder / "report.json")
    argv = [sys.executable, "-m", "autograder.bench.check_time", "--quick", "--report", report]
    return background.Job(argv, folder, REPO, _environment())


@pytest.fixture
def check_bench():
    if not paths.notebook_ids():
        pytest.skip("no notebooks in solutions/")
    job = background.start("check_bench")
    return job.wait(), job.folder / "report.json"


def test_quick_benchmark_times_a_full_marks_check(check_bench):
    done, report = check_bench
    assert done.returncode == 0, done.stdout + done.stderr
    (figures,) = json.loads(report.read_text()).values()
    assert figures["runs"] == 1 and figures["median_s"] > 0
