"""Benchmark: ``python -m autograder grade --jobs N`` against serial ``nbgrader autograde``.

``python -m autograder.bench.grading [--n 100] [--jobs 2] [--quick] [--attack]`` generates N
submissions of one notebook (correct, wrong, unfinished and noisy ones, whole notebooks as
learners hand them in), grades them both ways at equal isolation (every baseline kernel runs
through the same sandboxed kernelspec, with the same limits) and prints both wall times and their
ratio. The baseline times ``nbgrader autograde`` alone; ``grade`` is timed whole (templates,
feedback, out-of-kernel verification, CSV included). Both must agree on every score.

``--attack`` makes one submission in the middle of the class hostile: its ``softmax`` is
PyTorch's own, hidden from the kernel's recorder, after work meant to swamp the grader (once,
while its call is recorded: two 4096³ matrix products and 1 GiB of zeros). The others must
still agree with the baseline, and the attacker must not score on its softmax cells.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from autograder import nbcell
from autograder.grader.isolation import (
    Limits,
    claim_uids,
    describe,
    detect,
    kernel_uid,
    prepare_font_cache,
)
from autograder.grader.launch import prepare_runtime, write_kernelspec

NOTEBOOK = "01_attention_from_scratch"
MIX = ("correct", "wrong", "correct", "correct", "stub", "correct", "noisy", "correct", "wrong")
BASELINE_CONFIG = """from pathlib import Path

from autograder.grader.launch import sandbox_settings
from autograder.grader.nbgrader_settings import scratch_config

c = get_config()  # noqa: F821
c.merge(scratch_config(Path(__file__).resolve().parent))
sandbox_settings(c, Path({runtime!r}), {uid!r})
c.Execute.timeout = {timeout}
"""


HEAVY_SOFTMAX = """import torch
from torch.utils._python_dispatch import _disable_current_modes

_heavy = [True]


def softmax(x, dim=-1):
    extra = 0
    if _heavy.pop() if _heavy else False:  # once: 1 GiB and two 4096^3 products, recorded
        big = torch.zeros(2**27, dtype=torch.float64)
        a = torch.ones(4096, 4096) @ torch.ones(4096, 4096)
        extra = 0 * (big[0] + (a @ a)[0, 0])
    with _disable_current_modes():
        hidden = torch.softmax(x, dim)
    return hidden + extra
"""


def make_submissions(root: Path, n: int, notebook: str, attack: bool = False) -> dict[str, str]:
    """``n`` students' submissions of ``notebook``; returns student -> kind."""
    from autograder.build import instructor_notebook_text
    from autograder.grader.nbgrader_run import NbgraderRun

    solution = nbformat.reads(instructor_notebook_text(notebook), as_version=4)
    run = NbgraderRun(root / "release-build")
    (run.root / "source" / notebook).mkdir(parents=True)
    nbformat.write(solution, run.root / "source" / notebook / f"{notebook}.ipynb")
    run.generate(notebook)
    release = nbformat.read(run.root / "release" / notebook / f"{notebook}.ipynb", as_version=4)
    kinds = {}
    for i in range(n):
        kind = "attack" if attack and i == n // 2 else MIX[i % len(MIX)]
        student = f"student{i:03d}"
        nb = nbformat.from_dict(json.loads(json.dumps(release if kind == "stub" else solution)))
        for cell in nb.cells:
            meta = nbcell.meta(cell)
            if meta.get("solution") and kind == "wrong":
                name = meta["grade_id"]
                cell.source = f"def {name}(*args, **kwargs):\n    return args[0] * 0\n"
            if meta.get("solution") and kind == "noisy":
                cell.source += "\nimport sys\nprint('debugging', file=sys.stderr)\n"
            if meta.get("grade_id") == "softmax" and kind == "attack":
                cell.source = HEAVY_SOFTMAX
        folder = root / "submitted" / student / notebook
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{notebook}.ipynb")
        kinds[student] = kind
    shutil.rmtree(root / "release-build")
    return kinds


