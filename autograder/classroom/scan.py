"""A static scan of the cells a learner could edit, for patterns an instructor should look at.

Flags are hints for a human, never a grade: most have innocent uses (``os.environ``, ``open``).
They are listed per submission in the summary and the grades CSV. Magics and ``!`` shell lines
are translated to Python first (IPython's own transformer), so ``!cat ../x`` is seen too.
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
    "__import__": "imports by name",
    "exec": "runs code from a string",
    "eval": "evaluates code from a string",
    "compile": "compiles code from a string",
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
    "importlib": "imports modules by name",
    "autograder": "imports the grading package",
}
ATTRIBUTES = {
    ("sys", "modules"): "edits sys.modules",
    ("sys", "settrace"): "traces execution",
    ("sys", "setprofile"): "traces execution",
    ("sys", "_getframe"): "inspects frames",
    ("sys", "exit"): "exits the kernel",
    ("os", "_exit"): "exits the kernel",
    ("os", "kill"): "sends signals",
    ("os", "fork"): "forks",
    ("os", "system"): "runs shell commands",
    ("os", "popen"): "runs shell commands",
    ("os", "environ"): "reads or sets environment variables",
    ("os", "chdir"): "changes directory",
}
DUNDERS = {"__builtins__", "__globals__", "__code__", "__subclasses__", "__dict__"}
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


def scan_source(source: str, protected_names: set[str] = frozenset()) -> list[str]:
    """One short description per suspicious pattern in one cell's source (deduplicated)."""
    try:
        code = TransformerManager().transform_cell(source)
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
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
            if node.attr in DUNDERS:
                flag(f"uses {node.attr}")
        elif isinstance(node, ast.Name) and node.id in DUNDERS:
            flag(f"uses {node.id}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if "../" in node.value or ABSOLUTE_PATH.fullmatch(node.value):
                flag(f"refers to a path outside its folder ({node.value[:40]!r})")
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
