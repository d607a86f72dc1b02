"""How much correct code the allow-list leaves to the grader, per catalogue, before and after.

Every distinct ``CORRECT`` implementation of ``tests/mistakes`` (the instructor's variants and
the ways real codebases write the same thing) is pasted into one answer cell the way a learner
would paste it: its source, after the helpers and imports of its catalogue module it uses
(transitively, a sibling catalogue's helpers included). The cell is read in its notebook's
context (the release's given cells and imports, the tools taught in that answer cell), and the
implementation *stays with the grader* when nothing in it is outside the allow-list of
:mod:`autograder.grader.allowed`; otherwise every test reaching it is withheld for a person.

``before`` reads the same cells with the deny-lists of ``scan.py`` at fcac697 (the commit before
the allow-list), loaded from git; ``after`` with the allow-list. ``tests/test_allowlist.py``
holds ``after`` at its measured value.

Run: ``.venv/bin/python tests/allowlist_share.py [-v] [catalogue ...]`` (from the repository
root); ``-v`` prints what each withheld implementation uses.
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import subprocess
import sys
import types
from collections import defaultdict
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mistakes import catalogues  # noqa: E402

from autograder import nbcell, paths  # noqa: E402
from autograder.grader import allowed, reading, scan  # noqa: E402

BEFORE = "fcac697"  # the last commit with scan.py's deny-lists


def _bound(statement: ast.stmt) -> set[str]:
    if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {statement.name}
    if isinstance(statement, ast.Import | ast.ImportFrom):
        return {a.asname or a.name.split(".")[0] for a in statement.names}
    names = [n for n in ast.walk(statement) if isinstance(n, ast.Name)]
    return {n.id for n in names if isinstance(n.ctx, ast.Store)}


def _free(node: ast.AST) -> set[str]:
    """Names ``node`` reads that it does not bind itself."""
    local = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            local.add(n.id)
        elif isinstance(n, ast.arg):
            local.add(n.arg)
        elif isinstance(n, ast.FunctionDef | ast.ClassDef) and n is not node:
            local.add(n.name)
    read = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return read - local


@functools.cache
def _parts(module_name: str) -> tuple[str, list[ast.stmt], dict[str, list[ast.stmt]]]:
    source = inspect.getsource(sys.modules[module_name])
    tree = ast.parse(source)
    binders = defaultdict(list)
    for statement in tree.body:
        for name in _bound(statement):
            binders[name].append(statement)
    return source, tree.body, binders


def _text(source: str, statement: ast.stmt) -> str:
    lines = source.splitlines()
    first = min([statement.lineno, *(d.lineno for d in getattr(statement, "decorator_list", []))])
    return "\n".join(lines[first - 1 : statement.end_lineno])


def _sibling(statement: ast.stmt) -> bool:
    """An import of another catalogue's code, which a learner would paste, not import."""
    if not isinstance(statement, ast.ImportFrom):
        return False
    return bool(statement.level) or (statement.module or "").split(".")[0] == "mistakes"


def _top(obj) -> tuple[str, str]:
    """(module, the top-level name that defines ``obj``: a closure's factory, a method's class)."""
    return obj.__module__, obj.__qualname__.split(".")[0]


def pasted(impl) -> str:
    """The answer cell a learner would write for ``impl``: its source, after the helpers and
    imports of its module it uses (a sibling catalogue's helpers pasted in turn)."""
    while isinstance(impl, functools.partial):
        impl = impl.func
    chosen: dict[str, list[ast.stmt]] = defaultdict(list)
    aliases: list[str] = []
    todo, seen, library = [_top(impl)], set(), []
    for cell in getattr(impl, "__closure__", None) or ():  # a factory's arguments: functions
        obj = cell.cell_contents
        if not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue
        if obj.__module__.split(".")[0] == "mistakes":
            todo.append(_top(obj))
        else:  # a library's (causal_lower_right): imported, as a learner would
            library.append(f"from {obj.__module__} import {obj.__name__}")
    while todo:
        module, name = todo.pop()
        if (module, name) in seen:
            continue
        seen.add((module, name))
        source, _, binders = _parts(module)
        for statement in binders.get(name, []):
            if isinstance(statement, ast.ImportFrom) and statement.module == "__future__":
                continue
            if _sibling(statement):
                alias = next(a for a in statement.names if (a.asname or a.name) == name)
                obj = getattr(sys.modules[module], name)
                todo.append((obj.__module__, alias.name))
                if alias.asname and alias.asname != alias.name:
                    aliases.append(f"{alias.asname} = {alias.name}")
                continue
            if statement not in chosen[module]:
                chosen[module].append(statement)
                if not isinstance(statement, ast.Import | ast.ImportFrom):
                    todo += [(module, free) for free in _free(statement)]
    order = sorted(chosen, key=lambda m: m == impl.__module__)  # helpers' modules first
    blocks = []
    for module in order:
        source, body, _ = _parts(module)
        statements = sorted(chosen[module], key=body.index)
        imports = [s for s in statements if isinstance(s, ast.Import | ast.ImportFrom)]
        rest = [s for s in statements if s not in imports]
        blocks += [_text(source, s) for s in imports + rest]
    imports = sorted({b for b in blocks + library if b.startswith(("import ", "from "))})
    code = list(dict.fromkeys(b for b in blocks if b not in imports))
    return "\n\n\n".join(["\n".join(imports), *code, *aliases]).strip() + "\n"


