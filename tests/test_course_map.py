"""Course facts stated once: each notebook's first lines, read by :mod:`autograder.catalogue`.

The README's map and ``START_HERE.md``'s map (the learner's, in ``solutions/`` and its copy in
``course/``) list every notebook with the catalogue's time (and, in the README, prerequisites).
"""

import re

import pytest

from autograder import catalogue, paths

README_ROW = re.compile(r"^\| \d\d \| `(?P<id>\w+)` \| .+ \| (?P<pre>[^|]+) \| (?P<time>[^|]+) \|$")
START_ROW = re.compile(r"^\| \d\d \| `(?P<id>\w+)` \| .+ \| (?P<time>[^|]+) \|$")
START_HERE = [paths.SOLUTIONS_DIR / "START_HERE.md", paths.COURSE_DIR / "START_HERE.md"]


def _rows(path, pattern) -> dict[str, dict]:
    rows = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if match := pattern.match(line):
            rows[match["id"]] = {k: v.strip() for k, v in match.groupdict().items()}
    return rows


def test_every_notebook_states_its_facts_once_in_its_first_lines():
    entries = catalogue.notebooks()
    assert [e.id for e in entries] == paths.notebook_ids()
    assert all(e.title and e.time and e.prerequisites for e in entries)


def test_readme_map_lists_every_notebook_with_the_catalogues_time_and_prerequisites():
    rows = _rows(paths.REPO_ROOT / "README.md", README_ROW)
    assert sorted(rows) == paths.notebook_ids()
    for entry in catalogue.notebooks():
        assert (rows[entry.id]["time"], rows[entry.id]["pre"]) == (entry.time, entry.prerequisites)


@pytest.mark.parametrize("path", START_HERE, ids=lambda p: p.parent.name)
def test_start_here_map_lists_every_notebook_with_the_catalogues_time(path):
    rows = _rows(path, START_ROW)
    assert sorted(rows) == paths.notebook_ids()
    for entry in catalogue.notebooks():
        assert rows[entry.id]["time"] == entry.time, entry.id


def test_the_readme_lists_every_notebook_with_a_written_answer():
    readme = (paths.REPO_ROOT / "README.md").read_text(encoding="utf-8")
    listed = re.search(r"\*\*Written answers\*\* \(notebooks ([^)]*)\)", readme)[1]
    written = [
        notebook_id[:2]
        for notebook_id in paths.notebook_ids()
        if re.search(
            r'^# %% \[markdown\] nbgrader=\{"grade": true.*"solution": true',
            paths.source_text(notebook_id).read_text(encoding="utf-8"),
            re.M,
        )
    ]
    assert re.findall(r"\d\d", listed) == written
