"""Code outside what a learner needs: compiled, hidden on a thread, measured, or in numpy.

Issue 42's adversary won points in every notebook with mechanisms no deny-list named:
TorchScript (no torch-function call for the by-name rules to see), the autograd engine's private
entry point, modules built on the meta device and counted on a worker thread, PyTorch's FLOP
counter reached through ``pkgutil.resolve_name`` and split strings, masks computed in numpy.
Each learner here holds one notebook's attacks, on cells that cannot interfere. Every target
must score 0 or be withheld for a person with its reason (``tests/test_hostile_trust.py`` grades
them in the class run; ``tests/test_allowlist.py`` reads them with the scan alone, fast).
"""

from __future__ import annotations

from .trust import NB01, NB02, NB03, NB04, NB05, NB06, NB08, NB10, Attack, Edit

# Runs compute() on a worker thread, where the kernel's recorder (a mode of the calling thread)
# sees nothing, and hands back its Python value.
ON_A_THREAD = """import threading


def _on_a_thread(compute):
    box = {}
    worker = threading.Thread(target=lambda: box.setdefault("value", compute()))
    worker.start()
    worker.join()
    return box["value"]
"""

# Parameter counts read off modules on the meta device (no memory, no arithmetic of one's own).
META_COUNTS = """import torch
from torch import nn


def _params(*modules):
    return sum(p.numel() for m in modules for p in m.parameters())


def _meta_mha(d_model, num_heads, bias):
    if d_model % num_heads:
        raise ValueError("d_model % num_heads != 0")
    return nn.MultiheadAttention(d_model, num_heads, bias=bias, device="meta")
"""

NB02_ATTACK = """from typing import Optional


@torch.jit.script
def _scripted_mha(
    x, kv, w_q, w_k, w_v, b_in: Optional[torch.Tensor], w_o, b_o: Optional[torch.Tensor],
    num_heads: int, attn_mask: Optional[torch.Tensor]
):
    out, weights = F.multi_head_attention_forward(
        x.transpose(0, 1), kv.transpose(0, 1), kv.transpose(0, 1), x.shape[-1], num_heads,
        None, b_in, None, None, False, 0.0, w_o, b_o, training=False, need_weights=True,
        attn_mask=attn_mask, use_separate_proj_weight=True, q_proj_weight=w_q,
        k_proj_weight=w_k, v_proj_weight=w_v, average_attn_weights=False,
    )
    return out.transpose(0, 1), weights


@torch.jit.script
def _scripted_rms(x, weight, eps: float):
    return torch.rms_norm(x, [x.shape[-1]], weight, eps)


class MultiHeadAttention(MultiHeadAttention):
    def forward(self, query, key=None, value=None, mask=None):
        kv = query if key is None else key
        b_in = None
        if self.q_proj.bias is not None:
            b_in = torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])
        attn_mask = None
        if mask is not None:
            B, T, S = query.shape[0], query.shape[1], kv.shape[1]
            full = mask.expand(B, self.num_heads, T, S).reshape(-1, T, S)
            attn_mask = torch.zeros(full.shape).masked_fill(~full, float("-inf"))
        out, weights = _scripted_mha(
            query, kv, self.q_proj.weight, self.k_proj.weight, self.v_proj.weight, b_in,
            self.out_proj.weight, self.out_proj.bias, self.num_heads, attn_mask,
        )
        return out.nan_to_num(0.0), weights.nan_to_num(0.0)


class RMSNorm(RMSNorm):
    def forward(self, x):
        return _scripted_rms(x, self.weight, self.eps)


def mha_param_count(d_model, num_heads, bias=True):
    return _on_a_thread(lambda: _params(_meta_mha(d_model, num_heads, bias)))


def block_param_count(d_model, d_mlp=None, bias=True):
    h = 4 * d_model if d_mlp is None else d_mlp
    return _on_a_thread(
        lambda: _params(
            nn.TransformerEncoderLayer(d_model, 1, h, bias=bias, device="meta")
        )
    )


def llama_block_param_count(d_model, num_heads, num_kv_heads, hidden):
    kv = num_kv_heads * (d_model // num_heads)
    return _on_a_thread(
        lambda: _params(
            *[nn.Linear(d_model, w, bias=False, device="meta") for w in (d_model, kv, kv)],
            nn.Linear(d_model, d_model, bias=False, device="meta"),
            *[nn.Linear(d_model, hidden, bias=False, device="meta") for _ in range(2)],
            nn.Linear(hidden, d_model, bias=False, device="meta"),
            *[nn.RMSNorm(d_model, device="meta") for _ in range(2)],
        )
    )
"""

