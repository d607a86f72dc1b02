"""`progress`: an untouched work/ is "not started" everywhere, in seconds, without grading."""

import json
import shutil
import time

from autograder import nbcell, paths, progress
from conftest import autograder


def test_untouched_work_is_not_started_and_fast(tmp_path):
    work = tmp_path / "work"
    shutil.copytree(paths.COURSE_DIR, work)
    start = time.monotonic()
    result = autograder("progress", str(work))
    elapsed = time.monotonic() - start
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == len(paths.notebook_ids()) + 1, lines
    assert all(line.endswith("not started") for line in lines[:-1]), lines
    assert lines[-1].split()[1].startswith("0/"), lines[-1]
    assert "grading" not in result.stderr  # no progress bar: nothing was graded
    assert elapsed < 5, f"{elapsed:.1f} s"


def test_not_started_compares_answers_with_the_release(tmp_path, first_notebook):
    released = paths.release_notebook(first_notebook)
    nb = json.loads(released.read_text())
    for cell in nb["cells"]:  # what opening and running it in JupyterLab changes
        cell["metadata"]["collapsed"] = False
        if cell["cell_type"] == "code":
            cell["execution_count"] = 1
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "hi"}]
    mine = tmp_path / released.name
    mine.write_text(json.dumps(nb))
    assert progress.not_started(mine, first_notebook)
    answer = next(c for c in nb["cells"] if nbcell.is_answer(c))
    answer["source"] = "def softmax(x, dim=-1):\n    return x\n"
    mine.write_text(json.dumps(nb))
    assert not progress.not_started(mine, first_notebook)
    mine.write_text("{not json")
    assert not progress.not_started(mine, first_notebook)
