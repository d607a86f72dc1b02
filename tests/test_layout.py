"""The package layout holds: three layers (the course, the grading engine, the commands), each
module importing only its own layer or lower ones, no import cycle between any two modules, and
no package importing another's private names (``_core``, ``_helper``).

Packages are ``autograder`` (its top-level modules) and each sub-package (``autograder.checks``,
``autograder.tools`` …). The graph is read from the source with ``ast``, imports inside functions
included, so a lazy import cannot hide a cycle.
"""

import ast
from pathlib import Path

from conftest import REPO

ROOT = REPO / "autograder"


def _package(module: str) -> str:
    """``autograder.checks._core`` -> ``autograder.checks``; ``autograder.cli`` -> itself."""
    parts = module.split(".")
    if len(parts) > 1 and (ROOT / parts[1]).is_dir():
        return ".".join(parts[:2])
    return "autograder"


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module imported, names taken from it) for every import in ``path``, made absolute."""
    here = _module_name(path)
    package = here if path.name == "__init__.py" else here.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.append((base, [alias.name for alias in node.names]))
    return [(m, names) for m, names in found if m == "autograder" or m.startswith("autograder.")]


def _imported(path: Path) -> list[tuple[str, str]]:
    """(module imported, what the source names) for each import in ``path``: ``from autograder
    import checks`` imports the module ``autograder.checks``, ``from x import name`` module x."""
    found = []
    for module, names in _imports(path):
        for name in names or [""]:
            candidate = ROOT.parent / f"{module}.{name}".replace(".", "/")
            is_module = name and (candidate.is_dir() or candidate.with_suffix(".py").exists())
            found.append(
                (f"{module}.{name}" if is_module else module, f"{module}.{name}".strip("."))
            )
    return found


def _sources() -> list[Path]:
    """The package's modules (``jupyter_config`` holds configuration files, not modules)."""
    return [p for p in sorted(ROOT.rglob("*.py")) if "jupyter_config" not in p.parts]


def _edges() -> list[tuple[str, str, str, str]]:
    """(importing package, imported package, file, what) for each cross-package import."""
    edges = []
    for path in _sources():
        source = _package(_module_name(path))
        for module, what in _imported(path):
            if _package(module) != source:
                edges.append((source, _package(module), str(path.relative_to(REPO)), what))
    return edges


def test_no_import_cycle_between_packages():
    graph: dict[str, set[str]] = {}
    for source, target, _, _ in _edges():
        graph.setdefault(source, set()).add(target)
    # Top-level modules (the CLI) may use any package; cycles among the sub-packages are banned.
    subpackages = {p: {t for t in ts if t != "autograder"} for p, ts in graph.items()}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in subpackages.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    cycles = sorted(p for p in subpackages if p != "autograder" and reaches(p, p, set()))
    assert not cycles, f"packages that import themselves through others: {cycles}"


def test_no_package_imports_another_packages_private_names():
    private = [
        f"{path} imports {what}"
        for _, _, path, what in _edges()
        if any(part.startswith("_") and not part.startswith("__") for part in what.split("."))
    ]
    assert not private, "\n".join(private)


# The layers, lowest first (README, "Where things live"): a module belongs to the layer of the
# longest name below that is itself or a package above it; every module must belong somewhere.
# Packages are layers: the course at the bottom, the grading engine above it, the commands on top.
LAYERS = {
    # 1. the course: its files, the learner runtime (checks, tools), what runs in the sandbox
    "autograder": 1,  # the package's __init__ only; its modules are placed below
    "autograder.paths": 1,
    "autograder.nbcell": 1,
    "autograder.notebook_files": 1,
    "autograder.catalogue": 1,
    "autograder.maps": 1,
    "autograder.torch_helpers": 1,
    "autograder.checks": 1,
    "autograder.tools": 1,
    "autograder.kernel": 1,
    "autograder.interview": 1,  # the mock interview: its problems are graded by the checks
    # 2. the grading engine under both `check` and `grade`, and the release build on nbgrader
    "autograder.grader": 2,
    "autograder.build": 2,
    "autograder.nbgrader_settings": 2,  # one release's shim for class folders graded before
    # 3. the commands
    "autograder.__main__": 3,
    "autograder.cli": 3,
    "autograder.progress": 3,
    "autograder.validate": 3,
    "autograder.lab_launcher": 3,
    "autograder.report": 3,
    "autograder.bench": 3,
    "autograder.classroom": 3,
}


EXACT_ONLY = {"autograder"}  # places its __init__, not its modules


def _layer(module: str) -> int | None:
    if module in LAYERS:
        return LAYERS[module]
    parts = module.split(".")
    for n in range(len(parts) - 1, 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in LAYERS and prefix not in EXACT_ONLY:
            return LAYERS[prefix]
    return None


def _module_graph() -> dict[str, set[str]]:
    """module -> the autograder modules it imports."""
    graph = {}
    for path in _sources():
        here = _module_name(path)
        graph[here] = {module for module, _ in _imported(path)} - {here}
    return graph


def test_every_module_has_a_layer_and_imports_only_its_own_or_lower():
    graph = _module_graph()
    unplaced = sorted(m for m in graph if _layer(m) is None)
    assert not unplaced, f"put these modules in a layer (LAYERS in this file): {unplaced}"
    upward = [
        f"{m} (layer {_layer(m)}) imports {t} (layer {_layer(t)})"
        for m, targets in graph.items()
        for t in sorted(targets)
        if _layer(t) is not None and _layer(t) > _layer(m)
    ]
    assert not upward, "\n".join(upward)


def test_no_import_cycle_between_modules():
    graph = _module_graph()
    cycles, state = [], {}

    def visit(module: str, stack: list[str]) -> None:
        state[module] = "open"
        for target in sorted(graph.get(module, ())):
            if target not in graph:
                continue
            if state.get(target) == "open":
                cycles.append(" -> ".join([*stack[stack.index(target) :], target]))
            elif target not in state:
                visit(target, [*stack, target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, "\n".join(cycles)


CHECKS = ROOT / "checks"
#: The one check module that imports other notebook modules' names: notebook 10's quiz gathers
#: its question banks, one module per part of the notebook (§1, §2, the loop, beyond, serving),
#: all 10's.
GATHERS_BANKS = {
    "nb10_interview": {"nb10_numbers", "nb10_claims", "nb10_beyond", "nb10_loop", "nb10_serving"}
}


def test_no_check_module_imports_another_notebooks_module():
    """Shared oracles and harnesses live in ``checks/_*.py``: a notebook's check module never
    imports another ``nbNN_*`` module's names, private or public, so moving or splitting one
    notebook's checks cannot break another's."""
    found = []
    for path in sorted(CHECKS.glob("nb[0-9][0-9]_*.py")):
        for module, what in _imported(path):
            name = module.removeprefix("autograder.checks.")
            if name.startswith("nb") and name != path.stem:
                if name not in GATHERS_BANKS.get(path.stem, set()):
                    found.append(f"{path.relative_to(REPO)} imports {what}")
    assert not found, "\n".join(found)
