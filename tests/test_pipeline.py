"""The real nbgrader pipeline, driven from the repository's own nbgrader_config.py.

A temporary copy of the course (config, solutions/, a SQLite gradebook) goes through nbgrader's own
commands: generate_assignment, autograde of several submissions, generate_feedback, export.
"""

import csv
import html
import re
import shutil
import sys
from pathlib import Path

import background
import nbformat
import pytest
from nbgrader.api import Gradebook

from autograder import nbcell, paths
from autograder.grader.feedback import HIDDEN_REGION
from conftest import REPO, run

pytestmark = pytest.mark.slow


def _first_answer(nb) -> str:
    return next(nbcell.grade_id(c) for c in nb.cells if nbcell.is_answer(c))


def _submissions(nb_id: str) -> dict[str, nbformat.NotebookNode]:
    """Notebooks for several students, each probing one behaviour of the grading set-up."""
    solution = nbformat.read(paths.solution_notebook(nb_id), as_version=4)
    release = nbformat.read(paths.release_notebook(nb_id), as_version=4)

    tampered = nbformat.from_dict(release)  # stub answers, tests edited to pass or deleted
    for i, cell in enumerate(tampered.cells):
        if nbcell.is_test(cell):
            cell.source = "pass" if i % 2 else cell.source
    tampered.cells = [
        c for i, c in enumerate(tampered.cells) if not (nbcell.is_test(c) and i % 3 == 0)
    ]

    deleted_tests = nbformat.from_dict(solution)  # right answers, every test cell deleted
    deleted_tests.cells = [c for c in deleted_tests.cells if not nbcell.is_test(c)]

    noisy = nbformat.from_dict(solution)  # right answers that also write to stderr and warn
    name = _first_answer(solution)
    position = next(i for i, c in enumerate(noisy.cells) if nbcell.grade_id(c) == name)
    noisy.cells.insert(
        position + 1,
        nbformat.v4.new_code_cell(
            "import sys, warnings\n"
            f"_original = {name}\n"
            f"def {name}(*args, **kwargs):\n"
            "    print('debugging output', file=sys.stderr)\n"
            "    warnings.warn('a harmless warning')\n"
            "    return _original(*args, **kwargs)\n"
        ),
    )
    return {
        "correct": solution,
        "stub": release,
        "tampered": tampered,
        "deleted": deleted_tests,
        "noisy": noisy,
    }


def _grade_course(root: Path) -> tuple:
    """nbgrader's own commands on a copy of notebook 01's course: a background job (a thread:
    its checks sit between the commands), beside the other tests."""
    first_notebook = paths.notebook_ids()[0]
    shutil.copyfile(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    shutil.copytree(paths.SOLUTIONS_DIR / first_notebook, root / "solutions" / first_notebook)
    nbgrader = [sys.executable, "-m", "nbgrader"]

    result = run([*nbgrader, "generate_assignment", first_notebook], cwd=root)
    assert result.returncode == 0, result.stderr
    submissions = _submissions(first_notebook)
    for student, nb in submissions.items():
        target = root / "submitted" / student / first_notebook / f"{first_notebook}.ipynb"
        target.parent.mkdir(parents=True)
        nbformat.write(nb, target)
    result = run([*nbgrader, "autograde", first_notebook], cwd=root)
    assert result.returncode == 0, result.stderr[-3000:]
    result = run([*nbgrader, "generate_feedback", first_notebook], cwd=root)
    assert result.returncode == 0, result.stderr[-3000:]
    result = run([*nbgrader, "export"], cwd=root)
    assert result.returncode == 0, result.stderr[-3000:]
    return root, first_notebook, sorted(submissions)


@background.job("graded_course", cores=0.5, rank=15)
def _start_pipeline(folder: Path) -> background.ThreadJob:
    return background.ThreadJob(lambda stack: _grade_course(folder), folder)


@pytest.fixture(scope="module")
def graded_course():
    if not paths.notebook_ids():
        pytest.skip("no notebooks in solutions/")
    return background.start("graded_course").wait()


def _scores(root, nb_id, student):
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        sub = gb.find_submission(nb_id, student)
        grades = [g for nb in sub.notebooks for g in nb.grades if g.cell_type == "code"]
        return sub.score, sub.max_score, [g.needs_manual_grade for g in grades], len(grades)


def test_release_is_generated_where_the_config_says(graded_course):
    root, nb_id, _ = graded_course
    released = nbformat.read(root / "course" / nb_id / f"{nb_id}.ipynb", as_version=4)
    text = "\n".join(c.source for c in released.cells)
    assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
    assert "raise NotImplementedError()" in text


def test_correct_submission_gets_full_marks(graded_course):
    score, max_score, manual, _ = _scores(*graded_course[:2], "correct")
    assert max_score > 0 and score == max_score and not any(manual)


def test_stub_scores_zero(graded_course):
    score, _, _, _ = _scores(*graded_course[:2], "stub")
    assert score == 0


def test_tampered_tests_are_restored(graded_course):
    root, nb_id, _ = graded_course
    score, _, manual, n_tests = _scores(root, nb_id, "tampered")
    _, _, _, n_expected = _scores(root, nb_id, "correct")
    assert score == 0 and n_tests == n_expected and not any(manual)


def test_deleted_tests_are_added_back_and_pass(graded_course):
    score, max_score, manual, _ = _scores(*graded_course[:2], "deleted")
    assert score == max_score and not any(manual)


def test_stderr_and_warnings_keep_their_points(graded_course):
    score, max_score, _, _ = _scores(*graded_course[:2], "noisy")
    assert score == max_score


def _hidden_test_lines(nb_id: str) -> set[str]:
    nb = nbformat.read(paths.solution_notebook(nb_id), as_version=4)
    return {
        line.strip()
        for cell in nb.cells
        if nbcell.is_test(cell)
        for region in HIDDEN_REGION.findall(cell.source)
        for line in region.splitlines()[1:-1]
        if line.strip()
    }


def test_feedback_hides_hidden_tests(graded_course):
    root, nb_id, students = graded_course
    hidden = _hidden_test_lines(nb_id)
    assert hidden, "the notebook has no hidden tests to hide"
    for student in students:
        page = (root / "feedback" / student / nb_id / f"{nb_id}.html").read_text()
        text = html.unescape(re.sub(r"<[^>]+>", "", page))
        assert "BEGIN HIDDEN TESTS" not in text
        assert "hidden tests run here" in text
        leaked = [line for line in hidden if line in text]
        assert not leaked, f"{student}'s feedback shows hidden test code: {leaked[:2]}"
    stub_text = (root / "feedback" / "stub" / nb_id / f"{nb_id}.html").read_text()
    assert "not implemented yet" in stub_text


def test_export_lists_every_student(graded_course):
    root, nb_id, students = graded_course
    with open(root / "grades.csv", newline="") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f) if r["assignment"] == nb_id}
    assert sorted(rows) == students
    assert float(rows["stub"]["raw_score"]) == 0
    assert float(rows["correct"]["raw_score"]) == float(rows["correct"]["max_score"]) > 0


def test_a_notebook_graded_without_a_run_record_is_a_grading_failure(tmp_path, monkeypatch):
    """nbgrader that reports success without running the notebook leaves no record of the run:
    the cells would read as never checked (a silent zero), so the submission is graded again."""
    from autograder.grader.isolation import Limits
    from autograder.grader.pipeline import GradingFailed, GradingRun

    nb_id = paths.notebook_ids()[0]
    run = GradingRun(tmp_path / "course", Limits(), tmp_path / "kernel", verify=False)
    release = run.root / "release" / nb_id
    release.mkdir(parents=True)
    shutil.copyfile(paths.release_notebook(nb_id), release / f"{nb_id}.ipynb")
    handed_in = tmp_path / "handed_in"
    handed_in.mkdir()
    shutil.copyfile(paths.solution_notebook(nb_id), handed_in / f"{nb_id}.ipynb")
    monkeypatch.setattr(run.nbgrader, "autograde", lambda *a: {"success": True})
    with pytest.raises(GradingFailed, match=f"graded {nb_id}.ipynb without running it"):
        run.autograde(nb_id, "learner", handed_in)
