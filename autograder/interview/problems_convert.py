"""The problem from notebook 04 §7: converting a multi-head checkpoint to grouped-query attention.

Shape legend: ``C`` = d_model, ``nh`` query heads, ``nkv`` key/value heads, ``hs`` = C // nh,
``n_rep`` = nh // nkv.
"""

from __future__ import annotations

import torch
from torch import nn

from autograder.checks import nb04_gqa as gqa
from autograder.tools.nb04_gqa import TorchGroupedQueryAttention

from .task import Problem, Task, Variant, course_check, fail, one_tensor, shaped

# --------------------------------------------------------------------- MHA -> GQA


def _converted(mha, nkv, k_weight, v_weight, k_bias, v_bias) -> nn.Module:
    """PyTorch's GQA holding the MHA's q/out projections and the learner's pooled k/v."""
    C, nh = mha.q_proj.in_features, mha.num_heads
    bias = mha.q_proj.bias is not None
    module = TorchGroupedQueryAttention(C, nh, nkv, bias=bias)
    kv = nkv * (C // nh)
    with torch.no_grad():
        for name in ("q_proj", "out_proj"):
            getattr(module, name).load_state_dict(getattr(mha, name).state_dict())
        for layer, weight, b in (
            (module.k_proj, k_weight, k_bias),
            (module.v_proj, v_weight, v_bias),
        ):
            shaped(weight, (kv, C), "pool_kv", "a pooled weight", "(nkv·hs, C)")
            layer.weight.copy_(weight)
            if bias:
                if b is None:
                    fail("`pool_kv` returned no bias although the MHA has biases: pool them too.")
                shaped(b, (kv,), "pool_kv", "a pooled bias", "(nkv·hs,)")
                layer.bias.copy_(b)
    return module


def _pool_tensors(fn):
    def mha_to_gqa(mha, nkv):
        k, v = mha.k_proj, mha.v_proj
        result = fn(k.weight, v.weight, k.bias, v.bias, mha.num_heads, nkv)
        if not isinstance(result, tuple | list) or len(result) != 4:
            fail("`pool_kv` should return the tuple (w_k, w_v, b_k, b_v).")
        return _converted(mha, nkv, *result)

    return mha_to_gqa


def _pool_state(fn):
    def mha_to_gqa(mha, nkv):
        C, nh = mha.q_proj.in_features, mha.num_heads
        state = fn(mha.state_dict(), nh, nkv)
        if not isinstance(state, dict):
            fail(
                f"`convert_state` should return a dict like its input, got {type(state).__name__}."
            )
        module = TorchGroupedQueryAttention(C, nh, nkv, bias=mha.q_proj.bias is not None)
        expected = module.state_dict()
        if set(state) != set(expected):
            fail(f"`convert_state` returned the keys {sorted(state)}: keep the input's keys.")
        for key, t in expected.items():
            layout = "(nkv·hs, C)" if t.dim() == 2 else "(nkv·hs,)"
            shaped(
                one_tensor(state[key], "convert_state", f"`{key}`"),
                t.shape,
                "convert_state",
                f"`{key}`",
                layout if key.startswith(("k_proj", "v_proj")) else "unchanged",
            )
        module.load_state_dict(state)
        return module

    return mha_to_gqa


def _pool_task(name: str, signature: str, contract: str, adapt) -> Task:
    grader = course_check(gqa.check_mha_to_gqa, adapt)
    return Task(name, signature, contract, (grader,), (gqa.CONVERT,))


_POOL = (
    "Mean-pool the key and value heads of a multi-head checkpoint (Ainslie et al., 2023): kv "
    "head g is the mean of the n_rep **consecutive** heads g·n_rep … (g+1)·n_rep − 1, the ones "
    "that will read it. Weights are `nn.Linear`'s (out features, in features), hs = C / nh."
)

MHA_TO_GQA = Problem(
    "mha_to_gqa",
    "Convert a multi-head checkpoint to grouped-query attention",
    "notebook 04 §7",
    "Uptrain-style conversion: keep the queries and the output projection, pool the keys and "
    "values into fewer heads.",
    (
        Variant(
            "tensors",
            _pool_task(
                "pool_kv",
                "def pool_kv(w_k, w_v, b_k, b_v, num_heads, num_kv_heads):",
                f"{_POOL} `w_k`, `w_v` (C, C); `b_k`, `b_v` (C,) or None. Return "
                "`(w_k, w_v, b_k, b_v)` pooled to (nkv·hs, C) and (nkv·hs,) (None stays None), "
                "leaving the inputs unchanged.",
                _pool_tensors,
            ),
        ),
        Variant(
            "state_dict",
            _pool_task(
                "convert_state",
                "def convert_state(state, num_heads, num_kv_heads):",
                f"{_POOL} `state` is the MHA's `state_dict()`: keys `q_proj.weight`, "
                "`k_proj.weight`, `v_proj.weight`, `out_proj.weight` and, when it has biases, "
                "the same with `.bias`. Return a new dict with the same keys for the GQA "
                "(q and out unchanged, k and v pooled), leaving `state` unchanged.",
                _pool_state,
            ),
        ),
    ),
    Task(
        "gqa_param_count",
        "def gqa_param_count(d_model, num_heads, num_kv_heads, bias=False):",
        "Now say what the conversion saved: return the parameters of the four projections of "
        "grouped-query attention, by integer arithmetic (no tensors, no modules).",
        (course_check(gqa.check_gqa_param_count, lambda fn: fn),),
        (gqa.COUNT,),
    ),
    ("gqa", "gqa_tradeoff"),
    written=("gqa_tradeoff",),
    numeric=("gqa_attn_params", "kv_llama3_8b"),
    box_minutes=15,
)
