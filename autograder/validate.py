"""The CI gate: instructor notebooks score full marks, learner notebooks fail every test."""

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

from autograder import paths
from autograder.grader.one_notebook import NotebookResult, Submission, grade_submissions


def _problems(solution: NotebookResult, release: NotebookResult) -> list[str]:
    problems = []
    for name, result in (("solution", solution), ("release", release)):
        if result.error:
            problems.append(f"{name}: {result.error}")
    if not solution.error:
        if not solution.cells:
            problems.append("solution: no auto-graded test cells")
        problems += [
            f"solution fails {c.grade_id}: {c.message}" for c in solution.cells if not c.passed
        ]
    if not release.error:
        problems += [
            f"release passes {c.grade_id} without any work: the test cannot fail"
            for c in release.cells
            if c.score > 0
        ]
    return problems


def validate(notebook_ids: list[str] | None = None, echo=print) -> bool:
    """Grade every solution and every release notebook; print a verdict per notebook."""
    ids = notebook_ids or paths.notebook_ids()
    ok = bool(ids)
    for nb_id, (solution, release) in zip(ids, _grade_all(ids), strict=True):
        problems = _problems(solution, release)
        ok &= not problems
        verdict = "ok" if not problems else "FAILED"
        echo(
            f"{verdict:>6}  {nb_id}: solution {solution.score:g}/{solution.max_score:g}, "
            f"release {release.score:g}/{release.max_score:g} "
            f"({len(release.cells)} test cells, {len(solution.manual)} manually graded)"
        )
        for problem in problems:
            echo(f"        {problem}")
    return ok


def _grade_pair(nb_id: str) -> tuple[NotebookResult, NotebookResult]:
    """The solution's and the release's results for one notebook."""
    return tuple(
        grade_submissions(
            [
                Submission(nb_id, "solution", paths.solution_notebook(nb_id)),
                Submission(nb_id, "release", paths.release_notebook(nb_id)),
            ]
        )
    )


def _grade_all(ids: list[str]) -> list[tuple[NotebookResult, NotebookResult]]:
    """One notebook per worker process, as many workers as cores: kernels are single-threaded."""
    jobs = min(len(ids), len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    if jobs <= 1:
        return [_grade_pair(nb_id) for nb_id in ids]
    context = multiprocessing.get_context("spawn")  # no fork of a process that may hold torch
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        return list(pool.map(_grade_pair, ids))
