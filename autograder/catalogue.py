"""The course catalogue: each notebook's id, number, title, time and prerequisites.

The notebook states these facts once, in its first lines (the ``.py`` source under
``solutions/``)::

    # # 04 · Grouped-query attention and the KV cache
    # **Time:** about 2 h (~70 min of exercises) · **Prerequisites:** 02, 03

Everything else that names them reads them from here, or a test checks it against here: the
README's map, ``START_HERE.md``'s map, ``progress``, and every test's list of notebooks.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from autograder import paths

TITLE = re.compile(r"^# # (?P<number>\d\d) · (?P<title>.+)$", re.M)
META = re.compile(
    r"^# \*\*Time:\*\* about (?P<time>.+?)(?: \([^)]*\))? · \*\*Prerequisites:\*\* (?P<pre>.+)$",
    re.M,
)


class CatalogueError(ValueError):
    """A notebook's first lines do not state its facts the catalogue's way."""


@dataclass(frozen=True)
class Notebook:
    id: str  # 04_grouped_query_attention
    number: str  # 04
    title: str  # Grouped-query attention and the KV cache
    time: str  # 2 h
    prerequisites: str  # 02, 03

    @property
    def heading(self) -> str:
        return f"{self.number} · {self.title}"


def _read(notebook_id: str) -> Notebook:
    source = paths.source_text(notebook_id).read_text(encoding="utf-8")
    titles, metas = TITLE.findall(source), META.findall(source)
    if len(titles) != 1 or len(metas) != 1:
        raise CatalogueError(
            f"{paths.source_text(notebook_id)} needs one title line `# # NN · Title` and one "
            "`# **Time:** about … · **Prerequisites:** …` line"
        )
    (number, title), (time, prerequisites) = titles[0], metas[0]
    if not notebook_id.startswith(number + "_"):
        raise CatalogueError(f"{notebook_id}: its title is numbered {number}")
    return Notebook(notebook_id, number, title.strip(), time.strip(), prerequisites.strip())


@functools.cache
def _catalogue(ids: tuple[str, ...]) -> tuple[Notebook, ...]:
    return tuple(_read(i) for i in ids)


def notebooks() -> tuple[Notebook, ...]:
    """Every notebook of the course, in order (``solutions/<id>/<id>.py``)."""
    return _catalogue(tuple(paths.notebook_ids()))


def notebook(notebook_id: str) -> Notebook:
    for entry in notebooks():
        if entry.id == notebook_id:
            return entry
    raise KeyError(notebook_id)
