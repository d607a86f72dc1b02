"""Notebook 05's two versions of multi-head attention as the checks call them.

Shape legend: ``B`` batch, ``T`` sequence length, ``C`` = d_model, ``nh`` heads, ``hs`` = C // nh.

Both ``mha_sequential`` (one head at a time) and ``mha_parallel`` (all heads at once) take
``(x, mha)``: PyTorch's ``TorchMultiHeadAttention`` holding seeded weights, which they must not
call whole. :func:`run` calls a version and enforces that, :func:`oracle` is what it must equal.
The values, loop and FLOPs checks (:mod:`.nb05_parallel`, :mod:`.nb05_flops`) all run them here.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from autograder.tools.modules import TorchMultiHeadAttention
from autograder.torch_helpers import record_torch_calls

from ._core import call, calls_packaged_mha, expect_tensor, expect_unmodified, fail, randn

SEQ, PAR = "mha_sequential", "mha_parallel"


class WatchedMHA(TorchMultiHeadAttention):
    """PyTorch's MHA that counts how often it is called whole (the learner must not)."""

    calls = 0

    def forward(self, *args, **kwargs):
        self.calls += 1
        return super().forward(*args, **kwargs)


def make_mha(gen, C, nh, bias=True, dtype=torch.float64) -> WatchedMHA:
    """An MHA with weights drawn from ``gen``; biases large enough to matter."""
    mha = WatchedMHA(C, nh, bias=bias).to(dtype)
    with torch.no_grad():
        for lin in (mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj):
            lin.weight.copy_(randn(gen, C, C, dtype=dtype) / math.sqrt(C))
            if bias:
                lin.bias.copy_(0.5 * randn(gen, C, dtype=dtype))
    return mha


def oracle(mha, x) -> torch.Tensor:
    with torch.no_grad():
        return TorchMultiHeadAttention.forward(mha, x)[0]  # (B, T, C), not counted as a call


class HeadBatches(TorchDispatchMode):
    """The batch sizes of the batched products (bmm, baddbmm) and fused attention calls seen."""

    def __init__(self):
        super().__init__()
        self.batches: set[int] = set()

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name.removeprefix("aten::")
        first = args[0] if args else None
        if name in ("bmm", "baddbmm") and isinstance(
            args[-1 if name == "bmm" else 1], torch.Tensor
        ):
            self.batches.add(int(args[-1 if name == "bmm" else 1].shape[0]))
        elif "scaled_dot_product" in name and isinstance(first, torch.Tensor) and first.dim() == 4:
            self.batches.add(int(first.shape[0] * first.shape[1]))
        return func(*args, **(kwargs or {}))


def run(
    fn: Callable, name: str, x: torch.Tensor, mha: WatchedMHA, heads_rule: bool = True
) -> torch.Tensor:
    """Call the learner's ``fn(x, mha)``; fail if it hands the work to the module itself."""
    __tracebackhide__ = True
    mha.calls = 0
    before = [t.clone() for t in mha.state_dict().values()]
    with record_torch_calls() as names, HeadBatches() as seen:
        out = call(fn, name, (x, mha))
    expect_unmodified(before, list(mha.state_dict().values()), name)  # its oracle reads mha
    if mha.calls or calls_packaged_mha(names):
        fail(
            f"`{name}` calls `mha(x)` (or F.multi_head_attention_forward) itself: compute the "
            "result from mha.q_proj, k_proj, v_proj and out_proj instead."
        )
    all_at_once = x.shape[0] * mha.num_heads in seen.batches and mha.num_heads > 1
    if heads_rule and name == SEQ and all_at_once:
        fail(
            f"`{SEQ}` computes all heads in one batched product (batch B·nh), as mha(x) does: "
            "loop over the heads (for h in range(mha.num_heads)) with one slice of the weights "
            "per head."
        )
    if isinstance(out, tuple | list):
        fail(f"`{name}` returned a {type(out).__name__}: return only the output tensor (B, T, C).")
    return expect_tensor(out, name, "the output tensor (B, T, C)")
