"""A grading worker: ``python -m autograder.grader.worker CONFIG INDEX [ASSIGNMENT]``.

It owns a private nbgrader course (copied from the run's template: sources, releases, a
gradebook holding only the assignments), a runtime folder for kernel sockets and, in warm mode,
a forkserver sandbox. It reads one job per line on stdin and answers one JSON line on a private
copy of stdout (kernels and libraries that print cannot corrupt the protocol). For each job it
repairs and autogrades the submission, re-checks passed cells outside the kernel, scans the
learner's cells, generates feedback, copies the autograded notebook and feedback into the output
folder and writes the result file last, atomically: a result file exists only for finished work.
Afterwards it deletes the submission from its private course, so nothing carries over.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import shutil
import sys
import time
import traceback
from pathlib import Path

import nbformat
from nbgrader.api import MissingEntry
from traitlets.config import Config

from autograder import nbcell
from autograder.grader.feedback import sanitize
from autograder.grader.files import copy_atomic, write_json
from autograder.grader.gradebook import submission_record
from autograder.grader.isolation import Isolation, Limits, kernel_uid
from autograder.grader.kernels import SandboxKernelManager, ZygoteError, ZygoteServer
from autograder.grader.launch import prepare_runtime, write_kernelspec
from autograder.grader.nbgrader_run import kernel_stderr_silenced
from autograder.grader.pipeline import GradingFailed, GradingRun
from autograder.grader.results import CellResult, CheckStatus, NotebookResult, read_notebook
from autograder.grader.run_config import RunConfig
from autograder.grader.scan import scan_notebook, withheld_tests
from autograder.grader.sockets import own_mounts, share_mounts_below
from autograder.grader.structure import SubmissionError

RESULT_VERSION = 1
EXCHANGE_FILES = ("timestamp.txt", "submission_secret.txt")  # kept beside each graded notebook


def _withdraw(grade, cell: CellResult, test, message: str, check: CheckStatus) -> None:
    """Take a passed cell's points away, saying why in the result and the graded notebook."""
    grade.auto_score = 0.0
    cell.score, cell.passed, cell.check, cell.message = 0.0, False, check, message
    if test is not None:
        test.outputs.append(
            nbformat.v4.new_output(
                "error", ename="NotVerified", evalue=message, traceback=[f"NotVerified: {message}"]
            )
        )


def verdict(
    grade_id: str,
    check: CheckStatus,
    problem: str | None,
    suspicious: bool,
    depends_on: str | None = None,
    verifying: bool = True,
) -> tuple[CheckStatus | None, str | None, str | None]:
    """What a passed cell's re-check means: (withdrawn as, why, flag for a person), each or None.

    ``depends_on``: the learner's code outside the allow-list the test uses, if any
    (:func:`~autograder.grader.scan.withheld_tests`); its points wait for a person. While
    verifying, the kernel's checks are stand-ins that always pass, so a cell the grader could not
    verify has earned nothing yet: its points wait for a person too.
    """
    if depends_on and check != CheckStatus.REFUTED:
        problem = f"withheld for a person, who may award the points: it uses {depends_on}"
        return CheckStatus.WITHHELD, problem, f"{grade_id}: withheld (it uses {depends_on})"
    if check == CheckStatus.UNVERIFIED and (suspicious or verifying):
        where = " in a notebook flagged for a person to look at" if suspicious else ""
        problem = f"not verified outside the kernel ({problem}){where}: withheld until a person "
        problem += "awards the points"
        return CheckStatus.WITHHELD, problem, f"{grade_id}: withheld ({problem})"
    if check == CheckStatus.UNVERIFIED:
        return None, None, f"{grade_id}: not verified outside the kernel ({problem})"
    if problem:
        message = f"points withdrawn after re-checking outside the notebook: {problem}"
        return CheckStatus.REFUTED, message, f"{grade_id}: refuted ({problem})"
    return None, None, None


def notebook_summary(name: str, result: NotebookResult, run: dict) -> dict:
    """A notebook's part of the result file."""
    result.total()
    return {
        "notebook": name,
        "score": result.score,
        "max_score": result.max_score,
        "cells": [dataclasses.asdict(c) for c in result.cells],
        "manual": result.manual,
        "stopped": run.get("stopped"),
        "seconds": run.get("seconds"),
        "timing": run.get("timing", {}),
    }


