"""What a learner's kernel may touch, built from existing tools: prlimit, bubblewrap, setpriv.

Every kernel runs with resource limits (``prlimit``: address space, processes, file size, CPU
time). Where bubblewrap works, the kernel also runs in its own mount, PID, network, IPC and UTS
namespaces: it sees the system read-only, this Python and the ``autograder`` package read-only,
a size-capped private ``/tmp``, and a size-capped working folder holding read-only copies of its
own submission's files; nothing else of the course (solutions, other submissions, gradebooks,
output folder) exists inside it, and it has no network. Run as root, kernels also drop to an
unprivileged uid of their own (one per worker), so the process limit counts only their processes.

:func:`detect` probes what works on this machine at run time; :func:`describe` says what holds.
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # the `autograder` package
GIB = 1024**3
MIB = 1024**2
KERNEL_UID_BASE = 61000  # uids with no account; one per worker when run as root
UID_BLOCK = 64  # uids a grade run may use (its workers), from a block no other run holds
UID_BLOCKS = 64  # grade runs at once on one machine
UID_LOCKS = Path("/run/mha-grade-uids")  # root's own folder: no learner can put a link in it
SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ENV_PASSED = ("NBGRADER_EXECUTION", "NBGRADER_VALIDATING", "LANG", "LC_ALL", "TZ")


@dataclass(frozen=True)
class Limits:
    """Per-kernel limits and budgets (seconds, bytes)."""

    address_space: int = 8 * GIB  # several GB: torch reserves a lot of virtual memory at import
    processes: int = 256  # threads count too
    file_size: int = 128 * MIB
    cpu_s: int = 0  # 0: derived from the notebook budget
    tmpfs: int = 512 * MIB  # private /tmp and working folder, each
    sockets_bytes: int = 64 * MIB  # each kernel's sockets/ folder, where the worker can cap it
    cell_timeout_s: int = 60
    notebook_budget_s: int = 300
    output_bytes: int = 1 * MIB  # per cell; the rest is dropped with a note
    notebook_output_bytes: int = 16 * MIB  # per notebook, all cells together
    threads: int = 1
    package: str = ""  # the folder holding the kernel's `autograder` (see kernel_package)

    @property
    def cpu_limit_s(self) -> int:
        return self.cpu_s or self.notebook_budget_s * max(1, self.threads) + 30

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Isolation:
    """The isolation tools that work here."""

    prlimit: str | None
    bwrap: str | None
    setpriv: str | None
    as_root: bool
    uid_base: int = KERNEL_UID_BASE  # this run's block (:func:`claim_uids`)
    sockets_capped: bool = False  # workers mount a tmpfs per kernel's sockets/ (sockets.py)

    @property
    def sandboxed(self) -> bool:
        return self.bwrap is not None

    @property
    def switches_uid(self) -> bool:
        return self.as_root and self.setpriv is not None

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Isolation:
        return cls(**data)


def _works(argv: list[str]) -> bool:
    try:
        done = subprocess.run(argv, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@functools.cache
def detect(allow_bwrap: bool = True) -> Isolation:
    """Probe prlimit, bubblewrap (with all namespaces), setpriv and a worker's own mounts."""
    prlimit = shutil.which("prlimit")
    bwrap = shutil.which("bwrap") if allow_bwrap else None
    as_root = os.geteuid() == 0
    if bwrap:
        probe = [bwrap, *_namespace_args(as_root), "--ro-bind", "/", "/", "--proc", "/proc"]
        if not _works([*probe, "true"]):
            bwrap = None
    setpriv = shutil.which("setpriv") if as_root else None
    probe = "from autograder.grader.sockets import probe; probe()"
    capped = _works([sys.executable, "-P", "-c", probe])
    return Isolation(prlimit, bwrap, setpriv, as_root, sockets_capped=capped)


def describe(iso: Isolation, limits: Limits) -> list[str]:
    """What holds for every kernel on this machine, and what does not; one line each."""
    lines = []
    if iso.prlimit:
        lines.append(
            f"limits: address space {limits.address_space // GIB} GiB, "
            f"{limits.processes} processes/threads, files up to {limits.file_size // MIB} MiB, "
            f"CPU {limits.cpu_limit_s} s per kernel; {limits.cell_timeout_s} s per cell, "
            f"{limits.notebook_budget_s} s per notebook"
        )
    else:
        lines.append(
            "NO resource limits (prlimit not found): a memory or fork bomb can hurt this machine; "
            f"only the {limits.cell_timeout_s} s cell timeout and {limits.notebook_budget_s} s "
            "notebook budget hold"
        )
    if iso.sandboxed:
        lines.append(
            "bubblewrap sandbox: no network; own PID/IPC/mount namespaces; sees only the system "
            "and Python read-only plus its own submission; solutions, other students' work, "
            "gradebooks and the output folder are not visible"
        )
    else:
        lines.append(
            "NO sandbox (bubblewrap missing or not permitted here): kernels have the network and "
            "can read every file their uid can read, including solutions/ if it is on this "
            "machine; install bubblewrap and allow user namespaces (or run as root)"
        )
    if iso.switches_uid:
        lines.append(
            f"kernels run as unprivileged uids {iso.uid_base}+worker (no other grade run uses "
            "them), so the process limit counts only their own processes"
        )
    elif iso.as_root:
        lines.append("kernels run as root (setpriv missing): the process limit does not apply")
    else:
        lines.append(
            "kernels run as this user: the process limit counts all of this user's processes"
        )
    if iso.sockets_capped:
        lines.append(
            f"each kernel's sockets/ folder is a {limits.sockets_bytes // MIB} MiB tmpfs in its "
            "worker's own mount namespace: a kernel that fills it is stopped there and flagged"
        )
    else:
        lines.append(
            "kernels' sockets/ folders have NO total size cap (no mount namespace for workers "
            f"here): only the {limits.file_size // MIB} MiB per file limit holds; run as root or "
            "allow user namespaces"
        )
    return lines


