"""JupyterLab's Validate button, graded without freezing JupyterLab: a server extension.

nbgrader's own handler (``nbgrader.server_extensions.validate_assignment``) runs the whole
notebook inside the request, on the server's only event loop: while Validate grades (10-20 s on
an idle machine, minutes on a busy one), the server answers nothing else. The learner's kernels
send no output, saves and file listings wait, and a page that asks the server anything waits
with them. This extension serves the same two addresses nbgrader's button calls
(``/assignments/validate`` and ``/nbgrader_version``) with nbgrader's own code, but the grading
runs in a worker thread and the server keeps answering. One Validate grades at a time (its
summary, :data:`autograder.grader.feedback._SUMMARY`, is one per process); a second click waits
its turn.

The notebook is read as ``check`` reads it (:func:`autograder.notebook_files.read_notebook`):
Ctrl+S truncates the file and writes it anew, and a Validate that read in between crashed with
"Notebook does not appear to be JSON: ''"; the one reader waits out a save in progress, and a
file that stays unreadable gets its one-line explanation instead of a traceback. A mock interview
(:mod:`autograder.interview`) is not run at all: :data:`MOCK_INTERVIEW` says where it is graded.

``autograder/jupyter_config/jupyter_server_config.py`` turns nbgrader's handler off and this one on.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import nbgrader.validator
from jupyter_server.utils import url_path_join
from nbgrader.server_extensions.validate_assignment.handlers import (
    NbGraderVersionHandler,
    ValidateAssignmentHandler,
)
from tornado import web

from autograder.notebook_files import NotebookError, read_notebook

_ONE_AT_A_TIME = asyncio.Lock()
# A mock interview has no nbgrader cells: Validate said "Success!" whatever its test cell said,
# and its rerun in another kernel added runs to the scorecard.
MOCK_INTERVIEW = (
    "Validate does not grade a mock interview: run its test cell (the one that calls "
    "`interview.run_tests`), which grades your answer and keeps the scorecard; "
    "`python -m autograder progress` shows the scorecard."
)
_READ = threading.local()  # the notebook the handler read, for nbgrader's Validator to use


def _read_once(name, as_version):
    """nbgrader's Validator reads the notebook with this: the one the handler has just read."""
    return _READ.__dict__.pop("notebook", None) or read_notebook(Path(name))


nbgrader.validator.read_nb = _read_once


class ThreadedValidateHandler(ValidateAssignmentHandler):
    """nbgrader's Validate, its grading in a worker thread."""

    @web.authenticated
    async def post(self):
        try:
            path = self.get_argument("path")
        except web.MissingArgumentError:
            path = self.get_json_body()["path"]
        async with _ONE_AT_A_TIME:
            output = await asyncio.to_thread(self.validate_notebook, path)
        self.finish(json.dumps(output))

    def validate_notebook(self, path):
        root = Path(self.root_dir).resolve()
        target = (root / path).resolve()
        try:
            if target.is_relative_to(root):  # else nbgrader's own answer: access denied
                _READ.notebook = read_notebook(target)
        except NotebookError as err:
            return {"success": False, "value": str(err)}
        if _READ.notebook.metadata.get("mock_interview"):
            _READ.__dict__.pop("notebook")
            return {"success": False, "value": MOCK_INTERVIEW}
        try:
            return super().validate_notebook(path)
        finally:
            _READ.__dict__.pop("notebook", None)


def _jupyter_server_extension_points():
    return [{"module": "autograder.grader.lab_validate"}]


def _load_jupyter_server_extension(serverapp) -> None:
    webapp = serverapp.web_app
    webapp.settings["root_dir"] = serverapp.root_dir  # where nbgrader's handler looks for it
    base = webapp.settings["base_url"]
    webapp.add_handlers(
        ".*$",
        [
            (url_path_join(base, "assignments/validate"), ThreadedValidateHandler),
            (url_path_join(base, "nbgrader_version"), NbGraderVersionHandler),
        ],
    )
