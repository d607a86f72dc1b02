"""README's "Adding an exercise" and "Adding a notebook" tables say which files a change touches:
they hold for every notebook of the course, name tests that exist, and an exercise costs at most
four files edited by hand (issue 43)."""

import re

import pytest

from autograder import paths
from conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
ROW = re.compile(r"^\| (?P<file>.+?) \| (?P<by>[^|]+) \| (?P<tests>[^|]+) \|$", re.M)


def _table(heading: str) -> list[dict]:
    section = README.split(f"### {heading}", 1)[1].split("\n### ", 1)[0]
    rows = [m.groupdict() for m in ROW.finditer(section)]
    return [r for r in rows if r["file"] not in ("file", "---")]


TABLES = ["Adding an exercise: the files", "Adding a notebook: the files"]


def _paths(row: dict) -> list[str]:
    return re.findall(r"`([\w<>/.]+\.(?:py|ipynb|json|md))`", row["file"])


def test_an_exercise_is_at_most_four_files_edited_by_hand():
    by_hand = [r for r in _table(TABLES[0]) if r["by"].strip() == "hand"]
    assert 1 <= len(by_hand) <= 4, by_hand


@pytest.mark.parametrize("heading", TABLES)
def test_every_test_the_tables_name_exists(heading):
    named = {t for r in _table(heading) for t in re.findall(r"`(test_\w+)`", r["tests"])}
    assert named, heading
    missing = sorted(t for t in named if not (REPO / "tests" / f"{t}.py").is_file())
    assert not missing, f"README's {heading!r} names tests that do not exist: {missing}"


@pytest.mark.parametrize("heading", TABLES)
def test_every_file_pattern_holds_for_every_notebook(heading):
    """Each path, with a notebook's number and title put in, names files that exist (a topic
    (``<topic>``) matches any; a tools module is optional)."""
    for row in _table(heading):
        for pattern in _paths(row):
            optional = "if the notebook has" in row["file"]
            for notebook_id in paths.notebook_ids():
                found = _files(pattern, notebook_id)
                assert found or optional, f"{pattern} for {notebook_id}: no such file"


def _files(pattern: str, notebook_id: str) -> list:
    filled = pattern.replace("NN_<title>", notebook_id).replace("NN", notebook_id[:2])
    return sorted(REPO.glob(filled.replace("<topic>", "*")))


def test_every_check_module_fits_the_tables():
    """No check module outside the ``nbNN_<topic>`` pattern but the shared ones (``_x``) and the
    grader's entry points."""
    checks = REPO / "autograder" / "checks"
    numbered = {p.name for p in checks.glob("nb[0-9][0-9]_*.py")}
    others = {p.name for p in checks.glob("*.py")} - numbered
    assert all(n.startswith("_") or n in SHARED for n in others), sorted(others - SHARED)


SHARED = {"__init__.py", "operators.py", "measure.py", "registry.py"}
