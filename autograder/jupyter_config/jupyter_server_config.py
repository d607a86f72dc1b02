"""JupyterLab server settings of the learner's ``make lab`` (see ``autograder/lab_launcher.py``).

- nbgrader's instructor-side server extensions are off: the formgrader, and the course and
  assignment lists, which need an exchange folder a self-study learner does not have.
- Terminals start the shell as it is, not as a login shell: a login shell would reset PATH from
  /etc/profile, and `python` in the terminal would no longer be the course's.
"""

import os
import shutil

c = get_config()  # noqa: F821 (provided by Jupyter when it loads this file)
c.ServerApp.jpserver_extensions.update({
    "nbgrader.server_extensions.formgrader": False,
    "nbgrader.server_extensions.assignment_list": False,
    "nbgrader.server_extensions.course_list": False,
})
_shell = os.environ.get("SHELL") or shutil.which("bash") or shutil.which("sh")
if _shell:
    c.ServerApp.terminado_settings.update({"shell_command": [_shell]})
