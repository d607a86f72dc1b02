"""Broken and hostile submissions of notebook 01, each with the outcome the grader must reach.

:func:`catalogue` builds them from the instructor notebook, trimmed to what a learner must keep
(set-up, answer and test cells; deleting demo cells is allowed), so the suite stays fast. Every
case says what it does and what must come out: a definite grade (with a reason when it is not
full marks) or an error that names the problem. ``control`` cases are the same wrong answers
without the attack: an attack must never score more than its control.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder import nbcell

SOFTMAX, SDPA = "softmax", "scaled_dot_product_attention"
FULL = 10.0

WRONG_SOFTMAX = '''def softmax(x, dim=-1):
    """Wrong on purpose: all zeros."""
    return torch.zeros_like(x)
'''
WRONG_SDPA = '''def scaled_dot_product_attention(q, k, v, mask=None):
    """Wrong on purpose: zeros of the right shapes."""
    out = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    weights = torch.zeros(*q.shape[:-1], k.shape[-2], dtype=q.dtype)
    return out, weights
'''
STUB_SOFTMAX = "def softmax(x, dim=-1):\n    raise NotImplementedError()\n"
STUB_SDPA = (
    "def scaled_dot_product_attention(q, k, v, mask=None):\n    raise NotImplementedError()\n"
)


@dataclass
class Expect:
    status: str = "graded"
    score: float | None = None  # exact score, when it is known
    score_in: tuple[float, ...] = ()  # one of these (depends on warm or cold kernels)
    at_most_control: str | None = None  # score <= that control case's score
    error: str | None = None  # substring of the error
    stopped: str | None = None  # substring of the reason the notebook stopped
    flag: str | None = None  # substring of one of the flags
    note: str | None = None  # substring of one of the notes
    refuted: bool = False  # at least one passed cell refuted outside the kernel
    needs_sandbox: bool = False  # only holds where bubblewrap works
    # The learner's own cell is outside the allow-list (processes, files): the tests after it
    # wait for a person, and ``score`` counts their points as that person's to award.
    withheld: bool = False


@dataclass
class Case:
    student: str
    what: str
    expect: Expect
    notebook: nbformat.NotebookNode | None = None
    raw: bytes | None = None
    filename: str = "01_attention_from_scratch.ipynb"
    extra: dict = field(default_factory=dict)


def filled(release, solution) -> nbformat.NotebookNode:
    """The release notebook with the instructor's answers typed in, as a learner would hand it in
    (no solution markers, no hidden tests)."""
    answers = {nbcell.grade_id(c): c.source for c in solution.cells if nbcell.is_answer(c)}
    nb = _copy(release)
    for cell in nb.cells:
        if nbcell.is_answer(cell) and nbcell.grade_id(cell) in answers:
            lines = answers[nbcell.grade_id(cell)].splitlines()
            cell.source = "\n".join(
                line
                for line in lines
                if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line
            )
    return nb


def minimal(nb) -> nbformat.NotebookNode:
    """Only the set-up, answer and test cells (a learner may delete demo and markdown cells)."""
    nb = _copy(nb)
    nb.cells = [c for c in nb.cells if nbcell.grade_id(c)]
    return nb


def _index(nb, grade_id: str) -> int:
    return next(i for i, c in enumerate(nb.cells) if nbcell.grade_id(c) == grade_id)


def _last_test_of(nb, function: str) -> str:
    ids = [nbcell.grade_id(c) for c in nb.cells if nbcell.is_test(c)]
    return [g for g in ids if g.startswith(f"test_{function}")][-1]


def set_answer(nb, grade_id: str, source: str):
    nb.cells[_index(nb, grade_id)].source = source
    return nb


def insert_after(nb, grade_id: str, source: str):
    nb.cells.insert(_index(nb, grade_id) + 1, nbformat.v4.new_code_cell(source))
    return nb


def _append(nb, *sources: str):
    nb.cells += [nbformat.v4.new_code_cell(source) for source in sources]
    return nb


def _copy(nb):
    return nbformat.from_dict(json.loads(json.dumps(nb)))


def wrong(nb):
    return set_answer(set_answer(_copy(nb), SOFTMAX, WRONG_SOFTMAX), SDPA, WRONG_SDPA)


def stub(nb):
    return set_answer(set_answer(_copy(nb), SOFTMAX, STUB_SOFTMAX), SDPA, STUB_SDPA)


LEAK_CANARY = """import os, sys
_found = []
_python = (sys.prefix, sys.base_prefix, "/usr", "/proc", "/sys", "/dev", "/etc")
for _top in {tops!r}:
    for _root, _dirs, _files in os.walk(_top):
        if _root.startswith(_python):
            _dirs[:] = []
            continue
        _found += [os.path.join(_root, f) for f in _files if f.endswith((".ipynb", ".db"))]
