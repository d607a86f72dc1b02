"""Each kernel's runtime folder: made fresh by the grader, deleted with its kernel.

``R = fresh_runtime(base, uid)`` is the grader's (mode 0711: a kernel may pass through it, not
list or change it): the connection file and the verification sockets lie there, so nothing the
grader writes, binds or changes by path can meet a link or a file a learner made. ``R/sockets``
belongs to the kernel's uid: ipykernel binds its ZeroMQ sockets there, and the grader only
connects to them and removes them (neither follows a link to change a file). A verification
socket is handed to the kernel's uid through a descriptor opened without following links
(:func:`let_kernel_connect`). ``R`` is deleted when its kernel is (``shutil.rmtree`` never
follows links), and any folder a killed worker left before the next kernel starts: nothing a
learner writes there survives to the next learner.

``R/sockets`` lies on the grading machine's disk, where a kernel could write gigabytes. So a
worker takes a mount namespace of its own (:func:`own_mounts`: as root, or in a user namespace
of its own), and each kernel's ``sockets/`` is a tmpfs of a fixed size there
(``fresh_runtime(..., size=)``): a write past it fails with "No space left on device", and
:func:`sockets_full` tells the grader, who says so in the result. The mounts exist only in the
worker's namespace and the sandboxes it starts (the runtime base is a shared mount, so a warm
forkserver's sandbox, started before the kernel, sees each new one); they end with the worker.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import stat
import tempfile
from pathlib import Path

PREFIX = "kernel-"
MARKER = ".mha-kernel-runtime"
SOCKETS = "sockets"
CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC = 0x2, 0x4, 0x1000, 0x4000
MS_PRIVATE, MS_SHARED = 1 << 18, 1 << 20
MNT_DETACH, UMOUNT_NOFOLLOW = 0x2, 0x8
INODES = 1024  # files a kernel may make in its sockets/ (ipykernel binds five sockets)
FULL_BELOW = 1024**2  # free bytes left when a learner filled the folder


def _libc(name: str, *args) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{name}: {os.strerror(err)}")


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    args = (_bytes(source), _bytes(target), _bytes(fstype), ctypes.c_ulong(flags))
    _libc("mount", *args, _bytes(data or None))


def own_mounts() -> None:
    """Move this process (single-threaded: call it first) into a mount namespace of its own,
    where mounts stay private: as root directly, else inside a user namespace of its own whose
    only uid and gid are this process's."""
    uid, gid = os.getuid(), os.getgid()
    if uid == 0:
        _libc("unshare", CLONE_NEWNS)
    else:
        _libc("unshare", CLONE_NEWUSER | CLONE_NEWNS)
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)


def probe() -> None:
    """Raise unless :func:`own_mounts` and a capped ``sockets/`` work here (a fresh process)."""
    own_mounts()
    with tempfile.TemporaryDirectory() as base:
        remove_runtime(fresh_runtime(Path(base), size=FULL_BELOW))


def share_mounts_below(folder: Path) -> None:
    """Make ``folder`` (in this process's own mount namespace) a mount whose later sub-mounts
    also appear in sandboxes that bind it."""
    _mount(str(folder), str(folder), None, MS_BIND)
    _mount(None, str(folder), None, MS_SHARED)


def _unmount(path: Path) -> None:
    if os.path.ismount(path):
        _libc("umount2", str(path).encode(), MNT_DETACH | UMOUNT_NOFOLLOW)


def sockets_full(folder: Path) -> bool:
    """Whether the kernel of runtime folder ``folder`` filled its capped ``sockets/``."""
    path = folder / SOCKETS
    if not os.path.ismount(path):
        return False
    info = os.statvfs(path)
    return info.f_bavail * info.f_frsize < FULL_BELOW or info.f_favail < 8


def _hand_over_at(dir_fd: int, name: str, uid: int) -> None:
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
    try:
        os.fchown(fd, uid, uid)
    finally:
        os.close(fd)


def fresh_runtime(base: Path, uid: int | None = None, size: int = 0) -> Path:
    """A new folder under ``base`` for one kernel, with ``sockets/`` for ``uid`` (the kernel's,
    when it differs from the grader's): a tmpfs of ``size`` bytes if ``size`` (this process must
    be in its own mount namespace: :func:`own_mounts`). Earlier kernels' folders are removed."""
    for old in base.glob(f"{PREFIX}*"):
        remove_runtime(old)
    folder = Path(tempfile.mkdtemp(prefix=PREFIX, dir=base))
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.fchmod(fd, 0o711)
        os.close(os.open(MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=fd))
        os.mkdir(SOCKETS, 0o700, dir_fd=fd)
        if size:
            owner = os.getuid() if uid is None else uid
            options = f"size={size},nr_inodes={INODES},mode=0700,uid={owner},gid={owner}"
            sockets = os.open(SOCKETS, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY, dir_fd=fd)
            try:  # mounted on the folder just made, whatever its path leads to now
                _mount("tmpfs", f"/proc/self/fd/{sockets}", "tmpfs", MS_NOSUID | MS_NODEV, options)
            finally:
                os.close(sockets)
        elif uid is not None:
            _hand_over_at(fd, SOCKETS, uid)
    finally:
        os.close(fd)
    return folder


def private_home(runtime: Path, uid: int | None) -> Path:
    """Without a sandbox: the kernel's home (with ``mpl`` and ``ipython``) in its sockets
    folder, made through descriptors, so a link put there by a stray process is never followed."""
    sockets = os.open(runtime / SOCKETS, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.mkdir("home", 0o700, dir_fd=sockets)
        home = os.open("home", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=sockets)
        try:
            for sub in ("mpl", "ipython"):
                os.mkdir(sub, 0o700, dir_fd=home)
                if uid is not None:
                    _hand_over_at(home, sub, uid)
        finally:
            os.close(home)
        if uid is not None:
            _hand_over_at(sockets, "home", uid)
    finally:
        os.close(sockets)
    return runtime / SOCKETS / "home"


def remove_runtime(folder: Path) -> None:
    _unmount(folder / SOCKETS)  # its files go with the mount
    shutil.rmtree(folder, ignore_errors=True)


def let_kernel_connect(path: str | Path) -> None:
    """Let any uid connect to the socket the grader just bound at ``path`` (a kernel's uid
    needs write permission on it); refused if ``path`` is not that socket."""
    fd = os.open(path, os.O_PATH | os.O_NOFOLLOW)
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a socket")
        os.chmod(f"/proc/self/fd/{fd}", 0o777)  # the inode opened above, whatever is at path now
    finally:
        os.close(fd)
