"""One short line under every test cell whose checks passed, so "passed" differs from "did nothing".

After each cell IPython runs, :func:`after_cell` looks at the cell's source: when it ran without
an error and called a check from :mod:`autograder.checks`, it prints, on stdout (stderr would cost
the cell its points under nbgrader), the first line of the cell's docstring (test cells open with
one saying what they check): ``✓ softmax matches torch.softmax on several shapes and along any
dim.``. A cell without one gets its grade id, which is its cell id in the course's notebooks
(JupyterLab sends it with every execution), or ``✓ the checks in this cell pass``. Outside
IPython nothing is registered.
"""

from __future__ import annotations

import ast

_PACKAGE = __name__.rsplit(".", 1)[0]  # autograder.checks


def _checks_called(source: str, namespace: dict) -> list[str]:
    """Names of the ``autograder.checks`` functions that ``source`` calls directly."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # cell magics and the like
        return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            module = getattr(namespace.get(node.func.id), "__module__", None) or ""
            if module.startswith(_PACKAGE) and node.func.id not in names:
                names.append(node.func.id)
    return names


def passed_line(source: str, namespace: dict, cell_id: str | None) -> str | None:
    """The line to print after a cell that ran without error, or None when it ran no check."""
    if not _checks_called(source, namespace):
        return None
    doc = (ast.get_docstring(ast.parse(source)) or "").strip().splitlines()
    if doc:  # test cells open with one line saying what they check
        return f"✓ {doc[0]}"
    if cell_id and cell_id.startswith("test_"):
        return f"✓ {cell_id}: the visible checks pass"
    return "✓ the checks in this cell pass"


def after_cell(result) -> None:
    """IPython ``post_run_cell`` callback."""
    if not result.success:
        return
    from IPython import get_ipython

    shell = get_ipython()
    info = result.info
    line = passed_line(info.raw_cell or "", shell.user_ns, getattr(info, "cell_id", None))
    if line:
        print(line, flush=True)


def register() -> None:
    """Print the line after passing test cells from now on, and show unfinished exercises in one
    line (:mod:`autograder.tools.unfinished`), in the running IPython (if any)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    from autograder.tools import unfinished

    shell = get_ipython()
    if shell is None or after_cell in shell.events.callbacks["post_run_cell"]:
        return
    shell.events.register("post_run_cell", after_cell)
    unfinished.install()  # an example that needs an unwritten exercise: one line, no traceback
