"""A forkserver for warm kernels, run inside a worker's sandbox: ``python -m ...zygote MODULES``.

Importing torch, matplotlib and ipykernel costs ~3 s of CPU per kernel, about half of grading a
notebook. This process imports them once; each kernel is a fork of it that then starts
ipykernel with the grader's connection file. It reads one JSON request per line on stdin and
answers one JSON line on stdout; every kernel it forks gets stdin/stdout on /dev/null, so
learner code can neither read nor forge the protocol.

Between two notebooks (``reset``) it kills every process of its uid in the sandbox, reaps them
(it is their subreaper), and empties ``/tmp`` and the working folder, so nothing of one learner
reaches the next: all that stays is what the grader bound there read-only (matplotlib's font
list, Python), never a name a learner could also write (a learner's own ``fontlist-x.json``).
It is not dumpable, so a kernel cannot ptrace it or write its memory.
"""

from __future__ import annotations

import ctypes
import errno
import gc
import importlib
import json
import os
import random
import resource
import shutil
import signal
import stat
import sys
import time
from pathlib import Path

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 1, 4, 36
KEEP_IN_TMP = {"mpl", "home", "ipython"}
# Modules that hook into IPython when imported, if a shell exists: imported here before any
# shell does, so each kernel runs their hook once its shell is up (as a fresh import would).
IMPORT_HOOKS = {
    "matplotlib_inline.backend_inline": "_enable_matplotlib_integration",
    "ipywidgets": "_handle_ipython",
}


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(option, value, 0, 0, 0)


def _force_remove(path: Path) -> None:
    def retry(func, name, _exc):
        try:
            os.chmod(os.path.dirname(name), 0o700)
            os.chmod(name, stat.S_IRWXU)
        except OSError:
            pass
        func(name)

    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, onerror=retry)
    else:
        path.unlink(missing_ok=True)


def _empty(folder: Path, keep: set[str] = frozenset(), protected: tuple[Path, ...] = ()) -> None:
    """Remove everything in ``folder`` except names in ``keep`` and the grader's bind mounts."""
    for child in folder.iterdir():
        if child.name in keep or child in protected:
            continue
        if any(child in p.parents for p in protected):
            _empty(child, protected=protected)
        else:
            _force_remove(child)


class Zygote:
    def __init__(self, workroot: Path, protected: tuple[Path, ...]):
        self.workroot = workroot
        self.protected = protected
        self.children: dict[int, int | None] = {}

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.children:
                self.children[pid] = os.waitstatus_to_exitcode(status)

    def _others(self) -> list[int]:
        me = os.getpid()
        return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]

    def reset(self) -> dict:
        """Kill every other process of this uid here, reap them, empty the writable folders."""
        self._reap()
        leftover = [p for p in self._others() if p not in self.children and not _zombie(p)]
        for _ in range(50):
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._reap()
            if not self._others():
                break
            time.sleep(0.05)
        strays = self._others()
        self.children.clear()
        _empty(Path("/tmp"), KEEP_IN_TMP, self.protected)
        for name in KEEP_IN_TMP:  # the grader's font list is a protected bind: nothing else stays
            _empty(Path("/tmp") / name, protected=self.protected)
        _empty(self.workroot, protected=self.protected)
        strays = [_describe(pid) for pid in strays]
        return {"clean": not strays, "strays": strays, "killed": len(leftover)}

    def spawn(self, request: dict) -> dict:
        cwd = Path(request["cwd"])
        cwd.mkdir(parents=True, exist_ok=True)
        for name, src in request.get("files", {}).items():
            dest = cwd / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
        connection = Path("/tmp/.kernel-connection.json")
        connection.write_text(json.dumps(request["connection"]))
        pid = os.fork()
        if pid == 0:
            _become_kernel(request, connection)
        self.children[pid] = None
        return {"pid": pid}

    def poll(self, pid: int) -> dict:
        self._reap()
        return {"returncode": self.children.get(pid, -9)}

    def signal(self, pid: int, signum: int) -> dict:
        for send in (os.killpg, os.kill):
            try:
                send(pid, signum)
                break
            except OSError:
                continue
        return {"ok": True}


def _zombie(pid: int) -> bool:
    try:
        return "\nState:\tZ" in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True


def _describe(pid: int) -> str:
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return str(pid)
    fields = dict(line.split(":\t", 1) for line in status if ":\t" in line)
    return (
        f"{pid} {fields.get('Name', '?')} {fields.get('State', '?')} uid {fields.get('Uid', '?')}"
    )


def _replay_import_hooks() -> None:
    for module, hook in IMPORT_HOOKS.items():
        if module in sys.modules:
            getattr(sys.modules[module], hook)()


