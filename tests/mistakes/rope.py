"""Learner implementations of notebook 04's rotary embeddings: correct ones and classic mistakes.

Shape legend: ``B`` batch, ``T`` new positions, ``P`` cached positions, ``S`` = P + T, ``C`` =
d_model, ``nh`` query heads, ``nkv`` key/value heads, ``hs`` = C // nh (even).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from autograder.checks import nb04_rope as checks

from . import Mistake, correct, stub
from .gqa import GQAManual

# ---------------------------------------------------------------------------- apply_rope


def _angles(positions, hs, base, dtype, exponent=2.0):
    """``(T, hs/2)`` angles position · base^(-exponent·i/hs)."""
    theta = base ** (-exponent * torch.arange(hs // 2, dtype=dtype) / hs)  # (hs/2,)
    return positions.to(dtype)[:, None] * theta  # (T, hs/2)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)  # (..., hs/2) each
    return torch.cat([-x2, x1], dim=-1)  # (..., hs)


def rope_rotate_half(x, positions, base=10000.0):  # Hugging Face's Llama
    angle = _angles(positions, x.shape[-1], base, x.dtype)  # (T, hs/2)
    cos = torch.cat([angle.cos(), angle.cos()], dim=-1)  # (T, hs)
    sin = torch.cat([angle.sin(), angle.sin()], dim=-1)  # (T, hs)
    return x * cos + rotate_half(x) * sin  # (..., T, hs)


def rope_complex(x, positions, base=10000.0):
    """Each pair (x_i, x_{i+hs/2}) as one complex number, multiplied by e^{i·angle}."""
    half = x.shape[-1] // 2
    angle = _angles(positions, x.shape[-1], base, x.dtype)  # (T, hs/2)
    pairs = torch.stack([x[..., :half], x[..., half:]], dim=-1)  # (..., T, hs/2, 2)
    turned = torch.view_as_complex(pairs.contiguous()) * torch.polar(torch.ones_like(angle), angle)
    out = torch.view_as_real(turned)  # (..., T, hs/2, 2)
    return torch.cat([out[..., 0], out[..., 1]], dim=-1)  # (..., T, hs)


def rope_complex_parts(x, positions, base=10000.0):
    """torch.complex from the halves and from cos/sin; real and imaginary parts back."""
    half = x.shape[-1] // 2
    angle = _angles(positions, x.shape[-1], base, x.dtype)  # (T, hs/2)
    z = torch.complex(x[..., :half], x[..., half:]) * torch.complex(angle.cos(), angle.sin())
    return torch.cat([z.real, z.imag], dim=-1)  # (..., T, hs)


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
    rot = x.new_zeros(len(positions), hs, hs)  # (T, hs out, hs in)
    i = torch.arange(half)
    rot[:, i, i] = cos
    rot[:, i + half, i + half] = cos
    rot[:, i, i + half] = -sin
    rot[:, i + half, i] = sin
    return torch.einsum("tab,...tb->...ta", rot, x)  # (..., T, hs)


CORRECT_ROPE = {
    "rotate_half": rope_rotate_half,
    "complex": rope_complex,
    "complex_parts": rope_complex_parts,
    "table": rope_table,
    "matrices": rope_matrices,
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
    Mistake("rope: float32 output", rope_float32, checks.check_apply_rope_values, "input dtype"),
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

    def positions(self, P, T):
        return torch.arange(P, P + T)  # (T,)

    def rotate_queries(self, q, P, T):
        return self.rope(q, self.positions(P, T))  # (B, nh, T, hs)

    def rotate_keys(self, k_new, past_k, P, T):
        """The keys to cache, ``(B, nkv, S, hs)``, and the keys to attend to."""
        k = self.rope(k_new, self.positions(P, T))  # (B, nkv, T, hs)
        k_all = self.append(past_k, k)  # (B, nkv, S, hs)
        return k_all, k_all

    def values(self, v, P, T):
        return v

    def forward(self, x, past_kv=None, causal=True):
        B, T, C = x.shape
        P = 0 if past_kv is None else past_kv[0].shape[2]
        q = self.rotate_queries(self.split(self.q_proj(x), self.num_heads), P, T)  # (B, nh, T, hs)
        k = self.split(self.k_proj(x), self.num_kv_heads)  # (B, nkv, T, hs)
        v = self.values(self.split(self.v_proj(x), self.num_kv_heads), P, T)  # (B, nkv, T, hs)
        cached_k, k_all = self.rotate_keys(k, None if past_kv is None else past_kv[0], P, T)
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

    def __init__(self, d_model, num_heads, num_kv_heads, bias=False, max_len=64):
        super().__init__(d_model, num_heads, num_kv_heads, bias)
        hs = d_model // num_heads
        angle = _angles(torch.arange(max_len), hs, 10000.0, torch.float32)  # (max_len, hs/2)
        self.register_buffer("cos", torch.cat([angle.cos()] * 2, -1), persistent=False)
        self.register_buffer("sin", torch.cat([angle.sin()] * 2, -1), persistent=False)

    def rope(self, x, positions):
        cos, sin = self.cos[positions].to(x.dtype), self.sin[positions].to(x.dtype)  # (T, hs)
        return x * cos + rotate_half(x) * sin


CORRECT_ROTARY = {
    "manual": RotaryManual,
    "sdpa_complex": RotarySDPAComplex,
    "buffers": RotaryBuffers,
}


class RotaryRestarts(RotaryManual):
    """Positions 0 … T-1 in every call: right without a cache, wrong with one."""

    def positions(self, P, T):
        return torch.arange(T)


class RotaryRotatesValues(RotaryManual):
    def values(self, v, P, T):
        return self.rope(v, self.positions(P, T))


class RotaryInterleaved(RotaryManual):
    rope = staticmethod(rope_interleaved)


class RotaryForgetsQueries(RotaryManual):
    def rotate_queries(self, q, P, T):
        return q


class RotaryCachesRawKeys(RotaryManual):
    """Caches the keys unrotated and rotates the whole cache at every call: the output is right."""

    def rotate_keys(self, k_new, past_k, P, T):
        raw = self.append(past_k, k_new)  # (B, nkv, S, hs)
        return raw, self.rope(raw, torch.arange(P + T))


class RotaryRotatesCacheAgain(RotaryManual):
    """Caches rotated keys, then rotates past and new keys together at every call."""

    def rotate_keys(self, k_new, past_k, P, T):
        k_all = self.rope(self.append(past_k, k_new), torch.arange(P + T))  # (B, nkv, S, hs)
        return k_all, k_all


class RotaryNoRope(RotaryManual):
    rope = staticmethod(lambda t, positions: t)


ROTARY_MISTAKES = [
    Mistake(
        "rotary: rotates the values",
        RotaryRotatesValues,
        checks.check_rotary_gqa_full_pass,
        "rotates the values too",
    ),
    Mistake(
        "rotary: no rotation",
        RotaryNoRope,
        checks.check_rotary_gqa_full_pass,
        "without any rotation",
    ),
    Mistake(
        "rotary: queries not rotated",
        RotaryForgetsQueries,
        checks.check_rotary_gqa_full_pass,
        "keys but not the queries",
    ),
    Mistake(
        "rotary: interleaved pairs",
        RotaryInterleaved,
        checks.check_rotary_gqa_full_pass,
        "interleaved",
    ),
    Mistake(
        "rotary: caches raw keys",
        RotaryCachesRawKeys,
        checks.check_rotary_gqa_full_pass,
        "keys before rotation",
    ),
    Mistake(
        "rotary: positions restart at 0",
        RotaryRestarts,
        checks.check_rotary_gqa_decoding,
        "as if they were at positions 0 … T-1",
    ),
    Mistake(
        "rotary: rotates the cache again",
        RotaryRotatesCacheAgain,
        checks.check_rotary_gqa_decoding,
        "rotated again at every step",
    ),
    Mistake(
        "rotary: rotates the values (decoding)",
        RotaryRotatesValues,
        checks.check_rotary_gqa_decoding,
        "rotates the values too",
    ),
]

MISTAKES = ROPE_MISTAKES + ROTARY_MISTAKES

ROPE_CHECKS = [checks.check_apply_rope_values, checks.check_apply_rope_relative]
ROTARY_CHECKS = [checks.check_rotary_gqa_full_pass, checks.check_rotary_gqa_decoding]
CORRECT = correct(ROPE_CHECKS, CORRECT_ROPE) + correct(ROTARY_CHECKS, CORRECT_ROTARY)


class RotaryStub(GQAManual):
    """The release of exercise 7: the learner's finished GQA, forward still the stub."""

    def forward(self, x, past_kv=None, causal=True):
        raise NotImplementedError()


STUBS = [(check, stub) for check in ROPE_CHECKS] + [(check, RotaryStub) for check in ROTARY_CHECKS]
# test_checks_rope verifies these checks on a kernel's record itself (seed=1, thorough).
REPLAY: list = []