def kernel_uid(iso: Isolation, worker: int) -> int:
    return iso.uid_base + worker


_held_uid_locks: list[int] = []  # open for the life of the process: the claim lasts as long


def claim_uids(iso: Isolation) -> Isolation:
    """``iso`` with a block of kernel uids that no other grade run on this machine holds.

    Two runs sharing a uid would share its process limit, so one learner's fork bomb could
    starve another run's kernels. Each block is an exclusive ``flock`` on a file in a folder only
    root may write, opened with ``O_NOFOLLOW``; the kernel drops the lock when this process ends,
    however it ends."""
    if not iso.switches_uid:
        return iso
    UID_LOCKS.mkdir(mode=0o700, exist_ok=True)
    info = os.lstat(UID_LOCKS)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o077:
        raise RuntimeError(f"{UID_LOCKS} must be a folder only root can open: remove it")
    for block in range(UID_BLOCKS):
        fd = os.open(
            UID_LOCKS / str(block), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        _held_uid_locks.append(fd)
        return dataclasses.replace(iso, uid_base=KERNEL_UID_BASE + block * UID_BLOCK)
    raise RuntimeError(f"{UID_BLOCKS} grade runs on this machine hold every block of kernel uids")


def _namespace_args(as_root: bool) -> list[str]:
    ns = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
    ns += ["--unshare-cgroup-try", "--die-with-parent", "--new-session"]
    return ns if as_root else ["--unshare-user", *ns]


def prlimit_argv(iso: Isolation, limits: Limits) -> list[str]:
    """``prlimit ... --`` for one kernel (or forkserver): every process below inherits it."""
    if not iso.prlimit:
        return []
    processes = limits.processes
    if not iso.switches_uid:  # the limit counts every task of this uid
        processes += _tasks_of_uid(os.getuid())
    return [
        iso.prlimit,
        f"--as={limits.address_space}",
        f"--nproc={processes}",
        f"--fsize={limits.file_size}",
        f"--cpu={limits.cpu_limit_s}",
        "--core=0",
        "--",
    ]


def _tasks_of_uid(uid: int) -> int:
    count = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(
                line.split(":", 1) for line in status.read_text().splitlines() if ":" in line
            )
        except OSError:
            continue
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            count += int(fields.get("Threads", "1"))
    return count


class Mounts:
    """bwrap mount arguments, creating parent folders world-traversable (bwrap's are 0700)."""

    def __init__(self):
        self.args: list[str] = []
        self._dirs: set[str] = {"/"}
        self._writable: list[str] = []

    def _parents(self, dest: str) -> None:
        parts = Path(dest).parts
        for i in range(2, len(parts)):
            parent = str(Path(*parts[:i]))
            if parent not in self._dirs:
                inside = any(parent.startswith(w + "/") for w in self._writable)
                self.args += ["--perms", "0777" if inside else "0755", "--dir", parent]
                self._dirs.add(parent)

    def add(self, option: str, src: str | None, dest: str, perms: str | None = None) -> None:
        self._parents(dest)
        if perms:
            self.args += ["--perms", perms]
        self.args += [option, dest] if src is None else [option, src, dest]
        self._dirs.add(dest)

    def tmpfs(self, dest: str, size: int, perms: str = "0777") -> None:
        self._parents(dest)
        self.args += ["--size", str(size), "--perms", perms, "--tmpfs", dest]
        self._dirs.add(dest)
        self._writable.append(dest)

    def dir(self, dest: str, perms: str = "0777") -> None:
        self.add("--dir", None, dest, perms)


def _system(m: Mounts, limits: Limits) -> None:
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            m.args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            m.add("--ro-bind", d, d)
    m.args += ["--proc", "/proc", "--dev", "/dev"]
    made = set()
    for d in python_binds(limits):
        m.add("--ro-bind", d, d)
        made.update(str(p) for p in Path(d).parents if Path("/tmp") in p.parents)
    for d in sorted(made):  # bwrap makes the folders above a bind world-writable
        m.args += ["--chmod", "0755", d]


def python_binds(limits: Limits) -> list[str]:
    """Python, the environment and the kernel's package, bound read-only into every sandbox.

    The kernel's package is ``limits.package`` when set (the answer-free tree of
    :mod:`.kernel_package`, and then the real package is not bound at all), else this package.

    They may live under ``/tmp`` (a clone there): bound after the sandbox's own ``/tmp``, and
    spared by the forkserver when it empties ``/tmp`` between kernels.
    """
    python_dirs = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()}
    python_dirs.add(Path(sys.executable).resolve().parent.parent)
    binds = [
        str(d)
        for d in sorted(python_dirs)
        if not any(str(d).startswith(s + "/") or str(d) == s for s in SYSTEM_DIRS)
    ]
    binds.append(limits.package or str(PACKAGE_DIR))
    if str(Path(sys.prefix)) != str(Path(sys.prefix).resolve()):
        binds.append(sys.prefix)
    return binds


