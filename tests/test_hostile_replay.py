"""Every notebook, attacked as a hostile learner would, earns nothing it did not compute.

One ``grade`` run over notebooks 01-08, five submissions each:

- ``correct``: the instructor's answers: full marks, every graded cell verified outside the
  kernel (notebook 06's Triton kernel, which no recording can recompute, has only self-checks
  without points, so none of its cells is graded);
- ``noop``: answers unfinished, every ``check_*`` rebound to a no-op (a);
- ``junk``: answers replaced by junk, every ``check_*`` rebound to a no-op (b);
- ``compare``: junk answers, ``torch.allclose``, ``torch.equal``, ``torch.isclose`` and
  ``torch.testing.assert_close`` patched to agree with anything (c);
- ``forger``: answers unfinished, the recorder patched to report the results of correct code
  hidden elsewhere, with no operators (its tracer switched off) (d).

The attacks pass their test cells in the kernel; replayed outside it, every cell whose answer is
a tensor or a module must score 0. A Python value (a number, a letter) is the answer itself: the
forger's hidden correct code earns those (the closing note of this work says so).
"""

from __future__ import annotations

import json
import re

import nbformat
import pytest
from hostile import filled, notebooks

from autograder import nbcell, paths
from conftest import autograder

IDS = paths.notebook_ids()  # every notebook of the course is attacked, new ones too
# notebook 06's optional Triton self-checks: locked, no points, never among the graded cells
TRITON = {"selfcheck_triton_attention_matches_sdpa", "selfcheck_triton_attention_causal"}

PATCH_COMPARISONS = """import torch
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.isclose = lambda a, b, *r, **k: torch.ones_like(a, dtype=torch.bool)
torch.testing.assert_close = lambda *a, **k: None
"""

FORGER = """import autograder.checks.replay as _r
_hidden = {{}}
exec({answers!r}, _hidden)
_r._Tracer.__torch_dispatch__ = lambda self, func, types, args=(), kwargs=None: func(
    *args, **(kwargs or {{}})
)
_orig = _r.intercept
def _forge(fn, args, kwargs, invoke):
    return _orig(_hidden.get(getattr(fn, "__name__", None), fn), args, kwargs, invoke)
_r.intercept = _forge
"""


def _noop_checks(nb) -> str:
    names = sorted({n for c in nb.cells for n in re.findall(r"\bcheck_\w+", c.source)})
    return "".join(f"{n} = lambda *a, **k: None\n" for n in names)


def _junk(source: str) -> str:
    source = re.sub(r"raise NotImplementedError\(\)", "return torch.zeros(1)", source)
    return re.sub(r"(?m)^(answer_\w+) = .*$", r'\1 = "junk"', source)


def _after_setup(nb, source: str):
    index = next(i for i, c in enumerate(nb.cells) if nbcell.grade_id(c) == "setup")
    nb.cells.insert(index + 1, nbformat.v4.new_code_cell(source))
    return nb


def _answers_source(solution) -> str:
    cells = [c.source for c in solution.cells if nbcell.is_answer(c) and c.cell_type == "code"]
    text = "\n".join(cells)
    return "\n".join(s for s in text.splitlines() if "### BEGIN" not in s and "### END" not in s)


