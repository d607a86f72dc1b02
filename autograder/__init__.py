"""The course's own package: grading machinery, the checks used by test cells, and learner tools.

- ``autograder.checks``: ``check_*`` functions: run a learner's callable, explain what is wrong.
- ``autograder.tools``: plots, widgets and toy data used by the notebooks.
- ``python -m autograder``: build the learner notebooks, check one notebook, validate the course.

Importing it first checks that the installed torch is one the course is tested on
(:data:`TORCH_RANGE`), so that a notebook's set-up cell says so in one line.
"""

import os
import re
import sys
from importlib import metadata

# nbformat's jsonschema imports ``rfc3987_syntax`` (when installed) to check the "iri" string
# format, and that module compiles a grammar at import: about 0.9 s in every process that reads
# a notebook. No schema the course reads uses the format, so the course's processes skip it.
sys.modules.setdefault("rfc3987_syntax", None)

# The PyTorch releases the course is tested on, oldest and newest (`make test-compat TORCH=...`,
# results in README.md); pyproject.toml states the same range (tests/test_outside_repo.py).
TORCH_RANGE = ("2.6", "2.15")


class UnsupportedTorch(ImportError):
    """A torch outside :data:`TORCH_RANGE`: one line under the set-up cell, not a traceback."""

    def _render_traceback_(self) -> list[str]:  # what IPython shows instead of the traceback
        return [f"{type(self).__name__}: {self}"]


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", version)[:2])


def torch_problem(version: str | None) -> str:
    """Why this torch (its version string, None if missing) does not suit the course; or ""."""
    oldest, newest = TORCH_RANGE
    bound = f"{newest.split('.')[0]}.{int(newest.split('.')[1]) + 1}"
    fix = f'run  pip install "torch>={oldest},<{bound}"  then restart the kernel'
    if version is None:
        return f"The course needs PyTorch {oldest} to {newest} and finds no torch: {fix}."
    if _release(version) < _release(oldest):
        return f"The course needs PyTorch {oldest} to {newest}, not torch {version}: {fix}."
    if _release(version) > _release(newest):
        return (
            f"The course is tested on PyTorch {oldest} to {newest}, not on torch {version}: "
            f"{fix}, or set MHA_COURSE_ANY_TORCH=1 to try this one anyway."
        )
    return ""


def _installed_torch() -> str | None:
    try:
        return metadata.version("torch")  # reads its metadata: no torch import
    except metadata.PackageNotFoundError:
        return None


if not os.environ.get("MHA_COURSE_ANY_TORCH") and (_problem := torch_problem(_installed_torch())):
    raise UnsupportedTorch(_problem)