class Worker:
    def __init__(self, cfg: RunConfig, index: int, home: str = ""):
        self.cfg, self.index = cfg, index
        self.iso = Isolation.from_json(cfg.isolation)
        self.limits = Limits(**cfg.limits)
        self.out = Path(cfg.out)
        self.root = Path(cfg.scratch) / f"w{index}"
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True)
        self.uid = kernel_uid(self.iso, index) if self.iso.switches_uid else None
        # the assignment the pool gives this worker first (``pool.next_job``), else the first
        self.assignment = home if home in cfg.packages else min(cfg.packages, default=None)
        if self.assignment is not None:
            self.limits = dataclasses.replace(self.limits, package=cfg.packages[self.assignment])
        self.runtime = prepare_runtime(self.root / "k")
        if self.iso.sockets_capped:  # each kernel's sockets/ a tmpfs, seen by its sandbox too
            share_mounts_below(self.runtime)
        font_cache = Path(cfg.font_cache) if cfg.font_cache else None
        self.zygote = None
        if cfg.warm and self.iso.sandboxed:  # start importing torch now, copy the course meanwhile
            inbox = self.root / "inbox"
            inbox.mkdir()
            self.zygote = ZygoteServer(
                self.iso,
                self.limits,
                runtime=self.runtime,
                inbox=inbox,
                workroot=self.root.resolve() / "course" / "autograded",
                font_cache=font_cache,
                uid=self.uid,
                modules=cfg.modules,
                log=self.root / "zygote.log",
            )
            self.zygote.launch()
        shutil.copytree(cfg.template, self.root / "course")
        self.font_cache = font_cache
        jupyter = self.root / "jupyter"
        write_kernelspec(jupyter, self.iso, self.limits, self.uid, font_cache)
        os.environ["JUPYTER_PATH"] = str(jupyter)
        extra = Config()
        if self.iso.sockets_capped:
            extra.SandboxKernelManager.sockets_bytes = self.limits.sockets_bytes
        self.run = GradingRun(
            self.root / "course", self.limits, self.runtime, cfg.verify, self.uid, extra
        )
        if self.zygote is not None:
            self.zygote.wait_ready()
        SandboxKernelManager.zygote = self.zygote

    # ------------------------------------------------------------------------- one job

    def grade(self, job: dict) -> dict:
        start = time.monotonic()
        result = {
            "version": RESULT_VERSION,
            "student": job["student"],
            "assignment": job["assignment"],
            "key": job["key"],
            "sha256": job["sha256"],
            "status": "error",
            "error": None,
            "notes": [],
            "flags": [],
            "notebooks": [],
            "worker": self.index,
        }
        try:
            self._grade(job, result)
            result["status"] = "graded"
        except SubmissionError as err:
            result["error"] = str(err)
        except GradingFailed as err:
            result.update(error=str(err), retry=True)
        except Exception as err:  # never a silent zero: report it, keep going
            traceback.print_exc()
            result["error"] = f"internal error while grading: {type(err).__name__}: {err}"
            result["retry"] = True
        finally:
            self._clean(job["student"], job["assignment"], result)
        result["seconds"] = round(time.monotonic() - start, 2)
        target = self.out / "results" / job["assignment"] / f"{job['student']}.json"
        write_json(target, result)
        return {"done": True, "status": result["status"], "result": str(target)}

    def _grade(self, job: dict, result: dict) -> None:
        assignment, student = job["assignment"], job["student"]
        course = self.run.root
        timing = result.setdefault("timing", {})
        mark = time.monotonic()
        withheld: dict[str, dict] = {}
        expected: dict[str, Path] = {}

        def lap(name: str) -> None:
            nonlocal mark
            now = time.monotonic()
            timing[name] = round(now - mark, 2)
            mark = now

        def before_run(releases: dict[str, Path], submitted: Path) -> None:
            """Read the cells as handed in, before any learner code runs; ready the kernels."""
            expected.update(releases)
            for name, release in releases.items():
                withheld[name] = withheld_tests(
                    nbformat.read(submitted / name, as_version=4),
                    nbformat.read(course / "source" / assignment / name, as_version=4),
                    nbformat.read(release, as_version=4),
                    Path(name).stem,
                )
            lap("prepare")
            if self._use_package_of(assignment) or (
                self.zygote is not None and not self.zygote.alive()
            ):
                self._restart_forkserver()

        done = self.run.autograde(assignment, student, Path(job["folder"]), before_run)
        result["notes"] += done.notes
        lap("autograde")
        with self.run.nbgrader.gradebook() as gb:
            for name in expected:
                run = done.runs[Path(name).stem]  # autograde raised if one is missing
                summary, flags, notes = self._check_notebook(
                    gb, assignment, student, name, run, withheld[name]
                )
                result["notebooks"].append(summary)
                result["flags"] += flags
                result["notes"] += notes
            gb.db.commit()
        lap("check")
        self.run.nbgrader.feedback(assignment, student)
        lap("feedback")
        with self.run.nbgrader.gradebook() as gb:
            result["gradebook"] = submission_record(gb, assignment, student)
            sub = gb.find_submission(assignment, student)
            result["score"], result["max_score"] = float(sub.score), float(sub.max_score)
            result["needs_manual_grade"] = bool(sub.needs_manual_grade)
        self._publish(assignment, student, expected, Path(job["folder"]))
        lap("publish")

    def _check_notebook(
        self, gb, assignment: str, student: str, name: str, run: dict, withheld: dict
    ) -> tuple[dict, list[str], list[str]]:
        """(Per-cell results re-checked outside the kernel, flags, notes) for one notebook.

        Refuted cells lose their points, in the gradebook and in the graded notebook; so do, until
        a person awards them, ``withheld`` ones (test grade id -> the dynamic code it uses).
        """
        path = self.run.root / "autograded" / student / assignment / name
        graded = read_notebook(gb, path, Path(name).stem, assignment, student)
        answers = {nbcell.grade_id(c) for c in graded.nb.cells if nbcell.is_answer(c)}
        suspicious = scan_notebook(graded.nb, answers)
        flags = []
        for cell in graded.result.cells:
            if not cell.passed:
                continue
            test = graded.tests.get(cell.grade_id)
            cell.check, problem = self._recheck(test, cell.grade_id, run)
            withdrawn_as, message, flag = verdict(
                cell.grade_id,
                cell.check,
                problem,
                bool(suspicious),
                withheld.get(cell.grade_id),
                self.cfg.verify,
            )
            if withdrawn_as:
                grade = graded.grades[cell.grade_id]
                _withdraw(grade, cell, test, message, withdrawn_as)
            flags += [flag] if flag else []
        sanitize(graded.nb)  # a person opens it: no learner script may run there
        path.chmod(0o644)
        nbformat.write(graded.nb, path)
        if run.get("sockets_full"):
            flags.append(
                f"{name}: the kernel filled its sockets/ folder (the "
                f"{self.limits.sockets_bytes // 1024**2} MiB cap): its writes there failed"
            )
        notes = []
        if run.get("truncated"):
            notes.append(f"{name}: output of {run['truncated']} cell(s) cut at the cap")
        return notebook_summary(name, graded.result, run), flags + suspicious, notes

    def _recheck(self, cell, grade_id, run) -> tuple[CheckStatus, str | None]:
        """What verifying the passed cell found: verified, refuted (why) or unverified (why)."""
        if not self.cfg.verify:
            return CheckStatus.UNVERIFIED, "re-checks are off"
        if cell is None:
            return CheckStatus.REFUTED, "the test cell was not found"
        found = run.get("verdicts", {}).get(grade_id)
        if not found:
            why = run.get("stopped") or "the checks could not be run on your code"
            return CheckStatus.REFUTED, why
        status, message = found
        return CheckStatus(status), message or None

    def _use_package_of(self, assignment: str) -> bool:
        """Give kernels the assignment's answer-free package; True: restart the forkserver."""
        package = self.cfg.packages.get(assignment)
        if package is None or package == self.limits.package:
            return False
        self.assignment = assignment
        self.limits = dataclasses.replace(self.limits, package=package)
        write_kernelspec(self.root / "jupyter", self.iso, self.limits, self.uid, self.font_cache)
        if self.zygote is not None:
            self.zygote.limits = self.limits
        return self.zygote is not None

    def _publish(self, assignment, student, expected, folder: Path) -> None:
        """Copy what the instructor keeps into the output folder, one atomic file at a time."""
        course = self.run.root
        for name in expected:
            stem = Path(name).stem
            pairs = [
                (course / "autograded" / student / assignment / name, "autograded", name),
                (
                    course / "feedback" / student / assignment / f"{stem}.html",
                    "feedback",
                    f"{stem}.html",
                ),
            ]
            for src, kind, filename in pairs:
                if src.is_file():
                    copy_atomic(src, self.out / kind / student / assignment / filename)
        # nbgrader's exchange files (``submit`` writes them, ``collect`` keeps them):
        # ``release_feedback`` finds a learner's feedback by them, and ``generate_feedback`` in
        # graded/ copies them from autograded/ into grader/feedback/.
        for filename in EXCHANGE_FILES:
            src = course / "autograded" / student / assignment / filename
            for kind in ("autograded", "feedback") if src.is_file() else ():
                copy_atomic(src, self.out / kind / student / assignment / filename)
        target = self.out / "submitted" / student / assignment
        if folder.resolve() != target.resolve():
            submitted = course / "submitted" / student / assignment
            for src in sorted(p for p in submitted.rglob("*") if p.is_file()):
                copy_atomic(src, target / src.relative_to(submitted))

    def _clean(self, student: str, assignment: str, result: dict) -> None:
        for step in ("submitted", "autograded", "feedback"):
            shutil.rmtree(self.run.root / step / student, ignore_errors=True)
        try:
            with self.run.nbgrader.gradebook() as gb:
                gb.remove_submission(assignment, student)
        except MissingEntry:
            pass
        if self.zygote is None:
            return
        clean = self.zygote.reset()
        if self.zygote.last_killed:
            result["flags"].append(
                f"left {self.zygote.last_killed} process(es) running after its notebook: killed"
            )
        if not clean:
            self._restart_forkserver()

    def _restart_forkserver(self) -> None:
        try:
            self.zygote.start()
        except ZygoteError as err:  # carry on with a fresh sandbox per kernel
            print(f"forkserver lost ({err}); cold kernels from now on", file=sys.stderr)
            self.zygote.stop()
            self.zygote = SandboxKernelManager.zygote = None

    def close(self) -> None:
        if self.zygote is not None:
            self.zygote.stop()


