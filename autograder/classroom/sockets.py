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
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

PREFIX = "kernel-"
MARKER = ".mha-kernel-runtime"
SOCKETS = "sockets"


def _hand_over_at(dir_fd: int, name: str, uid: int) -> None:
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
    try:
        os.fchown(fd, uid, uid)
    finally:
        os.close(fd)


def fresh_runtime(base: Path, uid: int | None = None) -> Path:
    """A new folder under ``base`` for one kernel, with ``sockets/`` for ``uid`` (the kernel's,
    when it differs from the grader's); earlier kernels' folders are removed."""
    for old in base.glob(f"{PREFIX}*"):
        shutil.rmtree(old, ignore_errors=True)
    folder = Path(tempfile.mkdtemp(prefix=PREFIX, dir=base))
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.fchmod(fd, 0o711)
        os.close(os.open(MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=fd))
        os.mkdir(SOCKETS, 0o700, dir_fd=fd)
        if uid is not None:
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
