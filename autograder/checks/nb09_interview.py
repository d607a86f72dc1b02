"""Checks for notebook 09: the numbers and multiple-choice answers of the interview quiz.

Shape legend: ``B`` batch, ``T`` sequence length, ``C`` = d_model, ``nh`` query heads, ``nkv``
key/value heads, ``hs`` = C // nh (head size), ``L`` layers.

No answer is written down here. Every number is recomputed from its question's configuration by
PyTorch: parameters of modules built on the meta device (no memory used), bytes of meta tensors,
and the matrix products and FLOPs that a ``TorchDispatchMode`` sees while PyTorch's own attention
modules run (FLOPs by PyTorch's ``flop_registry``). A known-wrong number is the same oracle on a
wrong configuration (query heads instead of key/value heads, one layer, fp32, ...), with its
diagnosis. Multiple-choice answers that can be measured are measured the same way; the others are
compared by salted hash, and every option carries a note that explains it.

Section 5's questions live in :mod:`.nb09_loop` (5.1–5.7) and :mod:`.nb09_beyond` (5.9–5.10)
and are merged in here. Answers are variables
named ``answer_<question>``; a test cell calls
``check_number("gpt3_head_size", answer_gpt3_head_size)`` or ``check_choice("gqa", answer_gqa)``.
"""

from __future__ import annotations

import hashlib
import math
import numbers
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from autograder.tools.modules import TorchMultiHeadAttention
from autograder.tools.nb04_gqa import TorchGroupedQueryAttention, cache_nbytes, meta_cache
from autograder.torch_helpers import one_thread

from ._core import fail, not_written
from .nb09_beyond import BEYOND_CHOICES, BEYOND_NUMBERS
from .nb09_loop import LOOP_CHOICES, LOOP_NUMBERS

#: Learner-importable names that would compute this notebook's graded answers. In the grading
#: sandbox of any notebook whose test cells use these checks, they keep their names but raise.
ANSWERS_IN_TOOLS: dict[str, str] = {
    "autograder.tools.nb09_flashcards.DECK": (
        "every number and choice, on the card backs (matmuls_loop via 5·nh + 1)"
    ),
    "autograder.tools.nb09_flashcards.deck_markdown": "prints DECK",
    "autograder.tools.nb09_flashcards.Schedule": "holds DECK (its default deck)",
    "autograder.tools.nb09_flashcards.flashcard_widget": "holds DECK (its default deck)",
    "autograder.tools.modules.TorchMultiHeadAttention": (
        "params_gpt2_small, params_mha and flops, measured on the meta device"
    ),
    "autograder.tools.nb04_gqa.TorchGroupedQueryAttention": (
        "params_gqa, counted on the meta device"
    ),
    "autograder.tools.nb04_gqa.meta_cache": (
        "kv_bytes_per_token, as cache_nbytes(meta_cache(80, 8, 128, 1)), and "
        "window_cache_bytes, as cache_nbytes(meta_cache(32, 8, 128, 4096))"
    ),
    "autograder.tools.nb06_gpu.attention_flops": (
        "part of flops: the 4·B·T²·C of the attention products"
    ),
    "autograder.tools.nb05_parallel_heads.loop_heads": "matmuls_loop, counted with count_ops",
    "autograder.tools.nb05_parallel_heads.IMPLEMENTATIONS": "holds loop_heads",
    "autograder.tools.timing.count_ops": (
        "matmuls_loop and matmuls_packed, counted on loop_heads or nn.MultiheadAttention"
    ),
    "autograder.tools.timing.OpCounter": "the counter behind count_ops",
}

_PRODUCTS = {torch.ops.aten.mm, torch.ops.aten.addmm, torch.ops.aten.bmm, torch.ops.aten.baddbmm}
SALT = "mha-course/08-interview-prep"


# --------------------------------------------------------------------------------- oracles


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


def _measure(module: nn.Module, B: int, T: int, C: int) -> _ProductCounter:
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


