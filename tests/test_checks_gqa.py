"""The notebook 04 checks pass correct implementations and name each classic mistake."""

from __future__ import annotations

import pytest
from mistakes import gqa as impls

from autograder.checks import CheckFailure
from autograder.checks import nb04_gqa as checks

# Correct implementations, catalogued mistakes and stubs: tests/test_mistakes.py.


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
        return impls.Stub(mha.q_proj.in_features, mha.num_heads, num_kv_heads)

    with pytest.raises(
        CheckFailure, match="builds your `GroupedQueryAttention`, which is not impl"
    ):
        checks.check_mha_to_gqa(mha_to_gqa)
