"""The interviewer's spoken follow-ups, answered in words: each question, the model answer shown
in the debrief once the candidate has written theirs, and the 3–5 points an interviewer listens
for (the candidate ticks the ones they covered).

They live in the package, not in ``work/``: JupyterLab's file browser, rooted at ``work/``,
cannot open them, and the kernel shows one only after the candidate's own answer is recorded.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Written:
    question: str
    model: str
    rubric: tuple[str, ...]


WRITTEN: dict[str, Written] = {
    "why_scale": Written(
        "Why are attention scores divided by √d_k, and what goes wrong without it?",
        "q·k sums d_k products; with unit-variance entries its variance is d_k, so the logits "
        "grow with the head size. Large logits saturate the softmax into a near one-hot "
        "distribution whose gradients vanish, so training stalls. Dividing by √d_k keeps the "
        "logits' variance near 1 whatever the head size. A pretrained model learned with the "
        "scale, so leaving it out at inference changes its outputs.",
        (
            "the variance of q·k grows with d_k",
            "large logits saturate the softmax (near one-hot)",
            "saturated softmax has vanishing gradients",
            "the scale keeps the logits' spread independent of the head size",
        ),
    ),
    "why_heads": Written(
        "Why several heads rather than one attention of the same total width?",
        "One softmax gives each position one weighted average; several heads give it several, "
        "each over its own learned subspace, so one head can track the previous token while "
        "another copies from far back. Parameters and FLOPs stay the same (the width is split, "
        "not multiplied). Heads specialise, and some can be pruned afterwards.",
        (
            "one softmax = one weighted average per query",
            "each head attends in its own subspace",
            "same parameter count and FLOPs as one wide head",
            "heads specialise (e.g. previous-token or induction heads)",
        ),
    ),
    "cache_mask": Written(
        "With a KV cache, T new queries attend to S cached-plus-new keys. How must the causal "
        "mask be aligned, and why?",
        "The new queries are the last T of the S positions, so query i sits at position "
        "S − T + i and may see keys 0 … S − T + i: the mask is aligned to the bottom-right "
        "(tril with offset S − T). Top-left alignment hides cached keys the query is allowed "
        "to see, so decoding in pieces would differ from one full pass. With T = 1 the "
        "new token sees every key.",
        (
            "queries are the last T of S positions",
            "query i may see keys up to S − T + i (offset S − T)",
            "top-left alignment wrongly hides cached keys",
            "decoding in pieces must equal the full pass",
        ),
    ),
    "kv_cache_cost": Written(
        "What does a KV cache save, what does it cost, and what bounds decoding speed with it?",
        "Causal keys and values of past tokens never change, so they are stored instead of "
        "recomputed: each new token costs one row of attention instead of the whole prefix. The "
        "price is memory, 2 · layers · kv_heads · head_dim · bytes per token, growing with "
        "sequence length and batch. Decoding then reads the weights and the whole cache for "
        "every token, so it is memory-bandwidth bound, which is why GQA, MLA and quantised "
        "caches shrink it.",
        (
            "past keys/values do not change (causal), so no recompute",
            "memory grows with layers, kv heads, head_dim, length and batch",
            "decode is memory-bandwidth bound",
            "GQA/MLA/quantisation shrink the cache",
        ),
    ),
    "gqa_tradeoff": Written(
        "What does grouped-query attention trade, and how do you convert an MHA checkpoint?",
        "Several query heads share one key/value head, so the cache and the K/V projections "
        "shrink by num_heads / num_kv_heads; since decoding is bandwidth bound, that is "
        "almost directly speed and batch size. Quality sits between MHA and MQA. A checkpoint "
        "is converted by mean-pooling each group's K and V heads, then briefly up-training.",
        (
            "query heads share K/V heads in groups",
            "cache shrinks by num_heads / num_kv_heads",
            "quality between MHA and MQA",
            "convert by mean-pooling each group's heads, then up-train",
        ),
    ),
    "rope_relative": Written(
        "How does RoPE encode position, and why does it give relative positions?",
        "Each pair of query/key features is rotated by an angle proportional to the position, "
        "one frequency per pair (base^(−2i/d)). A rotation by m and one by n leave q·k "
        "depending only on m − n, so attention sees relative offsets, with no learned "
        "parameters. It is applied to queries and keys, not values, and two layouts exist "
        "(split halves and interleaved pairs): a checkpoint must be rotated in its own.",
        (
            "feature pairs rotated by position × frequency",
            "q·k depends only on the offset m − n",
            "applied to q and k, not v",
            "layout (halves vs interleaved) must match the checkpoint",
        ),
    ),
    "online_softmax": Written(
        "How does attention work over key blocks without ever holding the full score matrix?",
        "Keep for each query a running max m, a running sum l of exp(s − m) and an "
        "unnormalised output. A new block with a larger max rescales the old sum and output "
        "by exp(m_old − m_new) before adding its own; at the end divide by l. The result is "
        "exact, not an approximation, and memory is O(T) instead of O(T·S) — FlashAttention's "
        "forward pass, which keeps the logsumexp for the backward.",
        (
            "running max for numerical stability",
            "rescale old sum and output by exp(m_old − m_new)",
            "divide by the running sum at the end",
            "exact, with O(T) memory instead of O(T·S)",
        ),
    ),
    "flash_backward": Written(
        "FlashAttention's backward pass recomputes the attention weights. Why is that faster, "
        "and what must the forward pass save?",
        "The forward saves only the output and each row's logsumexp, O(T) numbers. The "
        "backward recomputes P = exp(S − lse) block by block, uses D = rowsum(dO ∘ O) for the "
        "softmax's gradient, and accumulates dQ, dK, dV per tile. It does more FLOPs but "
        "moves far fewer bytes to and from HBM than storing the T × S matrix, and memory, not "
        "arithmetic, is the bottleneck.",
        (
            "forward saves O and the logsumexp only",
            "P recomputed per tile from the logsumexp",
            "D = rowsum(dO ∘ O) for the softmax gradient",
            "more FLOPs but fewer HBM bytes: faster",
        ),
    ),
    "mla_absorb": Written(
        "Why is MLA's cache small, and what does absorbing the up-projections buy at decode?",
        "MLA caches one latent of d_latent numbers plus one shared RoPE key of d_rope per "
        "token, instead of 2 · heads · head_dim. Naively each step up-projects the whole "
        "cached latent into every head's keys and values. Absorbing W_UK into the query and "
        "W_UV into the output lets attention read the latent directly, so nothing the size of "
        "the full keys is built. RoPE is decoupled into its own key because a rotation between "
        "the query and W_UK would stop the absorption.",
        (
            "caches latent + one shared RoPE key per token",
            "naive decode up-projects the whole cache every step",
            "W_UK into the query, W_UV into the output",
            "RoPE decoupled because rotation blocks absorption",
        ),
    ),
    "pre_ln": Written(
        "Pre-LN or post-LN: where does the layer norm go in a modern block, and why?",
        "Pre-LN normalises the input of each sub-layer and adds the sub-layer's output to an "
        "untouched residual stream, so gradients flow through an identity path at any depth "
        "and training is stable without a long warm-up; a final norm is applied after the last "
        "block. Post-LN normalises after the residual add, which rescales the residual path and "
        "makes deep stacks hard to train.",
        (
            "norm applied to the sub-layer's input",
            "residual stream left as an identity path",
            "stable training without long warm-up",
            "final norm after the last block",
        ),
    ),
    "llama_parts": Written(
        "What do RMSNorm and SwiGLU change from LayerNorm and a GELU MLP, and why?",
        "RMSNorm divides by the root mean square only, with no mean subtraction and no bias: "
        "cheaper, and as good in practice. SwiGLU gates: down(silu(gate(x)) * up(x)), three "
        "matrices instead of two, with a hidden width near 8/3 · d_model to keep the parameter "
        "count; it trains better per parameter. Llama's projections have no biases.",
        (
            "RMSNorm: no mean subtraction, no bias",
            "SwiGLU: silu(gate) * up, then down",
            "hidden ~8/3 · d keeps the parameter count",
            "no biases in the projections",
        ),
    ),
    "alibi_why": Written(
        "How does ALiBi encode position, and why does it extrapolate?",
        "No position embedding: each head adds −slope · distance to its scores, with slopes a "
        "geometric sequence (2^(−8/n), 2^(−16/n), …). Far keys are penalised linearly, so "
        "longer inputs only add ever-more-penalised keys and the model behaves as in training. "
        "Heads with small slopes see far, heads with large slopes stay local.",
        (
            "bias −slope · distance added to the scores",
            "one slope per head, geometric sequence",
            "no position embedding at all",
            "extrapolates: longer inputs only add penalised keys",
        ),
    ),
    "sinks_why": Written(
        "Why does a sliding-window cache keep the first few tokens (attention sinks)?",
        "Softmax weights must sum to 1, so models learn to park spare attention on the first "
        "tokens. Evicting them with a plain window removes that outlet and the distribution "
        "shifts: perplexity blows up. Keeping n_sink initial tokens plus the recent window "
        "restores it with a cache of constant size; positions are counted inside the cache.",
        (
            "softmax must sum to 1, spare attention parks on first tokens",
            "evicting them breaks the model (perplexity blows up)",
            "keep n_sink first tokens + recent window",
            "cache size stays constant",
        ),
    ),
    "rope_scaling_why": Written(
        "How do you run a RoPE model past its trained context, and what do linear, NTK/YaRN "
        "and Llama 3 scaling each do?",
        "Positions beyond training give angles the model never saw. Linear interpolation "
        "divides positions by the factor, which also blurs the fast, local frequencies. "
        "NTK-aware scaling raises the base instead, stretching slow frequencies more than fast "
        "ones; YaRN interpolates per frequency band with a ramp and adds an attention "
        "temperature; Llama 3 leaves high frequencies, scales low ones, and blends between. "
        "A short fine-tune at the new length helps all of them.",
        (
            "unseen angles beyond the trained length",
            "linear interpolation divides positions, hurting local resolution",
            "NTK/YaRN treat frequencies differently (ramp, temperature)",
            "Llama 3 scales only low frequencies, blends between",
        ),
    ),
    "sampling_order": Written(
        "Walk through temperature, top-k and top-p sampling: what each does and in what order.",
        "Temperature divides the logits (below 1 sharpens, above 1 flattens; 0 means greedy). "
        "Top-k keeps the k largest logits. Top-p sorts by probability and keeps the smallest "
        "set whose cumulative probability reaches p, the token that crosses p included. The "
        "rest get −inf, the survivors are renormalised by the softmax, and one token is drawn. "
        "Hugging Face applies temperature, then top-k, then top-p.",
        (
            "temperature divides the logits; 0 is greedy",
            "top-k keeps the k largest",
            "top-p keeps the smallest set reaching p (crossing token included)",
            "filtered tokens get −inf, then renormalise and draw",
        ),
    ),
    "left_padding": Written(
        "Why do decoder-only models pad batched prompts on the left, and which masks and "
        "positions does that need?",
        "Generation appends at the right; with left padding every sequence's last real token "
        "is at the same index, so one new column serves the whole batch. Pad keys are masked "
        "out with the attention mask (combined with the causal mask), and position ids start "
        "at 0 at each sequence's first real token (cumsum of the mask minus 1). Pad queries "
        "see no key: their rows must not produce NaN.",
        (
            "new tokens appended at the right: last tokens aligned",
            "attention mask hides pad keys, combined with causal",
            "position ids start at the first real token",
            "fully masked pad rows handled (no NaN)",
        ),
    ),
    "dropout_where": Written(
        "Where does dropout go in an attention layer, and how does it behave at inference?",
        "On the attention weights after the softmax (and on the residual branches), with the "
        "survivors scaled by 1/(1 − p) so the expectation is unchanged; at eval time nothing "
        "is dropped and nothing rescaled. Dropping scores before the softmax would "
        "renormalise them away.",
        (
            "on the weights after softmax",
            "survivors scaled by 1/(1 − p)",
            "off in eval mode",
            "also on residual branches",
        ),
    ),
    "cross_attention": Written(
        "How does cross-attention differ from self-attention, in masks and in caching?",
        "Queries come from the decoder, keys and values from the encoder's output. There is no "
        "causal mask (the whole source is known), only a padding mask over the encoder's keys. "
        "The encoder's keys and values are computed once per sequence and reused at every "
        "decoding step.",
        (
            "queries from decoder, K/V from encoder",
            "no causal mask",
            "padding mask on encoder keys",
            "encoder K/V computed once and cached",
        ),
    ),
    "window_reach": Written(
        "What does a sliding window of W keys cost and how far can a deep model still see?",
        "Each query reads W keys, so attention costs O(T · W) instead of O(T²) and the cache "
        "holds W positions (a rolling buffer). Information still travels W positions per "
        "layer, so L layers reach about L · W tokens back (Mistral: 32 × 4096).",
        (
            "O(T · W) compute",
            "cache of W positions, a rolling buffer",
            "reach grows by W per layer: about L · W",
        ),
    ),
    "debugging": Written(
        "An attention module gives wrong outputs. How do you find the bug?",
        "Compare against a reference (F.scaled_dot_product_attention or the framework's "
        "module) on a tiny input with fixed seeds, in float64. Check shapes after every "
        "reshape or transpose, one head at a time. Test properties: changing a future token "
        "must not change earlier outputs (causality), permuting heads' weights permutes "
        "outputs. Then bisect the forward pass.",
        (
            "compare with a reference on small, seeded input",
            "check shapes after each reshape/transpose",
            "property tests (causality, per head)",
            "bisect the forward pass",
        ),
    ),
    "porting": Written(
        "How do you port a checkpoint from another codebase into your attention module?",
        "Map the state dict's keys, then each tensor's layout: GPT-2's Conv1D stores (in, "
        "out), GPT-NeoX interleaves q, k, v per head in its packed projection, some "
        "checkpoints split halves for RoPE. Then compare outputs or logits with the original "
        "implementation on the same input, layer by layer if they differ.",
        (
            "map state-dict keys",
            "fix layouts (transposed, per-head packing)",
            "compare outputs with the original",
            "bisect layer by layer",
        ),
    ),
    "paged_cache": Written(
        "What does a paged KV cache change compared with one contiguous cache per sequence, and "
        "what does it cost?",
        "A contiguous cache must reserve a sequence's maximum length before the server knows how "
        "long it will run, so most of it sits empty (vLLM's paper measured 60–80% of the cache "
        "wasted in earlier systems). A paged cache hands out fixed-size blocks from one pool as "
        "a sequence grows; a block table maps position p to block table[p // bs], slot p % bs, "
        "so only the last block is partly filled: under one block wasted per sequence. The freed "
        "memory holds more sequences, so batches and throughput grow; blocks can also be shared "
        "between sequences (a common prompt, beam search) with reference counts and "
        "copy-on-write. The cost: the attention kernel gathers keys through the table instead "
        "of reading one contiguous stretch, and the block size trades that indirection against "
        "the waste in the last block.",
        (
            "contiguous caches reserve the maximum length up front and waste most of it",
            "blocks from one pool, a block table maps positions to blocks and slots",
            "waste is under one block per sequence, so more sequences fit in a batch",
            "blocks can be shared (prefix caching) with reference counts and copy-on-write",
            "the kernel reads through the table; the block size trades indirection for waste",
        ),
    ),
    "speculative_exact": Written(
        "Why does speculative sampling give exactly the target model's distribution, and what "
        "decides how much faster it is?",
        "A draft x, proposed with probability q(x), is accepted with probability min(1, "
        "p(x)/q(x)), so it comes out with probability min(p(x), q(x)). On a rejection the token "
        "is drawn from norm(max(0, p − q)); rejections happen with probability Σ max(0, q − p) "
        "= Σ max(0, p − q), so that path adds max(0, p(x) − q(x)), and the two sum to p(x). The "
        "speed comes from verifying k drafts in one target pass (k + 1 queries over the cache, "
        "cheap while decoding is bound by memory traffic): with acceptance rate α = Σ min(p, q) "
        "a pass emits (1 − α^(k+1)) / (1 − α) tokens on average, and the draft's own cost per "
        "token limits the useful k.",
        (
            "accept with min(1, p/q): x is emitted with probability min(p, q)",
            "on rejection, sample from the residual norm(max(0, p − q))",
            "the two paths sum to p exactly, however poor the draft",
            "k drafts are verified in one pass of k + 1 queries (decoding is memory-bound)",
            "expected tokens per pass (1 − α^(k+1)) / (1 − α); the draft's cost bounds k",
        ),
    ),
}
