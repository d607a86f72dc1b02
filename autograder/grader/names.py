"""Which names a learner's cell binds and reads, for :mod:`.scan` and :mod:`.hangs`.

The grader follows a test to the learner code it reaches by names alone: a test names an answer,
the answer's function reads a helper, the helper's cell binds it. A cell that binds names it
computes (``globals()[...]``) could bind any name, :data:`EVERY_NAME`.
"""

from __future__ import annotations

import ast
import re

from autograder.grader import allowed, reading

EVERY_NAME = "*"  # bound by a cell that binds names it computes: it could bind any of them


NAMESPACES = {"globals", "vars", "locals"}


BINDS_COMPUTED = "binds names it computes (globals(), vars() or setattr on a module)"


def _namespace(node: ast.AST, modules: set[str]) -> bool:
    """``globals()``, ``vars(...)``, ``sys.modules[...]`` or a module a cell imported."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id in NAMESPACES
    if isinstance(node, ast.Subscript):
        return _path(node.value, {}) == "sys.modules"
    return isinstance(node, ast.Name) and (node.id in modules or node.id == "__main__")


def binds_computed(tree: ast.Module) -> bool:
    """Whether a cell binds global names it computes: ``globals()[name] = ...``,
    ``vars().update(...)``, ``setattr(sys.modules[__name__], name, ...)``."""
    modules = {
        a.asname or a.name.split(".")[0]
        for n in ast.walk(tree)
        if isinstance(n, ast.Import)
        for a in n.names
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
            if _namespace(node.value, modules):
                return True
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and _namespace(func.value, modules):
            if func.attr in ("update", "__setitem__", "setdefault", "pop", "__delitem__"):
                return True
        named = isinstance(func, ast.Name) and func.id in ("setattr", "delattr")
        if named and node.args and _namespace(node.args[0], modules):
            return True
    return False


def _path(node: ast.AST, imported: dict[str, str]) -> str | None:
    """``torch._C._foo`` for an attribute chain on a name, with imports resolved."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([imported.get(node.id, node.id), *reversed(parts)])


def _docstrings(tree: ast.Module) -> set[int]:
    bodies = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, bodies)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def bindings(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(Names a cell binds for the cells after it, names it reads that it does not bind locally).

    Besides definitions and assignments, the names in its strings count as bound
    (``globals()["softmax"] = f``, ``exec("def softmax...")``), and so do names its functions
    declare ``global`` and names it imports from outside the allow-list; other imports bind library
    names, not the learner's code. A cell that binds names it computes
    (``globals()["sd" + "pa"] = f``) binds :data:`EVERY_NAME`: any name at all.
    """
    bound, read, local = set(), set(), set()
    docstrings = _docstrings(tree)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if reading.outside(ast.Module(body=[node], type_ignores=[]), allowed.Context()):
                bound |= {a.asname or a.name.split(".")[0] for a in node.names}
        else:
            bound |= _stored(node)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            local |= {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
            local |= {a.arg for a in (args.vararg, args.kwarg) if a}
            local |= _stored(node)
        elif isinstance(node, ast.Global):
            bound |= set(node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            read.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings:
                bound |= set(re.findall(r"[A-Za-z_]\w*", node.value))
    if binds_computed(tree):
        bound.add(EVERY_NAME)
    return bound, read - (local - bound)


def _stored(node: ast.AST) -> set[str]:
    """The names stored anywhere in ``node``: assignments, loop and ``with`` targets, ``:=``,
    ``except ... as``, and ``match`` captures."""
    names = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
        elif isinstance(n, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and n.name:
            names.add(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            names.add(n.rest)
    return names


def binds(bound: set[str], names: set[str]) -> bool:
    return EVERY_NAME in bound or bool(bound & names)


def reached_names(names: set[str], cells: list[tuple[set[str], set[str]]]) -> set[str]:
    """``names`` and every name the learner's cells (their :func:`bindings`) read to define
    them, transitively: a test that calls ``softmax`` reaches the helper ``softmax`` calls."""
    reached = set(names)
    grown = True
    while grown:
        grown = False
        for bound, read in cells:
            if binds(bound, reached) and not read <= reached:
                reached |= read
                grown = True
    return reached


def top_level_reads(tree: ast.Module) -> set[str]:
    """Names a cell's top-level code reads (not its function bodies)."""
    return {
        n.id
        for statement in tree.body
        if not isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for n in ast.walk(statement)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }


def binds_or_imports(tree: ast.Module) -> set[str]:
    """The names a cell binds, its imports of allowed modules included (:func:`bindings` leaves
    those out: they bind library names, not the learner's code)."""
    return bindings(tree)[0] | set(reading.imports(tree))
