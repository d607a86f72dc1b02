"""``python -m autograder check`` on broken and hostile notebooks: a definite grade, one sentence
per affected cell, the right exit status, never a Python traceback, and time limits that hold.

The notebooks come from ``tests/hostile`` (notebook 01). Several accidents share a run where they
do not stop the kernel. The runs that wait out time limits are background jobs; whether a limit
held is read from what stopped the notebook (its message), never from a stopwatch.
"""

import json
import re

import background
import nbformat
import pytest
from hostile import (
    SDPA,
    SOFTMAX,
    _copy,
    _last_test_of,
    filled,
    insert_after,
    minimal,
)

from autograder import nbcell, paths
from autograder.build import instructor_notebook_text
from autograder.cli import main
from conftest import autograder, autograder_job

NB = "01_attention_from_scratch"
CELL_TIMEOUT = 15  # the set-up cell imports torch in a fresh kernel: seconds on a busy machine
SDPA_TESTS = [
    "test_scaled_dot_product_attention_shapes",
    "test_scaled_dot_product_attention_matches_torch",
    "test_scaled_dot_product_attention_mask",
]


def _correct():
    if NB not in paths.notebook_ids():
        pytest.skip(f"{NB} is not in solutions/")
    solution = nbformat.reads(instructor_notebook_text(NB), as_version=4)
    release = nbformat.read(paths.release_notebook(NB), as_version=4)
    return minimal(filled(release, solution))


def _write(folder, nb, name: str) -> str:
    path = folder / name / f"{NB}.ipynb"
    path.parent.mkdir()
    nbformat.write(nb, path)
    return str(path)


def _check(tmp_path, nb, name: str, *extra: str):
    path = _write(tmp_path, nb, name)
    return _read(autograder("check", path, "--cell-timeout", str(CELL_TIMEOUT), *extra), name)


def _read(result, name: str):
    """Check's output holds no traceback; print it for the log; the result."""
    output = result.stdout + result.stderr
    assert "Traceback" not in output and not re.search(r"^\w+(Error|Exception):", output, re.M)
    print(f"\n{name}: exit {result.returncode}\n{result.stdout}")
    return result


def _cells(stdout: str) -> dict[str, tuple[str, str]]:
    """grade id -> (PASS/FAIL, the sentence under it) from check's report."""
    cells, last = {}, None
    for line in stdout.splitlines():
        found = re.match(r"  (PASS|FAIL)  (\S+)", line)
        if found:
            last = found.group(2)
            cells[last] = (found.group(1), "")
        elif last and line.startswith("        "):
            cells[last] = (cells[last][0], line.strip())
    return cells


@pytest.mark.slow
def test_repaired_structure_keeps_full_marks(tmp_path):
    """Test cells duplicated (the commonest accident), one deleted, answers' metadata stripped,
    a sys.exit() cell and a cell printing over the output cap: full marks, each repair noted."""
    nb = _correct()
    nb.cells = [d for c in nb.cells for d in ([c, _copy(c)] if nbcell.is_test(c) else [c])]
    for i, cell in enumerate(nb.cells):
        if i and cell.id == nb.cells[i - 1].id:
            cell.id = f"copy-{i}"
    deleted = _last_test_of(nb, SDPA)
    nb.cells = [c for c in nb.cells if nbcell.grade_id(c) != deleted]
    insert_after(nb, SDPA, "import sys\nsys.exit(3)\n")
    for cell in nb.cells:
        if nbcell.is_answer(cell):
            cell.metadata.pop("nbgrader")
    nb.cells.append(nbformat.v4.new_code_cell("for _i in range(12000):\n    print('y' * 100)\n"))
    result = _check(tmp_path, nb, "repaired")
    assert result.returncode == 0, result.stdout
    assert f"{NB}.ipynb: 10 / 10 points" in result.stdout
    assert "All automatic tests pass" in result.stdout
    notes = [line for line in result.stdout.splitlines() if line.startswith("  note: ")]
    assert any("appears 2 times: the last copy is graded" in n for n in notes), notes
    assert any(f"`{deleted}` was deleted" in n for n in notes), notes
    assert any(f"metadata of cell `{SOFTMAX}`" in n for n in notes), notes
    assert any("cut at the size cap" in n for n in notes), notes


def _start_slow_cell_check(folder):
    """Two cells that wait (``check``'s time limits, nearly no CPU): a background job."""
    nb = _correct()
    insert_after(nb, SOFTMAX, "import time\ntime.sleep(600)\n")
    insert_after(
        nb,
        _last_test_of(nb, SOFTMAX),
        "import time\nwhile True:\n    try:\n        time.sleep(0.1)\n"
        "    except KeyboardInterrupt:\n        pass\n",
    )
    path = _write(folder, nb, "ignores_interrupt")
    return autograder_job(folder, "check", path, "--cell-timeout", str(CELL_TIMEOUT))


if NB in paths.notebook_ids():
    background.job("slow_cell_check", cores=0, rank=10)(_start_slow_cell_check)


@pytest.fixture
def slow_cell_check():
    _correct()  # skips without notebook 01
    return _read(background.start("slow_cell_check").wait(), "ignores_interrupt")


BUDGET = 60  # seconds for the whole check; the cell limit (600 s) is far past it