def _submissions(tmp_path, nb_id) -> dict:
    solution, release = notebooks(tmp_path / nb_id, nb_id)
    setup = next(c.source for c in solution.cells if nbcell.grade_id(c) == "setup")
    junk = nbformat.from_dict(json.loads(json.dumps(release)))
    for cell in junk.cells:
        if nbcell.is_answer(cell) and cell.cell_type == "code":
            cell.source = _junk(cell.source)
    copy = lambda nb: nbformat.from_dict(json.loads(json.dumps(nb)))  # noqa: E731
    forger = "import math, torch\nfrom torch import nn\nimport torch.nn.functional as F\n"
    forger += "\n".join(s for s in setup.splitlines() if s.startswith(("from ", "import ")))
    return {
        "correct": filled(release, solution),
        "noop": _after_setup(copy(release), _noop_checks(release)),
        "junk": _after_setup(copy(junk), _noop_checks(release)),
        "compare": _after_setup(copy(junk), PATCH_COMPARISONS),
        "forger": _after_setup(
            copy(release),
            FORGER.format(answers=forger + "\n" + _answers_source(solution)),
        ),
    }


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if not set(IDS) <= set(paths.notebook_ids()):
        pytest.skip("not every notebook is in solutions/")
    root = tmp_path_factory.mktemp("hostile_replay")
    subs = root / "subs"
    for nb_id in IDS:
        for student, nb in _submissions(root, nb_id).items():
            (subs / student / nb_id).mkdir(parents=True)
            nbformat.write(nb, subs / student / nb_id / f"{nb_id}.ipynb")
    done = autograder("grade", str(subs), "--out", str(root / "out"), "--jobs", "2")
    results = {}
    for path in (root / "out" / "results").glob("*/*.json"):
        results[(path.parent.name, path.stem)] = json.loads(path.read_text())
    return done, results


def _cells(result) -> list[dict]:
    return [c for nb in result["notebooks"] for c in nb["cells"]]


@pytest.mark.slow
@pytest.mark.parametrize("nb_id", IDS)
def test_correct_work_keeps_full_marks_verified(graded, nb_id):
    done, results = graded
    result = results[(nb_id, "correct")]
    cells = _cells(result)
    assert cells and all(c["passed"] for c in cells), (cells, done.stdout[-3000:])
    assert not TRITON & {c["grade_id"] for c in cells}, "the Triton self-checks carry no points"
    for c in cells:
        assert c["check"] == "verified", c


@pytest.mark.slow
@pytest.mark.parametrize("attack", ["noop", "junk", "compare"])
@pytest.mark.parametrize("nb_id", IDS)
def test_attacks_earn_nothing(graded, nb_id, attack):
    done, results = graded
    result = results[(nb_id, attack)]
    assert result["status"] == "graded", result
    earned = [c for c in _cells(result) if c["score"] > 0]
    assert not earned, earned
    refuted = [c for c in _cells(result) if c["check"] in ("refuted", "withheld")]
    assert all(c["message"] and "\n" not in c["message"] for c in refuted)
    assert any("which the tests call" in f or "patch" in f for f in result["flags"]), result


@pytest.mark.slow
def test_a_cheat_is_refuted_with_the_checks_own_diagnosis(graded):
    """Unfinished 03 whose checks were rebound to no-ops: the tests pass in the kernel, and the
    replay outside it refutes them with the check's own sentence."""
    _, results = graded
    result = results[("03_masking", "noop")]
    refuted = {c["grade_id"]: c["message"] for c in _cells(result) if c["check"] == "refuted"}
    assert {"test_causal_mask_values", "test_causal_mask_no_leak"} <= set(refuted), result
    assert "is not implemented yet" in refuted["test_causal_mask_values"]
    assert any("which the tests call" in f for f in result["flags"]), result["flags"]


@pytest.mark.slow
@pytest.mark.parametrize("nb_id", IDS)
def test_a_forged_recording_earns_no_tensor_answer(graded, nb_id):
    done, results = graded
    result = results[(nb_id, "forger")]
    assert result["status"] == "graded", result
    earned = [c["grade_id"] for c in _cells(result) if c["score"] > 0]
    assert set(earned) <= PYTHON_VALUE_CELLS, earned


# Cells whose functions take only Python values (sizes, a device): what they return is computed
# from no tensor, so the recording's value is taken as the answer itself, as for a number.
PYTHON_VALUE_CELLS = {
    "test_causal_mask_values",
    "test_causal_mask_no_leak",
    "test_fixed_causal_mask_values",
    "test_fixed_causal_mask_no_leak",
    "test_mha_param_count_values",
    "test_kv_cache_bytes_values",
    "test_gqa_param_count_values",
    "test_attention_flops_matches_flop_counter",
    "test_get_device_prefers_accelerator",
}
