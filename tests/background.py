"""Long commands of the slow tier, run in the background beside the tests, a few at a time.

The suite's cost is CPU, and the machine has two cores: the tests in this process keep one busy,
so each long command whose tests are collected is queued when collection ends
(``conftest.pytest_collection_finish``) and a scheduler thread starts them, longest first, as
cores free up: at any time the running jobs ask for at most :data:`CAPACITY` cores (a job that
asks for more runs alone), and one more once the tests here only read jobs (:func:`tests_wait`).
When the next job does not fit, the first later one that does starts.
The tests that read a job run last (``conftest._tier``), so by then it has usually ended; a
fixture that needs a job not yet started starts it at once.

A job is registered with :func:`job`: a function that gets an empty folder and returns its
:class:`Job`, the cores it keeps busy on average (its CPU-s over its seconds in a fresh-clone
run's timeline: most jobs wait on kernels, servers and their own limits half the time, and
counting each as a whole core left the machine 15% idle while they ran), and its rank (lower
starts first). ``grade`` runs may
overlap: each claims kernel uids of its own (``isolation.claim_uids``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cpu_account

CAPACITY = len(os.sched_getaffinity(0))  # cores the background jobs may keep busy together
# The tests in this process are the critical path: the jobs yield the CPU to them and take the
# rest (a job whose grading limits are tight asks for nice 0). Mild, so that beside other busy
# processes (the load test's CPU hogs) the jobs still get their share.
NICE = 5


@dataclass(frozen=True)
class Starter:
    start: Callable[[Path], Job]
    cores: float  # how many cores it keeps busy on average (0: it mostly waits)
    rank: int  # lower starts first: the longest jobs


STARTERS: dict[str, Starter] = {}  # fixture name -> its starter
_started: dict[str, Job] = {}
_history: dict[str, Job] = {}  # every job started, kept for the timeline after stop_all
_queue: list[str] = []
_lock = threading.RLock()


def job(name: str, cores: float = 1, rank: int = 50):
    """Register ``starter(folder) -> Job`` as the background job of fixture ``name`` (the job is
    queued, and its readers ordered, by that fixture's name: the two must be the same)."""

    def register(starter):
        STARTERS[name] = Starter(starter, cores, rank)
        return starter

    return register


class Job:
    """A command started now and read later; its output goes to files (a pipe would fill up and
    stop it). ``seconds`` is its own running time, from start to exit."""

    def __init__(self, argv: list[str], folder: Path, cwd: Path, env: dict, nice: int = NICE):
        self.folder, self.argv = folder, argv
        self.cpu_group = cpu_account.group(folder.name)
        self._out = open(folder / "stdout", "w+")
        self._err = open(folder / "stderr", "w+")
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdout=self._out,
            stderr=self._err,
            start_new_session=True,
            preexec_fn=lambda: (os.nice(nice), cpu_account.join(self.cpu_group)),
        )
        self.seconds: float | None = None
        self.cores = 1
        self._done: subprocess.CompletedProcess | None = None

    def wait(self, timeout: float = 1800) -> subprocess.CompletedProcess:
        if self._done is None:
            returncode = self.process.wait(timeout=timeout)
            if self.seconds is None:  # else the scheduler saw it end first (the timeline's end)
                self.seconds = time.monotonic() - self.started
            self._out.seek(0)
            self._err.seek(0)
            self._done = subprocess.CompletedProcess(
                self.argv, returncode, self._out.read(), self._err.read()
            )
        return self._done

    def running(self) -> bool:
        """Whether the command still runs; an ended one is left for :meth:`wait` to reap (where
        CPU is counted without groups, so that it counts for the test that reads it)."""
        if self._done is not None or self.process.returncode is not None:
            return False
        try:
            ended = os.waitid(os.P_PID, self.process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # a test's wait() reaped it since the line above: it ended
            ended = True
        if ended is not None and self.seconds is None:
            self.seconds = time.monotonic() - self.started  # for the timeline; wait() refines it
        return ended is None

    def stop(self) -> None:
        """Stop the command if it still runs (an interrupted session), with all it started."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self._out.close()
        self._err.close()


class ThreadJob:
    """``work(stack)`` on a thread of its own, read later: for a sequence of commands with checks
    in between (nbgrader's exchange, its pipeline). The thread runs at :data:`NICE`, and so do the
    commands it starts; what it enters on ``stack`` is closed when the session ends."""

    def __init__(self, work: Callable[[contextlib.ExitStack], Any], folder: Path, nice: int = NICE):
        self.folder, self.cores, self.seconds = folder, 1, None
        self.cpu_group = cpu_account.group(folder.name)
        self.started = time.monotonic()
        self._stack = contextlib.ExitStack()
        self._result: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(work, nice), daemon=True)
        self._thread.start()

    def _run(self, work, nice: int) -> None:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)  # this thread only
        cpu_account.join(self.cpu_group)
        try:
            self._result = work(self._stack)
        except BaseException as err:  # re-raised in the test that reads it
            self._error = err
        finally:
            self.seconds = time.monotonic() - self.started

    def running(self) -> bool:
        return self._thread.is_alive()

    def wait(self, timeout: float = 1800) -> Any:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"{self.folder.name} still runs after {timeout} s")
        if self._error is not None:
            raise self._error
        return self._result

    def stop(self) -> None:
        if not self._thread.is_alive():  # an interrupted session leaves it to the daemon's end
            self._stack.close()


def start(name: str) -> Job:
    """Start the job of fixture ``name`` now unless it has started; return it."""
    with _lock:
        if name not in _started:
            if name in _queue:
                _queue.remove(name)
            folder = Path(tempfile.mkdtemp(prefix=f"mha-{name}-"))
            _started[name] = STARTERS[name].start(folder)
            _started[name].cores = STARTERS[name].cores
            _history[name] = _started[name]
        return _started[name]


def started() -> dict[str, Job]:
    """The jobs started so far, by fixture name."""
    with _lock:
        return dict(_history)


def queue(names) -> None:
    """Start the jobs ``names`` in the background, longest first, as cores free up."""
    with _lock:
        _queue.extend(sorted(set(names) - set(_started), key=lambda n: STARTERS[n].rank))
    threading.Thread(target=_schedule, name="background-jobs", daemon=True).start()


def tests_wait() -> None:
    """The tests in this process have run out of work of their own (they read the jobs now):
    from now on the jobs may keep one core more busy, the one this process leaves idle."""
    global _capacity
    _capacity = CAPACITY + 1


_capacity = CAPACITY


def _schedule() -> None:
    """Start the queued jobs as cores free up; then watch the rest end (for the timeline)."""
    while True:
        with _lock:
            running = [j for j in _started.values() if j.running()]
            if not _queue and not running:
                return
            busy = sum(j.cores for j in running)
            fits = [n for n in _queue if busy == 0 or busy + STARTERS[n].cores <= _capacity]
            if fits:  # the first in rank order that fits: a 1-core job beside another
                start(fits[0])
                continue
        time.sleep(0.5)


def stop_all() -> None:
    with _lock:
        _queue.clear()
    while _started:
        _, running = _started.popitem()
        running.stop()
        shutil.rmtree(running.folder, ignore_errors=True)
