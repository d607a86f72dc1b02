"""Problems from notebooks 02 and 10: multi-head attention from bare weights, a packed-QKV
port.

Shape legend: ``B`` batch, ``T`` query length, ``S`` key/value length, ``C`` = d_model, ``nh``
query heads, ``nkv`` key/value heads, ``hs`` = C // nh, ``n_rep`` = nh // nkv.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks import nb10_bugs as bugs
from autograder.checks import nb10_live as live

from .task import (
    Problem,
    Task,
    Variant,
    course_check,
    fail,
    layout_moved,
    one_tensor,
    shaped,
    tensors,
)

# ------------------------------------------------------------ multi-head attention, bare weights


def _per_query_head(w: torch.Tensor, nh: int, nkv: int) -> torch.Tensor:
    """``(nkv·hs, C)`` kv weights -> ``(nh·hs, C)``: kv head j's rows for its n_rep query heads.
    Grouped-query attention is multi-head attention holding these weights."""
    return w.view(nkv, -1, w.shape[-1]).repeat_interleave(nh // nkv, dim=0).flatten(0, 1)


def _separate(w_kv, nh, nkv):
    w_k, w_v = w_kv.chunk(2)  # (nkv·hs, C) each
    return _per_query_head(w_k, nh, nkv), _per_query_head(w_v, nh, nkv)


def _mha_packed(fn):
    def live_round(x, w_q, w_kv, w_out, nh, nkv):
        w_qkv = torch.cat([w_q, *_separate(w_kv, nh, nkv)])  # (3C, C)
        return one_tensor(fn(x, w_qkv, w_out, nh), "causal_self_attention", "`out`")

    return live_round


def _mha_seq_first(fn):
    def live_round(x, w_q, w_kv, w_out, nh, nkv):
        out = fn(x.transpose(0, 1), w_q, *_separate(w_kv, nh, nkv), w_out, nh)  # x: (T, B, C)
        out = one_tensor(out, "causal_self_attention", "`out`")
        shaped(out, x.transpose(0, 1).shape, "causal_self_attention", "`out`", "(T, B, C)")
        return out.transpose(0, 1)

    return live_round


def _mha_in_out(fn):
    def live_round(x, w_q, w_kv, w_out, nh, nkv):
        w_k, w_v = _separate(w_kv, nh, nkv)
        out = fn(x, w_q.T, w_k.T, w_v.T, w_out.T, nh)  # (in, out) matrices: y = x @ w
        return one_tensor(out, "causal_self_attention", "`out`")

    return live_round


def _mha_with_weights(fn):
    def live_round(x, w_q, w_kv, w_out, nh, nkv):
        w_k, w_v = _separate(w_kv, nh, nkv)
        result = fn(x, w_q, w_k, w_v, w_out, nh)
        out, weights = tensors(result, "causal_self_attention", ("out", "weights"))
        B, T, C = x.shape
        shaped(weights, (B, nh, T, T), "causal_self_attention", "`weights`", "(B, nh, T, T)")
        q, k = (F.linear(x, w).view(B, T, nh, C // nh).transpose(1, 2) for w in (w_q, w_k))
        eye = torch.eye(T, dtype=x.dtype).expand(B, nh, T, T)
        expected = F.scaled_dot_product_attention(q, k, eye, is_causal=True)  # (B, nh, T, T)
        if not torch.allclose(weights.to(x.dtype), expected, atol=1e-5, rtol=1e-4):
            fail(
                "Your `weights` are not each head's causal softmax(q kᵀ / √hs): return the "
                "weights you multiply the values by, (B, nh, T, T), zero above the diagonal."
            )
        return out

    return live_round


def _mha_task(signature: str, contract: str, adapt) -> Task:
    grader = course_check(live.check_causal_gqa_live, adapt)
    return Task("causal_self_attention", signature, contract, (grader,), (live.LIVE,))


_LINEAR = "Weights are laid out as `nn.Linear`'s, (out features, in features): y = x @ w.T."
_MHA = (
    "Causal self-attention with `num_heads` heads of width hs = C / num_heads, no biases; head "
    "h uses features h·hs:(h+1)·hs of each projection, as `nn.MultiheadAttention` does."
)


def _gqa_extension(fn):
    def live_round(x, w_q, w_kv, w_out, nh, nkv):
        w_k, w_v = w_kv.chunk(2)  # (nkv·hs, C) each
        return one_tensor(fn(x, w_q, w_k, w_v, w_out, nh, nkv), "gqa_attention", "`out`")

    return live_round


GQA_EXTENSION = Task(
    "gqa_attention",
    "def gqa_attention(x, w_q, w_k, w_v, w_out, num_heads, num_kv_heads):",
    "Now make it grouped-query attention: `w_k` and `w_v` are (num_kv_heads·hs, C), and "
    "consecutive groups of num_heads / num_kv_heads query heads share one key/value head "
    f"(query head h reads kv head h // n_rep). `x` (B, T, C), causal, no biases. {_LINEAR} "
    "Return `out` (B, T, C).",
    (course_check(live.check_causal_gqa_live, _gqa_extension),),
    (live.LIVE,),
)

CAUSAL_MHA = Problem(
    "causal_mha",
    "Causal multi-head self-attention from bare weights",
    "notebook 02 §2–5, notebook 10 §5.8",
    f"Write multi-head self-attention from weight tensors, using only `torch`. {_MHA}",
    (
        Variant(
            "packed",
            _mha_task(
                "def causal_self_attention(x, w_qkv, w_out, num_heads):",
                "`x` (B, T, C). **One packed projection** `w_qkv` (3C, C) stacks the query, "
                "key and value weights in that order (nanoGPT's `c_attn`, "
                "`nn.MultiheadAttention`'s `in_proj_weight`); `w_out` (C, C). "
                f"{_LINEAR} Return `out` (B, T, C).",
                _mha_packed,
            ),
        ),
        Variant(
            "seq_first",
            layout_moved(
                _mha_task(
                    "def causal_self_attention(x, w_q, w_k, w_v, w_out, num_heads):",
                    "**Sequence first**: `x` (T, B, C) (`nn.MultiheadAttention`'s default "
                    f"layout); `w_q`, `w_k`, `w_v`, `w_out` (C, C). {_LINEAR} Return `out` "
                    "(T, B, C).",
                    _mha_seq_first,
                )
            ),
        ),
        Variant(
            "in_out",
            _mha_task(
                "def causal_self_attention(x, w_q, w_k, w_v, w_out, num_heads):",
                "`x` (B, T, C); `w_q`, `w_k`, `w_v`, `w_out` (C, C) are **(in features, out "
                "features)** matrices, as JAX/Flax kernels and GPT-2's `Conv1D` store them: "
                "y = x @ w. Return `out` (B, T, C).",
                _mha_in_out,
            ),
        ),
        Variant(
            "with_weights",
            _mha_task(
                "def causal_self_attention(x, w_q, w_k, w_v, w_out, num_heads):",
                f"`x` (B, T, C); `w_q`, `w_k`, `w_v`, `w_out` (C, C). {_LINEAR} Return "
                "`(out, weights)`: `out` (B, T, C) and every head's attention weights "
                "(B, num_heads, T, T).",
                _mha_with_weights,
            ),
        ),
    ),
    GQA_EXTENSION,
    ("why_heads", "heads_cost", "crossover_seq_len"),
    written=("why_heads", "why_scale"),
    numeric=("attn_flops_gpt2",),
)

# ------------------------------------------------------------------------ a packed-QKV port


def _port(fn, qkv_layout, out_layout):
    class PackedCausalSelfAttention(nn.Module):
        def __init__(self, d_model, num_heads):
            super().__init__()
            self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
            self.proj = nn.Linear(d_model, d_model, bias=False)
            self.num_heads = num_heads

        def forward(self, x):
            nh = self.num_heads
            w_qkv, w_out = qkv_layout(self.qkv.weight, nh), out_layout(self.proj.weight)
            return one_tensor(fn(x, w_qkv, w_out, nh), "ported_attention", "`out`")

    return PackedCausalSelfAttention


def _neox(w: torch.Tensor, nh: int) -> torch.Tensor:
    """``[all q; all k; all v]`` rows -> each head's q, k and v rows in turn (GPT-NeoX)."""
    C = w.shape[-1]
    return w.view(3, nh, C // nh, C).transpose(0, 1).reshape(3 * C, C)  # (3C, C)


def _port_task(signature: str, contract: str, qkv_layout, out_layout) -> Task:
    grader = course_check(bugs.check_packed_attention, lambda fn: _port(fn, qkv_layout, out_layout))
    return Task("ported_attention", signature, contract, (grader,), (f"{bugs.PACKED}.forward",))


PACKED_PORT = Problem(
    "packed_port",
    "Port a checkpoint's packed QKV attention",
    "notebook 10 §3.2",
    f"A checkpoint stores its attention as one packed projection. {_MHA} `x` (B, T, C); "
    "return `out` (B, T, C).",
    (
        Variant(
            "neox",
            _port_task(
                "def ported_attention(x, w_qkv, w_out, num_heads):",
                "`w_qkv` (3C, C) is packed **per head, GPT-NeoX style**: for head 0 its hs "
                "query rows, then its hs key rows, then its hs value rows; then head 1, and so "
                f"on. `w_out` (C, C). {_LINEAR}",
                _neox,
                lambda w: w,
            ),
        ),
        Variant(
            "conv1d",
            _port_task(
                "def ported_attention(x, w_qkv, w_out, num_heads):",
                "GPT-2's `Conv1D` layout: `w_qkv` is **(C, 3C)** and is applied as x @ w_qkv; "
                "its columns hold all queries, then all keys, then all values. `w_out` is "
                "(C, C), applied as y @ w_out.",
                lambda w, nh: w.T,
                lambda w: w.T,
            ),
        ),
    ),
    GQA_EXTENSION,
    ("parallel_why", "flash_io"),
    written=("porting",),
    numeric=("block_params_gpt2",),
)
