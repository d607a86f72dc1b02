"""`progress`: an untouched work/ is "not started" everywhere, in seconds, without grading."""

import json
import shutil
from types import SimpleNamespace

import pytest

from autograder import nbcell, paths, progress
from autograder.cli import main
from autograder.grader import one_notebook
from conftest import autograder


def test_untouched_work_is_not_started_and_fast(tmp_path):
    work = tmp_path / "work"
    shutil.copytree(paths.COURSE_DIR, work)
    before = sorted(work.rglob("*"))
    result = autograder("progress", str(work))
    assert result.returncode == 0, result.stdout + result.stderr  # nothing is wrong
    lines = result.stdout.strip().splitlines()
    assert len(lines) == len(paths.notebook_ids()) + 1, lines
    assert all(line.endswith("not started") for line in lines[:-1]), lines
    assert lines[-1].split()[1].startswith("0/"), lines[-1]
    assert "grading" not in result.stderr  # no progress bar: nothing was graded
    assert sorted(work.rglob("*")) == before  # and no grade saved: fast because nothing ran


def test_not_started_compares_answers_with_the_release(tmp_path, first_notebook):
    released = paths.release_notebook(first_notebook)
    nb = json.loads(released.read_text())
    for cell in nb["cells"]:  # what opening and running it in JupyterLab changes
        cell["metadata"]["collapsed"] = False
        if cell["cell_type"] == "code":
            cell["execution_count"] = 1
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "hi"}]
    mine = tmp_path / released.name
    mine.write_text(json.dumps(nb))
    assert progress.not_started(mine, first_notebook)
    answer = next(c for c in nb["cells"] if nbcell.is_answer(c))
    answer["source"] = "def softmax(x, dim=-1):\n    return x\n"
    mine.write_text(json.dumps(nb))
    assert not progress.not_started(mine, first_notebook)
    mine.write_text("{not json")
    assert not progress.not_started(mine, first_notebook)


@pytest.mark.parametrize(
    "error, exit_status", [(None, 0), ("the kernel died", 2)], ids=["in_progress", "ungradable"]
)
def test_exit_status_is_zero_unless_something_is_wrong(
    tmp_path, first_notebook, monkeypatch, capsys, error, exit_status
):
    work = tmp_path / "work"
    shutil.copytree(paths.COURSE_DIR, work)
    mine = paths.find_learner_notebook(work, first_notebook)
    nb = json.loads(mine.read_text())
    next(c for c in nb["cells"] if nbcell.is_answer(c))["source"] = (
        "def softmax(x):\n    return x\n"
    )
    mine.write_text(json.dumps(nb))

    def grade(submissions, **kwargs):
        (submission,) = submissions
        failing = SimpleNamespace(grade_id="test_softmax_matches_torch", passed=False)
        return [
            SimpleNamespace(
                notebook_id=submission.notebook_id,
                score=0,
                max_score=10,
                manual=[],
                error=error,
                full_marks=False,
                cells=[failing],
            )
        ]

    monkeypatch.setattr(one_notebook, "grade_submissions", grade)
    assert main(["progress", str(work)]) == exit_status, capsys.readouterr().out
    mine.write_text("{not json")
    assert main(["progress", str(work)]) == 2
    assert "unreadable" in capsys.readouterr().out


def test_unchanged_notebooks_keep_their_last_grade_and_changed_ones_are_regraded(
    tmp_path, first_notebook, monkeypatch, capsys
):
    from autograder.grader.results import CellResult, NotebookResult

    work = tmp_path / "work"
    shutil.copytree(paths.COURSE_DIR, work)
    mine = paths.find_learner_notebook(work, first_notebook)
    nb = json.loads(mine.read_text())
    answer = next(c for c in nb["cells"] if nbcell.is_answer(c))
    answer["source"] = "def softmax(x):\n    return x\n"
    mine.write_text(json.dumps(nb))
    graded = []

    def grade(submissions, **kwargs):
        graded.extend(s.notebook_id for s in submissions)
        cell = CellResult("test_softmax_matches_torch", 0.0, 2.0, False, "wrong")
        return [NotebookResult(str(s.path), s.notebook_id, 0.0, 2.0, [cell]) for s in submissions]

    monkeypatch.setattr(one_notebook, "grade_submissions", grade)
    assert main(["progress", str(work)]) == 0
    first = capsys.readouterr()
    assert graded == [first_notebook] and "Grading 1 notebook(s) changed" in first.err
    assert main(["progress", str(work)]) == 0  # nothing changed: the saved grade, no grading
    second = capsys.readouterr()
    assert graded == [first_notebook] and "Grading" not in second.err
    assert second.out == first.out  # the same lines, from the saved grade
    answer["source"] = "def softmax(x):\n    return x * 1\n"
    mine.write_text(json.dumps(nb))
    assert main(["progress", str(work)]) == 0
    assert graded == [first_notebook] * 2  # the file changed: graded again

    code = tmp_path / "grader.py"
    code.write_text("x = 1\n")
    monkeypatch.setattr(paths, "grading_code", lambda: [code])
    assert main(["progress", str(work)]) == 0
    code.write_text("x = 2\n")  # the grader changed: every saved grade is stale
    assert main(["progress", str(work)]) == 0
    assert graded == [first_notebook] * 4


def test_a_notebook_that_could_not_be_graded_still_counts_in_the_total(
    tmp_path, first_notebook, monkeypatch, capsys
):
    """A grading kernel that dies gives a result with no cells: its notebook's points must stay
    in the total (scored 0), and the total must say why, instead of the total quietly shrinking."""
    from autograder.grader.results import NotebookResult

    work = tmp_path / "work"
    shutil.copytree(paths.COURSE_DIR, work)
    mine = paths.find_learner_notebook(work, first_notebook)
    nb = json.loads(mine.read_text())
    next(c for c in nb["cells"] if nbcell.is_answer(c))["source"] = "def softmax(x):\n    pass\n"
    mine.write_text(json.dumps(nb))

    def grade(submissions, **kwargs):
        (sub,) = submissions
        return [NotebookResult(str(sub.path), sub.notebook_id, error="the kernel died")]

    monkeypatch.setattr(one_notebook, "grade_submissions", grade)
    assert main(["progress", str(work)]) == 2
    lines = capsys.readouterr().out.splitlines()
    everything = sum(progress._points(nb_id)[0] for nb_id in paths.notebook_ids())
    total = next(line for line in lines if line.startswith("total"))
    assert total.split()[1] == f"0/{everything:g}", total
    assert "1 notebook could not be graded" in total and "scored 0" in total, total
    mine_line = next(line for line in lines if line.startswith(first_notebook))
    assert f"0/{progress._points(first_notebook)[0]:g}" in mine_line, mine_line
    assert "could not be graded: the kernel died" in mine_line, mine_line
