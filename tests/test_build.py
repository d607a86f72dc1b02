"""course/ is generated from solutions/, deterministically; jupytext keeps nbgrader metadata."""

import json
import shutil

import jupytext
import nbformat
import pytest

from autograder import build, nbcell, paths
from conftest import autograder

pytestmark = pytest.mark.slow


def test_course_is_up_to_date():
    result = autograder("build", "--check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_instructor_notebook_is_deterministic(first_notebook):
    text = build.instructor_notebook_text(first_notebook)
    assert text == build.instructor_notebook_text(first_notebook)
    ids = [cell["id"] for cell in json.loads(text)["cells"]]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("notebook_id", paths.notebook_ids())
def test_jupytext_keeps_nbgrader_metadata(notebook_id):
    """The .py twin and the .ipynb carry the same nbgrader metadata, cell by cell."""
    committed = nbformat.read(paths.solution_notebook(notebook_id), as_version=4)
    twin = jupytext.read(paths.source_text(notebook_id))
    meta = [c.metadata.get("nbgrader") for c in committed.cells]
    assert meta == [c.metadata.get("nbgrader") for c in twin.cells]
    grade_ids = [m["grade_id"] for m in meta if m]
    assert len(grade_ids) == len(set(grade_ids)), "duplicate grade ids"
    back = jupytext.writes(committed, fmt="py:percent")
    assert [
        c.metadata.get("nbgrader") for c in jupytext.reads(back, fmt="py:percent").cells
    ] == meta


def test_check_names_a_stale_notebook(tmp_path, monkeypatch, first_notebook):
    for name in ("solutions", "course"):
        shutil.copytree(paths.REPO_ROOT / name, tmp_path / name)
    monkeypatch.setattr(paths, "SOLUTIONS_DIR", tmp_path / "solutions")
    monkeypatch.setattr(paths, "COURSE_DIR", tmp_path / "course")
    released = tmp_path / "course" / first_notebook / f"{first_notebook}.ipynb"
    released.write_text(released.read_text().replace("raise NotImplementedError()", "pass"))
    stale = build.build(check=True, notebook_ids=[first_notebook])
    assert stale == [released]
    assert "pass" in released.read_text(), "--check must not rewrite anything"


@pytest.mark.parametrize("notebook_id", paths.notebook_ids())
def test_release_suits_jupyterlab(notebook_id):
    """Run All goes on past test and demo cells and answer cells that raise when run (not
    answers that define a function or class), opening adds no kernel metadata."""
    nb = nbformat.read(paths.release_notebook(notebook_id), as_version=4)
    assert nb.metadata.language_info == build.LANGUAGE_INFO  # the version is added by `make lab`
    tagged = [build.RUN_ALL_GOES_ON in c.metadata.get("tags", []) for c in nb.cells]
    assert tagged == [build.run_all_goes_on(c) for c in nb.cells] and any(tagged)
    answers = [c for c in nb.cells if nbcell.is_answer(c)]
    assert answers
    for cell in answers:  # only a stub at the top level raises when run: Run All goes on past it
        top_level_stub = "\nraise NotImplementedError()" in f"\n{cell.source}"
        assert (build.RUN_ALL_GOES_ON in cell.metadata.get("tags", [])) == top_level_stub


def test_start_page_is_released():
    assert (paths.COURSE_DIR / "START_HERE.md").read_text() == (
        paths.SOLUTIONS_DIR / "START_HERE.md"
    ).read_text()
