"""nbgrader configuration for instructors: run nbgrader's commands and the formgrader from here.

``solutions/`` is the source step, ``course/`` the release step, ``gradebook.db`` the gradebook.
The settings themselves live in ``autograder/grader/nbgrader_settings.py`` so the CLI uses the
same ones.
"""

from pathlib import Path

from autograder.grader.nbgrader_settings import course_config

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)
c.merge(course_config(Path(__file__).resolve().parent))
