"""The course's own package: grading machinery, the checks used by test cells, and learner tools.

- ``autograder.checks``: ``check_*`` functions: run a learner's callable, explain what is wrong.
- ``autograder.tools``: plots, widgets and toy data used by the notebooks.
- ``python -m autograder``: build the learner notebooks, check one notebook, validate the course.
"""

import sys

# nbformat's jsonschema imports ``rfc3987_syntax`` (when installed) to check the "iri" string
# format, and that module compiles a grammar at import: about 0.9 s in every process that reads
# a notebook. No schema the course reads uses the format, so the course's processes skip it.
sys.modules.setdefault("rfc3987_syntax", None)
