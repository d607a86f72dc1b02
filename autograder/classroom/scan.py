"""A static scan of the cells a learner could edit, for patterns an instructor should look at.

Flags are hints for a human, never a grade: most have innocent uses (``os.environ``, ``open``).
They are listed per submission in the summary and the grades CSV. Magics and ``!`` shell lines
are translated to Python first (IPython's own transformer), so ``!cat ../x`` is seen too.

One kind is more than a hint: dynamic features (another function's ``__globals__``, frames, code
from strings, PyTorch's modes switched off, the grading package) in code the learner wrote can
reach around the checks, so :func:`withheld_tests` names the test cells that depend on such code,
and their points wait for a person. The course's own answers use none of them.
"""

from __future__ import annotations

import ast
import re

from IPython.core.inputtransformer2 import TransformerManager

from autograder import nbcell

LIBRARIES = {"torch", "F", "nn", "np", "numpy", "math", "builtins", "autograder", "IPython"}
CALLS = {
    "setattr": "patches an attribute with setattr",
    "delattr": "deletes an attribute",
    "get_ipython": "talks to the kernel's shell (hooks, magics, shell commands)",
}
MODULES = {
    "builtins": "imports builtins",
    "subprocess": "starts processes",
    "multiprocessing": "starts processes",
    "pty": "starts processes",
    "ctypes": "uses ctypes (raw memory, native calls)",
    "cffi": "uses native calls",
    "socket": "uses the network",
    "urllib": "uses the network",
    "requests": "uses the network",
    "http": "uses the network",
    "signal": "handles signals",
    "inspect": "inspects frames or source",
    "gc": "walks the garbage collector's objects",
}
ATTRIBUTES = {
    ("sys", "settrace"): "traces execution",
    ("sys", "setprofile"): "traces execution",
    ("sys", "exit"): "exits the kernel",
    ("os", "_exit"): "exits the kernel",
    ("os", "kill"): "sends signals",
    ("os", "fork"): "forks",
    ("os", "system"): "runs shell commands",
    ("os", "popen"): "runs shell commands",
    ("os", "environ"): "reads or sets environment variables",
    ("os", "chdir"): "changes directory",
}
# Dynamic features: ways around the code as written (another function's globals, frames, the
# interpreter's objects, code from strings, PyTorch's dispatch modes switched off, the grading
# package itself). In a cell the learner wrote they also withhold the tests that use it.
DUNDERS = {
    "__builtins__",
    "__globals__",
    "__code__",
    "__closure__",
    "__subclasses__",
    "__dict__",
    "__traceback__",
}
FRAMES = {"f_globals", "f_locals", "f_builtins", "f_back", "tb_frame", "gi_frame", "cr_frame"}
FROM_STRINGS = {
    "__import__": "imports by name (__import__)",
    "exec": "runs code from a string (exec)",
    "eval": "evaluates code from a string (eval)",
    "compile": "compiles code from a string (compile)",
}
DYNAMIC_PATHS = {  # a dotted name, or what it starts with
    "importlib": "imports modules by name (importlib)",
    "autograder": "uses the grading package (autograder)",
    "torch._C": "reaches PyTorch's internals (torch._C)",
    "torch.overrides": "switches PyTorch's function modes (torch.overrides)",
    "torch.ops": "calls PyTorch operators by name (torch.ops)",
    "torch.utils.flop_counter": "measures FLOPs with PyTorch (torch.utils.flop_counter)",
    "torch.utils._python_dispatch": "runs a dispatch mode of its own (TorchDispatchMode)",
    "sys.modules": "uses sys.modules",
    "sys._getframe": "inspects frames (sys._getframe)",
    "inspect.currentframe": "inspects frames (inspect.currentframe)",
    "inspect.stack": "inspects frames (inspect.stack)",
    "inspect.trace": "inspects frames (inspect.trace)",
    "gc.get_objects": "walks the interpreter's objects (gc.get_objects)",
    "gc.get_referrers": "walks the interpreter's objects (gc.get_referrers)",
    "gc.get_referents": "walks the interpreter's objects (gc.get_referents)",
}
MODE_SWITCHES = re.compile(r"DisableTorch\w*|_disable_current_modes|_pop_mode\w*|_pop_torch_\w+")
DOTTED = re.compile(r"[A-Za-z_][\w.]*")
GRADING_PATH = re.compile(r"(^|/)autograder(/|$)")
PATH_OUTSIDE = re.compile(r"(^|[\s'\"])(\.\./|/(?!tmp\b)[A-Za-z])")
# A string that is an absolute path (``/srv/course``, ``/tmp/x/gradebook.db``), not a label
# such as ``"/ sqrt(d)"``: a learner's folder is the working directory, so its files are relative.
ABSOLUTE_PATH = re.compile(r"/[\w.-]+(?:/[\w. -]*)*")


