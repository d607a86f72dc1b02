"""Shared helpers for the test suite."""

import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import background
import cpu_account
import pytest

from autograder import paths

# First, before anything imports Triton (torch's flop counter can): Triton reads its mode once,
# so a test file run alone after one that imported it first saw compiled, not interpreted, kernels.
from autograder.tools import triton_support  # noqa: F401  (sets TRITON_INTERPRET on a CPU machine)

REPO = paths.REPO_ROOT

# This machine's environment sets PYTHONDONTWRITEBYTECODE: every Python process the suite starts
# (check, grade's workers, nbgrader's commands, kernels outside the sandbox) then compiled the
# course's own modules from source again. The suite writes bytecode (git ignores __pycache__).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


NO_IRI_GRAMMAR = Path(__file__).with_name("no_iri_grammar")  # see its module's docstring


def _environment() -> dict:
    """This process's environment with this environment's tools first on PATH, and without
    jsonschema's IRI grammar (:data:`NO_IRI_GRAMMAR`)."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(NO_IRI_GRAMMAR), env.get("PYTHONPATH")]))
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
    diagnosis (the one copy: ``test_mistakes`` and module-specific tests share it). The run is
    :func:`mistakes.outcome`'s, made once per session."""
    from mistakes import outcome

    from autograder.checks import CheckFailure

    result = outcome(mistake.check, mistake.impl, run)
    assert result.failure and issubclass(result.failure, CheckFailure), result
    message = result.message
    assert mistake.diagnosis in message, message
    assert "\n" not in message and message.endswith("."), message
    assert "tensor(" not in message, message  # shapes only, never values


@pytest.fixture(scope="session")
def first_notebook() -> str:
    ids = paths.notebook_ids()
    assert ids, "no notebooks in solutions/"
    return ids[0]


def autograder_job(
    folder: Path, *args: str, nice: int = background.NICE, wrapper: tuple = ()
) -> background.Job:
    """``python -m autograder ARGS`` started now, read later (:class:`background.Job`); with
    ``wrapper``, as the arguments of that command."""
    argv = [*wrapper, sys.executable, "-m", "autograder", *args]
    return background.Job(argv, folder, REPO, _environment(), nice=nice)


def _tier(item) -> tuple:
    """The fast tier first, then the rest of the slow tier, both while the background jobs run;
    last the tests that read a job, in the order the jobs start (by then most have ended)."""
    jobs = set(getattr(item, "fixturenames", ())) & set(background.STARTERS)
    if jobs:
        return (2, min(background.STARTERS[n].rank for n in jobs))
    return (1, 0) if item.get_closest_marker("slow") else (0, 0)


# Test modules that run in a pytest process of their own, as a background job, when a session
# also collects the test that reads that job (fixture name -> module): their tests are deselected
# here. The browser module is one long chain of waits on one Chromium, JupyterLab and its kernels
# (about 210 s, under a core busy): in this process it was the slow tier's critical path, and the
# other jobs had ended 60 s before it did.
MODULE_JOBS = {"explorer_browser": "test_explorer_browser.py"}


def pytest_collection_modifyitems(config, items):
    used = {n for item in items for n in getattr(item, "fixturenames", ())}
    moved = {MODULE_JOBS[n] for n in used & MODULE_JOBS.keys()}
    if moved:
        config.hook.pytest_deselected(items=[i for i in items if i.path.name in moved])
        items[:] = [i for i in items if i.path.name not in moved]
    items.sort(key=_tier)  # stable: each tier keeps the files' order


# The cycle collector in this process: what collection imported and built (torch, the catalogue,
# some 4,500 test items) lives to the end, so it is frozen out of every later collection, and the
# youngest generation is collected every 50,000 allocations instead of 700. On test_mistakes and
# test_checks_rope, time in the collector fell from 4.4 to 2.0 s of about 60 CPU-s.
GC_THRESHOLD = (50_000, 20, 10)


def pytest_collection_finish(session):
    if session.config.option.collectonly:
        return
    used = {n for item in session.items for n in getattr(item, "fixturenames", ())}
    background.queue(used & set(background.STARTERS))
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)


def pytest_sessionfinish(session):
    background.stop_all()


def pytest_unconfigure(config):
    cpu_account.close()


@background.job("class_run", cores=2, rank=0)
def _start_class_run(folder: Path) -> background.Job:
    from hostile import class_run

    return class_run.start(folder, autograder_job)


@pytest.fixture(scope="session")
def class_run():
    """The session's one ``grade`` run of every notebook's control and attacks
    (:mod:`hostile.class_run`), shared by the hostile-replay, trust-boundary and validate tests:
    a background job, started when collection ended."""
    from hostile.class_run import read

    if not paths.notebook_ids():
        pytest.skip("no notebooks in solutions/")
    return read(background.start("class_run"))


