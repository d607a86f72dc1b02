"""Questions of notebook 10 §2, claims to confirm or push back on: why heads, what they cost,
what they do, GQA, the √d_k and the mask.

Shape legend: ``C`` = d_model, ``nh`` query heads.

No answer is written down here: a claim about parameters or FLOPs is measured with
:mod:`.nb10_numbers`' oracles, once with 1 head and once with 12 at the same width; the others
are salted hashes, with a note for every option. :mod:`.nb10_interview` merges these questions
into its own, so a test cell calls ``check_choice("gqa", answer_gqa)``.
"""

from __future__ import annotations

import math

from ._measured import measure, meta_params, packed

#: No tool of the course computes these answers beyond what :mod:`.nb10_numbers` measures, and
#: :mod:`.nb10_interview` declares those.
ANSWERS_IN_TOOLS: dict[str, str] = {}

_12X = {  # claims about (one head, twelve heads) measurements, same total width
    "one_12x": lambda one, twelve: one == 12 * twelve,
    "twelve_12x": lambda one, twelve: twelve == 12 * one,
    "same": lambda one, twelve: one == twelve,
    "sqrt": lambda one, twelve: math.isclose(
        max(one, twelve) / min(one, twelve), math.sqrt(12), rel_tol=0.05
    ),
}

