"""Reading notebook files, with one-line errors a learner can act on."""

import json
import time
from pathlib import Path

import nbformat

from autograder.paths import RENAMED, notebook_ids


class NotebookError(Exception):
    """A notebook file that cannot be graded; the message says what is wrong and what to do."""


def identify(path: Path, known_ids: list[str] | None = None) -> str:
    """The course notebook id a file is a copy of, recognised by its file name."""
    known = notebook_ids() if known_ids is None else known_ids
    stem = path.stem
    matches = [nb_id for nb_id in known if stem == nb_id or stem.startswith(nb_id)]
    if not matches:
        for old, new in RENAMED.items():
            if stem.startswith(old) and new in known:
                raise NotebookError(
                    f"{path.name} is the old name of {new}: your copy is kept as it is; open "
                    f"work/{new}/{new}.ipynb, paste your answers into it and check that file"
                )
        names = ", ".join(f"{nb_id}.ipynb" for nb_id in known) or "(no notebooks found)"
        raise NotebookError(
            f"cannot tell which course notebook {path.name} is: name the file like one of {names}"
        )
    return max(matches, key=len)


SAVE_SETTLES_S = 1.0  # how long a notebook that reads as empty or cut off is read again


def _settled_bytes(path: Path) -> bytes:
    """The file's bytes, read again for a moment while they are empty or not JSON: JupyterLab
    saves (and autosaves every few seconds) by truncating the file and writing it anew, so a
    read in between sees an empty or cut-off notebook that is whole a few milliseconds later."""
    deadline = time.monotonic() + SAVE_SETTLES_S
    while True:
        raw = path.read_bytes()
        try:
            json.loads(raw)
            return raw
        except ValueError:
            if time.monotonic() > deadline:
                return raw
            time.sleep(0.1)


def read_notebook(path: Path) -> nbformat.NotebookNode:
    """Load and validate a notebook file, or raise :class:`NotebookError` explaining the problem."""
    if not path.exists():
        raise NotebookError(f"{path}: no such file")
    if path.is_dir():
        raise NotebookError(f"{path} is a folder: give the path of the .ipynb file inside it")
    if path.suffix != ".ipynb":
        raise NotebookError(f"{path} is not a notebook: expected a .ipynb file")
    raw = _settled_bytes(path)
    if not raw.strip():
        raise NotebookError(
            f"{path} is empty: restore it from course/ or from a JupyterLab checkpoint"
        )
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise NotebookError(f"{path} is not a text file (byte {err.start} is not UTF-8)") from None
    except json.JSONDecodeError as err:
        raise NotebookError(
            f"{path} is not valid JSON (truncated or corrupt?): {err.msg} (line {err.lineno}, "
            f"column {err.colno}); restore it from a JupyterLab checkpoint or from course/"
        ) from None
    if not isinstance(data, dict) or "cells" not in data and "worksheets" not in data:
        raise NotebookError(f"{path} is JSON but not a Jupyter notebook (no 'cells')")
    major = data.get("nbformat")
    if major != 4:
        raise NotebookError(
            f"{path} uses notebook format {major}, this course needs format 4: open it in "
            "JupyterLab and save it again to upgrade it"
        )
    try:
        nb = nbformat.reads(raw.decode("utf-8"), as_version=4)
        nbformat.validate(nb)
    except nbformat.ValidationError as err:
        first_line = str(err).strip().splitlines()[0]
        raise NotebookError(f"{path} is not a valid notebook: {first_line}") from None
    return nb
