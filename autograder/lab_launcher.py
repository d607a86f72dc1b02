"""Open the course in JupyterLab, in ``work/``: the learner's own copy of ``course/``.

Learners write in ``work/`` so that ``git pull`` can update ``course/`` without touching their
answers. Notebooks that are new in ``course/`` are copied in; existing ones are never overwritten.
"""

import shutil
import subprocess
import sys

from autograder import paths
from autograder.nbgrader_run import put_environment_on_path


def sync_work_dir() -> list[str]:
    """Copy each course notebook folder missing from ``work/``; return the ids copied."""
    paths.WORK_DIR.mkdir(exist_ok=True)
    copied = []
    for folder in sorted(paths.COURSE_DIR.iterdir()):
        target = paths.WORK_DIR / folder.name
        if folder.is_dir() and not target.exists():
            shutil.copytree(folder, target)
            copied.append(folder.name)
    return copied


def launch(extra_args: list[str]) -> int:
    copied = sync_work_dir()
    if copied:
        print("copied into work/:", ", ".join(copied))
    print("Your notebooks are in work/. Grade one with:")
    print("  python -m autograder check work/<id>/<id>.ipynb")
    put_environment_on_path()
    command = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={paths.WORK_DIR}"]
    return subprocess.call(command + extra_args)
