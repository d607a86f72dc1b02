"""Read a cell's code against the allow-list (:mod:`.allowed`): what in it is outside.

:func:`outside` walks a cell's syntax tree and names, in one line each, every construct outside
the list (:class:`~.allowed.Found`), with whether it runs when its cell runs and whether it could
change what the code does not name. Attributes are followed on the real modules, imported here
only when the list allows them (:meth:`~.allowed.Context.importable`), so a module's public name
that leads into a module outside the list is outside too. :func:`numpy_uses` and
:func:`numpy_on_tensors` serve :func:`autograder.grader.scan.withheld_tests`, which decides where
numpy may meet a tensor across cells.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import hashlib
import importlib
import json
import os
import subprocess
import sys
import types
from functools import cache
from importlib import metadata
from pathlib import Path

from .allowed import (
    ALONE,
    BUILTINS,
    BY_NAME,
    DOTTED_PRIVATE,
    DUNDER,
    DUNDER_ATTRIBUTES,
    DUNDER_DEFS,
    EXCEPTIONS,
    HANDS_OFF,
    INTERNALS,
    MEASURED,
    MODULES,
    PARTLY,
    PUBLIC,
    Context,
    Found,
    named_only,
)
from .files import read_json, write_json


def imports(tree: ast.AST) -> dict[str, str]:
    """Local name -> the module or ``module.name`` it was imported as."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                found[a.asname or top] = a.name if a.asname else top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {a.asname or a.name: f"{node.module}.{a.name}" for a in node.names}
    return found | _aliases(tree, found)


def _dotted(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else None


def _aliases(tree: ast.AST, names: dict[str, str]) -> dict[str, str]:
    """Names assigned a module (``T = torch``, ``functional = torch.nn.functional``): a module
    by another name is the same module."""
    known = {**ALONE, **names}
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr) and node.value:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            parts = _dotted(node.value)
            if not parts or parts[0] not in {**known, **found}:
                continue
            path = ".".join([{**known, **found}[parts[0]], *parts[1:]])
            if isinstance(_object(path), types.ModuleType):
                found |= {t.id: path for t in targets if isinstance(t, ast.Name)}
    return found


