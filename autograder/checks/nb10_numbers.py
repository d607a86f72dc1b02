"""Questions of notebook 10 §1, numbers worth knowing: head size, parameters, memory, FLOPs and
matrix products, each with the oracle that measures it.

Shape legend: ``B`` batch, ``T`` sequence length, ``C`` = d_model, ``nh`` query heads, ``nkv``
key/value heads, ``hs`` = C // nh (head size), ``L`` layers.

No answer is written down here. Every number is recomputed from its question's configuration by
PyTorch: parameters of modules built on the meta device (no memory used), bytes of meta tensors,
and the matrix products and FLOPs that a ``TorchDispatchMode`` sees while PyTorch's own attention
modules run (FLOPs by PyTorch's ``flop_registry``). A known-wrong number is the same oracle on a
wrong configuration (query heads instead of key/value heads, one layer, fp32, ...), with its
diagnosis. The oracles that measure are in :mod:`._measured`, shared with :mod:`.nb10_claims`;
:mod:`.nb10_interview` merges these questions into its own.
"""

from __future__ import annotations

import torch
from torch import nn

from autograder.tools.modules import TorchMultiHeadAttention
from autograder.tools.nb04_gqa import TorchGroupedQueryAttention, cache_nbytes, meta_cache

from ._measured import measure, meta_params, packed

#: Declared in :mod:`.nb10_interview`, the module notebook 10's cells import: ``grade`` reads the
#: declarations of the check modules a notebook names, and no other.
ANSWERS_IN_TOOLS: dict[str, str] = {}


# --------------------------------------------------------------------------------- oracles


def _separate(C: int, nh: int, bias: bool = True) -> TorchMultiHeadAttention:
    """PyTorch's MHA behind the course's interface: separate q, k, v and out projections."""
    return TorchMultiHeadAttention(C, nh, bias=bias)


def _gpt2_small_like(bias_qkv: bool, bias_out: bool) -> int:
    def build():
        mha = _separate(768, 12, bias=bias_qkv)
        mha.out_proj = nn.Linear(768, 768, bias=bias_out)
        return mha

    return meta_params(build)


def _linears(*widths: int) -> int:
    """Parameters of bias-free projections from 4096 features to each of ``widths``."""
    return meta_params(lambda: nn.ModuleList(nn.Linear(4096, w, bias=False) for w in widths))


def _kv_bytes(layers: int, kv_heads: int, head_dim: int, dtype=torch.float16) -> int:
    """Bytes of one token's keys and values in every layer (meta tensors, so no memory)."""
    return cache_nbytes(meta_cache(layers, kv_heads, head_dim, seq_len=1, dtype=dtype))


def _weights_bytes(B: int, nh: int, T: int, dtype=torch.float32) -> int:
    return torch.empty(B, nh, T, T, dtype=dtype, device="meta").nbytes  # (B, nh, T, T)


def _loop_products(C: int, nh: int) -> int:
    """Products of the heads run one after another: per head, a one-head attention on the head's
    own slices without the output projection; the output projection once, after the loop."""
    out_proj = measure(nn.Linear(C, C), 1, 2, C).products
    one_head = measure(_separate(C, 1), 1, 2, C).products - out_proj
    return nh * one_head + out_proj


# ------------------------------------------------------------------------- numeric answers


def _head_size(d_model: int = 12_288, heads: int = 96) -> int:
    with torch.device("meta"):
        return nn.MultiheadAttention(d_model, heads).head_dim


def _wrong_head_size(right: int) -> list[tuple[float, str]]:
    return [
        (
            _head_size(768, 12),
            "that is the head size of GPT-2 small and BERT-base (768 / 12); "
            "use GPT-3's width and head count",
        ),
        (12_288, "that is the whole width d_model; each head works on its own slice of it"),
        (96, "that is the number of heads, not the size of each one"),
        (12_288 * 96, "the heads split the width between them, so divide rather than multiply"),
    ]


def _wrong_gpt2_params(right: int) -> list[tuple[float, str]]:
    return [
        (
            _gpt2_small_like(True, True),
            "you counted biases for q, k and v; here only the output projection has one",
        ),
        (_gpt2_small_like(False, False), "you left out the output projection's bias"),
        (
            _gpt2_small_like(True, False),
            "the biases are the other way round: q, k and v have "
            "none, the output projection has one",
        ),
        (
            12 * right,
            "the heads do not each own four C × C matrices: each head uses hs rows of "
            "shared C × C projections, so the head count does not change the total",
        ),
        (right - 768 * 768, "there are four C × C matrices: q, k, v and the output projection"),
    ]


