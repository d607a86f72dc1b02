"""Classroom grading: the parts that need no kernel, then resume and cold kernels end to end."""

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

import background
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from autograder import nbcell, paths
from autograder.classroom.identical import flag_identical
from autograder.classroom.pool import Pool, next_job
from autograder.classroom.submissions import Job, discover, shard_of
from autograder.grader.execute import GradingExecute
from autograder.grader.feedback import ClassroomFeedback
from autograder.grader.files import folder_digest, read_json, write_atomic
from autograder.grader.gradebook import (
    MergeError,
    copy_assignment,
    export_csv,
    merge,
    open_gradebook,
    submission_record,
    write_submission,
)
from autograder.grader.isolation import Isolation, Limits, bwrap_argv, describe, kernel_env
from autograder.grader.launch import launch_argv
from autograder.grader.scan import (
    outside_the_list,
    scan_notebook,
    scan_source,
    withheld_tests,
)
from autograder.grader.structure import SubmissionError, prepare, restore_structure
from autograder.grader.worker import verdict
from autograder.kernel.zygote import _empty
from conftest import REPO, autograder, autograder_job, run

NB = "01_attention_from_scratch"


def _cell(source, grade_id, **meta):
    cell = new_code_cell(source)
    cell.id = grade_id
    cell.metadata["nbgrader"] = {"grade_id": grade_id, "schema_version": 3, **meta}
    return cell


def _release():
    return new_notebook(
        cells=[
            _cell("from x import check_f", "setup", locked=True, grade=False, solution=False),
            _cell("def f(x):\n    raise NotImplementedError()", "f", solution=True, grade=False),
            _cell("check_f(f)", "test_f", grade=True, locked=True, solution=False, points=1),
        ]
    )


# ----------------------------------------------------------------------------- structure


def test_stripped_metadata_is_restored_by_cell_id():
    nb = _release()
    for cell in nb.cells:
        cell.metadata.pop("nbgrader")
    notes = restore_structure(nb, _release())
    assert [c.metadata["nbgrader"]["grade_id"] for c in nb.cells] == ["setup", "f", "test_f"]
    assert sum("restored the grading metadata" in n for n in notes) == 3


def test_duplicates_keep_only_the_last_copy_graded():
    nb = _release()
    nb.cells.insert(2, nbformat.from_dict(json.loads(json.dumps(nb.cells[2]))))
    notes = restore_structure(nb, _release())
    graded = [c for c in nb.cells if "nbgrader" in c.metadata]
    assert [c.metadata["nbgrader"]["grade_id"] for c in graded] == ["setup", "f", "test_f"]
    assert nb.cells[3] is graded[-1] and any("appears 2 times" in n for n in notes)


def test_deleted_setup_cell_is_put_back_in_place():
    nb = _release()
    del nb.cells[0]
    notes = restore_structure(nb, _release())
    assert nb.cells[0].metadata["nbgrader"]["grade_id"] == "setup"
    assert notes == ["locked cell `setup` was deleted: put back"]


def test_answer_cell_missing_from_an_older_copy_is_put_back_unanswered():
    """A copy older than an exercise lacks its answer and test cells; nbgrader would put the test
    back after the answer cell and crash on its absence, so the unanswered cell returns first."""
    nb = _release()
    del nb.cells[1:]
    notes = restore_structure(nb, _release())
    assert [c.metadata["nbgrader"]["grade_id"] for c in nb.cells] == ["setup", "f"]
    assert "NotImplementedError" in nb.cells[1].source
    assert notes == [
        "answer cell `f` was missing (deleted, or the copy predates the exercise): put back "
        "unanswered",
        "test cell `test_f` was deleted: nbgrader puts it back",
    ]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "is empty"),
        (b'{"cells": [', "not valid JSON"),
        (b'{"nbformat": 3, "nbformat_minor": 0, "worksheets": []}', "format 3"),
    ],
)
def test_unreadable_notebooks_are_errors_with_a_reason(tmp_path, content, expected):
    release = tmp_path / "release.ipynb"
    nbformat.write(_release(), release)
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "a.ipynb").write_bytes(content)
    with pytest.raises(SubmissionError, match=expected):
        prepare(folder, {"a.ipynb": release}, tmp_path / "dest")


def test_renamed_notebook_is_graded_and_symlinks_are_not_copied(tmp_path):
    release = tmp_path / "release.ipynb"
    nbformat.write(_release(), release)
    folder = tmp_path / "sub"
    folder.mkdir()
    nbformat.write(_release(), folder / "a (1).ipynb")
    (folder / "secret").symlink_to("/etc/hostname")
    (folder / "data.txt").write_text("x")
    notes = prepare(folder, {"a.ipynb": release}, tmp_path / "dest")
    assert sorted(p.name for p in (tmp_path / "dest").iterdir()) == ["a.ipynb", "data.txt"]
    assert any("graded a (1).ipynb as a.ipynb" in n for n in notes)
    assert any("symbolic link secret" in n for n in notes)
    with pytest.raises(SubmissionError, match="no b.ipynb"):
        prepare(folder, {"b.ipynb": release}, tmp_path / "dest2")


# ----------------------------------------------------------------------------- scan


@pytest.mark.parametrize(
    ("source", "flag"),
    [
        ("torch.allclose = lambda *a, **k: True", "patches torch.allclose"),
        ("setattr(torch, 'equal', f)", "setattr"),
        ("import builtins", "imports builtins"),
        ("import autograder.checks._core as c", "grading package"),
        ("check_softmax_values = print", "which the tests call"),
        ("import sys\nsys.modules['torch'] = None", "sys.modules"),
        ("open('../other/x.ipynb')", "outside its folder"),
        ("import os\nos.environ['X']", "environment"),
        ("import subprocess", "starts processes"),
        ("import ctypes", "ctypes"),
        ("!cat ../../gradebook.db", "talks to the kernel"),
        ("get_ipython().events.register('pre_run_cell', print)", "talks to the kernel"),
    ],
)
def test_scan_flags_suspicious_patterns(source, flag):
    found = scan_source(source, {"check_softmax_values"})
    assert any(flag in f for f in found), found


@pytest.mark.parametrize(
    "source",
    [
        'getattr(f, "__globals__")',
        'vars(f)["__globals__"]',
        "f.__globals__['check'] = None",
        "x.__dict__",
        "f.__code__",
        "f.__closure__[0].cell_contents",
        "object.__subclasses__()",
        "__builtins__",
        "__import__('os')",
        "import importlib",
        "from importlib import import_module",
        "exec('x = 1')",
        "eval('1')",
        "compile('1', '', 'eval')",
        "import builtins as b\nb.exec('x')",
        "import torch\ntorch._C._set_grad_enabled(True)",
        "from torch import _C",
        "with torch._C.DisableTorchFunction():\n    pass",
        "from torch.utils._python_dispatch import _disable_current_modes",
        "torch.utils._python_dispatch._pop_mode()",
        "import torch.overrides",
        "import sys as s\ns.modules['torch']",
        "sys._getframe(1).f_globals",
        "import inspect\ninspect.currentframe()",
        "inspect.stack()",
        "import gc\ngc.get_objects()",
        "gc.get_referrers(f)",
        "try:\n    1 / 0\nexcept Exception as e:\n    e.__traceback__.tb_frame.f_back",
        "import autograder",
        "from autograder.checks import _core",
        "m = 'autograder.checks._core'",
        "torch.compile(f)",
        "import inspect\nprint(inspect.getsource(f))",
        "getattr(mha, name).weight",
        "@torch.jit.script\ndef f(x):\n    return x",
        "import threading",
        "from torch.autograd.graph import _engine_run_backward",
        "x.numpy()",
        "import pkgutil\npkgutil.resolve_name('torch.utils.flop_counter:FlopCounterMode')",
        "class T(torch.Tensor):\n    def __torch_function__(cls, *a):\n        pass",
        # the same class made by type() from a dict (found attacking the allow-list afterwards)
        "T = type('T', (torch.Tensor,), dict(__torch_function__=classmethod(lambda *a: 0)))",
        "T = type('T', (torch.Tensor,), {})",
    ],
)
def test_scan_finds_code_outside_the_allow_list(source):
    assert outside_the_list(source), source


@pytest.mark.parametrize(
    "source",
    [
        "model.eval()",
        "re.compile('x')",
        'for name in ("q_proj", "k_proj"):\n    getattr(mha, name).weight',
        "super().__init__()",
        "print(fn.__name__)",
        'def f():\n    """What the autograder checks: shapes."""',
        "class A(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self._cache = None\n\n    def forward(self, x):\n        return self._cache",
        "from functools import partial\nimport math\nf = partial(F.softmax, dim=-1)",
    ],
)
def test_the_allow_list_leaves_ordinary_code_alone(source):
    assert outside_the_list(source) == []


def _withholding_case():
    """Answers f, g, h; g calls a helper; tests of each. Returns (release, reference)."""
    cells = [
        _cell("from x import check_f, check_g, check_h", "setup", locked=True),
        _cell("def f(x):\n    raise NotImplementedError()", "f", solution=True),
        _cell("def g(x):\n    raise NotImplementedError()", "g", solution=True),
        _cell("def h(x):\n    raise NotImplementedError()", "h", solution=True),
        new_code_cell("import inspect\nprint(inspect.stack())"),  # the release's own demo
    ]
    tests = [
        _cell(f"check_{n}({n})", f"test_{n}", grade=True, locked=True, points=1) for n in "fgh"
    ]
    reference = new_notebook(cells=cells + tests)
    reference.cells[
        -1
    ].source += "\n### BEGIN HIDDEN TESTS\ncheck_h(h, seed=1)\n### END HIDDEN TESTS"
    return new_notebook(cells=cells + tests), reference


