"""Run a command with CPU hogs beside it: ``python tests/under_load.py [--hogs 2] -- CMD ...``.

The suite must stay green on a busy machine (a CI runner shared with other jobs, a laptop that
compiles): this starts ``--hogs`` processes that each keep one core busy, runs the command, stops
the hogs, and exits with the command's status. For example, the slow tier beside two hogs:

    python tests/under_load.py --hogs 2 -- .venv/bin/python -m pytest -m slow
"""

from __future__ import annotations

import argparse
import multiprocessing
import subprocess
import sys
import time


def _spin() -> None:
    while True:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hogs", type=int, default=2, help="busy processes (default 2)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    hogs = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.hogs)]
    for hog in hogs:
        hog.start()
    began = time.monotonic()
    try:
        status = subprocess.call(command)
    finally:
        for hog in hogs:
            hog.terminate()
    print(
        f"under_load: {' '.join(command)} exited {status} after {time.monotonic() - began:.0f} s "
        f"beside {args.hogs} busy process(es)",
        file=sys.stderr,
    )
    return status


if __name__ == "__main__":
    sys.exit(main())
