"""Sandboxed kernels for nbgrader's Execute step: cold (one bwrap per kernel) or warm (forked).

``SandboxKernelManager`` is given to nbclient as ``kernel_manager_class``. Without a forkserver it
starts the ``mha-sandbox`` kernelspec (:mod:`autograder.grader.launch`): a fresh sandbox per
kernel. With one (:class:`ZygoteServer`, one per worker, itself sandboxed), a kernel is a fork of a
process that has already imported torch: the same limits and view of the file system, ~3 s of CPU
less per notebook. Either way, zmq messages above a size cap are refused, so a kernel cannot make
the grader allocate gigabytes for one output; and its client is
:mod:`autograder.grader.kernel_channels`' (a reply whose wake-up was lost waits a second, not a
cell limit).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import zmq
from jupyter_client.provisioning.local_provisioner import LocalProvisioner
from traitlets import Integer, Unicode

from autograder import nbcell
from autograder.grader.isolation import (
    Isolation,
    Limits,
    bwrap_argv,
    font_files,
    kernel_env,
    prlimit_argv,
    python_binds,
)
from autograder.grader.kernel_channels import KernelManager
from autograder.grader.launch import visible_files
from autograder.grader.sockets import SOCKETS, fresh_runtime, remove_runtime, sockets_full

MAX_MESSAGE_BYTES = 64 * 1024**2
# A send to a kernel that no longer reads its sockets (its code wrote garbage into their file
# descriptors) blocked the grader for good: zmq waits for a peer forever. 5 s, then zmq.Again.
SEND_TIMEOUT_MS = 5_000
INLINE_BACKEND = "matplotlib_inline.backend_inline"
# ipykernel.debugger (debugpy): every kernel imports it when its shell starts, about 0.07 CPU-s
# each, which the class run's 157 kernels paid one by one.
BASE_WARM_MODULES = [
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
    "ipykernel.debugger",
    "numpy",
    "torch",
]
# Modules safe to import before IPython exists: no import-time hooks into the shell, or hooks
# the forkserver replays in each kernel (``zygote.IMPORT_HOOKS``). Anything else a notebook
# imports is imported by its kernel, as usual.
WARM_SAFE_PREFIXES = (
    "torch",
    "numpy",
    "scipy",
    "pandas",
    "math",
    "matplotlib",
    "ipywidgets",
    "autograder.checks",
    "autograder.tools",
)

# Modules whose import decides something from the kernel's environment, which the forkserver does
# not have: ``triton_support`` sets ``TRITON_INTERPRET`` and imports Triton, whose ``@triton.jit``
# then reads it. Imported in the forkserver, a kernel would inherit Triton but not the variable.
WARM_UNSAFE_PREFIXES = ("triton", "autograder.checks.nb06_gpu", "autograder.tools.triton_support")


class ZygoteError(RuntimeError):
    """The forkserver died or answered nonsense; the worker starts a new one."""


class ZygoteServer:
    """One warm forkserver in its own sandbox, driven over a pipe."""

    def __init__(
        self,
        iso: Isolation,
        limits: Limits,
        *,
        runtime: Path,
        inbox: Path,
        workroot: Path,
        font_cache: Path | None,
        uid: int | None,
        modules: list[str],
        log: Path,
    ):
        self.iso, self.limits = iso, limits
        self.runtime, self.inbox, self.workroot = runtime, inbox, workroot
        self.font_cache, self.uid, self.modules, self.log = font_cache, uid, modules, log
        self.process: subprocess.Popen | None = None
        self._ready = False
        self.last_strays: list[str] = []
        self.last_killed = 0
        self._lock = threading.Lock()

    def argv(self) -> list[str]:
        own_limits = dataclasses.replace(self.limits, cpu_s=24 * 3600)  # kernels get their own
        env = kernel_env(self.limits)
        sandbox = bwrap_argv(
            self.iso,
            self.limits,
            rw_dirs=(str(self.runtime),),  # the grader's; each kernel writes its sockets/ only
            ro_dirs=(str(self.inbox),),
            workdir=str(self.workroot),
            workdir_files={},
            font_cache=str(self.font_cache) if self.font_cache else None,
            uid=self.uid,
            env=env,
        )
        command = [sys.executable, "-m", "autograder.kernel.zygote"]
        command += [json.dumps(self.modules), str(self.workroot)]
        fonts = font_files(str(self.font_cache) if self.font_cache else None)
        protected = [str(self.runtime), str(self.inbox), *python_binds(self.limits), *fonts]
        command.append(json.dumps(protected))
        return prlimit_argv(self.iso, own_limits) + sandbox + command

    def launch(self) -> None:
        """Start the forkserver; it imports its modules while the caller does other work."""
        self.stop()
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                self.argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log
            )
        self._ready = False

    def wait_ready(self, timeout: float = 180) -> None:
        if self._ready:
            return
        reply = self._read(timeout)
        if not reply.get("ready"):
            raise ZygoteError(f"forkserver did not start: {reply}")
        if reply.get("failed"):  # its kernels import these themselves, inside their time limits
            print(f"forkserver started without {', '.join(reply['failed'])}", file=sys.stderr)
        self._ready = True

    def start(self, timeout: float = 180) -> None:
        self.launch()
        self.wait_ready(timeout)

    def _read(self, timeout: float) -> dict:
        assert self.process and self.process.stdout
        with selectors.DefaultSelector() as sel:
            sel.register(self.process.stdout, selectors.EVENT_READ)
            if not sel.select(timeout):
                raise ZygoteError(f"forkserver gave no answer in {timeout:g} s")
        line = self.process.stdout.readline()
        if not line:
            raise ZygoteError(f"forkserver exited ({self.process.poll()}); see {self.log}")
        return json.loads(line)

    def request(self, timeout: float = 60, **message) -> dict:
        with self._lock:
            return self._request(timeout, message)

    def _request(self, timeout: float, message: dict) -> dict:
        if not self.alive():
            raise ZygoteError("forkserver is not running")
        assert self.process and self.process.stdin
        try:
            self.process.stdin.write((json.dumps(message) + "\n").encode())
            self.process.stdin.flush()
        except OSError as err:
            raise ZygoteError(f"forkserver pipe closed: {err}") from None
        reply = self._read(timeout)
        if "error" in reply:
            raise ZygoteError(reply["error"])
        return reply

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def reset(self) -> bool:
        """Kill whatever the last kernel left and empty its folders; False if that failed."""
        try:
            reply = self.request(op="reset", timeout=30)
        except ZygoteError:
            return False
        self.last_strays = reply.get("strays", [])
        self.last_killed = int(reply.get("killed", 0))
        return bool(reply.get("clean"))

    def stop(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            for pipe in (self.process.stdin, self.process.stdout):
                if pipe:
                    pipe.close()
        self.process = None


class ZygoteProcess:
    """The part of ``subprocess.Popen`` that jupyter_client's LocalProvisioner uses."""

    stdin = stdout = stderr = None

    def __init__(self, server: ZygoteServer, pid: int):
        self.server, self.pid = server, pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                self.returncode = self.server.request(op="poll", pid=self.pid)["returncode"]
            except ZygoteError:
                self.returncode = -signal.SIGKILL
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        while self.poll() is None:
            time.sleep(0.05)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        try:
            self.server.request(op="signal", pid=self.pid, signum=int(signum))
        except ZygoteError:
            pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class ZygoteProvisioner(LocalProvisioner):
    """Starts the kernel as a fork of the worker's forkserver instead of a new process."""

    async def launch_kernel(self, cmd: list[str], **kwargs):
        server = SandboxKernelManager.zygote
        cwd = Path(kwargs.get("cwd") or ".")
        for old in server.inbox.iterdir():  # the folder itself is bound into the sandbox
            old.unlink()
        files = {}
        for i, (name, src) in enumerate(visible_files(cwd).items()):
            copy = server.inbox / f"{i:05d}"
            shutil.copyfile(src, copy)
            files[name] = str(copy)
        info = dict(self.connection_info)
        info = {k: v.decode() if isinstance(v, bytes) else v for k, v in info.items()}
        env = kernel_env(server.limits, kwargs.get("env") or {})
        extra = cmd[cmd.index("-f") + 2 :] if "-f" in cmd else []
        reply = await asyncio.to_thread(
            server.request,
            op="spawn",
            connection=info,
            cwd=str(cwd),
            files=files,
            env=env,
            argv=extra,
            cpu_s=server.limits.cpu_limit_s,
        )
        self.process = ZygoteProcess(server, reply["pid"])
        self.pid, self.pgid = reply["pid"], None
        return self.connection_info


