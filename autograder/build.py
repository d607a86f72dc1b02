"""Regenerate the notebooks from their single source, deterministically.

``solutions/<id>/<id>.py`` (jupytext percent format, the file people edit and review)
  → ``solutions/<id>/<id>.ipynb`` (the instructor notebook, nbgrader's source step)
  → ``course/<id>/<id>.ipynb`` (the learner notebook, nbgrader's release step).

Two things are added on the way, so the notebooks behave in JupyterLab as a learner expects:

- every test cell, every self-check (a locked check without points) and every demonstration
  cell between the exercises (which may use a function the learner has not written yet) is
  tagged ``raises-exception``: JupyterLab's Run All goes on past them to the plots and sliders
  further down, while nbgrader still scores a failing test cell as failed. So is an answer cell
  whose stub raises as soon as it runs (``answer_x = None`` then a top-level ``raise
  NotImplementedError()``, as in notebooks 05 and 10): untouched, it would stop Run All at the
  first question. Answer cells that define a function or class (their stub raises only when
  called) and the locked set-up cell are not tagged: an error there still stops Run All, as
  everything after depends on them;
- the notebook carries the ``language_info`` JupyterLab writes when the kernel starts, so opening
  a notebook does not mark it "unsaved". Only the Python version is left out, as it depends on
  the learner's machine: ``make lab`` fills it in when it copies a notebook into ``work/``.

Pages that are not notebooks (``START_HERE.md``) are copied from ``solutions/`` to ``course/``,
the maps in ``START_HERE.md`` and the README get the catalogue's times and prerequisites, and
``autograder/MODULES.md`` lists every module with its docstring's first sentence
(:mod:`autograder.maps`).
"""

import filecmp
import hashlib
import re
import shutil
import tempfile
from pathlib import Path

import jupytext

from autograder import maps, nbcell, paths
from autograder.grader.nbgrader_run import NbgraderRun

RUN_ALL_GOES_ON = "raises-exception"  # the cell tag JupyterLab's Run All does not stop at
PAGES = ["START_HERE.md"]  # course-wide pages, next to the notebook folders
# What ipykernel reports in kernel_info, less "version" (see the module docstring).
LANGUAGE_INFO = {
    "codemirror_mode": {"name": "ipython", "version": 3},
    "file_extension": ".py",
    "mimetype": "text/x-python",
    "name": "python",
    "nbconvert_exporter": "python",
    "pygments_lexer": "ipython3",
}


# The stub nbgrader writes in place of a solution sits at the indentation of `### BEGIN SOLUTION`:
# at column 0 it raises when the cell runs (the release shows the stub itself).
_RAISES_WHEN_RUN = re.compile(r"^(### BEGIN SOLUTION|raise NotImplementedError\(\))", re.MULTILINE)


def run_all_goes_on(cell) -> bool:
    """A test cell, a self-check, a demonstration (a code cell nbgrader does not manage), or an
    answer cell whose stub raises as soon as the cell runs (see the module docstring)."""
    return cell.cell_type == "code" and (
        nbcell.is_test(cell)
        or nbcell.is_self_check(cell)
        or "nbgrader" not in cell.metadata
        or (nbcell.is_answer(cell) and bool(_RAISES_WHEN_RUN.search(cell.source)))
    )


def instructor_notebook_text(notebook_id: str) -> str:
    """The ``.ipynb`` text generated from the jupytext source, output-free and stable."""
    nb = jupytext.read(paths.source_text(notebook_id))
    nb.metadata.pop("jupytext", None)
    seen = set()
    for cell in nb.cells:  # stable ids: nbformat would draw random ones on every build
        cell.id = nbcell.grade_id(cell) or hashlib.sha1(cell.source.encode()).hexdigest()[:8]
        while cell.id in seen:
            cell.id = hashlib.sha1(cell.id.encode()).hexdigest()[:8]
        seen.add(cell.id)
        if run_all_goes_on(cell) and RUN_ALL_GOES_ON not in cell.metadata.get("tags", []):
            cell.metadata["tags"] = [*cell.metadata.get("tags", []), RUN_ALL_GOES_ON]
    nb.metadata["language_info"] = dict(LANGUAGE_INFO)
    return jupytext.writes(nb, fmt="ipynb")


def _changed_files(generated: Path, committed: Path) -> list[Path]:
    """Files that differ between two folder trees (missing or extra files included)."""
    names = {p.relative_to(generated) for p in generated.rglob("*") if p.is_file()}
    if committed.exists():
        names |= {p.relative_to(committed) for p in committed.rglob("*") if p.is_file()}
    return sorted(
        committed / name
        for name in names
        if not (generated / name).is_file()
        or not (committed / name).is_file()
        or not filecmp.cmp(generated / name, committed / name, shallow=False)
    )


def build(check: bool = False, notebook_ids: list[str] | None = None) -> list[Path]:
    """Regenerate (or, with ``check``, only compare) every notebook; return the stale files."""
    ids = notebook_ids or paths.notebook_ids()
    stale = []
    maps_of = {paths.REPO_ROOT / "README.md": maps.readme}
    maps_of |= {paths.SOLUTIONS_DIR / "START_HERE.md": maps.start_here}
    maps_of |= {paths.REPO_ROOT / "autograder" / "MODULES.md": lambda _: maps.module_index()}
    for path, fill in maps_of.items() if notebook_ids is None else []:
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        if fill(text) != text:
            stale.append(path)
            if not check:
                path.write_text(fill(text), encoding="utf-8")
    for page in PAGES if notebook_ids is None else []:
        source, target = paths.SOLUTIONS_DIR / page, paths.COURSE_DIR / page
        if not target.is_file() or not filecmp.cmp(source, target, shallow=False):
            stale.append(target)
            if not check:
                shutil.copyfile(source, target)
    for nb_id in ids:
        target = paths.solution_notebook(nb_id)
        text = instructor_notebook_text(nb_id)
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            stale.append(target)
            if not check:
                target.write_text(text, encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="mha-build-") as tmp:
        run = NbgraderRun(Path(tmp))
        for nb_id in ids:
            source = run.root / "source" / nb_id
            shutil.copytree(paths.SOLUTIONS_DIR / nb_id, source, ignore=run.ignore_patterns())
            (source / f"{nb_id}.ipynb").write_text(instructor_notebook_text(nb_id), "utf-8")
            run.generate(nb_id)
            released, committed = run.root / "release" / nb_id, paths.COURSE_DIR / nb_id
            changed = _changed_files(released, committed)
            stale += changed
            if changed and not check:
                shutil.rmtree(committed, ignore_errors=True)
                shutil.copytree(released, committed)
    return stale