def _exception_for_history(exception: BaseException, *_args, **_kwargs) -> dict:
    """What the kernel's history keeps of a cell's exception: its name and message.

    IPython 9 formats each exception twice, once to show it and once more for the history, which
    only ``%notebook`` (exporting the history) reads. Formatting is most of what a traceback
    costs (``inspect`` walks every loaded module for each frame): in a py-spy profile of grading
    the ten untouched releases, the second formatting was 2.0 of the kernels' 4.6 CPU-s in
    tracebacks. What the learner sees is the first, unchanged."""
    return {"ename": type(exception).__name__, "evalue": str(exception), "traceback": []}


def _become_kernel(request: dict, connection: Path) -> None:
    """In the forked child: drop the protocol, apply the kernel's limits, become ipykernel."""
    try:
        zygote = os.getppid()
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # a kernel never outlives its forkserver
        if os.getppid() != zygote:
            os._exit(1)
        os.setsid()
        _prctl(PR_SET_DUMPABLE, 1)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.closerange(3, 4096)
        cpu = int(request["cpu_s"])
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        os.chdir(request["cwd"])
        os.environ.update(request.get("env", {}))
        random.seed()
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        from ipykernel.kernelapp import IPKernelApp

        app = IPKernelApp.instance()
        app.initialize(["-f", str(connection), *request.get("argv", [])])
        if hasattr(app.shell, "_format_exception_for_storage"):
            app.shell._format_exception_for_storage = _exception_for_history
        _replay_import_hooks()
        app.start()
    except BaseException:  # noqa: B036 (a forked child must never return into the server loop)
        os._exit(1)
    os._exit(0)


def _inside_sandbox() -> bool:
    """``kill(-1)`` is only safe as an unprivileged uid in bwrap's own PID namespace."""
    try:
        init = Path("/proc/1/comm").read_text().strip()
    except OSError:
        return False
    return init == "bwrap" and os.getuid() != 0


def _decide_triton_mode() -> None:
    """Decide Triton's mode as notebook 06's ``triton_support`` would, before anything imports it.

    Warm modules can import Triton indirectly (``torch._dynamo`` does), and Triton fixes the
    mode of its own ``@jit`` library functions (``tl.max``, ``tl.sum``…) at import: imported
    without ``TRITON_INTERPRET`` on a machine with no GPU, a forked kernel's interpreted kernels
    would fail on their first ``tl.max``.
    """
    import torch

    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"


def import_warm(names: list[str]) -> list[str]:
    """Import each of ``names``; what failed, and why. ``from X import f`` lists ``X.f`` as well
    (``f`` may be a submodule): once ``X`` is imported, ``X.f`` that is no module is no failure."""
    failed = []
    for name in names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name != name or name.rpartition(".")[0] not in sys.modules:
                failed.append(f"{name}: {type(err).__name__}")
        except Exception as err:  # a missing optional module only makes kernels colder
            failed.append(f"{name}: {type(err).__name__}")
    return failed


def main() -> None:
    if not _inside_sandbox():
        raise SystemExit("the zygote runs only inside its bwrap sandbox, as an unprivileged uid")
    modules = json.loads(sys.argv[1])
    workroot = Path(sys.argv[2])
    protected = tuple(Path(p) for p in json.loads(sys.argv[3]))
    requests = os.fdopen(os.dup(0), "r")
    replies = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    # Imports make long-lived objects only: one collection after them, not dozens while they run
    # (about 0.3 CPU-s). Then frozen, as Python's gc documentation advises before fork(): each
    # kernel's collections walk only what the kernel made, never the inherited heap (torch's,
    # ipykernel's), whose pages they would also have copied by touching its objects' headers.
    gc.disable()
    _decide_triton_mode()
    failed = import_warm(modules)
    gc.enable()
    gc.collect()
    gc.freeze()
    _prctl(PR_SET_DUMPABLE, 0)
    zygote = Zygote(workroot, (workroot, *protected))
    replies.write(json.dumps({"ready": True, "failed": failed}) + "\n")
    replies.flush()
    for line in requests:
        request = json.loads(line)
        op = request["op"]
        try:
            if op == "spawn":
                reply = zygote.spawn(request)
            elif op == "poll":
                reply = zygote.poll(request["pid"])
            elif op == "signal":
                reply = zygote.signal(request["pid"], request["signum"])
            elif op == "reset":
                reply = zygote.reset()
            else:
                reply = {"error": f"unknown request {op!r}"}
        except OSError as err:
            reply = {"error": f"{type(err).__name__}: {err}", "errno": err.errno or errno.EIO}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


if __name__ == "__main__":
    main()
