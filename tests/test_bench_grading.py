"""Smoke test of the grading benchmark at tiny size: it runs both ways and the scores agree.

It runs as a background job (``tests/background.py``), beside the other tests."""

import json
import sys
from pathlib import Path

import background
import pytest

from autograder import paths
from conftest import REPO, _environment

pytestmark = pytest.mark.slow
NB = "01_attention_from_scratch"


def _start_bench(folder: Path) -> background.Job:
    argv = [sys.executable, "-m", "autograder.bench.grading", "--quick"]
    return background.Job(
        [*argv, "--report", str(folder / "report.json")], folder, REPO, _environment()
    )


if NB in paths.notebook_ids():
    background.job("quick_bench", cores=1, rank=16)(_start_bench)


@pytest.fixture
def quick_bench():
    if NB not in paths.notebook_ids():
        pytest.skip("notebook 01 is not in solutions/")
    job = background.start("quick_bench")
    return job.wait(), job.folder / "report.json"


def test_quick_benchmark_runs_both_ways_and_agrees(quick_bench):
    done, report = quick_bench
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ratio:" in done.stdout and "serial nbgrader autograde" in done.stdout
    numbers = json.loads(report.read_text())
    assert numbers["submissions"] == 2 and numbers["disagreements"] == []
    assert numbers["baseline_s"] > 0 and numbers["grade_s"] > 0
