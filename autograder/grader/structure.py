"""Turning a collected submission folder into something nbgrader can grade, or a clear error.

nbgrader copes with deleted test cells (``add_missing_cells``) and duplicated grade ids (it keeps
the last copy), but not with the rest of what collection and editors do to notebooks:

- a corrupt, empty or nbformat-3 file, or no notebook of the expected name, makes nbgrader skip
  the notebook and score it 0 without saying so: here it is an error with its reason;
- a notebook renamed on download (``01_... (1).ipynb``) is graded under its expected name;
- cells whose nbgrader metadata an editor stripped get it back (matched by cell id, else by
  identical source), and deleted locked set-up cells are put back, so the tests find what they
  import instead of failing with NameError;
- symbolic links are not copied: they could point the kernel at files outside the submission.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat

from autograder import nbcell
from autograder.notebook_files import NotebookError, read_notebook

SKIPPED_DIRS = {".ipynb_checkpoints", "__pycache__", ".git"}
MAX_NOTEBOOK_BYTES = 64 * 1024**2


class SubmissionError(Exception):
    """The submission cannot be graded; the message says why, in one line."""


def _grade_id(cell) -> str | None:
    meta = nbcell.meta(cell)
    if meta.get("grade") or meta.get("solution") or meta.get("locked"):
        return meta.get("grade_id")
    return None


def restore_structure(nb, release) -> list[str]:
    """Repair ``nb`` in place against the release notebook; return notes on what was done."""
    notes = []
    reference = {_grade_id(c): c for c in release.cells if _grade_id(c)}
    present: dict[str, int] = {}
    for cell in nb.cells:
        gid = _grade_id(cell)
        if gid:
            present[gid] = present.get(gid, 0) + 1
    by_source = {c.source.strip(): gid for gid, c in reference.items() if nbcell.is_locked(c)}
    for cell in nb.cells:
        if _grade_id(cell):
            continue
        gid = cell.get("id") if cell.get("id") in reference else by_source.get(cell.source.strip())
        if gid and gid not in present and reference[gid].cell_type == cell.cell_type:
            cell.metadata["nbgrader"] = dict(nbcell.meta(reference[gid]))
            present[gid] = 1
            notes.append(f"restored the grading metadata of cell `{gid}` (stripped by an editor?)")
    for gid, count in present.items():
        if count > 1:  # nbgrader keeps the last copy but crashes on the others' emptied metadata
            copies = [c for c in nb.cells if _grade_id(c) == gid]
            for cell in copies[:-1]:
                cell.metadata.pop("nbgrader")
            present[gid] = 1
            notes.append(f"cell `{gid}` appears {count} times: the last copy is graded")
    order = [_grade_id(c) for c in release.cells if _grade_id(c)]
    for i, gid in enumerate(order):
        if gid in present:
            continue
        ref = reference[gid]
        if nbcell.is_graded(ref) and not nbcell.is_answer(ref):
            notes.append(f"test cell `{gid}` was deleted: nbgrader puts it back")
            continue
        if not (nbcell.is_answer(ref) or nbcell.is_locked(ref)):
            continue
        # nbgrader puts a missing test cell back after the cell before it in the source, and
        # crashes when that is a missing answer cell (a copy older than the exercise): put the
        # unanswered cell back in place, so its tests say it is not implemented yet
        earlier = [g for g in order[:i] if g in present]
        position = 0
        if earlier:
            position = 1 + max(j for j, c in enumerate(nb.cells) if _grade_id(c) == earlier[-1])
        nb.cells.insert(position, nbformat.from_dict(reference[gid]))
        present[gid] = 1
        if nbcell.is_answer(ref):
            notes.append(
                f"answer cell `{gid}` was missing (deleted, or the copy predates the exercise): "
                "put back unanswered"
            )
        else:
            notes.append(f"locked cell `{gid}` was deleted: put back")
    return notes


def submission_files(folder: Path, notes: list[str]) -> list[Path]:
    """The files of a submission that grading reads: no links (noted), no checkpoints."""
    files = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(part in SKIPPED_DIRS for part in rel.parts):
            continue
        if path.is_symlink():
            notes.append(f"skipped the symbolic link {rel}")
        elif path.is_file():
            files.append(path)
    return files


def choose_notebooks(folder: Path, files: list[Path], expected, notes: list[str]) -> dict:
    """Expected notebook name -> the file of ``files`` graded as it; raise
    :class:`SubmissionError` when one is missing."""
    notebooks = {p.relative_to(folder).as_posix(): p for p in files if p.suffix == ".ipynb"}
    chosen: dict[str, Path] = {}
    for name in expected:
        if name in notebooks:
            chosen[name] = notebooks[name]
            continue
        stem = Path(name).stem
        candidates = [
            rel for rel in notebooks if Path(rel).stem.startswith(stem) and rel not in expected
        ]
        if len(candidates) == 1:
            chosen[name] = notebooks[candidates[0]]
            notes.append(f"graded {candidates[0]} as {name}")
        else:
            found = ", ".join(sorted(notebooks)) or "no notebook"
            raise SubmissionError(f"no {name} in the submission (found: {found})")
    return chosen


def prepare(folder: Path, expected: dict[str, Path], dest: Path) -> list[str]:
    """Copy ``folder`` to nbgrader's ``dest``, repaired; raise :class:`SubmissionError`.

    ``expected`` maps each notebook file name of the assignment to its release version.
    """
    notes: list[str] = []
    if not folder.is_dir():
        raise SubmissionError(f"{folder} is not a folder")
    files = submission_files(folder, notes)
    chosen = choose_notebooks(folder, files, expected, notes)
    graded = {}
    for name, path in chosen.items():
        size = path.stat().st_size
        if size > MAX_NOTEBOOK_BYTES:
            raise SubmissionError(
                f"{name} is {size // 1024**2} MB: clear its outputs (Edit > Clear Outputs of All "
                "Cells) and submit it again"
            )
        try:
            nb = read_notebook(path)
        except NotebookError as err:
            raise SubmissionError(str(err).replace(str(folder) + "/", "")) from None
        release = nbformat.read(expected[name], as_version=4)
        notes += restore_structure(nb, release)
        graded[name] = nb
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    chosen_paths = set(chosen.values())
    for path in files:
        rel = path.relative_to(folder)
        if path.suffix == ".ipynb" or path in chosen_paths:
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest / rel)
    for name, nb in graded.items():
        nbformat.write(nb, dest / name)
    return notes
