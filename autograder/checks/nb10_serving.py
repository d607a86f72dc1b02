"""Questions of notebook 10 §5.11, attention as it is served: the paged cache and its block size,
prefix caching, packed sequences (``cu_seqlens``), continuous batching, chunked prefill,
split-KV decoding and speculative decoding's acceptance rule.

Shape legend: ``C`` = d_model, ``nkv`` key/value heads, ``hs`` head size, ``L`` layers, ``bs``
the block size of a paged cache.

No answer is written down here: the block's bytes are those of meta tensors, the prefill's steps
come from running the scheduler's loop; choices are salted hashes, with a note for every option.
:mod:`.nb10_interview` merges these questions into its own, so a test cell calls
``check_number("block_bytes", ...)`` or ``check_choice("speculative_rule", ...)`` as elsewhere.
"""

from __future__ import annotations

import torch

from autograder.tools.nb04_gqa import cache_nbytes, meta_cache

#: No tool of the course computes these answers.
ANSWERS_IN_TOOLS: dict[str, str] = {}

# Llama 2 7B: 32 layers, 32 key/value heads of 128, an fp16 cache; vLLM's default block size.
_LLAMA2_7B = {"layers": 32, "kv_heads": 32, "head": 128}
_BLOCK = 16


def _block_bytes(tokens: int = _BLOCK, layers: int = _LLAMA2_7B["layers"], dtype=torch.float16):
    """One block of ``tokens`` positions, keys and values, in every layer."""
    d = _LLAMA2_7B
    return cache_nbytes(meta_cache(layers, d["kv_heads"], d["head"], tokens, dtype=dtype))


