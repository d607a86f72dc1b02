"""A static scan of the cells a learner could edit, for patterns an instructor should look at.

Flags are hints for a human, never a grade: most have innocent uses (``os.environ``, ``open``).
They are listed per submission in the summary and the grades CSV. Magics and ``!`` shell lines
are translated to Python first (IPython's own transformer), so ``!cat ../x`` is seen too.

One kind is more than a hint: code the learner wrote that uses anything outside the allow-list
of :mod:`autograder.grader.allowed` could reach around the checks, so :func:`withheld_tests`
names the test cells that depend on such code, and their points wait for a person. The course's
own answers stay inside it.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass, field

from IPython.core.inputtransformer2 import TransformerManager

from autograder import nbcell
from autograder.grader import allowed, reading
from autograder.grader.names import (
    BINDS_COMPUTED,
    EVERY_NAME,
    bindings,
    binds,
    binds_or_imports,
    reached_names,
    top_level_reads,
)

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
    "autograder": "uses the grading package",
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
    ("sys", "modules"): "uses sys.modules",
}
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


TIMING = {"time", "timeit"}  # magics that run their Python and only time it
TIMING_OPTIONS = re.compile(r"\s*(?:-[nrp]\s*\d+(?:\.\d*)?\s+|-[tcqo]\s+)*")


def _timed(node: ast.stmt) -> list[ast.stmt] | None:
    """The Python that ``%time``/``%timeit``/``%%time``/``%%timeit`` run, as IPython writes
    them (``get_ipython().run_line_magic('timeit', '-n 10 f(x)')``), or None."""
    call = node.value if isinstance(node, ast.Expr) else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
        return None
    shell = call.func.value
    if not (isinstance(shell, ast.Call) and isinstance(shell.func, ast.Name)):
        return None
    if shell.func.id != "get_ipython" or shell.args or call.keywords:
        return None
    texts = [a.value if isinstance(a, ast.Constant) else None for a in call.args]
    if not texts or texts[0] not in TIMING or not all(isinstance(t, str) for t in texts):
        return None
    if call.func.attr == "run_line_magic" and len(texts) == 2:
        codes = [texts[1]]
    elif call.func.attr == "run_cell_magic" and len(texts) == 3:
        codes = texts[1:]
    else:
        return None
    try:  # the options first (``-n 10 -r 3``), then a statement
        return [s for code in codes for s in ast.parse(TIMING_OPTIONS.sub("", code, 1)).body]
    except SyntaxError:
        return None


# Cells up to this long are cached (the releases' longest is about 4,000 characters): a worker
# keeps at most 1,024 of them, about 32 MB, however large the cells a hostile submission sends.
CACHED_CELL_CHARS = 16_384


def ipython_source(source: str) -> str:
    """A cell's source as IPython runs it (magics and ``!`` lines as Python). Short cells are
    cached: a grade run reads the same release cells for every submission, and IPython's
    transform is most of the cost of parsing a cell."""
    if len(source) <= CACHED_CELL_CHARS:
        return _cached_ipython_source(source)
    return TransformerManager().transform_cell(source)


@functools.lru_cache(maxsize=1024)
def _cached_ipython_source(source: str) -> str:
    return TransformerManager().transform_cell(source)


def parse(source: str) -> ast.Module | None:
    """The cell's syntax tree, magics and ``!`` lines as IPython runs them, and the Python of
    the timing magics (:data:`TIMING`) as the statements they time; None if invalid."""
    try:
        tree = ast.parse(ipython_source(source))
    except (SyntaxError, ValueError):
        return None
    body = []
    for statement in tree.body:
        timed = _timed(statement)
        body += [statement] if timed is None else timed
    tree.body = body
    return tree


def outside_the_list(source: str, context: allowed.Context | None = None) -> list[str]:
    """What in one cell's source is outside the allow-list (:mod:`allowed`), in one line each;
    judged alone (any name may be bound elsewhere) unless a notebook's ``context`` is given."""
    tree = parse(source)
    found = reading.outside(tree, context or allowed.Context()) if tree is not None else []
    return [f.why for f in found]


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
    return found


def names_tests_call(test_sources: list[str]) -> set[str]:
    """Names the test cells call or read (rebinding one of them fakes the test)."""
    names = set()
    for source in test_sources:
        try:
            tree = ast.parse(ipython_source(source))
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


def _context(release, notebook: str, learner: list[ast.Module]) -> allowed.Context:
    """What the learner's cells may name: what any learner cell or any cell of the release
    binds, the imports of both, the course helpers the release's given cells import."""
    return _context_of(_release_facts(_code_cells(release)), learner)