def notebook(check) -> str:
    """The id of the notebook whose check ``check`` is (``autograder.checks.nb02_*`` -> 02); a
    catalogue's wrapper around a check is its catalogue's ``checks`` module's."""
    module = check.__module__
    if not module.startswith("autograder.checks."):
        module = sys.modules[module].checks.__name__
    number = module.rsplit(".", 1)[-1][2:4]
    return next(p.name for p in paths.COURSE_DIR.iterdir() if p.name.startswith(number + "_"))


@functools.cache
def _release(nb_id: str):
    return nbformat.read(paths.release_notebook(nb_id), as_version=4)


def _answer_cell(check, release) -> str | None:
    """The answer cell ``check`` judges: the one sharing most leading words with its name."""
    words = check.__name__.removeprefix("check_").split("_")

    def shared(grade_id: str) -> int:
        pairs = zip(words, grade_id.split("_"), strict=False)
        return len(list(itertools.takewhile(lambda pair: pair[0] == pair[1], pairs)))

    ids = [nbcell.grade_id(c) for c in release.cells if nbcell.is_answer(c)]
    best = max(ids, key=shared, default=None)
    return best if best and shared(best) else None


def after(source: str, check) -> list[str]:
    """What in the answer cell ``source`` is outside the allow-list, in its notebook's context."""
    nb_id = notebook(check)
    release = _release(nb_id)
    tree = scan.parse(source)
    context = scan._context(release, nb_id, [tree])  # the release is read once: scan keeps it
    context.taught = allowed.taught(nb_id, _answer_cell(check, release), True)
    return [f.why for f in reading.outside(tree, context)]


def _before() -> types.ModuleType | None:
    """``scan.py`` as it was at :data:`BEFORE`, or None without the repository's history."""
    try:
        text = subprocess.run(
            ["git", "show", f"{BEFORE}:autograder/grader/scan.py"],
            capture_output=True,
            text=True,
            check=True,
            cwd=paths.REPO_ROOT,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    module = types.ModuleType("scan_before")
    exec(compile(text, f"{BEFORE}:scan.py", "exec"), module.__dict__)  # noqa: S102
    return module


def implementations(names: list[str] = ()) -> dict[str, list[tuple[str, object, object]]]:
    """Catalogue -> its distinct correct implementations: (name, impl, a check it passes)."""
    found = {}
    for name, catalogue in sorted(catalogues().items()):
        if names and name not in names:
            continue
        seen, entries = set(), []
        for entry in catalogue.CORRECT:
            key = (notebook(entry.check), id(entry.impl))
            if key not in seen:
                seen.add(key)
                entries.append((entry.name, entry.impl, entry.check))
        found[name] = entries
    return found


def kept(names: list[str] = ()) -> dict[str, tuple[int, int]]:
    """Catalogue -> (implementations the allow-list leaves to the grader, implementations)."""
    return {
        name: (sum(not after(pasted(impl), check) for _, impl, check in entries), len(entries))
        for name, entries in implementations(names).items()
    }


def main(args: list[str]) -> None:
    verbose = "-v" in args
    names = [a for a in args if a != "-v"]
    old = _before()
    totals = [0, 0, 0]
    for name, entries in implementations(names).items():
        kept_before = kept_after = 0
        for label, impl, check in entries:
            source = pasted(impl)
            outside = after(source, check)
            kept_after += not outside
            if old is not None:
                tree = old.parse(source)
                kept_before += tree is not None and not old._dynamic(tree)
            if verbose and outside:
                print(f"  {name}: {label} ({check.__name__}): {'; '.join(outside)}")
        totals = [totals[0] + kept_before, totals[1] + kept_after, totals[2] + len(entries)]
        was = f"{kept_before}/{len(entries)}" if old is not None else "n/a"
        print(f"{name}: before {was}, after {kept_after}/{len(entries)}", flush=True)
    before, after_, total = totals
    was = f"{before}/{total} ({before / total:.1%})" if old is not None else "n/a"
    print(f"all: before {was}, after {after_}/{total} ({after_ / total:.1%}) stay with the grader")


if __name__ == "__main__":
    main(sys.argv[1:])
