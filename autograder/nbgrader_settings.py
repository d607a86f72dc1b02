"""Kept for one release: class folders graded before the engine moved to :mod:`autograder.grader`
have an ``nbgrader_config.py`` that imports this module. New folders import
:mod:`autograder.grader.nbgrader_settings`; delete this shim in the release after."""

from autograder.grader.nbgrader_settings import class_config, course_config

__all__ = ["class_config", "course_config"]
