"""Correct and wrong ``mha_sequential``, ``mha_parallel``, ``attention_flops`` and quiz answers.

Shape legend: ``B`` batch, ``T`` sequence length, ``C`` = d_model, ``nh`` heads, ``hs`` = C // nh.
``mha`` has notebook 02's interface: ``num_heads``, ``q_proj``, ``k_proj``, ``v_proj`` and
``out_proj``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from autograder.checks import nb05_flops as flops
from autograder.checks import nb05_parallel as checks

from . import HIDDEN, VISIBLE_AND_HIDDEN, Mistake, correct, stub, tried


def _rows(mha, h, C):
    hs = C // mha.num_heads
    return slice(h * hs, (h + 1) * hs)


def _b(lin, rows):
    return None if lin.bias is None else lin.bias[rows]


def _attend(q, k, v, scale):
    """softmax(q kᵀ · scale) v over the last two dimensions."""
    return torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1) @ v  # (..., T, hs)


def _heads(x, mha, rows_of=_rows, scale_of=lambda hs, C: hs**-0.5, qkv_bias=True, v_from="v"):
    """Per-head outputs ``[(B, T, hs)] * nh`` of a loop over heads, with knobs for mistakes."""
    C = x.shape[-1]
    hs = C // mha.num_heads
    v_lin = mha.v_proj if v_from == "v" else mha.k_proj
    out = []
    for h in range(mha.num_heads):
        rows = rows_of(mha, h, C)
        q, k, v = (
            F.linear(x, lin.weight[rows], _b(lin, rows) if qkv_bias else None)
            for lin in (mha.q_proj, mha.k_proj, v_lin)
        )  # (B, T, hs) each
        out.append(_attend(q, k, v, scale_of(hs, C)))
    return out


# ------------------------------------------------------------------ correct sequential


def seq_linear(x, mha):
    return mha.out_proj(torch.cat(_heads(x, mha), dim=-1))  # (B, T, C)


def seq_sdpa(x, mha):
    C = x.shape[-1]
    heads = []
    for h in range(mha.num_heads):
        rows = _rows(mha, h, C)
        q, k, v = (
            F.linear(x, lin.weight[rows], _b(lin, rows))
            for lin in (mha.q_proj, mha.k_proj, mha.v_proj)
        )  # (B, T, hs)
        heads.append(F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None])[:, 0])
    return mha.out_proj(torch.cat(heads, dim=-1))  # (B, T, C)


def seq_out_proj_per_head(x, mha):
    """Each head projected out by its own columns of out_proj, summed; the bias added once."""
    C = x.shape[-1]
    total = 0
    for h in range(mha.num_heads):
        rows = _rows(mha, h, C)
        q = x @ mha.q_proj.weight[rows].T  # (B, T, C) @ (C, hs) -> (B, T, hs)
        k = x @ mha.k_proj.weight[rows].T
        v = x @ mha.v_proj.weight[rows].T
        if mha.q_proj.bias is not None:
            q, k, v = (
                q + mha.q_proj.bias[rows],
                k + mha.k_proj.bias[rows],
                v + mha.v_proj.bias[rows],
            )
        head = _attend(q, k, v, 1 / math.sqrt(C // mha.num_heads))  # (B, T, hs)
        total = total + head @ mha.out_proj.weight[:, rows].T  # (B, T, hs) @ (hs, C)
    bias = mha.out_proj.bias
    return total if bias is None else total + bias


def seq_einsum(x, mha):
    C = x.shape[-1]
    hs = C // mha.num_heads
    heads = []
    for h in range(mha.num_heads):
        rows = _rows(mha, h, C)
        q, k, v = (
            torch.einsum("btc,dc->btd", x, lin.weight[rows])
            + (0 if lin.bias is None else lin.bias[rows])
            for lin in (mha.q_proj, mha.k_proj, mha.v_proj)
        )  # (B, T, hs)
        w = torch.softmax(torch.einsum("btd,bsd->bts", q, k) / math.sqrt(hs), dim=-1)
        heads.append(torch.einsum("bts,bsd->btd", w, v))  # (B, T, hs)
    return mha.out_proj(torch.cat(heads, dim=-1))


def seq_attention_loop_only(x, mha):
    """Projections done once, only attention per head: accepted, the heads still run in turn."""
    B, T, C = x.shape
    hs = C // mha.num_heads
    q, k, v = mha.q_proj(x), mha.k_proj(x), mha.v_proj(x)  # (B, T, C)
    heads = [
        _attend(q[..., r], k[..., r], v[..., r], hs**-0.5)
        for r in (slice(h * hs, (h + 1) * hs) for h in range(mha.num_heads))
    ]
    return mha.out_proj(torch.cat(heads, dim=-1))


# -------------------------------------------------------------------- correct parallel


def _split(t, nh):
    B, T, C = t.shape
    return t.view(B, T, nh, C // nh).transpose(1, 2)  # (B, nh, T, hs)


def _merge(t):
    B, nh, T, hs = t.shape
    return t.transpose(1, 2).reshape(B, T, nh * hs)  # (B, T, C)


def par_math(x, mha):
    nh = mha.num_heads
    q, k, v = (_split(p(x), nh) for p in (mha.q_proj, mha.k_proj, mha.v_proj))
    return mha.out_proj(_merge(_attend(q, k, v, (x.shape[-1] // nh) ** -0.5)))


def par_sdpa(x, mha):
    nh = mha.num_heads
    q, k, v = (_split(p(x), nh) for p in (mha.q_proj, mha.k_proj, mha.v_proj))
    return mha.out_proj(_merge(F.scaled_dot_product_attention(q, k, v)))


def par_einsum(x, mha):
    nh, C = mha.num_heads, x.shape[-1]
    q, k, v = (_split(p(x), nh) for p in (mha.q_proj, mha.k_proj, mha.v_proj))
    w = torch.softmax(torch.einsum("bhtd,bhsd->bhts", q, k) / math.sqrt(C // nh), dim=-1)
    return mha.out_proj(_merge(torch.einsum("bhts,bhsd->bhtd", w, v)))


def par_fused_qkv(x, mha):
    """One (3C, C) projection for q, k and v together, as GPT-2 does."""
    nh = mha.num_heads
    weight = torch.cat([mha.q_proj.weight, mha.k_proj.weight, mha.v_proj.weight])  # (3C, C)
    bias = None
    if mha.q_proj.bias is not None:
        bias = torch.cat([mha.q_proj.bias, mha.k_proj.bias, mha.v_proj.bias])
    q, k, v = (_split(t, nh) for t in F.linear(x, weight, bias).chunk(3, dim=-1))
    return mha.out_proj(_merge(F.scaled_dot_product_attention(q, k, v)))


# ------------------------------------------------------------------ wrong sequential


def seq_columns(x, mha):
    C = x.shape[-1]
    hs = C // mha.num_heads
    heads = []
    for h in range(mha.num_heads):
        cols = slice(h * hs, (h + 1) * hs)
        q, k, v = (
            x @ lin.weight[:, cols] + (0 if lin.bias is None else lin.bias[cols])
            for lin in (mha.q_proj, mha.k_proj, mha.v_proj)
        )
        heads.append(_attend(q, k, v, hs**-0.5))
    return mha.out_proj(torch.cat(heads, dim=-1))


def _cat_out(heads_fn):
    return lambda x, mha: mha.out_proj(torch.cat(heads_fn(x, mha), dim=-1))


seq_strided = _cat_out(
    lambda x, mha: _heads(x, mha, rows_of=lambda m, h, C: slice(h, C, m.num_heads))
)
seq_offset_h = _cat_out(
    lambda x, mha: _heads(x, mha, rows_of=lambda m, h, C: slice(h, h + C // m.num_heads))
)
seq_scale_C = _cat_out(lambda x, mha: _heads(x, mha, scale_of=lambda hs, C: C**-0.5))
seq_no_scale = _cat_out(lambda x, mha: _heads(x, mha, scale_of=lambda hs, C: 1.0))
seq_no_qkv_bias = _cat_out(lambda x, mha: _heads(x, mha, qkv_bias=False))
seq_k_as_v = _cat_out(lambda x, mha: _heads(x, mha, v_from="k"))


def seq_no_out_proj(x, mha):
    return torch.cat(_heads(x, mha), dim=-1)


def seq_no_out_bias(x, mha):
    return F.linear(torch.cat(_heads(x, mha), dim=-1), mha.out_proj.weight)


def seq_out_bias_per_head(x, mha):
    C = x.shape[-1]
    parts = [
        F.linear(head, mha.out_proj.weight[:, _rows(mha, h, C)], mha.out_proj.bias)
        for h, head in enumerate(_heads(x, mha))
    ]
    return sum(parts)


def seq_reversed_heads(x, mha):
    return mha.out_proj(torch.cat(_heads(x, mha)[::-1], dim=-1))


def seq_full_projection_each_head(x, mha):
    """Right values, but every head recomputes the whole projection and slices it."""
    C = x.shape[-1]
    hs = C // mha.num_heads
    heads = []
    for h in range(mha.num_heads):
        rows = _rows(mha, h, C)
        q, k, v = mha.q_proj(x)[..., rows], mha.k_proj(x)[..., rows], mha.v_proj(x)[..., rows]
        heads.append(_attend(q, k, v, hs**-0.5))
    return mha.out_proj(torch.cat(heads, dim=-1))


def calls_module(x, mha):
    return mha(x)[0]


def calls_functional(x, mha):
    B, T, C = x.shape
    bias = None
    if mha.q_proj.bias is not None:
        bias = torch.cat([mha.q_proj.bias, mha.k_proj.bias, mha.v_proj.bias])
    xt = x.transpose(0, 1)  # (T, B, C)
    out, _ = F.multi_head_attention_forward(
        xt,
        xt,
        xt,
        C,
        mha.num_heads,
        None,
        bias,
        None,
        None,
        False,
        0.0,
        mha.out_proj.weight,
        mha.out_proj.bias,
        use_separate_proj_weight=True,
        q_proj_weight=mha.q_proj.weight,
        k_proj_weight=mha.k_proj.weight,
        v_proj_weight=mha.v_proj.weight,
        need_weights=False,
    )
    return out.transpose(0, 1)


def returns_pair(x, mha):
    return seq_linear(x, mha), None


# -------------------------------------------------------------------- wrong parallel


def par_chunk_loop(x, mha):
    """Projects once, then attends head by head over torch.chunk: still a loop."""
    nh = mha.num_heads
    q, k, v = (p(x).chunk(nh, dim=-1) for p in (mha.q_proj, mha.k_proj, mha.v_proj))
    hs = x.shape[-1] // nh
    heads = [_attend(qh, kh, vh, hs**-0.5) for qh, kh, vh in zip(q, k, v, strict=True)]
    return mha.out_proj(torch.cat(heads, dim=-1))


def par_view_only(x, mha):
    B, T, C = x.shape
    nh = mha.num_heads
    q, k, v = (p(x).view(B, nh, T, C // nh) for p in (mha.q_proj, mha.k_proj, mha.v_proj))
    return mha.out_proj(_merge(_attend(q, k, v, (C // nh) ** -0.5)))


def par_scale_C(x, mha):
    nh = mha.num_heads
    q, k, v = (_split(p(x), nh) for p in (mha.q_proj, mha.k_proj, mha.v_proj))
    return mha.out_proj(_merge(_attend(q, k, v, x.shape[-1] ** -0.5)))


def par_no_out_proj(x, mha):
    nh = mha.num_heads
    q, k, v = (_split(p(x), nh) for p in (mha.q_proj, mha.k_proj, mha.v_proj))
    return _merge(F.scaled_dot_product_attention(q, k, v))


def par_wasted_scores(x, mha):
    """Right values, but the scores are computed twice."""
    nh = mha.num_heads
    q, k, v = (_split(p(x), nh) for p in (mha.q_proj, mha.k_proj, mha.v_proj))
    _ = q @ k.transpose(-2, -1)
    return mha.out_proj(_merge(_attend(q, k, v, (x.shape[-1] // nh) ** -0.5)))


# --------------------------------------------------------------------------- FLOPs


def flops_right(batch, seq_len, d_model, num_heads):
    return 8 * batch * seq_len * d_model**2 + 4 * batch * seq_len**2 * d_model


def flops_per_head(batch, seq_len, d_model, num_heads):
    hs = d_model // num_heads
    projections = 4 * 2 * batch * seq_len * d_model * d_model
    per_head = 2 * 2 * batch * seq_len * seq_len * hs
    return projections + num_heads * per_head


def _flops(proj=8, attn=4, scale=1.0, batch_power=1, attn_times_nh=False, attn_div_nh=False):
    def attention_flops(batch, seq_len, d_model, num_heads):
        b = batch**batch_power
        a = attn * b * seq_len**2 * d_model
        a = a * num_heads if attn_times_nh else a // num_heads if attn_div_nh else a
        return int(scale * (proj * b * seq_len * d_model**2 + a))

    return attention_flops


def flops_float(batch, seq_len, d_model, num_heads):
    return float(flops_right(batch, seq_len, d_model, num_heads))


def flops_tensor(batch, seq_len, d_model, num_heads):
    return torch.tensor(flops_right(batch, seq_len, d_model, num_heads))


CORRECT_SEQUENTIAL = {
    "linear_slices": seq_linear,
    "sdpa_per_head": seq_sdpa,
    "out_proj_per_head": seq_out_proj_per_head,
    "einsum": seq_einsum,
    "attention_loop_only": seq_attention_loop_only,
}


def par_nanogpt(x, mha):
    """nanoGPT's CausalSelfAttention.forward, its manual path without the causal mask: one
    c_attn projection (the three weights stacked) split into q, k, v, heads moved next to the
    batch, softmax(q kᵀ / √hs) v, the heads side by side again, c_proj."""
    B, T, C = x.size()  # batch size, sequence length, embedding dimensionality (n_embd)
    n_head = mha.num_heads
    c_attn_weight = torch.cat([mha.q_proj.weight, mha.k_proj.weight, mha.v_proj.weight])
    c_attn_bias = None
    if mha.q_proj.bias is not None:
        c_attn_bias = torch.cat([mha.q_proj.bias, mha.k_proj.bias, mha.v_proj.bias])
    q, k, v = F.linear(x, c_attn_weight, c_attn_bias).split(C, dim=2)
    k = k.view(B, T, n_head, C // n_head).transpose(1, 2)  # (B, nh, T, hs)
    q = q.view(B, T, n_head, C // n_head).transpose(1, 2)  # (B, nh, T, hs)
    v = v.view(B, T, n_head, C // n_head).transpose(1, 2)  # (B, nh, T, hs)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (B, nh, T, T)
    att = F.softmax(att, dim=-1)
    y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
    y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs side by side
    return mha.out_proj(y)


CORRECT_PARALLEL = {
    "nanoGPT CausalSelfAttention": par_nanogpt,
    "math": par_math,
    "sdpa": par_sdpa,
    "einsum": par_einsum,
    "fused_qkv": par_fused_qkv,
}
CORRECT_FLOPS = {"formula": flops_right, "per_head_sum": flops_per_head}

SEQ_VALUES = checks.check_mha_sequential_values
PAR_VALUES = checks.check_mha_parallel_values


def _same_flops_seq(fn, **kw):
    flops.check_same_flops(fn, par_math, **kw)


def _same_flops_par(fn, **kw):
    flops.check_same_flops(seq_linear, fn, **kw)


MISTAKES = [
    Mistake("seq_stub", stub, SEQ_VALUES, "not implemented yet"),
    Mistake("seq_batched", par_math, checks.check_mha_sequential_loops, "whatever the number"),
    Mistake("seq_calls_module", calls_module, SEQ_VALUES, "calls `mha(x)`"),
    Mistake("seq_calls_functional", calls_functional, SEQ_VALUES, "F.multi_head_attention"),
    Mistake("seq_returns_pair", returns_pair, SEQ_VALUES, "return only the output tensor"),
    Mistake("seq_columns", seq_columns, SEQ_VALUES, "uses columns"),
    Mistake("seq_strided", seq_strided, SEQ_VALUES, "every nh-th feature"),
    Mistake("seq_offset_h", seq_offset_h, SEQ_VALUES, "at feature h instead of h*hs"),
    Mistake("seq_no_out_proj", seq_no_out_proj, SEQ_VALUES, "without the output projection"),
    Mistake("seq_no_out_bias", seq_no_out_bias, SEQ_VALUES, "output projection's bias"),
    Mistake("seq_out_bias_per_head", seq_out_bias_per_head, SEQ_VALUES, "once per head"),
    Mistake("seq_no_qkv_bias", seq_no_qkv_bias, SEQ_VALUES, "biases of the q/k/v slices"),
    Mistake("seq_scale_C", seq_scale_C, SEQ_VALUES, "by √C"),
    Mistake("seq_no_scale", seq_no_scale, SEQ_VALUES, "does not scale"),
    Mistake("seq_reversed_heads", seq_reversed_heads, SEQ_VALUES, "wrong order"),
    Mistake("seq_k_as_v", seq_k_as_v, SEQ_VALUES, "keys as values"),
    Mistake(
        "seq_full_projection",
        seq_full_projection_each_head,
        _same_flops_seq,
        "full q/k/v projections for every head",
    ),
    Mistake("par_stub", stub, PAR_VALUES, "not implemented yet"),
    Mistake("par_loop", seq_linear, checks.check_mha_parallel_batches, "grows with the heads"),
    Mistake("par_chunk_loop", par_chunk_loop, checks.check_mha_parallel_batches, "grows"),
    Mistake("par_calls_module", calls_module, PAR_VALUES, "calls `mha(x)`"),
    Mistake("par_view_only", par_view_only, PAR_VALUES, "view alone scrambles"),
    Mistake("par_scale_C", par_scale_C, PAR_VALUES, "by √C"),
    Mistake("par_no_out_proj", par_no_out_proj, PAR_VALUES, "without the output projection"),
    Mistake("par_wasted_scores", par_wasted_scores, _same_flops_par, "matmul FLOPs where"),
    Mistake("flops_stub", stub, flops.check_attention_flops, "not implemented yet"),
    Mistake("flops_per_mac", _flops(scale=0.5), flops.check_attention_flops, "1 FLOP per"),
    Mistake(
        "flops_no_attention",
        _flops(attn=0),
        flops.check_attention_flops,
        "leaves out the attention products",
    ),
    Mistake(
        "flops_no_projections",
        _flops(proj=0),
        flops.check_attention_flops,
        "leaves out the projections",
    ),
    Mistake(
        "flops_no_out_proj",
        _flops(proj=6),
        flops.check_attention_flops,
        "misses the output projection",
    ),
    Mistake(
        "flops_one_attention_product",
        _flops(attn=2),
        flops.check_attention_flops,
        "only one of the two",
    ),
    Mistake(
        "flops_full_width_heads",
        _flops(attn_times_nh=True),
        flops.check_attention_flops,
        "full width C",
    ),
    Mistake(
        "flops_single_head",
        _flops(attn_div_nh=True),
        flops.check_attention_flops,
        "attention of a single head",
    ),
    Mistake(
        "flops_no_batch",
        _flops(batch_power=0),
        flops.check_attention_flops,
        "leaves out the batch",
    ),
    Mistake("flops_float", flops_float, flops.check_attention_flops, "return an int"),
    Mistake("flops_tensor", flops_tensor, flops.check_attention_flops, "return a Python int"),
]

QUIZ_RIGHT = {"q1": "c", "q2": "b", "q3": "a", "q4": "d"}
MISTAKES = tried(MISTAKES, runs=(HIDDEN,), caught=({},))  # the visible test catches them too

SEQUENTIAL_CHECKS = [SEQ_VALUES, checks.check_mha_sequential_loops]
PARALLEL_CHECKS = [PAR_VALUES, checks.check_mha_parallel_batches]
CORRECT = (
    correct(SEQUENTIAL_CHECKS, CORRECT_SEQUENTIAL, runs=VISIBLE_AND_HIDDEN)
    + correct(PARALLEL_CHECKS, CORRECT_PARALLEL, runs=VISIBLE_AND_HIDDEN)
    + correct([flops.check_attention_flops], CORRECT_FLOPS, runs=VISIBLE_AND_HIDDEN)
    # every sequential version beside the math one, the linear one beside every other parallel
    + correct([_same_flops_seq], CORRECT_SEQUENTIAL, runs=(HIDDEN,))
    + correct(
        [_same_flops_par],
        {name: fn for name, fn in CORRECT_PARALLEL.items() if name != "math"},
        runs=(HIDDEN,),
    )
)
STUBS = [(check, stub) for check in [*SEQUENTIAL_CHECKS, *PARALLEL_CHECKS]]
STUBS += [(flops.check_attention_flops, stub)]
REPLAY = [
    checks.check_mha_sequential_loops,
    checks.check_mha_parallel_batches,
    flops.check_attention_flops,
]
