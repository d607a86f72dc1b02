"""The course outside its repository, as a Colab learner has it, and the supported torch range.

A Colab or Kaggle runtime has its own torch, numpy and matplotlib; the learner runs one cell,
``%pip install "mha-course @ git+<repository>"`` (README, "Colab"), which builds the package
and installs it, resolving its dependencies against what the runtime already has. The slow test
does the same without the network:

- it builds a wheel from a copy of the package's sources (never the tree itself, never ``-e``);
- it makes a fresh venv whose only view of other packages is a ``.pth`` naming a folder of links
  to this interpreter's site-packages, *the course left out*. A ``.pth`` line adds one folder to
  ``sys.path`` without running the ``.pth`` files inside it, so the repository's editable
  install cannot leak in, and ``autograder`` can only come from the wheel. A
  ``--system-site-packages`` venv would run them (and see the editable install); installing the
  dependencies afresh would download torch (gigabytes). The runtime's torch is whichever this
  interpreter has: 2.13.0 in ``make test``; ``make test-compat`` runs it on both ends of the
  supported range;
- ``pip install --no-index WHEEL`` then proves the declared dependencies, the torch bound
  included, are met by what the runtime has, and that nothing needs fetching;
- one release notebook (01, the learner's answers typed in but for its last exercise) is copied
  into an empty folder and run top to bottom, and its test cells must print what they print in
  the repository, a pass and a diagnosis alike; ``check``, which needs the repository's hidden
  tests, says so in one line.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import tomllib
from hostile import filled

import autograder
from autograder import nbcell, paths
from conftest import REPO

NOTEBOOK = "01_attention_from_scratch"


def _bound() -> str:
    oldest, newest = autograder.TORCH_RANGE
    major, minor = newest.split(".")
    return f"torch>={oldest},<{major}.{int(minor) + 1}"


def test_pyproject_states_the_tested_torch_range():
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert _bound() in deps, (deps, autograder.TORCH_RANGE)
    pinned = re.search(r"^torch==(\S+)$", (REPO / "requirements.txt").read_text(), re.M)
    assert not autograder.torch_problem(pinned.group(1)), pinned.group(1)


@pytest.mark.parametrize("version", ["2.4.1", "2.16.0", None])
def test_a_torch_outside_the_range_gets_one_line_from_the_set_up_cell(tmp_path, version):
    """An IPython shell runs the import that opens every set-up cell, with torch's metadata
    saying ``version`` (a dist-info folder first on the path; None: torch hidden)."""
    fake = tmp_path / "site"
    fake.mkdir()
    if version:
        info = fake / f"torch-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
    else:  # a sitecustomize that makes the metadata lookup find no torch
        (fake / "sitecustomize.py").write_text(
            "from importlib import metadata\n_v = metadata.version\n"
            "def version(name):\n"
            "    if name == 'torch':\n"
            "        raise metadata.PackageNotFoundError(name)\n"
            "    return _v(name)\n"
            "metadata.version = version\n"
        )
    cell = "from autograder.checks.nb01_attention import check_softmax_values"
    script = (
        "from IPython.core.interactiveshell import InteractiveShell\n"
        f"InteractiveShell.instance().run_cell({cell!r})\n"
    )
    env = {**os.environ, "PYTHONPATH": str(fake), "MHA_COURSE_ANY_TORCH": ""}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, done.stdout + done.stderr
    assert lines[0].startswith("UnsupportedTorch: "), lines
    assert 'pip install "torch>=' in lines[0] and "restart the kernel" in lines[0], lines
    if version:
        assert f"torch {version}" in lines[0], lines


# --- the slow test: a fresh venv, a wheel, one notebook in an empty folder -------------------


def _wheel(tmp: Path) -> Path:
    """A wheel built from a copy of what the package is made of (the tree is left alone)."""
    src = tmp / "src"
    shutil.copytree(
        REPO / "autograder",
        src / "autograder",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", paths.SAVED_GRADES),
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    dist = tmp / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(dist), str(src)],
        check=True, capture_output=True, env=_pip_env(),
    )  # fmt: skip
    (wheel,) = dist.glob("mha_course-*.whl")
    return wheel


def _pip_env() -> dict:
    """pip without this machine's configuration (a local index, a cap on torch): only the
    wheel and what is installed count."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1"}


def _runtime(tmp: Path, wheel: Path) -> Path:
    """A fresh venv that sees this interpreter's packages but the course, with the wheel
    installed (``pip install --no-index``): the Colab runtime after its one set-up cell."""
    import sysconfig

    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    links = tmp / "runtime-packages"
    links.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        course = entry.name.startswith(("mha_course", "__editable__", "autograder"))
        if not course and not entry.name.endswith(".pth"):
            (links / entry.name).symlink_to(entry)
    Path(purelib, "runtime-packages.pth").write_text(f"{links}\n")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", str(wheel)],
        capture_output=True, text=True, env=_pip_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return python


