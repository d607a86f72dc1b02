"""``python -m autograder progress``: every notebook's score at a glance, hidden tests included.

A notebook whose answer cells are still those of the release (``course/``) is "not started" and
is not graded at all, so an untouched ``work/`` is reported in about a second. A notebook whose
file is unchanged since its last ``check`` or ``progress`` keeps that grade
(:mod:`autograder.grader.saved_grades`). The others are graded by nbgrader, as ``check`` does, and
``progress`` says first how many and about how long that takes.
"""

import json
import sys
from pathlib import Path

from autograder import nbcell, paths


def _answers(path: Path) -> dict[str, str] | None:
    """grade id -> source of each answer cell (nbgrader ``solution``), or None if unreadable."""
    try:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        answers = {}
        for cell in cells:
            if nbcell.is_answer(cell):
                source = cell.get("source", "")
                answers[nbcell.meta(cell)["grade_id"]] = (
                    "".join(source) if isinstance(source, list) else source
                )
        return answers
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def not_started(path: Path, notebook_id: str) -> bool:
    """True when every answer cell of ``path`` is as released (outputs and metadata aside)."""
    released = _answers(paths.release_notebook(notebook_id))
    return bool(released) and _answers(path) == released


def _points(notebook_id: str) -> tuple[float, int]:
    """Automatic points of a notebook and its number of answers graded by a person."""
    cells = json.loads(paths.release_notebook(notebook_id).read_text(encoding="utf-8"))["cells"]
    graded = [c for c in cells if nbcell.is_graded(c)]
    return (
        sum(nbcell.points(c) for c in graded if not nbcell.is_answer(c)),
        sum(1 for c in graded if nbcell.is_answer(c)),
    )


def _status(result) -> str:
    if result.error:
        return f"could not be graded: {result.error}"
    if result.full_marks:
        return "done"
    failing = [c.grade_id for c in result.cells if not c.passed]
    return f"in progress: {len(failing)} test(s) to fix, first {failing[0]}"


def _score(score: str, maximum: float, written: int) -> str:
    return f"{score}/{maximum:g}" + (f" + {written} written" if written else "")


def _grade(submissions: list) -> list:
    """Each submission's saved grade where its file is unchanged, else a new one (saved)."""
    from autograder.grader import saved_grades
    from autograder.grader.isolation import Limits
    from autograder.grader.one_notebook import grade_submissions

    limits = Limits()
    saved = {s.notebook_id: saved_grades.load(s.path, limits) for s in submissions}
    todo = [s for s in submissions if saved[s.notebook_id] is None]
    reused = len(submissions) - len(todo)
    if todo:
        kept = f"; {reused} unchanged since last graded, reused" if reused else ""
        print(
            f"Grading {len(todo)} notebook(s) changed since their last grade "
            f"(about 15-30 s each){kept}...",
            file=sys.stderr,
            flush=True,
        )
        # The bar redraws in place on a terminal; piped into a file it would print every frame.
        graded = grade_submissions(todo, show_progress=sys.stderr.isatty())
        for sub, result in zip(todo, graded, strict=True):
            saved_grades.save(sub.path, limits, result)
            saved[sub.notebook_id] = result
    return [saved[s.notebook_id] for s in submissions]


def progress(folder: Path, echo=print) -> bool:
    """Grade every notebook found in ``folder``; print one line each.

    True when nothing is wrong: every notebook found could be read and graded, whatever its score.
    """
    ids = paths.notebook_ids()
    lines: dict[str, str] = {}
    submissions = []
    total = maximum = 0.0
    wrong = 0
    for nb_id in ids:
        path = paths.find_learner_notebook(folder, nb_id)
        if path is None:
            lines[nb_id] = "no notebook yet (run `make lab` to copy it into work/)"
            continue
        if not_started(path, nb_id):
            points, written = _points(nb_id)
            maximum += points
            lines[nb_id] = f"{_score('-', points, written):<20} not started"
            continue
        from autograder.grader.one_notebook import Submission
        from autograder.notebook_files import NotebookError, read_notebook

        try:
            read_notebook(path)
        except NotebookError as err:
            points, written = _points(nb_id)
            maximum += points
            lines[nb_id] = f"{_score('0', points, written):<20} unreadable: {err}"
            wrong += 1
            continue
        submissions.append(Submission(nb_id, "learner", path.resolve()))
    if submissions:
        for result in _grade(submissions):
            if result.error:  # no cells were graded: the notebook's points still count, as 0
                points, written = _points(result.notebook_id)
                score = _score("0", points, written)
                maximum += points
                wrong += 1
            else:
                score = _score(f"{result.score:g}", result.max_score, len(result.manual))
                total, maximum = total + result.score, maximum + result.max_score
            lines[result.notebook_id] = f"{score:<20} {_status(result)}"
    width = max(len(nb_id) for nb_id in ids)
    for nb_id in ids:
        echo(f"{nb_id:<{width}}  {lines[nb_id]}")
    failed = (
        f" ({wrong} notebook{'s' if wrong > 1 else ''} could not be graded, scored 0: see above)"
        if wrong
        else ""
    )
    echo(f"{'total':<{width}}  {total:g}/{maximum:g} automatic points{failed}")
    _mock_interviews(folder, echo)
    return not wrong


def _mock_interviews(work: Path, echo) -> None:
    """The mock interview's scorecard (``python -m autograder interview``), when there is one."""
    from autograder.interview.scorecard import FOLDER, SCORECARD, summary_lines

    lines = summary_lines(work / FOLDER)
    if lines:
        echo(f"\nmock interviews ({FOLDER}/{SCORECARD}):")
        for line in lines:
            echo(f"  {line}")
