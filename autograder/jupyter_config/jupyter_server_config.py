"""JupyterLab server settings of the learner's ``make lab`` (see ``autograder/lab_launcher.py``).

- nbgrader's instructor-side server extensions are off: the formgrader, and the course and
  assignment lists, which need an exchange folder a self-study learner does not have.
- Validate is served by ``autograder.grader.lab_validate``, nbgrader's handler with its grading in a
  worker thread: JupyterLab keeps answering while Validate grades.
- The course's styles (``custom/custom.css``) are loaded: Validate's diagnoses wrap instead of
  being cut at the dialog's edge, and its button says it is grading while it does.
- In a terminal, `python` is the course's: the shell starts as it is, not as a login shell (which
  would reset PATH from /etc/profile), and bash or zsh read the learner's own start-up file, then
  ``shell/`` puts the course's Python (``$MHA_COURSE_BIN``) back in front of PATH.
"""

import os
import shutil
from pathlib import Path

c = get_config()  # noqa: F821 (provided by Jupyter when it loads this file)
c.ServerApp.jpserver_extensions.update(
    {
        "nbgrader.server_extensions.formgrader": False,
        "nbgrader.server_extensions.assignment_list": False,
        "nbgrader.server_extensions.course_list": False,
        "nbgrader.server_extensions.validate_assignment": False,
        "autograder.grader.lab_validate": True,
    }
)
c.LabApp.custom_css = True
# JupyterLab serves /custom/custom.css from the server's ``static_custom_path``, which no
# setting names, but the server's tornado settings override it.
c.ServerApp.tornado_settings.update(
    {"static_custom_path": [str(Path(__file__).resolve().parent / "custom")]}
)
_shell = os.environ.get("SHELL") or shutil.which("bash") or shutil.which("sh")
_rc = Path(__file__).resolve().parent / "shell"
if _shell:
    _command = {
        "bash": [_shell, "--rcfile", str(_rc / "bashrc")],
        "zsh": ["env", f"ZDOTDIR={_rc}", _shell],
    }.get(os.path.basename(_shell), [_shell])
    c.ServerApp.terminado_settings.update({"shell_command": _command})
