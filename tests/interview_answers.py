"""Right answers to every variant and follow-up of the mock interview's problem bank, written the
way real codebases write them; ``tests/test_interview_mode.py`` grades each with its variant.

Shape legend: ``B`` batch, ``T`` query length, ``S`` key length, ``C`` = d_model, ``nh`` heads,
``nkv`` key/value heads, ``hs`` head size.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from interview_answers_more import ANSWERS as MORE_ANSWERS
from interview_answers_more import WRONG as MORE_WRONG
from interview_answers_serving import ANSWERS as SERVING_ANSWERS
from interview_answers_serving import WRONG as SERVING_WRONG
from torch import nn


def _attend(q, k, v, allowed=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T, S)
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)  # (..., T, S)
    return weights @ v, weights


def attention_blocked(q, k, v, blocked=None):
    return _attend(q, k, v, None if blocked is None else ~blocked)[0]


def attention_bias(q, k, v, bias=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T, S)
    if bias is not None:
        scores = scores + bias
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    return weights @ v, weights


def attention_seq_first(q, k, v, mask=None):
    out, weights = _attend(q.movedim(0, -2), k.movedim(0, -2), v.movedim(0, -2), mask)
    return out.movedim(-2, 0), weights  # (T, ..., d_v), (..., T, S)


def causal_mask(T, S=None, device=None):
    S = T if S is None else S
    return torch.ones(T, S, dtype=torch.bool, device=device).tril(S - T)


def causal_mask_blocked(T, S=None, device=None):
    return ~causal_mask(T, S, device)


def causal_mask_past_len(T, past_len=0, device=None):
    return causal_mask(T, T + past_len, device)


def causal_bias(T, S=None, device=None):
    allowed = causal_mask(T, S, device)
    return torch.zeros(allowed.shape, device=device).masked_fill(~allowed, float("-inf"))


def attention_mask(lengths, max_len, causal=True):
    keys = torch.arange(max_len, device=lengths.device) < lengths[:, None]  # (B, S)
    mask = keys[:, None, None, :].expand(-1, 1, max_len, max_len)  # (B, 1, T, S)
    return mask & causal_mask(max_len, device=lengths.device) if causal else mask


def window_mask(T, window, S=None):  # notebook 08's contract
    S = T if S is None else S
    position = torch.arange(S - T, S)[:, None]  # (T, 1): each query's place
    keys = torch.arange(S)  # (S,)
    return (keys <= position) & (keys > position - window)  # (T, S)


def window_blocked(T, window, S=None):
    return ~window_mask(T, window, S)


def window_past_len(T, window, past_len=0):
    return window_mask(T, window, T + past_len)


def window_bias(T, window, S=None):
    allowed = window_mask(T, window, S)
    return torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf"))


def rolling_cache_update(buffer, new, start):
    W, T = buffer.shape[2], new.shape[2]
    old = torch.arange(max(0, start - W + 1), start)  # positions the new queries still see
    recent = torch.cat([buffer[:, :, old % W], new], dim=2)  # read before overwriting
    buffer = buffer.clone()
    buffer[:, :, torch.arange(start, start + T) % W] = new
    return buffer, recent


def dropout_keep(q, k, v, keep_prob, training=True):
    _, weights = _attend(q, k, v)
    weights = F.dropout(weights, 1 - keep_prob, training)
    return weights @ v, weights


def dropout_out_only(q, k, v, p, training=True):
    _, weights = _attend(q, k, v)
    return F.dropout(weights, p, training) @ v


class SDPAAttention(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0)


def _heads(t, nh):  # (B, T, C) -> (B, nh, T, hs)
    B, T, C = t.shape
    return t.view(B, T, nh, C // nh).transpose(1, 2)


def _merge(y):  # (B, nh, T, hs) -> (B, T, C)
    B, nh, T, hs = y.shape
    return y.transpose(1, 2).reshape(B, T, nh * hs)


def mha_separate(x, w_q, w_k, w_v, w_out, num_heads):
    q, k, v = (_heads(x @ w.T, num_heads) for w in (w_q, w_k, w_v))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, T, hs)
    return _merge(y) @ w_out.T


def mha_packed(x, w_qkv, w_out, num_heads):  # nanoGPT's c_attn
    q, k, v = (_heads(t, num_heads) for t in (x @ w_qkv.T).split(x.shape[-1], dim=2))
    return _merge(F.scaled_dot_product_attention(q, k, v, is_causal=True)) @ w_out.T


def mha_seq_first(x, w_q, w_k, w_v, w_out, num_heads):
    return mha_separate(x.transpose(0, 1), w_q, w_k, w_v, w_out, num_heads).transpose(0, 1)


def mha_in_out(x, w_q, w_k, w_v, w_out, num_heads):
    return mha_separate(x, w_q.T, w_k.T, w_v.T, w_out.T, num_heads)


def mha_with_weights(x, w_q, w_k, w_v, w_out, num_heads):
    q, k, v = (_heads(x @ w.T, num_heads) for w in (w_q, w_k, w_v))
    T = x.shape[1]
    y, weights = _attend(q, k, v, torch.ones(T, T, dtype=torch.bool).tril())
    return _merge(y) @ w_out.T, weights


def gqa_attention(x, w_q, w_k, w_v, w_out, num_heads, num_kv_heads):
    q = _heads(x @ w_q.T, num_heads)
    k, v = (_heads(x @ w.T, num_kv_heads) for w in (w_k, w_v))  # (B, nkv, T, hs)
    n_rep = num_heads // num_kv_heads
    k, v = k.repeat_interleave(n_rep, 1), v.repeat_interleave(n_rep, 1)
    return _merge(F.scaled_dot_product_attention(q, k, v, is_causal=True)) @ w_out.T


def ported_neox(x, w_qkv, w_out, num_heads):  # GPT-NeoX: (B, T, nh, 3·hs) per head
    B, T, C = x.shape
    qkv = (x @ w_qkv.T).view(B, T, num_heads, 3 * (C // num_heads))
    q, k, v = qkv.transpose(1, 2).chunk(3, dim=-1)  # (B, nh, T, hs) each
    return _merge(F.scaled_dot_product_attention(q, k, v, is_causal=True)) @ w_out.T


def ported_conv1d(x, w_qkv, w_out, num_heads):  # GPT-2's Conv1D: x @ w
    return mha_packed(x, w_qkv.T, w_out.T, num_heads)


def cross_padding(decoder_x, encoder_out, key_padding_mask, q_proj, k_proj, v_proj, out_proj, nh):
    q = _heads(q_proj(decoder_x), nh)
    k, v = _heads(k_proj(encoder_out), nh), _heads(v_proj(encoder_out), nh)
    y, weights = _attend(q, k, v, ~key_padding_mask[:, None, None, :])
    return out_proj(_merge(y)), weights


def cross_seq_first(decoder_x, encoder_out, lengths, q_proj, k_proj, v_proj, out_proj, nh):
    padding = torch.arange(encoder_out.shape[0]) >= lengths[:, None]  # (B, S)
    dec, enc = decoder_x.transpose(0, 1), encoder_out.transpose(0, 1)
    out, weights = cross_padding(dec, enc, padding, q_proj, k_proj, v_proj, out_proj, nh)
    return out.transpose(0, 1), weights


def _block_attention(h, q, k, v, num_heads, causal):
    y = F.scaled_dot_product_attention(*(_heads(t, num_heads) for t in (q, k, v)), is_causal=causal)
    return _merge(y)


def block_separate(
    x, ln1, q_proj, k_proj, v_proj, out_proj, ln2, fc, proj, num_heads, causal=False
):
    h = ln1(x)
    x = x + out_proj(_block_attention(h, q_proj(h), k_proj(h), v_proj(h), num_heads, causal))
    return x + proj(F.gelu(fc(ln2(x))))


def block_gpt2(x, ln_1, c_attn, c_proj, ln_2, c_fc, mlp_proj, num_heads, causal=False):
    h = ln_1(x)
    q, k, v = c_attn(h).split(x.shape[-1], dim=2)
    x = x + c_proj(_block_attention(h, q, k, v, num_heads, causal))
    return x + mlp_proj(F.gelu(c_fc(ln_2(x))))


def block_param_count(d_model, d_mlp=None, bias=True):
    d_mlp = 4 * d_model if d_mlp is None else d_mlp
    C = d_model
    return 4 * C * C + 2 * C * d_mlp + 2 * C + bias * (7 * C + d_mlp)  # LayerNorms: 2C + 2C·bias


def repeat_bshd(x, n_rep):  # (B, S, nkv, hs) -> (B, S, nkv·n_rep, hs)
    return x.repeat_interleave(n_rep, dim=2)


def expand_kv(x, num_heads):  # Llama's expand-and-reshape
    B, nkv, S, hs = x.shape
    n_rep = num_heads // nkv
    return x[:, :, None].expand(B, nkv, n_rep, S, hs).reshape(B, num_heads, S, hs)


def _decode(x, k, v, q_proj, o_proj, nh, nkv):
    """Attention of the new tokens x (B, T, C) over the whole cache k, v (B, nkv, S, hs)."""
    T, S = x.shape[1], k.shape[2]
    q = _heads(q_proj(x), nh)
    allowed = torch.ones(T, S, dtype=torch.bool).tril(S - T)
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=True)
    return o_proj(_merge(y))


def decode_bshd(x, cache, q_proj, k_proj, v_proj, o_proj, num_heads, num_kv_heads):
    B, T, C = x.shape
    k = k_proj(x).view(B, T, num_kv_heads, C // num_heads)  # (B, T, nkv, hs)
    v = v_proj(x).view(B, T, num_kv_heads, C // num_heads)
    if cache is not None:
        k, v = torch.cat([cache[0], k], 1), torch.cat([cache[1], v], 1)
    out = _decode(x, k.transpose(1, 2), v.transpose(1, 2), q_proj, o_proj, num_heads, num_kv_heads)
    return out, (k, v)


def decode_static(x, k_cache, v_cache, pos, q_proj, k_proj, v_proj, o_proj, nh, nkv):
    T = x.shape[1]
    k_cache[:, :, pos : pos + T] = _heads(k_proj(x), nkv)
    v_cache[:, :, pos : pos + T] = _heads(v_proj(x), nkv)
    k, v = k_cache[:, :, : pos + T], v_cache[:, :, : pos + T]
    return _decode(x, k, v, q_proj, o_proj, nh, nkv)


def kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_value=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_value


def _pool(t, nh, nkv):
    if t is None:
        return None
    return t.reshape(nkv, nh // nkv, -1, *t.shape[1:]).mean(1).flatten(0, 1)


def pool_kv(w_k, w_v, b_k, b_v, num_heads, num_kv_heads):
    return tuple(_pool(t, num_heads, num_kv_heads) for t in (w_k, w_v, b_k, b_v))


def convert_state(state, num_heads, num_kv_heads):
    pooled = ("k_proj.", "v_proj.")
    return {
        key: _pool(t, num_heads, num_kv_heads) if key.startswith(pooled) else t.clone()
        for key, t in state.items()
    }


def gqa_param_count(d_model, num_heads, num_kv_heads, bias=False):
    if d_model % num_heads or num_heads % num_kv_heads:
        raise ValueError("num_heads must divide d_model and num_kv_heads num_heads")
    kv = num_kv_heads * (d_model // num_heads)
    return 2 * d_model * d_model + 2 * d_model * kv + bias * (2 * d_model + 2 * kv)


def _rotate(x, angles):  # split halves, angles (T, hs/2)
    x1, x2 = x.float().chunk(2, dim=-1)
    cos, sin = angles.cos(), angles.sin()
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).to(x.dtype)


def _angles(positions, hs, base):
    theta = base ** -(torch.arange(0, hs, 2, dtype=torch.float32) / hs)
    return positions.float()[:, None] * theta  # (T, hs/2)


def rope_interleaved(x, positions, base=10000.0):  # Meta's Llama, with complex numbers
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2).contiguous())
    turned = pairs * torch.polar(torch.ones(()), _angles(positions, x.shape[-1], base))
    return torch.view_as_real(turned).flatten(-2).to(x.dtype)


def rope_heads_third(x, positions, base=10000.0):  # (..., T, nh, hs)
    return _rotate(x, _angles(positions, x.shape[-1], base)[:, None, :])


def rope_cos_sin(x, cos, sin):
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).to(x.dtype)


def rope_both(x, positions, base=10000.0, interleaved=False):
    if interleaved:
        return rope_interleaved(x, positions, base)
    return _rotate(x, _angles(positions, x.shape[-1], base))


def merge_lse(o1, lse1, o2, lse2):  # flash-attn's split-KV combine
    lse = torch.logaddexp(lse1, lse2)  # (..., T)
    safe = torch.where(lse.isinf(), 0.0, lse)
    w1, w2 = torch.exp(lse1 - safe)[..., None], torch.exp(lse2 - safe)[..., None]
    return w1 * o1 + w2 * o2, lse


def merge_running(acc1, m1, l1, acc2, m2, l2):
    m = torch.maximum(m1, m2)
    safe = torch.where(m.isinf(), 0.0, m)
    a1, a2 = torch.exp(m1 - safe), torch.exp(m2 - safe)  # (..., T)
    return acc1 * a1[..., None] + acc2 * a2[..., None], m, l1 * a1 + l2 * a2


def tiled_attention(q, k, v, block_size=64, causal=False):
    T, S = q.shape[-2], k.shape[-2]
    qf, kf, vf = q.float(), k.float(), v.float()
    acc = torch.zeros(*q.shape[:-1], v.shape[-1])
    m = torch.full(q.shape[:-1], -math.inf)
    total = torch.zeros(q.shape[:-1])
    rows = torch.arange(T)[:, None] + S - T
    for start in range(0, S, block_size):
        s = qf @ kf[..., start : start + block_size, :].transpose(-2, -1) / math.sqrt(q.shape[-1])
        if causal:
            s = s.masked_fill(torch.arange(start, start + s.shape[-1]) > rows, -math.inf)
        block_acc = (s - s.amax(-1, keepdim=True).nan_to_num(0, 0, 0)).exp()
        block_m = s.amax(-1)
        block_acc = torch.where(block_m[..., None].isinf(), 0.0, block_acc)
        acc, m, total = merge_running(
            acc,
            m,
            total,
            block_acc @ vf[..., start : start + block_size, :],
            block_m,
            block_acc.sum(-1),
        )
    return torch.where(total[..., None] > 0, acc / total[..., None], 0.0).to(q.dtype)


ANSWERS = {
    ("attention", "blocked"): attention_blocked,
    ("attention", "bias"): attention_bias,
    ("attention", "seq_first"): attention_seq_first,
    ("attention", "extension"): causal_mask,
    ("causal_mask", "blocked"): causal_mask_blocked,
    ("causal_mask", "past_len"): causal_mask_past_len,
    ("causal_mask", "additive"): causal_bias,
    ("causal_mask", "extension"): attention_mask,
    ("attention_dropout", "keep_prob"): dropout_keep,
    ("attention_dropout", "out_only"): dropout_out_only,
    ("attention_dropout", "extension"): SDPAAttention,
    ("causal_mha", "packed"): mha_packed,
    ("causal_mha", "seq_first"): mha_seq_first,
    ("causal_mha", "in_out"): mha_in_out,
    ("causal_mha", "with_weights"): mha_with_weights,
    ("causal_mha", "extension"): gqa_attention,
    ("packed_port", "neox"): ported_neox,
    ("packed_port", "conv1d"): ported_conv1d,
    ("packed_port", "extension"): gqa_attention,
    ("repeat_kv", "extension"): gqa_attention,
    ("cross_attention", "extension"): attention_mask,
    ("cross_attention", "key_padding_mask"): cross_padding,
    ("cross_attention", "seq_first"): cross_seq_first,
    ("pre_ln_block", "separate"): block_separate,
    ("pre_ln_block", "gpt2"): block_gpt2,
    ("pre_ln_block", "extension"): block_param_count,
    ("repeat_kv", "bshd"): repeat_bshd,
    ("repeat_kv", "to_heads"): expand_kv,
    ("gqa_decode", "bshd"): decode_bshd,
    ("gqa_decode", "static"): decode_static,
    ("gqa_decode", "extension"): kv_cache_bytes,
    ("mha_to_gqa", "tensors"): pool_kv,
    ("mha_to_gqa", "state_dict"): convert_state,
    ("mha_to_gqa", "extension"): gqa_param_count,
    ("rope", "interleaved"): rope_interleaved,
    ("rope", "heads_third"): rope_heads_third,
    ("rope", "cos_sin"): rope_cos_sin,
    ("rope", "extension"): rope_both,
    ("online_merge", "lse"): merge_lse,
    ("online_merge", "running"): merge_running,
    ("online_merge", "extension"): tiled_attention,
    ("sliding_window", "blocked"): window_blocked,
    ("sliding_window", "past_len"): window_past_len,
    ("sliding_window", "additive"): window_bias,
    ("sliding_window", "extension"): rolling_cache_update,
}


# ------------------------------------------------------------ wrong answers and their diagnosis


def mha_not_causal(x, w_qkv, w_out, num_heads):
    q, k, v = (_heads(t, num_heads) for t in (x @ w_qkv.T).split(x.shape[-1], dim=2))
    return _merge(F.scaled_dot_product_attention(q, k, v)) @ w_out.T


def decode_static_not_written(x, k_cache, v_cache, pos, q_proj, k_proj, v_proj, o_proj, nh, nkv):
    k = torch.cat([k_cache[:, :, :pos], _heads(k_proj(x), nkv)], 2)  # a new tensor: the cache
    v = torch.cat([v_cache[:, :, :pos], _heads(v_proj(x), nkv)], 2)  # itself never changes
    return _decode(x, k, v, q_proj, o_proj, nh, nkv)


def merge_not_rescaled(acc1, m1, l1, acc2, m2, l2):
    return acc1 + acc2, torch.maximum(m1, m2), l1 + l2


def block_post_ln(x, ln1, q_proj, k_proj, v_proj, out_proj, ln2, fc, proj, num_heads, causal=False):
    x = ln1(x + out_proj(_block_attention(x, q_proj(x), k_proj(x), v_proj(x), num_heads, causal)))
    return ln2(x + proj(F.gelu(fc(x))))


WRONG = [  # (problem, variant, answer, words of its diagnosis)
    ("causal_mha", "packed", mha_not_causal, "apply a causal mask"),
    ("gqa_decode", "static", decode_static_not_written, "write them there in place"),
    ("repeat_kv", "bshd", lambda x, n_rep: x.repeat(1, 1, n_rep, 1), "n_rep, dim=2)"),
    ("online_merge", "running", merge_not_rescaled, "exp(m_old − m_new)"),
    ("pre_ln_block", "separate", block_post_ln, "post-LN"),
]

ANSWERS |= MORE_ANSWERS | SERVING_ANSWERS
ANSWERS[("sink_cache", "extension")] = ANSWERS[("sliding_window", "extension")]  # shared
ANSWERS[("debug_module", "extension")] = ANSWERS[("causal_mha", "extension")]
WRONG += MORE_WRONG + SERVING_WRONG


# One attempt's answer cell for the ``attention`` problem, written without the 1/sqrt(d_k), and
# the same cell put right: what a candidate's first and second runs hold.
UNSCALED_CELL = """
import math, torch
def attention(q, k, v, bias=None):
    scores = q @ k.transpose(-2, -1)  # the 1/sqrt(d_k) is missing
    if bias is not None:
        scores = scores + bias
    weights = torch.softmax(scores, -1).nan_to_num(0.0)
    return weights @ v, weights
"""
SCALED_CELL = UNSCALED_CELL.replace(
    "q @ k.transpose(-2, -1)", "q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])"
)
