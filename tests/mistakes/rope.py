"""Learner implementations of notebook 04's rotary embeddings: correct ones and classic mistakes.

Shape legend: ``B`` batch, ``T`` new positions, ``P`` cached positions, ``S`` = P + T, ``C`` =
d_model, ``nh`` query heads, ``nkv`` key/value heads, ``hs`` = C // nh (even).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from autograder.checks import nb04_rope as checks
from autograder.checks import nb04_rotary as rotary

from . import Mistake, correct, stub
from .gqa import GQAManual

# ---------------------------------------------------------------------------- apply_rope


def _wide(dtype):
    """The dtype angles are computed in: float32 for half-precision inputs, else the input's."""
    return torch.promote_types(dtype, torch.float32)


def _angles(positions, hs, base, dtype, exponent=2.0):
    """``(T, hs/2)`` angles position · base^(-exponent·i/hs), in at least float32."""
    dtype = _wide(dtype)
    theta = base ** (-exponent * torch.arange(hs // 2, dtype=dtype) / hs)  # (hs/2,)
    return positions.to(dtype)[:, None] * theta  # (T, hs/2)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)  # (..., hs/2) each
    return torch.cat([-x2, x1], dim=-1)  # (..., hs)


def rope_rotate_half(x, positions, base=10000.0):  # Hugging Face's Llama, cos/sin (T, hs)
    angle = _angles(positions, x.shape[-1], base, x.dtype)  # (T, hs/2)
    cos = torch.cat([angle.cos(), angle.cos()], dim=-1).to(x.dtype)  # (T, hs)
    sin = torch.cat([angle.sin(), angle.sin()], dim=-1).to(x.dtype)  # (T, hs)
    return x * cos + rotate_half(x) * sin  # (..., T, hs)


def rope_hf_llama(x, positions, base=10000.0):
    """Hugging Face's LlamaRotaryEmbedding + apply_rotary_pos_emb: inv_freq and the angles in
    float32 ("bfloat16 loses precision on long contexts"), cos/sin cast to x.dtype, then
    ``x * cos + rotate_half(x) * sin``; cos/sin are (T, hs) here so any leading dims work."""
    hs = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, hs, 2, dtype=torch.int64).float() / hs))
    freqs = positions.float()[:, None] @ inv_freq[None, :]  # (T, 1) @ (1, hs/2) -> (T, hs/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (T, hs)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    return (x * cos) + (rotate_half(x) * sin)