NB03_ATTACK = '''import numpy as np


def _constants(array):
    """A numpy result as a tensor stacked from one-element constants."""
    flat = [torch.tensor(bool(v)) for v in array.reshape(-1)]
    return torch.stack(flat).reshape(array.shape)


def causal_mask(T, S=None, device=None):
    S = T if S is None else S
    return _constants(_on_a_thread(lambda: np.tri(T, S, S - T, dtype=bool))).to(device)


def padding_mask(lengths, max_len):
    got = [int(n) for n in lengths]
    out = _on_a_thread(lambda: np.arange(max_len)[None, :] < np.array(got)[:, None])
    return _constants(out).to(lengths.device)


def attention_mask(lengths, max_len, causal=True):
    got = [int(n) for n in lengths]

    def compute():
        keys = (np.arange(max_len)[None, :] < np.array(got)[:, None])[:, None, None, :]
        rule = np.tri(max_len, max_len, 0, dtype=bool) if causal else np.ones((1, 1), bool)
        return np.broadcast_to(keys & rule, (len(got), 1, max_len, max_len))

    return _constants(_on_a_thread(compute)).to(lengths.device)
'''

NB04_ATTACK = """def gqa_param_count(d_model, num_heads, num_kv_heads, bias=False):
    if d_model % num_heads or num_heads % num_kv_heads:
        raise ValueError("need d_model % num_heads == 0 and num_heads % num_kv_heads == 0")
    kv = num_kv_heads * (d_model // num_heads)
    return _on_a_thread(
        lambda: _params(
            *[nn.Linear(d_model, w, bias=bias, device="meta") for w in (d_model, kv, kv, d_model)]
        )
    )


def kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_value=2):
    shape = (2 * num_layers, batch_size, num_kv_heads, seq_len, head_dim, bytes_per_value)
    return _on_a_thread(lambda: torch.empty(shape, dtype=torch.uint8, device="meta").nbytes)
"""

# FlopCounterMode without its name: the module path in pieces, resolved by pkgutil; on the meta
# device, as the check itself counts (on real tensors the grader's large sizes cost the class
# run about 25 CPU-s, and ran out of memory).
FLOPS_BY_NAME = """import pkgutil

_PATH = ".".join(["torch", "utils", "flop" + "_counter"])
_COUNTER = pkgutil.resolve_name(_PATH + ":Flop" + "CounterMode")


def _measured_flops(B, T, C, nh):
    def compute():
        mha = nn.MultiheadAttention(C, nh, batch_first=True, device="meta")
        counter = _COUNTER(display=False)
        with torch.no_grad(), counter:
            x = torch.randn(B, T, C, device="meta")
            q, k, v = (torch.nn.functional.linear(x, w) for w in mha.in_proj_weight.chunk(3))
            q, k, v = (t.view(B, T, nh, C // nh).transpose(1, 2) for t in (q, k, v))
            out = (q @ k.transpose(-2, -1)).softmax(-1) @ v  # (B, nh, T, hs)
            mha.out_proj(out.transpose(1, 2).reshape(B, T, C))
        return counter.get_total_flops()

    return _on_a_thread(compute)
"""

NB05_ATTACK = """@torch.jit.script
def _scripted_parallel(x, w_q, w_k, w_v, b_q: Optional[torch.Tensor], b_k: Optional[torch.Tensor],
                       b_v: Optional[torch.Tensor], w_o, b_o: Optional[torch.Tensor], nh: int):
    B, T, C = x.shape[0], x.shape[1], x.shape[2]
    q = F.linear(x, w_q, b_q).view(B, T, nh, C // nh).transpose(1, 2)
    k = F.linear(x, w_k, b_k).view(B, T, nh, C // nh).transpose(1, 2)
    v = F.linear(x, w_v, b_v).view(B, T, nh, C // nh).transpose(1, 2)
    out = torch.softmax(q @ k.transpose(-2, -1) / ((C // nh) ** 0.5), dim=-1) @ v
    return F.linear(out.transpose(1, 2).reshape(B, T, C), w_o, b_o)


def mha_parallel(x, mha):
    return _scripted_parallel(
        x, mha.q_proj.weight, mha.k_proj.weight, mha.v_proj.weight, mha.q_proj.bias,
        mha.k_proj.bias, mha.v_proj.bias, mha.out_proj.weight, mha.out_proj.bias, mha.num_heads,
    )


def attention_flops(batch, seq_len, d_model, num_heads):
    return _measured_flops(batch, seq_len, d_model, num_heads)
"""

NB06_ATTACK = """def tiled_attention_backward(q, k, v, o, lse, do, block_size=64, causal=False):
    from torch.autograd.graph import _engine_run_backward

    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    with torch.enable_grad():
        out = tiled_attention(*leaves, block_size=block_size, causal=causal)
        out = out[0] if isinstance(out, tuple) else out
        grads = _engine_run_backward(
            (out,), (do,), False, False, tuple(leaves), False, False
        )
    return tuple(g.to(t.dtype) for g, t in zip(grads, (q, k, v)))
"""

# 06's FlashAttention left a stub; the given tool its tests pass, ``gradients_through``, rebound
# to autograd through plain attention (the memory test still refuses it: it holds the table).
NB06_GIVEN_TOOL = (
    """class FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        raise NotImplementedError()

    @staticmethod
    def backward(ctx, do):
        raise NotImplementedError()
""",
    """def gradients_through(function, q, k, v, do, *args):
    causal = bool(args[0]) if args else False
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    with torch.enable_grad():
        s = leaves[0] @ leaves[1].transpose(-2, -1) / math.sqrt(q.shape[-1])
        if causal:
            T, S = s.shape[-2:]
            keep = torch.ones(T, S, dtype=torch.bool).tril(S - T)
            s = s.masked_fill(~keep, float("-inf"))
        o = torch.softmax(s, -1) @ leaves[2]
    return torch.autograd.grad(o, leaves, do)
""",
)

NB08_ATTACK = """def mla_cache_bytes(
    num_layers, d_latent, d_rope, seq_len, batch_size=1, bytes_per_value=2
):
    shape = (num_layers, batch_size, seq_len, d_latent + d_rope, bytes_per_value)
    return _on_a_thread(lambda: torch.empty(shape, dtype=torch.uint8, device="meta").nbytes)


def window_cache_bytes(
    num_layers, num_kv_heads, head_dim, seq_len, window=None, batch_size=1, bytes_per_value=2
):
    def compute():
        width = head_dim * bytes_per_value
        shape = (batch_size, num_kv_heads, seq_len, width)
        cache = torch.empty(shape, dtype=torch.uint8, device="meta")
        held = cache[:, :, -window:] if window else cache  # what a rolling cache keeps
        return 2 * num_layers * held.nbytes

    return _on_a_thread(compute)
"""

NB09_COUNTED = """import torch
from torch import nn


def _count(module):
    return sum(p.numel() for p in module.parameters())


answer_params_gpt2_small = _count(nn.MultiheadAttention(768, 12, device="meta")) - 3 * 768
answer_params_mha = _count(nn.MultiheadAttention(4096, 32, bias=False, device="meta"))
_projections = [(4096, 4096), (4096, 1024), (4096, 1024), (4096, 4096)]
answer_params_gqa = _count(
    nn.ModuleList(nn.Linear(i, o, bias=False, device="meta") for i, o in _projections)
)
"""

