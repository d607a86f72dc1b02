"""nbgrader settings of the learner's ``make lab`` (found on ``JUPYTER_CONFIG_PATH``).

The server runs in ``work/``, where the repository's ``nbgrader_config.py`` is out of reach, so
the settings every run of this course shares come from here: among them, Validate showing the
score and each failing test cell's one-line diagnosis.
"""

from autograder.grader.nbgrader_settings import apply_common

apply_common(get_config())  # noqa: F821 (provided by nbgrader when it loads this file)
