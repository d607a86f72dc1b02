"""Faithful records that still win: a gap in how the grader judges what the kernel really ran.

Each submission here runs its code in plain sight of the recorder; what it exploits is a rule
read by its letter (issue 27, classes 2 to 5):

2. *names*: PyTorch's attention called by its operator overload
   (``torch.ops.aten._scaled_dot_product_attention_math.default``), whose name ends in
   ``default``, alone or after a flood of harmless calls that pushes it out of a capped report;
   notebook 02's module answered by ``F.multi_head_attention_forward``;
3. *writes into the check's tensors*: a wrong function that zeroes ``q``, ``k`` and ``v`` (or the
   weights of the module it is given) and fills the mask with True in place, so that the check's
   expected value (computed from its own tensors after the call) becomes the wrong answer;
4. *formulas measured*: counts and FLOPs read from PyTorch (a module built on the meta device,
   ``FlopCounterMode``), or looked up in a table of the configurations the public checks draw;
5. *gradients*: a forward run under ``torch.no_grad()`` whose output is tied to the weights by a
   zero (or negligible) term, with fake ``.grad`` tensors left on every projection.

The learner code lives in :mod:`.loophole_writes` (classes 2 and 3) and
:mod:`.loophole_formulas` (4 and 5). ``tests/test_hostile_loopholes.py`` verifies each target
cell in-process (fast), with the instructor's test cells (hidden checks included); the class run
(:mod:`hostile.class_run`) grades :func:`attacks` as real submissions.
"""

from __future__ import annotations

from .loophole_formulas import (
    FLOPS_BY_COUNTER,
    GRADIENTS_TIED_BY_A_HAIR,
    GRADIENTS_TIED_BY_ZERO,
    NB09_MEASURED_COMPUTE,
    NB09_MEASURED_PARAMS,
    PARAMS_BY_META_MODULE,
    block_table,
)
from .loophole_writes import (
    FLOODED_CLAIMS,
    MHA_BY_FUNCTIONAL,
    SDPA_BY_OVERLOAD,
    TILED_BY_OVERLOAD,
    ZEROED_INPUTS,
    ZEROED_MODEL,
    ZEROED_MODULE,
    ZEROED_TILED,
)
from .trust import NB01, NB02, NB05, NB06, NB07, NB10, Attack, Edit

# Attacks whose answers are plain values measured in a cell: no call for the grader to judge, so
# only the scan stops them (their cells are withheld for a person).
SCAN_ONLY = frozenset({"f4_nb09_measured"})

MHA_CELLS = ("test_MultiHeadAttention_matches_torch", "test_MultiHeadAttention_mask")

