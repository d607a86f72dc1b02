"""The README's map of the notebooks takes each notebook's time and prerequisites from the
notebook itself: the line ``**Time:** about … · **Prerequisites:** …`` under its title."""

import re

from autograder import paths

META = re.compile(
    r"^# \*\*Time:\*\* about (?P<time>.+?)(?: \([^)]*\))? · \*\*Prerequisites:\*\* (?P<pre>.+)$",
    re.M,
)
ROW = re.compile(r"^\| \d\d \| `(?P<id>\w+)` \| .+ \| (?P<pre>[^|]+) \| (?P<time>[^|]+) \|$")


def _notebook_meta(notebook_id: str) -> tuple[str, str]:
    source = paths.source_text(notebook_id).read_text(encoding="utf-8")
    found = META.findall(source)
    assert len(found) == 1, f"{notebook_id} needs exactly one **Time:** … **Prerequisites:** line"
    return found[0]


def _readme_rows() -> dict[str, tuple[str, str]]:
    readme = (paths.REPO_ROOT / "README.md").read_text(encoding="utf-8")
    rows = {}
    for line in readme.splitlines():
        if match := ROW.match(line):
            rows[match["id"]] = (match["time"].strip(), match["pre"].strip())
    return rows


def test_every_notebook_is_in_the_readme_map():
    assert sorted(_readme_rows()) == paths.notebook_ids()


def test_readme_times_and_prerequisites_come_from_the_notebooks():
    rows = _readme_rows()
    for notebook_id in paths.notebook_ids():
        assert rows[notebook_id] == _notebook_meta(notebook_id), notebook_id


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