def _mha_4096() -> int:
    return meta_params(lambda: _separate(4096, 32, bias=False))


def _gqa_4096() -> int:
    return meta_params(lambda: TorchGroupedQueryAttention(4096, 32, 8, bias=False))


def _wrong_mha_params(right: int) -> list[tuple[float, str]]:
    return [
        (
            meta_params(lambda: _separate(4096, 32, bias=True)),
            "these layers have no biases: count the weight matrices only",
        ),
        (
            32 * right,
            "the head count does not multiply the parameters: the heads share the four "
            "C × C projections, each owning hs of their rows",
        ),
        (
            _linears(4096, 4096, 4096),
            "there are four C × C matrices: q, k, v and the output projection",
        ),
    ]


def _wrong_gqa_params(right: int) -> list[tuple[float, str]]:
    return [
        (
            _mha_4096(),
            "that is the multi-head count: with 8 key/value heads, k_proj and v_proj "
            "produce only 8 × hs features",
        ),
        (
            _linears(1024, 1024, 1024, 1024),
            "GQA keeps all 32 query heads, so q_proj and "
            "out_proj stay d_model × d_model; only k_proj and v_proj shrink",
        ),
        (
            _linears(1024, 1024, 1024, 4096),
            "GQA keeps all 32 query heads, so q_proj stays "
            "d_model × d_model; only the key and value projections shrink",
        ),
        (
            meta_params(lambda: TorchGroupedQueryAttention(4096, 32, 8, bias=True)),
            "these layers have no biases",
        ),
        (
            meta_params(lambda: TorchGroupedQueryAttention(4096, 32, 1, bias=False)),
            "that is multi-query attention, with a single key/value head; here there are 8",
        ),
        (
            _linears(4096, 8 * 4096, 8 * 4096, 4096),
            "each key/value head is hs = d_model / nh wide, not d_model",
        ),
    ]


