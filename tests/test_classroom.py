"""Classroom grading end to end: an interrupted run resumes, cold kernels grade the same, warm ones
never preload Triton, and runs at once get kernel uids of their own."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import background
import nbformat
import pytest
from nbformat.v4 import new_code_cell
from notebook_cells import NB

from autograder import paths
from autograder.grader.files import read_json
from autograder.grader.gradebook import (
    open_gradebook,
)
from autograder.grader.isolation import Isolation
from conftest import REPO, autograder_job, run

# ----------------------------------------------------------------------------- end to end


def _class(tmp_path: Path, students: dict[str, str]) -> Path:
    """Submissions of notebook 01: ``correct``, ``stub`` (release) or ``corrupt``."""
    from hostile import notebooks

    subs = tmp_path / "subs"
    solution, release = notebooks(tmp_path)
    for student, kind in students.items():
        folder = subs / student / NB
        folder.mkdir(parents=True)
        if kind == "corrupt":
            (folder / f"{NB}.ipynb").write_text('{"cells": [')
        else:
            nbformat.write(solution if kind == "correct" else release, folder / f"{NB}.ipynb")
    return subs


@pytest.fixture(scope="module")
def notebook_01():
    if NB not in paths.notebook_ids():
        pytest.skip(f"{NB} is not in solutions/")


def _graded_part(path: Path) -> dict:
    """A result but its flags: the end of a run adds ``identical to ...`` flags over the whole
    class (an interrupted run never gets there), which is not grading it again."""
    return {k: v for k, v in read_json(path).items() if k != "flags"}


RESUMED = {
    "a_correct": "correct",
    "b_stub": "stub",
    "c_corrupt": "corrupt",
    "d_correct": "correct",
    "f_correct": "correct",
}


def _interrupt_and_resume(stack) -> dict:
    """A ``grade`` run interrupted (Ctrl+C) after two results, then run again: what each left.
    A background job (a thread: it waits on the first run, then starts the second)."""
    tmp_path = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mha-resume-")))
    subs = _class(tmp_path, RESUMED)
    out = tmp_path / "out"
    command = [
        sys.executable,
        "-m",
        "autograder",
        "grade",
        str(subs),
        "--out",
        str(out),
        "--jobs",
        "1",
        "--cell-timeout",
        "20",
        "--budget",
        "60",
    ]
    env = dict(os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])
    first = subprocess.Popen(
        command,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # as typed in a terminal: a suite started as a shell's background job passes SIGINT on
        # ignored, and Python then never turns it into KeyboardInterrupt
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    results = out / "results" / NB
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(list(results.glob("*.json"))) < 2:
        time.sleep(0.5)
    first.send_signal(signal.SIGINT)
    stdout, stderr = first.communicate(timeout=120)
    done_before = {p.name: _graded_part(p) for p in results.glob("*.json")}
    second = run(command)
    after = {p.name: _graded_part(p) for p in results.glob("*.json")}
    with open_gradebook(out / "gradebook.db") as gb:
        scores = {s.student.id: s.score for s in gb.find_assignment(NB).submissions}
    return {
        "first": (first.returncode, stdout, stderr),
        "done_before": done_before,
        "second": second,
        "after": after,
        "a_correct": read_json(results / "a_correct.json"),
        "scores": scores,
    }


if NB in paths.notebook_ids():
    background.job("resumed", cores=0.5, rank=15)(
        lambda folder: background.ThreadJob(_interrupt_and_resume, folder)
    )


@pytest.fixture(scope="module")
def resumed(notebook_01):
    return background.start("resumed").wait()


@pytest.mark.slow
def test_interrupted_run_resumes_without_regrading(resumed):
    students = RESUMED
    returncode, stdout, stderr = resumed["first"]
    done_before, second, after = resumed["done_before"], resumed["second"], resumed["after"]
    assert returncode == 130 and "interrupted" in stderr, stdout + stderr
    assert 2 <= len(done_before) < len(students)
    assert second.returncode == 2, second.stdout + second.stderr  # the corrupt one
    assert f"{len(done_before)} unchanged since the last run" in second.stdout, second.stdout
    assert {k: after[k] for k in done_before} == done_before
    assert resumed["a_correct"]["flags"] == [
        "identical to the submissions of d_correct, f_correct (the same notebook bytes)"
    ]
    assert sorted(after) == sorted(f"{s}.json" for s in students)
    scores = resumed["scores"]
    expected = {s: 10.0 if kind == "correct" else 0.0 for s, kind in students.items()}
    del expected["c_corrupt"]
    assert scores == expected


def _start_cold_kernels(folder: Path) -> background.Job:
    """Correct answers (set-up, answer and test cells only), then ``os._exit(3)`` after the
    tests, graded with ``--cold``: a background job, read by the test below."""
    from hostile import filled, minimal, notebooks

    solution, release = notebooks(folder)
    nb = minimal(filled(release, solution))
    nb.cells.append(new_code_cell("import os\nos._exit(3)"))
    nb.cells.append(new_code_cell("print('never')"))
    (folder / "subs" / "exits" / NB).mkdir(parents=True)
    nbformat.write(nb, folder / "subs" / "exits" / NB / f"{NB}.ipynb")
    subs, out = str(folder / "subs"), str(folder / "out")
    return autograder_job(folder, "grade", subs, "--out", out, "--cold", "--jobs", "1")


if NB in paths.notebook_ids():
    background.job("cold_kernels", cores=0.5, rank=14)(_start_cold_kernels)


@pytest.fixture(scope="module")
def cold_kernels(notebook_01):
    return background.start("cold_kernels")


@pytest.mark.slow
def test_cold_kernels_grade_the_same_and_kernel_deaths_are_explained(cold_kernels):
    """Correct answers (set-up, answer and test cells only), then ``os._exit(3)`` after the
    tests: full marks, verified outside the kernel, and the kernel's death explained."""
    done, out = cold_kernels.wait(), cold_kernels.folder / "out"
    assert done.returncode == 0, done.stdout + done.stderr
    assert "a fresh kernel each" in done.stdout
    result = json.loads((out / "results" / NB / "exits.json").read_text())
    cells = [c for n in result["notebooks"] for c in n["cells"]]
    assert result["score"] == 10.0 and all(c["check"] == "verified" for c in cells), cells
    assert "exited with status 3" in result["notebooks"][0]["stopped"]


