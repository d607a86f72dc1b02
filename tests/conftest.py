"""Shared helpers for the test suite."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autograder import paths

REPO = paths.REPO_ROOT


def _environment() -> dict:
    """This process's environment with this environment's tools first on PATH."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def run(args: list[str], cwd: Path = REPO, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run a command with this environment's tools first on PATH; capture text output."""
    return subprocess.run(
        args,
        cwd=cwd,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
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


def _start_autograder(args: list[str], log):
    command = [sys.executable, "-m", "autograder", *args]
    return subprocess.Popen(
        command, cwd=REPO, env=_environment(), stdout=log, stderr=log, start_new_session=True
    )


_CLASS_RUN = "class_run"
_running = {}  # the class run started in the background, once collection is over


def _tier(item) -> int:
    """0: the fast tier; 1: tests that read the class run; 2: the rest of the slow tier."""
    if _CLASS_RUN in getattr(item, "fixturenames", ()):
        return 1
    return 2 if item.get_closest_marker("slow") else 0


def pytest_collection_modifyitems(config, items):
    """The fast tier first, while the class run grades in the background; then the tests that
    read it, which wait for it; then every other slow test, none of them beside a ``grade`` run
    of the class run's (two runs at once would share the sandbox's kernel uids)."""
    items.sort(key=_tier)  # stable: each tier keeps the files' order


def pytest_collection_finish(session):
    if session.config.option.collectonly or not paths.notebook_ids():
        return
    if any(_tier(item) == 1 for item in session.items):
        from hostile.class_run import Running

        _running[_CLASS_RUN] = Running(_class_run_folder(), _start_autograder)


def _class_run_folder() -> Path:
    return Path(tempfile.mkdtemp(prefix="mha-class-run-"))


def pytest_sessionfinish(session):
    if _CLASS_RUN in _running:
        running = _running.pop(_CLASS_RUN)
        running.stop()
        shutil.rmtree(running.root, ignore_errors=True)


@pytest.fixture(scope="session")
def class_run():
    """The session's one ``grade`` run of every notebook's control and attacks
    (:mod:`hostile.class_run`), shared by the hostile-replay, trust-boundary and validate tests;
    started in the background when collection ended (``pytest_collection_finish``)."""
    if not paths.notebook_ids():
        pytest.skip("no notebooks in solutions/")
    if _CLASS_RUN not in _running:  # e.g. a test run from a debugger's own collection
        from hostile.class_run import Running

        _running[_CLASS_RUN] = Running(_class_run_folder(), _start_autograder)
    return _running[_CLASS_RUN].result()
