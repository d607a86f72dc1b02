"""Open the course in JupyterLab, in ``work/``: the learner's own copy of ``course/``.

Learners write in ``work/`` so that ``git pull`` can update ``course/`` without touching their
answers. Notebooks that are new in ``course/`` are copied in; existing ones are never overwritten.

JupyterLab starts with the course's settings in ``autograder/jupyter_config/``, added to its config
search path for this launch only (the learner's own settings elsewhere stay untouched): nbgrader's
instructor tools (Create Assignment, Formgrader, the course and assignment lists, which need an
exchange a learner does not have) and the Nbgrader menu they would leave empty are off, the
"Jupyter news?" popup is off, the file browser drops its "Modified" column (which cut the
folder names: "01_attention_fr…"), Markdown opens rendered, and documents are autosaved every 10 s
(``check`` grades the saved file). ``jupyter lab`` started by an instructor from the repository
root keeps all of them.

The course's JupyterLab layout (its workspace) is kept in ``work/`` too, and starts with
``START_HERE.md`` open, so that ``/lab`` opened or reloaded shows the start page, not the Launcher.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

from autograder import paths
from autograder.grader.nbgrader_run import put_environment_on_path
from autograder.interview import seal

JUPYTER_CONFIG = Path(__file__).resolve().parent / "jupyter_config"
START_PAGE = "START_HERE.md"
CHECK_COMMAND = "python -m autograder check 01"
WORKSPACES = ".jupyterlab-workspaces"  # in work/; hidden in JupyterLab's file browser


def _stamp_python_version(folder: Path) -> None:
    """Add the Python version to each notebook's ``language_info``, as the kernel will report it.

    JupyterLab writes the kernel's ``language_info`` into a notebook when it opens it; when the
    notebook already holds the same, it is not marked "unsaved". The release carries everything
    but the version, which is this machine's (the kernel runs this very interpreter).
    """
    for notebook in folder.glob("*.ipynb"):
        nb = nbformat.read(notebook, as_version=4)
        nb.metadata.setdefault("language_info", {})["version"] = sys.version.split()[0]
        nbformat.write(nb, notebook)


def _drop_old_model_answers(names: set[str]) -> None:
    """Remove ``work/model_answers/`` of earlier launches (one click from the exercises), when it
    holds nothing but the copies this module wrote."""
    old = paths.WORK_DIR / "model_answers"
    if not old.is_dir() or any(p.name not in names or p.is_dir() for p in old.iterdir()):
        return
    for copy in old.iterdir():
        copy.chmod(0o644)
        copy.unlink()
    old.rmdir()


def sync_model_answers() -> bool:
    """Refresh ``work/reference/model_answers/`` (:data:`paths.MODEL_ANSWERS`): a read-only copy
    of each instructor notebook, so that a self-study learner reaches the model answers from the
    file browser (whose root is ``work/``), one folder further than the exercises. Where the
    repository has no ``solutions/`` (a classroom release), there is none to show; while a mock
    interview is under way they stay away (:mod:`autograder.interview.seal`)."""
    notebooks = [paths.solution_notebook(i) for i in paths.notebook_ids()]
    if not any(n.is_file() for n in notebooks):
        return False
    _drop_old_model_answers({n.name for n in notebooks if n.is_file()})
    return seal.unseal(paths.WORK_DIR)


def sync_work_dir() -> list[str]:
    """Copy each course folder or file missing from ``work/``; return the names copied. The
    model answers are refreshed every time (:func:`sync_model_answers`)."""
    paths.WORK_DIR.mkdir(parents=True, exist_ok=True)
    copied = []
    for item in sorted(paths.COURSE_DIR.iterdir()):
        target = paths.WORK_DIR / item.name
        if target.exists():
            continue
        if item.is_dir():
            shutil.copytree(item, target)
            _stamp_python_version(target)
        else:
            shutil.copyfile(item, target)
        copied.append(item.name)
    sync_model_answers()
    return copied


def start_page_workspace() -> dict:
    """JupyterLab's default workspace with only the start page open, rendered, and the files shown.

    The keys are those JupyterLab's layout restorer writes: ``<tracker namespace>:<path>`` for
    the Markdown viewer, and the file browser as the left area's current widget.
    """
    viewer = f"markdownviewer-widget:{START_PAGE}"
    return {
        "data": {
            "layout-restorer:data": {
                "main": {
                    "dock": {"type": "tab-area", "currentIndex": 0, "widgets": [viewer]},
                    "current": viewer,
                },
                "left": {"collapsed": False, "visible": True, "current": "filebrowser"},
            },
            viewer: {"data": {"path": START_PAGE, "factory": "Markdown Preview"}},
        },
        "metadata": {"id": "default"},
    }


def seed_workspace() -> bool:
    """Write the start page workspace unless the learner already has one; True when written."""
    from jupyterlab_server.workspaces_handler import WorkspacesManager

    manager = WorkspacesManager(str(paths.WORK_DIR / WORKSPACES))
    if manager.load("default").get("data") or not (paths.WORK_DIR / START_PAGE).is_file():
        return False
    manager.save("default", json.dumps(start_page_workspace(), indent=2))
    return True


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _given(option: str, args: list[str]) -> bool:
    return any(a == option or a.startswith(option + "=") for a in args)


def jupyter_command(extra_args: list[str]) -> list[str]:
    """The ``jupyter lab`` command line: the course's defaults, then the learner's own options."""
    command = [sys.executable, "-m", "jupyter", "lab"]
    if not _given("--ServerApp.root_dir", extra_args) and not _given("--notebook-dir", extra_args):
        command.append(f"--ServerApp.root_dir={paths.WORK_DIR}")
    if (paths.WORK_DIR / START_PAGE).is_file() and not _given("--LabApp.default_url", extra_args):
        command.append(f"--LabApp.default_url=/lab/tree/{START_PAGE}")
    if not _given("--LabApp.workspaces_dir", extra_args):
        command.append(f"--LabApp.workspaces_dir={paths.WORK_DIR / WORKSPACES}")
    if _is_root() and "--allow-root" not in extra_args:
        command.append("--allow-root")
    return command + extra_args


def course_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` with the course's JupyterLab settings first on Jupyter's config search path."""
    env = dict(os.environ if env is None else env)
    rest = env.get("JUPYTER_CONFIG_PATH")
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(filter(None, [str(JUPYTER_CONFIG), rest]))
    env["MHA_COURSE_BIN"] = str(Path(sys.executable).parent)  # `python` in JupyterLab's terminals
    return env


def launch(extra_args: list[str]) -> int:
    copied = sync_work_dir()
    if copied:
        print("copied into work/:", ", ".join(copied))
    seed_workspace()
    print(f"Your notebooks are in work/; {START_PAGE} there shows the way round.")
    print(f"Grade one from JupyterLab's terminal with: {CHECK_COMMAND}")
    if _is_root() and "--allow-root" not in extra_args:
        print("Running as root (a container?): starting JupyterLab with --allow-root.")
    put_environment_on_path()
    # Started in work/: JupyterLab asks for terminals in the file browser's folder as a relative
    # path, which the terminal extension resolves against the server's working directory.
    return subprocess.call(
        jupyter_command(extra_args), env=course_environment(), cwd=paths.WORK_DIR
    )
