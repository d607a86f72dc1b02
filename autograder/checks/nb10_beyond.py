"""Questions of notebook 10 §5.9–5.10: the cache and positions beyond GQA (rolling windows, MLA,
RoPE scaling, ALiBi), the Llama block's parts and FlashAttention's backward pass.

Shape legend: ``C`` = d_model, ``nh`` query heads, ``nkv`` key/value heads, ``hs`` head size,
``L`` layers, ``W`` window.

No answer is written down here: numbers are bytes of meta tensors and parameters of modules built
on the meta device; choices are salted hashes, with a note for every option.
:mod:`.nb10_interview` merges these questions into its own, so a test cell calls
``check_number("mla_bytes_per_token", ...)`` or ``check_choice("alibi", ...)`` as elsewhere.
"""

from __future__ import annotations

import torch
from torch import nn

from autograder.tools.nb04_gqa import cache_nbytes, meta_cache

#: No tool of the course computes these answers.
ANSWERS_IN_TOOLS: dict[str, str] = {}

# DeepSeek-V3's attention: 61 layers, 128 heads, a 512-wide latent, a 64-wide RoPE key, and
# 128-wide query/key and value heads without RoPE; the cache is bf16.
_DSV3 = {"layers": 61, "heads": 128, "latent": 512, "rope": 64, "nope": 128, "v": 128}


def _meta_bytes(*shapes: tuple[int, ...], dtype=torch.bfloat16) -> int:
    return sum(torch.empty(*s, dtype=dtype, device="meta").nbytes for s in shapes)


def _mla_bytes(rope: bool = True, dtype=torch.bfloat16, layers: int = _DSV3["layers"]) -> int:
    """One token's cache in every layer: the latent, and the shared RoPE key."""
    shapes = [(layers, _DSV3["latent"])] + ([(layers, _DSV3["rope"])] if rope else [])
    return _meta_bytes(*shapes, dtype=dtype)


def _wrong_mla(right: int) -> list[tuple[float, str]]:
    d = _DSV3
    per_head = d["nope"] + d["rope"] + d["v"]  # keys with their RoPE part, and values
    return [
        (
            _mla_bytes(rope=False),
            "the decoupled RoPE key (64 values per layer, shared by the "
            "heads) is cached next to the latent",
        ),
        (
            _meta_bytes((d["layers"], d["heads"], per_head)),
            "that is the cache after the "
            "up-projections, full keys and values for 128 heads: MLA caches the latent instead",
        ),
        (_mla_bytes(dtype=torch.float32), "the cache is bf16, 2 bytes per value"),
        (_mla_bytes(layers=1), "every one of the 61 layers caches its own latent"),
        (
            _meta_bytes((_DSV3["layers"], _DSV3["latent"] + _DSV3["rope"]))
            + _mla_bytes(rope=False),
            "the latent stands for keys and values together: it is cached once",
        ),
    ]


def _window_bytes(seq_len: int = 4096, layers: int = 32, dtype=torch.float16) -> int:
    """Mistral 7B's rolling cache: 32 layers, 8 kv heads of 128, at most W = 4096 positions."""
    return cache_nbytes(meta_cache(layers, 8, 128, seq_len, dtype=dtype))


