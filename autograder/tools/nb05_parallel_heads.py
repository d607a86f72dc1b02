"""Notebook 05's three implementations of the same multi-head self-attention forward.

They take a module with notebook 02's interface (``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``,
``num_heads``); shape legend: ``B`` batch, ``T`` sequence length, ``C`` = d_model, ``nh`` heads,
``hs`` = C // nh.

- :func:`loop_heads`: a Python loop over heads, each with its own slice of the weights
  (5·nh + 1 matmuls);
- :func:`batched_heads`: one projection each, heads as a batch dimension (6 matmuls whatever nh);
- :func:`fused_heads`: ``batched`` with ``F.scaled_dot_product_attention`` (4 matmuls + 1 fused
  call).

``python -m autograder.bench.heads_timing`` times them against each other.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def _bias(linear: torch.nn.Linear, rows: slice) -> torch.Tensor | None:
    return None if linear.bias is None else linear.bias[rows]


def loop_heads(x: torch.Tensor, mha) -> torch.Tensor:
    """Self-attention of ``mha`` one head at a time. x ``(B, T, C)`` -> ``(B, T, C)``."""
    hs = x.shape[-1] // mha.num_heads
    heads = []
    for h in range(mha.num_heads):
        rows = slice(h * hs, (h + 1) * hs)  # head h owns these output features
        q = F.linear(x, mha.q_proj.weight[rows], _bias(mha.q_proj, rows))  # (B, T, hs)
        k = F.linear(x, mha.k_proj.weight[rows], _bias(mha.k_proj, rows))  # (B, T, hs)
        v = F.linear(x, mha.v_proj.weight[rows], _bias(mha.v_proj, rows))  # (B, T, hs)
        scores = q @ k.transpose(-2, -1) / math.sqrt(hs)  # (B, T, hs) @ (B, hs, T) -> (B, T, T)
        heads.append(torch.softmax(scores, dim=-1) @ v)  # (B, T, T) @ (B, T, hs) -> (B, T, hs)
    return mha.out_proj(torch.cat(heads, dim=-1))  # (B, T, nh*hs) -> (B, T, C)


def _split(t: torch.Tensor, nh: int) -> torch.Tensor:
    B, T, C = t.shape
    return t.view(B, T, nh, C // nh).transpose(1, 2)  # (B, T, C) -> (B, nh, T, hs)


def batched_heads(x: torch.Tensor, mha) -> torch.Tensor:
    """Self-attention of ``mha``, every head in one batched product. ``(B, T, C)`` -> same."""
    B, T, C = x.shape
    nh = mha.num_heads
    q = _split(mha.q_proj(x), nh)  # (B, nh, T, hs)
    k = _split(mha.k_proj(x), nh)  # (B, nh, T, hs)
    v = _split(mha.v_proj(x), nh)  # (B, nh, T, hs)
    kt = k.transpose(-2, -1)  # (B, nh, hs, T)
    scores = q @ kt / math.sqrt(C // nh)  # (B, nh, T, hs) @ (B, nh, hs, T) -> (B, nh, T, T)
    out = torch.softmax(scores, dim=-1) @ v  # (B, nh, T, T) @ (B, nh, T, hs) -> (B, nh, T, hs)
    return mha.out_proj(out.transpose(1, 2).reshape(B, T, C))  # (B, nh, T, hs) -> (B, T, C)


def fused_heads(x: torch.Tensor, mha) -> torch.Tensor:
    """:func:`batched_heads` with PyTorch's fused attention kernel for the middle part."""
    B, T, C = x.shape
    nh = mha.num_heads
    q, k, v = (_split(p(x), nh) for p in (mha.q_proj, mha.k_proj, mha.v_proj))  # (B, nh, T, hs)
    out = F.scaled_dot_product_attention(q, k, v)  # (B, nh, T, hs)
    return mha.out_proj(out.transpose(1, 2).reshape(B, T, C))  # (B, nh, T, hs) -> (B, T, C)


IMPLEMENTATIONS = {"loop": loop_heads, "batched": batched_heads, "fused": fused_heads}