def _packed(C: int, nh: int) -> nn.MultiheadAttention:
    """PyTorch's module: q, k and v come from one packed ``(3C, C)`` projection (like c_attn)."""
    return nn.MultiheadAttention(C, nh, batch_first=True)


def _separate(C: int, nh: int, bias: bool = True) -> TorchMultiHeadAttention:
    """PyTorch's MHA behind the course's interface: separate q, k, v and out projections."""
    return TorchMultiHeadAttention(C, nh, bias=bias)


def _meta_params(build: Callable[[], nn.Module]) -> int:
    """Parameters of a module built on the meta device (any size, no memory)."""
    with torch.device("meta"):
        return sum(p.numel() for p in build().parameters())


def _gpt2_small_like(bias_qkv: bool, bias_out: bool) -> int:
    def build():
        mha = _separate(768, 12, bias=bias_qkv)
        mha.out_proj = nn.Linear(768, 768, bias=bias_out)
        return mha

    return _meta_params(build)


def _linears(*widths: int) -> int:
    """Parameters of bias-free projections from 4096 features to each of ``widths``."""
    return _meta_params(lambda: nn.ModuleList(nn.Linear(4096, w, bias=False) for w in widths))


def _kv_bytes(layers: int, kv_heads: int, head_dim: int, dtype=torch.float16) -> int:
    """Bytes of one token's keys and values in every layer (meta tensors, so no memory)."""
    return cache_nbytes(meta_cache(layers, kv_heads, head_dim, seq_len=1, dtype=dtype))


def _weights_bytes(B: int, nh: int, T: int, dtype=torch.float32) -> int:
    return torch.empty(B, nh, T, T, dtype=dtype, device="meta").nbytes  # (B, nh, T, T)


def _loop_products(C: int, nh: int) -> int:
    """Products of the heads run one after another: per head, a one-head attention on the head's
    own slices without the output projection; the output projection once, after the loop."""
    out_proj = _measure(nn.Linear(C, C), 1, 2, C).products
    one_head = _measure(_separate(C, 1), 1, 2, C).products - out_proj
    return nh * one_head + out_proj


# ------------------------------------------------------------------------- numeric answers


def _merged(pairs: list[tuple[float, str]]) -> dict[float, str]:
    """Known-wrong values -> diagnosis; two mistakes giving the same value share one message."""
    merged: dict[float, str] = {}
    for value, why in pairs:
        merged[value] = f"{merged[value]}; or else {why}" if value in merged else why
    return merged


@dataclass(frozen=True)
class _Number:
    """A numeric question: its oracle, known-wrong values with diagnoses, a general hint."""

    what: str
    oracle: Callable[[], int]
    wrong: Callable[[int], list[tuple[float, str]]]
    hint: str
    near: Callable[[int], list[tuple[float, float, str]]] = field(default=lambda right: [])


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
    return _meta_params(lambda: _separate(4096, 32, bias=False))


def _gqa_4096() -> int:
    return _meta_params(lambda: TorchGroupedQueryAttention(4096, 32, 8, bias=False))


def _wrong_mha_params(right: int) -> list[tuple[float, str]]:
    return [
        (
            _meta_params(lambda: _separate(4096, 32, bias=True)),
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
            _meta_params(lambda: TorchGroupedQueryAttention(4096, 32, 8, bias=True)),
            "these layers have no biases",
        ),
        (
            _meta_params(lambda: TorchGroupedQueryAttention(4096, 32, 1, bias=False)),
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
    return _measure(_packed(512, 8), 2, 128, 512).flops


def _wrong_flops(right: int) -> list[tuple[float, str]]:
    projection = _measure(nn.Linear(512, 512), 2, 128, 512).flops  # one (B·T, C) @ (C, C)
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
            _measure(_separate(768, 12), 1, 2, 768).products,
            "that is the batched version; in the loop every head runs its own products",
        ),
        (one_head + 1, "that is one head; the loop repeats the per-head products for every head"),
    ]


