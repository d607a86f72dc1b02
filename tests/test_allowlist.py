"""Code outside the allow-list is withheld, fast: issue 42's attacks read by the scan alone.

Each learner of :mod:`hostile.allowlist` hands in its notebook; every target test cell must be
withheld for a person with a one-line reason (the class run grades the same submissions,
``tests/test_hostile_trust.py``). The instructor's answers stay inside the list.
"""

from __future__ import annotations

import json
import sys

import allowlist_share
import nbformat
import pytest
from hostile.allowlist import ATTACKS
from hostile.trust import build
from nbformat.v4 import new_code_cell
from notebook_cells import withholding_case

from autograder import paths
from autograder.build import instructor_notebook_text
from autograder.grader import scan


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.learner)
def test_code_outside_the_list_is_withheld(attack):
    solution = nbformat.reads(instructor_notebook_text(attack.notebook), as_version=4)
    release = nbformat.read(paths.release_notebook(attack.notebook), as_version=4)
    submitted = build(attack, solution, release)
    withheld = scan.withheld_tests(submitted, solution, release, attack.notebook)
    assert set(attack.targets) <= set(withheld), (attack.what, withheld)
    for why in withheld.values():
        assert why and "\n" not in why, why


def test_correct_code_stays_with_the_grader():
    """Every correct catalogue implementation, pasted as one answer cell with the helpers it
    uses, is inside the list (``tests/allowlist_share.py`` measured 184/184; 180/184 under the
    deny-lists before it): the share must not fall."""
    kept = allowlist_share.kept()
    assert sum(n for n, _ in kept.values()) >= 184
    assert {name: n for name, (n, total) in kept.items() if n < total} == {}


def _case(*learner_cells: str, answers: dict[str, str] | None = None):
    """The withholding case of test_grader_scan with ``answers`` filled in and ``learner_cells``
    added after them: (withheld tests, the reasons' text)."""
    release, reference = withholding_case()
    submitted = nbformat.from_dict(json.loads(json.dumps(release)))
    for index, name in enumerate("fgh", start=1):
        submitted.cells[index].source = (answers or {}).get(name, f"def {name}(x):\n    return x")
    for offset, source in enumerate(learner_cells):
        submitted.cells.insert(4 + offset, new_code_cell(source))
    withheld = scan.withheld_tests(submitted, reference, release)
    return set(withheld), " ".join(withheld.values())


@pytest.mark.parametrize(
    "source",
    [
        "%timeit g(1)",
        "%timeit -n 10 -r 3 g(1)",
        "%time y = f(2)",
        "%%timeit -n 5 x = 1\ng(x)",
        "%%time\nh(3)",
        "import numpy as np\nxs = np.linspace(0.0, 1.0, 5)\nprint(xs.mean())",
    ],
)
def test_timing_magics_and_numpy_alone_are_ordinary(source):
    assert _case(source) == (set(), "")


def test_top_level_code_outside_withholds_the_tests_of_what_it_names():
    """A thread started as its cell runs reaches g and what g calls: g's test waits, f's and
    h's do not."""
    thread = "import threading\nthreading.Thread(target=g, args=(1,)).start()"
    assert _case(thread) == ({"test_g"}, _case(thread)[1])
    assert "imports threading; uses threading.Thread (when its cell runs)" in _case(thread)[1]
    helper = "def helper(x):\n    return x"
    answers = {"f": "def f(x):\n    return helper(x)"}
    withheld, _ = _case(
        helper, "import threading\nthreading.Thread(target=helper).start()", answers=answers
    )
    assert withheld == {"test_f"}
    # a function of another cell with code outside, called at the top level
    started = "import threading\n\ndef start(fn):\n    threading.Thread(target=fn).start()"
    assert _case(started, "start(h)")[0] == {"test_h"}


@pytest.mark.parametrize(
    "source",
    [
        'globals()["f" + ""] = print',  # binds names it computes
        "import pkgutil\npkgutil.resolve_name('torch.nn')",  # could reach anything
        "import threading\nthreading.Thread(target=lambda: vars()).start()",
        "import sys\nsys.setrecursionlimit(50)",
        "import torch.nn.functional as F\nF.softmax = print",  # patches a library
        "start = lambda: None\ndef later():\n    return eval('1')\nlater()",
    ],
)
def test_top_level_code_that_reaches_what_it_cannot_name_withholds_every_test(source):
    withheld, why = _case(source)
    assert withheld == {"test_f", "test_g", "test_h"}, why
    assert "so every test" in why


def test_numpy_on_tensors_is_outside():
    """numpy in a cell that names PyTorch, or numpy whose results other learner code reads."""
    in_cell = {
        "h": "import numpy as np\nimport torch\n\ndef h(x):\n    return torch.tensor(np.tri(x))"
    }
    assert _case(answers=in_cell)[0] == {"test_h"}
    assert "uses numpy on tensors (numpy.tri; the cell names PyTorch)" in _case(answers=in_cell)[1]
    table = "import numpy as np\n\ndef tri(n):\n    return np.tri(n)"
    through = {"h": "def h(x):\n    return tri(x)"}
    withheld, why = _case(table, answers=through)
    assert withheld == {"test_h"} and "other learner code reads its names" in why
    assert scan.outside_the_list("y = x.numpy()") == ["uses numpy on tensors (.numpy)"]


def test_a_name_that_leads_outside_is_outside_on_an_object_the_scan_cannot_name():
    """``t.onnx`` on an argument: ``onnx`` is ``torch.onnx`` once anything imported it, and
    ``check`` and every ``grade`` worker read it against one list, whatever each imported."""
    found = scan.outside_the_list("def f(t):\n    return t.onnx.export")
    assert "uses .onnx of an object the scan cannot name (torch.onnx)" in found, found


def test_the_list_of_names_that_lead_outside_is_one_per_environment(monkeypatch, tmp_path):
    """Worked out in an interpreter of its own, not in this one (which imported much more), and
    kept beside the environment's packages, under a name that changes with the libraries."""
    from autograder.grader import reading

    kept = reading._leads_outside()  # this session's, kept in this environment
    assert reading._leads_outside_file().is_file()
    monkeypatch.setattr(sys, "prefix", str(tmp_path))  # nothing kept here
    assert reading._leads_outside.__wrapped__() == kept
    path = reading._leads_outside_file()
    assert json.loads(path.read_text()) == kept and path.stat().st_mode & 0o777 == 0o644
    path.write_text(json.dumps({"sentinel": "torch.sentinel"}))  # what is kept is what is read
    assert reading._leads_outside.__wrapped__() == {"sentinel": "torch.sentinel"}
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))  # none to start: here
    assert reading._leads_outside_apart()["jit"] == "torch.jit"
    monkeypatch.setattr(reading, "_leads_outside_apart", lambda: {"again": "torch.again"})
    for broken in ("{not json", '{"again": 1}', "[]"):
        path.write_text(broken)  # unreadable: worked out again, and kept
        assert reading._leads_outside.__wrapped__() == {"again": "torch.again"}, broken
        assert json.loads(path.read_text()) == {"again": "torch.again"}
    versions = {"torch": "0.0", "numpy": "1", "matplotlib": "1", "ipython": "1"}
    monkeypatch.setattr(reading.metadata, "version", versions.__getitem__)
    assert reading._leads_outside_file() != path  # another torch: another list
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "a-file" / "below"))
    (tmp_path / "a-file").write_text("")  # a folder nobody can make: worked out each time
    assert reading._leads_outside.__wrapped__() == {"again": "torch.again"}
