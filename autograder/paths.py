"""Where things live in the repository, and which notebooks make up the course."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS_DIR = REPO_ROOT / "solutions"
COURSE_DIR = REPO_ROOT / "course"
WORK_DIR = REPO_ROOT / "work"


def notebook_ids() -> list[str]:
    """The course's notebook ids, in order: every ``solutions/<id>/<id>.py``."""
    if not SOLUTIONS_DIR.is_dir():
        return []
    return sorted(p.name for p in SOLUTIONS_DIR.iterdir() if (p / f"{p.name}.py").is_file())


def source_text(notebook_id: str) -> Path:
    """The hand-edited source of a notebook: a jupytext percent-format twin of the ``.ipynb``."""
    return SOLUTIONS_DIR / notebook_id / f"{notebook_id}.py"


def solution_notebook(notebook_id: str) -> Path:
    """The instructor notebook: nbgrader's source step, generated from :func:`source_text`."""
    return SOLUTIONS_DIR / notebook_id / f"{notebook_id}.ipynb"


def release_notebook(notebook_id: str) -> Path:
    """The learner notebook: nbgrader's release step, generated from the instructor notebook."""
    return COURSE_DIR / notebook_id / f"{notebook_id}.ipynb"