def _wrong_kv(right: int) -> list[tuple[float, str]]:
    return [
        (_kv_bytes(80, 64, 128), "the cache holds the 8 key/value heads, not the 64 query heads"),
        (8 * right, "a byte has 8 bits: count bytes"),
        (right // 2, "every layer caches two tensors, keys and values"),
        (right // 2, "that counts values: an fp16 value takes 2 bytes"),
        (_kv_bytes(1, 8, 128), "every one of the 80 layers keeps its own keys and values"),
        (_kv_bytes(80, 8, 128, torch.float32), "fp16 takes 2 bytes per value, not 4"),
        (right // 4, "count keys and values, and 2 bytes per fp16 value"),
        (_kv_bytes(80, 8, 8192), "each key/value head is hs = 128 wide, not d_model"),
    ]


def _wrong_weights_bytes(right: int) -> list[tuple[float, str]]:
    return [
        (_weights_bytes(8, 1, 1024), "every head has its own T × T weights"),
        (_weights_bytes(1, 12, 1024), "every sequence in the batch has its own weights"),
        (_weights_bytes(8, 12, 1024, torch.float16), "fp32 takes 4 bytes per value, not 2"),
        (_weights_bytes(8, 12, 1024, torch.float64), "fp32 takes 4 bytes per value, not 8"),
        (
            torch.empty(8, 1024, 768, device="meta").nbytes,
            "that is the size of the (B, T, C) "
            "activations; the weights are one T × T matrix per head and sequence",
        ),
        (right // 4, "that counts values: multiply by the bytes per fp32 value"),
        (right * 8, "that counts bits: a byte has 8"),
    ]


def _near_weights_bytes(right: int) -> list[tuple[float, float, str]]:
    return [
        (right / 1e6 - 1, right / 1e6 + 1, "that looks like megabytes; give the answer in bytes"),
        (right / 2**20 - 1, right / 2**20 + 1, "that looks like MiB; give the answer in bytes"),
        (right / 1e9 - 0.01, right / 1e9 + 0.01, "that looks like gigabytes; give bytes"),
    ]


def _flops() -> int:
    return measure(packed(512, 8), 2, 128, 512).flops


def _wrong_flops(right: int) -> list[tuple[float, str]]:
    projection = measure(nn.Linear(512, 512), 2, 128, 512).flops  # one (B·T, C) @ (C, C)
    attention = right - 4 * projection  # q @ kᵀ and weights @ v, all heads
    return [
        (right // 2, "that counts multiply-adds; a FLOP count takes 2 per multiply-add"),
        (4 * projection, "the two attention products (q @ kᵀ and weights @ v) are missing"),
        (attention, "the four projections (q, k, v and out) are missing"),
        (right - projection, "there are four projections: q, k, v and the output projection"),
        (
            8 * right,
            "the head count cancels: nh heads of width C / nh cost what one head of width C costs",
        ),
        (
            4 * projection + 8 * attention,
            "each head's attention products work on hs = C / nh features, not C",
        ),
        (
            4 * projection + attention // 2,
            "each head has two attention products, q @ kᵀ and weights @ v",
        ),
    ]


def _wrong_loop(right: int) -> list[tuple[float, str]]:
    one_head = _loop_products(768, 1) - 1
    return [
        (right - 1, "the output projection runs once, after the loop"),
        (right + 11, "the output projection runs once, after the loop, not once per head"),
        (right - 2 * 12, "each head also has its two attention products, q @ kᵀ and weights @ v"),
        (right - 12, "each head has two attention products, q @ kᵀ and weights @ v"),
        (
            measure(_separate(768, 12), 1, 2, 768).products,
            "that is the batched version; in the loop every head runs its own products",
        ),
        (one_head + 1, "that is one head; the loop repeats the per-head products for every head"),
    ]


def _wrong_packed(right: int) -> list[tuple[float, str]]:
    return [
        (
            measure(_separate(768, 12), 1, 2, 768).products,
            "that is with three separate q, k "
            "and v projections; here one packed projection makes q, k and v at once",
        ),
        (right - 1, "count q @ kᵀ and weights @ v as two products"),
        (right + 1, "the packed projection is one product, and so is the output projection"),
        (_loop_products(768, 12), "that is the loop; the batched version has no loop over heads"),
        (right * 12, "the heads are a batch dimension: one product serves every head"),
    ]


#: question -> (what, oracle, known wrong values, hint[, near misses]): the fields of
#: :class:`.nb10_interview._Number`.
SECTION_1_NUMBERS = {
    "gpt3_head_size": (
        "GPT-3's head size",
        _head_size,
        _wrong_head_size,
        "each of the heads gets an equal slice of d_model",
    ),
    "params_gpt2_small": (
        "the parameter count of this layer",
        lambda: _gpt2_small_like(False, True),
        _wrong_gpt2_params,
        "add the weights of the four projections and the biases that exist",
    ),
    "params_mha": (
        "the parameter count of the multi-head layer",
        _mha_4096,
        _wrong_mha_params,
        "four projections, each d_model × d_model, without biases",
    ),
    "params_gqa": (
        "the parameter count of the grouped-query layer",
        _gqa_4096,
        _wrong_gqa_params,
        "q_proj and out_proj are d_model × d_model; k_proj and v_proj produce nkv × hs features",
    ),
    "kv_bytes_per_token": (
        "the KV-cache bytes per token",
        lambda: _kv_bytes(80, 8, 128),
        _wrong_kv,
        "2 (keys and values) × layers × key/value heads × head size × bytes per value",
    ),
    "attention_matrix_bytes": (
        "the bytes of one layer's attention weights",
        lambda: _weights_bytes(8, 12, 1024),
        _wrong_weights_bytes,
        "one T × T matrix per head and per sequence, 4 bytes per value",
        _near_weights_bytes,
    ),
    "flops": (
        "the FLOPs of one forward pass",
        _flops,
        _wrong_flops,
        "add 2·m·n·k for every (m, k) @ (k, n) product: four projections, and two attention "
        "products for every head and sequence",
    ),
    "matmuls_loop": (
        "the number of matrix products of the loop",
        lambda: _loop_products(768, 12),
        _wrong_loop,
        "count one product per projection call and one per @, for every head, then "
        "what runs once after the loop",
    ),
    "matmuls_packed": (
        "the number of matrix products of the batched version",
        lambda: measure(packed(768, 12), 1, 2, 768).products,
        _wrong_packed,
        "count one product per projection call and one per batched @; nothing repeats per head",
    ),
}
