"""``python -m autograder progress``: every notebook's score at a glance, hidden tests included."""

from pathlib import Path

from autograder import paths
from autograder.grading import NotebookResult, Submission, grade_submissions
from autograder.notebook_files import NotebookError, read_notebook


def _status(result: NotebookResult) -> str:
    if result.error:
        return f"could not be graded: {result.error}"
    if result.full_marks:
        return "done"
    if result.score == 0 and all("not implemented yet" in c.message for c in result.cells):
        return "not started"
    failing = [c.grade_id for c in result.cells if not c.passed]
    return f"in progress: {len(failing)} test(s) to fix, first {failing[0]}"


def progress(folder: Path, echo=print) -> bool:
    """Grade every notebook found in ``folder``; print one line each. True when all are done."""
    ids = paths.notebook_ids()
    lines: dict[str, str] = {}
    submissions = []
    for nb_id in ids:
        path = paths.find_learner_notebook(folder, nb_id)
        if path is None:
            lines[nb_id] = "no notebook yet (run `make lab` to copy it into work/)"
            continue
        try:
            read_notebook(path)
        except NotebookError as err:
            lines[nb_id] = f"unreadable: {err}"
            continue
        submissions.append(Submission(nb_id, "learner", path.resolve()))
    total = maximum = 0.0
    for result in grade_submissions(submissions, show_progress=True):
        total, maximum = total + result.score, maximum + result.max_score
        manual = f" + {len(result.manual)} written" if result.manual else ""
        score = f"{result.score:g}/{result.max_score:g}{manual}"
        lines[result.notebook_id] = f"{score:<16} {_status(result)}"
    width = max(len(nb_id) for nb_id in ids)
    for nb_id in ids:
        echo(f"{nb_id:<{width}}  {lines[nb_id]}")
    echo(f"{'total':<{width}}  {total:g}/{maximum:g} automatic points")
    return len(submissions) == len(ids) and total == maximum
