"""A term in miniature through nbgrader's own exchange, as distinct Unix users (issue 34).

An instructor and two learners get throw-away accounts (``useradd``; nbgrader names a learner
by ``pwd.getpwuid(os.getuid())``, so a bare uid will not do) and share a filesystem exchange the
way nbgrader documents it (a world-writable root; nbgrader makes the course's folders and their
modes). Every step runs as its user, with nbgrader's commands and ``python -m autograder grade``,
exactly as GUIDE.md §1-5 tells an instructor:

1. the instructor generates and releases one assignment;
2. ``ada`` fetches it, answers it and submits; ``bob`` fetches it and submits it untouched;
3. the instructor collects, grades, generates and releases feedback; both learners fetch it;
4. ``bob`` resubmits, late, with an answer; the instructor collects again (``--update``) and
   grades again, which grades only bob's new submission, then returns bob's new feedback.

The assignment is notebook 05 cut down to its set-up cell, one exercise (``attention_flops``,
a formula: its checks cost almost nothing), that exercise's test cell (visible and hidden
tests) and the written answer a person grades. The exchange moves files by name and the
gradebook keys grades by assignment and cell ids, so a notebook with more cells travels the same
way; grading the whole notebook twice would only cost the suite CPU.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest

from autograder import nbcell, paths
from autograder.build import instructor_notebook_text
from conftest import NO_IRI_GRAMMAR

ASSIGNMENT = "05_parallel_vs_sequential"
KEPT = ("setup", "attention_flops", "test_attention_flops_matches_flop_counter")
WRITTEN = "written_answer_parallel_heads"
TEST = "test_attention_flops_matches_flop_counter"
HIDDEN_CALL = "seed=1, thorough=True"  # a line of the test cell's hidden part
ANSWERS = {  # each learner's own written answer (the same bytes would be flagged as copied)
    "ada": "Parallel heads do the same FLOPs in six large products instead of 81 small ones.",
    "bob": "Batching the heads keeps the arithmetic and removes per-head launches.",
}


def tiny_instructor_notebook() -> nbformat.NotebookNode:
    """Notebook 05's instructor notebook with only :data:`KEPT` and the written answer."""
    nb = nbformat.reads(instructor_notebook_text(ASSIGNMENT), as_version=4)
    nb.cells = [c for c in nb.cells if nbcell.grade_id(c) in (*KEPT, WRITTEN)]
    assert len(nb.cells) == len(KEPT) + 1, [nbcell.grade_id(c) for c in nb.cells]
    return nb


def _solution_of(grade_id: str) -> str:
    cell = next(c for c in tiny_instructor_notebook().cells if nbcell.grade_id(c) == grade_id)
    return "\n".join(
        line
        for line in cell.source.splitlines()
        if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line
    )


def _world_runnable(path: Path) -> bool:
    """Whether any user may run ``path``: every folder on its resolved way is o+x."""
    real = path.resolve()
    return all(p.stat().st_mode & 0o001 for p in (real, *real.parents))


def user_python(root: Path) -> Path:
    """An interpreter the throw-away users can run, seeing the course's packages.

    CI's ``.venv`` is made from ``/usr/bin/python3``: that one. A ``.venv`` made from an
    interpreter in a private home (pyenv under ``/root``, mode 0700) cannot be run by them: they
    get that interpreter's own files, hard-linked (no copy) under ``root``, with a ``.pth`` naming
    ``.venv``'s site-packages and the repository, and an ``alembic`` command (nbgrader runs it by
    name to make a gradebook). The system's Python would not do: its patch release may differ,
    and this machine's 3.11.2 fails soupsieve, so nbconvert, so feedback.
    """
    if _world_runnable(Path(sys.executable)):
        return Path(sys.executable)
    base, copy = Path(sys.base_prefix), root / "python"
    for folder, dirs, files in os.walk(base):
        dirs[:] = [d for d in dirs if d not in ("site-packages", "test")]
        target = copy / Path(folder).relative_to(base)
        target.mkdir(parents=True, exist_ok=True)
        for name in files:
            src = Path(folder) / name
            if src.is_symlink():
                (target / name).symlink_to(os.readlink(src))
            else:
                try:
                    os.link(src, target / name)
                except OSError:  # another file system: a copy
                    shutil.copy2(src, target / name)
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = Path(next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()))
    (copy / "lib" / minor / "site-packages").mkdir()
    (copy / "lib" / minor / "site-packages" / "course.pth").write_text(
        f"{site}\n{paths.REPO_ROOT}\n"
    )
    python = copy / "bin" / minor
    alembic = copy / "bin" / "alembic"
    alembic.write_text(
        f"#!{python}\nimport sys\nfrom alembic.config import main\nsys.exit(main())\n"
    )
    alembic.chmod(0o755)
    return python