def _wrong_packed(right: int) -> list[tuple[float, str]]:
    return [
        (
            _measure(_separate(768, 12), 1, 2, 768).products,
            "that is with three separate q, k "
            "and v projections; here one packed projection makes q, k and v at once",
        ),
        (right - 1, "count q @ kᵀ and weights @ v as two products"),
        (right + 1, "the packed projection is one product, and so is the output projection"),
        (_loop_products(768, 12), "that is the loop; the batched version has no loop over heads"),
        (right * 12, "the heads are a batch dimension: one product serves every head"),
    ]


NUMBERS: dict[str, _Number] = {
    "gpt3_head_size": _Number(
        "GPT-3's head size",
        _head_size,
        _wrong_head_size,
        "each of the heads gets an equal slice of d_model",
    ),
    "params_gpt2_small": _Number(
        "the parameter count of this layer",
        lambda: _gpt2_small_like(False, True),
        _wrong_gpt2_params,
        "add the weights of the four projections and the biases that exist",
    ),
    "params_mha": _Number(
        "the parameter count of the multi-head layer",
        _mha_4096,
        _wrong_mha_params,
        "four projections, each d_model × d_model, without biases",
    ),
    "params_gqa": _Number(
        "the parameter count of the grouped-query layer",
        _gqa_4096,
        _wrong_gqa_params,
        "q_proj and out_proj are d_model × d_model; k_proj and v_proj produce nkv × hs features",
    ),
    "kv_bytes_per_token": _Number(
        "the KV-cache bytes per token",
        lambda: _kv_bytes(80, 8, 128),
        _wrong_kv,
        "2 (keys and values) × layers × key/value heads × head size × bytes per value",
    ),
    "attention_matrix_bytes": _Number(
        "the bytes of one layer's attention weights",
        lambda: _weights_bytes(8, 12, 1024),
        _wrong_weights_bytes,
        "one T × T matrix per head and per sequence, 4 bytes per value",
        _near_weights_bytes,
    ),
    "flops": _Number(
        "the FLOPs of one forward pass",
        _flops,
        _wrong_flops,
        "add 2·m·n·k for every (m, k) @ (k, n) product: four projections, and two attention "
        "products for every head and sequence",
    ),
    "matmuls_loop": _Number(
        "the number of matrix products of the loop",
        lambda: _loop_products(768, 12),
        _wrong_loop,
        "count one product per projection call and one per @, for every head, then "
        "what runs once after the loop",
    ),
    "matmuls_packed": _Number(
        "the number of matrix products of the batched version",
        lambda: _measure(_packed(768, 12), 1, 2, 768).products,
        _wrong_packed,
        "count one product per projection call and one per batched @; nothing repeats per head",
    ),
}


NUMBERS.update({question: _Number(*spec) for question, spec in LOOP_NUMBERS.items()})
NUMBERS.update({question: _Number(*spec) for question, spec in BEYOND_NUMBERS.items()})


def _not_set(name: str, example: str) -> None:
    __tracebackhide__ = True
    not_written(
        f"`{name}` is not set yet: replace `raise NotImplementedError()` in its answer cell with "
        f"`{name} = {example}` and run that cell."
    )


def _as_number(value, name: str) -> float:
    __tracebackhide__ = True
    if value is None or (isinstance(value, str) and not value.strip()):
        _not_set(name, "<a number>")
    if isinstance(value, str):
        fail(f"Set `{name}` to a number, not a string: remove the quotes (got {value!r}).")
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        fail(f"Set `{name}` to a number (got {type(value).__name__}).")
    return float(value)


@one_thread
def check_number(question: str, value) -> None:
    """``value`` equals the number that PyTorch computes for ``question``'s configuration."""
    __tracebackhide__ = True
    spec, name = NUMBERS[question], f"answer_{question}"
    got = _as_number(value, name)
    right = spec.oracle()
    if got == right:
        return
    shown = f"{int(got):,}" if got == int(got) else f"{got:,}"
    why = _merged(spec.wrong(right)).get(got) or next(
        (why for lo, hi, why in spec.near(right) if lo <= got <= hi), None
    )
    if why is None and got != int(got):
        why = f"the answer is a whole number, so look again at the reasoning: {spec.hint}"
    if why is None and math.isclose(got, right, rel_tol=0.01):
        why = "close, but the question asks for the exact count: do not round"
    fail(f"`{name}` = {shown} is not {spec.what}: {why or spec.hint}.")


