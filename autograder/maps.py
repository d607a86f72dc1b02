"""The course's two maps with the catalogue's facts written in: nobody keeps them in step by hand.

The README's map (``| 01 | `01_…` | what you build | prerequisites | time |``) and the learner's
``START_HERE.md`` (``| 01 | `01_…` | what you build | time |``) describe each notebook in words
of their own, edited by hand; its time and prerequisites are the catalogue's
(:mod:`autograder.catalogue`, the notebook's first lines), and so is the README's list of the
notebooks with written answers. ``build`` rewrites those columns and that list
(:func:`readme`, :func:`start_here`); ``build --check`` names a map that is out of step. A row
for a notebook the map lacks is added with its title as the description, to be reworded.
"""

from __future__ import annotations

import re

from autograder import catalogue, paths

_ROW = re.compile(r"^\| (?P<number>\d\d) \| `(?P<id>\w+)` \| (?P<what>.+?) \|(?P<rest>.*)\|$")
_WRITTEN = re.compile(r"(\*\*Written answers\*\* \(notebooks )([^)]*)(\))")
_WRITTEN_CELL = re.compile(r'^# %% \[markdown\] nbgrader=\{"grade": true.*"solution": true', re.M)


def _rows(text: str, columns) -> str:
    """``text`` with each map row's columns after the description from ``columns(entry)``, in
    the catalogue's order, one row per notebook."""
    lines = text.splitlines(keepends=True)
    rows = [i for i, line in enumerate(lines) if _ROW.match(line.rstrip("\n"))]
    if not rows:
        return text
    described = {
        _ROW.match(lines[i].rstrip("\n"))["id"]: _ROW.match(lines[i])["what"] for i in rows
    }
    table = [
        f"| {e.number} | `{e.id}` | {described.get(e.id, e.title)} | {' | '.join(columns(e))} |\n"
        for e in catalogue.notebooks()
    ]
    return "".join(lines[: rows[0]] + table + lines[rows[-1] + 1 :])


def written_answers() -> list[str]:
    """The numbers of the notebooks with an answer a person grades (a written answer)."""
    return [
        notebook_id[:2]
        for notebook_id in paths.notebook_ids()
        if _WRITTEN_CELL.search(paths.source_text(notebook_id).read_text(encoding="utf-8"))
    ]


def _in_words(numbers: list[str]) -> str:
    return ", ".join(numbers[:-1]) + f" and {numbers[-1]}" if len(numbers) > 1 else "".join(numbers)


def readme(text: str) -> str:
    """The README with the catalogue's prerequisites and times, and its written-answers list."""
    text = _rows(text, lambda e: (e.prerequisites, e.time))
    return _WRITTEN.sub(lambda m: m[1] + _in_words(written_answers()) + m[3], text)


def start_here(text: str) -> str:
    """``START_HERE.md`` with the catalogue's times."""
    return _rows(text, lambda e: (e.time,))
