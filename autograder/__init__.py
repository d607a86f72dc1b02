"""The course's own package: grading machinery, the checks used by test cells, and learner tools.

- ``autograder.checks``: ``check_*`` functions: run a learner's callable, explain what is wrong.
- ``autograder.tools``: plots, widgets and toy data used by the notebooks.
- ``python -m autograder``: build the learner notebooks, check one notebook, validate the course.
"""
