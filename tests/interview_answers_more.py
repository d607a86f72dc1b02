"""Right and wrong answers to the mock interview's problems added in issue 46 (RMSNorm/SwiGLU,
RoPE scaling, ALiBi, the sink cache, MLA, the tiled backward, sampling, left padding, the debug
round), built on the course's own right answers (``tests/mistakes``) where one exists: each
variant's answer is the course's, adapted the way a codebase with that contract writes it.
``interview_answers`` merges them into its ``ANSWERS`` and ``WRONG``.

Shape legend: ``B`` batch, ``T`` queries, ``S`` keys, ``V`` vocabulary, ``L`` padded length.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from mistakes import alibi, gpu_backward, mla, rope_scaling, sinks
from torch import nn

from autograder.interview import problems_debug


def rms_norm(x, weight, eps=1e-6):
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).type_as(x) * weight


def rms_norm_gemma(x, weight, eps=1e-6):
    return rms_norm(x, 1 + weight, eps)


def rms_norm_l2(x, weight, eps=1e-6):  # the L2 norm, not the root mean square
    return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps) * weight


class SwiGLUFused(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.gate_up_proj = nn.Linear(dim, 2 * hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)


class SwiGLUFusedSwapped(SwiGLUFused):  # the halves read the other way round
    def forward(self, x):
        up, gate = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)


def rope_hf_config(config, seq_len):
    scaling = dict(config["rope_scaling"])
    kind, factor = scaling.pop("rope_type"), scaling.pop("factor")
    original = scaling.pop("original_max_position_embeddings", 4096)
    return rope_scaling.params_hf(
        kind, config["head_dim"], config["rope_theta"], factor, original, seq_len, **scaling
    )


def rope_dict(rope_type, hs, base, factor=1.0, original_max_position=4096, seq_len=None, **band):
    inv_freq, attention = rope_scaling.params_hf(
        rope_type, hs, base, factor, original_max_position, seq_len, **band
    )
    return {"inv_freq": inv_freq, "attention_scaling": attention}


def rope_dict_static(rope_type, hs, base, factor=1.0, original_max_position=4096, **band):
    """Dynamic NTK read as static: the base raised whatever the length."""
    return rope_dict(rope_type, hs, base, factor, original_max_position, None, **band)


def alibi_positions(slopes, q_positions, k_positions):
    distance = q_positions[:, None] - k_positions[None, :]  # (T, S): p - j
    bias = -slopes[:, None, None] * distance  # (nh, T, S)
    return bias.masked_fill(distance < 0, float("-inf"))


def alibi_positions_positive(slopes, q_positions, k_positions):
    return -alibi_positions(slopes, q_positions, k_positions).nan_to_num(neginf=0.0)


def slopes_shard(num_heads, rank=0, world_size=1):
    per_rank = num_heads // world_size
    return alibi.slopes_bloom(num_heads)[rank * per_rank : (rank + 1) * per_rank]


def slopes_shard_local(num_heads, rank=0, world_size=1):  # the slopes of a smaller model
    return alibi.slopes_bloom(num_heads // world_size)


def alibi_batched(slopes, T, S=None):
    return alibi.bias_distance(slopes, T, S)[None]


def _bshd(fn):
    def sink_attention(q, k, v, past_k, past_v, n_sink, window):
        out, (keys, values) = fn(
            *(t.transpose(1, 2) for t in (q, k, v, past_k, past_v)), n_sink, window
        )
        return out.transpose(1, 2), (keys.transpose(1, 2), values.transpose(1, 2))

    return sink_attention


def _stacked(fn):
    def sink_attention(q, k, v, past_kv, n_sink, window):
        out, (keys, values) = fn(q, k, v, past_kv[0], past_kv[1], n_sink, window)
        return out, torch.stack((keys, values))

    return sink_attention


def sink_no_sinks(q, k, v, past_k, past_v, n_sink, window):  # a plain window of n_sink + window
    return sinks._sink(sinks=False)(q, k, v, past_k, past_v, n_sink, window)


class _PackedCache:
    """Mixed into the course's MLA: the cache is one tensor (B, S, d_latent + d_rope)."""

    def forward(self, x, past_kv=None):
        past = None if past_kv is None else past_kv.split([self.d_latent, self.d_rope], dim=-1)
        out, cache = super().forward(x, past)
        return out, torch.cat(cache, dim=-1)


class _KeyedCache:
    def forward(self, x, past_kv=None):
        past = None if past_kv is None else (past_kv["latent"], past_kv["k_rope"])
        out, (latent, k_rope) = super().forward(x, past)
        return out, {"latent": latent, "k_rope": k_rope}


class MLAPacked(_PackedCache, mla.MLAManual):
    pass


class MLAKeyed(_KeyedCache, mla.MLAManual):
    pass


