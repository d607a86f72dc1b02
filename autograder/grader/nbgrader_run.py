"""A throwaway nbgrader course: generate, autograde and give feedback through nbgrader's own API.

nbgrader has no "grade this one notebook" command (issue #1371); this builds a course folder in a
temporary directory with the instructor notebook as source and the learner's file as a submission,
and runs the real pipeline against a real SQLite gradebook in it.
"""

import contextlib
import functools
import logging
import os
import shutil
import sys
import warnings
from pathlib import Path

import nbgrader
import nbgrader.api
from nbgrader.api import Gradebook
from nbgrader.apps import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
from traitlets.config import Config

from autograder.grader.nbgrader_settings import IGNORED_FILES, scratch_config


@functools.cache
def alembic_head() -> str:
    """The schema revision nbgrader stamps on a new gradebook, read with alembic's own API.

    nbgrader asks for it by running the ``alembic heads`` command, a second Python process that
    costs about 2 s for every new gradebook (every ``check``, every ``grade`` run); in-process
    it takes milliseconds. ``tests/test_nbgrader_run.py`` compares the two.
    """
    from alembic.config import Config as AlembicConfig
    from alembic.script import ScriptDirectory

    config = AlembicConfig()
    config.set_main_option("script_location", str(Path(nbgrader.__file__).parent / "alembic"))
    return ScriptDirectory.from_config(config).get_current_head()


nbgrader.api.get_alembic_version = alembic_head


@functools.cache
def shared_engine(db_url: str, **options):
    """One SQLAlchemy engine per gradebook for the process, whatever number of nbgrader
    ``Gradebook`` objects open it.

    nbgrader makes a new engine for every ``Gradebook``, and SQLAlchemy keeps compiled SQL per
    engine: every gradebook opened (autograde, feedback, the worker's own reads: several per
    graded notebook) compiled its queries again, a seventh of a grading worker's CPU.
    ``Gradebook.close`` still disposes of the engine's connections; the compiled SQL stays.
    """
    from sqlalchemy import create_engine

    return create_engine(db_url, **options)


nbgrader.api.create_engine = shared_engine


class NbgraderError(Exception):
    """nbgrader itself failed; the message carries the end of its log."""


def single_threaded_kernels() -> None:
    """Kernels started from now on run PyTorch on one thread.

    Checks use tiny tensors: on a busy machine extra threads only wait for each other (measured
    10-20x slower under load), and parallel graders would fight over the cores.
    """
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def put_environment_on_path() -> None:
    """nbgrader runs ``alembic`` and kernels found on PATH: both must come from this env."""
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")


@contextlib.contextmanager
def kernel_stderr_silenced(fds: tuple[int, ...] = (2,)):
    """Kernels inherit this process's stderr (and stdout: ``fds``) and print start-up noise
    there (a sandboxed kernel, which has no parent to report to, its connection info): discard it.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in fds}
    try:
        with open(os.devnull, "w") as devnull:
            for fd in fds:
                os.dup2(devnull.fileno(), fd)
            yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)


def _log_tail(result: dict, lines: int = 6) -> str:
    text = (result.get("error") or "") + "\n" + (result.get("log") or "")
    kept = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(kept[-lines:])


class NbgraderRun:
    """One throwaway course directory and the nbgrader API bound to it."""

    def __init__(self, root: Path, config: Config | None = None):
        put_environment_on_path()
        single_threaded_kernels()
        warnings.filterwarnings("ignore", module="nbgrader")
        warnings.filterwarnings("ignore", message=".*not in session.*")
        logging.getLogger("traitlets").setLevel(logging.ERROR)
        self.root = Path(root).resolve()
        self.config = scratch_config(self.root)
        if config is not None:  # settings on top of the shared ones (e.g. classroom grading)
            self.config.merge(config)
        self.api = NbGraderAPI(CourseDirectory(config=self.config), config=self.config)

    @staticmethod
    def ignore_patterns():
        return shutil.ignore_patterns(*IGNORED_FILES)

    def _ok(self, result: dict, what: str) -> dict:
        if not result.get("success"):
            raise NbgraderError(f"nbgrader {what} failed: {_log_tail(result)}")
        return result

    def generate(self, assignment_id: str) -> None:
        """Generate the release version (and the gradebook entries) of ``source/<id>``."""
        self._ok(self.api.generate_assignment(assignment_id, force=True), "generate_assignment")

    def submit(self, assignment_id: str, student_id: str, notebook: Path) -> Path:
        """Place a notebook file as ``student_id``'s submission of ``assignment_id``."""
        target = self.root / "submitted" / student_id / assignment_id / f"{assignment_id}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(notebook, target)
        return target

    def autograde(self, assignment_id: str, student_id: str) -> dict:
        """Autograde one submission; returns nbgrader's result (``success``, ``log``, ``error``)."""
        with kernel_stderr_silenced(fds=(1, 2)):
            return self.api.autograde(assignment_id, student_id, force=True, create=True)

    def feedback(self, assignment_id: str, student_id: str) -> Path:
        """Generate the feedback HTML of one autograded submission and return its path."""
        self._ok(self.api.generate_feedback(assignment_id, student_id), "generate_feedback")
        return self.root / "feedback" / student_id / assignment_id / f"{assignment_id}.html"

    def autograded_notebook(self, assignment_id: str, student_id: str) -> Path:
        return self.root / "autograded" / student_id / assignment_id / f"{assignment_id}.ipynb"

    def gradebook(self) -> Gradebook:
        return Gradebook(self.config.CourseDirectory.db_url)

    @staticmethod
    def failure_reason(result: dict) -> str:
        return _log_tail(result)
