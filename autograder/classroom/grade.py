"""``python -m autograder grade SUBMISSIONS --out DIR``: grade a class, in parallel, resumably.

SUBMISSIONS uses nbgrader's submitted layout, ``<student>/<assignment>/<notebook>.ipynb``. DIR
becomes an nbgrader course folder (``gradebook.db``, ``source/``, ``autograded/``,
``grader/feedback/``, ``nbgrader_config.py``) that the formgrader and ``nbgrader export``
understand, plus ``grader/results/<assignment>/<student>.json`` (one per submission, written last
and atomically), ``manifest.json`` and ``grades.csv``.

A submission is identified by a key: the sha256 of its files and of what grades it (the
instructor notebook, the checks, the settings). A result with the same key is never redone, so
re-running is idempotent and an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import contextlib
import fcntl
import fnmatch
import hashlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from autograder import paths
from autograder.classroom.learner_ids import printable
from autograder.classroom.submissions import Job, discover
from autograder.grader.files import (
    files_digest,
    folder_digest,
    read_json,
    remove_stale_temporaries,
    write_atomic,
    write_json,
)
from autograder.grader.isolation import (
    UID_BLOCK,
    Limits,
    claim_uids,
    detect,
    prepare_font_cache,
    shared_font_cache,
)
from autograder.grader.nbgrader_settings import IGNORED_FILES

CLASSROOM_VERSION = "2"  # 2: output caps for every output, tests withheld for dynamic code
HARD_LIMIT_MARGIN_S = 180
EXIT_OK, EXIT_ERRORS, EXIT_INTERRUPTED = 0, 2, 130
CONFIG_FILE = '''"""nbgrader configuration of a graded class (by `python -m autograder grade`).

