"""Worker processes for a grading run: start, feed, time out, replace.

Each worker is a process group of its own. A job that runs past its hard limit gets its whole
group killed (the worker, its forkserver, every kernel: bwrap's ``--die-with-parent`` takes the
sandboxes down with it) and an error result; a worker that crashes is replaced and its job tried
once more. Jobs are handed out one at a time, so a slow notebook never holds up the others, and a
worker keeps to one assignment while it has jobs (:func:`next_job`): each switch restarts its
forkserver in a fresh sandbox, about two seconds of CPU.

This module is the parent's side: it imports no grading machinery (no nbgrader, no torch).
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

START_TIMEOUT_S = 300


class PoolError(RuntimeError):
    """Workers cannot start at all: nothing can be graded here."""


@dataclass
class _Worker:
    index: int
    process: subprocess.Popen
    buffer: bytes = b""
    ready: bool = False
    job: dict | None = None
    deadline: float = 0.0
    failures: int = 0
    log: Path = field(default_factory=Path)
    assignment: str | None = None  # of its forkserver: its last job's, or the one it starts with


def next_job(pending: deque, current: str | None, taken: set) -> dict:
    """The job to give a free worker whose forkserver holds ``current``'s kernel package: the
    next of that assignment; else the next of the assignment with the most jobs left that no
    other worker holds (``taken``); else the next of the assignment with the most jobs left.
    ``pending`` keeps its order within each assignment."""
    left: dict[str, int] = {}
    for job in pending:
        left[job["assignment"]] = left.get(job["assignment"], 0) + 1
    if current not in left:
        free = [a for a in left if a not in taken] or list(left)
        current = max(free, key=lambda a: left[a])  # the first of the largest, in queue order
    job = next(j for j in pending if j["assignment"] == current)
    pending.remove(job)
    return job


class Pool:
    def __init__(self, size: int, config: Path, logs: Path, hard_limit_s: Callable[[dict], float]):
        self.size, self.config, self.logs = size, config, logs
        self.hard_limit_s = hard_limit_s
        self.selector = selectors.DefaultSelector()
        self.workers: dict[int, _Worker] = {}
        self.start_failures = 0
        self.homes: list[str] = []  # the assignment each worker's forkserver starts with

    def _spawn(self, index: int, failures: int = 0) -> _Worker:
        log = self.logs / f"worker-{index}.log"
        home = self.homes[index % len(self.homes)] if self.homes else ""
        with open(log, "ab") as err:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-P",  # never the current folder on sys.path: grade may be run inside a
                    "-m",  # learner's folder, whose files must not stand in for the grader's
                    "autograder.grader.worker",
                    str(self.config),
                    str(index),
                    home,
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                start_new_session=True,
            )
        os.set_blocking(process.stdout.fileno(), False)
        worker = _Worker(index, process, failures=failures, log=log, assignment=home or None)
        worker.deadline = time.monotonic() + START_TIMEOUT_S
        self.selector.register(process.stdout, selectors.EVENT_READ, worker)
        self.workers[index] = worker
        return worker

    def _kill(self, worker: _Worker) -> None:
        try:
            os.killpg(worker.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        worker.process.wait()
        try:
            self.selector.unregister(worker.process.stdout)
        except (KeyError, ValueError):
            pass
        for pipe in (worker.process.stdin, worker.process.stdout):
            pipe.close()

    def _log_tail(self, worker: _Worker) -> str:
        try:
            lines = worker.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(lines[-3:])

    def _send(self, worker: _Worker, job: dict) -> None:
        worker.job, worker.assignment = job, job["assignment"]
        worker.deadline = time.monotonic() + self.hard_limit_s(job)
        worker.process.stdin.write((json.dumps(job) + "\n").encode())
        worker.process.stdin.flush()

    def run(
        self,
        jobs: list[dict],
        on_done: Callable[[dict, dict], None],
        on_lost: Callable[[dict, str], None],
    ) -> None:
        """Grade ``jobs``; ``on_done(job, reply)`` per finished job, ``on_lost(job, why)`` per
        job that could not finish (killed at its hard limit, or its worker crashed twice)."""
        pending = deque(jobs)
        retried: set[str] = set()
        self.homes = list(dict.fromkeys(j["assignment"] for j in jobs))
        for i in range(min(self.size, len(jobs))):
            self._spawn(i)
        try:
            while pending or any(w.job for w in self.workers.values()):
                if not self.workers:
                    raise PoolError("no worker could start")
                for worker in [w for w in self.workers.values() if w.ready and not w.job]:
                    if pending:
                        taken = {w.assignment for w in self.workers.values() if w is not worker}
                        self._send(worker, next_job(pending, worker.assignment, taken))
                for key, _ in self.selector.select(timeout=1.0):
                    self._read(key.data, pending, retried, on_done, on_lost)
                now = time.monotonic()
                for worker in list(self.workers.values()):
                    if worker.process.poll() is not None:
                        self._lost(worker, "its worker process died", pending, retried, on_lost)
                    elif (worker.job or not worker.ready) and now > worker.deadline:
                        why = (
                            f"grading took longer than its hard limit of "
                            f"{self.hard_limit_s(worker.job):.0f} s; the worker was killed"
                            if worker.job
                            else "a worker did not start in time"
                        )
                        self._lost(worker, why, pending, retried, on_lost, retry=False)
                if not pending and not any(w.job for w in self.workers.values()):
                    break
        finally:
            self.close()

    def _read(self, worker, pending, retried, on_done, on_lost) -> None:
        try:
            chunk = os.read(worker.process.stdout.fileno(), 1 << 16)
        except BlockingIOError:
            return
        if not chunk:
            self._lost(worker, "its worker process exited", pending, retried, on_lost)
            return
        worker.buffer += chunk
        while b"\n" in worker.buffer:
            line, worker.buffer = worker.buffer.split(b"\n", 1)
            reply = json.loads(line)
            if not worker.ready:
                if not reply.get("ready"):
                    self._lost(
                        worker,
                        f"worker failed to start: {reply.get('error')}",
                        pending,
                        retried,
                        on_lost,
                    )
                    return
                worker.ready, worker.failures = True, 0
                continue
            job, worker.job = worker.job, None
            on_done(job, reply)

    def _lost(self, worker, why, pending, retried, on_lost, retry=True) -> None:
        job = worker.job
        tail = self._log_tail(worker)
        self._kill(worker)
        del self.workers[worker.index]
        if job is None:  # died while starting
            self.start_failures += 1
            if self.start_failures > 2 * self.size:
                raise PoolError(f"workers cannot start: {why}; last log lines: {tail}")
        elif retry and job["id"] not in retried:
            retried.add(job["id"])
            pending.appendleft(job)
        else:
            on_lost(job, why if not tail or "hard limit" in why else f"{why} ({tail[-300:]})")
        if pending or any(w.job for w in self.workers.values()) or job is not None:
            self._spawn(worker.index, worker.failures + 1)

    def close(self) -> None:
        for worker in list(self.workers.values()):
            try:
                worker.process.stdin.close()
            except OSError:
                pass
        deadline = time.monotonic() + 10
        for worker in list(self.workers.values()):
            try:
                worker.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            self._kill(worker)
        self.workers.clear()