def test_tests_that_use_dynamic_code_are_withheld():
    """The test of f (getattr of __globals__) and of g (through a helper cell the learner added,
    which evaluates a string) are withheld; h's is not, nor the release's demo."""
    release, reference = _withholding_case()
    submitted = nbformat.from_dict(json.loads(json.dumps(release)))
    submitted.cells[1].source = 'def f(x):\n    return getattr(x, "__globals__")'
    submitted.cells[2].source = "def g(x):\n    return helper(x)"
    submitted.cells[3].source = "def h(x):\n    return x"
    submitted.cells.insert(4, new_code_cell("def helper(x):\n    return eval('x')"))
    withheld = withheld_tests(submitted, reference, release)
    assert withheld == {
        "test_f": "`f`, which reads attributes by name (getattr); names __globals__ in a string",
        "test_g": "`cell 5`, which evaluates code from a string (eval)",
    }
    assert withheld_tests(release, reference, release) == {}
    status, message, flag = verdict("test_f", "verified", None, False, withheld["test_f"])
    assert status == "withheld" and "may award the points" in message and "__globals__" in flag
    assert verdict("test_f", "refuted", "wrong", False, withheld["test_f"])[0] == "refuted"
    assert verdict("test_h", "verified", None, True, None) == (None, None, None)


def test_no_instructor_answer_trips_a_dynamic_feature():
    """Every solution's answer cells, and the solutions handed in as a learner would: no
    dynamic-feature flag, no withheld test, no flag at all."""
    from hostile import filled

    from autograder.build import instructor_notebook_text

    for nb_id in paths.notebook_ids():
        solution = nbformat.reads(instructor_notebook_text(nb_id), as_version=4)
        answers = [c for c in solution.cells if nbcell.is_answer(c) and c.cell_type == "code"]
        assert answers, nb_id
        flagged = {nbcell.grade_id(c): outside_the_list(c.source) for c in answers}
        assert not any(flagged.values()), (nb_id, flagged)
        release = nbformat.read(REPO / "course" / nb_id / f"{nb_id}.ipynb", as_version=4)
        handed_in = filled(release, solution)
        assert withheld_tests(handed_in, solution, release) == {}, nb_id
        names = {nbcell.grade_id(c) for c in handed_in.cells if nbcell.is_answer(c)}
        assert scan_notebook(handed_in, names) == [], nb_id