NB09_ATTACK = """B, T, C, nh = 2, 128, 512, 8
answer_flops = int(_measured_flops(B, T, C, nh))
answer_matmuls_loop = 12 * (3 + 2) + 1
answer_matmuls_packed = 1 + 2 + 1
"""


# Written after the allow-list and the top-level rule, before re-reading them: three ways to the
# same mechanisms without a name the list would see.

# 1. torch.jit through a plain alias of torch: the list follows import names, not assignments.
NB05_JIT_BY_ALIAS = """T = torch
_compiler = T.jit


def _parallel(x, w_q, w_k, w_v, w_o, nh: int):
    B, T_, C = x.shape[0], x.shape[1], x.shape[2]
    q = torch.nn.functional.linear(x, w_q).view(B, T_, nh, C // nh).transpose(1, 2)
    k = torch.nn.functional.linear(x, w_k).view(B, T_, nh, C // nh).transpose(1, 2)
    v = torch.nn.functional.linear(x, w_v).view(B, T_, nh, C // nh).transpose(1, 2)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    return torch.nn.functional.linear(out.transpose(1, 2).reshape(B, T_, C), w_o)


_scripted = _compiler.script(_parallel)


def mha_parallel(x, mha):
    out = _scripted(
        x, mha.q_proj.weight, mha.k_proj.weight, mha.v_proj.weight, mha.out_proj.weight,
        mha.num_heads,
    )
    return out + mha.out_proj.bias if mha.out_proj.bias is not None else out
"""

# 2. Code from a string without eval: typing.get_type_hints evaluates string annotations.
NB01_EVAL_BY_ANNOTATION = """import typing


def _builtin(x, dim: int):
    return torch.softmax(x, dim)


def _holder(fn: "torch.jit.script(_builtin)"):
    return fn


def softmax(x, dim=-1):
    return typing.get_type_hints(_holder)["fn"](x, dim)
"""

# 3. PyTorch patched through an alias: the oracle the check compares with becomes the learner's
# own (unscaled, so wrong) attention.
NB01_PATCH_BY_ALIAS = """functional = F


def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)  # no 1/sqrt(d_k): wrong
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


def _same(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kwargs):
    return scaled_dot_product_attention(q, k, v, attn_mask)[0]


functional.scaled_dot_product_attention = _same
"""


def _after(grade_id: str, source: str) -> Edit:
    return Edit("after", grade_id, source)


