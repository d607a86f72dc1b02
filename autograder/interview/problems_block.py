"""Problems from notebook 02 §10–11: attention dropout and the pre-LN transformer block.

Shape legend: ``B`` batch, ``T`` query length, ``S`` key/value length, ``C`` = d_model, ``nh``
heads, ``d`` / ``d_v`` key / value width, ``...`` any leading dimensions.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks import nb02_block as block
from autograder.checks import nb02_dropout as dropout
from autograder.tools.modules import TorchMultiHeadAttention

from .problems_attention import eye_values
from .task import Problem, Task, Variant, course_check, one_tensor

# -------------------------------------------------------------------------------- dropout


def _dropout_keep(fn):
    def attention_with_dropout(q, k, v, p, training=None):
        kwargs = {} if training is None else {"training": training}
        return fn(q, k, v, 1 - p, **kwargs)

    return attention_with_dropout


def _dropout_out_only(fn):
    def attention_with_dropout(q, k, v, p, training=None):
        kwargs = {} if training is None else {"training": training}
        state = torch.get_rng_state()  # the same draw for the values and the identity
        out = one_tensor(fn(q, k, v, p, **kwargs), "attention_dropout", "`out`")
        torch.set_rng_state(state)
        weights = fn(q, k, eye_values(q, k.shape[-2]), p, **kwargs)
        return out, one_tensor(weights, "attention_dropout", "`out`")

    return attention_with_dropout


def _dropout_task(signature: str, contract: str, adapt) -> Task:
    graders = tuple(
        course_check(check, adapt)
        for check in (dropout.check_dropout_training, dropout.check_dropout_eval)
    )
    return Task("attention_dropout", signature, contract, graders, (dropout.DROP,))


_DROPOUT = (
    "`q` (..., T, d), `k` (..., S, d), `v` (..., S, d_v). Attention weights softmax(q kᵀ/√d) "
    "get dropout **after the softmax**, drawn from PyTorch's global generator (so "
    "`torch.manual_seed` reproduces it) and rescaled so their expectation is unchanged; with "
    "`training=False` nothing is dropped."
)

DROPOUT = Problem(
    "attention_dropout",
    "Attention dropout",
    "notebook 02 §10",
    "Add dropout to attention the way a training framework does.",
    (
        Variant(
            "keep_prob",
            _dropout_task(
                "def attention_dropout(q, k, v, keep_prob, training=True):",
                f"{_DROPOUT} **`keep_prob` is the probability to keep** a weight (TensorFlow "
                "1's convention), not to drop it. Return `(out, weights)`: (..., T, d_v) and the "
                "dropped weights (..., T, S).",
                _dropout_keep,
            ),
        ),
        Variant(
            "out_only",
            _dropout_task(
                "def attention_dropout(q, k, v, p, training=True):",
                f"{_DROPOUT} `p` is the probability to drop. Return `out` (..., T, d_v) alone.",
                _dropout_out_only,
            ),
        ),
    ),
    Task(
        "SDPAAttention",
        "class SDPAAttention(nn.Module):\n    def __init__(self, p): ...\n"
        "    def forward(self, q, k, v): ...",
        "Now let PyTorch's fused kernel do it: a module built with the dropout probability `p` "
        "whose `forward(q, k, v)` returns `F.scaled_dot_product_attention`'s output with "
        "dropout while training and none after `.eval()`.",
        (course_check(dropout.check_sdpa_dropout, lambda cls: cls),),
        (dropout.SDPA_MODULE, f"{dropout.SDPA_MODULE}.forward"),
    ),
    ("dropout_where", "sqrt_dk"),
    written=("dropout_where",),
    numeric=("dropout_scale",),
    box_minutes=15,
)


# ------------------------------------------------------------------------- the pre-LN block


def _block(fn, gpt2: bool):
    class Block(nn.Module):
        def __init__(self, d_model, num_heads):
            super().__init__()
            C = d_model
            self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.attn = TorchMultiHeadAttention(C, num_heads)
            self.mlp = nn.Sequential(nn.Linear(C, 4 * C), nn.GELU(), nn.Linear(4 * C, C))

        def forward(self, x, mask=None):
            a, nh, causal = self.attn, self.attn.num_heads, mask is not None
            fc, proj = self.mlp[0], self.mlp[2]
            if gpt2:
                packed = [a.q_proj, a.k_proj, a.v_proj]
                weight = torch.cat([p.weight for p in packed])  # (3C, C)
                bias = torch.cat([p.bias for p in packed])  # (3C,)
                c_attn = functools.partial(F.linear, weight=weight, bias=bias)  # C -> 3C
                args = (self.ln1, c_attn, a.out_proj, self.ln2, fc, proj)
            else:
                args = (self.ln1, a.q_proj, a.k_proj, a.v_proj, a.out_proj, self.ln2, fc, proj)
            return one_tensor(fn(x, *args, nh, causal=causal), "pre_ln_block", "`x` out")

    return Block


def _block_task(signature: str, contract: str, gpt2: bool) -> Task:
    grader = course_check(block.check_block_matches_torch, lambda fn: _block(fn, gpt2))
    return Task("pre_ln_block", signature, contract, (grader,), (f"{block.BLOCK}.forward",))


_BLOCK = (
    "A pre-LN transformer block (GPT-2's): layer norm, causal-or-not multi-head self-attention "
    "with `num_heads` heads, a residual add, layer norm, an MLP (Linear C -> 4C, GELU, exact or "
    "GPT-2's tanh form: both accepted, Linear 4C -> C), a residual add. `x` (B, T, C); every "
    "layer is given as a callable (`nn.LayerNorm`, `nn.Linear`): call them. Return the block's "
    "output (B, T, C)."
)

PRE_LN_BLOCK = Problem(
    "pre_ln_block",
    "A pre-LN transformer block",
    "notebook 02 §11",
    "Assemble a transformer block from its layers.",
    (
        Variant(
            "separate",
            _block_task(
                "def pre_ln_block(x, ln1, q_proj, k_proj, v_proj, out_proj, ln2, fc, proj, "
                "num_heads, causal=False):",
                f"{_BLOCK} `q_proj`, `k_proj`, `v_proj`, `out_proj` are the attention's four "
                "C -> C projections; `fc` and `proj` the MLP's two layers.",
                gpt2=False,
            ),
        ),
        Variant(
            "gpt2",
            _block_task(
                "def pre_ln_block(x, ln_1, c_attn, c_proj, ln_2, c_fc, mlp_proj, num_heads, "
                "causal=False):",
                f"{_BLOCK} GPT-2's names: `c_attn` is **one packed projection** C -> 3C "
                "(all queries, then keys, then values), `c_proj` the attention's output "
                "projection, `c_fc` and `mlp_proj` the MLP's two layers.",
                gpt2=True,
            ),
        ),
    ),
    Task(
        "block_param_count",
        "def block_param_count(d_model, d_mlp=None, bias=True):",
        "Now the interviewer asks for ~12·C² per layer: return the block's exact parameter "
        "count (two layer norms, four attention projections, the MLP of `d_mlp` hidden units, "
        "4·d_model when None), by integer arithmetic.",
        (course_check(block.check_block_param_count, lambda fn: fn),),
        (block.COUNT,),
    ),
    ("pre_ln", "dropout_where"),
    written=("pre_ln", "llama_parts"),
    numeric=("block_params_gpt2",),
)
