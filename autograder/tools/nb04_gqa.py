"""Grouped-query attention tools: a ready-made GQA module, a tiny decoder and cached generation.

Shape legend: ``B`` batch, ``T`` new positions, ``S`` cached + new positions, ``C`` = d_model,
``nh`` query heads, ``nkv`` key/value heads, ``hs`` = C // nh, ``V`` vocabulary size.

:class:`TorchGroupedQueryAttention` has the interface of notebook 04's ``GroupedQueryAttention``
and lets PyTorch do the work (``F.scaled_dot_product_attention(..., enable_gqa=True)``). The
benchmark in :mod:`autograder.bench.kv_cache` uses it; a notebook passes the learner's own class to
:class:`TinyDecoder` instead. Random weights are enough: decoding speed does not depend on them.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

KVCache = tuple[torch.Tensor, torch.Tensor]


class TorchGroupedQueryAttention(nn.Module):
    """Causal grouped-query self-attention with a KV cache, computed by PyTorch.

    ``forward(x (B, T, C), past_kv=None, causal=True) -> (out (B, T, C), (k, v))`` with ``k``, ``v``
    of shape ``(B, nkv, S, hs)``: the cache, past positions first. The new queries are the last
    ``T`` of the ``S`` positions, so the causal mask is aligned bottom-right.
    """

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int, bias: bool = False):
        super().__init__()
        if d_model % num_heads or num_heads % num_kv_heads:
            raise ValueError(
                f"need d_model % num_heads == 0 and num_heads % num_kv_heads == 0, got "
                f"{d_model}, {num_heads}, {num_kv_heads}"
            )
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        hs = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, num_kv_heads * hs, bias=bias)
        self.v_proj = nn.Linear(d_model, num_kv_heads * hs, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(
        self, x: torch.Tensor, past_kv: KVCache | None = None, causal: bool = True
    ) -> tuple[torch.Tensor, KVCache]:
        B, T, C = x.shape
        hs = C // self.num_heads
        q = self.q_proj(x).view(B, T, self.num_heads, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = self.k_proj(x).view(B, T, self.num_kv_heads, hs).transpose(1, 2)  # (B, nkv, T, hs)
        v = self.v_proj(x).view(B, T, self.num_kv_heads, hs).transpose(1, 2)  # (B, nkv, T, hs)
        if past_kv is not None:
            k = torch.cat([past_kv[0], k], dim=2)  # (B, nkv, S, hs)
            v = torch.cat([past_kv[1], v], dim=2)  # (B, nkv, S, hs)
        S = k.shape[2]
        mask = None
        if causal and T > 1:  # a single new query may read every cached position
            mask = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(S - T)  # (T, S)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        out = out.transpose(1, 2).reshape(B, T, C)  # (B, nh, T, hs) -> (B, T, C)
        return self.out_proj(out), (k, v)


class Block(nn.Module):
    """A pre-norm decoder block: x + attention(norm(x)), then x + MLP(norm(x))."""

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int, attention: type):
        super().__init__()
        self.norm_1 = nn.LayerNorm(d_model)
        self.attn = attention(d_model, num_heads, num_kv_heads)
        self.norm_2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model)
        )

    def forward(self, x: torch.Tensor, past_kv: KVCache | None = None):
        attended, cache = self.attn(self.norm_1(x), past_kv=past_kv, causal=True)  # (B, T, C)
        x = x + attended
        return x + self.mlp(self.norm_2(x)), cache  # (B, T, C)


class TinyDecoder(nn.Module):
    """A GPT-style decoder: token + position embeddings, ``num_layers`` blocks, a vocabulary head.

    ``attention`` is any class with the interface of notebook 04's ``GroupedQueryAttention``.
    ``forward(idx (B, T), past=None) -> (logits (B, T, V), caches)`` with one ``(k, v)`` per layer.
    """

    def __init__(
        self,
        vocab_size: int = 512,
        d_model: int = 256,
        num_layers: int = 4,
        num_heads: int = 8,
        num_kv_heads: int = 2,
        max_len: int = 1024,
        attention: type = TorchGroupedQueryAttention,
    ):
        super().__init__()
        self.max_len = max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(
            Block(d_model, num_heads, num_kv_heads, attention) for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, idx: torch.Tensor, past: list[KVCache] | None = None):
        T = idx.shape[1]
        start = 0 if past is None else past[0][0].shape[2]  # positions already in the cache
        if start + T > self.max_len:
            raise ValueError(f"sequence of {start + T} tokens exceeds max_len={self.max_len}")
        positions = torch.arange(start, start + T, device=idx.device)  # (T,)
        x = self.tok_emb(idx) + self.pos_emb(positions)  # (B, T, C)
        caches = []
        for i, block in enumerate(self.blocks):
            x, cache = block(x, None if past is None else past[i])  # (B, T, C)
            caches.append(cache)
        return self.head(self.norm(x)), caches  # (B, T, V)


@dataclass
class Generation:
    """Greedy continuation ``tokens (B, new_tokens)`` and the wall time of each step in seconds."""

    tokens: torch.Tensor
    step_s: list[float] = field(default_factory=list)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens.numel() / sum(self.step_s)


@torch.inference_mode()
def generate(model: TinyDecoder, prompt: torch.Tensor, new_tokens: int, use_cache: bool):
    """Greedy decoding of ``new_tokens`` after ``prompt (B, P)``, timing every step.

    Without the cache every step runs the model over the whole sequence so far; with it, the
    prompt is processed once (the prefill, counted in the first step) and every later step feeds
    one token and reuses the keys and values of all earlier positions.
    """
    idx, past, out, step_s = prompt, None, [], []
    for _ in range(new_tokens):
        start = time.perf_counter()
        if use_cache:
            logits, past = model(idx if past is None else idx[:, -1:], past)  # (B, T or 1, V)
        else:
            logits, _ = model(idx)  # (B, P + t, V): everything recomputed
        nxt = logits[:, -1].argmax(-1, keepdim=True)  # (B, 1)
        step_s.append(time.perf_counter() - start)
        idx = torch.cat([idx, nxt], dim=1)  # (B, P + t + 1)
        out.append(nxt)
    return Generation(torch.cat(out, dim=1), step_s)  # tokens (B, new_tokens)


@dataclass
class DecodeBenchmark:
    """Medians over repeats, after warm-up, of decoding with and without the cache."""

    new_tokens: int
    runs: dict[str, list[Generation]]  # "no cache" / "KV cache" -> one Generation per repeat

    def tokens_per_s(self, name: str) -> float:
        return statistics.median(g.tokens_per_s for g in self.runs[name])

    def step_ms(self, name: str) -> list[float]:
        """Median time of each generation step across repeats, in milliseconds."""
        steps = zip(*(g.step_s for g in self.runs[name]), strict=True)
        return [1e3 * statistics.median(s) for s in steps]

    @property
    def speedup(self) -> float:
        return self.tokens_per_s("KV cache") / self.tokens_per_s("no cache")

    @property
    def same_tokens(self) -> bool:
        first = [g.tokens for g in (self.runs["no cache"][0], self.runs["KV cache"][0])]
        return torch.equal(*first)


def benchmark_decoding(
    model: TinyDecoder,
    prompt: torch.Tensor,
    new_tokens: int,
    repeats: int = 3,
    warmup: int = 1,
    threads: int | None = 1,
) -> DecodeBenchmark:
    """Time greedy decoding with and without the cache, alternating runs so load affects both.

    ``threads=1`` (the default) runs PyTorch on one CPU thread: a small model gains nothing from
    more, and on a shared machine extra threads wait for each other and make timings erratic.
    ``None`` keeps PyTorch's setting.
    """
    model.eval()
    before = torch.get_num_threads()
    runs: dict[str, list[Generation]] = {"no cache": [], "KV cache": []}
    try:
        if threads:
            torch.set_num_threads(threads)
        for i in range(warmup + repeats):
            for name in runs:
                gen = generate(model, prompt, new_tokens if i >= warmup else 8, name == "KV cache")
                if i >= warmup:
                    runs[name].append(gen)
    finally:
        torch.set_num_threads(before)
    return DecodeBenchmark(new_tokens, runs)


def cache_nbytes(caches: list[KVCache]) -> int:
    """Bytes held by a list of per-layer ``(k, v)`` caches."""
    return sum(t.nbytes for kv in caches for t in kv)


def meta_cache(
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    seq_len: int,
    batch_size: int = 1,
    dtype: torch.dtype = torch.float16,
) -> list[KVCache]:
    """The per-layer ``(k, v)`` cache tensors of a model, on the meta device (no memory used)."""
    shape = (batch_size, num_kv_heads, seq_len, head_dim)  # (B, nkv, S, hs)
    return [
        (
            torch.empty(shape, dtype=dtype, device="meta"),
            torch.empty(shape, dtype=dtype, device="meta"),
        )
        for _ in range(num_layers)
    ]
