"""The ``grade`` and ``merge`` subcommands of ``python -m autograder`` (argument parsing only)."""

import argparse
import gc


def add_parsers(sub, handler) -> None:
    """Register ``grade`` and ``merge`` on the main parser; ``handler(args)`` runs either."""
    g = sub.add_parser(
        "grade",
        help="grade a class: parallel, sandboxed, resumable; gradebook, feedback and CSV in --out",
        description="Grade SUBMISSIONS (<student>/<assignment>/<notebook>.ipynb) into --out.",
    )
    g.add_argument("submissions", help="folder in nbgrader's submitted layout")
    g.add_argument("--out", required=True, help="output folder (an nbgrader course folder)")
    g.add_argument("--jobs", type=int, default=0, help="parallel workers (default: all cores)")
    g.add_argument("--cell-timeout", type=int, default=60, help="seconds per cell (default 60)")
    g.add_argument("--budget", type=int, default=300, help="seconds per notebook (default 300)")
    g.add_argument("--memory-gb", type=int, default=8, help="address space per kernel (GB)")
    g.add_argument("--shard", help="K/N: grade only students whose id hashes to shard K of N")
    g.add_argument("--source", help="instructor notebooks (default: the repository's solutions/)")
    g.add_argument("--cold", action="store_true", help="a fresh sandboxed process per kernel")
    g.add_argument("--no-verify", action="store_true", help="skip out-of-kernel re-checks")
    g.add_argument(
        "--no-sandbox", action="store_true", help="limits only, no bubblewrap (not recommended)"
    )
    g.set_defaults(func=handler, classroom="grade")

    m = sub.add_parser(
        "merge",
        help="merge gradebooks (e.g. shards of a class) into one",
        description="Merge nbgrader gradebooks; the same submission must agree in all inputs.",
    )
    m.add_argument("gradebooks", nargs="+", metavar="DB", help="gradebook.db files to merge")
    m.add_argument("--out", required=True, help="gradebook to create or extend")
    m.add_argument("--csv", help="also write a grades CSV here")
    m.add_argument("--replace", action="store_true", help="later inputs win conflicts")
    m.set_defaults(func=handler, classroom="merge")


def run(args: argparse.Namespace) -> int:
    if args.classroom == "grade":
        # What grade imports (nbgrader, nbconvert, sqlalchemy) lives as long as the run: the cycle
        # collector walks it neither while it is imported nor afterwards (about 0.5 CPU-s).
        gc.disable()
        from autograder.classroom.grade import main_grade

        gc.freeze()
        gc.enable()
        return main_grade(args)
    from autograder.grader.gradebook import main_merge

    return main_merge(args)