# ------------------------------------------------------------------------- multiple choice


@dataclass(frozen=True)
class Choice:
    """A multiple-choice question: a note for every option, and how to find the right ones.

    Either ``digests`` (salted hashes of the right letters) or ``measured`` (option -> a claim
    about two measurements, with 1 head and with 12 heads at the same width) is given.
    ``multiple`` questions take every letter that applies.
    """

    notes: dict[str, str]
    digests: frozenset[str] = frozenset()
    measured: dict[str, Callable[[float, float], bool]] | None = None
    measure: Callable[[int], float] | None = None
    multiple: bool = False
    missing_hint: str = ""


_12X = {  # claims about (one head, twelve heads) measurements, same total width
    "one_12x": lambda one, twelve: one == 12 * twelve,
    "twelve_12x": lambda one, twelve: twelve == 12 * one,
    "same": lambda one, twelve: one == twelve,
    "sqrt": lambda one, twelve: math.isclose(
        max(one, twelve) / min(one, twelve), math.sqrt(12), rel_tol=0.05
    ),
}

CHOICES: dict[str, Choice] = {
    "head_count": Choice(
        {
            "a": "8 was the original Transformer's choice; GPT-2 small uses 12 and GPT-3 96, so "
            "the "
            "count clearly grows with the model",
            "b": "designers keep the head size near 64 or 128 and let the head count grow with the "
            "width: 12 × 64 = 768, 96 × 128 = 12,288",
            "c": "with one head per feature, every query-key comparison happens in a single "
            "dimension, far too coarse to be useful",
            "d": "depth and head count are separate choices that often coincide (GPT-2 small: 12 "
            "and 12, GPT-3: 96 and 96) but need not: GPT-2 medium has 24 layers of 16 heads, "
            "Llama 2 70B 80 layers of 64 heads",
        },
        frozenset({"59d70091bd59ddc8"}),
    ),
    "wide_head_params": Choice(
        {
            "a": "splitting the width into heads re-slices the same C × C projections; no "
            "parameter disappears",
            "b": "the heads do not get matrices of their own: head h uses rows h·hs:(h+1)·hs of "
            "the shared C × C projections",
            "c": "every projection is C × C whatever the head count, so both have 4C² + 4C "
            "parameters; what differs is how many separate softmax weightings a token gets",
            "d": "no square root appears in a parameter count: the projections are C × C either "
            "way",
        },
        measured={
            "a": _12X["one_12x"],
            "b": _12X["twelve_12x"],
            "c": _12X["same"],
            "d": _12X["sqrt"],
        },
        measure=lambda nh: _meta_params(lambda: _packed(768, nh)),
    ),
    "heads_jobs": Choice(
        {
            "a": "nobody assigns relations to heads, and the head count is not matched to a list "
            "of "
            "relation types; whatever a head does emerges from training",
            "b": "heads start from different random weights and have their own projections; "
            "studies "
            "of trained models find distinct patterns (previous token, syntactic relations, "
            "rare words)",
            "c": "a large attention weight is evidence, not an explanation: a head can look at a "
            "token and barely change the output, and its pattern often changes with the input",
            "d": "labels like these illustrate what can emerge; a real head's role is learned, "
            "rarely clean, and established by measurement such as ablation, not by one map",
        },
        frozenset({"c06891bfbf70c43e"}),
    ),
    "more_heads": Choice(
        {
            "a": "at a fixed width four times as many heads means heads a quarter of the size, so "
            "each query-key comparison works in fewer dimensions; the head count is tuned with "
            "width and depth, and trained models often carry redundant heads",
            "b": "at a fixed width more heads means smaller heads, not a free gain; 'always "
            "better' "
            "is exactly the claim to push back on",
            "c": "the parameter count does not change with the head count at a fixed width",
            "d": "the heads are batched into the same few products, and the FLOPs do not depend on "
            "the head count",
        },
        frozenset({"f651bd449a33d3a1"}),
    ),
    "heads_cost": Choice(
        {
            "a": "the heads split the width: each works on C / nh features, so the products add up "
            "to the same total; a loop over heads would change the schedule, not the arithmetic",
            "b": "the projections are C × C whatever nh, and the attention products of all heads "
            "add up to 4·B·T²·C: nh cancels",
            "c": "splitting into heads re-arranges the same products; it removes none of them",
            "d": "no square root appears: nh cancels exactly",
        },
        measured={
            "a": _12X["twelve_12x"],
            "b": _12X["same"],
            "c": _12X["one_12x"],
            "d": _12X["sqrt"],
        },
        measure=lambda nh: _measure(_packed(48, nh), 2, 16, 48).flops,
    ),
    "parallel_why": Choice(
        {
            "a": "both schedules do exactly the same arithmetic; counting FLOPs shows it",
            "b": "each head still has its own softmax; batching only computes all of them in one "
            "call",
            "c": "the weights are identical in both schedules; only the order of work differs",
            "d": "the heads are independent until the concatenation, so the same arithmetic fits "
            "into a few large batched products: fewer fixed costs per operation (Python, "
            "dispatch, kernel launches) and far better use of parallel hardware",
        },
        frozenset({"5e3a3ba102b9909a"}),
    ),
    "why_heads": Choice(
        {
            "a": "at a fixed width the parameter count is exactly the same",
            "b": "the total FLOPs are the same, so speed is not the reason",
            "c": "with their own projections and softmax, heads let every token gather several "
            "differently weighted mixtures of the others at once, each in its own subspace; "
            "one head gives a single weighted average, at the same parameters and FLOPs",
            "d": "one softmax can spread weight over many tokens, but only as a single mixture: "
            "the "
            "limit is one weighting per query, not one token",
        },
        frozenset({"b635c860f42b24c0"}),
    ),
    "gqa": Choice(
        {
            "a": "all 64 query heads stay, each with its own queries; only keys and values are "
            "shared",
            "b": "every group of 8 query heads shares one key/value head, so k_proj, v_proj and "
            "the "
            "KV cache shrink 8 times while the queries keep their full resolution",
            "c": "the head size stays 128: GQA changes how many key/value heads exist, not their "
            "size",
            "d": "every past token is still cached; each token just needs fewer key/value heads",
        },
        frozenset({"de61f8fe8716c049"}),
    ),
    "sqrt_dk": Choice(
        {
            "a": "the division costs a little time rather than saving any; it is about the "
            "statistics of the scores",
            "b": "the softmax makes every row sum to 1 whatever the scale of the scores",
            "c": "the scaling acts on the scores, before the softmax; the values are untouched",
            "d": "q·k of random unit-variance vectors has variance d_k, so without scaling a large "
            "d_k drives the softmax towards one-hot, where gradients nearly vanish; dividing by "
            "√d_k brings the variance back to about 1",
        },
        frozenset({"ab3f6acd56722709"}),
    ),
    "mask_after_softmax": Choice(
        {
            "a": "zeroing weights after the softmax leaves rows that sum to less than 1: the "
            "masked "
            "keys still took their share of the normalisation",
            "b": "the masked keys took part in the normalisation, so each row sums to less than 1 "
            "and the output shrinks by a query-dependent factor; fill the masked scores with "
            "-inf before the softmax instead",
            "c": "masking the values does not restore the normalisation; the rows still sum to "
            "less than 1",
            "d": "the softmax always normalises over the keys (the last axis), mask or not",
        },
        frozenset({"b71cad86c0b1350a"}),
    ),
    "pruning": Choice(
        {
            "a": "the study pruned models that had been trained with all their heads; it did not "
            "show that training with fewer heads works as well",
            "b": "low importance after training does not mean a head learned nothing: it can "
            "overlap with others, and having it may have helped training",
            "c": "after training, heads differ widely in importance and many are redundant at "
            "inference, so pruning can save compute; it says little about training with "
            "fewer heads",
            "d": "heads were removed in order of a measured importance score; removing them at "
            "random hurts more",
        },
        frozenset({"337f01ed11d67b39"}),
    ),
    "pushback": Choice(
        {
            "a": "each head has its own learned projections and its own softmax, so heads can "
            "weight the same tokens differently; that is the core of the mechanism",
            "b": "a heatmap is evidence, not an explanation: many heads are diffuse or "
            "input-dependent, and a head can be looked at without mattering",
            "c": "'always' is the problem: the head count is a trade-off against head size, tuned "
            "with width and depth",
            "d": "each head works in C/nh dimensions, so nh heads do the work of one head of "
            "width C and nh cancels from the FLOPs, whatever the schedule: batched or one head "
            "at a time",
            "e": "many heads of trained models can be removed at test time with little loss "
            "(Michel et al., 2019)",
            "f": "one wide head and several narrow ones have exactly the same parameters at the "
            "same width",
        },
        frozenset({"4775e7a53641554d", "d0e7b0cf6c6b4b01", "dc572b4ed45cdf26"}),
        multiple=True,
        missing_hint="whether its conclusion really follows from what you measured in this "
        "course, watching for absolute words and for claims that go beyond the "
        "evidence",
    ),
}