def rope_meta_freqs_cis(x, positions, base=10000.0):
    """Meta's llama ``precompute_freqs_cis`` + ``apply_rotary_emb`` (complex, float32), with the
    pairs taken as halves, the course's layout, instead of Meta's neighbours."""
    hs = x.shape[-1]
    freqs = 1.0 / (base ** (torch.arange(0, hs, 2)[: (hs // 2)].float() / hs))  # (hs/2,)
    table = torch.outer(torch.arange(int(positions.max()) + 1).float(), freqs)  # (max + 1, hs/2)
    freqs_cis = torch.polar(torch.ones_like(table), table)[positions]  # (T, hs/2) complex64
    x_ = torch.view_as_complex(torch.stack(x.float().chunk(2, dim=-1), dim=-1).contiguous())
    out = torch.view_as_real(x_ * freqs_cis)  # (..., T, hs/2, 2)
    return torch.cat([out[..., 0], out[..., 1]], dim=-1).type_as(x)  # (..., T, hs)


def rope_neox(x, positions, base=10000.0):
    """GPT-NeoX's RotaryEmbedding (cos_cached/sin_cached up to the longest position, float32)
    and apply_rotary_pos_emb, with rotary_pct = 1 (every feature rotated)."""
    dim = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
    t = torch.arange(int(positions.max()) + 1, dtype=inv_freq.dtype)
    freqs = torch.einsum("i,j->ij", t, inv_freq)  # (max + 1, hs/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (max + 1, hs)
    cos, sin = emb.cos()[positions], emb.sin()[positions]  # (T, hs)
    return ((x.float() * cos) + (rotate_half(x.float()) * sin)).to(x.dtype)


def rope_complex(x, positions, base=10000.0):
    """Each pair (x_i, x_{i+hs/2}) as one complex number, multiplied by e^{i·angle}."""
    half = x.shape[-1] // 2
    angle = _angles(positions, x.shape[-1], base, x.dtype)  # (T, hs/2)
    wide = x.to(angle.dtype)
    pairs = torch.stack([wide[..., :half], wide[..., half:]], dim=-1)  # (..., T, hs/2, 2)
    turned = torch.view_as_complex(pairs.contiguous()) * torch.polar(torch.ones_like(angle), angle)
    out = torch.view_as_real(turned)  # (..., T, hs/2, 2)
    return torch.cat([out[..., 0], out[..., 1]], dim=-1).to(x.dtype)  # (..., T, hs)


def rope_complex_parts(x, positions, base=10000.0):
    """torch.complex from the halves and from cos/sin; real and imaginary parts back."""
    half = x.shape[-1] // 2
    angle = _angles(positions, x.shape[-1], base, x.dtype)  # (T, hs/2)
    wide = x.to(angle.dtype)
    z = torch.complex(wide[..., :half], wide[..., half:]) * torch.complex(angle.cos(), angle.sin())
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)  # (..., T, hs)


def rope_table(x, positions, base=10000.0):
    """A cos/sin table for every position up to the largest, indexed by ``positions``."""
    hs = x.shape[-1]
    every = torch.arange(int(positions.max()) + 1)  # (max + 1,)
    table = _angles(every, hs, base, torch.float32)  # (max + 1, hs/2)
    cos, sin = table.cos()[positions].to(x.dtype), table.sin()[positions].to(x.dtype)  # (T, hs/2)
    x1, x2 = x[..., : hs // 2], x[..., hs // 2 :]  # (..., T, hs/2) each
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)  # (..., T, hs)


def rope_matrices(x, positions, base=10000.0):
    """One explicit (hs, hs) rotation matrix per position, applied with einsum."""
    hs = x.shape[-1]
    half = hs // 2
    angle = _angles(positions, hs, base, x.dtype)  # (T, hs/2)
    cos, sin = angle.cos(), angle.sin()
    rot = angle.new_zeros(len(positions), hs, hs)  # (T, hs out, hs in)
    i = torch.arange(half)
    rot[:, i, i] = cos
    rot[:, i + half, i + half] = cos
    rot[:, i, i + half] = -sin
    rot[:, i + half, i] = sin
    return torch.einsum("tab,...tb->...ta", rot, x.to(rot.dtype)).to(x.dtype)  # (..., T, hs)


def precompute_freqs_cis(dim, seqlen, base):
    """DeepSeek-V3's precompute_freqs_cis for a context that needs no YaRN correction."""
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))  # (dim/2,)
    t = torch.arange(seqlen)
    freqs = torch.outer(t, freqs)  # (seqlen, dim/2)
    return torch.polar(torch.ones_like(freqs), freqs)  # (seqlen, dim/2) complex64


def rope_deepseek(x, positions, base=10000.0):
    """DeepSeek-V3's apply_rotary_emb: the input as complex numbers in float32 times freqs_cis,
    back to real and to the input dtype; its pairs taken as halves, the course's layout,
    instead of neighbours."""
    dtype = x.dtype
    freqs_cis = precompute_freqs_cis(x.shape[-1], int(positions.max()) + 1, base)[positions]
    pairs = x.float().unflatten(-1, (2, -1)).transpose(-2, -1)  # (..., T, hs/2, 2)
    y = torch.view_as_real(torch.view_as_complex(pairs.contiguous()) * freqs_cis)
    return y.transpose(-2, -1).flatten(-2).to(dtype)  # (..., T, hs/2, 2) -> (..., T, hs)


def rope_exponents_list(x, positions, base=10000.0):
    """The frequencies' exponents 0, 2, 4 ... from a Python list of ints (they depend on hs
    only), angles in float32."""
    hs = x.shape[-1]
    exponents = torch.tensor([i for i in range(0, hs, 2)])  # (hs/2,)
    theta = 1.0 / base ** (exponents.float() / hs)  # (hs/2,)
    angle = positions.float()[:, None] * theta  # (T, hs/2)
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., : hs // 2].float(), x[..., hs // 2 :].float()  # (..., T, hs/2) each
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)


