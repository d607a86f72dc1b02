"""``python -m autograder``: the learner's commands (check, progress, lab), the instructor's."""

import argparse
import json
import os
import sys
import textwrap
from pathlib import Path

from autograder import paths

EXIT_OK, EXIT_NOT_FULL_MARKS, EXIT_ERROR = 0, 1, 2


def _cmd_build(args) -> int:
    from autograder.build import build

    stale = build(check=args.check, notebook_ids=args.notebooks or None)
    rel = [str(p.relative_to(paths.REPO_ROOT)) for p in stale]
    if args.check:
        if rel:
            print("out of date (run `python -m autograder build`):", *rel, sep="\n  ")
            return EXIT_NOT_FULL_MARKS
        print(f"up to date: {len(args.notebooks or paths.notebook_ids())} notebook(s)")
        return EXIT_OK
    print(f"rebuilt {len(rel)} file(s)" + "".join(f"\n  {r}" for r in rel))
    return EXIT_OK


def _cmd_check(args) -> int:
    path = paths.notebook_argument(args.notebook)
    if path.is_file():  # at once, before the imports and the grading that take seconds
        from autograder.report import format_header

        out = sys.stderr if args.json else sys.stdout  # --json: stdout holds the JSON alone
        print(format_header(path, args.budget), file=out, flush=True)
    from autograder.grader.isolation import Limits
    from autograder.grader.one_notebook import Submission, grade_submissions
    from autograder.notebook_files import NotebookError, identify, read_notebook
    from autograder.report import format_result

    try:
        read_notebook(path)
        nb_id = identify(path)
    except NotebookError as err:
        return _error(str(err), args.json, path)
    limits = Limits(cell_timeout_s=args.cell_timeout, notebook_budget_s=args.budget)
    (result,) = grade_submissions([Submission(nb_id, "learner", path.resolve())], limits=limits)
    result.notebook = str(path)
    from autograder.grader import saved_grades

    saved_grades.save(path, limits, result)  # progress reuses it while the file is unchanged
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(format_result(result))
    if result.error:
        print(f"error: {result.error}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK if result.full_marks else EXIT_NOT_FULL_MARKS


def _error(message: str, as_json: bool, path: Path) -> int:
    if as_json:
        print(json.dumps({"notebook": str(path), "error": message}))
    print(f"error: {message}", file=sys.stderr)
    return EXIT_ERROR


def _cmd_validate(args) -> int:
    from autograder.validate import validate

    return EXIT_OK if validate(args.notebooks or None) else EXIT_NOT_FULL_MARKS


def _cmd_grade(args) -> int:
    from autograder.classroom.commands import run

    return run(args)


def _learner_folder(given: str | None) -> Path:
    """The folder named, else here if it holds course notebooks (e.g. a JupyterLab terminal in
    work/, wherever work/ is), else work/."""
    if given:
        return Path(given)
    here = Path.cwd()
    holds_notebooks = any(paths.find_learner_notebook(here, i) for i in paths.notebook_ids())
    return here if holds_notebooks else paths.WORK_DIR


def _cmd_progress(args) -> int:
    from autograder.progress import progress

    folder = _learner_folder(args.folder)
    if not folder.is_dir():
        return _error(
            f"{folder} is not a folder: run `make lab` first, or name your folder", False, folder
        )
    # Unfinished notebooks are what progress reports, not a failure: only an unreadable or
    # ungradable notebook makes the exit status non-zero.
    return EXIT_OK if progress(folder) else EXIT_ERROR


def _cmd_interview(args) -> int:
    from autograder.interview import bank, notebook

    if args.list:
        for problem in bank.PROBLEMS.values():
            print(f"{problem.id:<18} {problem.title} ({problem.taught})")
        return EXIT_OK
    if args.problem is not None and args.problem not in bank.PROBLEMS:
        listed = ", ".join(bank.PROBLEMS)
        return _error(f"no problem {args.problem!r}; the problems are: {listed}", False, Path())
    work = _learner_folder(args.folder)
    if not work.is_dir():
        return _error(f"{work} is not a folder: run `make lab` first, or name it", False, work)
    mode = "coach" if args.coach else "interviewer"
    path, record = notebook.write(args.problem, work, args.seed, mode=mode)
    problem = bank.PROBLEMS[record["problem"]]
    print(
        f"Mock interview: {problem.title} (attempt {record['id']}, a variant drawn at random, "
        f"a {problem.box_minutes}-minute box).\n"
        f"Open {notebook.FOLDER}/{path.name} in JupyterLab's file browser ({path}): the "
        "clock is running; answer in its empty cell.\n"
        + (
            "Coach mode: every run names the mistake.\n"
            if args.coach
            else "Interviewer mode: a run says pass or fail; `interview.hint()` costs a hint; "
            "the model answers are away until the debrief.\n"
        )
        + "`python -m autograder progress` shows your scorecard."
    )
    return EXIT_OK


def _cmd_lab(args) -> int:
    from autograder.lab_launcher import launch

    return launch(extra_args=args.jupyter_args)


class _Listing:
    """The subparsers action, noting each command's one-line help for the grouped command list."""

    def __init__(self, sub):
        self.sub, self.helps = sub, {}

    def add_parser(self, name, **kwargs):
        self.helps[name] = kwargs.get("help", "")
        return self.sub.add_parser(name, **kwargs)


LEARNER_COMMANDS = ["check", "progress", "interview", "lab"]
INSTRUCTOR_COMMANDS = ["build", "validate", "grade", "merge"]


def _command_list(helps: dict[str, str]) -> str:
    width = max(map(len, helps)) + 2
    groups = [("For learners", LEARNER_COMMANDS), ("For instructors", INSTRUCTOR_COMMANDS)]
    lines = ["The course's commands (python -m autograder COMMAND --help tells more about one)."]
    for title, names in groups:
        lines += ["", f"{title}:"]
        for name in names:
            wrapped = textwrap.wrap(helps[name], 96 - width)
            lines.append(f"  {name:<{width}}{wrapped[0]}")
            lines += [" " * (width + 2) + more for more in wrapped[1:]]
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m autograder",
        usage="%(prog)s COMMAND ...",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # The commands are listed by _command_list, in two groups, instead of argparse's one list.
    sub = _Listing(
        p.add_subparsers(
            dest="command", metavar="COMMAND", required=True, prog=p.prog, help=argparse.SUPPRESS
        )
    )

    c = sub.add_parser("check", help="grade one notebook (hidden tests included) and explain")
    c.add_argument("notebook", help="your notebook's number (01), id or path")
    c.add_argument("--json", action="store_true", help="print one JSON object (see the contract)")
    c.add_argument("--cell-timeout", type=int, default=60, help="seconds per cell (default 60)")
    c.add_argument("--budget", type=int, default=300, help="seconds per notebook (default 300)")
    c.set_defaults(func=_cmd_check)

    pr = sub.add_parser("progress", help="every notebook's score, hidden tests included")
    pr.add_argument(
        "folder", nargs="?", help="where your notebooks are (default: here if any are, else work/)"
    )
    pr.set_defaults(func=_cmd_progress)

    iv = sub.add_parser(
        "interview",
        help="a mock interview: a new problem from the whole course in a fresh notebook, with a "
        "clock, the checks' diagnoses, follow-ups and a scorecard",
    )
    iv.add_argument("problem", nargs="?", help="a problem id (default: the one due first)")
    iv.add_argument("--list", action="store_true", help="list the problems and exit")
    iv.add_argument("--seed", type=int, help="draw the variant and follow-ups from this seed")
    iv.add_argument(
        "--coach",
        action="store_true",
        help="every run names the mistake, follow-ups answered with a letter (default: "
        "interviewer mode, pass or fail, hints cost, the diagnosis in the debrief)",
    )
    iv.add_argument(
        "--folder", help="your work folder (default: here if it has notebooks, else work/)"
    )
    iv.set_defaults(func=_cmd_interview)

    lab = sub.add_parser("lab", help="copy new notebooks into work/ and open JupyterLab there")
    lab.add_argument(
        "jupyter_args",
        nargs=argparse.REMAINDER,
        help="passed to jupyter lab, e.g. --port 8891 --no-browser",
    )
    lab.set_defaults(func=_cmd_lab)

    b = sub.add_parser("build", help="regenerate solutions/*.ipynb and course/ from solutions/*.py")
    b.add_argument("notebooks", nargs="*", help="notebook ids (default: all)")
    b.add_argument("--check", action="store_true", help="only compare; exit 1 if stale")
    b.set_defaults(func=_cmd_build)

    v = sub.add_parser("validate", help="CI gate: solutions pass, releases fail")
    v.add_argument("notebooks", nargs="*", help="notebook ids (default: all)")
    v.set_defaults(func=_cmd_validate)

    from autograder.classroom.commands import add_parsers

    add_parsers(sub, _cmd_grade)  # grade (a whole class) and merge (gradebooks)
    p.description = _command_list(sub.helps)
    return p


def _needs_repository(args) -> str:
    """One line when the command needs the course's repository and the package was installed
    without it (``pip install``, as on Colab); "" otherwise."""
    if paths.SOLUTIONS_DIR.is_dir() or args.command == "merge":
        return ""
    if args.command == "grade" and args.source:  # the instructor notebooks are elsewhere
        return ""
    return (
        f"`{args.command}` needs the course's repository (its solutions/ folder holds the "
        "instructor notebooks and hidden tests), and this course was installed without it: "
        "clone the repository and run it there; the test cells in your notebook work anywhere."
    )


def main(argv: list[str] | None = None) -> int:
    # `../.venv/bin/python -m autograder` (from work/) makes sys.executable ".../work/../.venv/...":
    # a grading kernel, sandboxed where work/ is not mounted, cannot walk through that "..".
    sys.executable = os.path.normpath(sys.executable)
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["lab"] and not {"-h", "--help"} & set(argv[1:2]):
        # Everything after `lab` is JupyterLab's (argparse would refuse `--port 8891` etc.).
        args = parser().parse_args(["lab"])
        args.jupyter_args = argv[1:]
    else:
        args = parser().parse_args(argv)
    missing = _needs_repository(args)
    if missing:
        return _error(missing, getattr(args, "json", False), Path(getattr(args, "notebook", "")))
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
