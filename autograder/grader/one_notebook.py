"""Grade learner notebooks through real nbgrader autograde, and explain each test cell's result.

The steps are ``grade``'s (:mod:`.pipeline`): the submission is repaired first (duplicated,
deleted or metadata-stripped cells: ``structure.prepare``), and the notebook runs under
``GradingExecute`` (a time budget, output caps, definite grades when the kernel dies or
ignores an interrupt), in the classroom's sandbox where bubblewrap works. Verification outside the
kernel is ``grade``'s alone.
"""

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from autograder import paths
from autograder.grader.isolation import Limits
from autograder.grader.nbgrader_run import NbgraderRun
from autograder.grader.pipeline import GradingFailed, GradingRun
from autograder.grader.results import CellResult, NotebookResult, read_notebook
from autograder.grader.structure import SubmissionError

__all__ = ["CellResult", "NotebookResult", "Submission", "grade_submissions"]


@dataclass
class Submission:
    notebook_id: str
    student_id: str
    path: Path


def _result_from_gradebook(run: GradingRun, sub: Submission) -> NotebookResult:
    autograded = run.nbgrader.autograded_notebook(sub.notebook_id, sub.student_id)
    with run.nbgrader.gradebook() as gb:
        graded = read_notebook(gb, autograded, sub.notebook_id, sub.notebook_id, sub.student_id)
    graded.result.notebook = str(sub.path)
    return graded.result


def _grade_one(run: GradingRun, sub: Submission) -> NotebookResult:
    nb_id, name = sub.notebook_id, f"{sub.notebook_id}.ipynb"
    with tempfile.TemporaryDirectory(prefix="mha-submission-") as folder:
        shutil.copyfile(sub.path, Path(folder) / name)  # the notebook alone, never its neighbours
        try:
            done = run.autograde(nb_id, sub.student_id, Path(folder))
        except (SubmissionError, GradingFailed) as err:
            return NotebookResult(notebook=str(sub.path), notebook_id=nb_id, error=str(err))
    ran = done.runs[nb_id]  # autograde raised if it is missing
    result = _result_from_gradebook(run, sub)
    result.notes = done.notes
    if ran.get("truncated"):
        result.notes.append(f"the output of {ran['truncated']} cell(s) was cut at the size cap")
    if ran.get("stopped"):
        result.stopped = f"{ran['stopped']}; the cells after it scored 0"
    return result


@contextlib.contextmanager
def _grading_course(tmp: Path, limits: Limits):
    """An nbgrader run with the classroom's settings, verification off, sandboxed if possible."""
    from autograder.grader.isolation import detect, prepare_font_cache, shared_font_cache
    from autograder.grader.launch import prepare_runtime, write_kernelspec

    iso = detect()
    fonts = None
    if iso.sandboxed:
        fonts = shared_font_cache() or prepare_font_cache(tmp / "fonts")
    write_kernelspec(tmp / "jupyter", iso, limits, None, fonts)
    saved = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(tmp / "jupyter"), saved]))
    try:
        yield GradingRun(tmp / "course", limits, prepare_runtime(tmp / "kernel"), verify=False)
    finally:
        if saved is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = saved


def grade_submissions(
    submissions: list[Submission], show_progress: bool = False, limits: Limits | None = None
) -> list[NotebookResult]:
    """Autograde submissions in one throwaway course, hidden tests included.

    ``show_progress`` draws a progress bar on stderr (a terminal's, never a notebook's);
    ``limits`` gives the time limits (default: 60 s per cell, 300 s per notebook).
    """
    with tempfile.TemporaryDirectory(prefix="mha-grade-") as tmp:
        with _grading_course(Path(tmp), limits or Limits()) as run:
            for nb_id in sorted({s.notebook_id for s in submissions}):
                source = run.root / "source" / nb_id
                ignore = NbgraderRun.ignore_patterns()
                shutil.copytree(paths.SOLUTIONS_DIR / nb_id, source, ignore=ignore)
                run.nbgrader.generate(nb_id)
            bar = tqdm(submissions, desc="grading", unit="notebook", disable=not show_progress)
            results = []
            for sub in bar:
                bar.set_postfix_str(sub.notebook_id)
                results.append(_grade_one(run, sub))
            return results
