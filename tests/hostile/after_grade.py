"""``python after_grade.py REPORT.json GRADE_ARGV...``: run a ``grade`` command and, the moment it
ends, list the processes still running under its block of kernel uids.

``grade`` holds its block (``isolation.claim_uids``: an exclusive lock) until it exits; then any
later run may claim the block and start kernels of its own under the same uids. So "no kernel of
this run is left running" can only be read at once: this takes the block's lock as soon as the
command has ended (so no other run can start a kernel under it), lists the processes, and lets go.
REPORT gets ``{"uid_base", "checked", "left"}``: ``checked`` is false when the run used no uids of
its own (no root, or no sandbox) or another run took the block first.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from autograder.grader.isolation import KERNEL_UID_BASE, UID_BLOCK, UID_LOCKS


def uid_base(stdout: str) -> int | None:
    """The first kernel uid of a run, as its summary says."""
    found = re.search(r"unprivileged uids (\d+)\+worker", stdout)
    return int(found.group(1)) if found else None


def processes_of_uids(base: int) -> list[str]:
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        uid = int(re.search(r"^Uid:\s+(\d+)", text, re.MULTILINE).group(1))
        if base <= uid < base + UID_BLOCK:
            found.append(f"{status.parent.name} uid {uid}")
    return found


def _left_under(base: int) -> list[str] | None:
    """The processes under the block of ``base``, read while holding its lock; None if another
    run holds it."""
    fd = os.open(UID_LOCKS / str((base - KERNEL_UID_BASE) // UID_BLOCK), os.O_RDWR | os.O_NOFOLLOW)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        return processes_of_uids(base)
    finally:
        os.close(fd)  # and with it the lock


def main(report: str, argv: list[str]) -> int:
    done = subprocess.run(argv, capture_output=True, text=True)
    base = uid_base(done.stdout)
    left = _left_under(base) if base is not None and UID_LOCKS.is_dir() else None
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    found = {"uid_base": base, "checked": left is not None, "left": left}
    Path(report).write_text(json.dumps(found))
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