def run_baseline(root: Path, submitted: Path, notebook: str, limits: Limits) -> tuple[float, dict]:
    """Serial ``nbgrader autograde`` of every submission, each kernel in the same sandbox."""
    from autograder.build import instructor_notebook_text

    course = root / "baseline"
    (course / "source" / notebook).mkdir(parents=True)
    (course / "source" / notebook / f"{notebook}.ipynb").write_text(
        instructor_notebook_text(notebook), encoding="utf-8"
    )
    shutil.copytree(submitted, course / "submitted")
    iso = claim_uids(detect())
    uid = kernel_uid(iso, 0) if iso.switches_uid else None
    runtime = prepare_runtime(root / "baseline-runtime")
    fonts = prepare_font_cache(root / "fonts")
    write_kernelspec(root / "jupyter", iso, limits, uid, fonts)
    (course / "nbgrader_config.py").write_text(
        BASELINE_CONFIG.format(runtime=str(runtime), uid=uid, timeout=limits.cell_timeout_s)
    )
    env = dict(os.environ, JUPYTER_PATH=str(root / "jupyter"))
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")

    def nbgrader(command: str) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "nbgrader", command, notebook],
            cwd=course,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            raise SystemExit(f"baseline {command} failed: {done.stderr[-2000:]}")

    nbgrader("generate_assignment")
    start = time.monotonic()
    nbgrader("autograde")
    seconds = time.monotonic() - start
    from nbgrader.api import Gradebook

    scores = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for sub in gb.find_assignment(notebook).submissions:
            scores[sub.student.id] = float(sub.score)
    return seconds, scores


def run_grade(root: Path, submitted: Path, jobs: int, limits: Limits) -> tuple[float, dict, str]:
    out = root / "graded"
    start = time.monotonic()
    command = [sys.executable, "-m", "autograder", "grade", str(submitted), "--out", str(out)]
    command += ["--jobs", str(jobs), "--cell-timeout", str(limits.cell_timeout_s)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - start
    scores = {}
    for path in (out / "results").rglob("*.json"):
        result = json.loads(path.read_text())
        scores[result["student"]] = result.get("score")
    return seconds, scores, done.stdout


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m autograder.bench.grading", description=__doc__)
    p.add_argument("--n", type=int, default=100, help="submissions (default 100)")
    p.add_argument("--jobs", type=int, default=2, help="workers for grade (default 2)")
    p.add_argument("--quick", action="store_true", help="2 submissions: a smoke test")
    p.add_argument("--notebook", default=NOTEBOOK)
    p.add_argument("--keep", help="keep the generated folders here")
    p.add_argument("--report", help="write the numbers as JSON here")
    p.add_argument("--attack", action="store_true", help="one hostile submission in the class")
    args = p.parse_args(argv)
    n = 2 if args.quick else args.n
    limits = Limits(cell_timeout_s=60)
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="mha-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        kinds = make_submissions(root, n, args.notebook, attack=args.attack)
        load_before = os.getloadavg()
        base_s, base_scores = run_baseline(root, root / "submitted", args.notebook, limits)
        ours_s, our_scores, summary = run_grade(root, root / "submitted", args.jobs, limits)
        load_after = os.getloadavg()
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    honest = [s for s, kind in kinds.items() if kind != "attack"]
    disagree = sorted(s for s in honest if base_scores.get(s) != our_scores.get(s))
    attackers = {s: our_scores.get(s) for s, kind in kinds.items() if kind == "attack"}
    report = {
        "submissions": n,
        "jobs": args.jobs,
        "cores": len(os.sched_getaffinity(0)),
        "baseline_s": round(base_s, 1),
        "grade_s": round(ours_s, 1),
        "ratio": round(base_s / ours_s, 2),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in load_after],
        "disagreements": disagree,
        "attackers": attackers,
        "isolation": describe(detect(), limits),
    }
    print(f"{n} submissions of {args.notebook} ({', '.join(sorted(set(kinds.values())))})")
    print(f"  serial nbgrader autograde, sandboxed kernels: {base_s:7.1f} s")
    print(f"  python -m autograder grade --jobs {args.jobs}:       {ours_s:7.1f} s")
    print(
        f"  ratio: {base_s / ours_s:.2f}x   (load average before {load_before[0]:.1f}, "
        f"after {load_after[0]:.1f}, {report['cores']} cores)"
    )
    for student, score in attackers.items():
        print(
            f"  the hostile submission ({student}) scored {score} (baseline nbgrader: "
            f"{base_scores.get(student)})"
        )
    if disagree:
        print(f"  scores differ for {len(disagree)}: {', '.join(disagree[:10])}")
        print(summary[-3000:])
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=1))
    return 1 if disagree else 0


if __name__ == "__main__":
    raise SystemExit(main())
