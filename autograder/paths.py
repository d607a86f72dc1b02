"""Where things live in the repository, and which notebooks make up the course."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS_DIR = REPO_ROOT / "solutions"
COURSE_DIR = REPO_ROOT / "course"
WORK_DIR = REPO_ROOT / "work"
# work/'s read-only copy of the instructor notebooks, one folder down from the exercises.
MODEL_ANSWERS = Path("reference") / "model_answers"
# Beside a notebook: the grades `check` saved for it (saved_grades), never course content.
SAVED_GRADES = ".autograder-grades"
# Notebooks whose id changed, old -> new: a learner's copy under the old name is never touched,
# and `check` says where its exercises went instead of failing to recognise it.
RENAMED = {  # 08 is now long context and 09 the serving notebook, before interviews
    "08_interview_prep": "10_interview_prep",
    "09_interview_prep": "10_interview_prep",
}


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


def find_learner_notebook(folder: Path, notebook_id: str) -> Path | None:
    """``folder/<id>/<id>.ipynb`` (the layout of ``work/``) or ``folder/<id>.ipynb``."""
    for candidate in (
        folder / notebook_id / f"{notebook_id}.ipynb",
        folder / f"{notebook_id}.ipynb",
    ):
        if candidate.is_file():
            return candidate
    return None


def notebook_argument(text: str) -> Path:
    """The notebook a learner names: a path, its folder, or a notebook's number or id (``01``).

    A number or id is looked for in the current folder (so ``check 01`` works in a JupyterLab
    terminal in ``work/`` or in the notebook's own folder), then in ``work/``. Anything else is
    returned as a path, for the caller to report.
    """
    given = Path(text)
    if given.is_dir():  # a notebook's folder, e.g. work/01_attention_from_scratch
        return find_learner_notebook(given.parent, given.name) or given
    if given.exists() or given.suffix:
        return given
    ids = [i for i in notebook_ids() if i == text or i.startswith(text.rstrip("_") + "_")]
    if len(ids) != 1:
        return given
    for folder in (Path.cwd(), WORK_DIR):
        found = find_learner_notebook(folder, ids[0])
        if found is not None:
            return found
    return given


def grading_code() -> list[Path]:
    """Every file of the package that can decide a grade: checks, kernel, tools and their data,
    helpers (everything but the benchmarks). Hashing all of it follows every real import."""
    package = REPO_ROOT / "autograder"
    return sorted(
        p
        for p in package.rglob("*")
        if p.is_file()
        and "__pycache__" not in p.parts
        and p.relative_to(package).parts[0] not in ("bench", "jupyter_config")
        and p.suffix not in (".md", ".pyc")
    )
