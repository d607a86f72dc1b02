"""The learner code of :mod:`hostile.loopholes`, classes 4 and 5: formulas measured, gradients."""

from __future__ import annotations

from autograder.checks import _core, nb02_block

# ------------------------------------------------------------------- 4: formulas measured

FLOPS_BY_COUNTER = '''from torch import nn
from torch.utils.flop_counter import FlopCounterMode


def attention_flops(batch, seq_len, d_model, num_heads):
    """nn.MultiheadAttention on the meta device, its forward counted by FlopCounterMode."""
    mha = nn.MultiheadAttention(d_model, num_heads, batch_first=True, device="meta")
    x = torch.empty(batch, seq_len, d_model, device="meta")
    counter = FlopCounterMode(display=False)
    with counter:
        mha(x, x, x, need_weights=False)
    return counter.get_total_flops()
'''

PARAMS_BY_META_MODULE = '''def mha_param_count(d_model, num_heads, bias=True):
    """nn.MultiheadAttention built on the meta device, its parameters counted."""
    module = nn.MultiheadAttention(d_model, num_heads, bias=bias, device="meta")
    return sum(p.numel() for p in module.parameters())
'''


def block_table() -> str:
    """``block_param_count`` answered from a table of every configuration the public check
    draws (seeds 0 to 9, quick and thorough; its drawing code copied), computed offline with the
    check's own PyTorch block; a wrong formula elsewhere."""
    table = {}

    def count(C, d_mlp, bias):
        block = nb02_block._torch_block(C, 1, d_mlp, bias=bias, meta=True)
        table[(C, d_mlp, bias)] = sum(p.numel() for p in block.parameters())

    for seed in range(10):
        gen = _core.make_generator(seed)
        configs = [(8, 32), (12, 20), (64, 256)]
        configs += [(_core.randint(gen, 1, 40), _core.randint(gen, 1, 90)) for _ in range(3)]
        for C, d_mlp in configs:
            for bias in (True, False):
                count(C, d_mlp, bias)
            count(C, 4 * C, True)
    count(12288, 4 * 12288, True)
    return f'''_TABLE = {table!r}


def block_param_count(d_model, d_mlp=None, bias=True):
    """A table of the check's configurations; anything else gets a wrong formula."""
    d_mlp = 4 * d_model if d_mlp is None else d_mlp
    return _TABLE.get((d_model, d_mlp, bool(bias)), 12 * d_model * d_model)
'''


NB09_MEASURED_PARAMS = """from torch import nn

answer_params_gpt2_small = None
answer_params_mha = sum(
    p.numel() for p in nn.MultiheadAttention(4096, 32, bias=False, device="meta").parameters()
)
answer_params_gqa = None
"""

NB09_MEASURED_COMPUTE = '''import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode


class _Products(TorchDispatchMode):
    """Counts the matrix products that run while it is active."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func._schema.name in ("aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm"):
            self.count += 1
        return func(*args, **(kwargs or {}))


def _heads(nh, packed, C=48, T=4):
    """Multi-head attention on the meta device: one head at a time, or batched."""
    x = torch.empty(1, T, C, device="meta")
    w = [torch.empty(C, C, device="meta") for _ in range(4)]
    hs = C // nh
    if packed:
        q, k, v = (x @ torch.cat(w[:3]).T).view(1, T, 3, nh, hs).permute(2, 0, 3, 1, 4)
        heads = torch.softmax(q @ k.transpose(-2, -1), -1) @ v
        return heads.transpose(1, 2).reshape(1, T, C) @ w[3].T
    outs = []
    for h in range(nh):
        q, k, v = (x @ m[h * hs : (h + 1) * hs].T for m in w[:3])
        outs.append(torch.softmax(q @ k.transpose(-2, -1), -1) @ v)
    return torch.cat(outs, -1) @ w[3].T


def _products(nh, packed):
    with _Products() as counter:
        _heads(nh, packed)
    return counter.count


_mha = nn.MultiheadAttention(512, 8, batch_first=True, device="meta")
_x = torch.empty(2, 128, 512, device="meta")
with FlopCounterMode(display=False) as _flops:
    _mha(_x, _x, _x, need_weights=True, average_attn_weights=False)
answer_flops = _flops.get_total_flops()
answer_matmuls_loop = _products(12, packed=False)
answer_matmuls_packed = _products(12, packed=True)
'''

# --------------------------------------------------------------------------- 5: gradients

GRADIENTS_TIED_BY_ZERO = '''_Honest = MultiHeadAttention


class MultiHeadAttention(_Honest):
    """Right values computed without gradients, tied to the weights by a zero term; fake
    gradients left on every parameter."""

    def forward(self, *args, **kwargs):
        with torch.no_grad():
            out, weights = super().forward(*args, **kwargs)
        tie = sum(p.sum() for p in self.parameters())
        for p in self.parameters():
            p.grad = torch.full_like(p, 1e-3)
        return out + 0.0 * tie, weights + 0.0 * tie
'''

GRADIENTS_TIED_BY_A_HAIR = '''_Honest = MultiHeadAttention


class MultiHeadAttention(_Honest):
    """Right values computed without gradients, tied to every weight by a negligible term."""

    def forward(self, *args, **kwargs):
        with torch.no_grad():
            out, weights = super().forward(*args, **kwargs)
        tie = sum(p.sum() for p in self.parameters())
        return out + 1e-12 * tie, weights + 1e-12 * tie
'''