class AbsorbedPacked(_PackedCache, mla.AbsorbedManual):
    pass


class MLAPackedNoRope(_PackedCache, mla.NoRope):
    pass


def backward_log2(q, k, v, o, lse2, do, block_size=64):
    return gpu_backward.backward_key_blocks(q, k, v, o, lse2 * math.log(2), do, block_size)


def backward_log2_as_natural(q, k, v, o, lse2, do, block_size=64):
    return gpu_backward.backward_key_blocks(q, k, v, o, lse2, do, block_size)


def backward_log2_causal(q, k, v, o, lse2, do, block_size=64, causal=False):
    lse = lse2 * math.log(2)
    return gpu_backward.backward_key_blocks(q, k, v, o, lse, do, block_size, causal)


def backward_log2_not_causal(q, k, v, o, lse2, do, block_size=64, causal=False):
    return backward_log2(q, k, v, o, lse2, do, block_size)


def backward_delta(q, k, v, delta, lse, do, block_size=64):
    """FlashAttention-2's key-block loop, D given."""
    dtype, scale = q.dtype, q.shape[-1] ** -0.5
    work = torch.promote_types(dtype, torch.float32)
    q, k, v, delta, lse, do = (t.to(work) for t in (q, k, v, delta, lse, do))
    dq, dk, dv = torch.zeros_like(q), [], []
    for start in range(0, k.shape[-2], block_size):
        kb, vb = k[..., start : start + block_size, :], v[..., start : start + block_size, :]
        p = torch.exp(q @ kb.transpose(-2, -1) * scale - lse[..., None])  # (..., T, b)
        dv.append(p.transpose(-2, -1) @ do)
        ds = p * (do @ vb.transpose(-2, -1) - delta[..., None])  # (..., T, b)
        dq += ds @ kb * scale
        dk.append(ds.transpose(-2, -1) @ q * scale)
    return dq.to(dtype), torch.cat(dk, -2).to(dtype), torch.cat(dv, -2).to(dtype)


def sample_filter(logits, temperature=1.0, top_k=0, top_p=1.0):
    """Hugging Face's warpers: temperature, top-k, top-p (sorted ascending, as theirs)."""
    if temperature == 0:
        top = logits.argmax(-1, keepdim=True)
        return torch.full_like(logits, float("-inf")).scatter(-1, top, logits.gather(-1, top))
    scores = logits / temperature
    if top_k > 0:
        kth = torch.topk(scores, min(top_k, scores.size(-1)))[0][..., -1, None]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, sorted_indices = torch.sort(scores, descending=False)
        cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        remove = cumulative <= (1 - top_p)
        remove[..., -1:] = False
        scores = scores.masked_fill(remove.scatter(1, sorted_indices, remove), float("-inf"))
    return scores


def sample_probs(logits, temperature=1.0, top_k=0, top_p=1.0):
    return sample_filter(logits, temperature, top_k, top_p).softmax(-1)


def sample_probs_unnormalised(logits, temperature=1.0, top_k=0, top_p=1.0):
    kept = torch.isfinite(sample_filter(logits, temperature, top_k, top_p))
    return (logits / (temperature or 1)).softmax(-1) * kept


def sample_filter_exclusive(logits, temperature=1.0, top_k=0, top_p=1.0):
    """Top-p keeping only the tokens whose cumulative probability stays under p."""
    scores = sample_filter(logits, temperature, top_k)
    if top_p < 1.0:
        ordered, index = scores.sort(-1, descending=True)
        drop = ordered.softmax(-1).cumsum(-1) > top_p
        scores = scores.masked_fill(drop.scatter(-1, index, drop), float("-inf"))
    return scores


def sample_filter_times_t(logits, temperature=1.0, top_k=0, top_p=1.0):
    return sample_filter(logits * temperature**2, temperature, top_k, top_p)


def generate(
    step, prompt, max_new_tokens, temperature=1.0, top_k=0, top_p=1.0, eos_id=None, generator=None
):
    ids = prompt
    finished = torch.zeros(len(prompt), dtype=torch.bool)
    for _ in range(max_new_tokens):
        logits = sample_filter(step(ids), temperature, top_k, top_p)
        if temperature == 0:
            token = logits.argmax(-1)
        else:
            token = torch.multinomial(logits.softmax(-1), 1, generator=generator).squeeze(1)
        if eos_id is not None:
            token = torch.where(finished, eos_id, token)
            finished = finished | (token == eos_id)
        ids = torch.cat([ids, token[:, None]], dim=-1)
        if eos_id is not None and finished.all():
            break
    return ids


