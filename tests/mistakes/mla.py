"""Learner implementations of notebook 08's multi-head latent attention: correct ones, written
the way this course, DeepSeek's inference code and Hugging Face write it, and classic mistakes.

Shape legend: ``B`` batch, ``T`` new positions, ``P`` cached positions, ``S`` = P + T, ``C`` =
d_model, ``nh`` heads, ``hd`` = head_dim, ``dr`` = d_rope, ``dc`` = d_latent.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks import nb08_mla as checks
from autograder.checks import nb08_mla_cache as cache_checks

from . import HIDDEN, MISSED, Mistake, correct, stub
from .rope import rope_complex, rope_rotate_half, rotate_half

# ------------------------------------------------------------------------------ naive MLA


class MLAManual(nn.Module):
    """DeepSeek's layout, matmuls and softmax by hand; every step swappable by a subclass."""

    rope = staticmethod(rope_rotate_half)

    def __init__(self, d_model, num_heads, d_latent, head_dim, d_rope):
        super().__init__()
        self.num_heads, self.d_latent, self.head_dim, self.d_rope = (
            num_heads,
            d_latent,
            head_dim,
            d_rope,
        )
        self.wq = nn.Linear(d_model, num_heads * (head_dim + d_rope), bias=False)
        self.wkv_a = nn.Linear(d_model, d_latent + d_rope, bias=False)
        self.kv_norm = nn.RMSNorm(d_latent)
        self.wkv_b = nn.Linear(d_latent, num_heads * 2 * head_dim, bias=False)
        self.wo = nn.Linear(num_heads * head_dim, d_model, bias=False)

    def scale(self):
        return 1 / math.sqrt(self.head_dim + self.d_rope)

    def queries(self, x, positions):
        """``(B, nh, T, hd)`` and the rotated ``(B, nh, T, dr)``."""
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, self.num_heads, -1).transpose(1, 2)  # (B, nh, T, hd + dr)
        q_nope, q_rope = q.split([self.head_dim, self.d_rope], dim=-1)
        return q_nope, self.rope(q_rope, positions)

    def compress(self, x, positions):
        """The normalised latent ``(B, T, dc)`` and the rotated RoPE key ``(B, T, dr)``."""
        c, k_rope = self.wkv_a(x).split([self.d_latent, self.d_rope], dim=-1)
        return self.kv_norm(c), self.rope(k_rope, positions)

    def append(self, past, new):
        return new if past is None else torch.cat([past, new], dim=1)  # (B, S, .)

    def up(self, c):
        """Each head's ``k_nope`` and ``v``, ``(B, nh, S, hd)``, from the latent."""
        B, S, _ = c.shape
        kv = self.wkv_b(c).view(B, S, self.num_heads, 2 * self.head_dim).transpose(1, 2)
        return kv.split([self.head_dim, self.head_dim], dim=-1)

    def mask(self, T, S):
        return torch.ones(T, S, dtype=torch.bool).tril(S - T)  # (T, S), bottom-right

    def attend(self, q_nope, q_rope, c, k_rope):
        """``(B, nh, T, hd)`` from the queries and the whole cache."""
        k_nope, v = self.up(c)  # (B, nh, S, hd) each
        scores = q_nope @ k_nope.transpose(-2, -1)  # (B, nh, T, S)
        scores = scores + q_rope @ k_rope[:, None].transpose(-2, -1)  # (B, nh, T, S)
        scores = scores * self.scale()
        T, S = scores.shape[-2:]
        scores = scores.masked_fill(~self.mask(T, S), float("-inf"))
        return torch.softmax(scores, dim=-1) @ v  # (B, nh, T, hd)

    def cached(self, c_all, k_rope_all):
        return c_all, k_rope_all

    def forward(self, x, past_kv=None):
        B, T, _ = x.shape
        P = 0 if past_kv is None else past_kv[0].shape[1]
        positions = torch.arange(P, P + T)
        q_nope, q_rope = self.queries(x, positions)
        c, k_rope = self.compress(x, positions)
        c_all = self.append(None if past_kv is None else past_kv[0], c)  # (B, S, dc)
        k_rope_all = self.append(None if past_kv is None else past_kv[1], k_rope)  # (B, S, dr)
        out = self.attend(q_nope, q_rope, c_all, k_rope_all)  # (B, nh, T, hd)
        out = self.wo(out.transpose(1, 2).reshape(B, T, -1))  # (B, T, C)
        return out, self.cached(c_all, k_rope_all)