class SandboxKernelManager(KernelManager):
    """nbclient's kernel manager for grading: size-capped messages, warm kernels when possible.

    Each kernel gets a fresh runtime folder under ``runtime_base`` (:mod:`.sockets`): the
    connection file in the grader's part, the kernel's sockets in the part ``kernel_uid`` owns.
    """

    zygote: ZygoteServer | None = None
    runtime_base = Unicode("", help="The folder of the kernels' runtime folders.").tag(config=True)
    kernel_uid = Integer(-1, help="The kernels' uid, if not the grader's.").tag(config=True)
    sockets_bytes = Integer(
        0, help="Each kernel's sockets/ as a tmpfs of this size (0: a plain folder)."
    ).tag(config=True)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.context.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
        self.context.setsockopt(zmq.SNDTIMEO, SEND_TIMEOUT_MS)
        self.runtime: Path | None = None
        self.sockets_full = False  # the kernel filled its capped sockets/ (:mod:`.sockets`)

    async def _async_pre_start_kernel(self, **kw):
        if not self.runtime_base:
            raise RuntimeError("SandboxKernelManager.runtime_base is not set (sandbox_settings)")
        uid = self.kernel_uid if self.kernel_uid >= 0 else None
        self.runtime = fresh_runtime(Path(self.runtime_base), uid, self.sockets_bytes)
        self.transport = "ipc"
        self.connection_file = str(self.runtime / "kernel.json")
        self.ip = str(self.runtime / SOCKETS / "ipc")
        if self.provisioner is None and SandboxKernelManager.zygote is not None:
            self.kernel_id = self.kernel_id or str(uuid.uuid4())
            self.provisioner = ZygoteProvisioner(
                kernel_id=self.kernel_id, kernel_spec=self.kernel_spec, parent=self
            )
        return await super()._async_pre_start_kernel(**kw)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart and self.runtime is not None:
            self.sockets_full = self.sockets_full or sockets_full(self.runtime)
            remove_runtime(self.runtime)


def warm_modules(source_notebook: Path) -> list[str]:
    """What the forkserver imports: ipykernel, torch, and the notebook's safe setup imports."""
    import ast

    import nbformat
    from IPython.core.inputtransformer2 import TransformerManager

    modules = list(BASE_WARM_MODULES)
    nb = nbformat.read(source_notebook, as_version=4)
    for cell in nb.cells:
        meta = nbcell.meta(cell)
        if cell.cell_type != "code" or not meta.get("locked") or meta.get("solution"):
            continue
        try:
            tree = ast.parse(TransformerManager().transform_cell(cell.source))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                safe = name.startswith(WARM_SAFE_PREFIXES)
                if safe and not name.startswith(WARM_UNSAFE_PREFIXES) and name not in modules:
                    modules.append(name)
                if name.startswith("matplotlib") and INLINE_BACKEND not in modules:
                    modules.append(INLINE_BACKEND)
    return modules