def _learner_notebook() -> nbformat.NotebookNode:
    """Release 01 with the instructor's answers typed in, but the last exercise left as
    released: its test cells print a diagnosis, the others a pass."""
    release = nbformat.read(paths.release_notebook(NOTEBOOK), as_version=4)
    solution = nbformat.read(paths.solution_notebook(NOTEBOOK), as_version=4)
    nb = filled(release, solution)
    last = [i for i, c in enumerate(nb.cells) if nbcell.is_answer(c) and c.cell_type == "code"][-1]
    nb.cells[last] = release.cells[last]
    nb.cells.append(nbformat.v4.new_code_cell("import autograder; print(autograder.__file__)"))
    return nb


# The course's kernel manager (its channels never sleep on a reply that has arrived), and
# limits that raise: a cell that times out fails the run instead of going on.
RUN = """
import sys, nbformat
from nbclient import NotebookClient
from autograder.grader.kernel_channels import KernelManager
nb = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(nb, timeout=120, allow_errors=True, kernel_name="python3",
               kernel_manager_class=KernelManager, iopub_timeout=60, raise_on_iopub_timeout=True,
               resources={"metadata": {"path": sys.argv[2]}}).execute()
nbformat.write(nb, sys.argv[1])
"""


def _run(python: Path, folder: Path, nb, env: dict) -> nbformat.NotebookNode:
    """``nb`` run top to bottom in ``folder`` by a kernel of ``python`` (nbclient)."""
    path = folder / f"{NOTEBOOK}.ipynb"
    nbformat.write(nb, path)
    done = subprocess.run(
        [python, "-c", RUN, str(path), str(folder)],
        cwd=folder, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return nbformat.read(path, as_version=4)


def _shown(cell) -> list[str]:
    """What a learner reads under a cell: its text and the one line of an error."""
    shown = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            shown.append(out.text.strip())
        elif out.output_type == "error":
            shown.append(f"{out.ename}: {out.evalue}")
        elif "text/plain" in out.get("data", {}):
            shown.append(out.data["text/plain"])
    return [line for line in shown if line]  # a blank stream is nothing to read


def _clean_env() -> dict:
    """No PYTHONPATH, no pip settings, no tools of this venv on PATH: a kernel of the runtime's
    interpreter sees only what that interpreter has."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_"))}
    return {**keep, "PATH": "/usr/bin:/bin"}


@pytest.fixture(scope="module")
def outside(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("outside")
    python = _runtime(tmp, _wheel(tmp))
    nb = _learner_notebook()
    colab, repo_run = tmp / "colab", tmp / "in-repo"
    colab.mkdir()
    repo_run.mkdir()
    env = _clean_env()
    return {
        "python": python,
        "folder": colab,
        "env": env,
        "outside": _run(python, colab, nb, env),
        "inside": _run(Path(sys.executable), repo_run, nb, {**env, "PYTHONPATH": str(REPO)}),
    }


@pytest.mark.slow
def test_a_release_notebook_runs_outside_the_repository_as_inside(outside):
    out, inside = outside["outside"], outside["inside"]
    where = _shown(out.cells[-1])
    assert where and where[0].startswith(str(outside["python"].parent.parent)), where
    setup = next(c for c in out.cells if nbcell.grade_id(c) == "setup")
    assert not [o for o in setup.outputs if o.output_type == "error"], _shown(setup)
    tests = [i for i, c in enumerate(out.cells) if nbcell.is_test(c)]
    passes = [i for i in tests if any(s.startswith("✓") for s in _shown(out.cells[i]))]
    failures = [i for i in tests if any(o.output_type == "error" for o in out.cells[i].outputs)]
    assert passes and failures, [_shown(out.cells[i]) for i in tests]
    for i in tests:
        assert _shown(out.cells[i]) == _shown(inside.cells[i]), nbcell.grade_id(out.cells[i])
    examples = [c for c in out.cells[:-1] if c.cell_type == "code" and not nbcell.grade_id(c)]
    broken = [c.source[:60] for c in examples if any(o.output_type == "error" for o in c.outputs)]
    broken_inside = [
        c.source[:60]
        for c in inside.cells[:-1]
        if c.cell_type == "code" and not nbcell.grade_id(c)
        and any(o.output_type == "error" for o in c.outputs)
    ]  # fmt: skip
    assert broken == broken_inside, (broken, broken_inside)  # the same examples wait for work


@pytest.mark.slow
def test_check_outside_the_repository_says_it_needs_it_in_one_line(outside):
    done = subprocess.run(
        [outside["python"], "-m", "autograder", "check", f"{NOTEBOOK}.ipynb", "--json"],
        cwd=outside["folder"], env=outside["env"], capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert "needs the course's repository" in line and "clone" in line, line
    assert json.loads(done.stdout)["error"] in line
