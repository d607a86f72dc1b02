"""The out-of-kernel claims of notebooks 02-07 hold for every correct answer and refute wrong ones.

A claim that refutes a correct answer costs a learner points, so every correct implementation in
``tests/mistakes`` and the instructor's own answers must verify; every catalogued mistake that
changes the values must be refuted; forged or malformed outputs are refused without raising.
"""

from __future__ import annotations

import functools
import json
import math

import jupytext
import pytest
import torch
import torch.nn.functional as F
from mistakes import gpu, gqa, heads, masking, multihead, parallel
from torch import nn

from autograder import paths
from autograder.classroom import claims

NB2, NB3, NB4 = "02_multi_head_attention", "03_masking", "04_grouped_query_attention"
NB5, NB6, NB7 = "05_parallel_vs_sequential", "06_gpu_attention", "07_exploring_heads"

CORRECT = {
    (NB2, "test_split_heads_layout"): multihead.CORRECT_SPLIT,
    (NB2, "test_merge_heads_layout"): multihead.CORRECT_MERGE,
    (NB2, "test_MultiHeadAttention_matches_torch"): multihead.CORRECT_MHA,
    (NB2, "test_MultiHeadAttention_mask"): multihead.CORRECT_MHA,
    (NB2, "test_mha_param_count_values"): multihead.CORRECT_COUNT,
    (NB3, "test_causal_mask_values"): masking.CORRECT_CAUSAL,
    (NB3, "test_causal_mask_no_leak"): masking.CORRECT_CAUSAL,
    (NB3, "test_padding_mask_values"): masking.CORRECT_PADDING,
    (NB3, "test_attention_mask_values"): masking.CORRECT_ATTENTION,
    (NB3, "test_attention_mask_padding_invariance"): masking.CORRECT_ATTENTION,
    (NB3, "test_to_nn_mha_masks_equivalent"): masking.CORRECT_NN_MASKS,
    (NB4, "test_kv_cache_bytes_values"): gqa.CORRECT_BYTES,
    (NB4, "test_repeat_kv_grouping"): gqa.CORRECT_REPEAT,
    (NB4, "test_gqa_param_count_values"): gqa.CORRECT_COUNT,
    (NB4, "test_mha_to_gqa_pooling"): gqa.CORRECT_CONVERT,
    (NB5, "test_mha_sequential_matches_torch"): parallel.CORRECT_SEQUENTIAL,
    (NB5, "test_mha_parallel_matches_torch"): parallel.CORRECT_PARALLEL,
    (NB5, "test_attention_flops_matches_flop_counter"): parallel.CORRECT_FLOPS,
    (NB6, "test_tiled_attention_matches_sdpa"): gpu.CORRECT_TILED,
    (NB6, "test_tiled_attention_causal"): gpu.CORRECT_TILED,
    (NB7, "test_head_entropy_values"): heads.CORRECT_ENTROPY,
    (NB7, "test_head_entropy_zero_weights"): heads.CORRECT_ENTROPY,
    (NB7, "test_previous_token_score_values"): heads.CORRECT_PREVIOUS,
    (NB7, "test_previous_token_score_patterns"): heads.CORRECT_PREVIOUS,
    (NB7, "test_head_importance_values"): heads.CORRECT_IMPORTANCE,
}

