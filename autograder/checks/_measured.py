"""Oracles that measure a module instead of writing an answer down (notebook 10's quiz).

Products and FLOPs of one self-attention forward, counted by PyTorch's own formulas as it runs
(:func:`measure`), PyTorch's packed-projection module (:func:`packed`) and the parameters of a
module built on the meta device (:func:`meta_params`): the questions of §1 and the claims of §2
are both judged by them.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

_PRODUCTS = {torch.ops.aten.mm, torch.ops.aten.addmm, torch.ops.aten.bmm, torch.ops.aten.baddbmm}


class _ProductCounter(TorchDispatchMode):
    """Counts the matrix products that run, and their FLOPs by PyTorch's own formulas."""

    def __init__(self):
        super().__init__()
        self.products = 0
        self.flops = 0

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # otherwise the first use imports torch._dynamo: seconds on a small machine

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func._overloadpacket in _PRODUCTS:
            self.products += 1
            self.flops += flop_registry[func._overloadpacket](*args, **(kwargs or {}), out_val=out)
        return out


def measure(module: nn.Module, B: int, T: int, C: int) -> _ProductCounter:
    """Products and FLOPs of one self-attention forward of ``module`` on a ``(B, T, C)`` input."""
    x = torch.zeros(B, T, C)  # (B, T, C): only the shapes matter
    counter = _ProductCounter()
    with torch.no_grad(), warnings.catch_warnings(), counter:
        warnings.simplefilter("ignore")
        if isinstance(module, nn.MultiheadAttention):  # q is k is v: one packed qkv projection
            module(x, x, x, need_weights=True)
        else:
            module(x)
    return counter


def packed(C: int, nh: int) -> nn.MultiheadAttention:
    """PyTorch's module: q, k and v come from one packed ``(3C, C)`` projection (like c_attn)."""
    return nn.MultiheadAttention(C, nh, batch_first=True)


def meta_params(build: Callable[[], nn.Module]) -> int:
    """Parameters of a module built on the meta device (any size, no memory)."""
    with torch.device("meta"):
        return sum(p.numel() for p in build().parameters())