def rope_float_list(x, positions, base=10000.0):
    """The frequencies from a Python list of floats, as real code writes them (they depend on
    hs and base only), angles in float32."""
    hs = x.shape[-1]
    inv_freq = torch.tensor([1.0 / (base ** (2 * i / hs)) for i in range(hs // 2)])  # (hs/2,)
    angle = positions.float()[:, None] * inv_freq  # (T, hs/2)
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., : hs // 2].float(), x[..., hs // 2 :].float()  # (..., T, hs/2) each
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)


CORRECT_ROPE = {
    "DeepSeek-V3 freqs_cis": rope_deepseek,
    "rotate_half": rope_rotate_half,
    "hf_llama": rope_hf_llama,
    "meta_freqs_cis": rope_meta_freqs_cis,
    "neox": rope_neox,
    "complex": rope_complex,
    "complex_parts": rope_complex_parts,
    "table": rope_table,
    "matrices": rope_matrices,
    "exponents_list": rope_exponents_list,
    "float_list": rope_float_list,
}


def rope_interleaved(x, positions, base=10000.0):  # RoFormer, Meta's original Llama code
    angle = _angles(positions, x.shape[-1], base, x.dtype)  # (T, hs/2)
    x1, x2 = x[..., 0::2], x[..., 1::2]  # (..., T, hs/2): neighbours
    cos, sin = angle.cos(), angle.sin()
    return torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).flatten(-2)


def rope_wrong_sign(x, positions, base=10000.0):
    angle = _angles(positions, x.shape[-1], base, x.dtype)  # (T, hs/2)
    cos, sin = torch.cat([angle.cos()] * 2, -1), torch.cat([angle.sin()] * 2, -1)  # (T, hs)
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([x2, -x1], dim=-1) * sin  # rotate_half written backwards


def _rope_with(exponent):
    def apply_rope(x, positions, base=10000.0):
        angle = _angles(positions, x.shape[-1], base, x.dtype, exponent)  # (T, hs/2)
        x1, x2 = x.chunk(2, dim=-1)
        cos, sin = angle.cos(), angle.sin()
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

    return apply_rope


def rope_ignores_positions(x, positions, base=10000.0):
    return rope_rotate_half(x, torch.arange(x.shape[-2]), base)


def rope_ignores_base(x, positions, base=10000.0):
    return rope_rotate_half(x, positions)


def rope_float32(x, positions, base=10000.0):
    return rope_rotate_half(x.float(), positions, base)


def rope_in_place(x, positions, base=10000.0):
    out = rope_rotate_half(x, positions, base)
    x.copy_(out)
    return x


def rope_adds_sinusoids(x, positions, base=10000.0):
    """Vaswani et al.'s absolute sinusoids added to x: positions, but not relative ones."""
    angle = _angles(positions, x.shape[-1], base, x.dtype)  # (T, hs/2)
    return x + torch.cat([angle.sin(), angle.cos()], dim=-1)  # (..., T, hs)


def rope_cos_only(x, positions, base=10000.0):
    angle = _angles(positions, x.shape[-1], base, x.dtype)  # (T, hs/2)
    return x * torch.cat([angle.cos(), angle.cos()], dim=-1)  # scaled, not rotated


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    """The course's first solution: θ and the angles in x.dtype (bfloat16 rounds 4001 to 4000)."""
    hs = x.shape[-1]
    theta = base ** -(torch.arange(0, hs, 2, dtype=x.dtype) / hs)  # (hs/2,)
    angles = positions.to(x.dtype)[:, None] * theta  # (T, hs/2)
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = x[..., : hs // 2], x[..., hs // 2 :]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def rope_positions_in_x_dtype(x, positions, base=10000.0):
    """θ in float32, but the positions were cast to x.dtype first (``positions.type_as(x)``)."""
    return rope_rotate_half(x, positions.type_as(x).float(), base)


def rope_angles_cast_down(x, positions, base=10000.0):
    """Angles made in float32, then cast to x.dtype before cos and sin."""
    hs = x.shape[-1]
    angles = _angles(positions, hs, base, torch.float32).to(x.dtype)  # (T, hs/2)
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
    return x * cos + rotate_half(x) * sin


def rope_four_dim_tables(x, positions, base=10000.0):
    """Hugging Face's cos/sin with batch and head axes, (1, 1, T, hs): right for 4-D only."""
    angle = _angles(positions, x.shape[-1], base, x.dtype)  # (T, hs/2)
    cos = torch.cat([angle.cos()] * 2, -1)[None, None].to(x.dtype)  # (1, 1, T, hs)
    sin = torch.cat([angle.sin()] * 2, -1)[None, None].to(x.dtype)  # (1, 1, T, hs)
    return x * cos + rotate_half(x) * sin


def rope_not_cast_back(x, positions, base=10000.0):
    """Float32 angles and a float32 result, never cast back to x.dtype."""
    angle = _angles(positions, x.shape[-1], base, x.dtype)  # (T, hs/2)
    cos, sin = torch.cat([angle.cos()] * 2, -1), torch.cat([angle.sin()] * 2, -1)  # (T, hs)
    return x * cos + rotate_half(x) * sin  # float32 for bfloat16 x: type promotion


def rope_shifted(x, positions, base=10000.0):
    """Counts positions from 1, as if position 0 were a padding slot."""
    return rope_rotate_half(x, positions + 1, base)


def rope_llama3_base(x, positions, base=500_000.0):
    """Copied Llama 3's rope_theta as the default."""
    return rope_rotate_half(x, positions, base)


ROPE_MISTAKES = [
    Mistake(
        "rope: interleaved pairs", rope_interleaved, checks.check_apply_rope_values, "interleaved"
    ),
    Mistake(
        "rope: turns the wrong way", rope_wrong_sign, checks.check_apply_rope_values, "cat(-x2, x1)"
    ),
    Mistake(
        "rope: exponent without the 2",
        _rope_with(1.0),
        checks.check_apply_rope_values,
        "base^(-i/hs)",
    ),
    Mistake(
        "rope: growing frequencies",
        _rope_with(-2.0),
        checks.check_apply_rope_values,
        "base^(+2i/hs)",
    ),
    Mistake(
        "rope: ignores positions",
        rope_ignores_positions,
        checks.check_apply_rope_values,
        "whatever the `positions` argument says",
    ),
    Mistake("rope: ignores base", rope_ignores_base, checks.check_apply_rope_values, "`base`"),
    Mistake(
        "rope: positions + 1", rope_shifted, checks.check_apply_rope_values, "one position too"
    ),
    Mistake("rope: Llama 3 base", rope_llama3_base, checks.check_apply_rope_values, "Llama 3's"),
    Mistake(
        "rope: float32 output", rope_float32, checks.check_apply_rope_values, "cast the result back"
    ),
    Mistake(
        "rope: angles in x.dtype",
        rope_angles_in_x_dtype,
        checks.check_apply_rope_values,
        "bfloat16 input at positions",
    ),
    Mistake(
        "rope: positions in x.dtype",
        rope_positions_in_x_dtype,
        checks.check_apply_rope_values,
        "keeps too few bits",
    ),
    Mistake(
        "rope: angles cast down before cos",
        rope_angles_cast_down,
        checks.check_apply_rope_values,
        "compute positions and θ in float32",
    ),
    Mistake(
        "rope: (1, 1, T, hs) tables",
        rope_four_dim_tables,
        checks.check_apply_rope_values,
        "add leading dimensions",
    ),
    Mistake(
        "rope: float32 result for half input",
        rope_not_cast_back,
        checks.check_apply_rope_values,
        "for torch.bfloat16 inputs",
    ),
    Mistake("rope: in place", rope_in_place, checks.check_apply_rope_values, "in place"),
    Mistake(
        "rope: returns x",
        lambda x, positions, base=10000.0: x.clone(),
        checks.check_apply_rope_values,
        "unchanged",
    ),
    Mistake(
        "rope: adds sinusoids",
        rope_adds_sinusoids,
        checks.check_apply_rope_relative,
        "change length",
    ),
    Mistake("rope: cos only", rope_cos_only, checks.check_apply_rope_relative, "change length"),
    Mistake(
        "rope: ignores positions (relative)",
        lambda x, positions, base=10000.0: x.clone(),
        checks.check_apply_rope_relative,
        "same at every distance",
    ),
]

# -------------------------------------------------------------- RoPE with the KV cache


class RotaryManual(GQAManual):
    """GQA with q and k rotated at P … P+T-1 before the keys are cached; each step swappable."""

    rope = staticmethod(rope_rotate_half)

    def positions(self, P, T, given=None):
        return torch.arange(P, P + T) if given is None else given  # (T,)

    def rotate_queries(self, q, positions):
        return self.rope(q, positions)  # (B, nh, T, hs)

    def rotate_keys(self, k_new, past_k, positions):
        """The keys to cache, ``(B, nkv, S, hs)``, and the keys to attend to."""
        k = self.rope(k_new, positions)  # (B, nkv, T, hs)
        k_all = self.append(past_k, k)  # (B, nkv, S, hs)
        return k_all, k_all

    def values(self, v, positions):
        return v

    def forward(self, x, past_kv=None, causal=True, positions=None):
        B, T, C = x.shape
        P = 0 if past_kv is None else past_kv[0].shape[2]
        positions = self.positions(P, T, positions)  # (T,)
        q = self.rotate_queries(self.split(self.q_proj(x), self.num_heads), positions)
        k = self.split(self.k_proj(x), self.num_kv_heads)  # (B, nkv, T, hs)
        v = self.values(self.split(self.v_proj(x), self.num_kv_heads), positions)
        cached_k, k_all = self.rotate_keys(k, None if past_kv is None else past_kv[0], positions)
        v_all = self.append(None if past_kv is None else past_kv[1], v)  # (B, nkv, S, hs)
        n_rep = self.num_heads // self.num_kv_heads
        allowed = self.mask(T, k_all.shape[2], causal, past_kv is not None)
        out = self.attend(q, self.repeat(k_all, n_rep), self.repeat(v_all, n_rep), allowed)
        out = out.transpose(1, 2).reshape(B, T, C)  # (B, T, C)
        return self.out_proj(out), (cached_k, v_all)


class RotarySDPAComplex(RotaryManual):
    """Complex-number rotation and PyTorch's attention with enable_gqa."""

    rope = staticmethod(rope_complex)
    repeat = staticmethod(lambda t, n_rep: t)

    def attend(self, q, k, v, allowed):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=True)


class RotaryBuffers(RotaryManual):
    """cos/sin tables precomputed in ``__init__`` as buffers (Hugging Face style)."""

    def __init__(self, d_model, num_heads, num_kv_heads, bias=False, max_len=128):
        super().__init__(d_model, num_heads, num_kv_heads, bias)
        hs = d_model // num_heads
        angle = _angles(torch.arange(max_len), hs, 10000.0, torch.float32)  # (max_len, hs/2)
        self.register_buffer("cos", torch.cat([angle.cos()] * 2, -1), persistent=False)
        self.register_buffer("sin", torch.cat([angle.sin()] * 2, -1), persistent=False)

    def rope(self, x, positions):
        cos, sin = self.cos[positions].to(x.dtype), self.sin[positions].to(x.dtype)  # (T, hs)
        return x * cos + rotate_half(x) * sin


class RotaryHFLlama(RotaryManual):
    """Hugging Face's Llama: position_ids (defaulting to cache_position), cos/sin made in float32
    and unsqueezed to (1, 1, T, hs), F.scaled_dot_product_attention with enable_gqa."""

    repeat = staticmethod(lambda t, n_rep: t)

    def __init__(self, d_model, num_heads, num_kv_heads, bias=False):
        super().__init__(d_model, num_heads, num_kv_heads, bias)
        hs = d_model // num_heads
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, hs, 2, dtype=torch.int64).float() / hs))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, past_kv=None, causal=True, positions=None):
        B, T, C = x.shape
        past_len = 0 if past_kv is None else past_kv[0].shape[2]
        cache_position = torch.arange(past_len, past_len + T)
        position_ids = (cache_position if positions is None else positions)[None]  # (1, T)
        freqs = (self.inv_freq[None, :, None] @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)  # (1, T, hs)
        cos, sin = emb.cos()[:, None].to(x.dtype), emb.sin()[:, None].to(x.dtype)  # (1,1,T,hs)
        q = self.split(self.q_proj(x), self.num_heads)  # (B, nh, T, hs)
        k = self.split(self.k_proj(x), self.num_kv_heads)  # (B, nkv, T, hs)
        v = self.split(self.v_proj(x), self.num_kv_heads)  # (B, nkv, T, hs)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        if past_kv is not None:
            k, v = torch.cat([past_kv[0], k], dim=-2), torch.cat([past_kv[1], v], dim=-2)
        S = k.shape[2]
        mask = torch.ones(T, S, dtype=torch.bool).tril(S - T) if causal else None
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, C)), (k, v)


