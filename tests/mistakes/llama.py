"""Notebook 02, section 12: RMSNorm, SwiGLU, the Llama MLP width and block count; correct and
wrong. Real codebases' modules are copied in their own layout (Meta's ``llama/model.py``,
Hugging Face's ``LlamaRMSNorm`` and ``LlamaMLP``).

Shape legend: ``C`` = d_model, ``h`` the MLP's hidden width.
"""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks import nb02_llama as checks
from autograder.checks import nb02_llama_count as counts

from . import Mistake, correct, stub

# ------------------------------------------------------------------------------- RMSNorm


class RMSNormMeta(nn.Module):
    """Meta's Llama: float32 inside, cast back, then the weight."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float()).type_as(x)
        return output * self.weight


class RMSNormHF(nn.Module):
    """Hugging Face's LlamaRMSNorm."""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class RMSNormSqrt(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.eps) * self.weight


CORRECT_NORM = {"Meta": RMSNormMeta, "Hugging Face": RMSNormHF, "sqrt": RMSNormSqrt}


class NormBug(RMSNormSqrt):
    def __init__(self, dim, eps=1e-6, *, bug=""):
        super().__init__(dim, eps)
        self.bug = bug
        if bug == "bias":
            self.bias = nn.Parameter(torch.zeros(dim))
        if bug == "zeros":
            self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        w, eps, bug = self.weight, self.eps, self.bug
        if bug == "layernorm":
            return F.layer_norm(x, x.shape[-1:], w, None, eps)
        ms = x.pow(2).mean(-1, keepdim=True)
        if bug == "eps_outside":
            return x / (ms.sqrt() + eps) * w
        if bug == "no_eps":
            return x / ms.sqrt() * w
        if bug == "no_weight":
            return x * torch.rsqrt(ms + eps)
        if bug in ("gemma", "zeros"):
            return x * torch.rsqrt(ms + eps) * (1 + w)
        if bug == "sum":
            return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps) * w
        if bug == "fused":
            return F.rms_norm(x, x.shape[-1:], w, eps)
        return x * torch.rsqrt(ms + eps) * w


def _norm_bug(bug):
    return partial(NormBug, bug=bug)


def norm_default_1e5(dim, eps=1e-5):
    return RMSNormSqrt(dim, eps)


# -------------------------------------------------------------------------------- SwiGLU


class FeedForwardMeta(nn.Module):
    """Meta's Llama FeedForward, with the width given."""

    def __init__(self, dim: int, hidden_dim: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class LlamaMLP(nn.Module):
    """Hugging Face's LlamaMLP."""

    def __init__(self, hidden_size, intermediate_size):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class SwiGLUSigmoid(FeedForwardMeta):
    """SiLU written out: x · sigmoid(x)."""

    def forward(self, x):
        g = self.w1(x)
        return self.w2(g * torch.sigmoid(g) * self.w3(x))


CORRECT_MLP = {"Meta": FeedForwardMeta, "Hugging Face": LlamaMLP, "x·sigmoid(x)": SwiGLUSigmoid}


class MLPBug(FeedForwardMeta):
    def __init__(self, dim, hidden_dim, *, bug=""):
        super().__init__(dim, hidden_dim)
        self.bug = bug
        if bug == "bias":
            self.w1 = nn.Linear(dim, hidden_dim)

    def forward(self, x):
        g, u, bug = self.w1(x), self.w3(x), self.bug
        h = {
            "gate_on_up": lambda: F.silu(u) * g,
            "gelu": lambda: F.gelu(g) * u,
            "sigmoid": lambda: torch.sigmoid(g) * u,
            "silu_both": lambda: F.silu(g) * F.silu(u),
            "silu_after": lambda: F.silu(g * u),
            "no_up": lambda: F.silu(g),
        }.get(bug, lambda: F.silu(g) * u)()
        return self.w2(h)


def _mlp_bug(bug):
    return partial(MLPBug, bug=bug)


class MLPTwoMatrices(nn.Module):
    def __init__(self, dim, hidden_dim):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)))


# ------------------------------------------------------------------------- hidden width


