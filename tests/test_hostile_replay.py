"""Every notebook, attacked as a hostile learner would, earns nothing it did not compute.

The session's one ``grade`` run (``class_run``, :mod:`hostile.class_run`) holds, for every
notebook, these five submissions (:mod:`hostile.replay`):

- ``correct``: the instructor's answers (the notebook's control): full marks, every graded cell
  verified outside the kernel (notebook 06's Triton kernel, which no recording can recompute,
  has only self-checks without points, so none of its cells is graded);
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

import pytest
from hostile.trust import CONTROLS

from autograder import paths

IDS = paths.notebook_ids()  # every notebook of the course is attacked, new ones too
# notebook 06's optional Triton self-checks: locked, no points, never among the graded cells
TRITON = {"selfcheck_triton_attention_matches_sdpa", "selfcheck_triton_attention_causal"}


@pytest.fixture(scope="module")
def graded(class_run):
    """(The run's output, (notebook, learner) -> result); ``correct`` is the notebook's control."""
    results = dict(class_run.results)
    for nb_id in IDS:
        if (nb_id, CONTROLS[nb_id].learner) in results:
            results[(nb_id, "correct")] = results[(nb_id, CONTROLS[nb_id].learner)]
    return class_run, results


def _cells(result) -> list[dict]:
    return [c for nb in result["notebooks"] for c in nb["cells"]]


def _failing(cells: list[dict]) -> list[dict]:
    return [c for c in cells if not c["passed"] or c["check"] != "verified"]


@pytest.mark.slow
@pytest.mark.parametrize("nb_id", IDS)
def test_correct_work_keeps_full_marks_verified(graded, nb_id):
    done, results = graded
    result = results[(nb_id, "correct")]
    cells = _cells(result)
    assert cells and all(c["passed"] for c in cells), (_failing(cells), done.stdout[-3000:])
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
