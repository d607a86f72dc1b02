"""The model answers stay out of reach while a mock interview is under way.

``make lab`` copies the instructor's notebooks into ``work/reference/model_answers/``
(:func:`unseal`), one folder from ``work/interview/`` in JupyterLab's file browser. Writing an
attempt removes those copies (:func:`seal`); while the attempt is open (:func:`sealed`: not
debriefed, its box not over) the launcher does not put them back, and the debrief does.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from autograder import paths

from . import scorecard


def sealed(work: Path) -> bool:
    """Whether an attempt in ``work/interview/`` is under way."""
    folder = Path(work) / scorecard.FOLDER
    return (folder / scorecard.SCORECARD).is_file() and scorecard.open_attempt(folder) is not None


def seal(work: Path) -> None:
    """Remove the launcher's copies of the model answers from ``work``."""
    folder = Path(work) / paths.MODEL_ANSWERS
    if not folder.is_dir():
        return
    ours = {paths.solution_notebook(i).name for i in paths.notebook_ids()}
    for copy in folder.iterdir():
        if copy.name in ours and copy.is_file():
            copy.chmod(0o644)
            copy.unlink()


def unseal(work: Path) -> bool:
    """Copy each instructor notebook into ``work/reference/model_answers/``, read-only, unless
    an attempt is under way; whether they are there."""
    notebooks = [paths.solution_notebook(i) for i in paths.notebook_ids()]
    notebooks = [n for n in notebooks if n.is_file()]
    if not notebooks or sealed(work):
        return False
    folder = Path(work) / paths.MODEL_ANSWERS
    folder.mkdir(parents=True, exist_ok=True)
    for notebook in notebooks:
        target = folder / notebook.name
        if target.exists():
            target.chmod(0o644)
        shutil.copyfile(notebook, target)
        target.chmod(0o444)  # opened to read: JupyterLab says it is read-only
    return True
