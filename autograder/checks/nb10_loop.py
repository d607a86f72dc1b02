"""Questions of notebook 10 §5, the rest of an interview loop: complexity, FlashAttention, GQA and
tensor parallelism, serving, long context, RoPE and the block.

Shape legend: ``B`` batch, ``T`` sequence length, ``C`` = d_model, ``nh`` query heads, ``nkv``
key/value heads, ``hs`` = C // nh.

No answer is written down here: numbers are measured by PyTorch's ``FlopCounterMode`` on meta
tensors (no memory, no arithmetic) and by the bytes of meta tensors; choices are salted hashes,
with a note for every option. :mod:`.nb10_interview` merges these questions into its own, so a
test cell calls ``check_number("crossover_seq_len", ...)`` or ``check_choice("pre_ln", ...)``
exactly as in sections 1 and 2.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

#: No tool of the course computes these answers.
ANSWERS_IN_TOOLS: dict[str, str] = {}

WIDTH = 5120  # C of the questions: the width of Llama 2 13B


def _meta(*shape: int, dtype=torch.float32) -> torch.Tensor:
    return torch.empty(*shape, dtype=dtype, device="meta")


def _flops(fn) -> int:
    """FLOPs PyTorch counts for ``fn()`` (run it on meta tensors: shapes only)."""
    counter = FlopCounterMode(display=False)
    with counter:
        fn()
    return counter.get_total_flops()


def _projections(T: int, C: int) -> int:
    """The q, k, v and output projections of one layer on ``T`` tokens, batch 1."""
    x, w = _meta(1, T, C), _meta(C, C)
    return _flops(lambda: [F.linear(x, w) for _ in range(4)])


def _attention_products(T: int, C: int, nh: int = 32) -> int:
    """``q @ kᵀ`` and ``weights @ v`` of every head on ``T`` tokens, batch 1."""
    q = _meta(1, nh, T, C // nh)  # (B, nh, T, hs)
    weights = _meta(1, nh, T, T)  # (B, nh, T, T)
    return _flops(lambda: (q @ q.transpose(-2, -1), weights @ q))


def _crossover(C: int = WIDTH, probe: int = 64) -> int:
    """The T at which 4·T²·C (grows as T²) meets 8·T·C² (grows as T), from one measurement."""
    return probe * _projections(probe, C) // _attention_products(probe, C)


def _wrong_crossover(right: int) -> list[tuple[float, str]]:
    C = WIDTH
    return [
        (
            C,
            "at T = C the attention products are only half the projections; set 4·T²·C equal "
            "to 8·T·C² and solve for T",
        ),
        (
            C // 2,
            "the ratio is upside down: the projections grow as T·C², the attention "
            "products as T²·C, so the crossover length grows with C",
        ),
        (
            4 * C,
            "count both attention products (q @ kᵀ and weights @ v, 2·T²·C FLOPs each) "
            "and all four projections (2·T·C² each)",
        ),
        (C * C, "the crossover length grows linearly with C: cancel one T and one C"),
    ]


def _intensity(tokens: int, C: int = WIDTH) -> float:
    """FLOPs per byte of fp16 weights of one ``(C, C)`` projection applied to ``tokens``."""
    w = _meta(C, C, dtype=torch.float16)
    x = _meta(1, tokens, C, dtype=torch.float16)
    return _flops(lambda: F.linear(x, w)) / w.nbytes


def _wrong_intensity(right: float) -> list[tuple[float, str]]:
    return [
        (right / 2, "count 2 FLOPs per multiply-add and 2 bytes per fp16 weight"),
        (right * 2, "an fp16 weight takes 2 bytes"),
        (right * WIDTH, "divide by the bytes of the weight matrix, C · C · 2, not of one row"),
    ]


def _wrong_decode(right: float) -> list[tuple[float, str]]:
    return [
        *_wrong_intensity(right),
        (_intensity(2048), "that is the prefill of 2,048 tokens; decoding feeds one token"),
    ]


#: question -> (what, oracle, known wrong values, hint): :class:`.nb10_interview._Number`'s fields.
LOOP_NUMBERS = {
    "crossover_seq_len": (
        "the length at which the attention products overtake the projections",
        _crossover,
        _wrong_crossover,
        "write both FLOP counts of one layer as functions of T and set them equal",
    ),
    "prefill_intensity": (
        "the FLOPs per weight byte of the prefill",
        lambda: _intensity(2048),
        _wrong_intensity,
        "FLOPs 2·T·C² for T tokens, divided by the 2·C² bytes of fp16 weights read once",
    ),
    "decode_intensity": (
        "the FLOPs per weight byte of one decoding step",
        lambda: _intensity(1),
        _wrong_decode,
        "one token: FLOPs 2·C², divided by the 2·C² bytes of fp16 weights read for it",
    ),
}

#: question -> (a note for every option, salted digests of the right letters).
LOOP_CHOICES = {
    "complexity": (
        {
            "a": "the projections are linear in T, but every query meets every key, so the "
            "scores alone are T × T per head",
            "b": "a T × T table per head is quadratic in T, not T log T; nothing in attention "
            "sorts or halves the keys",
            "c": "every query meets every key: T² pairs of C-wide dot products across the heads "
            "in time, and a T × T table per head in memory unless a fused kernel streams it",
            "d": "the C² terms belong to the projections, which are not part of attention itself; "
            "the scores and the weighted sum cost T² products of hs numbers per head, T²·C in "
            "all",
        },
        frozenset({"767662eec051ae02"}),
    ),
    "flash_exact": (
        {
            "a": "each block of keys updates a running maximum and sum; earlier partial results "
            "are rescaled by exp(old max − new max), so the end result is the exact softmax, "
            "only computed in another order",
            "b": "no part of the score table is dropped; every key contributes to every query",
            "c": "the kernel does accumulate in fp32 while its inputs stay fp16 or bf16, but fp32 "
            "still rounds; 'exact' means the same maths as the ordinary softmax, and that comes "
            "from the rescaling, not from a wider type",
            "d": "the result does not depend on the block size beyond rounding: blocks are a "
            "schedule, not an approximation",
        },
        frozenset({"08c7e7694adc73c4"}),
    ),
    "flash_io": (
        {
            "a": "the FLOPs are the same as standard attention (a little more in the backward); "
            "the gain is in memory traffic",
            "b": "the time of standard attention at long lengths goes into reading and writing "
            "the T × T tables, not into arithmetic",
            "c": "tiles live in the on-chip SRAM of each streaming multiprocessor, which is far "
            "smaller than HBM; HBM is where the inputs and outputs stay",
            "d": "standard attention writes the scores and weights to HBM and reads them back; "
            "FlashAttention keeps tiles of q, k and v in on-chip SRAM and writes only the "
            "output, so the T × T round trip and memory disappear; what remains, re-reading k "
            "and v for every tile of queries, is Θ(T²·hs²/M) for an SRAM of M numbers (Dao et "
            "al., Theorem 2): still quadratic in T, with a much smaller constant",
        },
        frozenset({"71d7b09a01f4fd77"}),
    ),
    "flash_backward": (
        {
            "a": "the gradients need the attention weights; without them, or a way to remake "
            "them, there is no backward pass",
            "b": "the forward keeps one log-sum-exp per query row (FlashAttention-2; the first "
            "version kept the row maximum m and sum ℓ, the same information), T numbers per "
            "head; the backward remakes the weights tile by tile from q, k and that statistic, "
            "trading a few extra FLOPs for never storing T × S weights",
            "c": "storing the weights would bring back the T × S memory the forward avoided; "
            "the row statistics are enough to remake them exactly",
            "d": "recomputing in the backward is a choice to save memory, not a consequence of "
            "rounding; it gives the same gradients",
        },
        frozenset({"c62cee68047809d9"}),
    ),
    "gqa_tradeoff": (
        {
            "a": "multi-query attention shares a single key/value head, which saves the most "
            "memory but loses the most quality; it is not the accurate end",
            "b": "all three keep every query head and the same attention FLOPs; what changes is "
            "how many key/value heads are stored and read",
            "c": "MHA has the best quality and the largest KV cache; MQA the smallest cache and "
            "fastest decoding but a quality drop and less stable training; GQA sits between, "
            "near MHA's quality with a cache nh / nkv times smaller",
            "d": "decoding is limited by reading the KV cache, so fewer key/value heads make it "
            "faster, not slower",
        },
        frozenset({"b9942ae745b94582"}),
    ),
    "tp_kv_heads": (
        {
            "a": "heads are the unit of sharding: with 8 key/value heads on 16 ranks each "
            "key/value head is replicated on 2 ranks, and each rank serves the query heads "
            "that read it, so the KV cache per rank stops shrinking below one head; this works "
            "because 8 divides 16",
            "b": "a head's hs features belong to one softmax; splitting them across ranks "
            "would need a reduction inside every dot product",
            "c": "tensor parallelism shards heads across ranks, never positions; the cache "
            "keeps every past token",
            "d": "real implementations (Megatron, vLLM) need divisibility one way or the other: "
            "the ranks divide the key/value heads, or the key/value heads divide the ranks so "
            "that each is replicated a whole number of times, as 8 heads on 16 ranks are",
        },
        frozenset({"4fcf65f20018f0b8"}),
    ),
    "sliding_window": (
        {
            "a": "each layer still reads W keys per query, so the cost per token is constant, "
            "not zero: the window bounds it rather than removing it",
            "b": "each query reads only the last W keys: the work is O(T·W) and the KV cache "
            "stays at W positions; stacking L layers lets information travel up to about "
            "L·W tokens back",
            "c": "tokens beyond the window are not summarised anywhere; they reach a query only "
            "through the layers below, one window per layer",
            "d": "the window limits what one layer reads; a stack of layers still reaches "
            "further back than W",
        },
        frozenset({"afefa6840372a6dc"}),
    ),
    "attention_sinks": (
        {
            "a": "the first tokens are kept for what the model learned to do with them, not for "
            "their meaning; replacing their content matters much less than removing them",
            "b": "recomputing the evicted tokens would cost what a full cache costs; streaming "
            "keeps a fixed budget",
            "c": "a window of recent tokens alone is exactly what breaks: quality collapses "
            "once the first tokens leave the cache",
            "d": "the softmax must put its mass somewhere, and trained models park much of it on "
            "the first few tokens; keeping those few sink tokens plus a window of recent ones "
            "keeps the attention stable on streams far longer than the training length",
        },
        frozenset({"e7210e1e56d7492f"}),
    ),
    "rope_cache": (
        {
            "a": "re-rotating the cache every step costs work and gains nothing: the score of a "
            "rotated pair already depends only on their distance",
            "b": "the values carry content and are never rotated; only queries and keys are",
            "c": "a key is rotated once, at its position in the text, when it enters the cache; "
            "the score of query m and key n then depends only on n − m, because two rotations "
            "compose into one, so with positions in the text cached keys never need touching "
            "again (caches that renumber positions, like StreamingLLM's, store keys unrotated "
            "or re-rotate them)",
            "d": "rotations are applied to q and k before the scores, not to the scores",
        },
        frozenset({"54904f7879b7a0c3"}),
    ),
    "pre_ln": (
        {
            "a": "pre-LN normalises the input of each sub-layer and leaves the residual path "
            "as a clean sum, so gradients reach early layers undistorted and deep stacks train "
            "without a long warm-up; post-LN, the original Transformer's, normalises after "
            "the addition and needs that warm-up",
            "b": "both have the same parameters and FLOPs; the difference is where the "
            "normalisation sits relative to the residual sum",
            "c": "post-LN came first (the original Transformer); GPT-2 and most later models "
            "moved to pre-LN",
            "d": "pre-LN adds one final layer norm after the last block, but the residual path "
            "inside the stack carries no normalisation at all",
        },
        frozenset({"09ca0280b6e80542"}),
    ),
    "dropout_where": (
        {
            "a": "the residual path itself is never dropped out; dropout acts on the branches",
            "b": "dropout on the scores does not remove keys: a zeroed score still gets weight "
            "e⁰/Σ after the softmax (notebook 02 §10); the dropout goes on the weights, after "
            "the softmax",
            "c": "dropout is only active in training; at inference (model.eval()) it is the "
            "identity",
            "d": "on the attention weights after the softmax (dropping whole query–key links), "
            "and on the output of each residual branch before it is added back; rescaled by "
            "1/(1 − p) in training and off at inference, which model.eval() does for nn.Dropout "
            "and SDPA needs as dropout_p=p if self.training else 0.0",
        },
        frozenset({"48a97de914a97e87"}),
    ),
}
