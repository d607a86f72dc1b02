"""``python -m autograder check``: JSON a learner understands, one-line errors on bad input."""

import json
import os
import shutil
import sys
import time

import pytest

from autograder import paths, report
from autograder.cli import main
from autograder.grader import one_notebook
from conftest import autograder, run


def _bad_inputs(tmp_path, nb_id):
    good = paths.release_notebook(nb_id).read_text()
    d = tmp_path / "bad"
    d.mkdir()
    cases = {
        "missing": (d / f"{nb_id}.ipynb", None, "no such file"),
        "empty": (d / "e" / f"{nb_id}.ipynb", "", "is empty"),
        "truncated": (d / "t" / f"{nb_id}.ipynb", good[: len(good) // 2], "not valid JSON"),
        "corrupt": (d / "c" / f"{nb_id}.ipynb", '{"cells": [}', "not valid JSON"),
        "binary": (d / "b" / f"{nb_id}.ipynb", b"\x89PNG\r\n\x1a\n\xff\x00", "not a text file"),
        "not_a_notebook": (
            d / "n" / f"{nb_id}.ipynb",
            '{"hello": "world"}',
            "not a Jupyter notebook",
        ),
        "nbformat3": (
            d / "v3" / f"{nb_id}.ipynb",
            '{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": []}',
            "format 3",
        ),
        "invalid_v4": (
            d / "i" / f"{nb_id}.ipynb",
            '{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "x"}]}',
            "not a valid notebook",
        ),
        "wrong_name": (d / "w" / "homework.ipynb", good, "cannot tell which course notebook"),
        "not_ipynb": (d / "p" / f"{nb_id}.py", good, "expected a .ipynb file"),
        # learners' copies from before the interview notebook became 09 (08), then 10 (09)
        "old_name": (d / "o" / "08_interview_prep.ipynb", good, "old name of 10_interview_prep"),
        "old_name_09": (
            d / "o9" / "09_interview_prep.ipynb",
            good,
            "old name of 10_interview_prep",
        ),
    }
    for path, content, _ in cases.values():
        if content is not None:
            path.parent.mkdir(exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
    return cases


BAD = [
    "missing",
    "empty",
    "truncated",
    "corrupt",
    "binary",
    "not_a_notebook",
    "nbformat3",
    "invalid_v4",
    "wrong_name",
    "not_ipynb",
    "old_name",
    "old_name_09",
]


@pytest.mark.parametrize("case", BAD)
def test_bad_input_gets_one_line_error(case, tmp_path, first_notebook, capsys):
    path, _, expected = _bad_inputs(tmp_path, first_notebook)[case]
    assert main(["check", str(path)]) == 2
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], lines


def test_bad_input_json_mode(tmp_path, first_notebook, capsys):
    path, _, expected = _bad_inputs(tmp_path, first_notebook)["truncated"]
    assert main(["check", str(path), "--json"]) == 2
    assert expected in json.loads(capsys.readouterr().out)["error"]


def test_help_lists_the_learners_commands_first_in_plain_text(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "``" not in text, "reST markup shows as is in a terminal"
    learners, instructors = text.index("For learners:"), text.index("For instructors:")
    listed = {}
    for line in text.splitlines():
        words = line.split()
        if line.startswith("  ") and words and words[0].isalpha() and words[0] != "-h":
            listed[words[0]] = text.index(line)
    learner = ["check", "progress", "interview", "lab"]
    assert list(listed) == [*learner, "build", "validate", "grade", "merge"]
    assert all(learners < listed[c] < instructors for c in learner)
    assert all(instructors < listed[c] for c in ["build", "validate", "grade", "merge"])
    for command in listed:
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "``" not in capsys.readouterr().out, command


class _Graded(Exception):
    """Raised by a stand-in for grading, once it has seen what was printed before."""


@pytest.mark.parametrize("as_json", [False, True])
def test_check_first_says_which_saved_file_it_grades(
    tmp_path, first_notebook, monkeypatch, capsys, as_json
):
    mine = tmp_path / f"{first_notebook}.ipynb"
    shutil.copyfile(paths.release_notebook(first_notebook), mine)
    saved = time.time() - 185
    os.utime(mine, (saved, saved))
    printed = []

    def grade(*args, **kwargs):
        printed.append(capsys.readouterr())
        raise _Graded

    monkeypatch.setattr(one_notebook, "grade_submissions", grade)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(_Graded):
        main(["check", mine.name, "--budget", "120"] + (["--json"] if as_json else []))
    ((out, err),) = printed
    header = err if as_json else out  # --json keeps stdout for the JSON alone
    assert (out if as_json else err) == ""
    assert header.startswith(f"Grading {mine.name}, saved "), header
    assert "(3 min ago)" in header and "at most 120 s" in header, header
    assert "check grades the saved file: save first (Ctrl+S)" in header, header


def test_header_shows_the_save_time_and_age(tmp_path):
    mine = tmp_path / "01_attention_from_scratch.ipynb"
    mine.write_text("{}")
    saved = time.mktime((2025, 3, 4, 14, 2, 11, 0, 0, -1))
    os.utime(mine, (saved, saved))
    assert "saved 14:02:11 (42 s ago)" in report.format_header(mine, 300, now=saved + 42)
    assert "saved 2025-03-04 14:02 (2 days ago)" in report.format_header(
        mine, 300, now=saved + 2 * 86400 + 5
    )


@pytest.mark.slow
def test_bad_input_from_a_real_process(tmp_path, first_notebook):
    """The installed entry point: exit status 2, one line on stderr, no traceback."""
    path, _, expected = _bad_inputs(tmp_path, first_notebook)["nbformat3"]
    result = autograder("check", str(path))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: {path} uses notebook format 3, "
        "this course needs format 4: open it in JupyterLab and save it again to upgrade it"
    ]


@pytest.mark.slow
def test_release_scores_zero_with_a_message_per_cell(tmp_path, first_notebook):
    """Run as a learner in work/ may run it: the interpreter named by a relative path
    (``../.venv/bin/python``), which a sandboxed kernel cannot follow from its own folder."""
    learner_copy = tmp_path / "anywhere" / f"{first_notebook}.ipynb"
    learner_copy.parent.mkdir()
    shutil.copyfile(paths.release_notebook(first_notebook), learner_copy)
    python = os.path.relpath(sys.executable, learner_copy.parent)
    assert python.startswith("..")
    argv = [python, "-m", "autograder", "check", learner_copy.name, "--json"]
    result = run(argv, cwd=learner_copy.parent)
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert set(report) == {"notebook", "score", "max_score", "cells", "manual"}
    assert report["score"] == 0 and report["max_score"] > 0
    for cell in report["cells"]:
        assert set(cell) == {"grade_id", "score", "max_score", "passed", "message"}
        assert cell["grade_id"].startswith("test_")
        assert not cell["passed"] and cell["score"] == 0
        assert "not implemented yet" in cell["message"], cell


@pytest.mark.slow
def test_solution_scores_full_marks(first_notebook):
    result = autograder("check", str(paths.solution_notebook(first_notebook)))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "All automatic tests pass" in result.stdout


def test_a_notebook_caught_mid_save_is_read_whole(tmp_path, first_notebook):
    """JupyterLab saves (and autosaves) by truncating the file and writing it anew: a ``check``
    that reads in between finds it empty, then whole a moment later, and must grade it whole."""
    import threading

    from autograder.notebook_files import read_notebook

    good = paths.release_notebook(first_notebook).read_text()
    path = tmp_path / f"{first_notebook}.ipynb"
    path.write_text("")
    threading.Timer(0.3, path.write_text, [good]).start()
    assert read_notebook(path).cells


def test_every_instructor_cell_has_a_measured_time_and_a_short_limit():
    """``check``'s per-cell limits come from the stored timings
    (:mod:`autograder.grader.cell_limits`): a cell added or edited since is named here, with the
    command that times it again."""
    import nbformat

    from autograder.grader import cell_limits
    from autograder.grader.nbgrader_settings import CELL_TIMEOUT_S

    measured = json.loads(cell_limits.MEASURED.read_text())
    for nb_id in paths.notebook_ids():
        nb = nbformat.read(paths.solution_notebook(nb_id), as_version=4)
        missing = [c.id for c in nb.cells if c.cell_type == "code" and c.id not in measured[nb_id]]
        assert not missing, (
            f"run `python -m autograder.grader.cell_limits {nb_id}`: {missing} untimed"
        )
    first = nbformat.read(paths.release_notebook(paths.notebook_ids()[0]), as_version=4)
    tests = [c for c in first.cells if c.cell_type == "code" and c.id.startswith("test_")]
    limits = [cell_limits.limit(c, CELL_TIMEOUT_S) for c in tests]
    assert max(limits) <= 2 * cell_limits.FLOOR_S, limits  # notebook 01's tests take < 1 s
    assert cell_limits.limit({"id": "a-cell-the-learner-added"}, CELL_TIMEOUT_S) == CELL_TIMEOUT_S


@pytest.mark.slow
def test_an_endless_loop_is_named_within_seconds(tmp_path, first_notebook):
    """An endless loop in notebook 01's softmax used to wait out 60 s in each cell that called it
    (190 s in all); each cell's limit now follows what the solution needs there. The loop
    sleeps: the limit is wall-clock time, and a spinning loop would burn a core for all of it."""
    nb = json.loads(paths.release_notebook(first_notebook).read_text())
    answer = next(c for c in nb["cells"] if c.get("id") == "softmax")
    answer["source"] = (
        "import time\n\ndef softmax(x, dim=-1):\n    while True:\n        time.sleep(0.01)\n"
    )
    mine = tmp_path / f"{first_notebook}.ipynb"
    mine.write_text(json.dumps(nb))
    began = time.monotonic()
    result = autograder("check", str(mine))
    took = time.monotonic() - began
    assert result.returncode == 1, result.stdout + result.stderr
    assert "look for an endless loop" in result.stdout, result.stdout
    assert took < 60, f"{took:.0f} s"