def _object(path: str):
    """What ``path`` names, found by importing its longest importable prefix; None if nothing."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        obj = _module(".".join(parts[:i])) if parts[0] in sys.modules or i == 1 else None
        if obj is not None:
            for attribute in parts[i:]:
                obj = getattr(obj, attribute, None)
            return obj
    return None


@cache
def _module(name: str):
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 (absent here: judged by its name alone)
        return None


@cache
def _leads_outside() -> dict[str, str]:
    """Public attribute names that lead from a module of :data:`MODULES` to a module outside
    the list or to one of :data:`HANDS_OFF` (``jit`` -> ``torch.jit``): read on an object the
    scan cannot name (``torch`` under another name, passed as an argument), they are outside;
    but for the names of tensors', modules' and containers' own attributes (``x.grad``,
    ``x.cpu()``, ``model.modules()``).

    Worked out once per environment, in an interpreter of its own: a module's public names
    depend on what the process imported before (``torch.onnx`` is an attribute of ``torch`` only
    once something imported it), and ``check`` and each ``grade`` worker must read cells
    against the same list. It is kept in :func:`_leads_outside_file`; working it out imports
    all of :data:`MODULES` (1.5 CPU-s, ``torch._dynamo`` with them), which every ``check`` and
    every grading worker paid before.
    """
    path = _leads_outside_file()
    found = read_json(path)
    if isinstance(found, dict) and all(isinstance(v, str) for v in found.values()):
        return found
    found = _leads_outside_apart()
    with contextlib.suppress(OSError):  # a folder this user cannot write: worked out each time
        write_json(path, found)  # 0644: other users of this environment read it too
    return found


def _leads_outside_file() -> Path:
    """Where :func:`_leads_outside` is kept: beside this environment's packages, under a name
    that changes with this module, the allow-list, Python and the libraries it reads."""
    key = hashlib.sha256(sys.version.encode())
    for source in (Path(__file__), Path(__file__).with_name("allowed.py")):
        key.update(source.read_bytes())
    for distribution in ("torch", "numpy", "matplotlib", "ipython"):
        try:
            key.update(f"{distribution}=={metadata.version(distribution)}".encode())
        except metadata.PackageNotFoundError:
            key.update(f"{distribution} absent".encode())
    return Path(sys.prefix) / "share" / "mha-course" / f"leads-outside-{key.hexdigest()[:16]}.json"


_APART = (
    "import json; from autograder.grader import reading; "
    "print(json.dumps(reading._leads_outside_here()))"
)


def _leads_outside_apart() -> dict[str, str]:
    """:func:`_leads_outside_here` in a fresh interpreter (``-P``: not the current folder's
    modules); here, where no such interpreter answers (none to start, or it cannot import this
    package)."""
    package_parent = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), package_parent]))
    with contextlib.suppress(OSError, subprocess.SubprocessError, ValueError):
        done = subprocess.run(
            [sys.executable, "-P", "-c", _APART],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=True,
        )
        found = json.loads(done.stdout)
        if isinstance(found, dict):
            return found
    return _leads_outside_here()


def _leads_outside_here() -> dict[str, str]:
    """:func:`_leads_outside` worked out in this process, every module of :data:`MODULES`
    imported first (then no module's public names depend on the order they are read in)."""
    import torch  # noqa: PLC0415 (only when a cell is read)

    for name in sorted(MODULES):
        _module(name)

    ordinary = set().union(*(dir(t) for t in (torch.Tensor, torch.nn.Module, dict, list, str)))
    # Layers' own attributes live on instances (``proj.bias``, ``norm.eps``): ``bias`` also names
    # ``torch.nn.attention.bias`` once anything imported it, which made the list depend on what
    # the process had imported before.
    layers = (torch.nn.Linear(1, 1), torch.nn.LayerNorm(1), torch.nn.Embedding(1, 1))
    ordinary |= set().union(
        *(vars(layer) for layer in layers), *(layer._parameters for layer in layers)
    )
    found = {}
    for name in sorted(MODULES):
        module = _module(name)
        for attribute in dir(module) if module is not None else ():
            if attribute.startswith("_"):
                continue
            obj = getattr(module, attribute, None)
            path = f"{name}.{attribute}"
            outside = isinstance(obj, types.ModuleType) and obj.__name__ not in MODULES
            if (outside or path in HANDS_OFF) and attribute not in ordinary:
                found.setdefault(attribute, getattr(obj, "__name__", path) if outside else path)
    return found


def _private(dotted: str, attributes: list[str]) -> str | None:
    for attribute in attributes:
        dotted += f".{attribute}"
        if attribute.startswith("_") and attribute not in DUNDER_ATTRIBUTES:
            return f"uses a private name ({dotted})"
    return None


def _resolve(root: str, attributes: list[str], context: Context) -> str | None:
    """Why ``root.attributes`` (``root`` an import path) is outside, or None."""
    parts = root.split(".")
    for i in range(len(parts), 0, -1):  # the longest importable prefix: torch.nn.functional
        name = ".".join(parts[:i])
        if context.importable(name) and (obj := _module(name)) is not None:
            rest = parts[i:] + attributes
            break
    else:
        if context.allowed_module(root):
            return _private(root, attributes)
        return f"uses {'.'.join([root, *attributes])}"
    dotted = name
    if name in PARTLY and (not rest or rest[0] not in PARTLY[name]):
        used = ".".join([name, *rest[:1]])
        return f"uses {used} (of {name}, only {', '.join(sorted(PARTLY[name]))} are allowed)"
    for k, attribute in enumerate(rest):
        if attribute.startswith("_") and attribute not in DUNDER_ATTRIBUTES:
            return f"uses a private name ({dotted}.{attribute})"
        dotted += f".{attribute}"
        if dotted in HANDS_OFF:
            return HANDS_OFF[dotted]
        obj = getattr(obj, attribute, None)
        if obj is None:
            return _private(dotted, rest[k + 1 :])
        module = isinstance(obj, types.ModuleType)
        if module and not (context.allowed_module(obj.__name__) or dotted in context.helpers):
            return f"uses {obj.__name__}"
    if not context.allowed_module(name) and not any(
        h == dotted or dotted.startswith(h + ".") for h in context.helpers
    ):
        return f"uses {dotted}"
    return None


def _imports(module: str) -> str:
    if module.split(".")[0] == "autograder":
        return f"imports {module} (the grading package)"
    return f"imports {module}"


def _chain(node: ast.AST) -> tuple[ast.AST, list[str]]:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return node, parts[::-1]


class _Reader(ast.NodeVisitor):
    """Collects (why, at top level) for each construct outside the list."""

    def __init__(self, tree: ast.AST, context: Context) -> None:
        self.context = context
        self.names = context.modules | imports(tree)
        self.local = {
            n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.Lambda | ast.AsyncFunctionDef):
                args = node.args
                every = args.posonlyargs + args.args + args.kwonlyargs
                self.local |= {a.arg for a in [*every, args.vararg, args.kwarg] if a}
            if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
                self.local.add(node.name)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                self.local.add(node.name)
        self.spelled = _spelled_names(tree)
        self.depth = 0  # inside a function body: runs only when called
        self.selves: list[str | None] = []
        self.found: list[Found] = []
        self.numpy: list[tuple[str, bool]] = []  # (numpy path used, at the cell's top level)
        self.torch = False  # whether the cell names PyTorch

    def _module_of(self, name: str) -> str | None:
        """The import path a name stands for; judged alone, a standard-library module's name
        stands for that module."""
        if name in self.names:
            return self.names[name]
        alone = self.context.names is None and name not in self.local
        return name if alone and name in sys.stdlib_module_names else None

    def out(self, why: str, path: str | None = None, anything: bool = True) -> None:
        """One construct outside; ``path``: the dotted name it uses, if any."""
        if path is not None and self.context.arithmetic and path.split(".")[0] == "torch":
            why, anything = why + MEASURED, False
        elif path is not None:
            anything = not named_only(path) or "private" in why
        self.found.append(Found(why, self.depth == 0, anything))

    def _used(self, path: str) -> None:
        """Notes a use of numpy or of PyTorch, for :func:`numpy_on_tensors`."""
        top = path.split(".")[0]
        if top == "numpy":
            self.numpy.append((path, self.depth == 0))
        elif top == "torch":
            self.torch = True

    # ------------------------------------------------------------------ definitions
    def _function(self, node, in_class: bool) -> None:
        if node.name.startswith("__") and node.name.endswith("__") and node.name not in DUNDER_DEFS:
            self.out(f"defines {node.name}")
        for expr in [*node.decorator_list, *node.args.defaults, *node.args.kw_defaults]:
            if expr is not None:
                self.visit(expr)  # run when the def runs
        args = node.args
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        for annotation in [*(a.annotation for a in every if a), node.returns]:
            self._annotation(annotation)
        first = (node.args.posonlyargs + node.args.args)[:1]
        self.selves.append(first[0].arg if in_class and first else None)
        self.depth += 1
        for statement in node.body:
            self.visit(statement)
        self.depth -= 1
        self.selves.pop()

    def _annotation(self, node: ast.AST | None) -> None:
        """An annotation is code: run when its ``def`` runs, or, written as a string, whenever
        something (``typing.get_type_hints``) evaluates it. Read as code either way."""
        if node is None:
            return
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                node = ast.parse(node.value, mode="eval").body
            except SyntaxError:
                self.out("writes an annotation that is not Python")
                return
        self.visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._annotation(node.annotation)
        for child in (node.target, node.value):
            if child is not None:
                self.visit(child)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._function(node, self._in_class)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self.out("runs coroutines (async def)")

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for expr in [*node.args.defaults, *node.args.kw_defaults]:
            if expr is not None:
                self.visit(expr)
        self.depth += 1
        self.visit(node.body)
        self.depth -= 1

    _in_class = False

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if any(k.arg == "metaclass" for k in node.keywords):
            self.out(f"gives class {node.name} a metaclass")
        for expr in [*node.bases, *node.keywords, *node.decorator_list]:
            self.visit(expr)
        outer, self._in_class = self._in_class, True
        for statement in node.body:
            if isinstance(statement, ast.FunctionDef):
                self._function(statement, True)
            else:
                self._in_class = False
                self.visit(statement)
                self._in_class = True
        self._in_class = outer

    # ---------------------------------------------------------------------- imports
    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if not self.context.allowed_module(a.name) and a.name not in self.context.given:
                self.out(_imports(a.name), a.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            self.out("imports from a file of its own (relative import)")
            return
        for a in node.names:
            if a.name == "*":
                self.out(f"imports every name of {node.module} (import *)")
                continue
            full = f"{node.module}.{a.name}"
            if full in self.context.given:
                continue
            why = _resolve(node.module, [a.name], self.context)
            if why or not self.context.allowed_module(node.module):
                self.out(why or _imports(node.module), full)

    # ---------------------------------------------------------------- names, attributes
    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if DUNDER.fullmatch(name):
            self.out(BY_NAME.get(name, f"uses {name}"))
        elif self._module_of(name):
            path = self._module_of(name)
            self._used(path)
            why = _resolve(path, [], self.context)
            if why:
                self.out(why, path)
        elif name in BY_NAME and name not in self.local:
            self.out(BY_NAME[name])
        elif name in self.local or name in BUILTINS or name in EXCEPTIONS:
            return
        elif self.context.names is None or name in self.context.names:
            return
        elif name in vars(builtins):
            self.out(f"uses the built-in {name}")
        else:  # a NameError when it runs, or bound by code that is outside itself
            self.out(f"uses {name}, which no cell of the notebook defines", anything=False)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        root, parts = _chain(node)
        if isinstance(root, ast.Name) and self._module_of(root.id):
            path = ".".join([self._module_of(root.id), *parts])
            self._used(path)
            if isinstance(node.ctx, ast.Store | ast.Del):
                self.out(f"patches a library ({path})")
                return
            why = _resolve(self._module_of(root.id), parts, self.context)
            if why:
                self.out(why, path)
            return
        own = isinstance(root, ast.Name) and self.selves and root.id == self.selves[-1]
        # judged alone, a name no line of the cell binds may be any module of the notebook's
        alone = self.context.names is None and isinstance(root, ast.Name)
        alone = alone and root.id not in self.local
        for i, attribute in enumerate(parts):
            if attribute in INTERNALS:
                self.out(f"{INTERNALS[attribute]} (.{attribute})")
            elif attribute in _leads_outside() and not alone:
                where = _leads_outside()[attribute]
                self.out(f"uses .{attribute} of an object the scan cannot name ({where})")
            elif DUNDER.fullmatch(attribute) and attribute not in DUNDER_ATTRIBUTES:
                self.out(f"uses {attribute}")
            elif attribute.startswith("_") and not DUNDER.fullmatch(attribute):
                if not (own and i == 0):
                    self.out(f"uses a private attribute (.{attribute})")
        self.visit(root)

    def visit_Call(self, node: ast.Call) -> None:
        """``getattr(m, "q_proj")`` reads no more than ``m.q_proj``, and ``setattr(m, "q_proj",
        v)`` sets no more than ``m.q_proj = v`` does (on an object, not a module), when the name
        is a public one written out (see :meth:`_public`)."""
        func, args = node.func, node.args
        by_name = isinstance(func, ast.Name) and func.id not in self.local
        if by_name and func.id == "type" and len(args) == 3:  # a class from a dict of methods
            self.out("makes a class from a dict (type with three arguments)")
        for keyword in node.keywords:  # dict(__torch_function__=f): a dunder name, spelled
            if keyword.arg and DUNDER.fullmatch(keyword.arg):
                self.out(f"names {keyword.arg} as a keyword")
        arity = {"getattr": (2, 3), "setattr": (3, 3)}.get(func.id if by_name else "", (0, -1))
        if arity[0] <= len(args) <= arity[1] and not node.keywords and self._public(args[1]):
            on_module = isinstance(args[0], ast.Name) and self._module_of(args[0].id)
            if func.id == "getattr" or not on_module:
                for arg in [args[0], *args[2:]]:
                    self.visit(arg)
                return
        self.generic_visit(node)

    def _public(self, node: ast.AST) -> bool:
        """A public attribute name spelled out: ``"q_proj"``, or a loop over such literals."""
        if isinstance(node, ast.Constant):
            return isinstance(node.value, str) and PUBLIC.fullmatch(node.value) is not None
        return isinstance(node, ast.Name) and node.id in self.spelled

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and not getattr(node, "docstring", False):
            text = node.value.strip()
            if DUNDER.fullmatch(text) or DOTTED_PRIVATE.fullmatch(text):
                self.out(f"names {text} in a string")

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # a docstring or a bare string: runs nothing
        self.generic_visit(node)

    def _async(self, node) -> None:
        self.out("runs coroutines (await, async for, async with)")

    visit_Await = visit_AsyncFor = visit_AsyncWith = _async


def _literal(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and bool(PUBLIC.fullmatch(node.value))
    )


def _spelled_names(tree: ast.AST) -> set[str]:
    """Names bound only to public attribute names written out in the cell: ``for name in
    ("q_proj", "k_proj")`` or ``name = "q_proj"`` (``getattr(m, name)`` then reads no more than
    ``m.q_proj`` would)."""
    literal = set()  # the Name nodes bound to such literals
    for node in ast.walk(tree):
        if isinstance(node, ast.For | ast.comprehension) and isinstance(node.target, ast.Name):
            items = node.iter.elts if isinstance(node.iter, ast.Tuple | ast.List) else []
            if items and all(_literal(e) for e in items):
                literal.add(id(node.target))
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and _literal(node.value):
            literal.add(id(node.targets[0]))
    stores = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
    return {n.id for n in stores if id(n) in literal} - {
        n.id for n in stores if id(n) not in literal
    }


def _read(tree: ast.AST, context: Context) -> _Reader:
    reader = _Reader(tree, context)
    reader.visit(tree)
    return reader


def numpy_on_tensors(what: str, paths: list[tuple[str, bool]], anything=False) -> Found:
    """numpy where it may meet a tensor (a tensor given to numpy, numpy's result made a tensor):
    outside, since the replay records no numpy operation. ``what``: how they may meet."""
    used = sorted({path for path, _ in paths})
    return Found(
        f"uses numpy on tensors ({', '.join(used[:2])}; {what})", any(n for _, n in paths), anything
    )


def numpy_uses(tree: ast.AST, context: Context) -> list[tuple[str, bool]]:
    """The numpy paths a cell uses, each with whether it is used at the cell's top level."""
    return _read(tree, context).numpy


def outside(tree: ast.AST, context: Context) -> list[Found]:
    """Each construct of ``tree`` outside the list (:class:`Found`), deduplicated. numpy in a
    cell that also names PyTorch, or reads a tensor as an array (``.numpy()``), is outside;
    numpy that meets tensors through other cells is judged by scan.withheld_tests."""
    reader = _read(tree, context)
    if reader.numpy and reader.torch:
        reader.found.append(numpy_on_tensors("the cell names PyTorch", reader.numpy))
    found: list[Found] = []
    imported = {
        f.why.removeprefix("imports ").split(" ")[0]
        for f in reader.found
        if f.why.startswith("imports")
    }
    for f in reader.found:
        if f.why.startswith("uses ") and f.why.removeprefix("uses ") in imported:
            continue
        same = [g for g in found if g.why == f.why]
        if same and (same[0].now or not f.now):
            continue
        if same:
            found.remove(same[0])
        found.append(f)
    return found
