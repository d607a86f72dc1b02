"""The nbgrader configuration shared by the instructors' ``nbgrader_config.py`` and the CLI.

What each setting guards against is measured in ``shared/notes/nbgrader.md``:

- deleted test cells are put back (``add_missing_cells``), so they are graded instead of being
  left "needs manual grade" forever;
- a per-cell timeout, so an infinite loop costs one cell, not the whole run;
- stderr output is dropped before grading (``IgnorePattern``): a correct answer that prints a
  warning keeps its points — a failing test still fails through its exception;
- feedback hides hidden tests and shortens tracebacks (:class:`HideHiddenTests`);
- Validate (JupyterLab's button, ``nbgrader validate``) shows the score, then each failing test
  cell with ``check``'s one-line diagnosis (:class:`~autograder.feedback.ValidationSummary`).
"""

from pathlib import Path

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import GetGrades
from traitlets.config import Config

from autograder.feedback import HideHiddenTests, validation_hooks

COURSE_ID = "mha-course"
CELL_TIMEOUT_S = 60
# nbgrader copies every file of an assignment folder; the jupytext twins stay with the instructor.
IGNORED_FILES = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.py"]


def apply_common(c: Config) -> Config:
    """Settings every nbgrader run of this course uses, whatever its directories."""
    c.CourseDirectory.course_id = COURSE_ID
    c.CourseDirectory.ignore = IGNORED_FILES
    c.OverwriteCells.add_missing_cells = True
    c.Execute.timeout = CELL_TIMEOUT_S
    c.Execute.interrupt_on_timeout = True
    c.IgnorePattern.enabled = True
    c.IgnorePattern.pattern = r"[\s\S]"
    c.GenerateFeedback.preprocessors = [GetGrades, HideHiddenTests, CSSHTMLHeaderPreprocessor]
    validation_hooks(c)
    return c


def course_config(root: Path) -> Config:
    """The repository as an nbgrader course: source step ``solutions/``, release ``course/``."""
    c = apply_common(Config())
    c.CourseDirectory.root = str(root)
    c.CourseDirectory.source_directory = "solutions"
    c.CourseDirectory.release_directory = "course"
    c.CourseDirectory.db_url = f"sqlite:///{root / 'gradebook.db'}"
    c.Exchange.root = str(root / "nbgrader_exchange")
    return c


def scratch_config(root: Path) -> Config:
    """A throwaway course in ``root`` with nbgrader's default folder names (``source/``…)."""
    c = apply_common(Config())
    c.CourseDirectory.root = str(root)
    c.CourseDirectory.db_url = f"sqlite:///{root / 'gradebook.db'}"
    c.Exchange.root = str(root / "exchange")
    return c
