"""Small notebooks for the grader's unit tests: a cell with nbgrader metadata, a three-cell
release (set-up, answer, test) and the notebook id they pretend to be."""

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