@dataclass
class User:
    name: str
    home: Path
    python: Path

    def run(self, *argv: str, cwd: Path | None = None, check: bool = True):
        """``argv`` as this user, with the course's Python first on PATH and only a user's
        environment (no root's HOME; on PYTHONPATH only the suite's :data:`NO_IRI_GRAMMAR`)."""
        env = {
            "PYTHONPATH": str(NO_IRI_GRAMMAR),
            "HOME": str(self.home),
            "USER": self.name,
            "LOGNAME": self.name,
            "PATH": f"{self.python.parent}:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            # nbconvert's templates and libpython, when python is user_python's link tree
            "JUPYTER_PATH": str(Path(sys.prefix) / "share" / "jupyter"),
            "LD_LIBRARY_PATH": str(self.python.parent.parent / "lib"),
        }
        done = subprocess.run(
            ["setpriv", f"--reuid={self.name}", f"--regid={self.name}", "--init-groups", *argv],
            cwd=cwd or self.home,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"{self.name}: {' '.join(map(str, argv))}\n{done.stdout}\n{done.stderr}"
            )
        return done


@dataclass
class ExchangeClass:
    root: Path
    exchange: Path
    instructor: User
    ada: User
    bob: User
    course: Path  # the instructor's course folder
    log: list[tuple[str, subprocess.CompletedProcess]] = field(default_factory=list)

    @property
    def graded(self) -> Path:
        return self.course / "graded"

    def nbgrader(self, user: User, *args: str, cwd: Path | None = None):
        done = user.run(user.python, "-m", "nbgrader", *args, cwd=cwd)
        self.log.append((f"{user.name}: nbgrader {' '.join(args)}", done))
        return done

    def grade(self) -> subprocess.CompletedProcess:
        """``grade`` on the grading machine (GUIDE §7: it runs learner code, so not in the
        instructor's server): here root, on the instructor's folders; graded/ is then handed
        to the instructor, as a copy back from a grading machine would be."""
        done = subprocess.run(
            [sys.executable, "-m", "autograder", "grade", "submitted", "--out", "graded",
             "--source", "solutions", "--jobs", "1"],
            cwd=self.course, capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        self.log.append(("root: grade", done))
        subprocess.run(["chown", "-R", f"{self.instructor.name}:", self.graded], check=True)
        return done

    def learner_notebook(self, user: User) -> Path:
        return user.home / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"

    def answer(self, user: User, who: str) -> None:
        """``user`` types the answer and a written answer into their fetched notebook."""
        script = (
            "import json, sys\n"
            "path, code, text = sys.argv[1:]\n"
            "nb = json.load(open(path))\n"
            "for cell in nb['cells']:\n"
            "    gid = cell['metadata'].get('nbgrader', {}).get('grade_id')\n"
            "    if gid == 'attention_flops': cell['source'] = code\n"
            f"    if gid == {WRITTEN!r}: cell['source'] = text\n"
            "json.dump(nb, open(path, 'w'))\n"
        )
        user.run(
            user.python, "-c", script, str(self.learner_notebook(user)),
            _solution_of("attention_flops"), ANSWERS[who],
        )  # fmt: skip

    def feedback_html(self, user: User) -> list[Path]:
        """The feedback files ``fetch_feedback`` put in ``user``'s assignment folder."""
        return sorted((user.home / ASSIGNMENT / "feedback").glob(f"*/{ASSIGNMENT}.html"))

    def return_feedback(self, *learners: User) -> None:
        """GUIDE §5: feedback regenerated in graded/, released, fetched by each learner."""
        self.nbgrader(self.instructor, "generate_feedback", "--force", ASSIGNMENT, cwd=self.graded)
        # graded/'s own config keeps an exchange inside graded/ (the formgrader wants one it
        # can write): the shared exchange is named on the command line, as GUIDE §5 says.
        exchange = f"--Exchange.root={self.exchange}"
        self.nbgrader(self.instructor, "release_feedback", ASSIGNMENT, exchange, cwd=self.graded)
        for learner in learners:
            self.nbgrader(learner, "fetch_feedback", ASSIGNMENT)


def _add_user(name: str, home: Path, python: Path) -> User:
    home.mkdir()
    subprocess.run(
        ["useradd", "--home-dir", str(home), "--no-create-home", "--user-group",
         "--shell", "/usr/sbin/nologin", name],
        check=True, capture_output=True,
    )  # fmt: skip
    shutil.chown(home, name, name)
    home.chmod(0o700)
    return User(name, home, python)


def _config(user: User, exchange: Path) -> None:
    """What a JupyterHub image puts in every account: the course and the shared exchange."""
    folder = user.home / ".jupyter"
    folder.mkdir()
    (folder / "nbgrader_config.py").write_text(
        "c = get_config()  # noqa: F821\n"
        'c.CourseDirectory.course_id = "mha-course"\n'
        f"c.Exchange.root = {str(exchange)!r}\n"
    )
    for path in (folder, folder / "nbgrader_config.py"):
        shutil.chown(path, user.name, user.name)


@contextmanager
def exchange_class():
    """Three throw-away accounts and an exchange in a fresh folder; removed afterwards."""
    if os.geteuid() != 0 or not shutil.which("useradd") or not shutil.which("setpriv"):
        why = "the exchange test makes Unix accounts: it needs root, useradd and setpriv"
        pytest.fail(f"{why} (CI runs as root)") if os.environ.get("CI") else pytest.skip(why)
    root = Path(tempfile.mkdtemp(prefix="mha-exchange-"))
    root.chmod(0o755)  # the users reach their homes and the exchange through it
    tag = secrets.token_hex(3)
    made: list[User] = []
    try:
        exchange = root / "exchange"
        exchange.mkdir()
        exchange.chmod(0o777)  # nbgrader's documented set-up: chmod ugo+rw on the root
        python = user_python(root)
        for role in ("teach", "ada", "bob"):
            made.append(_add_user(f"mha{role}{tag}", root / role, python))
            _config(made[-1], exchange)
        instructor, ada, bob = made
        course = instructor.home / "mha-course"
        yield ExchangeClass(root, exchange, instructor, ada, bob, course)
    finally:
        for user in made:  # every command of theirs has ended: grade stops its kernels
            subprocess.run(["userdel", user.name], capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)


def set_up_course(cls: ExchangeClass) -> None:
    """The instructor's course folder: the repository's nbgrader configuration, pointed at the
    shared exchange (GUIDE §1), and the assignment's instructor notebook in ``solutions/``."""
    cls.instructor.run("mkdir", "-p", str(cls.course / "solutions" / ASSIGNMENT))
    config = (paths.REPO_ROOT / "nbgrader_config.py").read_text()
    config += f"c.Exchange.root = {str(cls.exchange)!r}  # the shared exchange\n"
    script = "import sys; open(sys.argv[1], 'w').write(sys.argv[2])"
    cls.instructor.run(
        cls.instructor.python, "-c", script, str(cls.course / "nbgrader_config.py"), config
    )
    target = cls.course / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    cls.instructor.run(
        cls.instructor.python,
        "-c",
        script,
        str(target),
        nbformat.writes(tiny_instructor_notebook()),
    )


def results(cls: ExchangeClass) -> dict[str, dict]:
    """learner -> grade's result JSON for the assignment."""
    folder = cls.graded / "results" / ASSIGNMENT
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


@dataclass
class Term:
    cls: ExchangeClass
    first: subprocess.CompletedProcess  # the first grade
    second: subprocess.CompletedProcess  # the grade after bob's late resubmission
    first_results: dict[str, dict]
    second_results: dict[str, dict]
    feedback: dict[str, list[str]]  # learner -> the text of each feedback file they fetched


def run_term(cls: ExchangeClass) -> Term:
    """Steps 1-4 of the module docstring; every command must succeed but ``grade``, whose
    output the tests read."""
    set_up_course(cls)
    teach, ada, bob = cls.instructor, cls.ada, cls.bob
    cls.nbgrader(teach, "generate_assignment", ASSIGNMENT, cwd=cls.course)
    cls.nbgrader(teach, "release_assignment", ASSIGNMENT, cwd=cls.course)
    for learner in (ada, bob):
        cls.nbgrader(learner, "fetch_assignment", ASSIGNMENT)
    cls.answer(ada, "ada")
    for learner in (ada, bob):
        cls.nbgrader(learner, "submit", ASSIGNMENT)
    cls.nbgrader(teach, "collect", ASSIGNMENT, cwd=cls.course)
    first = cls.grade()
    first_results = results(cls)
    cls.return_feedback(ada, bob)
    feedback = {u.name: [p.read_text() for p in cls.feedback_html(u)] for u in (ada, bob)}
    cls.answer(bob, "bob")  # late: after the first grading
    cls.nbgrader(bob, "submit", ASSIGNMENT)
    cls.nbgrader(teach, "collect", "--update", ASSIGNMENT, cwd=cls.course)
    second = cls.grade()
    second_results = results(cls)
    cls.return_feedback(bob)
    feedback[f"{bob.name}-late"] = [p.read_text() for p in cls.feedback_html(bob)]
    return Term(cls, first, second, first_results, second_results, feedback)
