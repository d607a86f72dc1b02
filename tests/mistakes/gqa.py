"""Learner implementations of notebook 04: correct ones and a catalogue of classic mistakes.

Shape legend: ``B`` batch, ``T`` new positions, ``S`` cached + new positions, ``C`` = d_model,
``nh`` query heads, ``nkv`` key/value heads, ``hs`` = C // nh, ``n_rep`` = nh // nkv.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention.bias import causal_lower_right, causal_upper_left

from autograder.checks import nb04_gqa as checks
from autograder.checks import nb04_gqa_attention as attention
from autograder.tools.nb04_gqa import TorchGroupedQueryAttention

from . import Mistake, correct, stub
from .masking import hf_make_causal_mask

# ----------------------------------------------------------------------------- repeat_kv


def repeat_interleave(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=1)  # (B, nkv*n_rep, S, hs)


def repeat_expand(x, n_rep):  # the Llama reference code
    B, nkv, S, hs = x.shape
    return x[:, :, None].expand(B, nkv, n_rep, S, hs).reshape(B, nkv * n_rep, S, hs)


def repeat_index(x, n_rep):
    heads = torch.arange(x.shape[1] * n_rep) // n_rep  # query head h reads kv head h // n_rep
    return x[:, heads]  # (B, nh, S, hs)


def repeat_kv(hidden_states, n_rep):
    """Hugging Face's repeat_kv (modeling_llama.py), the input itself when n_rep is 1."""
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(
        batch, num_key_value_heads, n_rep, slen, head_dim
    )  # (B, nkv, n_rep, S, hs)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def repeat_kv_meta(x, n_rep):
    """Meta's llama repeat_kv, written for its (bs, slen, n_kv_heads, head_dim) layout: the
    course's (B, nkv, S, hs) transposed in and out."""
    x = x.transpose(1, 2)  # (B, S, nkv, hs)
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x.transpose(1, 2)
    x = x[:, :, :, None, :].expand(bs, slen, n_kv_heads, n_rep, head_dim)  # (B, S, nkv, n_rep, hs)
    return x.reshape(bs, slen, n_kv_heads * n_rep, head_dim).transpose(1, 2)  # (B, nh, S, hs)


