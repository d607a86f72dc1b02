"""The last grade of each learner notebook, kept beside it so ``progress`` regrades only what
changed.

``check`` saves every result it prints; ``progress`` reuses a saved result when neither the
notebook file nor the grader (its code, data and time limits) changed since, and grades the
others. The results live in a hidden folder next to the notebooks (``.autograder-grades/``), one
small JSON file each; deleting the folder only costs a regrade.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

from autograder import paths
from autograder.grader.files import files_digest, write_atomic
from autograder.grader.isolation import Limits
from autograder.grader.results import NotebookResult

FOLDER = paths.SAVED_GRADES
VERSION = 1


def _key(path: Path, limits: Limits) -> str:
    h = hashlib.sha256(f"{VERSION} {limits.cell_timeout_s} {limits.notebook_budget_s}".encode())
    h.update(hashlib.sha256(path.read_bytes()).digest())
    h.update(files_digest(paths.grading_code()).encode())
    return h.hexdigest()


def _file(path: Path) -> Path:
    return path.parent / FOLDER / f"{path.stem}.json"


def save(path: Path, limits: Limits, result: NotebookResult) -> None:
    """Keep ``result`` as the grade of the notebook file ``path`` (never fails a command); a
    result that is an error (the grader could not run it) is not kept."""
    if result.error:
        return
    try:
        data = {"key": _key(path, limits), "notebook_id": result.notebook_id}
        data["result"] = asdict(result)  # all of it: progress reports from it
        write_atomic(_file(path), json.dumps(data, indent=1))
    except Exception:  # noqa: BLE001 - a cache: a read-only folder costs a regrade, nothing more
        pass


def load(path: Path, limits: Limits) -> NotebookResult | None:
    """The saved grade of ``path``, if the file and the grader are unchanged since; else None."""
    try:
        data = json.loads(_file(path).read_text(encoding="utf-8"))
        if data["key"] != _key(path, limits):
            return None
        return NotebookResult.from_summary(data["notebook_id"], data["result"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
