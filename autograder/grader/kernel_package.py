"""The ``autograder`` package as a grading kernel sees it: no check, no oracle, no answer.

In classroom grading each assignment's kernels import ``autograder`` from a tree built here
(bound read-only into the sandbox, first on ``PYTHONPATH``; the real package is not bound):

- ``autograder/kernel/``: the recorder the grader's requests run through (it knows no answer) and
  the forkserver that becomes each warm kernel;
- ``autograder/tools/``: the learner tools, except that every name the assignment's check modules
  declare in ``ANSWERS_IN_TOOLS`` keeps its name and signature but raises when used, and the
  data files they declare are left out;
- ``autograder/checks/``: no-op stand-ins: a test cell's ``check_*`` calls do nothing in the
  kernel, because the grader runs the real checks in its own process (``grader.verify.cells``);
- ``autograder/torch_helpers.py``.

An assignment's check modules are the ones its instructor notebook imports; notebook 10 reuses
02's, 03's and 04's checks, so their declared answers are withheld from 10 too.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path

from autograder import paths

PACKAGE = paths.REPO_ROOT / "autograder"
COPIED = ("__init__.py", "torch_helpers.py", "kernel", "tools")

CHECKS_STUB = '''"""Stand-ins for the checks in a grading kernel: the grader runs the real ones."""


class CheckFailure(AssertionError):
    """A check found a mistake (raised only by the grader's own copy of the checks)."""


def _pending(*args, **kwargs):
    return None


def __getattr__(name):
    if name.startswith("check_"):
        return _pending
    raise AttributeError(name)
'''

WITHHELD = "`{name}` is not available while your work is graded: it would compute a graded answer."


def check_modules(notebook_source: str) -> list[str]:
    """The ``autograder.checks`` modules a notebook's cells import."""
    return sorted(set(re.findall(r"autograder\.checks\.(nb\d\d_\w+)", notebook_source)))


def declared_answers(module: str) -> dict[str, str]:
    """The ``ANSWERS_IN_TOOLS`` a check module declares, read from its source, not imported:
    ``grade`` decides what to withhold before it grades, and importing the checks would import
    torch into its parent process for nothing (a second or more of every run)."""
    path = PACKAGE / "checks" / f"{module}.py"
    for node in ast.parse(path.read_text()).body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        targets = node.targets if isinstance(node, ast.Assign) else [target]
        if any(isinstance(t, ast.Name) and t.id == "ANSWERS_IN_TOOLS" for t in targets):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                raise ValueError(f"{path}: ANSWERS_IN_TOOLS must be a literal dict") from None
    return {}


def withheld_names(modules: list[str]) -> dict[str, str]:
    """Everything those check modules declare as answers lying in the learner's tools."""
    found: dict[str, str] = {}
    for name in modules:
        found.update(declared_answers(name))
    return found


def withhold(source: str, names: set[str]) -> str:
    """``source`` with the top-level functions, classes and constants in ``names`` stubbed."""
    tree = ast.parse(source)
    body = []
    for node in tree.body:
        name = getattr(node, "name", None)
        targets = []
        if isinstance(node, ast.Assign):
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            targets = [node.target.id]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and name in names:
            node.decorator_list = []
            node.body = ast.parse(f"raise RuntimeError({WITHHELD.format(name=name)!r})").body
        elif isinstance(node, ast.ClassDef) and name in names:
            message = WITHHELD.format(name=name)
            stub = f"def __init__(self, *args, **kwargs):\n    raise RuntimeError({message!r})\n"
            node.decorator_list = []
            node.body = ast.parse(stub).body
        elif targets and set(targets) & names:
            node = ast.parse(" = ".join(targets) + " = None").body[0]
        body.append(node)
    tree.body = body
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _files() -> list[Path]:
    found = []
    for entry in COPIED:
        path = PACKAGE / entry
        found += sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return [p for p in found if "__pycache__" not in p.parts]


def digest(modules: list[str]) -> str:
    """What the tree is built from: the copied files and what is withheld."""
    h = hashlib.sha256(repr(sorted(withheld_names(modules).items())).encode())
    for path in _files():
        h.update(str(path.relative_to(PACKAGE)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def build(cache: Path, notebook_source: str) -> Path:
    """The folder to put first on the kernel's ``PYTHONPATH`` (it holds ``autograder/``)."""
    modules = check_modules(notebook_source)
    target = cache / f"kernel-{digest(modules)}"
    if (target / ".complete").is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(dir=cache, prefix=".building-"))
    withheld = withheld_names(modules)
    code: dict[str, set[str]] = {}
    for key in withheld:
        if key.endswith((".json", ".pt", ".png", ".npz", ".csv")):
            continue
        module, _, name = key.rpartition(".")
        code.setdefault(module, set()).add(name)
    data = {key for key in withheld if key not in {f"{m}.{n}" for m in code for n in code[m]}}
    for path in _files():
        relative = path.relative_to(PACKAGE)
        dotted = "autograder." + ".".join(relative.with_suffix("").parts)
        if f"autograder/{relative}" in data:
            continue
        dest = building / "autograder" / relative
        dest.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".py" and dotted in code:
            dest.write_text(withhold(path.read_text(), code[dotted]))
        else:
            shutil.copyfile(path, dest)
    (building / "autograder" / "checks").mkdir(parents=True, exist_ok=True)
    (building / "autograder" / "checks" / "__init__.py").write_text(CHECKS_STUB)
    for name in all_check_modules():
        (building / "autograder" / "checks" / f"{name}.py").write_text(
            "from autograder.checks import CheckFailure, __getattr__  # noqa: F401\n"
        )
    for folder, _, files in os.walk(building):
        os.chmod(folder, 0o755)
        for f in files:
            os.chmod(Path(folder) / f, 0o644)
    (building / ".complete").touch()
    shutil.rmtree(target, ignore_errors=True)
    os.replace(building, target)
    return target


def all_check_modules() -> list[str]:
    return sorted(p.stem for p in (PACKAGE / "checks").glob("nb[0-9][0-9]_*.py"))