def _context_of(given: _ReleaseFacts, learner: list[ast.Module]) -> allowed.Context:
    names, modules = set(given.names), dict(given.modules)
    for tree in learner:
        names |= binds_or_imports(tree)
        modules |= reading.imports(tree)
    helpers = {path for path in given.imported if path.startswith("autograder.")}
    return allowed.Context(names, modules, helpers, set(given.imported))


@dataclass(frozen=True)
class _ReleaseFacts:
    """What the scan reads off a release notebook alone: the same for every submission of it."""

    names: frozenset[str]  # what its given cells bind or import
    modules: dict  # their imports (reading.imports), by the name they bind
    imported: frozenset[str]  # the dotted paths its given cells import
    bound: frozenset[str]  # what its given cells bind (names.bindings)
    tools: frozenset[str]  # names its given cells bind and its answer cells do not


def _code_cells(release) -> tuple[tuple[str, bool], ...]:
    """(Source, whether an answer cell) of each code cell: the key of :func:`_release_facts`."""
    return tuple((c.source, nbcell.is_answer(c)) for c in release.cells if c.cell_type == "code")


@functools.lru_cache(maxsize=32)
def _release_facts(cells: tuple[tuple[str, bool], ...]) -> _ReleaseFacts:
    """The release's facts, worked out once per release in a process: a grade run reads one
    release for every submission of an assignment (in the class run, about a tenth of the
    scan's time went to reading the same release cells again)."""
    given = [t for t in (parse(s) for s, answer in cells if not answer) if t is not None]
    answers = [t for t in (parse(s) for s, answer in cells if answer) if t is not None]
    names, modules = set(), {}
    for tree in given:
        names |= binds_or_imports(tree)
        modules |= reading.imports(tree)
    imported = {
        f"{n.module}.{a.name}" if isinstance(n, ast.ImportFrom) else a.name
        for tree in given
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom) and not getattr(n, "level", 0)
        for a in n.names
    }
    tools = set().union(*(binds_or_imports(t) for t in given))
    tools -= set().union(*(binds_or_imports(t) for t in answers))
    return _ReleaseFacts(
        frozenset(names),
        modules,
        frozenset(imported),
        frozenset(set().union(*(bindings(t)[0] for t in given))),
        frozenset(tools),
    )


@dataclass
class _Flagged:
    """A learner cell with code outside the allow-list: what it binds and reads, why (in one
    line each), whether that code could change what it does not name; ``now``: whether it runs
    when some cell runs, and ``footprint``: the names it may then read, write or bind."""

    where: str
    bound: set[str]
    read: set[str]
    whys: list[str]
    anything: bool
    index: int = 0  # its position in the submission: it cannot change a test that runs before it
    now: bool = False
    footprint: set[str] = field(default_factory=set)

    def runs(self, names: set[str]) -> None:
        self.now = True
        self.footprint |= names