def _root(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _dotted(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # noqa: BLE001 (unparse of odd trees)
        return "?"


def parse(source: str) -> ast.Module | None:
    """The cell's syntax tree, magics and ``!`` lines as IPython runs them; None if invalid."""
    try:
        return ast.parse(TransformerManager().transform_cell(source))
    except (SyntaxError, ValueError):
        return None


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


def _binds_computed(tree: ast.Module) -> bool:
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


def _imported(tree: ast.Module) -> dict[str, str]:
    """Local name -> the dotted name it was imported as (``C`` -> ``torch._C``)."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                names[a.asname or a.name.split(".")[0]] = (
                    a.name if a.asname else a.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
    return names


def _path(node: ast.AST, imported: dict[str, str]) -> str | None:
    """``torch._C._foo`` for an attribute chain on a name, with imports resolved."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([imported.get(node.id, node.id), *reversed(parts)])


def _dynamic_path(path: str) -> str | None:
    for prefix, what in DYNAMIC_PATHS.items():
        if path == prefix or path.startswith(prefix + "."):
            return what
    parts = path.split(".")
    switch = next((part for part in parts if MODE_SWITCHES.fullmatch(part)), None)
    if switch:
        return f"switches PyTorch's modes off ({switch})"
    if parts[0] == "builtins" and parts[-1] in FROM_STRINGS:
        return FROM_STRINGS[parts[-1]]
    return None


def _dynamic(tree: ast.Module) -> list[str]:
    imported = _imported(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        what: list[str | None] = []
        if isinstance(node, ast.Import):
            what = [_dynamic_path(a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            what = [_dynamic_path(f"{node.module}.{a.name}") for a in node.names]
        elif isinstance(node, (ast.Name, ast.Attribute)):
            name = node.id if isinstance(node, ast.Name) else node.attr
            path = _path(node, imported)
            if isinstance(node, ast.Name) and name in FROM_STRINGS:
                what.append(FROM_STRINGS[name])
            if name in DUNDERS:
                what.append(f"uses {name}")
            if name in FRAMES:
                what.append(f"walks frames ({name})")
            if MODE_SWITCHES.fullmatch(name):
                what.append(f"switches PyTorch's modes off ({name})")
            what.append(_dynamic_path(path) if path else None)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value.strip()
            if text in DUNDERS or text in FRAMES:  # getattr(f, "__globals__"), vars(f)[...]
                what.append(f"reads {text} by name")
            if DOTTED.fullmatch(text):  # importlib.import_module("torch._C"), sys.modules[...]
                what.append(_dynamic_path(text))
            elif GRADING_PATH.search(text):
                what.append("names the grading package in a string")
        for text in what:
            if text and text not in found:
                found.append(text)
    if _binds_computed(tree):
        found.append(BINDS_COMPUTED)
    return found


def dynamic_features(source: str) -> list[str]:
    """What in one cell's source reaches around the code as written (see DUNDERS and after)."""
    tree = parse(source)
    return _dynamic(tree) if tree is not None else []


def scan_source(source: str, protected_names: set[str] = frozenset()) -> list[str]:
    """One short description per suspicious pattern in one cell's source (deduplicated)."""
    tree = parse(source)
    if tree is None:
        return []
    found: list[str] = []

    def flag(text: str) -> None:
        if text not in found:
            found.append(text)

    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names]
            modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else names
            for module in modules:
                top = module.split(".")[0]
                if top in MODULES:
                    flag(f"{MODULES[top]} (import {module})")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                if (
                    isinstance(target, (ast.Attribute, ast.Subscript))
                    and _root(target) in LIBRARIES
                ):
                    flag(f"patches {_dotted(target)}")
                if isinstance(target, ast.Name) and target.id in protected_names:
                    flag(f"redefines `{target.id}`, which the tests call")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name in protected_names:
                flag(f"redefines `{node.name}`, which the tests call")
        elif isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else None
            if name in CALLS:
                flag(CALLS[name])
            if name == "open" and node.args and isinstance(node.args[0], ast.Constant):
                if PATH_OUTSIDE.search(str(node.args[0].value)):
                    flag(f"opens a path outside its folder ({node.args[0].value!r})")
        elif isinstance(node, ast.Attribute):
            key = (_root(node), node.attr)
            if key in ATTRIBUTES:
                flag(ATTRIBUTES[key])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if "../" in node.value or ABSOLUTE_PATH.fullmatch(node.value):
                flag(f"refers to a path outside its folder ({node.value[:40]!r})")
    for text in _dynamic(tree):
        flag(text)
    return found


def names_tests_call(test_sources: list[str]) -> set[str]:
    """Names the test cells call or read (rebinding one of them fakes the test)."""
    names = set()
    for source in test_sources:
        try:
            tree = ast.parse(TransformerManager().transform_cell(source))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                names.add(node.func.id)
    return names


def scan_notebook(nb, answer_names: set[str]) -> list[str]:
    """Flags for every cell the learner could edit: ``cell: what`` strings."""
    test_sources = []
    editable = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        meta = nbcell.meta(cell)
        if meta.get("locked") and not meta.get("solution"):
            if meta.get("grade"):
                test_sources.append(cell.source)
            continue
        editable.append((meta.get("grade_id") or f"cell {index + 1}", cell.source))
    protected = names_tests_call(test_sources) - answer_names
    flags = []
    for where, source in editable:
        flags += [f"{where}: {text}" for text in scan_source(source, protected)]
    return flags


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
    declare ``global`` and names it imports in a way the scan flags; other imports bind library
    names, not the learner's code. A cell that binds names it computes
    (``globals()["sd" + "pa"] = f``) binds :data:`EVERY_NAME`: any name at all.
    """
    bound, read, local = set(), set(), set()
    docstrings = _docstrings(tree)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.ImportFrom) and node.module:
            bound |= {
                a.asname or a.name for a in node.names if _dynamic_path(f"{node.module}.{a.name}")
            }
        elif isinstance(node, ast.Import):
            bound |= {a.asname or a.name.split(".")[0] for a in node.names if _dynamic_path(a.name)}
        else:
            bound |= {
                n.id
                for n in ast.walk(node)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            }
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            local |= {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
            local |= {a.arg for a in (args.vararg, args.kwarg) if a}
            local |= {
                n.id
                for n in ast.walk(node)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            }
        elif isinstance(node, ast.Global):
            bound |= set(node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            read.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings:
                bound |= set(re.findall(r"[A-Za-z_]\w*", node.value))
    if _binds_computed(tree):
        bound.add(EVERY_NAME)
    return bound, read - (local - bound)


def _binds(bound: set[str], names: set[str]) -> bool:
    return EVERY_NAME in bound or bool(bound & names)


def reached_names(names: set[str], cells: list[tuple[set[str], set[str]]]) -> set[str]:
    """``names`` and every name the learner's cells (their :func:`bindings`) read to define
    them, transitively: a test that calls ``softmax`` reaches the helper ``softmax`` calls."""
    reached = set(names)
    grown = True
    while grown:
        grown = False
        for bound, read in cells:
            if _binds(bound, reached) and not read <= reached:
                reached |= read
                grown = True
    return reached


def withheld_tests(submitted, reference, release) -> dict[str, str]:
    """Test cell grade id -> why its points wait for a person: the test uses, directly or through
    other code of the learner's, a name bound in a cell of the learner's with dynamic features.

    The learner's cells are read from ``submitted`` as handed in (never from a notebook that
    learner code could have touched while it ran): its answer cells, and every code cell that is
    not a cell of the ``release`` unchanged. Test cells come from ``reference``, the instructor's
    notebook (hidden tests included).
    """
    unchanged = {c.source.strip() for c in release.cells if c.cell_type == "code"}
    cells = []
    for index, cell in enumerate(submitted.cells):
        if cell.cell_type != "code":
            continue
        if not nbcell.is_answer(cell) and cell.source.strip() in unchanged:
            continue
        tree = parse(cell.source)
        if tree is None:
            continue
        where = nbcell.grade_id(cell) or f"cell {index + 1}"
        cells.append((where, *bindings(tree), _dynamic(tree)))
    flagged = [(where, bound, found) for where, bound, _, found in cells if found]
    if not flagged:
        return {}
    withheld = {}
    for test in (c for c in reference.cells if nbcell.is_test(c)):
        tree = parse(test.source)
        if tree is None:
            continue
        reached = reached_names(
            {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)},
            [(bound, read) for _, bound, read, _ in cells],
        )
        for where, bound, found in flagged:
            if _binds(bound, reached):
                withheld[nbcell.grade_id(test)] = f"`{where}`, which {'; '.join(found[:3])}"
                break
    return withheld
