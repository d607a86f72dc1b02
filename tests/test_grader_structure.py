"""Repairing a submission before grading (``grader.structure``): stripped metadata, duplicated,
deleted and missing cells, unreadable and renamed notebooks."""

import json

import nbformat
import pytest
from notebook_cells import tiny_release

from autograder.grader.structure import SubmissionError, prepare, restore_structure

# ----------------------------------------------------------------------------- structure


def test_stripped_metadata_is_restored_by_cell_id():
    nb = tiny_release()
    for cell in nb.cells:
        cell.metadata.pop("nbgrader")
    notes = restore_structure(nb, tiny_release())
    assert [c.metadata["nbgrader"]["grade_id"] for c in nb.cells] == ["setup", "f", "test_f"]
    assert sum("restored the grading metadata" in n for n in notes) == 3


def test_duplicates_keep_only_the_last_copy_graded():
    nb = tiny_release()
    nb.cells.insert(2, nbformat.from_dict(json.loads(json.dumps(nb.cells[2]))))
    notes = restore_structure(nb, tiny_release())
    graded = [c for c in nb.cells if "nbgrader" in c.metadata]
    assert [c.metadata["nbgrader"]["grade_id"] for c in graded] == ["setup", "f", "test_f"]
    assert nb.cells[3] is graded[-1] and any("appears 2 times" in n for n in notes)


def test_deleted_setup_cell_is_put_back_in_place():
    nb = tiny_release()
    del nb.cells[0]
    notes = restore_structure(nb, tiny_release())
    assert nb.cells[0].metadata["nbgrader"]["grade_id"] == "setup"
    assert notes == ["locked cell `setup` was deleted: put back"]


def test_answer_cell_missing_from_an_older_copy_is_put_back_unanswered():
    """A copy older than an exercise lacks its answer and test cells; nbgrader would put the test
    back after the answer cell and crash on its absence, so the unanswered cell returns first."""
    nb = tiny_release()
    del nb.cells[1:]
    notes = restore_structure(nb, tiny_release())
    assert [c.metadata["nbgrader"]["grade_id"] for c in nb.cells] == ["setup", "f"]
    assert "NotImplementedError" in nb.cells[1].source
    assert notes == [
        "answer cell `f` was missing (deleted, or the copy predates the exercise): put back "
        "unanswered",
        "test cell `test_f` was deleted: nbgrader puts it back",
    ]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "is empty"),
        (b'{"cells": [', "not valid JSON"),
        (b'{"nbformat": 3, "nbformat_minor": 0, "worksheets": []}', "format 3"),
    ],
)
def test_unreadable_notebooks_are_errors_with_a_reason(tmp_path, content, expected):
    release = tmp_path / "release.ipynb"
    nbformat.write(tiny_release(), release)
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "a.ipynb").write_bytes(content)
    with pytest.raises(SubmissionError, match=expected):
        prepare(folder, {"a.ipynb": release}, tmp_path / "dest")


def test_renamed_notebook_is_graded_and_symlinks_are_not_copied(tmp_path):
    release = tmp_path / "release.ipynb"
    nbformat.write(tiny_release(), release)
    folder = tmp_path / "sub"
    folder.mkdir()
    nbformat.write(tiny_release(), folder / "a (1).ipynb")
    (folder / "secret").symlink_to("/etc/hostname")
    (folder / "data.txt").write_text("x")
    notes = prepare(folder, {"a.ipynb": release}, tmp_path / "dest")
    assert sorted(p.name for p in (tmp_path / "dest").iterdir()) == ["a.ipynb", "data.txt"]
    assert any("graded a (1).ipynb as a.ipynb" in n for n in notes)
    assert any("symbolic link secret" in n for n in notes)
    with pytest.raises(SubmissionError, match="no b.ipynb"):
        prepare(folder, {"b.ipynb": release}, tmp_path / "dest2")