def test_scan_is_quiet_on_the_instructor_answers():
    if NB not in paths.notebook_ids():
        pytest.skip(f"{NB} is not in solutions/")
    from autograder.build import instructor_notebook_text

    nb = nbformat.reads(instructor_notebook_text(NB), as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"] for c in nb.cells if "nbgrader" in c.metadata}
    nb.cells = [c for c in nb.cells if nbcell.grade_id(c)]
    assert scan_notebook(nb, answers) == []


# ----------------------------------------------------------------------------- identical work


def test_identical_submissions_are_flagged_naming_the_others(tmp_path):
    """Same answers (whitespace aside) or same bytes: a flag naming the other learners in each
    result, rewritten only when it changes; untouched releases are alike and not flagged."""
    out = tmp_path / "out"
    (out / "release" / "hw").mkdir(parents=True)
    nbformat.write(_release(), out / "release" / "hw" / "a.ipynb")

    def answered(source):
        nb = _release()
        nb.cells[1].source = source
        return nbformat.writes(nb)

    files = {
        "ann": answered("def f(x):\n    return x + 1\n"),
        "bo": answered("def f(x):\n  return x  +  1"),
        "fay": answered("def f(x):\n    return x - 1\n"),
        "di": nbformat.writes(_release()),
        "ed": nbformat.writes(_release()).replace('"cells"', '"cells" '),
        "gus": '{"cells": [',
    }
    files["cy"], files["hal"] = files["ann"], files["gus"]
    jobs, results = [], []
    for student, text in files.items():
        (tmp_path / student).mkdir()
        (tmp_path / student / "a.ipynb").write_text(text)
        jobs.append(Job(f"hw/{student}", student, "hw", str(tmp_path / student)))
        results.append({"student": student, "assignment": "hw", "flags": ["cell 2: uses exec"]})
    lines = flag_identical(out, jobs, results)
    assert lines == [
        "hw: ann, bo, cy (the same answers, whitespace aside)",
        "hw: gus, hal (the same notebook bytes)",
    ]
    flags = {r["student"]: r["flags"] for r in results}
    assert flags["bo"][0] == (
        "identical to the submissions of ann, cy (the same answers, whitespace aside)"
    )
    assert flags["hal"] == [
        "identical to the submission of gus (the same notebook bytes)",
        flags["hal"][1],
    ]
    assert all(flags[s] == ["cell 2: uses exec"] for s in ("fay", "di", "ed"))
    written = {p.stem: p.stat().st_mtime_ns for p in (out / "results" / "hw").glob("*.json")}
    assert sorted(written) == ["ann", "bo", "cy", "gus", "hal"]
    assert read_json(out / "results" / "hw" / "ann.json")["flags"] == flags["ann"]
    assert flag_identical(out, jobs, results) == lines
    assert {
        p.stem: p.stat().st_mtime_ns for p in (out / "results" / "hw").glob("*.json")
    } == written


# ----------------------------------------------------------------------------- kernel outputs


def test_test_cells_keep_only_their_own_result():
    failing = _cell("check_f(f)", "test_f", grade=True, locked=True, points=2)
    failing.outputs = [
        new_output("execute_result", data={"text/plain": "100"}, execution_count=1),
        new_output("error", ename="AssertionError", evalue="wrong", traceback=[]),
    ]
    GradingExecute._keep_own_result(failing)
    assert [o.output_type for o in failing.outputs] == ["error"]
    partial = _cell("0.5", "test_g", grade=True, locked=True, points=2)
    partial.outputs = [
        new_output("execute_result", data={"text/plain": "100"}, execution_count=1),
        new_output("execute_result", data={"text/plain": "0.5"}, execution_count=1),
    ]
    GradingExecute._keep_own_result(partial)
    assert [o.data["text/plain"] for o in partial.outputs] == ["0.5"]


MIME = "application/vnd.mha-replay+json"  # what the grader's recordings were once published as
OUTPUT_FLOOD = [
    'raise ValueError("e" * 5_000_000)',
    "try:\n    1 / 0\nexcept ZeroDivisionError:\n    for _ in range(300):\n"
    "        get_ipython().showtraceback()\nraise KeyError('the last one')",
    'print("y" * 30_000)',
    *['print("z" * 15_000)'] * 5,
    "h = display('a', display_id=True)\nh.update('b' * 50_000)",
    "0.5",
    "from IPython.display import publish_display_data\n"
    f"publish_display_data({{{MIME!r}: 'r' * 100_000}})",
]


@pytest.mark.slow
def test_output_caps_hold_for_every_output_type_and_the_whole_notebook(tmp_path):
    """Errors are capped too (one notebook came out at 201 MB): each keeps its ename and a short
    value, a cell keeps one shortened error, the latest; a notebook keeps at most its cap in all;
    a learner cell publishing what looks like a grader's record is capped like any other."""
    from autograder.grader.execute import RunRecords
    from autograder.grader.nbgrader_run import kernel_stderr_silenced

    nb = new_notebook(cells=[new_code_cell(source) for source in OUTPUT_FLOOD])
    records = RunRecords()
    from traitlets.config import Config

    config = Config()
    config.SandboxKernelManager.runtime_base = str(tmp_path)  # each kernel's runtime folder
    ex = GradingExecute(
        output_limit=20_000,
        notebook_output_limit=60_000,
        verify=False,
        records=records,
        config=config,
    )
    with kernel_stderr_silenced():
        nb, _ = ex.preprocess(nb, {"nbgrader": {"notebook": "a"}})
    outputs = [c.outputs for c in nb.cells]
    notes = [
        [o.text for o in out if o.output_type == "stream" and "[output cut" in o.text]
        for out in outputs
    ]
    error = outputs[0][-1]
    assert (
        error.ename == "ValueError"
        and len(error.evalue) < 1000
        and "characters cut" in error.evalue
    )
    errors = [o for o in outputs[1] if o.output_type == "error"]
    assert errors[-1].ename == "KeyError" and len(errors) < 40
    assert "this cell's output passed 20000 bytes" in notes[2][0] and len(outputs[2]) == 1
    assert [bool(n) for n in notes[3:8]] == [False, False, True, True, True]
    assert "in all" in notes[7][0]
    assert outputs[8][0].data["text/plain"].startswith("[display update cut")
    assert outputs[9][-1].data["text/plain"] == "0.5"
    assert len(nbformat.writes(nb)) < 100_000
    assert not any(MIME in o.get("data", {}) for o in outputs[10])
    assert records["a"]["truncated"] == 7


def test_feedback_drops_outputs_and_redacts_hidden_tests():
    hidden = "check_f(f, seed=1, thorough=True)"
    test = _cell(
        f"check_f(f)\n### BEGIN HIDDEN TESTS\n{hidden}\n### END HIDDEN TESTS\n",
        "test_f",
        grade=True,
        locked=True,
        points=1,
    )
    test.outputs = [
        new_output("stream", name="stdout", text=f"spy: {hidden}"),
        new_output(
            "error",
            ename="ValueError",
            evalue=f"leak {hidden} " + "x" * 900,
            traceback=["long", "traceback"],
        ),
    ]
    own = new_code_cell("print(1)")
    own.outputs = [new_output("stream", name="stdout", text=hidden)]
    nb = new_notebook(cells=[new_markdown_cell("hi"), own, test])
    nb, _ = ClassroomFeedback().preprocess(nb, {})
    text = json.dumps(nb)
    assert hidden not in text and "BEGIN HIDDEN" not in text
    assert own.outputs == [] and len(test.outputs) == 1
    assert test.outputs[0].evalue.startswith("leak [hidden test]")
    assert len(test.outputs[0].evalue) <= 300


# ----------------------------------------------------------------------------- the pool


def test_a_worker_keeps_to_its_assignment_and_takes_the_largest_free_one():
    """Each switch of assignment restarts a worker's forkserver in a fresh sandbox: two workers
    over three assignments switch twice in all, not at every assignment boundary."""
    jobs = [
        {"id": f"{a}{i}", "assignment": a}
        for a, n in (("01", 3), ("02", 4), ("03", 1))
        for i in range(n)
    ]
    pending = deque(jobs)
    assert next_job(pending, "02", {"01"})["id"] == "020"  # its own, before the queue's head
    assert next_job(pending, "01", {"02"})["id"] == "010"
    assert next_job(pending, "04", {"01", "02"})["id"] == "030"  # the one no other worker holds
    assert next_job(pending, "03", {"01", "02"})["id"] == "021"  # the largest left, though held
    workers, order = {"a": "01", "b": "02"}, []
    while pending:
        for name in workers:
            if pending:
                job = next_job(pending, workers[name], {v for k, v in workers.items() if k != name})
                workers[name] = job["assignment"]
                order.append((name, job["id"]))
    assert [i for _, i in order] == ["011", "022", "012", "023"]
    assert sorted(j["id"] for j in jobs) == sorted(
        ["020", "010", "030", "021", *(i for _, i in order)]
    )


def test_a_worker_started_inside_a_learners_folder_imports_only_the_graders_code(
    tmp_path, monkeypatch
):
    """``grade`` run with the shell inside a submissions folder: a learner's own ``autograder``
    package there must not stand in for the grader's in the workers (they start with ``-P``)."""
    marker = tmp_path / "imported"
    planted = tmp_path / "learner" / "autograder"
    planted.mkdir(parents=True)
    (planted / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('planted')\n")
    monkeypatch.chdir(planted.parent)
    pool = Pool(1, tmp_path / "no-such-config.json", tmp_path, hard_limit_s=lambda job: 60)
    worker = pool._spawn(0)
    try:
        worker.process.wait(timeout=120)  # it stops at once: its configuration does not exist
    finally:
        pool.close()
    assert not marker.exists(), "the worker imported the learner's autograder package"
    assert "no-such-config.json" in (tmp_path / "worker-0.log").read_text()


# ----------------------------------------------------------------------------- files, layout


def test_atomic_writes_and_digests(tmp_path):
    target = tmp_path / "a" / "r.json"
    write_atomic(target, '{"x": 1}')
    assert read_json(target) == {"x": 1} and not list(target.parent.glob(".*tmp"))
    (tmp_path / "a" / "bad.json").write_text("{")
    assert read_json(tmp_path / "a" / "bad.json") is None
    before = folder_digest(tmp_path / "a")
    write_atomic(target, '{"x": 2}')
    assert folder_digest(tmp_path / "a") != before


def test_discover_and_shards_partition_the_class(tmp_path):
    for student in ("ann", "bo", "cy", "di", "ed"):
        (tmp_path / student / NB).mkdir(parents=True)
    (tmp_path / "ann" / "99_unknown").mkdir()
    (tmp_path / "notes.txt").write_text("x")
    jobs, ignored = discover(tmp_path, [NB])
    assert [j.student for j in jobs] == ["ann", "bo", "cy", "di", "ed"]
    assert sorted(ignored) == [
        "ann/99_unknown: not an assignment of the course",
        "notes.txt: not a student folder",
    ]
    shards = [{j.student for j in discover(tmp_path, [NB], (k, 3))[0]} for k in range(3)]
    assert set().union(*shards) == {j.student for j in jobs}
    assert sum(len(s) for s in shards) == len(jobs)
    assert all(shard_of(s, 3) == k for k, shard in enumerate(shards) for s in shard)


def test_links_under_the_submissions_root_are_refused_never_followed(tmp_path):
    """A linked learner folder, assignment folder or notebook is an error naming the link; the
    learners it points at are graded as usual."""
    for student in ("alice", "eve"):
        (tmp_path / student / NB).mkdir(parents=True)
        (tmp_path / student / NB / f"{NB}.ipynb").write_text("{}")
    (tmp_path / "bob").symlink_to("alice")
    (tmp_path / "carol").mkdir()
    (tmp_path / "carol" / NB).symlink_to(tmp_path / "alice" / NB)
    (tmp_path / "dave" / NB).mkdir(parents=True)
    (tmp_path / "dave" / NB / f"{NB}.ipynb").symlink_to(tmp_path / "eve" / NB / f"{NB}.ipynb")
    jobs = {j.student: j for j in discover(tmp_path, [NB])[0]}
    assert sorted(jobs) == ["alice", "bob", "carol", "dave", "eve"]
    assert not jobs["alice"].refused and not jobs["eve"].refused
    assert jobs["bob"].refused.startswith("bob is a symbolic link (to alice)")
    assert jobs["carol"].refused.startswith(f"carol/{NB} is a symbolic link")
    assert jobs["dave"].refused.startswith(f"dave/{NB}/{NB}.ipynb is a symbolic link")
    assert jobs["bob"].assignment == NB and jobs["bob"].folder == str(tmp_path / "bob")
    assert jobs["carol"].folder == str(tmp_path / "carol" / NB)  # not resolved to alice's


def test_zygote_cleanup_spares_the_grader_bind_mounts(tmp_path):
    runtime, inbox, work = tmp_path / "w" / "k", tmp_path / "w" / "inbox", tmp_path / "work"
    for d in (runtime, inbox, work / "s" / "a"):
        d.mkdir(parents=True)
    (runtime / "marker").touch()
    (inbox / "00000").touch()
    (work / "s" / "a" / "junk").touch()
    (tmp_path / "mpl").mkdir()
    (tmp_path / "stray").write_text("x")
    _empty(tmp_path, {"mpl"}, (runtime, inbox, work))
    _empty(work, protected=(runtime, inbox, work))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mpl", "w", "work"]
    assert (runtime / "marker").exists() and (inbox / "00000").exists()
    assert not list(work.iterdir())


# ----------------------------------------------------------------------------- isolation


def test_describe_says_what_holds_and_what_does_not():
    limits = Limits()
    full = describe(
        Isolation("/usr/bin/prlimit", "/usr/bin/bwrap", "/usr/bin/setpriv", True), limits
    )
    assert "no network" in full[1] and "unprivileged uids" in full[2]
    bare = describe(Isolation(None, None, None, False), limits)
    assert bare[0].startswith("NO resource limits") and bare[1].startswith("NO sandbox")
    assert "all of this user's processes" in bare[2]


def test_sandbox_command_hides_the_course_and_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "secret")
    iso = Isolation("/usr/bin/prlimit", "/usr/bin/bwrap", "/usr/bin/setpriv", True)
    env = kernel_env(Limits(), dict(os.environ))
    argv = bwrap_argv(
        iso,
        Limits(),
        rw_dirs=[str(tmp_path / "k")],
        workdir=str(tmp_path / "w"),
        workdir_files={"data.csv": str(tmp_path / "data.csv")},
        font_cache=None,
        uid=61000,
        env=env,
    )
    text = " ".join(argv)
    assert "--unshare-net" in argv and "--unshare-pid" in argv and "--clearenv" in argv
    assert "secret" not in text and str(paths.SOLUTIONS_DIR) not in text
    assert f"--ro-bind {tmp_path / 'data.csv'} {tmp_path / 'w' / 'data.csv'}" in text
    assert "--reuid=61000" in text


def test_launcher_refuses_a_runtime_folder_it_did_not_make(tmp_path):
    (tmp_path / "kernel.json").write_text("{}")
    spec = {"isolation": Isolation(None, None, None, False).to_json(), "limits": {}, "uid": None}
    with pytest.raises(SystemExit, match="refusing"):
        launch_argv(spec, ["python", "-f", str(tmp_path / "kernel.json")], tmp_path)


# ----------------------------------------------------------------------------- gradebooks


@pytest.fixture(scope="module")
def empty_db(tmp_path_factory) -> Path:
    """An empty gradebook, made once: creating one runs alembic, which takes seconds."""
    path = tmp_path_factory.mktemp("gradebooks") / "empty.db"
    with open_gradebook(path):
        pass
    return path


def _gradebook(empty: Path, path: Path, students: dict[str, float], points=(1.0, 2.0)) -> Path:
    shutil.copyfile(empty, path)
    with open_gradebook(path) as gb:
        gb.add_assignment("hw")
        gb.add_notebook("hw", "hw")
        for i, p in enumerate(points):
            gb.add_grade_cell(f"test_{i}", "hw", "hw", max_score=p, cell_type="code")
            gb.add_source_cell(
                f"test_{i}", "hw", "hw", cell_type="code", locked=True, source="pass", checksum="c"
            )
        for student, score in students.items():
            gb.add_student(student)
            gb.add_submission("hw", student)
            for grade in gb.find_submission("hw", student).notebooks[0].grades:
                grade.auto_score = min(score, grade.max_score)
                grade.needs_manual_grade = False
            gb.db.commit()
    return path


def test_merge_unions_shards_and_refuses_conflicts(tmp_path, empty_db):
    a = _gradebook(empty_db, tmp_path / "a.db", {"ann": 1.0, "bo": 0.0})
    b = _gradebook(empty_db, tmp_path / "b.db", {"cy": 2.0})
    shutil.copyfile(empty_db, tmp_path / "all.db")
    report = merge([a, b], tmp_path / "all.db")
    assert report["added"] == 3 and not report["conflicts"]
    again = merge([a, b], tmp_path / "all.db")
    assert again["same"] == 3 and again["added"] == 0
    clash = _gradebook(empty_db, tmp_path / "c.db", {"ann": 0.0})
    assert merge([clash], tmp_path / "all.db")["conflicts"] == [f"hw/ann ({clash})"]
    with open_gradebook(tmp_path / "all.db") as gb:
        assert {s.student.id: s.score for s in gb.find_assignment("hw").submissions} == {
            "ann": 2.0,
            "bo": 0.0,
            "cy": 3.0,
        }
    assert merge([clash], tmp_path / "all.db", replace=True)["replaced"] == 1
    other = _gradebook(empty_db, tmp_path / "d.db", {"ed": 1.0}, points=(5.0,))
    with pytest.raises(MergeError, match="different test cells"):
        merge([other], tmp_path / "all.db")


def test_manual_grades_and_comments_travel_with_a_merge(tmp_path, empty_db):
    a = _gradebook(empty_db, tmp_path / "a.db", {"ann": 1.0})
    with open_gradebook(a) as gb:
        grade = gb.find_submission("hw", "ann").notebooks[0].grades[0]
        grade.manual_score, grade.extra_credit = 0.5, 1.0
        gb.db.commit()
        record = submission_record(gb, "hw", "ann")
    shutil.copyfile(empty_db, tmp_path / "out.db")
    merge([a], tmp_path / "out.db")
    with open_gradebook(tmp_path / "out.db") as gb:
        assert submission_record(gb, "hw", "ann") == record
        copy_assignment(gb, gb, "hw")  # a gradebook agrees with itself
        write_submission(gb, "hw", "ann", record)
        assert submission_record(gb, "hw", "ann") == record


def test_grades_csv_neutralises_formulas_and_keeps_numbers(tmp_path, empty_db):
    """OWASP CSV injection: a text cell that starts with = + - @ (or tab, CR) gets a leading '."""
    evil = '=HYPERLINK("http://x","y")'
    db = _gradebook(empty_db, tmp_path / "g.db", {evil: 2.0, "ann": 1.0})
    graded = {"assignment": "hw", "status": "graded", "notebooks": [], "notes": ["+1"]}
    results = [
        {**graded, "student": evil, "flags": ["@SUM(A1)", "-2"]},
        {**graded, "student": "ann", "flags": ["cell 3: uses exec"]},
        {"student": "\tbo", "assignment": "hw", "status": "error", "error": "\r=1+1"},
    ]
    export_csv(db, results, tmp_path / "g.csv")
    with open(tmp_path / "g.csv", newline="") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    assert sorted(rows) == ["'\tbo", "'" + evil, "ann"]
    assert rows["'" + evil]["flags"] == "'@SUM(A1); -2" and rows["ann"]["notes"] == "'+1"
    assert rows["'\tbo"]["error"] == "'\r=1+1"
    assert rows["'" + evil]["score"] == "3" and rows["ann"]["max_score"] == "3"
    assert rows["ann"]["flags"] == "cell 3: uses exec"


@pytest.mark.slow
def test_merge_command_writes_the_gradebook_and_a_csv(tmp_path, empty_db):
    a = _gradebook(empty_db, tmp_path / "a.db", {"ann": 1.0})
    b = _gradebook(empty_db, tmp_path / "b.db", {"bo": 3.0})
    done = autograder(
        "merge", str(a), str(b), "--out", str(tmp_path / "m.db"), "--csv", str(tmp_path / "m.csv")
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 added" in done.stdout
    with open(tmp_path / "m.csv", newline="") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    assert rows["ann"]["score"] == "2" and rows["bo"]["score"] == "3"
    missing = autograder("merge", str(tmp_path / "nope.db"), "--out", str(tmp_path / "m.db"))
    assert missing.returncode == 2 and "no such gradebook" in missing.stdout


@pytest.mark.slow
def test_grade_command_reports_a_missing_folder(tmp_path):
    done = autograder("grade", str(tmp_path / "nope"), "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and "is not a folder" in done.stdout


# ----------------------------------------------------------------------------- end to end


def _class(tmp_path: Path, students: dict[str, str]) -> Path:
    """Submissions of notebook 01: ``correct``, ``stub`` (release) or ``corrupt``."""
    from hostile import notebooks

    subs = tmp_path / "subs"
    solution, release = notebooks(tmp_path)
    for student, kind in students.items():
        folder = subs / student / NB
        folder.mkdir(parents=True)
        if kind == "corrupt":
            (folder / f"{NB}.ipynb").write_text('{"cells": [')
        else:
            nbformat.write(solution if kind == "correct" else release, folder / f"{NB}.ipynb")
    return subs


@pytest.fixture(scope="module")
def notebook_01():
    if NB not in paths.notebook_ids():
        pytest.skip(f"{NB} is not in solutions/")


def _graded_part(path: Path) -> dict:
    """A result but its flags: the end of a run adds ``identical to ...`` flags over the whole
    class (an interrupted run never gets there), which is not grading it again."""
    return {k: v for k, v in read_json(path).items() if k != "flags"}


RESUMED = {
    "a_correct": "correct",
    "b_stub": "stub",
    "c_corrupt": "corrupt",
    "d_correct": "correct",
    "f_correct": "correct",
}


def _interrupt_and_resume(stack) -> dict:
    """A ``grade`` run interrupted (Ctrl+C) after two results, then run again: what each left.
    A background job (a thread: it waits on the first run, then starts the second)."""
    tmp_path = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mha-resume-")))
    subs = _class(tmp_path, RESUMED)
    out = tmp_path / "out"
    command = [
        sys.executable,
        "-m",
        "autograder",
        "grade",
        str(subs),
        "--out",
        str(out),
        "--jobs",
        "1",
        "--cell-timeout",
        "20",
        "--budget",
        "60",
    ]
    env = dict(os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])
    first = subprocess.Popen(
        command,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # as typed in a terminal: a suite started as a shell's background job passes SIGINT on
        # ignored, and Python then never turns it into KeyboardInterrupt
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    results = out / "results" / NB
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(list(results.glob("*.json"))) < 2:
        time.sleep(0.5)
    first.send_signal(signal.SIGINT)
    stdout, stderr = first.communicate(timeout=120)
    done_before = {p.name: _graded_part(p) for p in results.glob("*.json")}
    second = run(command)
    after = {p.name: _graded_part(p) for p in results.glob("*.json")}
    with open_gradebook(out / "gradebook.db") as gb:
        scores = {s.student.id: s.score for s in gb.find_assignment(NB).submissions}
    return {
        "first": (first.returncode, stdout, stderr),
        "done_before": done_before,
        "second": second,
        "after": after,
        "a_correct": read_json(results / "a_correct.json"),
        "scores": scores,
    }


if NB in paths.notebook_ids():
    background.job("resumed", cores=1, rank=15)(
        lambda folder: background.ThreadJob(_interrupt_and_resume, folder)
    )


@pytest.fixture(scope="module")
def resumed(notebook_01):
    return background.start("resumed").wait()


@pytest.mark.slow
def test_interrupted_run_resumes_without_regrading(resumed):
    students = RESUMED
    returncode, stdout, stderr = resumed["first"]
    done_before, second, after = resumed["done_before"], resumed["second"], resumed["after"]
    assert returncode == 130 and "interrupted" in stderr, stdout + stderr
    assert 2 <= len(done_before) < len(students)
    assert second.returncode == 2, second.stdout + second.stderr  # the corrupt one
    assert f"{len(done_before)} unchanged since the last run" in second.stdout, second.stdout
    assert {k: after[k] for k in done_before} == done_before
    assert resumed["a_correct"]["flags"] == [
        "identical to the submissions of d_correct, f_correct (the same notebook bytes)"
    ]
    assert sorted(after) == sorted(f"{s}.json" for s in students)
    scores = resumed["scores"]
    expected = {s: 10.0 if kind == "correct" else 0.0 for s, kind in students.items()}
    del expected["c_corrupt"]
    assert scores == expected


def _start_cold_kernels(folder: Path) -> background.Job:
    """Correct answers (set-up, answer and test cells only), then ``os._exit(3)`` after the
    tests, graded with ``--cold``: a background job, read by the test below."""
    from hostile import filled, minimal, notebooks

    solution, release = notebooks(folder)
    nb = minimal(filled(release, solution))
    nb.cells.append(new_code_cell("import os\nos._exit(3)"))
    nb.cells.append(new_code_cell("print('never')"))
    (folder / "subs" / "exits" / NB).mkdir(parents=True)
    nbformat.write(nb, folder / "subs" / "exits" / NB / f"{NB}.ipynb")
    subs, out = str(folder / "subs"), str(folder / "out")
    return autograder_job(folder, "grade", subs, "--out", out, "--cold", "--jobs", "1")


if NB in paths.notebook_ids():
    background.job("cold_kernels", cores=1, rank=14)(_start_cold_kernels)


@pytest.fixture(scope="module")
def cold_kernels(notebook_01):
    return background.start("cold_kernels")


@pytest.mark.slow
def test_cold_kernels_grade_the_same_and_kernel_deaths_are_explained(cold_kernels):
    """Correct answers (set-up, answer and test cells only), then ``os._exit(3)`` after the
    tests: full marks, verified outside the kernel, and the kernel's death explained."""
    done, out = cold_kernels.wait(), cold_kernels.folder / "out"
    assert done.returncode == 0, done.stdout + done.stderr
    assert "a fresh kernel each" in done.stdout
    result = json.loads((out / "results" / NB / "exits.json").read_text())
    cells = [c for n in result["notebooks"] for c in n["cells"]]
    assert result["score"] == 10.0 and all(c["check"] == "verified" for c in cells), cells
    assert "exited with status 3" in result["notebooks"][0]["stopped"]


@pytest.mark.slow
def test_warm_kernels_never_preload_triton(tmp_path):
    """``@triton.jit`` reads ``TRITON_INTERPRET`` set by the notebook's own import of
    ``triton_support``; a forkserver that imported Triton first breaks every kernel cell."""
    from autograder.build import instructor_notebook_text
    from autograder.grader.kernels import warm_modules

    nb_id = "06_gpu_attention"
    if nb_id not in paths.notebook_ids():
        pytest.skip(f"{nb_id} is not in solutions/")
    source = tmp_path / f"{nb_id}.ipynb"
    source.write_text(instructor_notebook_text(nb_id), encoding="utf-8")
    modules = warm_modules(source)
    assert "torch" in modules
    code = "import importlib, sys\n"
    code += "".join(
        f"try:\n    importlib.import_module({m!r})\nexcept ImportError:\n    pass\n"
        for m in modules
    )
    code += "assert 'triton' not in sys.modules, 'a warm module imports triton'\n"
    done = run([sys.executable, "-c", code])
    assert done.returncode == 0, done.stderr[-2000:]


def test_grade_runs_at_once_get_kernel_uids_of_their_own():
    """Two runs on one machine never share a kernel uid (nor so its process limit): each holds a
    block, by a lock the kernel drops when the run's process ends."""
    import fcntl
    import subprocess
    import sys

    from autograder.grader.isolation import KERNEL_UID_BASE, UID_BLOCK, UID_LOCKS, claim_uids

    iso = Isolation("/usr/bin/prlimit", "/usr/bin/bwrap", "/usr/bin/setpriv", True)
    if os.geteuid() != 0:
        assert claim_uids(iso) == iso  # no uid switching, nothing to claim
        return
    mine = claim_uids(iso).uid_base
    other = subprocess.run(
        [sys.executable, "-c", CLAIM_IN_ANOTHER_PROCESS], capture_output=True, text=True
    )
    theirs = int(other.stdout)
    assert abs(theirs - mine) >= UID_BLOCK, (mine, theirs)
    block = UID_LOCKS / str((theirs - KERNEL_UID_BASE) // UID_BLOCK)
    fd = os.open(block, os.O_RDWR | os.O_NOFOLLOW)
    try:  # the other run has ended: its block is free again
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)


CLAIM_IN_ANOTHER_PROCESS = """
from autograder.grader.isolation import Isolation, claim_uids
iso = Isolation("/usr/bin/prlimit", "/usr/bin/bwrap", "/usr/bin/setpriv", True)
print(claim_uids(iso).uid_base)
"""
