"""Long commands of the slow tier, started in the background when collection ends.

The fast tier keeps one core busy; a ``grade`` run about 1.7 of the two, and a ``check`` that
waits out time limits almost none. So each long command whose tests are collected starts as soon
as collection is over (``conftest.pytest_collection_finish``), and the fixture of the same name
waits for it: the fast tier and the waiting overlap the work instead of following it.

A job is registered with :func:`job`: a function that gets an empty folder and returns its
:class:`Job`. The tests that read a job run first in the slow tier (``conftest._tier``), so no
other ``grade`` run is ever beside the class run's (two at once would share the sandbox's kernel
uids).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

STARTERS: dict[str, Callable[[Path], Job]] = {}  # fixture name -> its starter
_started: dict[str, Job] = {}


def job(name: str):
    """Register ``starter(folder) -> Job`` as the background job of fixture ``name``."""

    def register(starter):
        STARTERS[name] = starter
        return starter

    return register


class Job:
    """A command started now and read later; its output goes to files (a pipe would fill up and
    stop it). ``seconds`` is its own running time, from start to exit."""

    def __init__(self, argv: list[str], folder: Path, cwd: Path, env: dict):
        self.folder, self.argv = folder, argv
        self._out = open(folder / "stdout", "w+")
        self._err = open(folder / "stderr", "w+")
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=self._out, stderr=self._err, start_new_session=True
        )
        self.seconds: float | None = None
        self._done: subprocess.CompletedProcess | None = None

    def wait(self, timeout: float = 1800) -> subprocess.CompletedProcess:
        if self._done is None:
            returncode = self.process.wait(timeout=timeout)
            self.seconds = time.monotonic() - self.started
            self._out.seek(0)
            self._err.seek(0)
            self._done = subprocess.CompletedProcess(
                self.argv, returncode, self._out.read(), self._err.read()
            )
        return self._done

    def stop(self) -> None:
        """Stop the command if it still runs (an interrupted session), with all it started."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self._out.close()
        self._err.close()


def start(name: str) -> Job:
    """Start the job of fixture ``name`` unless it has started; return it."""
    if name not in _started:
        _started[name] = STARTERS[name](Path(tempfile.mkdtemp(prefix=f"mha-{name}-")))
    return _started[name]


def stop_all() -> None:
    while _started:
        _, running = _started.popitem()
        running.stop()
        shutil.rmtree(running.folder, ignore_errors=True)