class RMSNorm(nn.Module):
    """DeepSeek's own RMSNorm: a weight, eps = 1e-6 and F.rms_norm."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.dim, self.eps = dim, eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return F.rms_norm(x, (self.dim,), self.weight, self.eps)


class MLADeepSeek(nn.Module):
    """DeepSeek-V3's ``MLA`` (``attn_impl == "naive"``, ``q_lora_rank == 0``): einsums over
    (B, S, nh, d) tensors, softmax in float32, the RoPE key unsqueezed and expanded over the
    heads; rotation by complex numbers (pairs as halves, the course's layout)."""

    def __init__(self, d_model, num_heads, d_latent, head_dim, d_rope):
        super().__init__()
        self.num_heads, self.d_latent, self.head_dim, self.d_rope = (
            num_heads,
            d_latent,
            head_dim,
            d_rope,
        )
        self.qk_head_dim = head_dim + d_rope
        self.wq = nn.Linear(d_model, num_heads * self.qk_head_dim, bias=False)
        self.wkv_a = nn.Linear(d_model, d_latent + d_rope, bias=False)
        self.kv_norm = RMSNorm(d_latent)
        self.wkv_b = nn.Linear(d_latent, num_heads * 2 * head_dim, bias=False)
        self.wo = nn.Linear(num_heads * head_dim, d_model, bias=False)
        self.softmax_scale = self.qk_head_dim**-0.5

    def forward(self, x, past_kv=None):
        bsz, seqlen, _ = x.size()
        start_pos = 0 if past_kv is None else past_kv[0].size(1)
        end_pos = start_pos + seqlen
        positions = torch.arange(start_pos, end_pos)
        q = self.wq(x).view(bsz, seqlen, self.num_heads, self.qk_head_dim)
        q_nope, q_pe = torch.split(q, [self.head_dim, self.d_rope], dim=-1)
        q_pe = rope_complex(q_pe.transpose(1, 2), positions).transpose(1, 2)
        kv = self.wkv_a(x)
        kv, k_pe = torch.split(kv, [self.d_latent, self.d_rope], dim=-1)
        kv, k_pe = self.kv_norm(kv), rope_complex(k_pe, positions)
        if past_kv is not None:
            kv, k_pe = torch.cat([past_kv[0], kv], 1), torch.cat([past_kv[1], k_pe], 1)
        q = torch.cat([q_nope, q_pe], dim=-1)
        full = self.wkv_b(kv).view(bsz, end_pos, self.num_heads, 2 * self.head_dim)
        k_nope, v = torch.split(full, [self.head_dim, self.head_dim], dim=-1)
        k = torch.cat([k_nope, k_pe.unsqueeze(2).expand(-1, -1, self.num_heads, -1)], dim=-1)
        scores = torch.einsum("bshd,bthd->bsht", q, k) * self.softmax_scale
        mask = torch.full((seqlen, end_pos), float("-inf")).triu(start_pos + 1)
        scores = scores + mask[:, None]
        scores = scores.softmax(dim=-1, dtype=torch.float32).type_as(x)
        out = torch.einsum("bsht,bthd->bshd", scores, v)
        return self.wo(out.flatten(2)), (kv, k_pe)


class MLAHuggingFace(MLAManual):
    """Hugging Face's ``DeepseekV3Attention`` computation (query_shape/key_shape views,
    torch.split, k_rot viewed as one head and expanded, cos/sin with rotate_half, SDPA with
    ``scale``), caching the latent where Hugging Face caches the up-projected keys and values."""

    def forward(self, x, past_kv=None):
        batch_size, seq_length = x.shape[:-1]
        past = 0 if past_kv is None else past_kv[0].shape[1]
        query_shape = (batch_size, seq_length, -1, self.head_dim + self.d_rope)
        q_states = self.wq(x).view(query_shape).transpose(1, 2)
        q_pass, q_rot = torch.split(q_states, [self.head_dim, self.d_rope], dim=-1)
        compressed_kv = self.wkv_a(x)
        k_pass, k_rot = torch.split(compressed_kv, [self.d_latent, self.d_rope], dim=-1)
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, self.d_rope, 2).float() / self.d_rope))
        freqs = torch.arange(past, past + seq_length).float()[:, None] * inv_freq  # (T, dr/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        q_rot = q_rot * cos + rotate_half(q_rot) * sin
        k_rot = k_rot * cos + rotate_half(k_rot) * sin
        k_pass = self.kv_norm(k_pass)
        if past_kv is not None:
            k_pass = torch.cat([past_kv[0], k_pass], dim=1)
            k_rot = torch.cat([past_kv[1], k_rot], dim=1)
        cache = (k_pass, k_rot)
        total = k_pass.shape[1]
        key_shape = (batch_size, total, -1, 2 * self.head_dim)
        kv = self.wkv_b(k_pass).view(key_shape).transpose(1, 2)
        k_nope, value_states = torch.split(kv, [self.head_dim, self.head_dim], dim=-1)
        k_rot = k_rot.view(batch_size, 1, total, self.d_rope).expand(*k_nope.shape[:-1], -1)
        query_states = torch.cat((q_pass, q_rot), dim=-1)
        key_states = torch.cat((k_nope, k_rot), dim=-1)
        mask = torch.ones(seq_length, total, dtype=torch.bool).tril(past)
        attn_output = F.scaled_dot_product_attention(
            query_states, key_states, value_states, attn_mask=mask, scale=self.scale()
        )
        attn_output = attn_output.transpose(1, 2).reshape(batch_size, seq_length, -1)
        return self.wo(attn_output), cache