# The test cell each check runs in, for the checks whose cells have a claim.
CELL_OF_CHECK = {
    multihead.checks.check_split_heads: (NB2, "test_split_heads_layout"),
    multihead.checks.check_merge_heads: (NB2, "test_merge_heads_layout"),
    multihead.checks.check_mha_matches_torch: (NB2, "test_MultiHeadAttention_matches_torch"),
    multihead.checks.check_mha_edge_cases: (NB2, "test_MultiHeadAttention_matches_torch"),
    multihead.checks.check_mha_mask: (NB2, "test_MultiHeadAttention_mask"),
    multihead.checks.check_mha_param_count: (NB2, "test_mha_param_count_values"),
    masking.checks.check_causal_mask_values: (NB3, "test_causal_mask_values"),
    masking.checks.check_causal_mask_no_leak: (NB3, "test_causal_mask_no_leak"),
    masking.checks.check_padding_mask_values: (NB3, "test_padding_mask_values"),
    masking.checks.check_attention_mask_values: (NB3, "test_attention_mask_values"),
    masking.checks.check_attention_mask_padding_invariance: (
        NB3,
        "test_attention_mask_padding_invariance",
    ),
    masking.checks.check_to_nn_mha_masks: (NB3, "test_to_nn_mha_masks_equivalent"),
    gqa.checks.check_kv_cache_bytes: (NB4, "test_kv_cache_bytes_values"),
    gqa.checks.check_repeat_kv: (NB4, "test_repeat_kv_grouping"),
    gqa.checks.check_gqa_param_count: (NB4, "test_gqa_param_count_values"),
    gqa.checks.check_mha_to_gqa: (NB4, "test_mha_to_gqa_pooling"),
    parallel.checks.check_mha_sequential_values: (NB5, "test_mha_sequential_matches_torch"),
    parallel.checks.check_mha_parallel_values: (NB5, "test_mha_parallel_matches_torch"),
    parallel.checks.check_attention_flops: (NB5, "test_attention_flops_matches_flop_counter"),
    gpu.checks.check_tiled_values: (NB6, "test_tiled_attention_matches_sdpa"),
    gpu.checks.check_tiled_causal: (NB6, "test_tiled_attention_causal"),
    heads.ck.check_head_entropy_values: (NB7, "test_head_entropy_values"),
    heads.ck.check_head_entropy_zero_weights: (NB7, "test_head_entropy_zero_weights"),
    heads.ck.check_previous_token_score_values: (NB7, "test_previous_token_score_values"),
    heads.ck.check_previous_token_score_patterns: (NB7, "test_previous_token_score_patterns"),
    heads.ck.check_head_importance_values: (NB7, "test_head_importance_values"),
}

# Mistakes that break a rule about how the answer is computed, not its values: on the claims'
# CPU inputs they give the right values, so their claim holds (the in-kernel check catches them).
RULE_ONLY = {
    "MHA: detached",  # gradients
    "MHA: returns float32",  # dtype, values within tolerance
    "count: builds a module",  # creates tensors
    "count: builds the module",
    "causal_ignores_device",  # devices
    "causal_mixes_devices",
    "padding_mixes_devices",
    "attention_mixes_devices",
    "padding_in_place",  # changes its input
    "convert: shares q/out",  # shares tensors with the MHA
    "seq_calls_functional",  # F.multi_head_attention_forward gives PyTorch's own values
    "inplace",  # tiled_attention scales q in place, then computes the right output
    "dtype_float",  # float32 for half inputs; the claims' inputs are float32 and float64
    "entropy: casts to float32",  # dtype, values within tolerance
}

_CATALOGUES = [
    multihead.MISTAKES,
    masking.MISTAKES,
    gqa.MISTAKES,
    parallel.MISTAKES,
    gpu.MISTAKES_TILED + gpu.MISTAKES_TILED_THOROUGH,
    heads.MISTAKES,
]
MISTAKES = [m for catalogue in _CATALOGUES for m in catalogue if m.check in CELL_OF_CHECK]


def _verify(notebook_id: str, grade_id: str, fn) -> str | None:
    return claims.verify(notebook_id, grade_id, claims.payload(notebook_id, grade_id, fn))


@functools.cache
def _solution(notebook_id: str) -> dict:
    """The instructor's answers: the notebook's answer cells and given cells, run in order."""
    namespace = {"torch": torch, "nn": nn, "F": F, "math": math}
    if notebook_id == NB6:  # its Triton kernel cells need the names to define
        from autograder.lab.triton_support import tl, triton

        namespace.update(tl=tl, triton=triton)
    for cell in jupytext.read(paths.source_text(notebook_id)).cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code":
            continue  # written answers
        if meta.get("solution") or meta.get("grade_id", "").startswith("given_"):
            exec(cell.source, namespace)  # the course's own notebook source
    return namespace


