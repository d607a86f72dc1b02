"""Small notebooks for the grader's unit tests: a cell with nbgrader metadata, a three-cell
release (set-up, answer, test), a release with three answers and their tests (what is withheld
when a learner's code leaves the allow-list) and the notebook id they pretend to be."""

from nbformat.v4 import new_code_cell, new_notebook

NB = "01_attention_from_scratch"


def graded_cell(source, grade_id, **meta):
    made = new_code_cell(source)
    made.id = grade_id
    made.metadata["nbgrader"] = {"grade_id": grade_id, "schema_version": 3, **meta}
    return made


def tiny_release():
    return new_notebook(
        cells=[
            graded_cell("from x import check_f", "setup", locked=True, grade=False, solution=False),
            graded_cell(
                "def f(x):\n    raise NotImplementedError()", "f", solution=True, grade=False
            ),
            graded_cell("check_f(f)", "test_f", grade=True, locked=True, solution=False, points=1),
        ]
    )


def withholding_case():
    """Answers f, g, h; g calls a helper; tests of each. Returns (release, reference)."""
    cells = [
        graded_cell("from x import check_f, check_g, check_h", "setup", locked=True),
        graded_cell("def f(x):\n    raise NotImplementedError()", "f", solution=True),
        graded_cell("def g(x):\n    raise NotImplementedError()", "g", solution=True),
        graded_cell("def h(x):\n    raise NotImplementedError()", "h", solution=True),
        new_code_cell("import inspect\nprint(inspect.stack())"),  # the release's own demo
    ]
    tests = [
        graded_cell(f"check_{n}({n})", f"test_{n}", grade=True, locked=True, points=1)
        for n in "fgh"
    ]
    reference = new_notebook(cells=cells + tests)
    reference.cells[
        -1
    ].source += "\n### BEGIN HIDDEN TESTS\ncheck_h(h, seed=1)\n### END HIDDEN TESTS"
    return new_notebook(cells=cells + tests), reference