CORRECT_NAIVE = {"manual": MLAManual, "deepseek": MLADeepSeek, "hugging_face": MLAHuggingFace}

# ----------------------------------------------------------------------------- absorbed MLA


class AbsorbedManual(MLAManual):
    """W_UK multiplies the query, W_UV the latent output: attention reads the cache itself."""

    def absorbed(self):
        """W_UK and W_UV of every head, ``(nh, hd, dc)`` each: rows of wkv_b's weight."""
        w = self.wkv_b.weight.view(self.num_heads, 2 * self.head_dim, self.d_latent)
        return w[:, : self.head_dim], w[:, self.head_dim :]

    def attend(self, q_nope, q_rope, c, k_rope):
        w_uk, w_uv = self.absorbed()  # (nh, hd, dc) each
        q_lat = q_nope @ w_uk  # (B, nh, T, hd) @ (nh, hd, dc) -> (B, nh, T, dc)
        scores = q_lat @ c[:, None].transpose(-2, -1)  # (B, nh, T, S)
        scores = scores + q_rope @ k_rope[:, None].transpose(-2, -1)
        scores = scores * self.scale()
        T, S = scores.shape[-2:]
        scores = scores.masked_fill(~self.mask(T, S), float("-inf"))
        out_lat = torch.softmax(scores, dim=-1) @ c[:, None]  # (B, nh, T, dc)
        return out_lat @ w_uv.transpose(-2, -1)  # (B, nh, T, dc) @ (nh, dc, hd) -> (B,nh,T,hd)


class AbsorbedDeepSeek(MLAManual):
    """DeepSeek-V3's ``attn_impl == "absorb"`` path: einsums against the latent and RoPE caches,
    the softmax in float32."""

    def attend(self, q_nope, q_rope, c, k_rope):
        wkv_b = self.wkv_b.weight.view(self.num_heads, -1, self.d_latent)
        q_nope = q_nope.transpose(1, 2)  # (B, T, nh, hd)
        q_pe = q_rope.transpose(1, 2)  # (B, T, nh, dr)
        q_nope = torch.einsum("bshd,hdc->bshc", q_nope, wkv_b[:, : self.head_dim])
        scores = (
            torch.einsum("bshc,btc->bsht", q_nope, c) + torch.einsum("bshr,btr->bsht", q_pe, k_rope)
        ) * self.scale()
        T, S = scores.shape[1], scores.shape[-1]
        scores = scores + torch.full((T, S), float("-inf")).triu(S - T + 1)[:, None]
        scores = scores.softmax(dim=-1, dtype=torch.float32).type_as(c)
        x = torch.einsum("bsht,btc->bshc", scores, c)
        x = torch.einsum("bshc,hdc->bshd", x, wkv_b[:, -self.head_dim :])
        return x.transpose(1, 2)  # (B, nh, T, hd)


