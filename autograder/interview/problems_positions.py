"""Problems from notebook 08 §5–6 and 02 §12: ALiBi, RoPE scaling and the Llama block's norm.

Shape legend: ``nh`` heads, ``T`` queries (the last T positions), ``S`` keys, ``hs`` head size,
``C`` = d_model.
"""

from __future__ import annotations

import torch
from torch import nn

from autograder.checks import nb02_llama as llama
from autograder.checks import nb08_alibi as alibi
from autograder.checks import nb08_rope_scaling as scaling

from .task import Problem, Task, Variant, course_check, fail, one_tensor

# ---------------------------------------------------------------------------------- ALiBi


def _alibi_positions(fn):
    def alibi_bias(slopes, T, S=None):
        S = T if S is None else S
        return fn(slopes, torch.arange(S - T, S), torch.arange(S))

    return alibi_bias


def _alibi_batched(fn):
    def alibi_bias(slopes, T, S=None):
        out = one_tensor(fn(slopes, T, S), "alibi_bias", "the bias")
        if out.dim() != 4 or out.shape[0] != 1:
            fail(
                f"`alibi_bias` returned shape {tuple(out.shape)}: this variant returns "
                "(1, nh, T, S), with a batch dimension of 1."
            )
        return out[0]

    return alibi_bias


def _sharded(fn):
    """Every rank's slopes, side by side (two ranks where the heads split evenly)."""

    def alibi_slopes(num_heads):
        world = 2 if num_heads % 2 == 0 else 1
        shards = [
            one_tensor(fn(num_heads, r, world), "alibi_slopes", "the slopes") for r in range(world)
        ]
        return torch.cat(shards)

    return alibi_slopes


_ALIBI = (
    "`slopes` (nh,) float: head h adds −slopes[h] · (p − j) to the score of query position p "
    "and key position j, and −inf where j > p (causal). Return a float tensor to add to the "
    "scores (`attn_mask` of `F.scaled_dot_product_attention`)."
)

ALIBI = Problem(
    "alibi",
    "ALiBi's attention bias",
    "notebook 08 §6",
    "Replace position embeddings by ALiBi: a per-head linear penalty on distance.",
    (
        Variant(
            "positions",
            Task(
                "alibi_bias",
                "def alibi_bias(slopes, q_positions, k_positions):",
                f"{_ALIBI} `q_positions` (T,) and `k_positions` (S,) are the absolute positions "
                "of the queries and keys (int64). Return (nh, T, S).",
                (course_check(alibi.check_alibi_bias, _alibi_positions),),
                (alibi.BIAS,),
            ),
        ),
        Variant(
            "batched",
            Task(
                "alibi_bias",
                "def alibi_bias(slopes, T, S=None):",
                f"{_ALIBI} The T queries are the last T of S positions (`S` defaults to `T`). "
                "Return (1, nh, T, S), ready to broadcast over the batch.",
                (course_check(alibi.check_alibi_bias, _alibi_batched),),
                (alibi.BIAS,),
            ),
        ),
    ),
    Task(
        alibi.SLOPES,
        "def alibi_slopes(num_heads, rank=0, world_size=1):",
        "Now the slopes, for a model whose heads are split over `world_size` GPUs (tensor "
        "parallel, as BLOOM serves): the model's slopes are the paper's geometric sequence "
        "2^(−8/n), 2^(−16/n), … for n = num_heads a power of two; otherwise those of the "
        "closest smaller power of two, then every other slope of the next power. Return the "
        "slopes of this rank's heads, rank · n/world_size … (rank + 1) · n/world_size − 1, a "
        "float32 tensor (num_heads / world_size,).",
        (course_check(alibi.check_alibi_slopes, _sharded),),
        (alibi.SLOPES,),
    ),
    ("alibi", "complexity"),
    written=("alibi_why",),
    numeric=("alibi_last_slope",),
    box_minutes=15,
)

# ---------------------------------------------------------------------------- RoPE scaling

_HF_KEYS = {
    "original_max_position": "original_max_position_embeddings",
    "beta_fast": "beta_fast",
    "beta_slow": "beta_slow",
    "low_freq_factor": "low_freq_factor",
    "high_freq_factor": "high_freq_factor",
}