def _exchange_term(stack):
    import exchange_class

    return exchange_class.run_term(stack.enter_context(exchange_class.exchange_class()))


@background.job("exchange_term", cores=0.5, rank=12)
def _start_exchange_term(folder: Path) -> background.ThreadJob:
    return background.ThreadJob(_exchange_term, folder)


@pytest.fixture(scope="session")
def exchange_term():
    """One small term through nbgrader's exchange, with Unix users (:mod:`exchange_class`),
    shared by the exchange test and the formgrader's browser test: a background job (a thread),
    whose accounts are removed when the session ends."""
    return background.start("exchange_term").wait()


@background.job("explorer_browser", cores=0.9, rank=1)
def _start_explorer_browser(folder: Path) -> background.Job:
    """``pytest tests/test_explorer_browser.py``, at nice 0: its waits on the page have time
    limits. Without ``MHA_CPU_TABLE``: that file is this session's."""
    env = _environment()
    env.pop("MHA_CPU_TABLE", None)
    module = str(REPO / "tests" / MODULE_JOBS["explorer_browser"])
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", module]
    return background.Job(argv, folder, REPO, env, nice=0)


@pytest.fixture(scope="session")
def explorer_browser() -> subprocess.CompletedProcess:
    """The browser module's own pytest run (:data:`MODULE_JOBS`)."""
    return background.start("explorer_browser").wait()


_cpu: dict[str, float] = {}  # test id -> its CPU seconds (:mod:`cpu_account`)
_spans: dict[str, tuple] = {}  # test id -> (start, end), seconds into the session

_tiers: dict[tuple, list[float]] = {}  # tier -> [first start, last end], seconds into the session
_began = time.monotonic()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Each test's CPU seconds (setup, call, teardown; with every child process that ended in
    it, background jobs in the test that waited for them): the suite's cost is CPU, not the
    wall time of one machine. And when each tier ran, for the timeline."""
    began, started = cpu_account.seconds(), time.monotonic() - _began
    if _tier(item)[0] == 2:  # from here on this process mostly waits for the jobs
        background.tests_wait()
    yield
    _cpu[item.nodeid] = cpu_account.seconds() - began
    ended = time.monotonic() - _began
    _spans[item.nodeid] = (round(started, 1), round(ended, 1))
    _tiers.setdefault(_tier(item)[:1], [started, started])[1] = ended


def pytest_terminal_summary(terminalreporter):
    if not _cpu:
        return
    jobs = background.started()
    job_cpu = {n: cpu_account.seconds(j.cpu_group) for n, j in jobs.items() if j.cpu_group}
    total = sum(_cpu.values()) + sum(job_cpu.values())
    write = terminalreporter.write_line
    terminalreporter.write_sep("=", f"CPU seconds ({cpu_account.KIND}): {total:.0f} in all")
    for nodeid, seconds in sorted(_cpu.items(), key=lambda kv: -kv[1])[:15]:
        write(f"{seconds:7.1f}  {nodeid}")
    files: dict[str, float] = {}
    for nodeid, seconds in _cpu.items():
        files[nodeid.split("::")[0]] = files.get(nodeid.split("::")[0], 0) + seconds
    write("by file:")
    for name, seconds in sorted(files.items(), key=lambda kv: -kv[1])[:12]:
        write(f"{seconds:7.1f}  {name}")
    names = {(0,): "fast tier", (1,): "slow tier", (2,): "tests reading background jobs"}
    terminalreporter.write_sep("=", "timeline (seconds into the session)")
    for tier, (start, end) in sorted(_tiers.items()):
        write(f"{start:7.0f} -{end:5.0f}  {names[tier]}")
    for name, job in jobs.items():
        start, seconds = job.started - _began, job.seconds
        end = f"{start + seconds:5.0f}" if seconds is not None else "  ..."
        cpu = f", {job_cpu[name]:.0f} CPU-s" if name in job_cpu else ""
        write(f"{start:7.0f} -{end}  job {name} ({job.cores} cores{cpu})")
    wall = time.monotonic() - _began
    terminalreporter.write_sep("=", f"suite: {total:.0f} CPU-s, {wall:.0f} s wall-clock")
    if os.environ.get("MHA_CPU_TABLE"):  # every test's and job's CPU-s, for a closer look
        table = {"tests": _cpu, "spans": _spans, "jobs": job_cpu, "wall": wall}
        Path(os.environ["MHA_CPU_TABLE"]).write_text(json.dumps(table, indent=1))
