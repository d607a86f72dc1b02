"""The course's two maps with the catalogue's facts written in: nobody keeps them in step by hand.

The README's map (``| 01 | `01_…` | what you build | prerequisites | time |``) and the learner's
``START_HERE.md`` (``| 01 | `01_…` | what you build | time |``) describe each notebook in words
of their own, edited by hand; its time and prerequisites are the catalogue's
(:mod:`autograder.catalogue`, the notebook's first lines), and so is the README's list of the
notebooks with written answers. ``build`` rewrites those columns and that list
(:func:`readme`, :func:`start_here`); ``build --check`` names a map that is out of step. A row
for a notebook the map lacks is added with its title as the description, to be reworded.

The code's map, ``autograder/MODULES.md``, is written the same way from each module's docstring
(:func:`module_index`).
"""

from __future__ import annotations

import ast
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


def _summary(path) -> str:
    """The first sentence of a module's docstring, on one line."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    paragraph = " ".join(doc.split("\n\n", 1)[0].split())
    sentence = re.match(r"(.+?[.!?])(\s|$)", paragraph)
    return (sentence[1] if sentence else paragraph).replace("|", "\\|")


def module_index() -> str:
    """``autograder/MODULES.md``: every module of the package, by package, with the first
    sentence of its docstring (the table the README used to keep by hand, and let drift)."""
    root = paths.REPO_ROOT / "autograder"
    modules = sorted(
        p
        for p in root.rglob("*.py")
        if "jupyter_config" not in p.parts and "__pycache__" not in p.parts
    )
    packages: dict[str, list] = {}
    for path in modules:
        package = path.parent.relative_to(root.parent).as_posix()
        packages.setdefault(package, []).append(path)
    lines = [
        "# Every module of `autograder/`, with the first sentence of its docstring",
        "",
        "Written by `python -m autograder build` from the modules themselves (`build --check`",
        "fails when it is out of date): edit a module's docstring, not this page.",
    ]
    for package, paths_in in sorted(packages.items()):
        lines += ["", f"## `{package}/`", "", "| module | what it does |", "|---|---|"]
        lines += [f"| `{p.name}` | {_summary(p)} |" for p in paths_in]
    return "\n".join(lines) + "\n"
