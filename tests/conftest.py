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


def ids(x) -> str:
    """A readable test id for a parametrized function or value."""
    return getattr(x, "__name__", None) or str(x)


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models and tensors: one thread is much faster than several on a shared CPU."""
    from autograder.torch_helpers import one_thread

    with one_thread():
        yield


def assert_diagnosed(mistake, **run) -> None:
    """``mistake`` fails its check under ``run`` with one learner-facing line containing the
    diagnosis (the one copy: ``test_mistakes`` and module-specific tests share it)."""
    from autograder.checks import CheckFailure

    with pytest.raises(CheckFailure) as info:
        mistake.check(mistake.impl, **run)
    message = str(info.value)
    assert mistake.diagnosis in message, message
    assert "\n" not in message and message.endswith("."), message
    assert "tensor(" not in message, message  # shapes only, never values


@pytest.fixture(scope="session")
def first_notebook() -> str:
    ids = paths.notebook_ids()
    assert ids, "no notebooks in solutions/"
    return ids[0]


@pytest.fixture(scope="session")
def class_run(tmp_path_factory):
    """The session's one ``grade`` run of every notebook's control and attacks
    (:mod:`hostile.class_run`), shared by the hostile-replay and trust-boundary tests."""
    from hostile.class_run import grade_once

    if not paths.notebook_ids():
        pytest.skip("no notebooks in solutions/")
    return grade_once(tmp_path_factory.mktemp("class_run"), autograder)
