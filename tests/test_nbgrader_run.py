"""The throwaway nbgrader course's glue (``autograder/grader/nbgrader_run.py``)."""

import sqlite3
import subprocess

import nbgrader.api
import pytest

from autograder.grader.nbgrader_run import alembic_head, put_environment_on_path


@pytest.mark.slow
def test_the_in_process_schema_revision_is_the_alembic_commands():
    """A new gradebook is stamped with the revision nbgrader's own lookup (the ``alembic heads``
    command, 2 s) would give: the course's in-process reading of it is the same."""
    put_environment_on_path()
    with nbgrader.api._temp_alembic_ini("sqlite:////tmp/gradebook.db") as ini:
        heads = subprocess.check_output(["alembic", "-c", ini, "heads"], text=True)
    assert heads.split()[0] == alembic_head()


def test_a_new_gradebook_is_stamped_without_a_subprocess(tmp_path, monkeypatch):
    def no_subprocess(*args, **kwargs):
        raise AssertionError(f"a subprocess was started: {args}")

    monkeypatch.setattr(subprocess, "check_output", no_subprocess)
    with nbgrader.api.Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}"):
        pass
    with sqlite3.connect(tmp_path / "gradebook.db") as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [
            (alembic_head(),)
        ]
