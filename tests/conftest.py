"""Shared helpers for the test suite."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import paths

REPO = paths.REPO_ROOT


def run(args: list[str], cwd: Path = REPO, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run a command with this environment's tools first on PATH; capture text output."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def autograder(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "autograder", *args], cwd=cwd)


@pytest.fixture(scope="session")
def first_notebook() -> str:
    ids = paths.notebook_ids()
    assert ids, "no notebooks in solutions/"
    return ids[0]
