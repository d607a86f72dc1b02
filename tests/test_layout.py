"""The package layout holds: no import cycle between autograder's packages, and no package
imports another's private names (``_core``, ``_helper``).

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


def _edges() -> list[tuple[str, str, str, str]]:
    """(importing package, imported package, file, what) for each cross-package import."""
    edges = []
    for path in sorted(ROOT.rglob("*.py")):
        if "jupyter_config" in path.parts:  # configuration files, not importable modules
            continue
        source = _package(_module_name(path))
        for module, names in _imports(path):
            for name in names or [""]:
                target_module = module
                if name and (ROOT.parent / (module + "." + name).replace(".", "/")).exists():
                    target_module = f"{module}.{name}"  # `from autograder import checks`
                target = _package(target_module)
                if target != source:
                    what = f"{module}.{name}" if name else module
                    edges.append((source, target, str(path.relative_to(REPO)), what))
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
