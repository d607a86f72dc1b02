"""The package a grading kernel sees holds no check and no declared answer; its key follows it.

- every check module becomes a stand-in whose ``check_*`` names do nothing;
- every name a check module declares in ``ANSWERS_IN_TOOLS`` exists, and in the tree of an
  assignment that uses those checks it keeps its name but raises;
- every notebook's set-up cell imports in its own tree (slow: one interpreter that imports
  torch and matplotlib, forked once per notebook);
- the grader's key changes when any tool, its data or the kernel code changes.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from IPython.core.inputtransformer2 import TransformerManager

from autograder import nbcell, paths
from autograder.build import instructor_notebook_text
from autograder.classroom import grade
from autograder.grader import kernel_package


def _tree(notebook: str, cache: Path) -> Path:
    return kernel_package.build(cache, instructor_notebook_text(notebook))


def _run(tree: Path | None, code: str, *args: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter with ``tree`` first on its ``PYTHONPATH``."""
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "MPLBACKEND": "Agg"}
    env |= {"PYTHONPATH": str(tree)} if tree else {}
    return subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, cwd="/tmp"
    )


@pytest.mark.parametrize("module", kernel_package.all_check_modules())
def test_every_declared_answer_exists(module):
    declared = importlib.import_module(f"autograder.checks.{module}").ANSWERS_IN_TOOLS
    assert kernel_package.declared_answers(module) == declared  # grade reads it from the source
    for key in declared:
        if "/" in key:
            assert (paths.REPO_ROOT / key).is_file(), key
            continue
        dotted, _, name = key.rpartition(".")
        assert hasattr(importlib.import_module(dotted), name), key


def _imported_check_modules(module: str) -> set[str]:
    tree = ast.parse((kernel_package.PACKAGE / "checks" / f"{module}.py").read_text())
    return {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level == 1
        if re.fullmatch(r"nb\d\d_\w+", node.module or "")
    }


@pytest.mark.parametrize("notebook", paths.notebook_ids())
def test_a_part_a_notebook_does_not_name_declares_no_answers(notebook):
    """``grade`` reads the declarations of the check modules a notebook names: a module of the
    same notebook reached only through one of them (notebook 10's question modules, merged by
    ``nb10_interview``) must leave its answers to the one the notebook names."""
    source = (paths.REPO_ROOT / "solutions" / notebook / f"{notebook}.py").read_text()
    named = kernel_package.check_modules(source)
    for module in named:
        for part in _imported_check_modules(module) - set(named):
            if part[:4] == module[:4]:
                assert kernel_package.declared_answers(part) == {}, (module, part)


def test_withheld_names_keep_their_names_but_raise():
    source = "def f(a, b=1):\n    return a\n\nclass C:\n    x = 1\n\nY = [1, 2]\nZ = 3\n"
    namespace: dict = {}
    exec(kernel_package.withhold(source, {"f", "C", "Y"}), namespace)  # noqa: S102
    for call in (lambda: namespace["f"](1), lambda: namespace["C"]()):
        with pytest.raises(RuntimeError, match="not available while your work is graded"):
            call()
    assert namespace["Y"] is None and namespace["Z"] == 3


def test_a_kernel_tree_has_no_check_and_no_declared_answer(tmp_path):
    notebook = "05_parallel_vs_sequential"
    tree = _tree(notebook, tmp_path)
    checks = tree / "autograder" / "checks"
    assert not (checks / "_core.py").exists() and not (checks / "replay").exists()
    for module in kernel_package.all_check_modules():
        assert "def " not in (checks / f"{module}.py").read_text()
    assert not (tree / "autograder" / "classroom" / "grade.py").exists()
    code = (
        "from autograder.checks.nb05_parallel import check_mha_sequential_values as c\n"
        "assert c(lambda *a: 1/0) is None\n"
        "from autograder.tools import nb05_parallel_heads as h\n"
        "try:\n    h.loop_heads(None, None)\nexcept RuntimeError as e:\n    print('raised', e)\n"
    )
    done = _run(tree, code)
    assert done.returncode == 0, done.stderr
    assert "raised `loop_heads` is not available" in done.stdout


# Importing torch and matplotlib is nearly all of an interpreter's 2 CPU-s here: one interpreter
# imports them, then a child forked for each notebook puts its tree where PYTHONPATH would (after
# ``-c``'s "") and runs the set-up cell, its stderr into a file of its own.
FORKED = """
import json, os, sys, traceback
import matplotlib.pyplot, numpy, torch
codes = {}
for notebook, (tree, code, log) in json.loads(sys.argv[1]).items():
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(log, os.O_WRONLY | os.O_CREAT), 2)
        sys.path.insert(1, tree)
        try:
            exec(compile(code, notebook, "exec"), {"__name__": "__main__"})
        except BaseException:
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)
        os._exit(0)
    codes[notebook] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
print(json.dumps(codes))
"""


@pytest.fixture(scope="module")
def setup_cells(tmp_path_factory) -> dict[str, tuple[int, str]]:
    """Notebook -> the exit code and stderr of its set-up cell run in its kernel tree."""
    tmp = tmp_path_factory.mktemp("setup-cells")
    runs = {}
    for notebook in paths.notebook_ids():
        nb = nbformat.reads(instructor_notebook_text(notebook), as_version=4)
        setup = next(c.source for c in nb.cells if nbcell.grade_id(c) == "setup")
        code = TransformerManager().transform_cell(setup)
        code = code.replace("get_ipython().run_line_magic", "(lambda *a: None)")
        runs[notebook] = (str(_tree(notebook, tmp)), code, str(tmp / f"{notebook}.stderr"))
    done = _run(None, FORKED, json.dumps(runs))
    assert done.returncode == 0, done.stderr[-2000:]
    codes = json.loads(done.stdout)
    return {nb: (codes[nb], Path(log).read_text()) for nb, (_, _, log) in runs.items()}


@pytest.mark.slow
@pytest.mark.parametrize("notebook", paths.notebook_ids())
def test_every_setup_cell_imports_in_its_kernel_tree(notebook, setup_cells):
    code, stderr = setup_cells[notebook]
    assert code == 0, stderr[-2000:]


def test_the_grader_key_follows_tools_data_and_kernel(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    shutil.copytree(paths.REPO_ROOT / "autograder", root / "autograder")
    monkeypatch.setattr(paths, "REPO_ROOT", root)
    options = grade.Options(jobs=1)
    files = {"x.ipynb": b"{}"}
    before = grade.grader_key(files, options)
    for changed in ("tools/nb04_gqa.py", "tools/data/tiny_model.json", "kernel/recorder.py"):
        path = root / "autograder" / changed
        path.write_bytes(path.read_bytes() + b"\n")
        after = grade.grader_key(files, options)
        assert after != before, changed
        before = after


def test_a_kernel_that_trickles_its_reply_cannot_hold_the_grader():
    """A reply sent one byte at a time is cut at the deadline, not waited for byte by byte."""
    import socket
    import threading
    import time

    from autograder.kernel import server

    grader, kernel = socket.socketpair()
    sent_all = threading.Event()

    def trickle():
        with contextlib.suppress(OSError):
            kernel.sendall((1000).to_bytes(8, "big"))
            for _ in range(1000):
                kernel.sendall(b"x")
                time.sleep(0.05)
            sent_all.set()

    threading.Thread(target=trickle, daemon=True).start()
    assert server.receive(grader, deadline=time.monotonic() + 0.5) == b""
    assert not sent_all.is_set()  # the deadline ended the wait, not the 50 s trickle
    grader.close()
    kernel.close()