class AbsorbedMQA(MLAManual):
    """The matrices merged per head from the current weights (W_Q·W_UK, W_O·W_UV), then PyTorch's
    attention as multi-query attention over one latent head whose values are its keys' first
    d_latent features (how serving kernels such as FlashMLA see it)."""

    def forward(self, x, past_kv=None):
        B, T, C = x.shape
        nh, hd, dr, dc = self.num_heads, self.head_dim, self.d_rope, self.d_latent
        P = 0 if past_kv is None else past_kv[0].shape[1]
        positions = torch.arange(P, P + T)
        wq = self.wq.weight.view(nh, hd + dr, C)
        wkv_b = self.wkv_b.weight.view(nh, 2 * hd, dc)
        w_q_lat = wkv_b[:, :hd].transpose(1, 2) @ wq[:, :hd]  # (nh, dc, hd) @ (nh, hd, C)
        w_o_lat = self.wo.weight.view(C, nh, hd).transpose(0, 1) @ wkv_b[:, hd:]  # (nh, C, dc)
        q_lat = torch.einsum("btc,hlc->bhtl", x, w_q_lat)  # (B, nh, T, dc)
        q_rope = self.rope(torch.einsum("btc,hrc->bhtr", x, wq[:, hd:]), positions)
        c, k_rope = self.compress(x, positions)
        c = self.append(None if past_kv is None else past_kv[0], c)  # (B, S, dc)
        k_rope = self.append(None if past_kv is None else past_kv[1], k_rope)  # (B, S, dr)
        q = torch.cat([q_lat, q_rope], dim=-1)  # (B, nh, T, dc + dr)
        k = torch.cat([c, k_rope], dim=-1)[:, None]  # (B, 1, S, dc + dr): one latent head
        mask = self.mask(T, c.shape[1])
        out_lat = F.scaled_dot_product_attention(
            q, k, c[:, None], attn_mask=mask, scale=self.scale(), enable_gqa=True
        )  # (B, nh, T, dc)
        out = torch.einsum("bhtl,hcl->btc", out_lat, w_o_lat)  # (B, T, C)
        return out, (c, k_rope)


CORRECT_ABSORBED = {"manual": AbsorbedManual, "deepseek": AbsorbedDeepSeek, "mqa": AbsorbedMQA}

# ---------------------------------------------------------------------------- mla_cache_bytes


def bytes_formula(num_layers, d_latent, d_rope, seq_len, batch_size=1, bytes_per_value=2):
    return num_layers * (d_latent + d_rope) * seq_len * batch_size * bytes_per_value


def bytes_per_token(num_layers, d_latent, d_rope, seq_len, batch_size=1, bytes_per_value=2):
    per_token = num_layers * (d_latent + d_rope) * bytes_per_value  # one latent, one RoPE key
    return per_token * seq_len * batch_size


CORRECT_BYTES = {"formula": bytes_formula, "per_token": bytes_per_token}


def _bytes(formula):
    def mla_cache_bytes(num_layers, d_latent, d_rope, seq_len, batch_size=1, bytes_per_value=2):
        return formula(num_layers, d_latent, d_rope, seq_len, batch_size, bytes_per_value)

    return mla_cache_bytes


# ------------------------------------------------------------------------------- mistakes


class CachesUpProjected(MLAManual):
    """Hugging Face's own cache: the keys and values after the up-projection."""

    def cached(self, c_all, k_rope_all):
        k_nope, v = self.up(c_all)  # (B, nh, S, hd)
        return k_nope, v


class NoRope(MLAManual):
    def scale(self):
        return 1 / math.sqrt(self.head_dim)

    def attend(self, q_nope, q_rope, c, k_rope):
        return super().attend(q_nope, torch.zeros_like(q_rope), c, k_rope)


class RopeWholeHeads(MLAManual):
    """RoPE over each head's whole [nope | rope] query and key, after the up-projection."""

    rope = staticmethod(lambda t, positions: t)

    def attend(self, q_nope, q_rope, c, k_rope):
        k_nope, v = self.up(c)
        S, T = c.shape[1], q_nope.shape[2]
        k = torch.cat([k_nope, k_rope[:, None].expand(-1, self.num_heads, -1, -1)], -1)
        q = rope_rotate_half(torch.cat([q_nope, q_rope], -1), torch.arange(S - T, S))
        k = rope_rotate_half(k, torch.arange(S))
        scores = q @ k.transpose(-2, -1) * self.scale()
        scores = scores.masked_fill(~self.mask(T, S), float("-inf"))
        return torch.softmax(scores, dim=-1) @ v