def repeat_index_list(x, n_rep):
    """The index as a Python list made a tensor: it depends on the sizes only."""
    heads = torch.tensor([h // n_rep for h in range(x.shape[1] * n_rep)])  # (nh,)
    return x[:, heads]  # (B, nh, S, hs)


CORRECT_REPEAT = {
    "interleave": repeat_interleave,
    "expand": repeat_expand,
    "index": repeat_index,
    "index_list": repeat_index_list,
}
CORRECT_REPEAT |= {"Hugging Face repeat_kv": repeat_kv, "Meta llama repeat_kv": repeat_kv_meta}

REPEAT_MISTAKES = [
    Mistake(
        "repeat_kv: repeat (tiles heads)",
        lambda x, n_rep: x.repeat(1, n_rep, 1, 1),
        checks.check_repeat_kv,
        "repeat_interleave",
    ),
    Mistake(
        "repeat_kv: along positions",
        lambda x, n_rep: x.repeat_interleave(n_rep, dim=2),
        checks.check_repeat_kv,
        "head dimension (dim=1)",
    ),
    Mistake(
        "repeat_kv: expand without reshape",
        lambda x, n_rep: x[:, :, None].expand(-1, -1, n_rep, -1, -1),
        checks.check_repeat_kv,
        ".reshape",
    ),
]

# ---------------------------------------------------------------------------- the module


class GQAManual(nn.Module):
    """repeat_kv, then softmax(q kᵀ / √hs) with a bottom-right causal mask; each step swappable."""

    repeat = staticmethod(repeat_interleave)

    def __init__(self, d_model, num_heads, num_kv_heads, bias=False):
        super().__init__()
        if d_model % num_heads or num_heads % num_kv_heads:
            raise ValueError("d_model % num_heads and num_heads % num_kv_heads must be 0")
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        hs = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, self.kv_width(d_model, num_kv_heads * hs), bias=bias)
        self.v_proj = nn.Linear(d_model, self.kv_width(d_model, num_kv_heads * hs), bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def kv_width(self, d_model, narrow):
        return narrow

    def split(self, t, heads):
        B, T, _ = t.shape
        return t.view(B, T, heads, -1).transpose(1, 2)  # (B, heads, T, hs)

    def append(self, past, new):
        return new if past is None else torch.cat([past, new], dim=2)  # (B, nkv, S, hs)

    def mask(self, T, S, causal, has_past):
        if not causal:
            return None
        return torch.ones(T, S, dtype=torch.bool).tril(S - T)  # (T, S), bottom-right

    def attend(self, q, k, v, allowed):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, nh, T, S)
        if allowed is not None:
            scores = scores.masked_fill(~allowed, float("-inf"))
        return torch.softmax(scores, dim=-1) @ v  # (B, nh, T, hs)

    def forward(self, x, past_kv=None, causal=True):
        B, T, C = x.shape
        q = self.split(self.q_proj(x), self.num_heads)  # (B, nh, T, hs)
        k = self.split(self.k_proj(x), self.num_kv_heads)  # (B, nkv, T, hs)
        v = self.split(self.v_proj(x), self.num_kv_heads)  # (B, nkv, T, hs)
        k_all = self.append(None if past_kv is None else past_kv[0], k)  # (B, nkv, S, hs)
        v_all = self.append(None if past_kv is None else past_kv[1], v)  # (B, nkv, S, hs)
        n_rep = self.num_heads // self.num_kv_heads
        allowed = self.mask(T, k_all.shape[2], causal, past_kv is not None)
        out = self.attend(q, self.repeat(k_all, n_rep), self.repeat(v_all, n_rep), allowed)
        out = out.transpose(1, 2).reshape(B, T, C)  # (B, T, C)
        return self.out_proj(out), self.cached(k_all, v_all, k, v)

    def cached(self, k_all, v_all, k, v):
        return k_all, v_all


class GQAExpandIsCausal(GQAManual):
    """Llama-style repeat; SDPA's is_causal without a cache, an explicit mask with one."""

    repeat = staticmethod(repeat_expand)

    def attend(self, q, k, v, allowed):
        if allowed is not None and allowed.shape[0] == allowed.shape[1]:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)


class GQACausalBias(GQAManual):
    """PyTorch's bottom-right causal bias as SDPA's attn_mask, as notebook 03 recommends;
    without a cache, the top-left one (the same mask when T = S)."""

    def mask(self, T, S, causal, has_past):
        if not causal:
            return None
        return causal_lower_right(T, S) if has_past else causal_upper_left(T, S)  # CausalBias

    def attend(self, q, k, v, allowed):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)  # (B, nh, T, hs)