def test_every_listed_cell_has_a_claim():
    for notebook_id, grade_id in [*CORRECT, *CELL_OF_CHECK.values()]:
        assert claims.CLAIMS[notebook_id][grade_id].cases, grade_id


@pytest.mark.parametrize("cell", CORRECT, ids=lambda c: c[1])
def test_instructor_solution_verifies(cell):
    notebook_id, grade_id = cell
    fn = _solution(notebook_id)[claims.CLAIMS[notebook_id][grade_id].function]
    assert _verify(notebook_id, grade_id, fn) is None


@pytest.mark.parametrize(
    "cell, impl",
    [(cell, impl) for cell, impls in CORRECT.items() for impl in impls.values()],
    ids=[f"{cell[1]}-{name}" for cell, impls in CORRECT.items() for name in impls],
)
def test_correct_answer_verifies(cell, impl):
    assert _verify(*cell, impl) is None


@pytest.mark.parametrize("mistake", [m for m in MISTAKES if m.name not in RULE_ONLY], ids=str)
def test_wrong_values_are_refuted(mistake):
    problem = _verify(*CELL_OF_CHECK[mistake.check], mistake.impl)
    assert isinstance(problem, str) and problem, mistake.name
    assert "\n" not in problem


@pytest.mark.parametrize(
    "mistake",
    # "count: builds a module" is left out: at GPT-3 size it allocates 2.4 GB
    [m for m in MISTAKES if m.name in RULE_ONLY - {"count: builds a module"}],
    ids=str,
)
def test_rules_about_how_are_left_to_the_checks(mistake):
    assert _verify(*CELL_OF_CHECK[mistake.check], mistake.impl) is None


def test_rule_only_mistakes_exist():
    assert RULE_ONLY <= {m.name for m in MISTAKES}


# Right values, but a rule of another test cell broken (how the heads are scheduled, FLOPs, memory,
# SDPA, side effects on the model): the value claims hold, the other cells' checks fail them.
OTHER_CELLS_RULES = [
    ((NB5, "test_mha_sequential_matches_torch"), parallel.par_math),
    ((NB5, "test_mha_sequential_matches_torch"), parallel.seq_full_projection_each_head),
    ((NB5, "test_mha_parallel_matches_torch"), parallel.seq_linear),
    ((NB5, "test_mha_parallel_matches_torch"), parallel.par_chunk_loop),
    ((NB5, "test_mha_parallel_matches_torch"), parallel.par_wasted_scores),
    *[
        ((NB6, grade_id), impl)
        for grade_id in ("test_tiled_attention_matches_sdpa", "test_tiled_attention_causal")
        for impl in (
            gpu.tiled_materialised,
            gpu.tiled_over_queries,
            gpu.tiled_full_mask,
            gpu.tiled_uses_sdpa,
        )
    ],
    ((NB7, "test_head_importance_values"), heads.importance_leaves_head_masked),
    ((NB7, "test_head_importance_values"), heads.importance_eval_not_restored),
    ((NB7, "test_head_importance_values"), heads.importance_train_mode),
    ((NB7, "test_head_importance_values"), heads.importance_with_grad),
    ((NB7, "test_head_importance_values"), heads.importance_freezes_parameters),
]


@pytest.mark.parametrize(
    "cell, impl", OTHER_CELLS_RULES, ids=[f"{c[1]}-{i.__name__}" for c, i in OTHER_CELLS_RULES]
)
def test_other_cells_rules_are_left_to_their_checks(cell, impl):
    assert _verify(*cell, impl) is None