class RotatesLatent(MLAManual):
    """RoPE on the compressed part too: the latent turned before the up-projection."""

    def up(self, c):
        S = c.shape[1]
        return super().up(self.rope(c, torch.arange(S)))


class KeyUnrotated(MLAManual):
    def compress(self, x, positions):
        c, k_rope = self.wkv_a(x).split([self.d_latent, self.d_rope], dim=-1)
        return self.kv_norm(c), k_rope


class ScaleHeadDim(MLAManual):
    def scale(self):
        return 1 / math.sqrt(self.head_dim)


class BlockedKV(MLAManual):
    def up(self, c):
        B, S, _ = c.shape
        k, v = self.wkv_b(c).chunk(2, dim=-1)  # every head's keys, then every head's values
        split = lambda t: t.view(B, S, self.num_heads, self.head_dim).transpose(1, 2)  # noqa: E731
        return split(k), split(v)


class SwappedKV(MLAManual):
    def up(self, c):
        k_nope, v = super().up(c)
        return v, k_nope


class NoNorm(MLAManual):
    def compress(self, x, positions):
        c, k_rope = self.wkv_a(x).split([self.d_latent, self.d_rope], dim=-1)
        return c, self.rope(k_rope, positions)


class CachesBeforeNorm(MLAManual):
    """Caches the raw latent and normalises the whole cache at every call: outputs are right."""

    def compress(self, x, positions):
        c, k_rope = self.wkv_a(x).split([self.d_latent, self.d_rope], dim=-1)
        return c, self.rope(k_rope, positions)

    def attend(self, q_nope, q_rope, c, k_rope):
        return super().attend(q_nope, q_rope, self.kv_norm(c), k_rope)


class RopeKeyPerHead(MLAManual):
    def cached(self, c_all, k_rope_all):
        return c_all, k_rope_all[:, None].expand(-1, self.num_heads, -1, -1)


class Restarts(MLAManual):
    def forward(self, x, past_kv=None):
        q_nope, q_rope = self.queries(x, torch.arange(x.shape[1]))
        c, k_rope = self.compress(x, torch.arange(x.shape[1]))
        c_all = self.append(None if past_kv is None else past_kv[0], c)
        k_all = self.append(None if past_kv is None else past_kv[1], k_rope)
        out = self.attend(q_nope, q_rope, c_all, k_all).transpose(1, 2)
        return self.wo(out.reshape(*x.shape[:2], -1)), (c_all, k_all)


class NoPast(MLAManual):
    def attend(self, q_nope, q_rope, c, k_rope):
        T = q_nope.shape[2]
        return super().attend(q_nope, q_rope, c[:, -T:], k_rope[:, -T:])


class TopLeft(MLAManual):
    def mask(self, T, S):
        return torch.ones(T, S, dtype=torch.bool).tril()


class LatentOnlyInWkvA(MLAManual):
    """No RoPE key out of wkv_a: the latent alone."""

    def __init__(self, d_model, num_heads, d_latent, head_dim, d_rope):
        super().__init__(d_model, num_heads, d_latent, head_dim, d_rope)
        self.wkv_a = nn.Linear(d_model, d_latent, bias=False)


class Float32Output(MLAManual):
    """Computes in float32 whatever the input: right values, the wrong dtype for float64."""

    def forward(self, x, past_kv=None):
        out, cache = super().forward(x, past_kv)
        return out.float(), cache


class AbsorbedScaleLatent(AbsorbedManual):
    def scale(self):
        return 1 / math.sqrt(self.d_latent + self.d_rope)


class AbsorbedWrongSide(AbsorbedManual):
    """W_UV into the query and W_UK into the output."""

    def absorbed(self):
        w_uk, w_uv = super().absorbed()
        return w_uv, w_uk


class AbsorbedNoRope(AbsorbedManual):
    def scale(self):
        return 1 / math.sqrt(self.head_dim)

    def attend(self, q_nope, q_rope, c, k_rope):
        return super().attend(q_nope, torch.zeros_like(q_rope), c, k_rope)


class AbsorbedExpandsValues(AbsorbedManual):
    """W_UK absorbed into the query, but the values up-projected for the whole cache."""

    def attend(self, q_nope, q_rope, c, k_rope):
        w = self.wkv_b.weight.view(self.num_heads, 2 * self.head_dim, self.d_latent)
        q_lat = q_nope @ w[:, : self.head_dim]  # (B, nh, T, dc)
        scores = q_lat @ c[:, None].transpose(-2, -1) + q_rope @ k_rope[:, None].transpose(-2, -1)
        T, S = scores.shape[-2:]
        scores = (scores * self.scale()).masked_fill(~self.mask(T, S), float("-inf"))
        _, v = self.up(c)  # (B, nh, S, hd)
        return torch.softmax(scores, dim=-1) @ v