def _start_budget_check(folder):
    """A notebook that tries to outlive its budget: a child process in a session of its own that
    ignores every polite signal, then SIGINT blocked and a loop that would swallow it anyway."""
    nb = _correct()
    insert_after(
        nb,
        _last_test_of(nb, SOFTMAX),
        "import signal, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import signal, time\\n"
        "for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP): signal.signal(s, signal.SIG_IGN)"
        "\\ntime.sleep(3600)'], start_new_session=True)\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])\n"
        "while True:\n    try:\n        time.sleep(0.1)\n    except KeyboardInterrupt:\n"
        "        pass\n",
    )
    path = _write(folder, nb, "outlives_budget")
    return autograder_job(folder, "check", path, "--cell-timeout", "600", "--budget", str(BUDGET))


def _start_hang_check(folder):
    """``softmax`` loops forever: every test calls it, directly or through the attention."""
    nb = _correct()
    for cell in nb.cells:
        if nbcell.grade_id(cell) == SOFTMAX:
            body = cell.source.index("\n", cell.source.index("def softmax")) + 1
            cell.source = (
                cell.source[:body]
                + "    import time\n    while True:\n        time.sleep(0.1)\n"
                + cell.source[body:]
            )
    path = _write(folder, nb, "hangs")
    return autograder_job(folder, "check", path, "--cell-timeout", str(CELL_TIMEOUT))


if NB in paths.notebook_ids():
    background.job("budget_check", cores=0, rank=10)(_start_budget_check)
    background.job("hang_check", cores=0, rank=10)(_start_hang_check)


@pytest.fixture
def budget_check():
    _correct()
    return _read(background.start("budget_check").wait(), "outlives_budget")


@pytest.fixture
def hang_check():
    _correct()
    return _read(background.start("hang_check").wait(), "hangs")


@pytest.mark.slow
def test_slow_cell_and_a_loop_that_ignores_interrupts(slow_cell_check):
    """A cell over the time limit is interrupted and grading goes on; a loop that swallows
    KeyboardInterrupt gets the kernel shut down: the tests after it score 0, each saying why."""
    result = slow_cell_check
    assert result.returncode == 1, result.stdout
    assert f"{NB}.ipynb: 4 / 10 points" in result.stdout
    assert "stopped early: the kernel did not stop when cell" in result.stdout
    assert "the cells after it scored 0" in result.stdout
    cells = _cells(result.stdout)
    for grade_id in SDPA_TESTS:
        assert cells[grade_id][0] == "FAIL" and "did not stop" in cells[grade_id][1], cells
    assert sum(mark == "PASS" for mark, _ in cells.values()) == 3, cells
    assert "time budget" not in result.stdout  # the cell limits stopped it, not the budget


@pytest.mark.slow
def test_a_notebook_cannot_outlive_its_budget(budget_check):
    """The budget is a wall-clock bound enforced by a watchdog that kills the kernel's whole
    sandbox: no interrupt is needed, so a child process, a blocked SIGINT and a loop that
    swallows KeyboardInterrupt all stop at it, and every cell is still reported."""
    result = budget_check
    assert result.returncode == 1, result.stdout
    assert f"{NB}.ipynb: 4 / 10 points" in result.stdout
    stop = f"the notebook used up its time budget of {BUDGET} s in cell"
    assert f"stopped early: {stop}" in result.stdout, result.stdout
    cells = _cells(result.stdout)
    assert sum(mark == "PASS" for mark, _ in cells.values()) == 3, cells
    for grade_id in SDPA_TESTS:
        assert cells[grade_id][0] == "FAIL" and stop in cells[grade_id][1], cells


@pytest.mark.slow
def test_a_function_that_hangs_ends_the_notebook_once(hang_check):
    """The first test that calls the endless ``softmax`` waits out its limit; every later test
    that reaches it, directly or through the learner's attention, is not run and says why."""
    result = hang_check
    assert result.returncode == 1, result.stdout
    assert f"{NB}.ipynb: 0 / 10 points" in result.stdout
    cells = _cells(result.stdout)
    first, *later = list(cells)
    assert "did not finish in time" in cells[first][1], cells
    assert later and all(
        cells[g][1].startswith("not run: `softmax` did not return within the time limit in cell")
        and cells[g][1].endswith("this test calls it too")
        for g in later
    ), cells
    assert "time budget" not in result.stdout and "stopped early" not in result.stdout


@pytest.mark.slow
def test_kernel_killed_by_the_learner(tmp_path):
    nb = _correct()
    last = _last_test_of(nb, SOFTMAX)
    insert_after(nb, last, "import os\nos._exit(1)\n")
    result = _check(tmp_path, nb, "os_exit", "--json")
    assert result.returncode == 1, result.stdout
    report = json.loads(result.stdout)
    assert report["score"] == 4 and report["max_score"] == 10
    assert f"died in cell 6 (after `{last}`): it exited with status 1" in report["stopped"]
    failed = {c["grade_id"]: c["message"] for c in report["cells"] if not c["passed"]}
    assert sorted(failed) == sorted(SDPA_TESTS)
    assert all(m.startswith("not run: the kernel died in cell") for m in failed.values()), failed
    assert "time budget" not in report["stopped"]  # no wait for a timeout or the budget


@pytest.mark.slow
def test_oversized_notebook_is_an_error_with_advice(tmp_path, monkeypatch, capsys):
    """The fifth kind of corrupt file (the others: test_cli): too big to grade."""
    from autograder.grader import structure

    monkeypatch.setattr(structure, "MAX_NOTEBOOK_BYTES", 1000)
    path = tmp_path / f"{NB}.ipynb"
    path.write_text(paths.release_notebook(NB).read_text())
    assert main(["check", str(path)]) == 2
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert err.strip().splitlines() == [
        f"error: {NB}.ipynb is 0 MB: clear its outputs (Edit > Clear Outputs of All Cells) and "
        "submit it again"
    ]