def _hf_config(fn):
    def rope_parameters(rope_type, hs, base, *, factor, seq_len, **rest):
        config = {"rope_theta": base, "head_dim": hs}
        scaling_dict = {"rope_type": rope_type, "factor": factor}
        scaling_dict |= {_HF_KEYS[k]: v for k, v in rest.items()}
        config["rope_scaling"] = scaling_dict
        return fn(config, seq_len)

    return rope_parameters


def _as_dict(fn):
    def rope_parameters(*args, **kwargs):
        out = fn(*args, **kwargs)
        if not isinstance(out, dict) or set(out) != {"inv_freq", "attention_scaling"}:
            fail(
                "`rope_parameters` should return a dict with the keys 'inv_freq' and "
                f"'attention_scaling', but it returned {type(out).__name__}."
            )
        return out["inv_freq"], out["attention_scaling"]

    return rope_parameters


_SCALING = (
    "Each RoPE pair i turns at inv_freq[i] = base^(−2i/hs), i < hs/2. Scaling types: "
    "`linear` divides every frequency by `factor`; `dynamic` (NTK) raises the base to "
    "base · ((factor · seq_len / original) − (factor − 1))^(hs/(hs − 2)) when seq_len > "
    "original, else leaves it; `yarn` and `llama3` are the follow-up. Also return the "
    "attention scaling (1.0 for linear and dynamic)."
)


def _scaling_task(signature: str, contract: str, adapt) -> Task:
    graders = tuple(
        course_check(check, adapt)
        for check in (scaling.check_rope_linear, scaling.check_rope_dynamic)
    )
    return Task("rope_parameters", signature, contract, graders, (scaling.PARAMS,))


ROPE_SCALING = Problem(
    "rope_scaling",
    "RoPE scaling past the trained context",
    "notebook 08 §5",
    "Compute the rotary frequencies of a model run past its trained length.",
    (
        Variant(
            "hf_config",
            _scaling_task(
                "def rope_parameters(config, seq_len):",
                f"{_SCALING} `config` is a Hugging Face-style dict: `rope_theta` (the base), "
                "`head_dim`, and `rope_scaling` = {'rope_type', 'factor', "
                "'original_max_position_embeddings', …}. Return `(inv_freq, attention_scaling)`.",
                _hf_config,
            ),
        ),
        Variant(
            "dict_out",
            _scaling_task(
                "def rope_parameters(rope_type, hs, base, factor=1.0, original_max_position=4096, "
                "seq_len=None, **band):",
                f"{_SCALING} Return a dict {{'inv_freq': (hs/2,) float32, 'attention_scaling': "
                "float}.",
                _as_dict,
            ),
        ),
    ),
    Task(
        scaling.PARAMS,
        "def rope_parameters(config, seq_len):",
        "Now YaRN and Llama 3, from a Hugging Face-style `config` (`rope_theta`, `head_dim`, "
        "`rope_scaling` with 'rope_type', 'factor', 'original_max_position_embeddings', "
        "'beta_fast' and 'beta_slow' or 'low_freq_factor' and 'high_freq_factor'), returning "
        "`(inv_freq, attention_scaling)`: `yarn` blends "
        "interpolated and original frequencies with a linear ramp between the pairs that turn "
        "beta_fast and beta_slow times over the original length, and scales attention by "
        "0.1 · ln(factor) + 1; `llama3` keeps pairs whose wavelength is below original / "
        "high_freq_factor, divides those above original / low_freq_factor by factor, and "
        "blends smoothly between (attention scaling 1.0).",
        (
            course_check(scaling.check_rope_yarn, _hf_config),
            course_check(scaling.check_rope_llama3, _hf_config),
        ),
        (scaling.PARAMS,),
    ),
    ("rope_scaling", "dynamic_ntk_cache", "rope_cache"),
    written=("rope_scaling_why", "rope_relative"),
    numeric=("rope_wavelength",),
    box_minutes=20,
)

# ------------------------------------------------------------------------------- RMSNorm