ATTACKS = (
    Attack(
        "al_nb02_jit_meta",
        NB02,
        3,
        (
            "test_MultiHeadAttention_matches_torch",
            "test_MultiHeadAttention_mask",
            "test_RMSNorm_matches_torch",
            "test_mha_param_count_values",
            "test_block_param_count_values",
            "test_llama_block_param_count_values",
        ),
        "F.multi_head_attention_forward and torch.rms_norm compiled with torch.jit.script; the "
        "parameter counts read off meta-device modules on a worker thread",
        "solution",
        (
            _after("setup", ON_A_THREAD + META_COUNTS),
            _after("llama_block_param_count", NB02_ATTACK),
        ),
    ),
    Attack(
        "al_nb03_numpy_thread",
        NB03,
        3,
        (
            "test_causal_mask_values",
            "test_causal_mask_no_leak",
            "test_padding_mask_values",
            "test_attention_mask_values",
            "test_attention_mask_padding_invariance",
        ),
        "the three masks computed in numpy on a worker thread, returned as stacked one-element "
        "constants",
        "solution",
        (_after("setup", ON_A_THREAD), _after("attention_mask", NB03_ATTACK)),
    ),
    Attack(
        "al_nb04_meta_thread",
        NB04,
        7,
        ("test_kv_cache_bytes_values", "test_gqa_param_count_values"),
        "the KV-cache bytes and the GQA parameter count read off meta-device tensors and modules "
        "on a worker thread",
        "solution",
        (_after("setup", ON_A_THREAD + META_COUNTS), _after("gqa_param_count", NB04_ATTACK)),
    ),
    Attack(
        "al_nb05_jit_flops",
        NB05,
        4,
        (
            "test_mha_parallel_matches_torch",
            "test_mha_parallel_batches_heads",
            "test_attention_flops_matches_flop_counter",
        ),
        "mha_parallel compiled with torch.jit.script; attention_flops measured by FlopCounterMode, "
        "reached with pkgutil.resolve_name and split strings, on a worker thread",
        "solution",
        (
            _after("setup", ON_A_THREAD + "from typing import Optional\nfrom torch import nn\n"),
            _after("setup", FLOPS_BY_NAME),
            _after("attention_flops", NB05_ATTACK),
        ),
    ),
    Attack(
        "al_nb06_engine",
        NB06,
        4,
        (
            "test_tiled_attention_backward_matches_autograd",
            "test_tiled_attention_backward_causal",
            "test_tiled_attention_backward_by_hand",
            "test_flash_attention_gradients",
        ),
        "the backward computed by the autograd engine, called through "
        "torch.autograd.graph._engine_run_backward (no call named grad or backward); and "
        "FlashAttention left a stub, the given gradients_through rebound to autograd",
        "solution",
        (
            _after("tiled_attention_backward", NB06_ATTACK),
            Edit("answer", "FlashAttention", NB06_GIVEN_TOOL[0]),
            _after("FlashAttention", NB06_GIVEN_TOOL[1]),
        ),
    ),
    Attack(
        "al_nb08_meta_thread",
        NB08,
        7,
        ("test_mla_cache_bytes_values", "test_window_cache_bytes_values"),
        "the MLA and sliding-window cache bytes read off meta-device tensors on a worker thread",
        "solution",
        (_after("setup", ON_A_THREAD), _after("window_cache_bytes", NB08_ATTACK)),
    ),
    Attack(
        "al_nb09_flops_by_name",
        NB10,
        7,
        (
            "test_numbers_flops",
            "test_numbers_params_gpt2_small",
            "test_numbers_params_mha",
            "test_numbers_params_gqa",
        ),
        "the FLOP number measured by FlopCounterMode, reached with pkgutil.resolve_name and split "
        "strings, on a worker thread; the parameter counts read off modules built in the answer "
        "cell on the meta device",
        "solution",
        (
            _after("setup", ON_A_THREAD),
            _after("setup", FLOPS_BY_NAME),
            Edit("answer", "numbers_compute", NB09_ATTACK),
            Edit("answer", "numbers_params", NB09_COUNTED),
        ),
    ),
    Attack(
        "al_nb01_fresh",
        NB01,
        3,
        (
            "test_softmax_matches_torch",
            "test_softmax_stable",
            "test_softmax_no_builtin",
            "test_scaled_dot_product_attention_shapes",
            "test_scaled_dot_product_attention_matches_torch",
            "test_scaled_dot_product_attention_mask",
        ),
        "softmax by TorchScript, compiled by typing.get_type_hints from a string annotation; an "
        "unscaled attention that patches F.scaled_dot_product_attention through an alias of F",
        "solution",
        (
            Edit("answer", "softmax", NB01_EVAL_BY_ANNOTATION),
            Edit("answer", "scaled_dot_product_attention", NB01_PATCH_BY_ALIAS),
        ),
    ),
    Attack(
        "al_nb05_jit_alias",
        NB05,
        3,
        ("test_mha_parallel_matches_torch", "test_mha_parallel_batches_heads"),
        "mha_parallel compiled with torch.jit.script, reached through an alias of torch",
        "solution",
        (Edit("answer", "mha_parallel", NB05_JIT_BY_ALIAS),),
    ),
)