def _wrong_block(right: int) -> list[tuple[float, str]]:
    return [
        (right // 2, "a block holds keys and values"),
        (
            _block_bytes(layers=1),
            "a block's table entry stands for the same slots in all 32 layers",
        ),
        (_block_bytes(dtype=torch.float32), "fp16 takes 2 bytes per value"),
        (_block_bytes(tokens=1), "that is one token; a block holds 16"),
    ]


# The scheduler of the question: a budget of tokens per step, decodes scheduled first.
_BUDGET, _DECODING, _PROMPT = 512, 32, 8000


def _prefill_steps(budget: int = _BUDGET, decoding: int = _DECODING) -> int:
    """Steps until the prompt is prefilled, each giving it what the decodes leave of the budget."""
    left, steps = _PROMPT, 0
    while left > 0:
        left -= min(left, budget - decoding)
        steps += 1
    return steps


def _wrong_steps(right: int) -> list[tuple[float, str]]:
    return [
        (
            _prefill_steps(decoding=0),
            "the 32 decoding requests take one token each of every step's budget first",
        ),
        (1, "chunked prefill caps the tokens of a step: the prompt is spread over several"),
    ]


#: question -> (what, oracle, known wrong values, hint): :class:`.nb10_interview._Number`'s fields.
SERVING_NUMBERS = {
    "block_bytes": (
        "the bytes of one 16-token block over all layers",
        _block_bytes,
        _wrong_block,
        "2 (keys and values) × layers × key/value heads × head size × 16 positions × 2 bytes",
    ),
    "chunked_prefill_steps": (
        "the steps the prompt's prefill takes",
        _prefill_steps,
        _wrong_steps,
        "each step gives the prompt the budget minus the decoding requests' tokens; round up",
    ),
}

#: question -> (a note for every option, salted digests of the right letters).
SERVING_CHOICES = {
    "paged_block_size": (
        {
            "a": "the block size is a number of positions, the head size a number of features; "
            "nothing ties the two",
            "b": "blocks hold a sequence's own positions; a shared prompt is shared by pointing "
            "two tables at the same blocks, not copied per block",
            "c": "only the last block of a sequence is partly filled, so the waste is under one "
            "block per sequence: tiny blocks waste nothing but make long tables and scattered "
            "reads, large ones read well and waste more; 16 sits between",
            "d": "a paged cache never reserves a sequence's maximum length: even with blocks of "
            "512 the waste is under 512 slots per sequence, against up to the whole context in "
            "a contiguous preallocation",
        },
        frozenset({"d5930bf9eb27d26c"}),
    ),
    "prefix_caching": (
        {
            "a": "a token's keys and values depend only on the tokens before it, never on the "
            "other requests of the batch, so a shared prefix's cache can be computed once",
            "b": "the full blocks of the shared prompt are prefilled and stored once, each "
            "shared by reference count: prefill FLOPs and cache memory are saved for 99 of the "
            "100 chats; a divergent write gets its own copy of that block only",
            "c": "every chat's queries still attend to the system prompt's keys; only their "
            "computation and storage is shared",
            "d": "copy-on-write copies only the block being written, the last partial one; "
            "every full block of the prompt stays shared for the life of the chats",
        },
        frozenset({"e9557f138acaf9aa"}),
    ),
    "continuous_batching": (
        {
            "a": "scheduling at every step means a finished request leaves at once and a "
            "waiting one takes its slot, so no slot idles until the batch's longest reply "
            "ends and no padding is computed",
            "b": "one causal mask over all the prompts would let each request attend to the "
            "others; packed sequences need a block-diagonal causal mask",
            "c": "the gain comes from one batched step for every running request, not from "
            "separate streams",
            "d": "each token costs the same FLOPs; requests never share scores",
        },
        frozenset({"fa4572d3dd38268b"}),
    ),
    "varlen_mask": (
        {
            "a": "a causal mask over the packed tensor lets each sequence read the sequences "
            "packed before it",
            "b": "packing leaves no padding at all: that is its point; cu_seqlens marks where "
            "each sequence starts",
            "c": "position ids only feed the positional encoding (RoPE); which keys a query "
            "reads is the mask's job, so without causality a token reads its own future",
            "d": "each sequence must see only itself, causally: query i of the sequence that "
            "spans cu_seqlens[s] … cu_seqlens[s + 1] − 1 reads the keys from cu_seqlens[s] "
            "up to i, a block-diagonal causal mask",
        },
        frozenset({"12a07f853adaf87f"}),
    ),
    "chunked_prefill": (
        {
            "a": "the prompt's own first token comes later, not sooner: its prefill is spread "
            "over many steps that also carry the decodes",
            "b": "no step carries more than the budget, so the decodes' time per output token "
            "stays bounded, and the long prompt pays: its first token waits for about 32 "
            "chunked steps",
            "c": "decodes run in every step beside the chunk; a chunk's queries read the cache "
            "and themselves, which the decodes do not touch",
            "d": "each chunk attends to the whole cache written by earlier chunks and causally "
            "to itself, which is exactly what a one-shot prefill computes",
        },
        frozenset({"409b32618837b322"}),
    ),
    "split_kv_merge": (
        {
            "a": "chunks do not carry equal weight: a chunk whose scores are larger holds more "
            "of the softmax's mass",
            "b": "that would drop every other chunk's keys, which do carry weight",
            "c": "each chunk's output is normalised by its own denominator exp(lse_i); "
            "weighting it by exp(lse_i − lse) puts it back on the common denominator, exactly",
            "d": "a log-sum-exp is a log of a sum; adding them multiplies the denominators "
            "instead of adding them",
        },
        frozenset({"a9b904c407e13536"}),
    ),
    "speculative_rule": (
        {
            "a": "sampling from p after a rejection counts twice the tokens the draft already "
            "proposed: the output would drift from p towards q",
            "b": "rejecting every over-proposed token would emit x too rarely: it must still "
            "come out with probability p(x) = 0.3",
            "c": "the ratio is upside down: q/p accepts the tokens the draft over-proposes "
            "more, not less",
            "d": "accepting with min(1, p/q) emits x with probability q · p/q = p(x), and the "
            "residual norm(max(0, p − q)) supplies exactly the mass the draft left missing",
        },
        frozenset({"db8065b95711578d"}),
    ),
}
