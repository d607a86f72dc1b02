"""Files that survive interruption: atomic writes, content hashes, result files, the manifest."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write to a temporary file beside ``path``, fsync, then rename: all or nothing."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def copy_atomic(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, data) -> None:
    write_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def read_json(path: Path):
    """The JSON in ``path``, or None if it is missing or unreadable (then it is redone)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def folder_digest(folder: Path) -> str:
    """sha256 over every file's relative path and bytes (links by their target), sorted."""
    h = hashlib.sha256()
    for path in sorted(Path(folder).rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_symlink():
            h.update(f"L{rel}\0{os.readlink(path)}\0".encode())
        elif path.is_file():
            h.update(f"F{rel}\0".encode())
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            h.update(b"\0")
    return h.hexdigest()


def files_digest(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for path in sorted(paths):
        h.update(path.name.encode() + b"\0" + Path(path).read_bytes() + b"\0")
    return h.hexdigest()


def remove_stale_temporaries(folder: Path) -> None:
    """Temporary files left by a run that was killed mid-write."""
    if folder.is_dir():
        for tmp in folder.rglob(".*.tmp"):
            tmp.unlink(missing_ok=True)