for _path in {files!r}:
    try:
        with open(_path, "rb") as _f:
            _f.read(16)
        _found.append(_path)
    except OSError:
        pass
if _found:  # something outside this submission was readable: lose every point, say what
    def softmax(x, dim=-1):
        raise RuntimeError("readable: " + "; ".join(_found[:5]))
    scaled_dot_product_attention = softmax
"""

WRITE_CANARY = """_wrote = []
for _path in {paths!r}:
    try:
        with open(_path, "w") as _f:
            _f.write("pwned")
        _wrote.append(_path)
    except OSError:
        pass
if _wrote:
    def softmax(x, dim=-1):
        raise RuntimeError("wrote: " + "; ".join(_wrote))
"""


def catalogue(solution, release, places: dict[str, str]) -> list[Case]:
    """Every case; ``places``: paths a submission must neither read nor write (absolute)."""
    nb = minimal(filled(release, solution))
    soft_test = _last_test_of(nb, SOFTMAX)
    check_names = sorted(
        {
            name.strip().rstrip(",")
            for c in nb.cells
            if nbcell.grade_id(c) == "setup"
            for name in c.source.split()
            if name.strip().rstrip(",").startswith("check_")
        }
    )
    cases = [
        Case("correct_1", "the instructor's answers", Expect(score=FULL)),
        Case(
            "correct_2",
            "the instructor's answers again (graded by another worker)",
            Expect(score=FULL),
        ),
        Case("stub", "the release notebook, nothing done", Expect(score=0)),
        Case("control_wrong", "wrong answers (zeros), no attack", Expect()),
        Case(
            "noisy",
            "correct answers that print to stderr and warn on every call",
            Expect(score=FULL),
            insert_after(
                _copy(nb),
                SDPA,
                "import sys, warnings\n_sm, _at = softmax, scaled_dot_product_attention\n"
                "def softmax(*a, **k):\n    print('debug', file=sys.stderr)\n"
                "    warnings.warn('careful')\n    return _sm(*a, **k)\n"
                "def scaled_dot_product_attention(*a, **k):\n"
                "    print('debug', file=sys.stderr)\n    return _at(*a, **k)\n",
            ),
        ),
        Case(
            "infinite_loop",
            "softmax never returns; every test that calls it times out",
            Expect(score=0, stopped="time budget"),
            # a loop that waits, as test_cli's endless loop: the grader stops it by the clock, as
            # one that spins, and a spinning one burnt a core through five 5-s waits (~20 CPU-s)
            set_answer(
                _copy(nb),
                SOFTMAX,
                "import time\ndef softmax(x, dim=-1):\n    while True:\n        time.sleep(0.05)\n",
            ),
        ),
        Case(
            "ignores_interrupt",
            "after the softmax tests, a loop that swallows KeyboardInterrupt",
            Expect(score=4, stopped="did not stop"),
            insert_after(
                _copy(nb),
                soft_test,
                "import time\nwhile True:\n    try:\n        time.sleep(0.1)\n"
                "    except KeyboardInterrupt:\n        pass\n",
            ),
        ),
        Case(
            "writes_into_its_sockets",
            "after the softmax tests, garbage written into every file descriptor it has",
            # the kernel's zmq sockets stop answering: the grader's sends and its heartbeat's
            # stop once waited for it forever (the worker hit its hard limit, 480 s)
            Expect(score=4),
            insert_after(
                _copy(nb),
                soft_test,
                "import os\nfor _fd in range(3, 256):\n    try:\n"
                "        os.write(_fd, b'garbage' * 100)\n    except OSError:\n        pass\n",
            ),
        ),
        Case(
            "memory_bomb",
            "allocates 20 GB in a cell of its own",
            Expect(score=FULL),
            insert_after(_copy(nb), SDPA, "_hog = bytearray(20 * 1024**3)\n"),
        ),
        Case(
            "fork_bomb",
            "forks until the process limit, in a cell of its own",
            Expect(),
            insert_after(_copy(nb), SDPA, "import os\nwhile True:\n    os.fork()\n"),
        ),
        Case(
            "os_exit",
            "os._exit(1) after the softmax tests",
            Expect(score=4, stopped="exited with status 1"),
            insert_after(_copy(nb), soft_test, "import os\nos._exit(1)\n"),
        ),
        Case(
            "segfault",
            "dereferences NULL with ctypes after the softmax tests",
            Expect(score=4, stopped="segmentation fault", flag="ctypes"),
            insert_after(_copy(nb), soft_test, "import ctypes\nctypes.string_at(0)\n"),
        ),
        Case(
            "sys_exit",
            "sys.exit(3) in a cell of its own (IPython turns it into an error)",
            Expect(score=FULL, flag="exits the kernel"),
            insert_after(_copy(nb), SDPA, "import sys\nsys.exit(3)\n"),
        ),
        Case(
            "huge_output",
            "after the tests: 10 MB printed in small pieces, then 24 MB in one piece",
            Expect(score=FULL, note="cut at the cap"),
            _append(
                _copy(nb),
                "for _i in range(10**5):\n    print('y' * 100)\n",
                "print('x' * (24 * 1024**2))\n",  # over the 16 MiB cap of a whole notebook
            ),
        ),
        Case(
            "kill_everything",
            "kill(-1, SIGKILL) after the softmax tests: kills the warm forkserver, and with it "
            "the kernel (a cold kernel is alone in its sandbox and survives)",
            Expect(score_in=(4, FULL)),
            insert_after(_copy(nb), soft_test, "import os, signal\nos.kill(-1, signal.SIGKILL)\n"),
        ),
        Case(
            "background_process",
            "leaves a detached process running after its notebook ends",
            Expect(score=FULL, flag="starts processes", withheld=True),
            insert_after(
                _copy(nb),
                SDPA,
                "import subprocess\nsubprocess.Popen(['sleep', '600'], start_new_session=True)\n",
            ),
        ),
        Case(
            "patched_allclose",
            "wrong answers, torch.allclose/isclose/equal patched to always agree",
            Expect(at_most_control="control_wrong", refuted=True, flag="patches torch.allclose"),
            insert_after(
                wrong(nb),
                SDPA,
                "torch.allclose = lambda *a, **k: True\n"
                "torch.isclose = lambda a, b, *r, **k: torch.ones_like(a, dtype=bool)\n"
                "torch.equal = lambda *a, **k: True\n",
            ),
        ),
        Case(
            "patched_check_names",
            "wrong answers, every check_* the tests call rebound to a no-op",
            Expect(at_most_control="control_wrong", refuted=True, flag="which the tests call"),
            insert_after(
                wrong(nb), SDPA, "".join(f"{n} = lambda *a, **k: None\n" for n in check_names)
            ),
        ),
        Case(
            "patched_checks_module",
            "wrong answers, the checks' own comparison and failure functions patched",
            Expect(at_most_control="control_wrong", refuted=True, flag="grading package"),
            insert_after(
                wrong(nb),
                SDPA,
                "import autograder.checks._core as _c\n"
                "import autograder.checks.nb01_attention as _a\n"
                "for _m in (_c, _a):\n    _m.close = lambda *a, **k: True\n"
                "    _m.fail = lambda *a, **k: None\n"
                "    _m.has_nan_or_inf = lambda *a, **k: False\n"
                "    _m.rows_sum_to_one = lambda *a, **k: True\n",
            ),
        ),
        Case(
            "fake_partial_credit",
            "unfinished answers that publish an execute_result of 100 before failing",
            Expect(score=0),
            set_answer(
                stub(nb),
                SOFTMAX,
                "def softmax(x, dim=-1):\n    get_ipython().displayhook(100)\n"
                "    raise NotImplementedError()\n",
            ),
        ),
        Case(
            "hidden_test_spy",
            "records every cell's source with an IPython hook and puts it in its error messages",
            Expect(score=0, flag="talks to the kernel"),
            insert_after(
                stub(nb),
                SDPA,
                "_seen = []\nget_ipython().events.register('pre_run_cell', "
                "lambda info: _seen.append(info.raw_cell))\n"
                "def softmax(x, dim=-1):\n    raise ValueError(' || '.join(_seen))\n"
                "scaled_dot_product_attention = softmax\n",
            ),
        ),
        Case(
            "reads_everything",
            "correct answers that sabotage themselves if any other notebook or gradebook is "
            "readable (solutions, other students, the output folder, the grader's courses)",
            Expect(score=FULL, needs_sandbox=True, flag="path outside", withheld=True),
            insert_after(
                _copy(nb),
                SDPA,
                LEAK_CANARY.format(
                    tops=["/", places["repo"], places["out"], places["submissions"], "/tmp"],
                    files=[
                        places["solution"],
                        places["other_student"],
                        places["out"] + "/gradebook.db",
                    ],
                ),
            ),
        ),
        Case(
            "writes_outside",
            "correct answers that sabotage themselves if they can write outside their folder",
            Expect(score=FULL, needs_sandbox=True, withheld=True),
            insert_after(
                _copy(nb),
                SDPA,
                WRITE_CANARY.format(
                    paths=[
                        places["out"] + "/pwned.txt",
                        places["submissions"] + "/pwned.txt",
                        places["other_student_dir"] + "/pwned.txt",
                        places["repo"] + "/pwned.txt",
                    ]
                ),
            ),
        ),
    ]
    tampered = stub(nb)
    for cell in tampered.cells:
        if nbcell.is_test(cell):
            cell.source = "pass"
    cases.append(
        Case(
            "tampered_tests",
            "unfinished answers, every test cell replaced by `pass`",
            Expect(score=0),
            tampered,
        )
    )
    deleted = _copy(nb)
    deleted.cells = [c for c in deleted.cells if not nbcell.is_test(c)]
    cases.append(
        Case(
            "deleted_tests",
            "correct answers, every test cell deleted",
            Expect(score=FULL, note="was deleted"),
            deleted,
        )
    )
    duplicated = _copy(nb)
    duplicated.cells = [
        d for c in duplicated.cells for d in ([c, _copy(c)] if nbcell.is_test(c) else [c])
    ]
    for i, cell in enumerate(duplicated.cells):
        cell.id = f"cell-{i}"
    cases.append(
        Case(
            "duplicated_tests",
            "correct answers, every test cell duplicated",
            Expect(score=FULL, note="appears 2 times"),
            duplicated,
        )
    )
    stripped = _copy(nb)
    for cell in stripped.cells:
        cell.metadata.pop("nbgrader", None)
    cases.append(
        Case(
            "stripped_metadata",
            "correct answers, all nbgrader metadata stripped",
            Expect(score=FULL, note="restored the grading metadata"),
            stripped,
        )
    )
    no_setup = _copy(nb)
    no_setup.cells = [c for c in no_setup.cells if nbcell.grade_id(c) != "setup"]
    cases.append(
        Case(
            "deleted_setup",
            "correct answers, the locked set-up cell deleted",
            Expect(score=FULL, note="put back"),
            no_setup,
        )
    )
    cases.append(
        Case(
            "renamed",
            "correct answers saved as `01_attention_from_scratch (1).ipynb`",
            Expect(score=FULL, note="graded"),
            _copy(nb),
            filename="01_attention_from_scratch (1).ipynb",
        )
    )
    text = nbformat.writes(nb)
    cases += [
        Case(
            "corrupt_json",
            "the file cut in half",
            Expect(status="error", error="not valid JSON"),
            raw=text[: len(text) // 2].encode(),
        ),
        Case("empty_file", "an empty file", Expect(status="error", error="is empty"), raw=b""),
        Case(
            "nbformat3",
            "a notebook in format 3",
            Expect(status="error", error="format 3"),
            raw=b'{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": []}',
        ),
        Case(
            "no_notebook",
            "a folder with only a README",
            Expect(status="error", error="no 01_attention_from_scratch.ipynb"),
            raw=b"see attached",
            filename="README.txt",
        ),
    ]
    for case in cases:
        if case.notebook is None and case.raw is None:
            source = {"stub": release, "control_wrong": wrong(nb)}.get(case.student, nb)
            case.notebook = _copy(source)
    return cases


def write_submissions(root: Path, cases: list[Case], assignment: str) -> None:
    for case in cases:
        folder = root / case.student / assignment
        folder.mkdir(parents=True, exist_ok=True)
        if case.raw is not None:
            (folder / case.filename).write_bytes(case.raw)
        else:
            nbformat.write(case.notebook, folder / case.filename)


def notebooks(workdir: Path, notebook_id: str = "01_attention_from_scratch"):
    """The instructor notebook (from its jupytext source) and its release, generated here."""
    from autograder.build import instructor_notebook_text
    from autograder.grader.nbgrader_run import NbgraderRun

    solution = nbformat.reads(instructor_notebook_text(notebook_id), as_version=4)
    run = NbgraderRun(workdir / "release-build")
    (run.root / "source" / notebook_id).mkdir(parents=True, exist_ok=True)
    nbformat.write(solution, run.root / "source" / notebook_id / f"{notebook_id}.ipynb")
    run.generate(notebook_id)
    release = nbformat.read(
        run.root / "release" / notebook_id / f"{notebook_id}.ipynb", as_version=4
    )
    return solution, release


# A target cell that grade scores automatically is a win; these are not. An unverified cell (its
# record cannot be replayed on new inputs) is withheld by grade for a person: 0 points.
NO_WIN = ("refuted", "withheld", "unverified")


def won_in_process(found: dict) -> dict:
    """The verdicts of ``found`` (grade id -> the in-process grader's verdict) that would score."""
    return {g: v for g, v in found.items() if v.status not in NO_WIN}


def won_in_class_run(class_run, attacks) -> dict:
    """(learner, grade id) -> (score, check, message) of each target cell of ``attacks`` that
    scored in the class run; each attack's submission must have been graded, every target in it."""
    won = {}
    for attack in attacks:
        result = class_run.results.get((attack.notebook, attack.learner))
        assert result is not None, (attack.learner, class_run.stdout[-3000:])
        assert result["status"] == "graded", result
        found = {c["grade_id"]: c for nb in result["notebooks"] for c in nb["cells"]}
        assert set(attack.targets) <= set(found), (attack.targets, sorted(found))
        won |= {
            (attack.learner, g): (found[g]["score"], found[g]["check"], found[g]["message"])
            for g in attack.targets
            if found[g]["score"] > 0 and found[g]["check"] != "withheld"
        }
    return won
