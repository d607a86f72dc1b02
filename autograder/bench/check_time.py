"""Benchmark: how long ``python -m autograder check`` takes a learner, notebook by notebook.

    python -m autograder.bench.check_time                # every notebook, 3 runs each
    python -m autograder.bench.check_time --runs 1 01    # one run of notebook 01
    python -m autograder.bench.check_time --quick        # notebook 01 once: a smoke test

Each run is the whole command as a learner types it, in a fresh process (Python start-up,
imports, nbgrader's throwaway course, the sandboxed kernel, every cell and hidden test), on a
copy of the instructor notebook, so every test runs to the end. The table reports each
notebook's median, minimum and maximum; ``--report`` also writes them as JSON.

The target is about 10 s on a quiet 2-core machine. Timings depend on the machine and its load:
this is a measurement to read, never a test to pass.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autograder import paths


def time_check(notebook_id: str) -> tuple[float, int]:
    """(Seconds, exit status) of one ``check`` of a copy of the instructor notebook."""
    with tempfile.TemporaryDirectory(prefix="mha-bench-check-") as tmp:
        copy = Path(tmp) / f"{notebook_id}.ipynb"
        shutil.copyfile(paths.solution_notebook(notebook_id), copy)
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "autograder", "check", str(copy)],
            capture_output=True,
            text=True,
            check=False,
        )
        return time.perf_counter() - started, done.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", help="notebook numbers or ids (default: all)")
    parser.add_argument("--runs", type=int, default=3, help="runs per notebook (default 3)")
    parser.add_argument("--quick", action="store_true", help="notebook 01, one run")
    parser.add_argument("--report", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    ids = paths.notebook_ids()
    if args.quick:
        chosen, runs = ids[:1], 1
    else:
        wanted = args.notebooks or ids
        chosen = [i for i in ids if any(i == w or i.startswith(w + "_") for w in wanted)]
        runs = max(1, args.runs)
    print(f"check, whole command, {runs} run(s) per notebook ({platform.node()})", flush=True)
    figures, ok = {}, True
    for nb_id in chosen:
        seconds = []
        for _ in range(runs):
            took, status = time_check(nb_id)
            ok &= status == 0  # the instructor notebook scores full marks
            seconds.append(took)
        figures[nb_id] = {
            "median_s": round(statistics.median(seconds), 1),
            "min_s": round(min(seconds), 1),
            "max_s": round(max(seconds), 1),
            "runs": runs,
        }
        f = figures[nb_id]
        print(f"{nb_id:<28} median {f['median_s']:5.1f} s  (min {f['min_s']}, max {f['max_s']})")
    if args.report:
        args.report.write_text(json.dumps(figures, indent=2))
    if not ok:
        print("a run did not score full marks: the figures are not of a whole check")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