def hidden_meta(dim, multiple_of=256, ffn_dim_multiplier=None):
    """Meta's FeedForward.__init__, as written there."""
    hidden_dim = 4 * dim
    hidden_dim = int(2 * hidden_dim / 3)
    if ffn_dim_multiplier is not None:
        hidden_dim = int(ffn_dim_multiplier * hidden_dim)
    return multiple_of * ((hidden_dim + multiple_of - 1) // multiple_of)


def hidden_ceil(d_model, multiple_of=256, ffn_dim_multiplier=None):
    h = int(8 * d_model / 3)
    h = int(h * ffn_dim_multiplier) if ffn_dim_multiplier else h
    return -(-h // multiple_of) * multiple_of


CORRECT_HIDDEN = {"Meta": hidden_meta, "negative floor": hidden_ceil}


def hidden_no_third(d_model, multiple_of=256, ffn_dim_multiplier=None):
    return hidden_meta(3 * d_model // 2, multiple_of, ffn_dim_multiplier)


def hidden_unrounded(d_model, multiple_of=256, ffn_dim_multiplier=None):
    return int(8 * d_model / 3)


def hidden_floor(d_model, multiple_of=256, ffn_dim_multiplier=None):
    h = int(8 * d_model / 3)
    h = int(h * ffn_dim_multiplier) if ffn_dim_multiplier else h
    return h // multiple_of * multiple_of


def hidden_late_multiplier(d_model, multiple_of=256, ffn_dim_multiplier=None):
    h = hidden_meta(d_model, multiple_of)
    return int(h * ffn_dim_multiplier) if ffn_dim_multiplier else h


def hidden_float(d_model, multiple_of=256, ffn_dim_multiplier=None):
    return float(hidden_meta(d_model, multiple_of, ffn_dim_multiplier))


# -------------------------------------------------------------------------- block count


def count_by_parts(d_model, num_heads, num_kv_heads, hidden):
    hs = d_model // num_heads
    attention = 2 * d_model * d_model + 2 * d_model * num_kv_heads * hs
    return attention + 3 * d_model * hidden + 2 * d_model


def count_compact(C, nh, nkv, h):
    return C * (2 * C + 2 * nkv * (C // nh) + 3 * h + 2)


CORRECT_COUNT = {"by parts": count_by_parts, "compact": count_compact}


def count_torch(d_model, num_heads, num_kv_heads, hidden):
    return sum(p.numel() for p in nn.Linear(d_model, hidden, device="meta").parameters()) * 0 + (
        count_by_parts(d_model, num_heads, num_kv_heads, hidden)
    )


def count_no_gqa(C, nh, nkv, h):
    return count_by_parts(C, nh, nh, h)


def count_two_matrices(C, nh, nkv, h):
    return count_by_parts(C, nh, nkv, h) - C * h


def count_norm_bias(C, nh, nkv, h):
    return count_by_parts(C, nh, nkv, h) + 2 * C


def count_no_norms(C, nh, nkv, h):
    return count_by_parts(C, nh, nkv, h) - 2 * C


# ---------------------------------------------------------------------------- catalogue

CORRECT = (
    correct([checks.check_rmsnorm], CORRECT_NORM)
    + correct([checks.check_swiglu], CORRECT_MLP)
    + correct([counts.check_swiglu_hidden], CORRECT_HIDDEN)
    + correct([counts.check_llama_block_param_count], CORRECT_COUNT)
)
NORM, SWIGLU = checks.check_rmsnorm, checks.check_swiglu
HIDDEN, COUNT = counts.check_swiglu_hidden, counts.check_llama_block_param_count
MISTAKES = [
    Mistake("layernorm", _norm_bug("layernorm"), NORM, "that is LayerNorm"),
    Mistake("eps outside", _norm_bug("eps_outside"), NORM, "outside the square root"),
    Mistake("no eps", _norm_bug("no_eps"), NORM, "ignores eps"),
    Mistake("no weight", _norm_bug("no_weight"), NORM, "forgets the weight"),
    Mistake("gemma", _norm_bug("gemma"), NORM, "(1 + weight)"),
    Mistake("sum", _norm_bug("sum"), NORM, "L2 norm"),
    Mistake("bias", _norm_bug("bias"), NORM, "no shift"),
    Mistake("zeros", _norm_bug("zeros"), NORM, "start at ones"),
    Mistake("fused", _norm_bug("fused"), NORM, "calls `"),
    Mistake("eps 1e-5", norm_default_1e5, NORM, "default to eps=1e-6"),
    Mistake("gate on up", _mlp_bug("gate_on_up"), SWIGLU, "wrong projection"),
    Mistake("gelu", _mlp_bug("gelu"), SWIGLU, "GEGLU"),
    Mistake("sigmoid", _mlp_bug("sigmoid"), SWIGLU, "plain sigmoid"),
    Mistake("silu both", _mlp_bug("silu_both"), SWIGLU, "both projections"),
    Mistake("silu after", _mlp_bug("silu_after"), SWIGLU, "after the product"),
    Mistake("no up", _mlp_bug("no_up"), SWIGLU, "drops the up projection"),
    Mistake("mlp bias", _mlp_bug("bias"), SWIGLU, "has a bias"),
    Mistake("two matrices", MLPTwoMatrices, SWIGLU, "needs `w3`"),
    Mistake("no 2/3", hidden_no_third, HIDDEN, "keeps 4·d_model"),
    Mistake("unrounded", hidden_unrounded, HIDDEN, "without rounding up"),
    Mistake("floor", hidden_floor, HIDDEN, "rounds down"),
    Mistake("late multiplier", hidden_late_multiplier, HIDDEN, "after rounding"),
    Mistake("float width", hidden_float, HIDDEN, "returned a float"),
    Mistake("torch count", count_torch, COUNT, "creates tensors"),
    Mistake("no GQA", count_no_gqa, COUNT, "ignores GQA"),
    Mistake("two MLP matrices", count_two_matrices, COUNT, "counts two MLP matrices"),
    Mistake("norm bias", count_norm_bias, COUNT, "gives RMSNorm a bias"),
    Mistake("no norms", count_no_norms, COUNT, "forgets the two RMSNorms"),
]
STUBS = [(NORM, stub), (SWIGLU, stub), (HIDDEN, stub), (COUNT, stub)]
REPLAY = [NORM, SWIGLU, HIDDEN, COUNT]


# ------------------------------------------------ issue 45: dtypes and the width's slips


class RMSNormNoCastBack(RMSNormMeta):
    """Normalises in float32, as Meta does, but never casts back to the input's dtype."""

    def forward(self, x):
        return self._norm(x.float()) * self.weight


class RMSNormBF16(RMSNormMeta):
    """Computes in bfloat16 whatever the input, then casts back."""

    def forward(self, x):
        return (self._norm(x.bfloat16()) * self.weight.bfloat16()).to(x.dtype)


def hidden_no_multiplier(d_model, multiple_of=256, ffn_dim_multiplier=None):
    return hidden_meta(d_model, multiple_of)


def hidden_always_next(d_model, multiple_of=256, ffn_dim_multiplier=None):
    h = int(8 * d_model / 3)
    h = int(h * ffn_dim_multiplier) if ffn_dim_multiplier else h
    return multiple_of * (h // multiple_of + 1)


def hidden_float_multiplier(d_model, multiple_of=256, ffn_dim_multiplier=None):
    h = int(8 * d_model / 3)
    h = h * ffn_dim_multiplier if ffn_dim_multiplier else h
    return multiple_of * ((h + multiple_of - 1) // multiple_of)


def hidden_ceil_untruncated(d_model, multiple_of=256, ffn_dim_multiplier=None):
    h = int(8 * d_model / 3)
    h = h * ffn_dim_multiplier if ffn_dim_multiplier else h
    return multiple_of * math.ceil(h / multiple_of)


MISTAKES += [
    Mistake("norm: float32 not cast back", RMSNormNoCastBack, NORM, "cast the result back"),
    Mistake("norm: computed in bfloat16", RMSNormBF16, NORM, "half precision"),
    Mistake("hidden: ignores multiplier", hidden_no_multiplier, HIDDEN, "ignores ffn_dim"),
    Mistake("hidden: always next multiple", hidden_always_next, HIDDEN, "always adds a multiple"),
    Mistake("hidden: float multiplier", hidden_float_multiplier, HIDDEN, "truncate it"),
    Mistake("hidden: ceil untruncated", hidden_ceil_untruncated, HIDDEN, "without truncating"),
]
