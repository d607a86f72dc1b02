"""Notebook 02, section 11: the pre-LN block and its parameter count; correct and wrong.

Shape legend: ``B`` batch, ``T`` sequence length, ``C`` = d_model, ``nh`` heads. The
MultiHeadAttention they use is the catalogue's correct one. Real codebases' blocks are adapted
to the exercise's names only (``ln1``, ``attn``, ``ln2``, ``mlp``).
"""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks import nb02_block as checks

from . import Mistake, correct, stub
from .multihead import MHAFused, MHASeparate

# ------------------------------------------------------------------------ transformer block


class BlockSequential(nn.Module):
    def __init__(self, d_model, num_heads, attention=MHASeparate):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = attention(d_model, num_heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model)
        )

    def forward(self, x, mask=None):
        x = x + self.attn(self.ln1(x), mask=mask)[0]  # (B, T, C)
        return x + self.mlp(self.ln2(x))  # (B, T, C)


class MLP(nn.Module):
    """nanoGPT's layout: c_fc, GELU, c_proj, dropout (0 by default)."""

    def __init__(self, d_model, dropout=0.0):
        super().__init__()
        self.c_fc = nn.Linear(d_model, 4 * d_model)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class BlockNanoGPT(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = MHAFused(d_model, num_heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = MLP(d_model)

    def forward(self, x, mask=None):
        attn_out, _ = self.attn(self.ln1(x), mask=mask)
        x = x + attn_out
        x = x + self.mlp(self.ln2(x))
        return x


class NewGELU(nn.Module):
    """GPT-2's GELU, the tanh approximation (minGPT's NewGELU, Hugging Face's gelu_new)."""

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


class BlockMinGPT(nn.Module):
    """minGPT: the MLP is a ModuleDict run through a lambda, with GPT-2's GELU."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = MHASeparate(d_model, num_heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.ModuleDict(
            dict(
                c_fc=nn.Linear(d_model, 4 * d_model),
                c_proj=nn.Linear(4 * d_model, d_model),
                act=NewGELU(),
                dropout=nn.Dropout(0.0),
            )
        )
        m = self.mlp
        self.mlpf = lambda x: m.dropout(m.c_proj(m.act(m.c_fc(x))))

    def forward(self, x, mask=None):
        x = x + self.attn(self.ln1(x), mask=mask)[0]
        x = x + self.mlpf(self.ln2(x))
        return x


class GPT2MLP(nn.Module):
    """Hugging Face's GPT2MLP (nn.Linear in place of its Conv1D), with act = gelu_new."""

    def __init__(self, intermediate_size, embed_dim):
        super().__init__()
        self.c_fc = nn.Linear(embed_dim, intermediate_size)
        self.c_proj = nn.Linear(intermediate_size, embed_dim)
        self.act = lambda h: F.gelu(h, approximate="tanh")
        self.dropout = nn.Dropout(0.0)

    def forward(self, hidden_states):
        hidden_states = self.act(self.c_fc(hidden_states))
        return self.dropout(self.c_proj(hidden_states))


class BlockHFGPT2(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model, eps=1e-5)
        self.attn = MHASeparate(d_model, num_heads)
        self.ln2 = nn.LayerNorm(d_model, eps=1e-5)
        self.mlp = GPT2MLP(4 * d_model, d_model)

    def forward(self, hidden_states, mask=None):
        residual = hidden_states
        hidden_states = self.ln1(hidden_states)
        attn_output, _ = self.attn(hidden_states, mask=mask)
        hidden_states = attn_output + residual
        residual = hidden_states
        hidden_states = self.ln2(hidden_states)
        feed_forward_hidden_states = self.mlp(hidden_states)
        return residual + feed_forward_hidden_states


class TimmMlp(nn.Module):
    """timm's Mlp: fc1, act, drop1, norm (Identity), fc2, drop2."""

    def __init__(self, in_features, hidden_features, act_layer=nn.GELU, drop=0.0):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.act = act_layer()
        self.drop1 = nn.Dropout(drop)
        self.norm = nn.Identity()
        self.fc2 = nn.Linear(hidden_features, in_features)
        self.drop2 = nn.Dropout(drop)

    def forward(self, x):
        return self.drop2(self.fc2(self.norm(self.drop1(self.act(self.fc1(x))))))


TIMM_NORM = partial(nn.LayerNorm, eps=1e-6)  # timm's ViT norm_layer


class BlockTimm(nn.Module):
    """timm's ViT Block: an int mlp_ratio, LayerNorm's eps 1e-6, LayerScale and DropPath as
    Identity."""

    def __init__(self, d_model, num_heads, mlp_ratio=4, norm_layer=TIMM_NORM):
        super().__init__()
        self.ln1 = norm_layer(d_model)
        self.attn = MHASeparate(d_model, num_heads)
        self.ls1 = nn.Identity()
        self.drop_path1 = nn.Identity()
        self.ln2 = norm_layer(d_model)
        self.mlp = TimmMlp(d_model, int(d_model * mlp_ratio))
        self.ls2 = nn.Identity()
        self.drop_path2 = nn.Identity()

    def forward(self, x, mask=None):
        x = x + self.drop_path1(self.ls1(self.attn(self.ln1(x), mask=mask)[0]))
        x = x + self.drop_path2(self.ls2(self.mlp(self.ln2(x))))
        return x


class BlockFairseq(nn.Module):
    """fairseq's TransformerEncoderLayer with normalize_before=True; fc1/fc2 held in `mlp`."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)  # self_attn_layer_norm
        self.attn = MHASeparate(d_model, num_heads)
        self.ln2 = nn.LayerNorm(d_model)  # final_layer_norm
        self.mlp = nn.ModuleDict({"fc1": nn.Linear(d_model, 4 * d_model)})
        self.mlp["fc2"] = nn.Linear(4 * d_model, d_model)
        self.activation_fn = F.gelu
        self.normalize_before = True

    def forward(self, x, mask=None):
        residual = x
        if self.normalize_before:
            x = self.ln1(x)
        x, _ = self.attn(query=x, key=x, value=x, mask=mask)
        x = residual + x
        residual = x
        if self.normalize_before:
            x = self.ln2(x)
        x = self.mlp["fc2"](self.activation_fn(self.mlp["fc1"](x)))
        return residual + x


CORRECT_BLOCK = {
    "sequential": BlockSequential,
    "nanogpt": BlockNanoGPT,
    "mingpt_tanh_gelu": BlockMinGPT,
    "hf_gpt2_tanh_gelu": BlockHFGPT2,
    "timm": BlockTimm,
    "fairseq": BlockFairseq,
}


class BlockPostLN(BlockSequential):
    def forward(self, x, mask=None):
        x = self.ln1(x + self.attn(x, mask=mask)[0])
        return self.ln2(x + self.mlp(x))


class BlockReLU(BlockSequential):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.mlp[1] = nn.ReLU()


class BlockNoActivation(BlockSequential):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.mlp = nn.Sequential(self.mlp[0], self.mlp[2])


class BlockSiLU(BlockSequential):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.mlp[1] = nn.SiLU()


class BlockTorchAttention(BlockSequential):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.attn = nn.MultiheadAttention(d_model, num_heads, batch_first=True)


class BlockReturnsWeights(BlockSequential):
    def forward(self, x, mask=None):
        attn_out, weights = self.attn(self.ln1(x), mask=mask)
        x = x + attn_out
        return x + self.mlp(self.ln2(x)), weights


class BlockGeluLast(BlockSequential):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.mlp = nn.Sequential(self.mlp[0], self.mlp[2], nn.GELU())


class BlockNoMask(BlockSequential):
    def forward(self, x, mask=None):
        return super().forward(x)


class BlockMaskPositional(BlockSequential):
    def forward(self, x, mask=None):
        x = x + self.attn(self.ln1(x), mask)[0]  # lands in `key`
        return x + self.mlp(self.ln2(x))


class BlockTuple(BlockSequential):
    def forward(self, x, mask=None):
        x = x + self.attn(self.ln1(x), mask=mask)  # (out, weights)
        return x + self.mlp(self.ln2(x))


class BlockNoAttnResidual(BlockSequential):
    def forward(self, x, mask=None):
        x = self.attn(self.ln1(x), mask=mask)[0]
        return x + self.mlp(self.ln2(x))


class BlockNoMLPResidual(BlockSequential):
    def forward(self, x, mask=None):
        x = x + self.attn(self.ln1(x), mask=mask)[0]
        return self.mlp(self.ln2(x))


class BlockNormedResidual(BlockSequential):
    def forward(self, x, mask=None):
        x = self.ln1(x)
        x = x + self.attn(x, mask=mask)[0]
        x = self.ln2(x)
        return x + self.mlp(x)


class BlockParallel(BlockSequential):
    def forward(self, x, mask=None):
        return x + self.attn(self.ln1(x), mask=mask)[0] + self.mlp(self.ln2(x))


class BlockLn1Twice(BlockSequential):
    def forward(self, x, mask=None):
        x = x + self.attn(self.ln1(x), mask=mask)[0]
        return x + self.mlp(self.ln1(x))


class BlockNormsSwapped(BlockSequential):
    def forward(self, x, mask=None):
        x = x + self.attn(self.ln2(x), mask=mask)[0]
        return x + self.mlp(self.ln1(x))


class BlockAttnOnRawX(BlockSequential):
    def forward(self, x, mask=None):
        x = x + self.attn(x, mask=mask)[0]
        return x + self.mlp(self.ln2(x))


class BlockResidualDropout(BlockSequential):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.drop = nn.Dropout(0.1)

    def forward(self, x, mask=None):
        x = x + self.drop(self.attn(self.ln1(x), mask=mask)[0])
        return x + self.drop(self.mlp(self.ln2(x)))


class BlockNarrowMLP(BlockSequential):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, d_model), nn.GELU(), nn.Linear(d_model, d_model)
        )


class BlockExtraNorm(BlockSequential):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.ln_f = nn.LayerNorm(d_model)


class BlockNoLn2(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = MHASeparate(d_model, num_heads)
        self.mlp = BlockSequential(d_model, num_heads).mlp


class BlockNoAffine(BlockSequential):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.ln1 = nn.LayerNorm(d_model, elementwise_affine=False)
        self.ln2 = nn.LayerNorm(d_model, elementwise_affine=False)


class BlockNormNoBias(BlockSequential):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.ln1 = nn.LayerNorm(d_model, bias=False)
        self.ln2 = nn.LayerNorm(d_model, bias=False)


class BlockMLPNoBias(BlockSequential):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model, bias=False),
            nn.GELU(),
            nn.Linear(4 * d_model, d_model, bias=False),
        )


class BlockAttnNoBias(BlockSequential):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.attn = MHASeparate(d_model, num_heads, bias=False)


MATCHES = checks.check_block_matches_torch
STRUCTURE = checks.check_block_structure
BLOCK_MISTAKES = [
    Mistake("block: post-LN", BlockPostLN, MATCHES, "post-LN"),
    Mistake("block: ReLU", BlockReLU, MATCHES, "ReLU"),
    Mistake("block: SiLU", BlockSiLU, MATCHES, "SiLU"),
    Mistake("block: nn.MultiheadAttention", BlockTorchAttention, STRUCTURE, "your MultiHeadAtt"),
    Mistake("block: returns the weights too", BlockReturnsWeights, MATCHES, "return a tensor"),
    Mistake("block: GELU after the MLP", BlockGeluLast, MATCHES, "after its second nn.Linear"),
    Mistake("block: no activation", BlockNoActivation, MATCHES, "no activation"),
    Mistake("block: mask ignored", BlockNoMask, MATCHES, "ignores the mask"),
    Mistake("block: mask passed as key", BlockMaskPositional, MATCHES, "pass the mask by name"),
    Mistake("block: attn tuple added", BlockTuple, MATCHES, "returns (output, weights)"),
    Mistake("block: no attention residual", BlockNoAttnResidual, MATCHES, "around the attention"),
    Mistake("block: no MLP residual", BlockNoMLPResidual, MATCHES, "around the MLP"),
    Mistake("block: residual of ln(x)", BlockNormedResidual, MATCHES, "add the normalised x"),
    Mistake("block: parallel sub-layers", BlockParallel, MATCHES, "side by side"),
    Mistake("block: ln1 twice", BlockLn1Twice, MATCHES, "ln1 twice"),
    Mistake("block: LayerNorms swapped", BlockNormsSwapped, MATCHES, "swaps the LayerNorms"),
    Mistake("block: attention reads x", BlockAttnOnRawX, MATCHES, "reads x itself"),
    Mistake("block: residual dropout", BlockResidualDropout, MATCHES, "dropout with p > 0"),
    Mistake("block: MLP not 4x", BlockNarrowMLP, STRUCTURE, "4x wider"),
    Mistake("block: extra LayerNorm", BlockExtraNorm, STRUCTURE, "parameters where PyTorch's"),
    Mistake("block: no ln2", BlockNoLn2, STRUCTURE, "attribute `ln2`"),
    Mistake("block: LN without affine", BlockNoAffine, STRUCTURE, "elementwise_affine=False"),
    Mistake("block: LN without affine (run)", BlockNoAffine, MATCHES, "elementwise_affine=False"),
    Mistake("block: LN without bias", BlockNormNoBias, MATCHES, "`ln1` has no bias"),
    Mistake("block: MLP without biases", BlockMLPNoBias, STRUCTURE, "MLP's first nn.Linear"),
    Mistake("block: MLP without biases (run)", BlockMLPNoBias, MATCHES, "has no bias"),
    Mistake("block: attention without biases", BlockAttnNoBias, MATCHES, "`attn.q_proj` has no"),
]

# -------------------------------------------------------------------------- block parameters


def count_by_parts(d_model, d_mlp=None, bias=True):
    d_mlp = 4 * d_model if d_mlp is None else d_mlp
    attention = 4 * d_model * d_model + 4 * d_model * bias
    mlp = 2 * d_model * d_mlp + (d_mlp + d_model) * bias
    norms = 2 * d_model * (1 + bias)
    return attention + mlp + norms


def count_compact(d_model, d_mlp=None, bias=True):
    h = d_mlp or 4 * d_model
    linears = [(d_model, d_model)] * 4 + [(d_model, h), (h, d_model)]
    return sum(i * o + o * bias for i, o in linears) + 2 * (d_model + d_model * bias)


def count_timm_ratio(d_model, d_mlp=None, bias=True, mlp_ratio=4.0):
    """timm computes the hidden width as int(dim * mlp_ratio)."""
    hidden = int(d_model * mlp_ratio) if d_mlp is None else d_mlp
    per_linear = [(d_model, d_model)] * 4 + [(d_model, hidden), (hidden, d_model)]
    weights = sum(fan_in * fan_out for fan_in, fan_out in per_linear)
    biases = sum(fan_out for _, fan_out in per_linear) if bias else 0
    return weights + biases + 2 * d_model * (2 if bias else 1)


CORRECT_COUNT = {"by_parts": count_by_parts, "compact": count_compact, "timm": count_timm_ratio}


def _without(part):
    def count(d_model, d_mlp=None, bias=True):
        h = 4 * d_model if d_mlp is None else d_mlp
        total = count_by_parts(d_model, d_mlp, bias)
        return total - {"ln": 2 * d_model * (1 + bias), "mlp_bias": (h + d_model) * bias}[part]

    return count


def count_float_ratio(d_model, d_mlp=None, bias=True, mlp_ratio=4.0):
    hidden = d_mlp if d_mlp is not None else d_model * mlp_ratio  # a float by default
    return count_by_parts(d_model, hidden, bias)


def count_hidden_bias_c(d_model, d_mlp=None, bias=True):
    h = 4 * d_model if d_mlp is None else d_mlp
    return count_by_parts(d_model, d_mlp, bias) - (h - d_model) * bias


def count_one_norm(d_model, d_mlp=None, bias=True):
    return count_by_parts(d_model, d_mlp, bias) - d_model * (1 + bias)


def count_four_norms(d_model, d_mlp=None, bias=True):
    return count_by_parts(d_model, d_mlp, bias) + 2 * d_model * (1 + bias)  # ln1, ln2 twice


def count_default_no_bias(d_model, d_mlp=None, bias=False):
    return count_by_parts(d_model, d_mlp, bias)


COUNT = checks.check_block_param_count
COUNT_MISTAKES = [
    Mistake("block count: no LayerNorm", _without("ln"), COUNT, "forgets the two LayerNorms"),
    Mistake("block count: no MLP biases", _without("mlp_bias"), COUNT, "MLP's biases"),
    Mistake(
        "block count: 12 C^2 only",
        lambda d_model, d_mlp=None, bias=True: 12 * d_model**2,
        COUNT,
        "forgets the biases and the LayerNorms",
    ),
    Mistake(
        "block count: ignores d_mlp",
        lambda d_model, d_mlp=None, bias=True: count_by_parts(d_model, None, bias),
        COUNT,
        "ignores d_mlp",
    ),
    Mistake(
        "block count: LN biases kept",
        lambda d_model, d_mlp=None, bias=True: (
            count_by_parts(d_model, d_mlp, bias) + 2 * d_model * (not bias)
        ),
        COUNT,
        "keeps the LayerNorms' biases",
    ),
    Mistake(
        "block count: attention only",
        lambda d_model, d_mlp=None, bias=True: 4 * d_model**2 + 4 * d_model * bias,
        COUNT,
        "counts only the attention",
    ),
    Mistake(
        "block count: builds a module",
        lambda d_model, d_mlp=None, bias=True: sum(
            p.numel() for p in BlockSequential(d_model, 1).parameters()
        ),
        COUNT,
        "integer arithmetic",
    ),
    Mistake("block count: float mlp_ratio", count_float_ratio, COUNT, "returned a float"),
    Mistake("block count: hidden bias d_model", count_hidden_bias_c, COUNT, "d_mlp of them"),
    Mistake("block count: one LayerNorm", count_one_norm, COUNT, "there are two"),
    Mistake("block count: four LayerNorms", count_four_norms, COUNT, "counts four LayerNorms"),
    Mistake("block count: bias defaults False", count_default_no_bias, COUNT, "bias=True"),
]

MISTAKES = BLOCK_MISTAKES + COUNT_MISTAKES

CORRECT = correct([STRUCTURE, MATCHES], CORRECT_BLOCK) + correct([COUNT], CORRECT_COUNT)


class Stub:
    """The learner's block before answering: ``__init__`` is the nbgrader stub."""

    def __init__(self, d_model, num_heads):
        raise NotImplementedError()


STUBS = [(STRUCTURE, Stub), (MATCHES, Stub), (COUNT, stub)]
# Verified on a kernel with its own random state in tests/test_checks_block.py.
REPLAY: list = []
