"""Grade learner notebooks through real nbgrader autograde, and explain each test cell's result.

The nbgrader run is the classroom's (:mod:`autograder.classroom`): the submission is repaired
first (duplicated, deleted or metadata-stripped cells: ``structure.prepare``), and the notebook
runs under ``GradingExecute`` (a time budget, output caps, definite grades when the kernel dies or
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
from autograder.grader.results import CellResult, NotebookResult, read_notebook

__all__ = ["CellResult", "NotebookResult", "Submission", "grade_submissions"]


@dataclass
class Submission:
    notebook_id: str
    student_id: str
    path: Path


def _result_from_gradebook(run: NbgraderRun, sub: Submission) -> NotebookResult:
    autograded = run.autograded_notebook(sub.notebook_id, sub.student_id)
    with run.gradebook() as gb:
        graded = read_notebook(gb, autograded, sub.notebook_id, sub.notebook_id, sub.student_id)
    graded.result.notebook = str(sub.path)
    return graded.result


def _grade_one(run: NbgraderRun, records: dict, sub: Submission) -> NotebookResult:
    from autograder.grader.structure import SubmissionError, prepare

    nb_id, name = sub.notebook_id, f"{sub.notebook_id}.ipynb"
    failed = NotebookResult(notebook=str(sub.path), notebook_id=nb_id)
    expected = {name: run.root / "release" / nb_id / name}
    with tempfile.TemporaryDirectory(prefix="mha-submission-") as folder:
        shutil.copyfile(sub.path, Path(folder) / name)  # the notebook alone, never its neighbours
        try:
            notes = prepare(Path(folder), expected, run.root / "submitted" / sub.student_id / nb_id)
        except SubmissionError as err:
            failed.error = str(err)
            return failed
    records.clear()
    outcome = run.autograde(nb_id, sub.student_id)
    ran = records.get(nb_id, {})
    if ran.get("kernel_failed_to_start"):
        failed.error = (
            f"the grading kernel could not start (not your notebook's fault): {ran['stopped']}"
        )
        return failed
    if not outcome.get("success"):
        failed.error = f"nbgrader could not grade this notebook: {run.failure_reason(outcome)}"
        return failed
    result = _result_from_gradebook(run, sub)
    result.notes = notes
    if ran.get("truncated"):
        result.notes.append(f"the output of {ran['truncated']} cell(s) was cut at the size cap")
    if ran.get("stopped"):
        result.stopped = f"{ran['stopped']}; the cells after it scored 0"
    return result


@contextlib.contextmanager
def _grading_course(tmp: Path, limits: Limits):
    """(An nbgrader run with the classroom's settings, verification off, sandboxed if possible,
    the records of its notebooks' runs)."""
    from autograder.grader.execute import RunRecords
    from autograder.grader.isolation import detect, prepare_font_cache
    from autograder.grader.launch import prepare_runtime, write_kernelspec
    from autograder.grader.nbgrader_settings import grading_config

    iso = detect()
    fonts = prepare_font_cache(tmp / "fonts") if iso.sandboxed else None
    write_kernelspec(tmp / "jupyter", iso, limits, None, fonts)
    records = RunRecords()
    config = grading_config(limits, prepare_runtime(tmp / "kernel"), verify=False, records=records)
    saved = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(tmp / "jupyter"), saved]))
    try:
        yield NbgraderRun(tmp / "course", config), records
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
        with _grading_course(Path(tmp), limits or Limits()) as (run, records):
            for nb_id in sorted({s.notebook_id for s in submissions}):
                source = run.root / "source" / nb_id
                shutil.copytree(paths.SOLUTIONS_DIR / nb_id, source, ignore=run.ignore_patterns())
                run.generate(nb_id)
            bar = tqdm(submissions, desc="grading", unit="notebook", disable=not show_progress)
            results = []
            for sub in bar:
                bar.set_postfix_str(sub.notebook_id)
                results.append(_grade_one(run, records, sub))
            return results