class AbsorbedPerHead(MLAManual):
    """Not absorbed: each head's keys and values made from the whole cache, one head at a time,
    so that no single tensor holds them all."""

    def attend(self, q_nope, q_rope, c, k_rope):
        w = self.wkv_b.weight.view(self.num_heads, 2 * self.head_dim, self.d_latent)
        T, S = q_nope.shape[2], c.shape[1]
        outs = []
        for h in range(self.num_heads):
            k_h = c @ w[h, : self.head_dim].T  # (B, S, hd)
            v_h = c @ w[h, self.head_dim :].T  # (B, S, hd)
            scores = q_nope[:, h] @ k_h.transpose(-2, -1) + q_rope[:, h] @ k_rope.transpose(-2, -1)
            scores = (scores * self.scale()).masked_fill(~self.mask(T, S), float("-inf"))
            outs.append(torch.softmax(scores, dim=-1) @ v_h)  # (B, T, hd)
        return torch.stack(outs, dim=1)  # (B, nh, T, hd)


FULL = checks.check_mla_full_pass
DECODING = checks.check_mla_decoding
MATCHES = checks.check_absorbed_mla_matches_naive
MEMORY = checks.check_absorbed_mla_memory
BYTES = cache_checks.check_mla_cache_bytes

MISTAKES = [
    Mistake("mla: caches up-projected k, v", CachesUpProjected, FULL, "after the up-projection"),
    Mistake("mla: no decoupled rope", NoRope, FULL, "leaves the decoupled RoPE part out"),
    Mistake("mla: rope on whole heads", RopeWholeHeads, FULL, "can no longer be absorbed"),
    Mistake("mla: rope on the latent", RotatesLatent, FULL, "rotates the latent"),
    Mistake("mla: rope key unrotated", KeyUnrotated, FULL, "but not the shared key k_rope"),
    Mistake("mla: scale 1/sqrt(head_dim)", ScaleHeadDim, FULL, "1/√(head_dim + d_rope)"),
    Mistake("mla: wkv_b split blocked", BlockedKV, FULL, "side by side"),
    Mistake("mla: keys and values swapped", SwappedKV, FULL, "W_UK comes first"),
    Mistake("mla: no kv_norm", NoNorm, FULL, "skips kv_norm"),
    Mistake("mla: caches before kv_norm", CachesBeforeNorm, FULL, "taken before kv_norm"),
    Mistake("mla: rope key per head", RopeKeyPerHead, FULL, "shared by every head"),
    Mistake("mla: wkv_a without the rope key", LatentOnlyInWkvA, FULL, "decoupled key"),
    Mistake(
        "mla: float32 output", Float32Output, FULL, "keep the input dtype", (HIDDEN,), (), MISSED
    ),
    Mistake("mla: positions restart", Restarts, DECODING, "as if they were at positions 0"),
    Mistake("mla: no past", NoPast, DECODING, "attend only to the new positions"),
    Mistake("mla: top-left mask", TopLeft, DECODING, "aligned top-left"),
    Mistake("mla: caches up-projected (decoding)", CachesUpProjected, DECODING, "up-projection"),
    Mistake("absorbed: scale 1/sqrt(d_latent + d_rope)", AbsorbedScaleLatent, MATCHES, "absorbed"),
    Mistake("absorbed: W_UV on the wrong side", AbsorbedWrongSide, MATCHES, "W_UV into the output"),
    Mistake("absorbed: no rope", AbsorbedNoRope, MATCHES, "decoupled RoPE part out"),
    Mistake("absorbed: naive forward", MLAManual, MEMORY, "as many as the up-projected"),
    Mistake("absorbed: values expanded", AbsorbedExpandsValues, MEMORY, "absorb"),
    Mistake("absorbed: one head at a time", AbsorbedPerHead, MEMORY, "even if one head"),
    Mistake(
        "bytes: factor 2",
        _bytes(lambda L, dc, dr, S, B, w: 2 * L * (dc + dr) * S * B * w),
        BYTES,
        "no factor 2",
    ),
    Mistake(
        "bytes: no rope key",
        _bytes(lambda L, dc, dr, S, B, w: L * dc * S * B * w),
        BYTES,
        "add d_rope",
    ),
    Mistake(
        "bytes: one layer",
        _bytes(lambda L, dc, dr, S, B, w: (dc + dr) * S * B * w),
        BYTES,
        "multiply by num_layers",
    ),
    Mistake(
        "bytes: values",
        _bytes(lambda L, dc, dr, S, B, w: L * (dc + dr) * S * B),
        BYTES,
        "counts values",
    ),
    Mistake(
        "bytes: float",
        _bytes(lambda L, dc, dr, S, B, w: 1.0 * L * (dc + dr) * S * B * w),
        BYTES,
        "should return an int",
    ),
]