#: question -> the fields of :class:`.nb10_interview.Choice`.
SECTION_2_CHOICES = {
    "head_count": dict(
        notes={
            "a": "8 was the original Transformer's choice; GPT-2 small uses 12 and GPT-3 96, so "
            "the "
            "count clearly grows with the model",
            "b": "designers keep the head size near 64 or 128 and let the head count grow with the "
            "width: 12 × 64 = 768, 96 × 128 = 12,288",
            "c": "with one head per feature, every query-key comparison happens in a single "
            "dimension, far too coarse to be useful",
            "d": "depth and head count are separate choices that often coincide (GPT-2 small: 12 "
            "and 12, GPT-3: 96 and 96) but need not: GPT-2 medium has 24 layers of 16 heads, "
            "Llama 2 70B 80 layers of 64 heads",
        },
        digests=frozenset({"59d70091bd59ddc8"}),
    ),
    "wide_head_params": dict(
        notes={
            "a": "splitting the width into heads re-slices the same C × C projections; no "
            "parameter disappears",
            "b": "the heads do not get matrices of their own: head h uses rows h·hs:(h+1)·hs of "
            "the shared C × C projections",
            "c": "every projection is C × C whatever the head count, so both have 4C² + 4C "
            "parameters; what differs is how many separate softmax weightings a token gets",
            "d": "no square root appears in a parameter count: the projections are C × C either "
            "way",
        },
        measured={
            "a": _12X["one_12x"],
            "b": _12X["twelve_12x"],
            "c": _12X["same"],
            "d": _12X["sqrt"],
        },
        measure=lambda nh: meta_params(lambda: packed(768, nh)),
    ),
    "heads_jobs": dict(
        notes={
            "a": "nobody assigns relations to heads, and the head count is not matched to a list "
            "of "
            "relation types; whatever a head does emerges from training",
            "b": "heads start from different random weights and have their own projections; "
            "studies "
            "of trained models find distinct patterns (previous token, syntactic relations, "
            "rare words)",
            "c": "a large attention weight is evidence, not an explanation: a head can look at a "
            "token and barely change the output, and its pattern often changes with the input",
            "d": "labels like these illustrate what can emerge; a real head's role is learned, "
            "rarely clean, and established by measurement such as ablation, not by one map",
        },
        digests=frozenset({"c06891bfbf70c43e"}),
    ),
    "more_heads": dict(
        notes={
            "a": "at a fixed width four times as many heads means heads a quarter of the size, so "
            "each query-key comparison works in fewer dimensions; the head count is tuned with "
            "width and depth, and trained models often carry redundant heads",
            "b": "at a fixed width more heads means smaller heads, not a free gain; 'always "
            "better' "
            "is exactly the claim to push back on",
            "c": "the parameter count does not change with the head count at a fixed width",
            "d": "the heads are batched into the same few products, and the FLOPs do not depend on "
            "the head count",
        },
        digests=frozenset({"f651bd449a33d3a1"}),
    ),
    "heads_cost": dict(
        notes={
            "a": "the heads split the width: each works on C / nh features, so the products add up "
            "to the same total; a loop over heads would change the schedule, not the arithmetic",
            "b": "the projections are C × C whatever nh, and the attention products of all heads "
            "add up to 4·B·T²·C: nh cancels",
            "c": "splitting into heads re-arranges the same products; it removes none of them",
            "d": "no square root appears: nh cancels exactly",
        },
        measured={
            "a": _12X["twelve_12x"],
            "b": _12X["same"],
            "c": _12X["one_12x"],
            "d": _12X["sqrt"],
        },
        measure=lambda nh: measure(packed(48, nh), 2, 16, 48).flops,
    ),
    "parallel_why": dict(
        notes={
            "a": "both schedules do exactly the same arithmetic; counting FLOPs shows it",
            "b": "each head still has its own softmax; batching only computes all of them in one "
            "call",
            "c": "the weights are identical in both schedules; only the order of work differs",
            "d": "the heads are independent until the concatenation, so the same arithmetic fits "
            "into a few large batched products: fewer fixed costs per operation (Python, "
            "dispatch, kernel launches) and far better use of parallel hardware",
        },
        digests=frozenset({"5e3a3ba102b9909a"}),
    ),
    "why_heads": dict(
        notes={
            "a": "at a fixed width the parameter count is exactly the same",
            "b": "the total FLOPs are the same, so speed is not the reason",
            "c": "with their own projections and softmax, heads let every token gather several "
            "differently weighted mixtures of the others at once, each in its own subspace; "
            "one head gives a single weighted average, at the same parameters and FLOPs",
            "d": "one softmax can spread weight over many tokens, but only as a single mixture: "
            "the "
            "limit is one weighting per query, not one token",
        },
        digests=frozenset({"b635c860f42b24c0"}),
    ),
    "gqa": dict(
        notes={
            "a": "all 64 query heads stay, each with its own queries; only keys and values are "
            "shared",
            "b": "every group of 8 query heads shares one key/value head, so k_proj, v_proj and "
            "the "
            "KV cache shrink 8 times while the queries keep their full resolution",
            "c": "the head size stays 128: GQA changes how many key/value heads exist, not their "
            "size",
            "d": "every past token is still cached; each token just needs fewer key/value heads",
        },
        digests=frozenset({"de61f8fe8716c049"}),
    ),
    "sqrt_dk": dict(
        notes={
            "a": "the division costs a little time rather than saving any; it is about the "
            "statistics of the scores",
            "b": "the softmax makes every row sum to 1 whatever the scale of the scores",
            "c": "the scaling acts on the scores, before the softmax; the values are untouched",
            "d": "q·k of random unit-variance vectors has variance d_k, so without scaling a large "
            "d_k drives the softmax towards one-hot, where gradients nearly vanish; dividing by "
            "√d_k brings the variance back to about 1",
        },
        digests=frozenset({"ab3f6acd56722709"}),
    ),
    "mask_after_softmax": dict(
        notes={
            "a": "zeroing weights after the softmax leaves rows that sum to less than 1: the "
            "masked keys still took their share of the normalisation, so the future scores still "
            "shape every output",
            "b": "the masked keys took part in the normalisation, so each row sums to less than 1 "
            "and the output shrinks by a query-dependent factor set by the future scores, so the "
            "future still leaks into the output and its gradients; fill the masked scores with "
            "-inf before the softmax instead",
            "c": "masking the values does not restore the normalisation; the rows still sum to "
            "less than 1",
            "d": "the softmax always normalises over the keys (the last axis), mask or not",
        },
        digests=frozenset({"b71cad86c0b1350a"}),
    ),
    "pruning": dict(
        notes={
            "a": "the study pruned models that had been trained with all their heads; it did not "
            "show that training with fewer heads works as well",
            "b": "low importance after training does not mean a head learned nothing: it can "
            "overlap with others, and having it may have helped training",
            "c": "after training, heads differ widely in importance and many are redundant at "
            "inference, so pruning can save compute; it says little about training with "
            "fewer heads",
            "d": "heads were removed in order of a measured importance score; removing them at "
            "random hurts more",
        },
        digests=frozenset({"337f01ed11d67b39"}),
    ),
    "pushback": dict(
        notes={
            "a": "each head has its own learned projections and its own softmax, so heads can "
            "weight the same tokens differently; that is the core of the mechanism",
            "b": "a heatmap is evidence, not an explanation: many heads are diffuse or "
            "input-dependent, and a head can be looked at without mattering",
            "c": "'always' is the problem: the head count is a trade-off against head size, tuned "
            "with width and depth",
            "d": "each head works in C/nh dimensions, so nh heads do the work of one head of "
            "width C and nh cancels from the FLOPs, whatever the schedule: batched or one head "
            "at a time",
            "e": "many heads of trained models can be removed at test time with little loss "
            "(Michel et al., 2019)",
            "f": "one wide head and several narrow ones have exactly the same parameters at the "
            "same width",
        },
        digests=frozenset({"4775e7a53641554d", "d0e7b0cf6c6b4b01", "dc572b4ed45cdf26"}),
        multiple=True,
        missing_hint="whether its conclusion really follows from what you measured in this "
        "course, watching for absolute words and for claims that go beyond the "
        "evidence",
    ),
}