Run nbgrader's commands and the formgrader (`jupyter lab`) here: `nbgrader generate_feedback
--force`, `nbgrader export --to nbgrader-grades.csv` (plain `nbgrader export` would
overwrite grades.csv); feedback keeps hidden tests and kernel output out, as `grade` does.
"""

from pathlib import Path

from autograder.grader.nbgrader_settings import class_config

c = get_config()  # noqa: F821 (provided by nbgrader)
c.merge(class_config(Path(__file__).resolve().parent))
'''


@dataclass
class Options:
    jobs: int = 0
    limits: Limits = Limits()
    warm: bool = True
    verify: bool = True
    shard: tuple[int, int] | None = None
    source: Path = paths.SOLUTIONS_DIR
    sandbox: bool = True


def default_jobs() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def known_assignments(source: Path) -> list[str]:
    if not source.is_dir():
        return []
    return sorted(
        p.name
        for p in source.iterdir()
        if (p / f"{p.name}.py").is_file() or (p / f"{p.name}.ipynb").is_file()
    )


def _instructor_notebook(source: Path, assignment: str) -> str | None:
    text = source / assignment / f"{assignment}.py"
    if not text.is_file():
        return None
    import jupytext

    from autograder.build import instructor_notebook_text

    if source.resolve() == paths.SOLUTIONS_DIR.resolve():
        return instructor_notebook_text(assignment)
    nb = jupytext.read(text)
    nb.metadata.pop("jupytext", None)
    return jupytext.writes(nb, fmt="ipynb")


def source_files(source: Path, assignment: str) -> dict[str, bytes]:
    """The assignment's source step as nbgrader will see it: relative path -> bytes.

    The instructor notebook is generated from its jupytext twin when there is one.
    """
    folder = source / assignment
    files = {}
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not _ignored(d))
        for name in sorted(n for n in names if not _ignored(n)):
            path = Path(root) / name
            files[path.relative_to(folder).as_posix()] = path.read_bytes()
    text = _instructor_notebook(source, assignment)
    if text is not None:
        files[f"{assignment}.ipynb"] = text.encode()
    return files


def _ignored(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in IGNORED_FILES)


def grader_key(files: dict[str, bytes], options: Options) -> str:
    """What, besides the submission, decides its grade."""
    settings = {
        "version": CLASSROOM_VERSION,
        "cell_timeout": options.limits.cell_timeout_s,
        "budget": options.limits.notebook_budget_s,
        "verify": options.verify,
    }
    h = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    for name, data in sorted(files.items()):
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    h.update(files_digest(paths.grading_code()).encode())
    return h.hexdigest()


def build_template(root: Path, sources: dict[str, dict[str, bytes]]) -> Path:
    """An nbgrader course with every assignment generated: what workers copy."""
    from autograder.grader.nbgrader_run import NbgraderRun

    run = NbgraderRun(root)
    for assignment, files in sorted(sources.items()):
        for name, data in files.items():
            target = run.root / "source" / assignment / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        run.generate(assignment)
    return run.root


def cached_template(out: Path, sources: dict[str, dict[str, bytes]], keys: dict[str, str]) -> Path:
    """The template course for these sources, built once and kept in ``out/.cache``."""
    digest = hashlib.sha256(json.dumps(keys, sort_keys=True).encode()).hexdigest()[:16]
    cache = out / ".cache"
    target = cache / f"template-{digest}"
    if (target / ".complete").is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(dir=cache, prefix=".building-"))
    build_template(building, sources)
    (building / ".complete").touch()
    for old in cache.glob("template-*"):
        shutil.rmtree(old, ignore_errors=True)
    os.replace(building, target)
    return target


class ClassFolder:
    """The output folder: gradebook, manifest, results; only the parent process writes here."""

    def __init__(self, out: Path):
        self.out = out
        self.results = out / "results"
        self.manifest_path = out / "manifest.json"
        self.manifest = read_json(self.manifest_path) or {"version": 1, "submissions": {}}

    def result_path(self, job: Job) -> Path:
        return self.results / job.assignment / f"{job.student}.json"

    def save_manifest(self) -> None:
        write_json(self.manifest_path, self.manifest)

    def setup(self, template: Path, assignments: list[str]) -> None:
        from autograder.grader.gradebook import copy_assignment, open_gradebook

        self.out.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(self.out)
        with (
            open_gradebook(template / "gradebook.db") as src,
            open_gradebook(self.out / "gradebook.db") as dst,
        ):
            for assignment in assignments:
                copy_assignment(src, dst, assignment)
        for step in ("source", "release"):
            for assignment in assignments:
                target = self.out / step / assignment
                shutil.rmtree(target, ignore_errors=True)
                shutil.copytree(template / step / assignment, target)
        write_atomic(self.out / "nbgrader_config.py", CONFIG_FILE)

    def record(self, job: Job, result: dict) -> None:
        """Bring the gradebook in line with one result, then note it in the manifest."""
        from autograder.grader.gradebook import forget, import_result, open_gradebook

        with _uninterrupted():
            entry = self.manifest["submissions"].get(job.id, {})
            if entry.get("imported") != result["key"] or entry.get("status") != result["status"]:
                with open_gradebook(self.out / "gradebook.db") as gb:
                    if result["status"] == "graded":
                        import_result(gb, result)
                    else:
                        forget(gb, job.assignment, job.student)
            self.manifest["submissions"][job.id] = {
                "key": result["key"],
                "status": result["status"],
                "imported": result["key"],
                "result": str(self.result_path(job).relative_to(self.out)),
            }
            self.save_manifest()


@contextlib.contextmanager
def _uninterrupted():
    """Hold Ctrl+C and SIGTERM until the block ends, then raise ``KeyboardInterrupt``.

    A gradebook write and its manifest line are one step: an interrupt that landed inside
    SQLAlchemy's commit became its ``ResourceClosedError`` on the way out, so ``grade`` exited 1
    with a traceback instead of 130 with "interrupted" (seen once in a suite run).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    hold = {s: signal.signal(s, lambda signum, frame: held.append(signum)) for s in _STOPS}
    try:
        yield
    finally:
        for stop, handler in hold.items():
            signal.signal(stop, handler)
        if held:
            raise KeyboardInterrupt


_STOPS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def _locked(out: Path):
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".grading.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SystemExit(f"error: another grading run is using {out}") from None
        yield


def _lost_result(job: Job, why: str, retry: bool = True) -> dict:
    return {
        "version": 1,
        "student": printable(job.student),  # a refused id, made inert for grades.csv
        "assignment": job.assignment,
        "key": job.key,
        "sha256": job.sha256,
        "status": "error",
        "error": why,
        "retry": retry,
        "notes": [],
        "flags": [],
        "notebooks": [],
    }


def grade_class(submissions: Path, out: Path, options: Options, echo=print) -> int:
    """Grade every submission; return the exit status (0 only if all were graded)."""
    from autograder.classroom.summary import Summary

    started = time.monotonic()
    assignments = known_assignments(options.source)
    if not submissions.is_dir():
        echo(f"error: {submissions} is not a folder")
        return EXIT_ERRORS
    if out == submissions or submissions in out.parents:
        echo(f"error: the output folder {out} must not be inside {submissions}")
        return EXIT_ERRORS
    jobs, ignored = discover(submissions, assignments, options.shard)
    iso = claim_uids(detect(allow_bwrap=options.sandbox))
    jobs_n = min(options.jobs or default_jobs(), UID_BLOCK)
    limits = options.limits
    if limits.threads == 0:
        limits = Limits(**{**asdict(limits), "threads": max(1, default_jobs() // jobs_n)})
    summary = Summary(out, iso, limits, jobs_n, options.warm and iso.sandboxed, echo)
    summary.ignored = ignored
    with _locked(out), tempfile.TemporaryDirectory(prefix="mha-grade-") as tmp:
        scratch = Path(tmp)
        os.chmod(scratch, 0o711)
        involved = sorted({j.assignment for j in jobs})
        folder = ClassFolder(out)
        if not involved:
            summary.finish(folder, [], time.monotonic() - started)
            return EXIT_OK if not jobs else EXIT_ERRORS
        fonts = _font_cache_in_background(out / ".cache" / "fonts")
        sources = {a: source_files(options.source, a) for a in involved}
        keys = {a: grader_key(sources[a], options) for a in involved}
        template = None
        if any(folder.manifest.get("assignments", {}).get(a) != keys[a] for a in involved):
            template = cached_template(out, sources, keys)
            folder.setup(template, involved)
            folder.manifest.setdefault("assignments", {}).update(keys)
            folder.save_manifest()
        todo = []
        for job in jobs:
            if job.refused:  # a link: its reason, never what it points at
                job.sha256 = hashlib.sha256(job.refused.encode()).hexdigest()
            else:
                job.sha256 = folder_digest(Path(job.folder))
            job.key = hashlib.sha256((job.sha256 + keys[job.assignment]).encode()).hexdigest()
            result = read_json(folder.result_path(job))
            if result and result.get("key") == job.key and not result.get("retry"):
                folder.record(job, result)
                summary.skipped += 1
            elif job.refused:
                result = _lost_result(job, job.refused, retry=False)
                write_json(folder.result_path(job), result)
                folder.record(job, result)
            else:
                todo.append(job)
        summary.todo = len(todo)
        if todo:
            template = template or cached_template(out, sources, keys)
            fonts_dir = fonts.result()
            _run_pool(
                todo, folder, scratch, template, fonts_dir, iso, limits, options, jobs_n, summary
            )
        from autograder.classroom.identical import flag_identical

        results = [r for r in (read_json(folder.result_path(j)) for j in jobs) if r]
        summary.identical = flag_identical(out, jobs, results)
        return summary.finish(folder, results, time.monotonic() - started)


def _font_cache_in_background(folder: Path):
    """matplotlib's font list (:func:`shared_font_cache`, else built once per output folder),
    while the template is made."""
    from concurrent.futures import ThreadPoolExecutor

    def fonts() -> Path | None:
        if any(folder.glob("fontlist*.json")):
            return folder
        return shared_font_cache() or prepare_font_cache(folder)

    executor = ThreadPoolExecutor(max_workers=1)
    future = executor.submit(fonts)
    executor.shutdown(wait=False)
    return future


def _run_pool(todo, folder, scratch, template, fonts, iso, limits, options, jobs_n, summary):
    from autograder.classroom.pool import Pool
    from autograder.grader import kernel_package
    from autograder.grader.kernels import warm_modules
    from autograder.grader.run_config import RunConfig

    modules, packages = [], {}
    for assignment in sorted({j.assignment for j in todo}):
        for nb in sorted((template / "source" / assignment).glob("*.ipynb")):
            modules += [m for m in warm_modules(nb) if m not in modules]
            if options.verify:
                package = kernel_package.build(folder.out / ".cache", nb.read_text())
                packages[assignment] = str(package.resolve())
    todo = sorted(todo, key=lambda j: (j.assignment, j.student))  # few package switches
    cfg = RunConfig(
        out=str(folder.out.resolve()),
        scratch=str(scratch),
        template=str(template),
        isolation=iso.to_json(),
        limits=limits.to_json(),
        warm=options.warm,
        verify=options.verify,
        font_cache=str(fonts) if fonts else None,
        modules=modules,
        packages=packages,
    )
    config_path = scratch / "run.json"
    config_path.write_text(json.dumps(asdict(cfg)))
    logs = folder.out / "logs"
    logs.mkdir(exist_ok=True)
    by_id = {j.id: j for j in todo}
    notebooks = {
        a: max(1, len(list((template / "release" / a).glob("*.ipynb"))))
        for a in {j.assignment for j in todo}
    }

    def hard_limit(job: dict) -> float:
        return limits.notebook_budget_s * notebooks[job["assignment"]] + HARD_LIMIT_MARGIN_S

    def done(job: dict, reply: dict) -> None:
        result = read_json(Path(reply["result"])) or _lost_result(
            by_id[job["id"]], "the worker reported a result file that cannot be read"
        )
        folder.record(by_id[job["id"]], result)
        summary.progress(result)

    def lost(job: dict, why: str) -> None:
        result = _lost_result(by_id[job["id"]], why)
        write_json(folder.result_path(by_id[job["id"]]), result)
        folder.record(by_id[job["id"]], result)
        summary.progress(result)

    pool = Pool(min(jobs_n, len(todo)), config_path, logs, hard_limit)
    summary.start_progress(len(todo))
    try:
        pool.run([asdict(j) for j in todo], done, lost)
    finally:
        summary.stop_progress()


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main_grade(args) -> int:
    limits = Limits(
        cell_timeout_s=args.cell_timeout,
        notebook_budget_s=args.budget,
        address_space=args.memory_gb * 1024**3,
        threads=0,
    )
    shard = None
    if args.shard:
        index, count = (int(x) for x in args.shard.split("/"))
        if not 0 <= index < count:
            print("error: --shard K/N needs 0 <= K < N", file=sys.stderr)
            return EXIT_ERRORS
        shard = (index, count)
    options = Options(
        jobs=args.jobs or 0,
        limits=limits,
        warm=not args.cold,
        verify=not args.no_verify,
        shard=shard,
        source=Path(args.source).resolve() if args.source else paths.SOLUTIONS_DIR,
        sandbox=not args.no_sandbox,
    )
    from autograder.classroom.pool import PoolError
    from autograder.grader.gradebook import MergeError
    from autograder.grader.nbgrader_run import NbgraderError

    signal.signal(signal.SIGTERM, _interrupt)  # job runners stop jobs with SIGTERM
    try:
        return grade_class(Path(args.submissions).resolve(), Path(args.out).resolve(), options)
    except (NbgraderError, MergeError, PoolError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_ERRORS
    except KeyboardInterrupt:
        print(
            "interrupted: finished submissions are kept; run the same command to resume",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