def _wrong_window(right: int) -> list[tuple[float, str]]:
    return [
        (
            _window_bytes(32_768),
            "a rolling cache keeps only the last W = 4,096 positions, "
            "whatever the length of the conversation",
        ),
        (_window_bytes(4096, layers=1), "every one of the 32 layers keeps its own window"),
        (right // 2, "every layer caches keys and values"),
        (_window_bytes(dtype=torch.float32), "fp16 takes 2 bytes per value"),
        (
            cache_nbytes(meta_cache(32, 32, 128, 4096)),
            "Mistral 7B caches its 8 key/value heads, not its 32 query heads",
        ),
    ]


def _swiglu_params(C: int = 4096, h: int = 11008, bias: bool = False) -> int:
    layers = [nn.Linear(C, h, bias=bias, device="meta") for _ in range(2)]
    layers.append(nn.Linear(h, C, bias=bias, device="meta"))
    return sum(p.numel() for layer in layers for p in layer.parameters())


def _wrong_swiglu(right: int) -> list[tuple[float, str]]:
    C, h = 4096, 11008
    return [
        (2 * C * h, "SwiGLU has three matrices: w1 and w3 (C → h) and w2 (h → C)"),
        (_swiglu_params(bias=True), "Llama's linear layers have no biases"),
        (2 * C * 4 * C, "that is a GELU MLP of width 4C; SwiGLU's width is h = 11,008"),
        (3 * C * 4 * C, "the width is h = 11,008 (2/3 of 4C, rounded up), not 4C"),
    ]


#: question -> (what, oracle, known wrong values, hint): :class:`.nb10_interview._Number`'s fields.
BEYOND_NUMBERS = {
    "window_cache_bytes": (
        "the bytes of the rolling cache",
        _window_bytes,
        _wrong_window,
        "2 (keys and values) × layers × key/value heads × head size × W positions × 2 bytes",
    ),
    "mla_bytes_per_token": (
        "MLA's cache bytes per token",
        _mla_bytes,
        _wrong_mla,
        "per layer, the latent (512) and the RoPE key (64), in bf16, times 61 layers",
    ),
    "swiglu_params": (
        "the parameters of the SwiGLU MLP",
        _swiglu_params,
        _wrong_swiglu,
        "three bias-free matrices: two C × h and one h × C",
    ),
}

#: question -> (a note for every option, salted digests of the right letters).
BEYOND_CHOICES = {
    "ring_buffer": (
        {
            "a": "the slot is where the bytes live, not a position: once the ring wraps, slot "
            "p % W would rotate a key as if it were near the start, and the distances between "
            "tokens would come out wrong",
            "b": "a query and a key turned by the same angle lose it in their dot product "
            "(the rotation is orthogonal), so every score would carry no position at all: each "
            "key must be rotated at its own position",
            "c": "a key is rotated at its absolute position p before it is written to slot "
            "p % W, and the mask is built from the positions the slots hold (oldest first), "
            "so overwriting the oldest slot changes nothing for the others",
            "d": "a full ring overwrites its oldest slot: the cache never grows past W",
        },
        frozenset({"66c78772f3db00c4"}),
    ),
    "mla_absorb": (
        {
            "a": "the up-projections need not run while decoding: W_UK folds into the query "
            "side and W_UV into the output projection, so the cost per step stays small",
            "b": "the latent is shared by keys and values of every head: that is where the "
            "saving comes from, not from fewer heads",
            "c": "q·(W_UK c) = (W_UKᵀ q)·c, so W_UK folds into the query side and W_UV into the "
            "output projection, and decoding attends to the cached latent itself; a rotation "
            "that depends on the position would sit between q and W_UK and block the fold, so a "
            "small separate RoPE key, shared by the heads, is cached next to the latent",
            "d": "RoPE is still needed for positions: it goes on a small separate key, not on "
            "the latent",
        },
        frozenset({"64d29a98fec9c2e6"}),
    ),
    "mla_intensity": (
        {
            "a": "128 heads × 2 × (576 + 512) = 278,528 FLOPs on 1,152 bytes is about 242 FLOPs "
            "per byte, close to the ~295 an H100 needs, so absorbed MLA decoding is nearly "
            "compute-bound and its many heads add little time",
            "b": "a byte read once can still serve many heads: every one of the 128 heads uses "
            "each cached latent number, so the ratio is far above 1",
            "c": "folding W_UK and W_UV away removes the up-projections' arithmetic, yet 128 heads "
            "still score and average the whole latent: more FLOPs per byte than GQA, not fewer",
            "d": "multi-head attention is the one at 1 FLOP per byte (each cached number serves "
            "one head); MLA's 128 heads all reuse the same latent",
        },
        frozenset({"7a050aca14b1179a"}),
    ),
    "mla_tensor_parallel": (
        {
            "a": "a GQA cache splits by key/value heads, but every MLA head reads all 512 "
            "numbers of the latent: no GPU can keep only a part of it",
            "b": "every head reads the whole latent, so every GPU keeps a full copy, as with "
            "MQA's single key/value head: the cache per GPU does not shrink with more GPUs, "
            "which is why serving stacks run MLA's attention data-parallel",
            "c": "the latent is the cache; splitting it and gathering it before every step "
            "would move the whole cache between GPUs at every token, the traffic the latent "
            "was meant to save",
            "d": "tensor parallelism does run MLA: the up-projections split by heads like any "
            "other projection; the latent is what cannot be split",
        },
        frozenset({"2f97ec7a222a3fa1"}),
    ),
    "rope_scaling": (
        {
            "a": "NTK-aware scaling changes the base, not the positions; dividing the positions "
            "by s is position interpolation",
            "b": "position interpolation divides every position by s, slowing all frequencies "
            "alike (the fastest lose resolution); NTK-aware scaling raises the base to "
            "b·s^(d/(d−2)), leaving the fastest pairs almost as they were and stretching the "
            "slowest by about s (dynamic NTK puts s·L_now/L − (s − 1) in place of s, so the base "
            "grows with the text); YaRN interpolates per pair with a ramp (fast pairs untouched, "
            "slow ones interpolated) and multiplies q and k by 0.1·ln s + 1 to sharpen the softmax",
            "c": "all three change the angles of existing pairs; none adds dimensions or heads",
            "d": "YaRN scales the attention logits by a temperature as well; it is not only a "
            "different base",
        },
        frozenset({"bcdb5c473ea0c5a0"}),
    ),
    "dynamic_ntk_cache": (
        {
            "a": "the new base is a formula of the current length, known as soon as the token "
            "arrives; nothing waits for the end of the prompt",
            "b": "the rotation never touches the values; only queries and keys are rotated",
            "c": "one rotated key per position is cached whatever the base; the trouble is that "
            "its rotation is out of date, not that there are several",
            "d": "the cached keys keep the rotations of the base they were written at, while "
            "new queries use the current one, so the angles no longer follow one base; "
            "re-rotating every cached key whenever the base moves costs a pass over the cache",
        },
        frozenset({"af6c88efb0e11981"}),
    ),
    "alibi": (
        {
            "a": "ALiBi adds a bias to the scores; the queries and keys are left unrotated",
            "b": "each head adds −m·(i − j) to its scores, with no position embeddings at all; "
            "the slopes are geometric, 2^(−8(h+1)/n) for n heads, so some heads look far and "
            "some near; for n not a power of two, take the slopes of the power of two below "
            "and fill in with every other slope of twice that power",
            "c": "the slopes are fixed, not learned, and differ per head: one slope for all "
            "would give every head the same reach",
            "d": "for a head count that is not a power of two the paper (and BLOOM) takes the "
            "8 slopes of 8 heads and adds every other slope of 16 heads; 2^(−8(h+1)/12) is not "
            "what trained ALiBi models use",
        },
        frozenset({"57d506821a641267"}),
    ),
    "rmsnorm": (
        {
            "a": "RMSNorm has no shift and computes no mean of x: a scale of d_model only",
            "b": "dividing by the standard deviation after subtracting the mean is LayerNorm",
            "c": "eps goes inside the square root: x / sqrt(mean(x²) + eps)",
            "d": "RMSNorm divides by sqrt(mean(x²) + eps) and multiplies by a learned scale: no "
            "mean subtracted and no shift, one reduction fewer than LayerNorm, and in practice "
            "no loss of quality",
        },
        frozenset({"b5f1f1b17939882c"}),
    ),
    "swiglu_width": (
        {
            "a": "the gate and the up projection are two separate C × h matrices: three in all",
            "b": "SwiGLU has three matrices where a GELU MLP has two, so Llama takes h ≈ 2/3 of "
            "4C, keeping 3·C·h ≈ 8C², the old budget, and rounds h up to a multiple of 256 "
            "(or more) for the hardware: 11,008 for C = 4096",
            "c": "SiLU costs about what GELU costs: the width is about parameters, not the "
            "activation",
            "d": "it is rounded up: int(2 · 16,384 / 3) = 10,922, up to the next multiple of "
            "256, 11,008",
        },
        frozenset({"4d47f1dac14faec6"}),
    ),
    "flash_backward_d": (
        {
            "a": "dS = P ∘ (dP − D) needs Σⱼ Pᵢⱼ dPᵢⱼ for each query, which would need its whole "
            "row; since Σⱼ Pᵢⱼ (dOᵢ · vⱼ) = dOᵢ · oᵢ, it is one number per query, D = "
            "rowsum(dO ∘ O), computed once before the loop, so every tile stays independent",
            "b": "D is not a normaliser of dO; it is the softmax's correction term, Σⱼ Pᵢⱼ dPᵢⱼ",
            "c": "the forward's log-sum-exp remakes P; D is a different number, from dO and O",
            "d": "leaving D out gives wrong dQ and dK (dV does not use it); it is not an "
            "optional refinement",
        },
        frozenset({"7a1da2caefe21b45"}),
    ),
}