CORRECT = (
    correct([FULL, DECODING], CORRECT_NAIVE)
    + correct([FULL, DECODING, MATCHES, MEMORY], CORRECT_ABSORBED)
    + correct([BYTES], CORRECT_BYTES)
)


class AbsorbedStub(MLAManual):
    """The release of the absorbed exercise: the learner's finished MLA, forward still the stub."""

    def forward(self, x, past_kv=None):
        raise NotImplementedError()


STUBS = [(FULL, stub), (DECODING, stub), (MATCHES, AbsorbedStub), (MEMORY, AbsorbedStub)]
STUBS += [(BYTES, stub)]
REPLAY = [FULL, MATCHES, MEMORY, BYTES]  # decoding: the absorbed module under MATCHES


# ------------------------------------------ issue 45: the absorbed weights, read and kept


class AbsorbedNoRopeSameScale(AbsorbedManual):
    """The RoPE term dropped from the absorbed scores, the scale left at 1/√(hd + dr)."""

    def attend(self, q_nope, q_rope, c, k_rope):
        return super().attend(q_nope, torch.zeros_like(q_rope), c, k_rope)


class AbsorbedBlockedView(AbsorbedManual):
    """``wkv_b.weight.view(2, nh, hd, dc)``: every head's W_UK, then every head's W_UV."""

    def absorbed(self):
        w = self.wkv_b.weight.view(2, self.num_heads, self.head_dim, self.d_latent)
        return w[0], w[1]


class AbsorbedTransposedView(AbsorbedManual):
    """wkv_b's weight read as (nh, dc, 2hd), as if nn.Linear stored (in, out)."""

    def absorbed(self):
        w = self.wkv_b.weight.view(self.num_heads, self.d_latent, 2 * self.head_dim)
        return w[..., : self.head_dim].transpose(1, 2), w[..., self.head_dim :].transpose(1, 2)


class AbsorbedCopiedInInit(AbsorbedManual):
    """W_UK and W_UV cloned in ``__init__``: stale once the weights change."""

    def __init__(self, d_model, num_heads, d_latent, head_dim, d_rope):
        super().__init__(d_model, num_heads, d_latent, head_dim, d_rope)
        w = self.wkv_b.weight.detach().view(num_heads, 2 * head_dim, d_latent)
        self.w_uk, self.w_uv = w[:, :head_dim].clone(), w[:, head_dim:].clone()

    def absorbed(self):
        return self.w_uk.to(self.wkv_b.weight.dtype), self.w_uv.to(self.wkv_b.weight.dtype)


MISTAKES += [
    Mistake("absorbed: no rope, same scale", AbsorbedNoRopeSameScale, MATCHES, "RoPE part out"),
    Mistake("absorbed: view(2, nh, hd, dc)", AbsorbedBlockedView, MATCHES, "view the weight as"),
    Mistake("absorbed: weight read (nh, dc, 2hd)", AbsorbedTransposedView, MATCHES, "in_features"),
    Mistake("absorbed: copied in __init__", AbsorbedCopiedInInit, MATCHES, "built with"),
]


def _bytes_fp32_default(num_layers, d_latent, d_rope, seq_len, batch_size=1, bytes_per_value=4):
    return num_layers * (d_latent + d_rope) * seq_len * batch_size * bytes_per_value


MISTAKES += [
    Mistake("bytes: float32 default", _bytes_fp32_default, BYTES, "defaults to 2"),
    Mistake(
        "bytes: no seq_len",
        _bytes(lambda L, dc, dr, S, B, w: L * (dc + dr) * B * w),
        BYTES,
        "multiply by seq_len",
    ),
]
