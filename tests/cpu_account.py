"""CPU seconds by owner, as the kernel counts them: each test, each background job.

``getrusage`` counts only the child processes a parent waited for. A kernel that a sandbox or a
Jupyter server started, or a browser's renderers, end unwaited, so it missed about a third of the
suite's CPU (the machine was busy on both cores for the whole run while it counted 950 CPU-s of
1,400). Where this process may make cgroups (root, with cgroup v1's ``cpuacct``, as in CI), the
tests run in one group and each background job in a group of its own; a process stays in its
group when its parent leaves it. Elsewhere the count falls back to ``getrusage``, and says so.
"""

from __future__ import annotations

import contextlib
import os
import resource
import threading
from pathlib import Path

_CPUACCT = Path("/sys/fs/cgroup/cpuacct")
TESTS = "tests"  # the group of this process: the tests and what they start


def _own_group() -> Path:
    """The group this process started in: the suite's groups go below it, so that whoever
    counts that group (a CI runner, a benchmark of the whole suite) still counts the suite."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if "cpuacct" in controllers.split(","):
                return _CPUACCT / path.lstrip("/")
    return _CPUACCT


_home = _own_group()


def _make_root() -> Path | None:
    root = _home / f"mha-suite-{os.getpid()}"
    try:
        root.mkdir()
        (root / TESTS).mkdir()
        (root / TESTS / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        with contextlib.suppress(OSError):
            (root / TESTS).rmdir()
            root.rmdir()
        return None
    return root


_root = _make_root()
KIND = "counted by the kernel (cgroup)" if _root else "this process and the children it waited for"


def group(name: str) -> Path | None:
    """The folder of group ``name`` (made now), or None where there are no groups."""
    if _root is None:
        return None
    folder = _root / name
    folder.mkdir(exist_ok=True)
    return folder


def join(folder: Path | None) -> None:
    """Move the calling thread into group ``folder``: its later children follow it. For a child
    process, call it between fork and exec."""
    if folder is not None:
        (folder / "tasks").write_text(str(threading.get_native_id()))


def seconds(folder: Path | None = None) -> float:
    """CPU seconds of group ``folder`` so far (the tests' group by default)."""
    if _root is None:
        own, children = (
            resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        )
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    return int(((folder or _root / TESTS) / "cpuacct.usage").read_text()) / 1e9


def close() -> None:
    """Move what is left in the groups back to the group the suite started in; remove them."""
    if _root is None:
        return
    for folder in [*(f for f in _root.iterdir() if f.is_dir()), _root]:
        for task in (folder / "tasks").read_text().split():
            with contextlib.suppress(OSError):
                (_home / "tasks").write_text(task)
        with contextlib.suppress(OSError):
            folder.rmdir()