def left_pad(prompts, pad_id):
    L = max(len(p) for p in prompts)
    input_ids = torch.tensor([[pad_id] * (L - len(p)) + list(p) for p in prompts])
    attention_mask = torch.tensor([[0] * (L - len(p)) + [1] * len(p) for p in prompts])
    position_ids = (attention_mask.cumsum(-1) - 1).masked_fill(attention_mask == 0, 0)
    return input_ids, attention_mask, position_ids


def left_pad_right(prompts, pad_id):  # pads on the right
    L = max(len(p) for p in prompts)
    ids = torch.tensor([list(p) + [pad_id] * (L - len(p)) for p in prompts])
    mask = torch.tensor([[1] * len(p) + [0] * (L - len(p)) for p in prompts])
    return ids, mask, torch.arange(L).expand(len(prompts), L).clone()


def left_pad_row_positions(prompts, pad_id):
    ids, mask, _ = left_pad(prompts, pad_id)
    return ids, mask, torch.arange(ids.shape[1]).expand_as(ids).clone()


def left_pad_4d(prompts, pad_id, *, fix_empty=True):
    ids, mask, _ = left_pad(prompts, pad_id)
    L = ids.shape[1]
    allowed = torch.tril(torch.ones(L, L, dtype=torch.bool)) & mask.bool()[:, None, None, :]
    if fix_empty:  # as transformers' _unmask_unattended: a row with no key sees itself
        allowed |= ~allowed.any(-1, keepdim=True) & torch.eye(L, dtype=torch.bool)
    return ids, allowed


def left_pad_4d_nan(prompts, pad_id):
    return left_pad_4d(prompts, pad_id, fix_empty=False)


def next_step(attention_mask):
    ones = attention_mask.new_ones(attention_mask.shape[0], 1)
    return torch.cat([attention_mask, ones], dim=-1), attention_mask.sum(-1, keepdim=True)


def packed_module(source: str):
    namespace = {"math": math, "torch": torch, "nn": nn}
    exec(source, namespace)
    return namespace["PackedCausalSelfAttention"]


ANSWERS = {
    ("rmsnorm_swiglu", "functional"): rms_norm,
    ("rmsnorm_swiglu", "gemma"): rms_norm_gemma,
    ("rmsnorm_swiglu", "extension"): SwiGLUFused,
    ("rope_scaling", "hf_config"): rope_hf_config,
    ("rope_scaling", "dict_out"): rope_dict,
    ("rope_scaling", "extension"): rope_hf_config,
    ("alibi", "positions"): alibi_positions,
    ("alibi", "batched"): alibi_batched,
    ("alibi", "extension"): slopes_shard,
    ("sink_cache", "bshd"): _bshd(sinks.sink_streaming_llm),
    ("sink_cache", "stacked"): _stacked(sinks.sink_streaming_llm),
    ("mla", "packed_cache"): MLAPacked,
    ("mla", "keyed_cache"): MLAKeyed,
    ("mla", "extension"): AbsorbedPacked,
    ("tiled_backward", "log2_lse"): backward_log2,
    ("tiled_backward", "delta_given"): backward_delta,
    ("tiled_backward", "extension"): backward_log2_causal,
    ("sampling", "logits"): sample_filter,
    ("sampling", "probs"): sample_probs,
    ("sampling", "extension"): generate,
    ("left_padding", "hf"): left_pad,
    ("left_padding", "four_d"): left_pad_4d,
    ("left_padding", "extension"): next_step,
    **{
        ("debug_module", variant): packed_module(problems_debug.FIXED)
        for variant in problems_debug.PLANTED
    },
}

WRONG_EXTENSIONS = [  # (problem, answer, words of its diagnosis)
    ("rmsnorm_swiglu", SwiGLUFusedSwapped, "first half of gate_up_proj"),
    ("alibi", slopes_shard_local, "alibi_slopes"),
    ("tiled_backward", backward_log2_not_causal, "without the causal mask"),
]

WRONG = [  # (problem, variant, answer, words of its diagnosis)
    ("rmsnorm_swiglu", "functional", rms_norm_l2, "L2 norm"),
    ("rope_scaling", "dict_out", rope_dict_static, "seq_len"),
    ("alibi", "positions", alibi_positions_positive, "differs from ALiBi"),
    ("sink_cache", "stacked", _stacked(sink_no_sinks), "sink"),
    ("mla", "packed_cache", MLAPackedNoRope, "RoPE"),
    ("tiled_backward", "log2_lse", backward_log2_as_natural, "in base 2"),
    ("sampling", "logits", sample_filter_exclusive, "crosses p"),
    ("sampling", "logits", sample_filter_times_t, "multiplies"),
    ("sampling", "probs", sample_probs_unnormalised, "renormalise"),
    ("left_padding", "hf", left_pad_right, "on the right"),
    ("left_padding", "hf", left_pad_row_positions, "first real token"),
    ("left_padding", "four_d", left_pad_4d_nan, "NaN"),
]