CHOICES.update({question: Choice(*spec) for question, spec in LOOP_CHOICES.items()})
CHOICES.update({question: Choice(*spec) for question, spec in BEYOND_CHOICES.items()})


def _digest(question: str, letter: str) -> str:
    return hashlib.sha256(f"{SALT}|{question}|{letter}".encode()).hexdigest()[:16]


def _right(question: str, spec: Choice) -> set[str]:
    if spec.measured is None:
        return {letter for letter in spec.notes if _digest(question, letter) in spec.digests}
    one, twelve = spec.measure(1), spec.measure(12)
    return {letter for letter, claim in spec.measured.items() if claim(one, twelve)}


def _letters(value, name: str, spec: Choice) -> set[str]:
    __tracebackhide__ = True
    if value is None or (isinstance(value, str) and not value.strip()):
        _not_set(name, '"<letters>"' if spec.multiple else '"<letter>"')
    options = sorted(spec.notes)
    if isinstance(value, list | tuple | set):
        value = "".join(str(v) for v in value)
    text = (
        "".join(c for c in value.lower() if c not in " ,;()[]{}'\".")
        if isinstance(value, str)
        else ""
    )
    if not text or not set(text) <= set(options) or (not spec.multiple and len(text) != 1):
        listed = ", ".join(f'"{o}"' for o in options)
        what = "a string of every letter that applies" if spec.multiple else "one letter"
        fail(f"Set `{name}` to {what}, out of {listed} (got {value!r}).")
    return set(text)


@one_thread
def check_choice(question: str, value) -> None:
    """``value`` (a letter, or letters for a select-all question) is right for ``question``."""
    __tracebackhide__ = True
    spec, name = CHOICES[question], f"answer_{question}"
    chosen = _letters(value, name, spec)
    right = _right(question, spec)
    if chosen == right:
        if not spec.multiple:
            print(f"Right: {spec.notes[min(right)]}.")
        return
    if not spec.multiple:
        fail(f"`{name}` = {min(chosen)!r} is not the best choice: {spec.notes[min(chosen)]}.")
    extra = sorted(chosen - right)
    if extra:
        fail(f"`{name}` includes ({extra[0]}), which holds up: {spec.notes[extra[0]]}.")
    fail(
        f"`{name}` misses at least one claim that deserves push-back: re-read the options you "
        f"did not pick and ask, for each, {spec.missing_hint}."
    )
