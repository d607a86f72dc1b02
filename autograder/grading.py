"""Grade learner notebooks through real nbgrader autograde, and explain each test cell's result.

The nbgrader run is the classroom's (:mod:`autograder.classroom`): the submission is repaired
first (duplicated, deleted or metadata-stripped cells: ``structure.prepare``), and the notebook
runs under ``GradingExecute`` (a time budget, output caps, definite grades when the kernel dies or
ignores an interrupt), in the classroom's sandbox where bubblewrap works. Verification outside the
kernel is ``grade``'s alone.
"""

import contextlib
import os
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat
from tqdm import tqdm

from autograder import nbcell, paths
from autograder.classroom.isolation import Limits
from autograder.nbgrader_run import NbgraderRun


@dataclass
class CellResult:
    grade_id: str
    score: float
    max_score: float
    passed: bool
    message: str


@dataclass
class NotebookResult:
    notebook: str
    notebook_id: str
    score: float = 0.0
    max_score: float = 0.0
    cells: list[CellResult] = field(default_factory=list)
    manual: list[dict] = field(default_factory=list)
    error: str | None = None
    stopped: str | None = None  # why the notebook stopped early (the cells after it scored 0)
    notes: list[str] = field(default_factory=list)  # what was repaired or cut before grading

    @property
    def full_marks(self) -> bool:
        return self.error is None and bool(self.cells) and all(c.passed for c in self.cells)

    def to_json(self) -> dict:
        data = asdict(self)
        data.pop("notebook_id")
        for optional in ("error", "stopped", "notes"):
            if not data[optional]:
                data.pop(optional)
        return data


@dataclass
class Submission:
    notebook_id: str
    student_id: str
    path: Path


def _first_line(text: str) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def explain_error(ename: str, evalue: str) -> str:
    """One line for a learner from a test cell's exception."""
    evalue = _first_line(re.sub(r"\x1b\[[0-9;]*m", "", evalue))
    if ename == "NotRun":  # classroom GradingExecute: the cell could not run, and why
        return evalue
    if ename == "NotImplementedError":
        return "not implemented yet: replace `raise NotImplementedError()` with your code"
    if ename == "NameError":
        name = re.search(r"'([^']+)'", evalue)
        what = f"`{name.group(1)}`" if name else "a name this test needs"
        return (
            f"{what} is not defined: run the cell that defines it, and check that cell "
            "ran without an error and that nothing was renamed"
        )
    if ename in {"CellTimeoutError", "TimeoutError", "DeadKernelError"} or "timed out" in evalue:
        detail = f" ({evalue})" if evalue else ""
        return f"the test did not finish in time{detail}: look for an endless loop"
    if ename in {"AssertionError", "CheckFailure"}:
        return evalue or "an assertion failed (it gave no message)"
    return f"{ename}: {evalue}" if evalue else ename


def _messages(notebook: Path) -> dict[str, str]:
    """grade_id -> one-line explanation, for every graded cell that ended in an error."""
    if not notebook.is_file():
        return {}
    nb = nbformat.read(notebook, as_version=4)
    messages = {}
    for cell in nb.cells:
        grade_id = nbcell.grade_id(cell)
        errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
        if grade_id and errors:
            messages[grade_id] = explain_error(errors[-1].ename, errors[-1].evalue)
    return messages


def _graded_cells(notebook_id: str) -> tuple[list[str], set[str]]:
    """The instructor notebook's grade ids in order, and those graded by hand (written answers)."""
    nb = nbformat.read(paths.solution_notebook(notebook_id), as_version=4)
    graded = [c for c in nb.cells if nbcell.is_graded(c)]
    answers = {nbcell.grade_id(c) for c in graded if nbcell.is_answer(c)}
    return [nbcell.grade_id(c) for c in graded], answers


def _result_from_gradebook(run: NbgraderRun, sub: Submission) -> NotebookResult:
    result = NotebookResult(notebook=str(sub.path), notebook_id=sub.notebook_id)
    messages = _messages(run.autograded_notebook(sub.notebook_id, sub.student_id))
    order, manual = _graded_cells(sub.notebook_id)
    with run.gradebook() as gb:
        submission = gb.find_submission(sub.notebook_id, sub.student_id)
        grades = [
            (g.name, g.auto_score, g.max_score) for nb in submission.notebooks for g in nb.grades
        ]
    position = {grade_id: i for i, grade_id in enumerate(order)}
    for name, auto_score, max_score in sorted(grades, key=lambda g: position.get(g[0], len(order))):
        if name in manual:
            result.manual.append({"grade_id": name, "max_score": float(max_score)})
            continue
        score = float(auto_score or 0.0)
        passed = score >= max_score
        message = "" if passed else messages.get(name, "this test did not pass")
        result.cells.append(CellResult(name, score, float(max_score), passed, message))
    result.score = sum(c.score for c in result.cells)
    result.max_score = sum(c.max_score for c in result.cells)
    return result


def _grade_one(run: NbgraderRun, records: dict, sub: Submission) -> NotebookResult:
    from autograder.classroom.structure import SubmissionError, prepare

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
    from autograder.classroom.execute import RunRecords
    from autograder.classroom.isolation import detect, prepare_font_cache
    from autograder.classroom.launch import prepare_runtime, write_kernelspec
    from autograder.classroom.worker import nbgrader_config

    iso = detect()
    fonts = prepare_font_cache(tmp / "fonts") if iso.sandboxed else None
    write_kernelspec(tmp / "jupyter", iso, limits, None, fonts)
    records = RunRecords()
    config = nbgrader_config(limits, prepare_runtime(tmp / "kernel"), verify=False, records=records)
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