def kernel_env(limits: Limits, passed: dict[str, str] | None = None) -> dict[str, str]:
    """The whole environment of a kernel: nothing of the grader's (tokens, paths) leaks in."""
    env = {
        "PATH": f"{Path(sys.prefix) / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp/home",
        "USER": "learner",
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        "MPLCONFIGDIR": "/tmp/mpl",
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
        "IPYTHONDIR": "/tmp/ipython",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "OMP_NUM_THREADS": str(limits.threads),
        "MKL_NUM_THREADS": str(limits.threads),
    }
    if limits.package:
        env["PYTHONPATH"] = limits.package
    for name in ENV_PASSED:
        if passed and name in passed:
            env[name] = passed[name]
    return env


def bwrap_argv(
    iso: Isolation,
    limits: Limits,
    *,
    ro_dirs: tuple[str, ...] = (),
    rw_dirs: tuple[str, ...] = (),
    workdir: str,
    workdir_files: dict[str, str],
    font_cache: str | None,
    uid: int | None,
    env: dict[str, str],
) -> list[str]:
    """The bwrap command prefix for a kernel whose working folder is ``workdir``.

    ``workdir`` becomes a size-capped tmpfs holding read-only binds of ``workdir_files``
    (name inside -> path outside); ``ro_dirs`` are bound read-only at their own paths, then
    ``rw_dirs`` read-write (the kernel's sockets folder, which may lie in a read-only one).
    """
    assert iso.bwrap
    m = Mounts()
    m.tmpfs("/tmp", limits.tmpfs, perms="1777")  # first: later binds may lie under /tmp
    _system(m, limits)
    for d in ("/tmp/home", "/tmp/mpl", "/tmp/ipython"):
        m.dir(d)
    for dest, src in font_files(font_cache).items():
        m.add("--ro-bind", src, dest)
    m.tmpfs(workdir, limits.tmpfs)
    for name, src in sorted(workdir_files.items()):
        dest = str(Path(workdir) / name)
        m.add("--ro-bind", src, dest)
    for d in ro_dirs:
        m.add("--ro-bind", d, d)
    for d in rw_dirs:
        m.add("--bind", d, d)
    argv = [iso.bwrap, *_namespace_args(iso.as_root), *m.args, "--chdir", workdir, "--clearenv"]
    for key, value in sorted(env.items()):
        argv += ["--setenv", key, value]
    if uid is not None and iso.switches_uid:
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--", iso.setpriv]
        argv += [f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
        argv += ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
    argv.append("--")
    return argv


def font_files(font_cache: str | None) -> dict[str, str]:
    """matplotlib's font list, as bound read-only into a sandbox: path inside -> path outside."""
    if not font_cache:
        return {}
    return {f"/tmp/mpl/{f.name}": str(f) for f in sorted(Path(font_cache).glob("fontlist*.json"))}


def prepare_font_cache(folder: Path) -> Path | None:
    """Build matplotlib's font list once, outside the sandbox, for every kernel to reuse."""
    folder.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, MPLCONFIGDIR=str(folder))
    code = "import matplotlib.font_manager"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, check=False)
    return folder if done.returncode == 0 and any(folder.glob("fontlist*.json")) else None


def shared_font_cache() -> Path | None:
    """The font list of :func:`prepare_font_cache`, kept for this user and matplotlib release
    (``~/.cache/mha-course/fonts-matplotlib-X``): built once, not in every ``grade`` and
    ``check`` (0.4 CPU-s each, 20 of them in a test session). Built in a folder of its own and
    renamed into place, so that a run beside never reads a half-written list; kernels get its
    file bound read-only (:func:`font_files`), and no kernel sees this user's home. None where
    the cache cannot be written: the caller builds one of its own."""
    from importlib.metadata import version

    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mha-course"
    folder = home / f"fonts-matplotlib-{version('matplotlib')}"
    if any(folder.glob("fontlist*.json")):
        return folder
    try:
        home.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=".fonts-", dir=home))
        os.chmod(building, 0o755)
    except OSError:
        return None
    if prepare_font_cache(building) is None:
        shutil.rmtree(building, ignore_errors=True)
        return None
    try:
        os.rename(building, folder)
    except OSError:  # another run renamed its list into place first
        shutil.rmtree(building, ignore_errors=True)
    return folder if any(folder.glob("fontlist*.json")) else None