class GQAGrouped(GQAManual):
    """No repeat at all: queries grouped as (B, nkv, n_rep, T, hs) broadcast against the cache."""

    def attend(self, q, k, v, allowed):
        B, nh, T, hs = q.shape
        nkv = k.shape[1]
        q = q.view(B, nkv, nh // nkv, T, hs)  # (B, nkv, n_rep, T, hs)
        scores = q @ k[:, :, None].transpose(-2, -1) / math.sqrt(hs)  # (B, nkv, n_rep, T, S)
        if allowed is not None:
            scores = scores.masked_fill(~allowed, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v[:, :, None]  # (B, nkv, n_rep, T, hs)
        return out.reshape(B, nh, T, hs)  # (B, nh, T, hs)

    repeat = staticmethod(lambda t, n_rep: t)  # grouping happens inside attend


def eager_attention_forward(module, query, key, value, attention_mask, scaling, dropout=0.0):
    """Hugging Face's eager_attention_forward (modeling_llama.py)."""
    key_states = repeat_kv(key, module.num_key_value_groups)
    value_states = repeat_kv(value, module.num_key_value_groups)
    attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling  # (B, nh, T, S)
    if attention_mask is not None:
        causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
        attn_weights = attn_weights + causal_mask
    attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    attn_weights = nn.functional.dropout(attn_weights, p=dropout, training=module.training)
    attn_output = torch.matmul(attn_weights, value_states)  # (B, nh, T, hs)
    attn_output = attn_output.transpose(1, 2).contiguous()  # (B, T, nh, hs)
    return attn_output, attn_weights


class GQAHuggingFace(nn.Module):
    """LlamaAttention as Hugging Face writes it: ``hidden_shape`` views, the cache appended
    (what DynamicCache.update does), a float causal mask from _make_causal_mask with the cache
    as past positions, eager_attention_forward; ``out_proj`` is its ``o_proj``."""

    def __init__(self, d_model, num_heads, num_kv_heads, bias=False):
        super().__init__()
        if d_model % num_heads or num_heads % num_kv_heads:
            raise ValueError("d_model % num_heads and num_heads % num_kv_heads must be 0")
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.head_dim = d_model // num_heads
        self.num_key_value_groups = num_heads // num_kv_heads
        self.scaling = self.head_dim**-0.5
        self.q_proj = nn.Linear(d_model, num_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=bias)
        self.out_proj = nn.Linear(num_heads * self.head_dim, d_model, bias=bias)

    def forward(self, x, past_kv=None, causal=True):
        input_shape = x.shape[:-1]  # (B, T)
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_proj(x).view(hidden_shape).transpose(1, 2)  # (B, nh, T, hs)
        key_states = self.k_proj(x).view(hidden_shape).transpose(1, 2)  # (B, nkv, T, hs)
        value_states = self.v_proj(x).view(hidden_shape).transpose(1, 2)  # (B, nkv, T, hs)
        if past_kv is not None:
            key_states = torch.cat([past_kv[0], key_states], dim=-2)  # (B, nkv, S, hs)
            value_states = torch.cat([past_kv[1], value_states], dim=-2)  # (B, nkv, S, hs)
        attention_mask = None
        if causal:
            T, S = x.shape[1], key_states.shape[-2]
            mask = hf_make_causal_mask(T, S - T, query_states.dtype, x.device)  # (T, S)
            attention_mask = mask[None, None]  # (1, 1, T, S)
        attn_output, _ = eager_attention_forward(
            self, query_states, key_states, value_states, attention_mask, self.scaling
        )
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()  # (B, T, C)
        return self.out_proj(attn_output), (key_states, value_states)


CORRECT_GQA = {
    "manual": GQAManual,
    "Hugging Face LlamaAttention": GQAHuggingFace,
    "expand_is_causal": GQAExpandIsCausal,
    "grouped": GQAGrouped,
    "causal_lower_right": GQACausalBias,
    "torch_enable_gqa": TorchGroupedQueryAttention,
}


class GQAFullWidthKV(GQAManual):
    def kv_width(self, d_model, narrow):
        return d_model


class GQATiled(GQAManual):
    repeat = staticmethod(lambda x, n_rep: x.repeat(1, n_rep, 1, 1))


class GQANeverMasks(GQAManual):
    def mask(self, T, S, causal, has_past):
        return None


class GQAAlwaysMasks(GQAManual):
    def mask(self, T, S, causal, has_past):
        return super().mask(T, S, True, has_past)


class GQATopLeft(GQAManual):
    """``is_causal=True`` passed to SDPA whatever the cache: aligned top-left."""

    def attend(self, q, k, v, allowed):
        return F.scaled_dot_product_attention(q, k, v, is_causal=allowed is not None)


class GQANoMaskWithCache(GQAManual):
    """Masks only without a cache: right for single tokens, wrong for chunks."""

    def mask(self, T, S, causal, has_past):
        return None if has_past else super().mask(T, S, causal, has_past)


class GQAIgnoresPast(GQAManual):
    """Caches correctly but attends only to the new keys."""

    def forward(self, x, past_kv=None, causal=True):
        out, _ = super().forward(x, None, causal)
        k = self.split(self.k_proj(x), self.num_kv_heads)  # (B, nkv, T, hs)
        v = self.split(self.v_proj(x), self.num_kv_heads)  # (B, nkv, T, hs)
        if past_kv is not None:
            k, v = torch.cat([past_kv[0], k], 2), torch.cat([past_kv[1], v], 2)  # (B, nkv, S, hs)
        return out, (k, v)


class GQANotAppended(GQAManual):
    def cached(self, k_all, v_all, k, v):
        return k, v


class GQAAppendedOnHeads(GQAManual):
    def append(self, past, new):
        return new if past is None else torch.cat([past, new], dim=1)


class GQACachesRepeated(GQAManual):
    def cached(self, k_all, v_all, k, v):
        n_rep = self.num_heads // self.num_kv_heads
        return self.repeat(k_all, n_rep), self.repeat(v_all, n_rep)  # (B, nh, S, hs)


class GQANewFirst(GQAManual):
    def append(self, past, new):
        return new if past is None else torch.cat([new, past], dim=2)


class GQASwappedCache(GQAManual):
    def cached(self, k_all, v_all, k, v):
        return v_all, k_all


class GQANoValueError(GQAManual):
    def __init__(self, d_model, num_heads, num_kv_heads, bias=False):
        nn.Module.__init__(self)
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        hs = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, num_kv_heads * hs, bias=bias)
        self.v_proj = nn.Linear(d_model, num_kv_heads * hs, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)


class GQAScaledByModelWidth(GQAManual):
    def attend(self, q, k, v, allowed):
        return super().attend(q / math.sqrt(self.num_heads), k, v, allowed)  # 1/√C overall


GQA_MISTAKES = [
    Mistake(
        "GQA: full-width k/v", GQAFullWidthKV, attention.check_gqa_structure, "num_kv_heads * hs"
    ),
    Mistake("GQA: no ValueError", GQANoValueError, attention.check_gqa_structure, "ValueError"),
    Mistake(
        "GQA: repeat, not repeat_interleave",
        GQATiled,
        attention.check_gqa_matches_torch,
        "repeat_interleave",
    ),
    Mistake(
        "GQA: causal ignored",
        GQANeverMasks,
        attention.check_gqa_matches_torch,
        "apply a causal mask",
    ),
    Mistake(
        "GQA: causal=False ignored",
        GQAAlwaysMasks,
        attention.check_gqa_matches_torch,
        "only when `causal` is True",
    ),
    Mistake(
        "GQA: scaled by sqrt(d_model)",
        GQAScaledByModelWidth,
        attention.check_gqa_matches_torch,
        "√d_model",
    ),
    Mistake(
        "GQA: cache not appended",
        GQANotAppended,
        checks.check_gqa_kv_cache,
        "only the new positions",
    ),
    Mistake(
        "GQA: cache not appended (decoding)",
        GQANotAppended,
        checks.check_gqa_decoding,
        "only the new positions",
    ),
    Mistake(
        "GQA: appended on the head dim", GQAAppendedOnHeads, checks.check_gqa_kv_cache, "dim=2"
    ),
    Mistake(
        "GQA: cache holds repeated heads",
        GQACachesRepeated,
        checks.check_gqa_kv_cache,
        "before repeat_kv",
    ),
    Mistake("GQA: new positions first", GQANewFirst, checks.check_gqa_kv_cache, "before the past"),
    Mistake("GQA: (v, k) cache", GQASwappedCache, checks.check_gqa_kv_cache, "returns (v, k)"),
    Mistake("GQA: repeat (decoding)", GQATiled, checks.check_gqa_decoding, "repeat_interleave"),
    Mistake("GQA: top-left causal mask", GQATopLeft, checks.check_gqa_decoding, "top-left"),
    Mistake(
        "GQA: no mask with a cache",
        GQANoMaskWithCache,
        checks.check_gqa_decoding,
        "causal mask among themselves",
    ),
    Mistake(
        "GQA: ignores the past", GQAIgnoresPast, checks.check_gqa_decoding, "only to the new keys"
    ),
]

# ------------------------------------------------------------------------------ counting


def count_formula(d_model, num_heads, num_kv_heads, bias=False):
    if d_model % num_heads or num_heads % num_kv_heads:
        raise ValueError("indivisible sizes")
    kv = num_kv_heads * (d_model // num_heads)
    return 2 * d_model * d_model + 2 * d_model * kv + bias * (2 * d_model + 2 * kv)


def count_per_layer(d_model, num_heads, num_kv_heads, bias=False):
    if d_model % num_heads or num_heads % num_kv_heads:
        raise ValueError("indivisible sizes")
    hs = d_model // num_heads
    sizes = [(d_model, d_model), (d_model, num_kv_heads * hs), (d_model, num_kv_heads * hs)]
    sizes.append((d_model, d_model))
    return sum(i * o + (o if bias else 0) for i, o in sizes)


CORRECT_COUNT = {"formula": count_formula, "per_layer": count_per_layer}


def count_by_building(d_model, num_heads, num_kv_heads, bias=False):
    with torch.device("meta"):  # no memory, but still tensors
        module = TorchGroupedQueryAttention(d_model, num_heads, num_kv_heads, bias=bias)
    return sum(p.numel() for p in module.parameters())


def _checked(formula):
    def count(d_model, num_heads, num_kv_heads, bias=False):
        if d_model % num_heads or num_heads % num_kv_heads:
            raise ValueError("indivisible sizes")
        return formula(d_model, d_model // num_heads, num_kv_heads, bias)

    return count


def bytes_formula(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_value=2):
    return 2 * num_layers * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_value


def bytes_per_token(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_value=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_value  # K and V
    return per_token * seq_len * batch_size


CORRECT_BYTES = {"formula": bytes_formula, "per_token": bytes_per_token}


def _bytes(formula):
    def kv_cache_bytes(
        num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_value=2
    ):
        return formula(num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_value)

    return kv_cache_bytes


COUNT_MISTAKES = [
    Mistake(
        "count: k/v as wide as q",
        _checked(lambda C, hs, nkv, b: 4 * C * C + 4 * C * b),
        checks.check_gqa_param_count,
        "k_proj and v_proj are narrower",
    ),
    Mistake(
        "count: nkv * C wide k/v",
        _checked(lambda C, hs, nkv, b: 2 * C * C + 2 * C * nkv * C + 4 * C * b),
        checks.check_gqa_param_count,
        "each kv head is hs",
    ),
    Mistake(
        "count: k/v biases of d_model",
        _checked(lambda C, hs, nkv, b: 2 * C * C + 2 * C * nkv * hs + 4 * C * b),
        checks.check_gqa_param_count,
        "biases have num_kv_heads * hs",
    ),
    Mistake(
        "count: builds the module",
        count_by_building,
        checks.check_gqa_param_count,
        "creates tensors",
    ),
    Mistake(
        "count: no ValueError",
        lambda C, nh, nkv, bias=False: (
            2 * C * C + 2 * C * nkv * (C // nh) + bias * (2 * C + 2 * nkv * (C // nh))
        ),
        checks.check_gqa_param_count,
        "ValueError",
    ),
    Mistake(
        "bytes: no factor 2 for K and V",
        _bytes(lambda L, nkv, hd, S, B, nb: L * nkv * hd * S * B * nb),
        checks.check_kv_cache_bytes,
        "K and V: multiply by 2",
    ),
    Mistake(
        "bytes: ignores the batch",
        _bytes(lambda L, nkv, hd, S, B, nb: 2 * L * nkv * hd * S * nb),
        checks.check_kv_cache_bytes,
        "multiply by batch_size",
    ),
    Mistake(
        "bytes: one layer",
        _bytes(lambda L, nkv, hd, S, B, nb: 2 * nkv * hd * S * B * nb),
        checks.check_kv_cache_bytes,
        "multiply by num_layers",
    ),
    Mistake(
        "bytes: counts values",
        _bytes(lambda L, nkv, hd, S, B, nb: 2 * L * nkv * hd * S * B),
        checks.check_kv_cache_bytes,
        "multiply by bytes_per_value",
    ),
    Mistake(
        "bytes: float",
        _bytes(lambda L, nkv, hd, S, B, nb: 2.0 * L * nkv * hd * S * B * nb),
        checks.check_kv_cache_bytes,
        "should return an int",
    ),
]

# ------------------------------------------------------------------------- MHA -> GQA


def _convert(pool, bias_pool=None, share=False):
    """An mha_to_gqa that pools k/v weights with ``pool(weight, nh, nkv)``."""

    def mha_to_gqa(mha, num_kv_heads):
        C, nh = mha.q_proj.in_features, mha.num_heads
        bias = mha.q_proj.bias is not None
        gqa = GQAManual(C, nh, num_kv_heads, bias=bias and bias_pool is not False)
        with torch.no_grad():
            for name in ("q_proj", "out_proj"):
                mine, theirs = getattr(gqa, name), getattr(mha, name)
                if share:
                    setattr(gqa, name, theirs)
                    continue
                mine.weight.copy_(theirs.weight)
                if mine.bias is not None:
                    mine.bias.copy_(theirs.bias)
            for name in ("k_proj", "v_proj"):
                mine, theirs = getattr(gqa, name), getattr(mha, name)
                mine.weight.copy_(pool(theirs.weight, nh, num_kv_heads))
                if gqa.q_proj.bias is not None and mine.bias is not None:
                    mine.bias.copy_((bias_pool or pool)(theirs.bias, nh, num_kv_heads))
        return gqa

    return mha_to_gqa


def pool_view_mean(t, nh, nkv):
    hs = t.shape[0] // nh
    return t.reshape(nkv, nh // nkv, hs, *t.shape[1:]).mean(1).reshape(nkv * hs, *t.shape[1:])


def pool_loop(t, nh, nkv):
    heads = t.chunk(nh, dim=0)  # nh slices of hs rows
    n_rep = nh // nkv
    return torch.cat([sum(heads[g * n_rep : (g + 1) * n_rep]) / n_rep for g in range(nkv)])


def pool_strided(t, nh, nkv):
    hs = t.shape[0] // nh
    return t.reshape(nh // nkv, nkv, hs, *t.shape[1:]).mean(0).reshape(nkv * hs, *t.shape[1:])


def pool_sum(t, nh, nkv):
    return pool_view_mean(t, nh, nkv) * (nh // nkv)


def pool_first(t, nh, nkv):
    hs = t.shape[0] // nh
    return t.reshape(nkv, nh // nkv, hs, *t.shape[1:])[:, 0].reshape(nkv * hs, *t.shape[1:])


CORRECT_CONVERT = {"view_mean": _convert(pool_view_mean), "loop": _convert(pool_loop)}

CONVERT_MISTAKES = [
    Mistake(
        "convert: strided groups", _convert(pool_strided), checks.check_mha_to_gqa, "(strided)"
    ),
    Mistake("convert: sum", _convert(pool_sum), checks.check_mha_to_gqa, "take their mean"),
    Mistake(
        "convert: first head", _convert(pool_first), checks.check_mha_to_gqa, "only the first head"
    ),
    Mistake(
        "convert: drops biases",
        _convert(pool_view_mean, bias_pool=False),
        checks.check_mha_to_gqa,
        "drops the MHA's biases",
    ),
    Mistake(
        "convert: shares q/out",
        _convert(pool_view_mean, share=True),
        checks.check_mha_to_gqa,
        "shares its tensor",
    ),
    Mistake(
        "convert: full-width GQA",
        lambda mha, nkv: GQAFullWidthKV(
            mha.q_proj.in_features, mha.num_heads, nkv, bias=mha.q_proj.bias is not None
        ),
        checks.check_mha_to_gqa,
        "num_kv_heads * hs",
    ),
]

MISTAKES = REPEAT_MISTAKES + GQA_MISTAKES + COUNT_MISTAKES + CONVERT_MISTAKES

GQA_CHECKS = [
    attention.check_gqa_structure,
    attention.check_gqa_matches_torch,
    checks.check_gqa_kv_cache,
    checks.check_gqa_decoding,
]
CORRECT = (
    correct([checks.check_repeat_kv], CORRECT_REPEAT)
    + correct(GQA_CHECKS, CORRECT_GQA)
    + correct([checks.check_gqa_param_count], CORRECT_COUNT)
    + correct([checks.check_kv_cache_bytes], CORRECT_BYTES)
    + correct([checks.check_mha_to_gqa], CORRECT_CONVERT)
)


class Stub:
    """The learner's class before answering: __init__ is the nbgrader stub."""

    def __init__(self, d_model, num_heads, num_kv_heads, bias=False):
        raise NotImplementedError()


STUBS = (
    [(checks.check_repeat_kv, stub)]
    + [(check, Stub) for check in GQA_CHECKS]
    + [(checks.check_gqa_param_count, stub), (checks.check_kv_cache_bytes, stub)]
    + [(checks.check_mha_to_gqa, stub)]
)
REPLAY = [checks.check_repeat_kv, checks.check_gqa_decoding, checks.check_mha_to_gqa]