class RotaryMetaFreqsCis(RotaryManual):
    """Meta's llama: a freqs_cis table precomputed up to max_seq_len, sliced at the positions,
    complex multiplication in float32 (pairs as halves here, the course's layout)."""

    def __init__(self, d_model, num_heads, num_kv_heads, bias=False, max_seq_len=128):
        super().__init__(d_model, num_heads, num_kv_heads, bias)
        hs = d_model // num_heads
        freqs = 1.0 / (10000.0 ** (torch.arange(0, hs, 2)[: (hs // 2)].float() / hs))
        t = torch.arange(max_seq_len, device=freqs.device, dtype=torch.float32)
        freqs = torch.outer(t, freqs)  # (max_seq_len, hs/2)
        self.freqs_cis = torch.polar(torch.ones_like(freqs), freqs)  # complex64

    def rope(self, x, positions):
        x_ = torch.view_as_complex(torch.stack(x.float().chunk(2, dim=-1), dim=-1).contiguous())
        out = torch.view_as_real(x_ * self.freqs_cis[positions])  # (..., T, hs/2, 2)
        return torch.cat([out[..., 0], out[..., 1]], dim=-1).type_as(x)


class RotaryNeoX(RotaryManual):
    """GPT-NeoX: cos_cached/sin_cached grown to the longest position seen, rotary_pct = 1."""

    def rope(self, x, positions):
        return rope_neox(x, positions)


CORRECT_ROTARY = {
    "manual": RotaryManual,
    "sdpa_complex": RotarySDPAComplex,
    "buffers": RotaryBuffers,
    "hf_llama": RotaryHFLlama,
    "meta_freqs_cis": RotaryMetaFreqsCis,
    "neox": RotaryNeoX,
}


class RotaryRestarts(RotaryManual):
    """Positions 0 … T-1 in every call: right without a cache, wrong with one."""

    def positions(self, P, T, given=None):
        return torch.arange(T)


class RotaryRotatesValues(RotaryManual):
    def values(self, v, positions):
        return self.rope(v, positions)


class RotaryInterleaved(RotaryManual):
    rope = staticmethod(rope_interleaved)


class RotaryForgetsQueries(RotaryManual):
    def rotate_queries(self, q, positions):
        return q


class RotaryCachesRawKeys(RotaryManual):
    """Caches the keys unrotated and rotates the whole cache at every call: the output is right."""

    def rotate_keys(self, k_new, past_k, positions):
        raw = self.append(past_k, k_new)  # (B, nkv, S, hs)
        S = raw.shape[2]
        return raw, self.rope(raw, torch.arange(S))


class RotaryRotatesCacheAgain(RotaryManual):
    """Caches rotated keys, then rotates past and new keys together at every call."""

    def rotate_keys(self, k_new, past_k, positions):
        k_all = self.append(past_k, k_new)  # (B, nkv, S, hs)
        k_all = self.rope(k_all, torch.arange(k_all.shape[2]))
        return k_all, k_all


class RotaryNoRope(RotaryManual):
    rope = staticmethod(lambda t, positions: t)


class RotaryAlwaysCausal(RotaryManual):
    """Builds the bottom-right mask whatever ``causal`` says."""

    def mask(self, T, S, causal, has_past):
        return super().mask(T, S, True, has_past)


class RotaryNoPositionsArgument(RotaryManual):
    """The forward of exercise 7 before positions became an input: no such argument."""

    def forward(self, x, past_kv=None, causal=True):
        return super().forward(x, past_kv, causal)


class RotaryIgnoresPositions(RotaryManual):
    """Takes ``positions`` and counts from the cache's length anyway."""

    def positions(self, P, T, given=None):
        return torch.arange(P, P + T)


class RotaryPositionsForQueriesOnly(RotaryManual):
    """Rotates the queries at the given positions, the new keys at P … P+T-1."""

    def rotate_keys(self, k_new, past_k, positions):
        P = 0 if past_k is None else past_k.shape[2]
        return super().rotate_keys(k_new, past_k, torch.arange(P, P + k_new.shape[2]))


class RotaryPositionsPlusLength(RotaryManual):
    """Adds the cache's length to positions that are already absolute."""

    def positions(self, P, T, given=None):
        return torch.arange(P, P + T) if given is None else given + P


class RotaryShifted(RotaryManual):
    """Positions 1 … T: the outputs agree (only distances count), the cache does not."""

    def positions(self, P, T, given=None):
        return torch.arange(P + 1, P + T + 1) if given is None else given


class RotaryLlama3Base(RotaryManual):
    rope = staticmethod(rope_llama3_base)


ROTARY_MISTAKES = [
    Mistake(
        "rotary: rotates the values",
        RotaryRotatesValues,
        rotary.check_rotary_gqa_full_pass,
        "rotates the values too",
    ),
    Mistake(
        "rotary: no rotation",
        RotaryNoRope,
        rotary.check_rotary_gqa_full_pass,
        "without any rotation",
    ),
    Mistake(
        "rotary: queries not rotated",
        RotaryForgetsQueries,
        rotary.check_rotary_gqa_full_pass,
        "keys but not the queries",
    ),
    Mistake(
        "rotary: interleaved pairs",
        RotaryInterleaved,
        rotary.check_rotary_gqa_full_pass,
        "interleaved",
    ),
    Mistake(
        "rotary: caches raw keys",
        RotaryCachesRawKeys,
        rotary.check_rotary_gqa_full_pass,
        "keys before rotation",
    ),
    Mistake(
        "rotary: positions restart at 0",
        RotaryRestarts,
        rotary.check_rotary_gqa_decoding,
        "as if they were at positions 0 … T-1",
    ),
    Mistake(
        "rotary: rotates the cache again",
        RotaryRotatesCacheAgain,
        rotary.check_rotary_gqa_decoding,
        "rotated again at every step",
    ),
    Mistake(
        "rotary: rotates the values (decoding)",
        RotaryRotatesValues,
        rotary.check_rotary_gqa_decoding,
        "rotates the values too",
    ),
]

POSITIONS_MISTAKES = [
    Mistake(
        "rotary: positions from 1",
        RotaryShifted,
        rotary.check_rotary_gqa_full_pass,
        "one position too far",
    ),
    Mistake(
        "rotary: Llama 3 base",
        RotaryLlama3Base,
        rotary.check_rotary_gqa_full_pass,
        "Llama 3's rope_theta",
    ),
    Mistake(
        "rotary: masks with causal=False",
        RotaryAlwaysCausal,
        rotary.check_rotary_gqa_full_pass,
        "even with causal=False",
    ),
    Mistake(
        "rotary: no positions argument",
        RotaryNoPositionsArgument,
        rotary.check_rotary_gqa_positions,
        "takes no `positions` argument",
    ),
    Mistake(
        "rotary: ignores positions",
        RotaryIgnoresPositions,
        rotary.check_rotary_gqa_positions,
        "ignores its `positions` argument",
    ),
    Mistake(
        "rotary: positions for the queries only",
        RotaryPositionsForQueriesOnly,
        rotary.check_rotary_gqa_positions,
        "but the new keys at P … P+T-1",
    ),
    Mistake(
        "rotary: positions plus the cache's length",
        RotaryPositionsPlusLength,
        rotary.check_rotary_gqa_positions,
        "rolling buffer",
    ),
    Mistake(
        "rotary: restarts, positions given",
        RotaryRestarts,
        rotary.check_rotary_gqa_positions,
        "ignores its `positions` argument",
    ),
]

MISTAKES = ROPE_MISTAKES + ROTARY_MISTAKES + POSITIONS_MISTAKES

ROPE_CHECKS = [checks.check_apply_rope_values, checks.check_apply_rope_relative]
ROTARY_CHECKS = [
    rotary.check_rotary_gqa_full_pass,
    rotary.check_rotary_gqa_decoding,
    rotary.check_rotary_gqa_positions,
]
CORRECT = correct(ROPE_CHECKS, CORRECT_ROPE) + correct(ROTARY_CHECKS, CORRECT_ROTARY)


class RotaryStub(GQAManual):
    """The release of exercise 7: the learner's finished GQA, forward still the stub."""

    def forward(self, x, past_kv=None, causal=True, positions=None):
        raise NotImplementedError()


STUBS = [(check, stub) for check in ROPE_CHECKS] + [(check, RotaryStub) for check in ROTARY_CHECKS]
# test_checks_rope verifies these checks on a kernel's record itself (seed=1, thorough).
REPLAY: list = []