@pytest.mark.slow
def test_warm_kernels_never_preload_triton(tmp_path):
    """``@triton.jit`` reads ``TRITON_INTERPRET`` set by the notebook's own import of
    ``triton_support``; a forkserver that imported Triton first breaks every kernel cell."""
    from autograder.build import instructor_notebook_text
    from autograder.grader.kernels import warm_modules

    nb_id = "06_gpu_attention"
    if nb_id not in paths.notebook_ids():
        pytest.skip(f"{nb_id} is not in solutions/")
    source = tmp_path / f"{nb_id}.ipynb"
    source.write_text(instructor_notebook_text(nb_id), encoding="utf-8")
    modules = warm_modules(source)
    assert "torch" in modules
    code = "import importlib, sys\n"
    code += "".join(
        f"try:\n    importlib.import_module({m!r})\nexcept ImportError:\n    pass\n"
        for m in modules
    )
    code += "assert 'triton' not in sys.modules, 'a warm module imports triton'\n"
    done = run([sys.executable, "-c", code])
    assert done.returncode == 0, done.stderr[-2000:]


def test_grade_runs_at_once_get_kernel_uids_of_their_own():
    """Two runs on one machine never share a kernel uid (nor so its process limit): each holds a
    block, by a lock the kernel drops when the run's process ends."""
    import fcntl
    import subprocess
    import sys

    from autograder.grader.isolation import KERNEL_UID_BASE, UID_BLOCK, UID_LOCKS, claim_uids

    iso = Isolation("/usr/bin/prlimit", "/usr/bin/bwrap", "/usr/bin/setpriv", True)
    if os.geteuid() != 0:
        assert claim_uids(iso) == iso  # no uid switching, nothing to claim
        return
    mine = claim_uids(iso).uid_base
    other = subprocess.run(
        [sys.executable, "-c", CLAIM_IN_ANOTHER_PROCESS], capture_output=True, text=True
    )
    theirs = int(other.stdout)
    assert abs(theirs - mine) >= UID_BLOCK, (mine, theirs)
    block = UID_LOCKS / str((theirs - KERNEL_UID_BASE) // UID_BLOCK)
    fd = os.open(block, os.O_RDWR | os.O_NOFOLLOW)
    try:  # the other run has ended: its block is free again
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)


CLAIM_IN_ANOTHER_PROCESS = """
from autograder.grader.isolation import Isolation, claim_uids
iso = Isolation("/usr/bin/prlimit", "/usr/bin/bwrap", "/usr/bin/setpriv", True)
print(claim_uids(iso).uid_base)
"""
