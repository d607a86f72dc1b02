"""Notebook 08's latent-attention checks: the numbers the notebook quotes, the cache as the only
witness of an up-projected cache, and an unfinished MLA named under the absorbed checks.

Correct implementations, catalogued mistakes and stubs: ``tests/test_mistakes.py``; verified on a
kernel's record: ``tests/test_replay.py`` (the catalogue's ``REPLAY``).
"""

from __future__ import annotations

import pytest
import torch
from mistakes import mla as impls

from autograder.checks import CheckFailure, _latent
from autograder.checks import nb08_mla as checks
from autograder.grader.verify import cells


def test_published_numbers():
    """DeepSeek-V3 (61 layers, d_latent 512, d_rope 64, 128 heads of 128) in bfloat16, per token:
    the latent cache against MHA, GQA and MQA caches of the same heads."""
    mla = impls.bytes_formula(61, 512, 64, 1)
    mha, gqa8, mqa = (2 * 61 * nkv * 128 * 2 for nkv in (128, 8, 1))
    assert (mla, mha, gqa8, mqa) == (70_272, 3_997_696, 249_856, 31_232)
    assert round(mha / mla, 1) == 56.9
    assert (512 + 64) / (2 * 128) == 2.25  # the latent holds as much as GQA with 2.25 kv heads
    assert impls.bytes_formula(60, 512, 64, 131072) / 2**30 == 8.4375  # DeepSeek-V2, 128k tokens


def test_an_up_projected_cache_gives_right_outputs_and_only_the_cache_tells():
    """Hugging Face's DeepseekV3Attention caches keys and values after the up-projection: the
    outputs are those of MLA, so the check must read the cache to see it."""
    torch.manual_seed(0)
    module = impls.CachesUpProjected(32, 4, 12, 8, 4).eval()
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        out, (k, v) = module(x)
    assert torch.allclose(out.double(), _latent.oracle(module, x), atol=1e-5)
    assert k.shape == v.shape == (2, 4, 5, 8)
    with pytest.raises(CheckFailure, match="after the up-projection"):
        checks.check_mla_full_pass(impls.CachesUpProjected)


class UnfinishedMLA(impls.MLAManual):
    def __init__(self, d_model, num_heads, d_latent, head_dim, d_rope):
        raise NotImplementedError()


class AbsorbedOnUnfinishedMLA(UnfinishedMLA):
    def forward(self, x, past_kv=None):
        return impls.AbsorbedManual.forward(self, x, past_kv)


@pytest.mark.parametrize("check", [impls.MATCHES, impls.MEMORY], ids=lambda c: c.__name__)
def test_an_unfinished_mla_is_named(check):
    with pytest.raises(CheckFailure, match="builds on your `MultiHeadLatentAttention`, not writ"):
        check(AbsorbedOnUnfinishedMLA)


def test_a_table_of_the_public_answers_fails_where_the_grader_verifies():
    """The attack on a formula cell: record every size the public checks ask for, answer from
    that table. It passes the checks as the learner runs them; the grader also draws sizes from a
    secret, and the table has no answer there."""
    answers = {}

    def recording(*args, **kwargs):
        answers[args, tuple(sorted(kwargs.items()))] = impls.bytes_formula(*args, **kwargs)
        return answers[args, tuple(sorted(kwargs.items()))]

    def table(*args, **kwargs):
        return answers[args, tuple(sorted(kwargs.items()))]

    for thorough in (False, True):
        impls.BYTES(recording, seed=1, thorough=thorough)
        impls.BYTES(table, seed=1, thorough=thorough)
    source = "check_mla_cache_bytes(fn, seed=1, thorough=True)"
    verdict = cells.verify_cell(source, cells.InProcessKernel({"fn": table}))
    assert verdict.status == "refuted" and "KeyError" in verdict.message, verdict
    verdict = cells.verify_cell(source, cells.InProcessKernel({"fn": impls.bytes_formula}))
    assert verdict.status == "verified", verdict