ATTACKS = (
    Attack(
        "n2_nb01_sdpa_overload",
        NB01,
        2,
        (
            "test_scaled_dot_product_attention_shapes",
            "test_scaled_dot_product_attention_matches_torch",
            "test_scaled_dot_product_attention_mask",
        ),
        "scaled_dot_product_attention is torch.ops.aten._scaled_dot_product_attention_math"
        ".default, a name whose last part is `default`",
        edits=(Edit("answer", "scaled_dot_product_attention", SDPA_BY_OVERLOAD),),
    ),
    Attack(
        "n2_nb01_flooded_claims",
        NB01,
        2,
        (
            "test_scaled_dot_product_attention_shapes",
            "test_scaled_dot_product_attention_matches_torch",
            "test_scaled_dot_product_attention_mask",
        ),
        "the overload attack again, after calling hundreds of torch.Tensor methods whose names "
        "sort first, to push the overload's name out of the kernel's capped report",
        edits=(Edit("answer", "scaled_dot_product_attention", FLOODED_CLAIMS),),
    ),
    Attack(
        "n2_nb06_tiled_overload",
        NB06,
        2,
        ("test_tiled_attention_no_sdpa",),
        "tiled_attention is PyTorch's math attention by its operator overload, one block of "
        "queries at a time",
        edits=(Edit("answer", "tiled_attention", TILED_BY_OVERLOAD),),
    ),
    Attack(
        "n2_nb02_mha_functional",
        NB02,
        2,
        MHA_CELLS,
        "MultiHeadAttention keeps its four projections and hands the rest to "
        "F.multi_head_attention_forward (separate projection weights, per-head weights)",
        edits=(Edit("answer", "MultiHeadAttention", MHA_BY_FUNCTIONAL),),
    ),
    Attack(
        "w3_nb01_zeroed_inputs",
        NB01,
        3,
        (
            "test_scaled_dot_product_attention_shapes",
            "test_scaled_dot_product_attention_matches_torch",
            "test_scaled_dot_product_attention_mask",
        ),
        "a wrong attention that zeroes q, k and v and fills the mask with True in place, then "
        "returns the answer for those inputs",
        edits=(Edit("answer", "scaled_dot_product_attention", ZEROED_INPUTS),),
    ),
    Attack(
        "w3_nb06_zeroed_v",
        NB06,
        3,
        (
            "test_tiled_attention_matches_sdpa",
            "test_tiled_attention_causal",
            "test_tiled_attention_memory",
            "test_tiled_attention_no_sdpa",
        ),
        "a wrong tiled attention that zeroes v in place and returns zeros",
        edits=(Edit("answer", "tiled_attention", ZEROED_TILED),),
    ),
    Attack(
        "w3_nb05_zeroed_module",
        NB05,
        3,
        ("test_mha_sequential_matches_torch", "test_mha_parallel_matches_torch"),
        "wrong heads that zero every weight and bias of the module they are given, in place, and "
        "return zeros, the answer for that module",
        edits=(Edit("answer", "mha_sequential", ZEROED_MODULE), Edit("answer", "mha_parallel", "")),
    ),
    Attack(
        "w3_nb07_zeroed_model",
        NB07,
        3,
        ("test_head_importance_values",),
        "a wrong head_importance that zeroes the attention weights of the model it is given, so "
        "that the check's measurement afterwards finds no head important, and returns zeros",
        edits=(Edit("answer", "head_importance", ZEROED_MODEL),),
    ),
    Attack(
        "f4_nb05_flop_counter",
        NB05,
        4,
        ("test_attention_flops_matches_flop_counter",),
        "attention_flops runs nn.MultiheadAttention on the meta device under FlopCounterMode",
        edits=(Edit("answer", "attention_flops", FLOPS_BY_COUNTER),),
    ),
    Attack(
        "f4_nb02_meta_module",
        NB02,
        4,
        ("test_mha_param_count_values",),
        "mha_param_count counts the parameters of nn.MultiheadAttention built on the meta device",
        edits=(Edit("answer", "mha_param_count", PARAMS_BY_META_MODULE),),
    ),
    Attack(
        "f4_nb09_measured",
        NB10,
        4,
        ("test_numbers_flops", "test_numbers_matmuls_loop", "test_numbers_matmuls_packed"),
        "the FLOPs are FlopCounterMode's count of nn.MultiheadAttention on the meta device, the "
        "matmul counts a dispatch mode's count of multi-head attention written both ways; the "
        "parameter count is nn.MultiheadAttention's own (left to a person: see GUIDE.md)",
        "release",
        (
            Edit("answer", "numbers_params", NB09_MEASURED_PARAMS),
            Edit("answer", "numbers_compute", NB09_MEASURED_COMPUTE),
        ),
    ),
    Attack(
        "g5_nb02_tied_by_zero",
        NB02,
        5,
        ("test_MultiHeadAttention_matches_torch",),
        "the forward runs under torch.no_grad(), its output tied to the weights by 0 * their "
        "sum, and fake .grad tensors are left on every parameter",
        edits=(Edit("after", "MultiHeadAttention", GRADIENTS_TIED_BY_ZERO),),
    ),
    Attack(
        "g5_nb02_tied_by_a_hair",
        NB02,
        5,
        ("test_MultiHeadAttention_matches_torch",),
        "the forward runs under torch.no_grad(), its output tied to every weight by 1e-12 times "
        "their sum, so each gets a gradient that is not attention's",
        edits=(Edit("after", "MultiHeadAttention", GRADIENTS_TIED_BY_A_HAIR),),
    ),
)


def block_table_attack() -> Attack:
    """The table-lookup attack on ``block_param_count`` (built on demand: it computes its table)."""
    return Attack(
        "f4_nb02_block_table",
        NB02,
        4,
        ("test_block_param_count_values",),
        "block_param_count looks its answer up in a table of every configuration the public "
        "check draws for seeds 0 to 9, and is wrong anywhere else",
        edits=(Edit("answer", "block_param_count", block_table()),),
    )


def attacks() -> tuple[Attack, ...]:
    """Every attack of this module, the table lookup included."""
    return (*ATTACKS, block_table_attack())