def withheld_tests(submitted, reference, release, notebook: str = "") -> dict[str, str]:
    """Test cell grade id -> why its points wait for a person: the test uses, directly or through
    other code of the learner's, a name bound in a cell of the learner's with code outside the
    allow-list (:mod:`allowed`).

    Code outside it that runs when its cell runs (at the cell's top level, or in a function
    that top-level code of any learner cell reaches) withholds more: the tests that reach any
    name that code reads, writes or binds (transitively, :func:`reached_names`), when all of it
    reaches only what it names (:data:`allowed.NAMED_ONLY`); every test when the cell binds
    names it computes or its code could change what it does not name.

    A test whose cell passes a name the notebook's given cells bind (a tool such as 06's
    ``gradients_through``) waits for a person when a learner cell before it binds that name too:
    the grader looks the test's arguments up in the learner's kernel, so the learner's version
    would stand in for the course's. Binding any name is allowed; this judges only its use.

    numpy is judged here too: numpy in a learner cell whose names other learner code reads, or
    that reads names of other cells (a tensor may come in or go out), is numpy on tensors.

    The learner's cells are read from ``submitted`` as handed in (never from a notebook that
    learner code could have touched while it ran): its answer cells, and every code cell that is
    not a cell of the ``release`` unchanged. Test cells come from ``reference``, the instructor's
    notebook (hidden tests included). ``notebook``: its id, for the tools it teaches.
    """
    unchanged = {c.source.strip() for c in release.cells if c.cell_type == "code"}
    learner, positions = [], []
    for index, cell in enumerate(submitted.cells):
        if cell.cell_type != "code":
            continue
        if not nbcell.is_answer(cell) and cell.source.strip() in unchanged:
            continue
        tree = parse(cell.source)
        if tree is not None:
            learner.append((nbcell.grade_id(cell) or f"cell {index + 1}", cell, tree))
            positions.append(index)
    if not learner:
        return {}
    facts = _release_facts(_code_cells(release))
    context = _context_of(facts, [tree for _, _, tree in learner])
    cells = [bindings(tree) for _, _, tree in learner]
    given = set(facts.bound)
    modules = set(context.modules)  # library names: patching one is outside in itself
    flagged: list[_Flagged] = []
    for i, (where, cell, tree) in enumerate(learner):
        context.taught = allowed.taught(notebook, nbcell.grade_id(cell), nbcell.is_answer(cell))
        context.arithmetic = allowed.arithmetic(
            notebook, nbcell.grade_id(cell), nbcell.is_answer(cell)
        )
        found = reading.outside(tree, context)
        bound, read = cells[i]
        if not any(f.why.startswith("uses numpy on tensors") for f in found):
            others = given.union(*(b for j, (b, _) in enumerate(cells) if j != i))
            readers = [r for j, (_, r) in enumerate(cells) if j != i and r & (bound - {"*"})]
            meets = read - set(reading.imports(tree)) - allowed.BUILTINS
            uses = reading.numpy_uses(tree, context)
            if uses and (readers or meets & others):
                what = "other learner code reads its names" if readers else "it reads other cells"
                found.append(reading.numpy_on_tensors(what, uses))
        if found:
            whys = ([BINDS_COMPUTED] if EVERY_NAME in bound else []) + [f.why for f in found]
            anything = EVERY_NAME in bound or any(f.anything for f in found)
            flagged.append(_Flagged(where, bound, read, whys, anything, positions[i]))
            if any(f.now for f in found):
                flagged[-1].runs((bound | reached_names(read, cells)) - modules)
    for (_, _, tree), (bound, _) in zip(learner, cells, strict=True):
        reached = reached_names(top_level_reads(tree), cells)  # what its top-level code runs
        for entry in flagged:
            if binds(entry.bound, reached):  # its outside code runs when this cell runs
                entry.runs((bound | reached | reached_names(entry.read, cells)) - modules)
    # Cells run in order and a test is verified when it runs: a test runs at its last place in
    # the submission, or after everything where the learner deleted it (nbgrader puts it back).
    ran_at = {nbcell.grade_id(c): i for i, c in enumerate(submitted.cells) if nbcell.is_test(c)}
    tools = facts.tools
    rebinders = []  # (where, position, the given names it binds) of each cell that binds any
    for (where, _, tree), (bound, _), index in zip(learner, cells, positions, strict=True):
        rebound = tools if EVERY_NAME in bound else (bound | reading.imports(tree).keys()) & tools
        if rebound:
            rebinders.append((where, index, rebound))
    withheld = {}
    for test in (c for c in reference.cells if nbcell.is_test(c)):
        tree = parse(test.source)
        if tree is None:
            continue
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        reached = reached_names(names, cells)
        at = ran_at.get(nbcell.grade_id(test), len(submitted.cells))
        for entry in (e for e in flagged if e.index < at):
            why = f"`{entry.where}`, which {'; '.join(entry.whys[:3])}"
            if entry.now and entry.anything:
                withheld[nbcell.grade_id(test)] = why + " (when its cell runs, so every test)"
            elif entry.footprint & reached:
                withheld[nbcell.grade_id(test)] = why + " (when its cell runs)"
            elif binds(entry.bound, reached):
                withheld[nbcell.grade_id(test)] = why
            else:
                continue
            break
        rebound = _rebinds_given(rebinders, names, at)
        if rebound:
            withheld.setdefault(nbcell.grade_id(test), rebound)
    return withheld


def _rebinds_given(rebinders: list, names: set[str], at: int) -> str:
    """Why a test whose cell names ``names`` waits for a person: a learner cell before it (at a
    position below ``at``) binds one of the names the notebook gives (a tool such as 06's
    ``gradients_through``). ``rebinders``: (where, position, given names it binds) of each
    learner cell that binds any. The grader looks a test's arguments up in the learner's kernel,
    so the learner's version would stand in for the course's. "" if none does."""
    for where, index, bound in rebinders:
        rebound = sorted(bound & names)
        if rebound and index < at:
            return (
                f"`{where}`, which binds `{rebound[0]}`, given by the notebook: the test would "
                f"run your `{rebound[0]}` in place of the course's"
            )
    return ""
