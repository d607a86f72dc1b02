"""The nbgrader configuration shared by the instructors' ``nbgrader_config.py`` and the CLI.

What each setting guards against is measured in ``shared/notes/nbgrader.md``:

- deleted test cells are put back (``add_missing_cells``), so they are graded instead of being
  left "needs manual grade" forever;
- a per-cell timeout, so an infinite loop costs one cell, not the whole run; under ``check``,
  each cell's own, from what the solution takes there (:mod:`autograder.grader.cell_limits`);
- stderr output is dropped before grading (``IgnorePattern``): a correct answer that prints a
  warning keeps its points — a failing test still fails through its exception;
- feedback hides hidden tests and shortens tracebacks (:class:`HideHiddenTests`);
- Validate (JupyterLab's button, ``nbgrader validate``) shows the score, then each failing test
  cell with ``check``'s one-line diagnosis (:class:`~autograder.grader.feedback.ValidationSummary`).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    GetGrades,
    IgnorePattern,
    LimitOutput,
    SaveAutoGrades,
)
from traitlets.config import Config

from autograder import paths
from autograder.grader import cell_limits
from autograder.grader.feedback import (
    ClassroomFeedback,
    FeedbackExporter,
    HideHiddenTests,
    Sanitize,
    validation_hooks,
)
from autograder.grader.isolation import Limits
from autograder.grader.launch import sandbox_settings

if TYPE_CHECKING:
    from autograder.grader.execute import RunRecords

COURSE_ID = "mha-course"
CELL_TIMEOUT_S = 60
# nbgrader copies every file of an assignment folder; the jupytext twins stay with the instructor.
# check's saved grades beside a notebook (a solution checked in place) are never released either.
IGNORED_FILES = [
    ".ipynb_checkpoints",
    "*.pyc",
    "__pycache__",
    "feedback",
    "*.py",
    paths.SAVED_GRADES,
]


def feedback_preprocessors(classroom: bool) -> list:
    """nbgrader's feedback steps: a class's feedback also drops what the kernel printed."""
    if not classroom:
        return [GetGrades, HideHiddenTests, CSSHTMLHeaderPreprocessor]
    return [GetGrades, ClassroomFeedback, Sanitize, CSSHTMLHeaderPreprocessor]


def apply_common(c: Config) -> Config:
    """Settings every nbgrader run of this course uses, whatever its directories."""
    c.CourseDirectory.course_id = COURSE_ID
    c.CourseDirectory.ignore = IGNORED_FILES
    c.OverwriteCells.add_missing_cells = True
    c.Execute.timeout = CELL_TIMEOUT_S
    c.Execute.interrupt_on_timeout = True
    c.Execute.kernel_manager_class = "autograder.grader.kernel_channels.KernelManager"
    c.IgnorePattern.enabled = True
    c.IgnorePattern.pattern = r"[\s\S]"
    c.GenerateFeedback.preprocessors = feedback_preprocessors(classroom=False)
    c.GenerateFeedback.exporter_class = FeedbackExporter
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


def class_config(root: Path) -> Config:
    """nbgrader settings of a graded class folder (its ``nbgrader_config.py``): the shared ones,
    and a class's feedback."""
    c = scratch_config(root)
    c.GenerateFeedback.preprocessors = feedback_preprocessors(classroom=True)
    c.HTMLExporter.sanitize_html = True  # the formgrader's pages of learner notebooks
    return c


def grading_config(
    limits: Limits, runtime: Path, verify: bool, records: RunRecords, uid: int | None = None
) -> Config:
    """How ``check`` and ``grade`` autograde: in the sandbox, under :class:`GradingExecute`
    (each notebook's run recorded in ``records``), with a class's feedback."""
    # here, not at the top: it imports torch (about a second), which every nbgrader command
    # run with the course's nbgrader_config.py and every grade run's parent process did not need
    from autograder.grader.execute import GradingExecute

    c = Config()
    c.Autograde.autograde_preprocessors = [
        GradingExecute,
        IgnorePattern,
        ClearMetadataPreprocessor,
        LimitOutput,
        SaveAutoGrades,
        AssignLatePenalties,
        CheckCellMetadata,
    ]
    c.Execute.timeout = limits.cell_timeout_s
    if not verify:  # check: each cell's own limit (grade re-checks within the cell's limit)
        c.Execute.timeout_func = functools.partial(cell_limits.limit, cap_s=limits.cell_timeout_s)
    c.Execute.shutdown_kernel = "immediate"
    c.GradingExecute.notebook_budget = limits.notebook_budget_s
    c.GradingExecute.output_limit = limits.output_bytes
    c.GradingExecute.notebook_output_limit = limits.notebook_output_bytes
    c.GradingExecute.verify = verify
    c.GradingExecute.records = records
    c.GenerateFeedback.preprocessors = feedback_preprocessors(classroom=True)
    sandbox_settings(c, runtime, uid)
    return c
