"""One nbgrader gradebook for the class: importing graded results, merging shards, exporting CSV.

Everything goes through nbgrader's own ``Gradebook`` API, so the result opens in the formgrader
and works with ``nbgrader export`` / ``generate_feedback``. Workers never write here: the parent
process is the only writer, which keeps SQLite away from concurrent writes.
"""

from __future__ import annotations

import csv
import io
import warnings
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from sqlalchemy.exc import SAWarning

from autograder.grader.nbgrader_run import put_environment_on_path
from autograder.grader.nbgrader_settings import COURSE_ID
from autograder.grader.results import CheckStatus

GRADE_FIELDS = ("auto_score", "manual_score", "extra_credit", "needs_manual_grade")
COMMENT_FIELDS = ("auto_comment", "manual_comment")


class MergeError(Exception):
    """Two gradebooks disagree in a way that needs a person."""


def open_gradebook(path: Path) -> Gradebook:
    put_environment_on_path()  # creating a gradebook runs `alembic` from this environment
    return Gradebook(f"sqlite:///{Path(path).resolve()}", COURSE_ID)


# ----------------------------------------------------------------------------- assignments


def _definition(assignment) -> dict:
    """Everything about an assignment that grading depends on, comparable with ==."""
    notebooks = {}
    for nb in assignment.notebooks:
        notebooks[nb.name] = {
            "grade": sorted((c.name, c.max_score, c.cell_type) for c in nb.grade_cells),
            "solution": sorted(c.name for c in nb.solution_cells),
            "task": sorted((c.name, c.max_score, c.cell_type) for c in nb.task_cells),
            "source": sorted(
                (c.name, c.cell_type, c.locked, c.checksum or "") for c in nb.source_cells
            ),
        }
    return notebooks


def copy_assignment(src: Gradebook, dst: Gradebook, name: str) -> str:
    """Make ``dst``'s definition of assignment ``name`` equal to ``src``'s.

    Returns "added", "same" or "replaced"; raises :class:`MergeError` when the definitions
    differ and ``dst`` already holds submissions of it.
    """
    source = src.find_assignment(name)
    try:
        existing = dst.find_assignment(name)
    except MissingEntry:
        existing = None
    if existing is not None:
        if _definition(existing) == _definition(source):
            return "same"
        if existing.submissions:
            raise MergeError(
                f"assignment {name} has different test cells in the two gradebooks and "
                "graded submissions already: grade into a new folder, or regrade all"
            )
        dst.remove_assignment(name)
    dst.add_assignment(name, duedate=source.duedate)
    for nb in source.notebooks:
        dst.add_notebook(nb.name, name, kernelspec=nb.kernelspec)
        for c in nb.grade_cells:
            dst.add_grade_cell(c.name, nb.name, name, max_score=c.max_score, cell_type=c.cell_type)
        for c in nb.solution_cells:
            dst.add_solution_cell(c.name, nb.name, name)
        for c in nb.task_cells:
            dst.add_task_cell(c.name, nb.name, name, max_score=c.max_score, cell_type=c.cell_type)
        for c in nb.source_cells:
            dst.add_source_cell(
                c.name,
                nb.name,
                name,
                cell_type=c.cell_type,
                locked=c.locked,
                source=c.source,
                checksum=c.checksum,
            )
    return "replaced" if existing is not None else "added"


# ----------------------------------------------------------------------------- submissions


def submission_record(gb: Gradebook, assignment: str, student: str) -> dict:
    """A submission's grades and comments as plain data (what import and merge move)."""
    sub = gb.find_submission(assignment, student)
    notebooks = {}
    for nb in sub.notebooks:
        notebooks[nb.name] = {
            "flagged": bool(nb.flagged),
            "grades": {g.name: {f: getattr(g, f) for f in GRADE_FIELDS} for g in nb.grades},
            "comments": {c.name: {f: getattr(c, f) for f in COMMENT_FIELDS} for c in nb.comments},
        }
    stamp = sub.timestamp.isoformat() if sub.timestamp else None
    return {"timestamp": stamp, "notebooks": notebooks}


def _student_fields(student) -> dict:
    return {f: getattr(student, f) for f in ("first_name", "last_name", "email", "lms_user_id")}


def write_submission(
    gb: Gradebook, assignment: str, student: str, record: dict, student_fields=None
) -> None:
    """Replace ``student``'s submission of ``assignment`` with ``record``."""
    gb.update_or_create_student(student, **(student_fields or {}))
    with warnings.catch_warnings():
        # nbgrader's own remove/add cycle makes SQLAlchemy warn about objects it already
        # detached; the rows are right (the merge tests read them back), the warning is noise.
        warnings.simplefilter("ignore", SAWarning)
        try:
            gb.remove_submission(assignment, student)
        except MissingEntry:
            pass
        kwargs = {"timestamp": record["timestamp"]} if record.get("timestamp") else {}
        sub = gb.add_submission(assignment, student, **kwargs)
        for nb in sub.notebooks:
            data = record["notebooks"].get(nb.name, {})
            nb.flagged = bool(data.get("flagged", False))
            for grade in nb.grades:
                for field, value in data.get("grades", {}).get(grade.name, {}).items():
                    setattr(grade, field, value)
            for comment in nb.comments:
                for field, value in data.get("comments", {}).get(comment.name, {}).items():
                    setattr(comment, field, value)
        gb.db.commit()


