"""The notebook 04 checks pass correct implementations and name each classic mistake."""

from __future__ import annotations

import pytest
from mistakes import gqa as impls
from mistakes import stub

from autograder.checks import CheckFailure
from autograder.checks import nb04_gqa as checks
from conftest import RUNS, assert_diagnosed

GQA_CHECKS = [
    checks.check_gqa_structure,
    checks.check_gqa_matches_torch,
    checks.check_gqa_kv_cache,
    checks.check_gqa_decoding,
]
CORRECT = (
    [(checks.check_repeat_kv, name, fn) for name, fn in impls.CORRECT_REPEAT.items()]
    + [(check, name, cls) for check in GQA_CHECKS for name, cls in impls.CORRECT_GQA.items()]
    + [(checks.check_gqa_param_count, name, fn) for name, fn in impls.CORRECT_COUNT.items()]
    + [(checks.check_kv_cache_bytes, name, fn) for name, fn in impls.CORRECT_BYTES.items()]
    + [(checks.check_mha_to_gqa, name, fn) for name, fn in impls.CORRECT_CONVERT.items()]
)


class Stub:
    """The learner's class before answering: __init__ is the nbgrader stub."""

    def __init__(self, d_model, num_heads, num_kv_heads, bias=False):
        raise NotImplementedError()


@pytest.mark.parametrize("run", RUNS, ids=str)
@pytest.mark.parametrize(
    ("check", "impl"),
    [(c, f) for c, _, f in CORRECT],
    ids=[f"{c.__name__}-{n}" for c, n, _ in CORRECT],
)
def test_correct_passes(check, impl, run):
    check(impl, **run)


@pytest.mark.parametrize("seed", [0, 5])
@pytest.mark.parametrize("mistake", impls.MISTAKES, ids=str)
def test_mistake_is_diagnosed(mistake, seed):
    assert_diagnosed(mistake, seed)


@pytest.mark.parametrize(
    ("check", "learner"),
    [(checks.check_repeat_kv, stub)]
    + [(check, Stub) for check in GQA_CHECKS]
    + [(checks.check_gqa_param_count, stub), (checks.check_kv_cache_bytes, stub)]
    + [(checks.check_mha_to_gqa, stub)],
    ids=lambda x: getattr(x, "__name__", ""),
)
def test_stub_is_not_implemented_yet(check, learner):
    with pytest.raises(CheckFailure, match="is not implemented yet: replace `raise Not"):
        check(learner)


def test_published_numbers():
    """The numbers the notebook quotes, from the correct formulas the checks accept."""
    count, nbytes = impls.count_formula, impls.bytes_formula
    assert nbytes(80, 8, 128, 1) == 327_680  # Llama 2 70B, fp16, per token
    assert count(4096, 32, 8) == 41_943_040
    assert count(4096, 32, 32) == 67_108_864
    assert round(nbytes(32, 32, 128, 32768) / 1e9, 2) == 17.18
    assert round(nbytes(32, 8, 128, 32768) / 1e9, 2) == 4.29


def test_conversion_names_the_unfinished_module():
    def mha_to_gqa(mha, num_kv_heads):
        return Stub(mha.q_proj.in_features, mha.num_heads, num_kv_heads)

    with pytest.raises(
        CheckFailure, match="builds your `GroupedQueryAttention`, which is not impl"
    ):
        checks.check_mha_to_gqa(mha_to_gqa)