def _norm_module(fn, gemma: bool):
    """The course's ``RMSNorm`` class around a functional ``rms_norm``."""

    class RMSNorm(nn.Module):
        def __init__(self, dim, eps=1e-6):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(dim))

        def forward(self, x):
            weight = self.weight - 1 if gemma else self.weight
            return fn(x, weight, self.eps)

    return RMSNorm


def _fused(cls):
    """Meta's three matrices, which the check fills, copied into the learner's fused ones."""

    class SwiGLU(nn.Module):
        def __init__(self, dim, hidden):
            super().__init__()
            self.fused = cls(dim, hidden)
            self.w1 = nn.Linear(dim, hidden, bias=False)
            self.w3 = nn.Linear(dim, hidden, bias=False)
            self.w2 = nn.Linear(hidden, dim, bias=False)

        def forward(self, x):
            up, down = (getattr(self.fused, n, None) for n in ("gate_up_proj", "down_proj"))
            shapes = (
                (up, self.w1.in_features, 2 * self.w1.out_features),
                (down, *self.w2.weight.shape[::-1]),
            )
            for layer, n_in, n_out in shapes:
                if not isinstance(layer, nn.Linear) or tuple(layer.weight.shape) != (n_out, n_in):
                    fail(
                        "`SwiGLU` needs `gate_up_proj` = nn.Linear(dim, 2 * hidden, bias=False) "
                        "and `down_proj` = nn.Linear(hidden, dim, bias=False)."
                    )
            with torch.no_grad():
                up.weight.copy_(torch.cat([self.w1.weight, self.w3.weight]))
                down.weight.copy_(self.w2.weight)
            return self.fused(x)

    return SwiGLU


_NORM = (
    "`x` (..., C): divide by the root mean square over the last dimension, "
    "sqrt(mean(x²) + eps), then scale per feature. Compute in float32 or wider and return "
    "`x`'s dtype (a bfloat16 input gives bfloat16), without `F.rms_norm`."
)

RMSNORM = Problem(
    "rmsnorm_swiglu",
    "RMSNorm and SwiGLU: the Llama block's parts",
    "notebook 02 §12",
    "Write the normalisation of a Llama-style block, then its MLP.",
    (
        Variant(
            "functional",
            Task(
                "rms_norm",
                "def rms_norm(x, weight, eps=1e-6):",
                f"{_NORM} `weight` (C,) multiplies the result (Llama's convention).",
                (course_check(llama.check_rmsnorm, lambda fn: _norm_module(fn, gemma=False)),),
                (llama.NORM, f"{llama.NORM}.forward"),
            ),
        ),
        Variant(
            "gemma",
            Task(
                "rms_norm",
                "def rms_norm(x, weight, eps=1e-6):",
                f"{_NORM} Gemma's convention: `weight` (C,) starts at zeros and the result is "
                "multiplied by (1 + weight).",
                (course_check(llama.check_rmsnorm, lambda fn: _norm_module(fn, gemma=True)),),
                (llama.NORM, f"{llama.NORM}.forward"),
                (
                    (
                        "scales by (1 + weight), Gemma's convention",
                        "Your rms_norm multiplies by `weight` itself: in this variant (Gemma's) "
                        "the scale is (1 + weight).",
                    ),
                ),
            ),
        ),
    ),
    Task(
        llama.MLP,
        "class SwiGLU(nn.Module):\n    def __init__(self, dim, hidden): ...\n"
        "    def forward(self, x): ...",
        "Now the MLP, in the fused layout serving engines load (vLLM, Phi-3): `gate_up_proj` = "
        "nn.Linear(dim, 2 · hidden, bias=False) gives the gate, then the up projection; "
        "`down_proj` = nn.Linear(hidden, dim, bias=False); forward returns "
        "down_proj(silu(gate) · up).",
        (course_check(llama.check_swiglu, _fused),),
        (llama.MLP, f"{llama.MLP}.forward"),
        (
            (
                "puts SiLU on the wrong projection",
                "Your SwiGLU puts SiLU on the up projection: the gate is the first half of "
                "gate_up_proj's output, the up projection the second; return "
                "down_proj(silu(gate) · up).",
            ),
        ),
    ),
    ("rmsnorm", "swiglu_width"),
    written=("llama_parts", "pre_ln"),
    numeric=("block_params_gpt2",),
    box_minutes=15,
)