GC_THRESHOLD = (50_000, 20, 10)  # the cycle collector's, in a worker (see _settle)


def _settle() -> None:
    """Import torch, which the scan follows attributes on, and freeze all that is imported.

    Imported modules live as long as the worker: the cycle collector gains nothing by walking
    them, at import (about 0.4 CPU-s with torch) nor in every later full collection and at exit
    (as much again). Frozen, it walks only what grading allocates. After ``own_mounts``: torch
    may start threads.

    The youngest generation is then collected every 50,000 allocations instead of 700: reading
    the kernel's JSON records allocates in bursts, and with the default the collector ran some
    4,600 times over the ten instructor notebooks, 27 of them full, for 3.6 of the worker's
    38 CPU-s (0.65 s after). What grading allocates is the grader's own data, not learner code,
    so the garbage it leaves in cycles stays small.
    """
    gc.disable()
    import torch  # noqa: F401, PLC0415 (the scan imports it anyway, for every notebook)

    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)
    gc.enable()


def main() -> None:
    cfg = RunConfig.load(Path(sys.argv[1]))
    index = int(sys.argv[2])
    home = sys.argv[3] if len(sys.argv) > 3 else ""
    requests = os.fdopen(os.dup(0), "r")
    replies = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # whatever prints goes to the worker's log, not into the protocol
    try:
        if Isolation.from_json(cfg.isolation).sockets_capped:
            own_mounts()  # first, while this process has one thread
        with kernel_stderr_silenced():
            worker = Worker(cfg, index, home)
    except Exception as err:
        traceback.print_exc()
        replies.write(json.dumps({"ready": False, "error": f"{type(err).__name__}: {err}"}) + "\n")
        replies.flush()
        raise SystemExit(1) from None
    _settle()
    replies.write(json.dumps({"ready": True}) + "\n")
    replies.flush()
    try:
        for line in requests:
            job = json.loads(line)
            reply = worker.grade(job)
            replies.write(json.dumps(reply) + "\n")
            replies.flush()
    finally:
        worker.close()


if __name__ == "__main__":
    main()
