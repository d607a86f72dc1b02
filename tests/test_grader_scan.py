"""What a notebook's code may do (``grader.scan`` and the allow-list): suspicious patterns flagged,
code outside the list found, tests that use it withheld, the instructor's answers left alone."""

import json

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from notebook_cells import NB, graded_cell, withholding_case

from autograder import nbcell, paths
from autograder.grader import scan
from autograder.grader.scan import (
    outside_the_list,
    scan_notebook,
    scan_source,
    withheld_tests,
)
from autograder.grader.worker import verdict
from conftest import REPO

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


def test_tests_that_use_dynamic_code_are_withheld():
    """The test of f (getattr of __globals__) and of g (through a helper cell the learner added,
    which evaluates a string) are withheld; h's is not, nor the release's demo."""
    release, reference = withholding_case()
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


def _tool_case():
    """A release whose test passes a given tool, ``run_through``, with the answer ``f``."""
    cells = [
        graded_cell("from x import check_f, run_through", "setup", locked=True),
        graded_cell("def f(x):\n    raise NotImplementedError()", "f", solution=True),
        graded_cell("check_f(f, run_through)", "test_f", grade=True, locked=True, points=1),
        graded_cell("def g(x):\n    raise NotImplementedError()", "g", solution=True),
        graded_cell("check_g(g)", "test_g", grade=True, locked=True, points=1),
    ]
    return new_notebook(cells=cells)


@pytest.mark.parametrize(
    "rebinding",
    [
        "def run_through(fn, x):\n    return x",
        "run_through = lambda fn, x: x",
        "from math import sqrt as run_through",
        "for run_through in [print]:\n    pass",
        "(run_through := print)",
        "def helper():\n    global run_through\n    run_through = print\nhelper()",
        "class run_through:\n    pass",
        "with open as run_through:\n    pass",
        "try:\n    pass\nexcept Exception as run_through:\n    pass",
        "import math as run_through",
        "match print:\n    case run_through:\n        pass",
        "match {}:\n    case {**run_through}:\n        pass",
    ],
)
def test_a_learner_who_rebinds_a_given_tool_a_test_passes_is_withheld(rebinding):
    """The grader re-runs a test's checks with its arguments looked up in the learner's kernel:
    a given tool the learner rebinds (06's ``gradients_through``) would be the learner's own code
    standing in for the course's, so the tests that pass it wait for a person."""
    release = _tool_case()
    submitted = nbformat.from_dict(json.loads(json.dumps(release)))
    submitted.cells[1].source = "def f(x):\n    return x\n" + rebinding
    withheld = withheld_tests(submitted, release, release)
    assert "run_through" in withheld["test_f"], withheld  # code outside the list withholds more
    assert withheld_tests(release, release, release) == {}
    # in a cell of its own, added after the test, it reaches nothing graded before it
    submitted = nbformat.from_dict(json.loads(json.dumps(release)))
    submitted.cells[1].source = "def f(x):\n    return x"
    submitted.cells.append(new_code_cell(rebinding))
    assert "test_f" not in withheld_tests(submitted, release, release)
    submitted.cells.insert(2, new_code_cell(rebinding))
    assert "test_f" in withheld_tests(submitted, release, release)


def test_a_long_cell_is_not_kept_between_submissions():
    """A worker caches IPython's transform of short cells only: a submission's huge cells cannot
    fill the memory of the worker that grades the next ones."""
    huge = "x = 1\n" * (scan.CACHED_CELL_CHARS // 6 + 1)
    before = scan._cached_ipython_source.cache_info().currsize
    assert scan.parse(huge) is not None
    assert scan._cached_ipython_source.cache_info().currsize == before