@pytest.mark.parametrize(
    "cell, impl",
    [
        ((NB2, "test_MultiHeadAttention_matches_torch"), multihead.MHASeparate),
        ((NB4, "test_mha_to_gqa_pooling"), gqa.CORRECT_CONVERT["view_mean"]),
        ((NB5, "test_mha_sequential_matches_torch"), parallel.seq_linear),
        ((NB7, "test_head_importance_values"), heads.importance_argument),
    ],
    ids=lambda x: getattr(x, "__name__", None) or str(x[1]),
)
def test_dumping_leaves_the_learners_random_state_alone(cell, impl):
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    claims.payload(*cell, impl)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize("cell", CORRECT, ids=lambda c: c[1])
def test_a_changed_default_dtype_changes_no_input(cell):
    impl = next(iter(CORRECT[cell].values()))
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        payload = claims.payload(*cell, impl)
    finally:
        torch.set_default_dtype(before)
    assert claims.verify(*cell, payload) is None


# ----------------------------------------------------------------------------- forged outputs

_FORGED = [
    None,
    {},
    "text",
    {"none": True},
    {"int": 3},
    {"int": True},
    {"float": 2.5},
    {"bool": True},
    {"error": "ValueError: forged"},
    {"shape": [2, 2], "dtype": "torch.bool", "data": [1, 0, 1, 1]},
    {"shape": [2, 2], "dtype": "torch.bool", "data": [2, 0, 1, 1]},
    {"shape": [3], "data": [1, "x", 2]},
    {"shape": [-1], "data": [0.5, 0.5]},
    {"tuple": [{"none": True}, {"shape": [1], "data": [1.0]}]},
    {"tuple": [{"tuple": []}, {"tuple": [{"int": 1}] * 8}]},
    {"tuple": "not a list"},
]


@pytest.mark.parametrize("cell", CORRECT, ids=lambda c: c[1])
def test_forged_outputs_are_refused_without_raising(cell):
    notebook_id, grade_id = cell
    n = len(claims.CLAIMS[notebook_id][grade_id].cases())
    assert "could not be re-run" in claims.verify(notebook_id, grade_id, None)
    assert "malformed" in claims.verify(notebook_id, grade_id, "{not json")
    assert "malformed" in claims.verify(notebook_id, grade_id, json.dumps({"grade_id": grade_id}))
    for forged in _FORGED:
        payload = json.dumps({"grade_id": grade_id, "outputs": [forged] * n})
        assert claims.verify(notebook_id, grade_id, payload), forged
    right = claims.payload(notebook_id, grade_id, next(iter(CORRECT[cell].values())))
    data = json.loads(right)
    short = json.dumps({"grade_id": grade_id, "outputs": data["outputs"][:-1]})
    assert "do not match" in claims.verify(notebook_id, grade_id, short)
    other = json.dumps({"grade_id": "test_something_else", "outputs": data["outputs"]})
    assert "do not match" in claims.verify(notebook_id, grade_id, other)


def test_deeply_nested_payload_is_refused():
    payload = '{"grade_id": "test_repeat_kv_grouping", "outputs": ' + "[" * 100_000 + "]" * 100_000
    assert claims.verify(NB4, "test_repeat_kv_grouping", payload + "}")


# ----------------------------------------------------------------------------- encoding


def test_numbers_none_and_bool_tensors_survive_the_round_trip():
    mask = torch.ones(2, 3, dtype=torch.bool).tril()
    value = (7, 2.5, True, None, mask, torch.arange(3.0))
    back = claims.decode(json.loads(json.dumps(claims.encode(value))))
    assert back[:4] == (7, 2.5, True, None) and type(back[0]) is int and type(back[2]) is bool
    assert back[4].dtype == torch.bool and torch.equal(back[4], mask)
    assert back[5].dtype == torch.float64 and torch.equal(back[5], torch.arange(3.0).double())


def test_decode_turns_malformed_numbers_into_reasons():
    for obj in ({"int": "3"}, {"int": True}, {"float": 1}, {"bool": 0}):
        assert isinstance(claims.decode(obj), str), obj
