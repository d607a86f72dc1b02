"""Learner tools for notebook 06: what ran, how big it got, and a picture of tiled attention.

Shape legend: ``B`` batch, ``nh`` heads, ``T`` query length, ``S`` key/value length,
``hs`` head size.

- :func:`track_tensors` records the largest tensor any operator *creates* while it is active
  (views and in-place results share memory and do not count). It is deterministic, unlike memory
  readings, and works on every device: it is how the course proves that a function never builds
  the ``(T, S)`` score matrix.
- :func:`sdpa_backend` says which implementation ``F.scaled_dot_product_attention`` dispatched to.
- :func:`plot_online_softmax` draws the idea of FlashAttention: key blocks, a running maximum
  and the rescaling of what was accumulated so far.
- :func:`gradients_through` runs a ``torch.autograd.Function`` forward and backward in one call,
  as a training step does; the checks of the notebook's ``FlashAttention`` call it, so that the
  classroom grader records the learner's backward together with the forward it belongs to.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from torch.utils._python_dispatch import TorchDispatchMode

from autograder.torch_helpers import record_torch_calls


@dataclass
class CreatedTensor:
    """The largest tensor seen so far: its size, shape, dtype and the operator that made it."""

    numel: int = 0
    shape: tuple[int, ...] = ()
    dtype: torch.dtype | None = None
    op: str = ""

    def describe(self) -> str:
        dtype = str(self.dtype).removeprefix("torch.")
        return f"{self.shape} {dtype} ({self.numel:,} elements, made by {self.op})"


class _LargestTensor(TorchDispatchMode):
    def __init__(self, record: CreatedTensor):
        super().__init__()
        self.record = record

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if any(r.alias_info is not None for r in func._schema.returns):
            return out  # a view or an in-place result: no new memory
        for t in out if isinstance(out, tuple | list) else (out,):
            if isinstance(t, torch.Tensor) and t.numel() > self.record.numel:
                self.record.numel, self.record.shape = t.numel(), tuple(t.shape)
                self.record.dtype, self.record.op = t.dtype, func._schema.name
        return out


@contextlib.contextmanager
def track_tensors() -> Iterator[CreatedTensor]:
    """Record the largest tensor created by any operator inside the ``with`` block."""
    record = CreatedTensor()
    with _LargestTensor(record):
        yield record


_BACKENDS = {
    "_scaled_dot_product_flash_attention_for_cpu": "flash (CPU kernel)",
    "_scaled_dot_product_flash_attention": "flash",
    "_scaled_dot_product_efficient_attention": "efficient (memory-efficient)",
    "_scaled_dot_product_cudnn_attention": "cuDNN",
    "_scaled_dot_product_fused_attention_overrideable": "custom accelerator hook",
}


def sdpa_backend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kwargs) -> str:
    """The backend ``F.scaled_dot_product_attention(q, k, v, **kwargs)`` runs here."""
    with warnings.catch_warnings(), record_torch_calls() as names:
        warnings.simplefilter("ignore")
        F.scaled_dot_product_attention(q, k, v, **kwargs)
    ops = {n.split("::")[-1] for n in names if n.startswith("aten::")}
    return next((name for op, name in _BACKENDS.items() if op in ops), "math")


def gradients_through(
    function: type[torch.autograd.Function],
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    do: torch.Tensor,
    *args,
) -> tuple[torch.Tensor, ...]:
    """``(dq, dk, dv)`` of ``sum(o ∘ do)`` for ``o = function.apply(q, k, v, *args)``.

    One forward and one backward through autograd, on copies of ``q``, ``k``, ``v`` that require
    gradients: ``do`` is ``(B, nh, T, hs)``, like ``o``.
    """
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    with torch.enable_grad():
        o = function.apply(*leaves, *args)
    if not isinstance(o, torch.Tensor):
        raise TypeError(
            f"{function.__name__}.forward returned {type(o).__name__}: return the output o "
            "alone and keep lse for the backward with ctx.save_for_backward"
        )
    return torch.autograd.grad(o, leaves, do)


def attention_flops(B: int, nh: int, T: int, S: int, hs: int, causal: bool = False) -> float:
    """Matmul FLOPs of one attention forward: q kᵀ and weights @ v, 2 per multiply-add.

    A causal mask (S = T) skips about half of the work, so it counts half.
    """
    flops = 4.0 * B * nh * T * S * hs
    return flops / 2 if causal else flops


def plot_online_softmax(scores, block_size: int, row: int = 0) -> Figure:
    """FlashAttention's idea on a ``(T, S)`` score matrix cut into key blocks of ``block_size``.

    Left: the scores, with the key blocks and one (query block, key block) tile, the unit of work
    of one step of a kernel. Right: query ``row``'s scores block by block, the running maximum
    after each block, and the factor exp(m_old - m_new) that rescales everything accumulated so
    far whenever the maximum grows.
    """
    s = scores.detach().to("cpu", torch.float64).numpy() if torch.is_tensor(scores) else scores
    s = np.asarray(s, dtype=np.float64)
    T, S = s.shape
    n_blocks = math.ceil(S / block_size)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2), width_ratios=[1, 1.4])
    left.imshow(s, cmap="RdBu_r", aspect="auto")
    for b in range(1, n_blocks):
        left.axvline(b * block_size - 0.5, color="black", lw=1)
    for b in range(1, math.ceil(T / block_size)):
        left.axhline(b * block_size - 0.5, color="black", lw=0.8, ls=":")
    tile_rows = min(block_size, T)
    left.add_patch(
        Rectangle(
            (block_size - 0.5, -0.5),
            min(block_size, S - block_size),
            tile_rows,
            fill=False,
            ec="gold",
            lw=3,
            label="one tile: a query block × a key block",
        )
    )
    left.axhline(row, color="green", lw=2, label=f"query {row}")
    title = f"scores (T={T}, S={S}), key blocks of {block_size}"
    left.set(xlabel="key", ylabel="query", title=title)
    left.legend(loc="lower left", fontsize=8)

    x = s[row]
    colours = plt.cm.tab10(np.arange(S) // block_size % 10)
    right.bar(np.arange(S), x, color=colours, width=0.8)
    m = -np.inf
    for b in range(n_blocks):
        block = x[b * block_size : (b + 1) * block_size]
        m_new = max(m, block.max())
        factor = math.exp(m - m_new) if np.isfinite(m) else 0.0
        right.hlines(
            m_new,
            b * block_size - 0.5,
            min((b + 1) * block_size, S) - 0.5,
            color="black",
            lw=2,
            label="running max m" if b == 0 else None,
        )
        if b > 0:
            right.annotate(
                f"×{factor:.2g}",
                (b * block_size, m_new),
                textcoords="offset points",
                xytext=(0, 6),
                fontsize=8,
            )
        m = m_new
    low, high = x.min(), x.max()
    right.set_ylim(min(low, 0) - 0.1 * (high - low), high + 0.25 * (high - low))
    right.set(
        xlabel="key (colour = block)",
        ylabel="score",
        title=f"query {row}: running max; ×f = exp(m_old − m_new) rescales l and acc",
    )
    right.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig
