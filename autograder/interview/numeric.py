"""The interviewer's back-of-the-envelope follow-ups: a FLOP, memory or latency estimate for a
named model, typed as a number in the unit asked and graded within a tolerance (relative to the
answer), with the working shown once the candidate has answered.

Kept in the package for the reason :mod:`.written` gives.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB, MIB, KIB = 2**30, 2**20, 2**10


@dataclass(frozen=True)
class Numeric:
    question: str
    unit: str
    answer: float
    working: str
    tolerance: float = 0.10  # relative; 0 means exact

    def right(self, value: float) -> bool:
        return abs(value - self.answer) <= self.tolerance * abs(self.answer) + 1e-9


NUMERIC: dict[str, Numeric] = {
    "kv_llama2_7b": Numeric(
        "Llama-2-7B (32 layers, 32 heads of 128, no GQA) holds a 4096-token sequence in its KV "
        "cache, fp16, batch 1. How many GiB is the cache?",
        "GiB",
        2 * 32 * 32 * 128 * 4096 * 2 / GIB,
        "2 (K and V) × 32 layers × 32 heads × 128 × 4096 tokens × 2 bytes = 2 GiB.",
    ),
    "kv_llama3_8b": Numeric(
        "Llama-3-8B (32 layers, 8 KV heads of 128) at 8192 tokens, bf16, batch 1: KV cache in GiB?",
        "GiB",
        2 * 32 * 8 * 128 * 8192 * 2 / GIB,
        "2 × 32 layers × 8 KV heads × 128 × 8192 tokens × 2 bytes = 1 GiB (GQA: 4× less than "
        "32 KV heads).",
    ),
    "attn_flops_gpt2": Numeric(
        "GPT-2 small (d_model 768, 12 heads): the FLOPs of one layer's QKᵀ and weights·V for a "
        "1024-token sequence, batch 1, forward only, in GFLOP (a multiply-add is 2 FLOPs)?",
        "GFLOP",
        2 * 2 * 1024 * 1024 * 768 / 1e9,
        "QKᵀ: 2 · T² · d = 2 · 1024² · 768 ≈ 1.61 GFLOP; weights · V the same: ≈ 3.22 GFLOP.",
    ),
    "block_params_gpt2": Numeric(
        "How many parameters in one GPT-2 small block (d_model 768, MLP 3072, biases and two "
        "layer norms), in millions?",
        "million",
        (4 * (768 * 768 + 768) + 2 * 768 * 3072 + 3072 + 768 + 4 * 768) / 1e6,
        "Attention 4 · (768² + 768) = 2.36 M; MLP 2 · 768 · 3072 + 3072 + 768 = 4.72 M; norms "
        "4 · 768: 7.09 M (≈ 12 · d²).",
        tolerance=0.05,
    ),
    "decode_ms_h100": Numeric(
        "Llama-2-7B (6.74 B parameters, fp16) decodes one token at batch 1 on an H100 "
        "(3.35 TB/s of HBM bandwidth). Lower bound on the time per token, in ms?",
        "ms",
        6.74e9 * 2 / 3.35e12 * 1e3,
        "Every weight is read once per token: 13.5 GB / 3.35 TB/s ≈ 4.0 ms (bandwidth bound; "
        "the FLOPs take well under 1 ms).",
        tolerance=0.25,
    ),
    "mla_deepseek_v3": Numeric(
        "DeepSeek-V3 (61 layers, MLA with d_latent 512 and d_rope 64, bf16): cache per token, "
        "in KiB?",
        "KiB",
        61 * (512 + 64) * 2 / KIB,
        "61 layers × (512 + 64) × 2 bytes = 70,272 bytes ≈ 68.6 KiB per token (MHA with 128 "
        "heads of 128 would be ~3.8 MiB).",
    ),
    "mistral_window": Numeric(
        "Mistral-7B (32 layers, 8 KV heads of 128, sliding window 4096, rolling cache) at "
        "32,768 tokens, fp16, batch 1: KV cache in GiB?",
        "GiB",
        2 * 32 * 8 * 128 * 4096 * 2 / GIB,
        "The rolling cache holds only the window: 2 × 32 × 8 × 128 × 4096 × 2 bytes = 0.5 GiB, "
        "whatever the length.",
    ),
    "rope_wavelength": Numeric(
        "Llama-2's RoPE (base 10000, head_dim 128): the wavelength of its slowest pair, in tokens?",
        "tokens",
        2 * 3.141592653589793 * 10000 ** (126 / 128),
        "Pair i turns at base^(−2i/d); the slowest, i = 63: 2π · 10000^(126/128) ≈ 54,400 tokens.",
    ),
    "alibi_last_slope": Numeric(
        "ALiBi with 8 heads: what is the slope of the last head?",
        "",
        2**-8,
        "Slopes 2^(−8/8·h) for h = 1 … 8: the last is 2^(−8) = 0.0039.",
        tolerance=0.02,
    ),
    "score_matrix": Numeric(
        "Llama-2-7B's one layer (32 heads) at 8192 tokens, batch 1: the fp16 attention score "
        "matrices a naive implementation materialises, in GiB?",
        "GiB",
        32 * 8192 * 8192 * 2 / GIB,
        "32 heads × 8192² × 2 bytes = 4 GiB per layer: why FlashAttention never builds it.",
    ),
    "backward_p_mib": Numeric(
        "A standard attention backward for one head at T = 4096 stores the fp32 weights P. "
        "How many MiB is P?",
        "MiB",
        4096 * 4096 * 4 / MIB,
        "4096² × 4 bytes = 64 MiB; FlashAttention keeps the logsumexp instead, 4096 × 4 = 16 KiB.",
    ),
    "gqa_attn_params": Numeric(
        "Llama-3-8B's attention (d_model 4096, 32 query heads, 8 KV heads of 128, no bias): "
        "parameters per layer, in millions?",
        "million",
        (2 * 4096 * 4096 + 2 * 4096 * 1024) / 1e6,
        "W_q and W_o 4096² each; W_k and W_v 4096 × 1024 each: 41.9 M.",
        tolerance=0.05,
    ),
    "top_p_kept": Numeric(
        "Top-p with p = 0.9 over probabilities 0.5, 0.3, 0.15, 0.05: how many tokens are kept?",
        "tokens",
        3,
        "Cumulative 0.5, 0.8, 0.95: the third token crosses 0.9 and is kept: 3.",
        tolerance=0.0,
    ),
    "left_pad_position": Numeric(
        "Prompts of 3, 7 and 5 tokens, left-padded into one batch: the position id of the "
        "3-token prompt's last token?",
        "",
        2,
        "Positions start at 0 at the first real token (cumsum of the mask − 1): 0, 1, 2.",
        tolerance=0.0,
    ),
    "dropout_scale": Numeric(
        "Dropout with p = 0.1 in training: by what factor are the kept weights multiplied?",
        "",
        1 / 0.9,
        "1 / (1 − p) = 1.11, so the expectation is unchanged.",
        tolerance=0.01,
    ),
    "t5_cross_cache": Numeric(
        "T5-base's decoder (12 layers, 12 heads of 64) caches cross-attention K and V for a "
        "512-token source, fp32, batch 1. In MiB?",
        "MiB",
        2 * 12 * 12 * 64 * 512 * 4 / MIB,
        "2 × 12 layers × 12 heads × 64 × 512 × 4 bytes = 36 MiB, computed once per source.",
    ),
    "paged_blocks_fit": Numeric(
        "A server has 40 GiB of GPU memory left for the KV cache of Llama-2-7B (32 layers, 32 KV "
        "heads of 128, fp16) in blocks of 16 tokens. How many blocks fit?",
        "blocks",
        40 * GIB / (2 * 32 * 32 * 128 * 16 * 2),
        "One token: 2 × 32 × 32 × 128 × 2 bytes = 512 KiB; a block of 16: 8 MiB; 40 GiB / 8 MiB "
        "= 5,120 blocks, about 82,000 tokens shared by every running sequence.",
        tolerance=0.05,
    ),
    "speculative_tokens": Numeric(
        "Speculative decoding with k = 4 drafts per step and an acceptance rate α = 0.8 per "
        "draft: how many tokens does one target pass emit on average, the bonus or correction "
        "token included?",
        "tokens",
        (1 - 0.8**5) / (1 - 0.8),
        "(1 − α^(k+1)) / (1 − α) = (1 − 0.8⁵) / 0.2 ≈ 3.36 (Leviathan et al., 2023): one more "
        "token per pass than the accepted drafts.",
        tolerance=0.05,
    ),
}