def _auto_part(record: dict) -> dict:
    return {
        nb: {g: v.get("auto_score") for g, v in data.get("grades", {}).items()}
        for nb, data in record.get("notebooks", {}).items()
    }


def import_result(gb: Gradebook, result: dict) -> str:
    """Put one graded result in the gradebook; keep manual grades if it is already there."""
    assignment, student = result["assignment"], result["student"]
    try:
        current = submission_record(gb, assignment, student)
    except MissingEntry:
        current = None
    if current is not None and _auto_part(current) == _auto_part(result["gradebook"]):
        return "same"
    write_submission(gb, assignment, student, result["gradebook"])
    return "replaced" if current else "added"


def forget(gb: Gradebook, assignment: str, student: str) -> None:
    try:
        gb.remove_submission(assignment, student)
    except MissingEntry:
        pass


# ----------------------------------------------------------------------------- merging


def merge(inputs: list[Path], out: Path, replace: bool = False) -> dict:
    """Merge several gradebooks (shards of one class) into ``out``.

    A submission present in several inputs must be identical in all of them, unless ``replace``
    (then the later input wins). Returns counts and the list of conflicts left unmerged.
    """
    report = {"added": 0, "same": 0, "replaced": 0, "conflicts": []}
    with open_gradebook(out) as dst:
        for path in inputs:
            if not Path(path).is_file():
                raise MergeError(f"{path}: no such gradebook")
            with open_gradebook(path) as src:
                for assignment in src.assignments:
                    copy_assignment(src, dst, assignment.name)
                for assignment in src.assignments:
                    for sub in assignment.submissions:
                        student = sub.student.id
                        record = submission_record(src, assignment.name, student)
                        try:
                            current = submission_record(dst, assignment.name, student)
                        except MissingEntry:
                            current = None
                        if current == record:
                            report["same"] += 1
                            continue
                        if current is not None and not replace:
                            report["conflicts"].append(f"{assignment.name}/{student} ({path})")
                            continue
                        fields = _student_fields(sub.student)
                        write_submission(dst, assignment.name, student, record, fields)
                        report["replaced" if current else "added"] += 1
    return report


# ----------------------------------------------------------------------------- export

NUMBER_COLUMNS = {"score", "max_score"}
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(text: str) -> str:
    """``text`` with a leading ``'`` if a spreadsheet would read it as a formula (OWASP CSV
    injection): learner ids, flags and notes quote what learners wrote."""
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def export_csv(gb_path: Path, results: list[dict], target: Path) -> None:
    """One row per submission: gradebook scores (manual grades included), status, flags."""
    columns = [
        "student_id",
        "assignment",
        "status",
        "score",
        "max_score",
        "needs_manual_grade",
        "flags",
        "refuted",
        "notes",
        "error",
        "sha256",
    ]
    rows = []
    with open_gradebook(gb_path) as gb:
        for r in sorted(results, key=lambda r: (r["assignment"], r["student"])):
            row = {c: "" for c in columns}
            row.update(student_id=r["student"], assignment=r["assignment"], status=r["status"])
            row.update(sha256=r.get("sha256", ""), error=r.get("error") or "")
            row["flags"] = "; ".join(r.get("flags", []))
            row["notes"] = "; ".join(r.get("notes", []))
            if r["status"] == "graded":
                try:
                    sub = gb.find_submission(r["assignment"], r["student"])
                    row["score"], row["max_score"] = f"{sub.score:g}", f"{sub.max_score:g}"
                    row["needs_manual_grade"] = str(bool(sub.needs_manual_grade)).lower()
                except MissingEntry:
                    row["status"], row["error"] = "error", "graded but missing from the gradebook"
                row["refuted"] = "; ".join(
                    c["grade_id"]
                    for nb in r.get("notebooks", [])
                    for c in nb["cells"]
                    if c.get("check") in (CheckStatus.REFUTED, CheckStatus.WITHHELD)
                )
            rows.append(row)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns)
    writer.writeheader()
    writer.writerows(
        {c: v if c in NUMBER_COLUMNS else spreadsheet_safe(v) for c, v in row.items()}
        for row in rows
    )
    from autograder.grader.files import write_atomic

    write_atomic(target, buffer.getvalue())


def main_merge(args) -> int:
    out = Path(args.out)
    try:
        report = merge([Path(p) for p in args.gradebooks], out, replace=args.replace)
    except MergeError as err:
        print(f"error: {err}")
        return 2
    print(
        f"merged {len(args.gradebooks)} gradebook(s) into {out}: {report['added']} added, "
        f"{report['replaced']} replaced, {report['same']} already there"
    )
    if args.csv:
        with open_gradebook(out) as gb:
            results = [
                {"student": s.student.id, "assignment": a.name, "status": "graded"}
                for a in gb.assignments
                for s in a.submissions
            ]
        export_csv(out, results, Path(args.csv))
        print(f"wrote {args.csv}")
    for conflict in report["conflicts"]:
        print(f"conflict (kept the first): {conflict}")
    return 2 if report["conflicts"] else 0
