"""`make test-compat TORCH=X`: the course on another PyTorch release, in a venv of its own.

    python tests/compat.py 2.15.0 [--venv DIR]

The venv (default ``/tmp/venv-torch-X``, outside the tree; made when missing) gets torch X from
the registry (a CUDA build: several GB; it runs on the CPU) and the other pins of
requirements.txt, torch's own triton instead of ours, and a ``.pth`` naming the repository, so
the tree is tested as it stands. Then, each step reported in one line and the whole as a block to
paste into README.md ("Which PyTorch"):

1. the fast tier (``pytest -m "not slow"``);
2. ``check`` of notebook 01's instructor notebook (a copy: nothing is written beside the source);
3. ``grade`` of every notebook's instructor answers in its release notebook (the classroom path:
   sandbox, recorder, the operator allow-lists, the replay on new inputs);
4. the outside-the-repository test (``tests/test_outside_repo.py``) on this torch.

Exit status 0 only if every step passed. A machine whose pip configuration caps torch (this
course's build machine does) needs ``PIP_CONFIG_FILE=/dev/null`` for step 0.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import tomllib

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from autograder import paths  # noqa: E402


def make_venv(venv: Path, torch: str) -> None:
    if not (venv / "bin" / "python").exists():
        _install(venv, torch)
    # The repository itself, as `pip install -e .` would give it (the outside-the-repository
    # test leaves every .pth out of its runtime): kernels, sandboxed ones too, import it.
    purelib = _run(venv, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    Path(purelib.stdout.strip(), "mha_course_repository.pth").write_text(f"{REPO}\n")


def _install(venv: Path, torch: str) -> None:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pins = [
        line
        for line in (REPO / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith(("#", "torch", "triton"))
    ]
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    build = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]
    subprocess.run([*pip, f"torch=={torch}", *pins, *build], check=True)  # the wheel's too


def _env(venv: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONPATH", None)
    return env


def _run(venv: Path, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(venv / "bin" / "python"), *args],
        cwd=cwd,
        env=_env(venv),
        capture_output=True,
        text=True,
        check=False,
    )


def _summary(pytest_output: str) -> str:
    lines = [line for line in pytest_output.splitlines() if re.search(r"\d+ (passed|failed)", line)]
    return lines[-1].strip("= ") if lines else "no summary"


def fast_tier(venv: Path) -> tuple[bool, str]:
    done = _run(venv, "-m", "pytest", "-m", "not slow", "-q", "-p", "no:cacheprovider")
    failed = re.findall(r"^FAILED (\S+)", done.stdout, re.M)
    return done.returncode == 0, _summary(done.stdout) + "".join(f"\n    {f}" for f in failed)


def check_one(venv: Path, tmp: Path) -> tuple[bool, str]:
    nb_id = paths.notebook_ids()[0]
    copy = tmp / f"{nb_id}.ipynb"
    copy.write_bytes(paths.solution_notebook(nb_id).read_bytes())
    done = _run(venv, "-m", "autograder", "check", str(copy), "--json", cwd=tmp)
    try:
        result = json.loads(done.stdout)
    except json.JSONDecodeError:
        return False, f"check {nb_id}: no result ({done.stderr.strip()[-300:]})"
    line = f"check {nb_id}: {result.get('score', 0):g}/{result.get('max_score', 0):g}"
    return done.returncode == 0, line


def grade_all(venv: Path, tmp: Path) -> tuple[bool, str]:
    from hostile import filled

    subs = tmp / "submitted"
    for nb_id in paths.notebook_ids():
        release = nbformat.read(paths.release_notebook(nb_id), as_version=4)
        solution = nbformat.read(paths.solution_notebook(nb_id), as_version=4)
        folder = subs / "answers" / nb_id
        folder.mkdir(parents=True)
        nbformat.write(filled(release, solution), folder / f"{nb_id}.ipynb")
    out = tmp / "graded"
    done = _run(venv, "-m", "autograder", "grade", str(subs), "--out", str(out), cwd=tmp)
    results = [json.loads(p.read_text()) for p in sorted(out.glob("grader/results/*/answers.json"))]
    lines, full = [], 0
    for r in results:
        cells = [c for nb in r.get("notebooks", []) for c in nb["cells"]]
        lost = [f"{c['grade_id']} ({c.get('check')})" for c in cells if c["score"] < c["max_score"]]
        full += bool(cells) and not lost and r["status"] == "graded"
        if lost or r["status"] != "graded":
            lines.append(f"    {r['assignment']}: {r['status']} {r.get('error') or ''} {lost}")
    head = f"grade of the instructor answers: {full}/{len(results)} notebooks at full marks"
    head += " (auto-graded cells)"
    if not results:
        lines.append(f"    no results: {done.stderr.strip()[-400:]}")
    ok = full == len(results) == len(paths.notebook_ids())
    return ok, "\n".join([head, *lines])


def outside(venv: Path) -> tuple[bool, str]:
    done = _run(venv, "-m", "pytest", "tests/test_outside_repo.py", "-q", "-p", "no:cacheprovider")
    why = re.findall(r"^((?:FAILED|ERROR) \S+.*|E .*)$", done.stdout, re.M)[:6]
    return done.returncode == 0, "outside the repository: " + "\n    ".join(
        [_summary(done.stdout), *why]
    )


STEPS = ["fast", "check", "grade", "outside"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("torch", help="a torch release, e.g. 2.15.0")
    p.add_argument("--venv", help="where its venv is (default /tmp/venv-torch-TORCH)")
    p.add_argument(
        "--only", action="append", choices=STEPS, help="run only this step (again: more)"
    )
    args = p.parse_args(argv)
    venv = Path(args.venv or f"/tmp/venv-torch-{args.torch}")
    make_venv(venv, args.torch)
    version = _run(
        venv, "-c", "import torch, sys; print(torch.__version__, sys.version.split()[0])"
    )
    torch_version, python = version.stdout.split()
    print(f"torch {torch_version}, Python {python}, {datetime.date.today()}", flush=True)
    ok = True
    with tempfile.TemporaryDirectory(prefix="mha-compat-") as tmp:
        steps = {
            "fast": lambda: fast_tier(venv),
            "check": lambda: check_one(venv, Path(tmp)),
            "grade": lambda: grade_all(venv, Path(tmp)),
            "outside": lambda: outside(venv),
        }
        for name in args.only or STEPS:
            passed, line = steps[name]()
            ok &= passed
            print(f"  {'ok' if passed else 'FAILED'}  {line}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
