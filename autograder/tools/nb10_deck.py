"""The flashcard deck of notebook 10: every point of the course's two source texts on multi-head
attention, the numbers worth knowing, and the rest of an interview loop, one card each.

Shape legend: ``B`` batch, ``T`` sequence length, ``C`` = d_model, ``nh`` query heads, ``nkv``
key/value heads, ``hs`` = C // nh.

A card's back holds the answer in words and numbers, so the deck gives away graded answers of
notebooks 05 and 10: their check modules withhold ``DECK`` from a grading kernel. The schedule and
the widget that show it are in :mod:`.nb10_flashcards`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Card:
    """One question and its answer.

    ``group`` is "core ideas", "intuition" or "numbers & pitfalls"; ``revisit`` names where the
    course teaches it.
    """

    id: str
    front: str
    back: str
    group: str
    revisit: str


# The serving notebook, by its title: its number is about to change.
SERVED = "notebook “Attention as it is served”"


def _card(id: str, group: str, revisit: str, front: str, back: str) -> Card:
    return Card(id, front, back, group, revisit)


DECK: tuple[Card, ...] = (
    _card(
        "definition",
        "core ideas",
        "notebook 02 §1",
        "What is multi-head attention, in two sentences?",
        "Several attention computations run side by side on the same tokens, each with its own "
        "learned query, key and value projections. Their outputs are concatenated and mixed "
        "by one output projection.",
    ),
    _card(
        "formula",
        "core ideas",
        "notebook 02 §1",
        "Write the formula of multi-head attention.",
        "MultiHead(Q, K, V) = Concat(head_0, …, head_{nh-1}) W_O, where head_i = "
        "Attention(Q W_Q,i, K W_K,i, V W_V,i) and Attention(q, k, v) = softmax(q kᵀ / √d_k) v.",
    ),
    _card(
        "mechanics",
        "intuition",
        "notebook 02 §1–4",
        "List the steps of multi-head attention with their shapes.",
        "Project x (B, T, C) to q, k, v (B, T, C); split each into heads (B, nh, T, hs); "
        "attend in every head at once, weights (B, nh, T, T); merge back to (B, T, C); apply "
        "the output projection.",
    ),
    _card(
        "diverse",
        "core ideas",
        "notebook 02 §7",
        "What does 'diverse representations' mean for multi-head attention, and how far does "
        "the claim go?",
        "Each head has its own projections and softmax, so different heads can weight the "
        "same tokens by different criteria (position, syntax, meaning). 'Can' is the honest "
        "word: nothing forces a head to specialise, and many heads overlap.",
    ),
    _card(
        "expressive",
        "core ideas",
        "notebook 02 §7",
        "Where does the extra expressiveness of several heads come from?",
        "One softmax gives each query one weighted average of the values. With nh heads a "
        "query reads nh different mixtures, each into its own hs features, and the output "
        "projection combines them.",
    ),
    _card(
        "stability",
        "core ideas",
        "notebook 07",
        "Is 'multiple heads give redundancy and stable training' a safe claim in an interview?",
        "Be careful. What is measured is redundancy after training: many heads can be pruned "
        "with little loss (Michel et al., 2019). Lead with the several-mixtures argument and "
        "present stability as a plausible side effect, not the reason.",
    ),
    _card(
        "interpretable",
        "core ideas",
        "notebook 07",
        "Are attention heads interpretable?",
        "Some show recognisable patterns (previous token, a syntactic relation, rare words; "
        "Voita et al., 2019), many are diffuse or input-dependent. A heatmap is evidence, not "
        "an explanation: measure a head's effect, for example by ablating it.",
    ),
    _card(
        "head_count",
        "core ideas",
        "notebook 02 §6",
        "How many heads do models use, and how is the number chosen?",
        "Commonly 8, 12 or 16; GPT-3 uses 96 heads over d_model = 12,288. The count is "
        "usually picked so that the head size d_model / nh is 64 or 128.",
    ),
    _card(
        "gpt3",
        "core ideas",
        "notebook 02 §6",
        "GPT-3 175B: d_model 12,288 and 96 heads. Head size?",
        "12,288 / 96 = 128 features per head.",
    ),
    _card(
        "specialise",
        "core ideas",
        "notebook 02 §8, notebook 07",
        "Do different heads learn different things?",
        "Often, yes: heads for the neighbouring token, for syntactic dependencies, for rare "
        "words. But they are not equally important: in trained models a large share can be "
        "removed at test time with little loss.",
    ),
    _card(
        "wide_head",
        "core ideas",
        "notebook 02 §7",
        "Why not one wider head instead of several narrow ones?",
        "Same parameters at the same width (4C² + 4C either way), but one softmax per query "
        "instead of nh: one mixture of the values rather than several, so less diversity.",
    ),
    _card(
        "gqa",
        "core ideas",
        "notebook 04 §2, §5",
        "What is grouped-query attention (GQA)?",
        "Groups of query heads share one key/value head (nh query heads, nkv < nh kv heads). "
        "The KV cache and the k/v projections shrink by nh / nkv while quality stays close "
        "to MHA. Llama 2 uses it in its 34B and 70B models (64 query, 8 kv heads in 70B).",
    ),
    _card(
        "papers",
        "core ideas",
        "notebooks 02, 04, 07",
        "Name the four papers behind: MHA itself, head pruning, specialised heads, GQA.",
        "Vaswani et al. 2017 (Attention Is All You Need); Michel et al. 2019 (Are Sixteen "
        "Heads Really Better than One?); Voita et al. 2019 (Specialized Heads Do the Heavy "
        "Lifting); Ainslie et al. 2023 (GQA).",
    ),
    _card(
        "one_head_limit",
        "intuition",
        "notebook 02 §7",
        "Why is one attention head not enough?",
        "It gives each token one weighting of relevance. Language carries several relations "
        "at once (subject–verb, pronoun–referent, meaning), and one weighted average cannot "
        "follow all of them.",
    ),
    _card(
        "example",
        "intuition",
        "notebook 02 §8",
        "'The developer who wrote the buggy function fixed it quickly.' What might heads "
        "attend to, and what is the catch?",
        "One head could link 'it' to 'function', another 'fixed' to 'developer', another "
        "'quickly' to 'fixed'. The catch: these are illustrations. Real heads get no labels; "
        "what they do emerges from training and is rarely this clean.",
    ),
    _card(
        "parallel",
        "intuition",
        "notebook 05 §1–3",
        "Does multi-head attention with nh heads cost nh times one attention?",
        "No. The heads split the width: nh heads of size C / nh do the same FLOPs as one head "
        "of size C, and they run as one batched computation, unlike nh full-size passes.",
    ),
    _card(
        "model_size",
        "intuition",
        "notebook 02 §6",
        "Larger models use more heads. Does the head count set the parameter count?",
        "Not by itself: at a fixed width, the attention parameters do not depend on nh. Head "
        "count grows with width (and width drives the parameters), keeping hs near 64–128.",
    ),
    _card(
        "mistake_jobs",
        "intuition",
        "notebook 02 §8, notebook 07",
        "Common mistake: 'each head has a fixed, known job'. What is wrong with it?",
        "Nobody assigns jobs to heads. What a head does emerges from training, can overlap "
        "with other heads, can depend on the input, and has to be measured.",
    ),
    _card(
        "mistake_more",
        "intuition",
        "notebook 02 §7",
        "Common mistake: 'more heads is always better'. What is wrong with it?",
        "At fixed width more heads means smaller heads, so each query–key comparison happens "
        "in fewer dimensions. The head count is one dimension of the design, tuned with depth "
        "and width.",
    ),
    _card(
        "interview",
        "intuition",
        "notebook 10 §4",
        "Interview: why use multiple attention heads instead of one larger attention?",
        "Each head has its own projections and softmax, so every token can combine several "
        "different weightings of the other tokens in parallel (say syntax and a long-range "
        "reference) instead of one. Same parameters and FLOPs; batched, so cheap.",
    ),
    _card(
        "practice",
        "intuition",
        "notebook 05, notebook 10 §4",
        "Why is running heads in parallel more efficient than one after another?",
        "Same FLOPs either way. Heads are independent until the concatenation, so they fit in "
        "a few large batched products instead of about five small ones per head: fewer "
        "per-operation costs (Python, dispatch, kernel launches), better use of parallel "
        "hardware and of memory bandwidth.",
    ),
    _card(
        "sqrt_dk",
        "numbers & pitfalls",
        "notebook 01 §4",
        "Why divide the scores by √d_k?",
        "q·k of random unit-variance vectors has variance d_k. Unscaled, large d_k saturates "
        "the softmax towards one-hot and its gradients vanish. Dividing by √d_k keeps the "
        "variance near 1. It is about statistics, not speed.",
    ),
    _card(
        "softmax_axis",
        "numbers & pitfalls",
        "notebook 01 §3",
        "Over which axis is the attention softmax taken, and how do you test it?",
        "Over the keys, the last axis of the (T, S) scores: each query's weights sum to 1. "
        "Test that weights.sum(-1) is all ones.",
    ),
    _card(
        "mask_order",
        "numbers & pitfalls",
        "notebook 03 §1–2",
        "Where does the mask go, and what does True mean?",
        "On the scores, before the softmax: masked_fill(~mask, -inf). In this course and in "
        "F.scaled_dot_product_attention, True = may attend; nn.MultiheadAttention's masks "
        "mean the opposite. A query with no allowed key should give zeros, not NaN.",
    ),
    _card(
        "view_transpose",
        "numbers & pitfalls",
        "notebook 02 §2–3",
        "Why is x.view(B, nh, T, hs) a bug when splitting heads?",
        "view never moves data: it cuts the token-major memory into blocks of tokens, so a "
        "'head' gets some tokens with all features. Use view(B, T, nh, hs).transpose(1, 2). "
        "A round-trip test does not catch it; compare with nn.MultiheadAttention.",
    ),
    _card(
        "causal_cache",
        "numbers & pitfalls",
        "notebook 03 §2, notebook 04 §3",
        "With a KV cache, T new queries attend S ≥ T keys. Which causal mask?",
        "Bottom-right aligned: query i sits at position S − T + i and sees keys 0 … S − T + i, "
        "diagonal included: tril(diagonal=S − T). is_causal=True in SDPA aligns top-left.",
    ),
    _card(
        "repeat_kv",
        "numbers & pitfalls",
        "notebook 04 §2",
        "GQA: repeat or repeat_interleave to expand the kv heads?",
        "repeat_interleave(n_rep, dim=1): [K0, K0, K1, K1], so query head h reads kv head "
        "h // n_rep. repeat gives [K0, K1, K0, K1], which pairs heads wrongly, with no error.",
    ),
    _card(
        "params",
        "numbers & pitfalls",
        "notebook 02 §6, notebook 04 §5",
        "Parameters of MHA and of GQA at C = 4096, nh = 32, nkv = 8, no biases?",
        "MHA: 4C² = 67,108,864. GQA: 2C² + 2·C·nkv·hs = 41,943,040 (37.5% fewer). GPT-2 "
        "small's MHA without qkv biases but with an output bias: 2,360,064.",
    ),
    _card(
        "kv_bytes",
        "numbers & pitfalls",
        "notebook 04 §1",
        "KV-cache bytes per token of Llama 2 70B in fp16?",
        "2 (K and V) × 80 layers × 8 kv heads × 128 × 2 bytes = 327,680 bytes: about "
        "0.33 MB per token, 8 times less than with 64 kv heads.",
    ),
    _card(
        "flops",
        "numbers & pitfalls",
        "notebook 05 §3",
        "Matmul FLOPs of one MHA forward?",
        "8·B·T·C² (four projections) + 4·B·T²·C (q kᵀ and weights v); nh cancels. B = 2, "
        "T = 128, C = 512: 603,979,776.",
    ),
    _card(
        "matmul_count",
        "numbers & pitfalls",
        "notebook 05 §1–2",
        "How many matrix products: heads in a loop vs batched?",
        "Loop: 5·nh + 1 (three projections and two attention products per head, then the "
        "output projection). Batched: 6 with separate q, k, v projections, 4 with one packed "
        "qkv projection (nanoGPT's c_attn).",
    ),
    _card(
        "attn_memory",
        "numbers & pitfalls",
        "notebook 05 §4, notebook 06 §4",
        "Memory of the attention weights for B = 8, T = 1024, nh = 12, fp32?",
        "B·nh·T²·4 bytes = 402,653,184 ≈ 403 MB per layer; it grows with T². Fused "
        "kernels (FlashAttention) never store this matrix.",
    ),
    _card(
        "complexity",
        "numbers & pitfalls",
        "notebook 10 §5.1",
        "Cost of standard attention in T, and when does it overtake the projections?",
        "Time O(T²·C), memory O(T²) per head for the score table. Per layer (batch 1) the "
        "attention products cost 4·T²·C FLOPs, the projections 8·T·C²: equal at T = 2C.",
    ),
    _card(
        "flash_attention",
        "core ideas",
        "notebook 06 §5–6, notebook 10 §5.2",
        "FlashAttention: why exact, why fast, why does the backward recompute?",
        "Exact: an online softmax rescales earlier partial sums by exp(old max − new max). "
        "Fast: tiles stay in on-chip SRAM, so the T × T table never travels to HBM; the traffic "
        "left is Θ(T²·hs²/M) for SRAM size M, still quadratic but far smaller. Backward: one "
        "log-sum-exp per row is saved (FA-1: max and sum); the weights are remade tile by tile.",
    ),
    _card(
        "mha_gqa_mqa",
        "core ideas",
        "notebook 04, notebook 10 §5.3",
        "MHA vs GQA vs MQA, and tensor parallelism with fewer KV heads than ranks?",
        "MHA: best quality, biggest KV cache. MQA: one KV head, smallest cache, fastest "
        "decoding, some quality lost. GQA: near-MHA quality, cache nh/nkv times smaller. With "
        "fewer KV heads than ranks, each KV head is replicated on several ranks.",
    ),
    _card(
        "prefill_decode",
        "numbers & pitfalls",
        "notebook 10 §5.4",
        "Why is prefill compute-bound and decoding memory-bound?",
        "A C × C fp16 projection on T tokens does 2·T·C² FLOPs for 2·C² bytes of weights: T "
        "FLOPs per byte. Prefill (T = 2,048) is far above a GPU's ~300 FLOPs/byte; a decode step "
        "(T = 1) does 1, so it waits on memory. Batching requests raises it.",
    ),
    _card(
        "long_context",
        "intuition",
        "notebook 08 §1 and §3, notebook 10 §5.5",
        "Sliding-window attention and attention sinks in one breath?",
        "A window of W keys makes work O(T·W) and caps the cache at W; depth L reaches about "
        "L·W back. Streaming with only a window collapses once the first tokens go: models park "
        "softmax mass on them, so keep a few sink tokens plus the window (Xiao et al., 2023).",
    ),
    _card(
        "rope_cache",
        "intuition",
        "notebook 04 §8, notebook 10 §5.6",
        "Why does a RoPE model cache rotated keys, and where do the new positions come from?",
        "Each key is rotated once, at its position in the text; a query at m and a key at n "
        "score by a rotation of n − m only, so cached keys never change. Positions are an input "
        "(position_ids): the cache's length gives them only while it keeps every earlier token, "
        "not with a rolling window or sinks (StreamingLLM renumbers and re-rotates).",
    ),
    _card(
        "block_ln_dropout",
        "core ideas",
        "notebook 02 §10–11, notebook 10 §5.7",
        "Pre-LN vs post-LN, and where does dropout go?",
        "Pre-LN: x + attn(ln(x)), a clean residual path, trains deep without long warm-up; "
        "post-LN: ln(x + attn(x)), the original. Dropout: on the attention weights after the "
        "softmax and on each branch's output before the residual add; off in eval().",
    ),
    _card(
        "live_coding",
        "numbers & pitfalls",
        "notebook 10 §5.8",
        "Live coding attention: what do you say before typing, and how do you test it after?",
        "Before: the shape of every input and output, the weight layout (which rows are q, k, "
        "v; nn.Linear's (out, in)), which kv head each query head reads, the mask's alignment. "
        "After: compare with nn.MultiheadAttention on the same weights, then the edge cases: "
        "T = 1, one head, nkv = 1 and nkv = nh.",
    ),
    _card(
        "rolling_cache",
        "numbers & pitfalls",
        "notebook 08 §1–2, notebook 10 §5.9",
        "A rolling KV cache of W slots: where does position p go, and how is it rotated?",
        "Into slot p % W, overwriting the oldest. The key is rotated at its absolute position p "
        "before it is written, and the mask is built from the positions the slots hold, never "
        "from slot numbers. Mistral 7B (32 layers, 8 kv heads of 128, W = 4,096, fp16): "
        "2·32·8·128·4096·2 = 536,870,912 bytes, however long the conversation.",
    ),
    _card(
        "sink_positions",
        "intuition",
        "notebook 08 §3",
        "Attention sinks plus a window: which positions do the cached keys use?",
        "StreamingLLM keeps the first few tokens and the last W and numbers them by their place "
        "in the cache, not in the text, so the distances stay within what the model was trained "
        "on; the keys are stored unrotated (or re-rotated) for that reason.",
    ),
    _card(
        "mla",
        "core ideas",
        "notebook 08 §4, notebook 10 §5.9",
        "Multi-head latent attention: what is cached, and why can decoding skip the "
        "up-projections?",
        "One latent c per token (DeepSeek-V3: 512 numbers per layer) plus a 64-wide RoPE key "
        "shared by the heads. q·(W_UK c) = (W_UKᵀ q)·c, so W_UK folds into the query and W_UV "
        "into the output projection. RoPE would sit between them, hence the separate key. "
        "61 layers · 576 · 2 bytes = 70,272 bytes per token.",
    ),
    _card(
        "rope_scaling",
        "core ideas",
        "notebook 08 §5, notebook 10 §5.9",
        "Position interpolation, NTK-aware scaling, YaRN: what does each do to RoPE?",
        "PI: positions divided by s, every frequency slowed alike. NTK-aware: the base raised to "
        "b·s^(d/(d−2)), fast pairs kept, slow ones stretched by about s (dynamic NTK: "
        "s·L_now/L − (s − 1) in place of s, a base that cached keys do not follow). YaRN: a "
        "per-pair ramp between the two, and q and k multiplied by 0.1·ln s + 1 to sharpen the "
        "softmax.",
    ),
    _card(
        "alibi",
        "numbers & pitfalls",
        "notebook 08 §6, notebook 10 §5.9",
        "ALiBi's bias and slopes, and the trap for 12 heads?",
        "Score bias −m·(i − j) per head, no position embeddings; slopes 2^(−8(h+1)/n) for n a "
        "power of two. For 12 heads: the 8 slopes of 8 heads, then every other slope of 16 "
        "heads (2^−0.5, 2^−1.5, 2^−2.5, 2^−3.5).",
    ),
    _card(
        "llama_block",
        "core ideas",
        "notebook 02 §12, notebook 10 §5.10",
        "RMSNorm and SwiGLU: the formulas, and the width Llama picks?",
        "RMSNorm: x / sqrt(mean(x²) + eps) · w, no mean, no shift. SwiGLU: w2(SiLU(w1 x) ∘ w3 x), "
        "three bias-free matrices, so h = 2/3 · 4C rounded up to a multiple of 256 keeps 8C²: "
        "11,008 for C = 4096, and 3·4096·11008 = 135,266,304 parameters.",
    ),
    _card(
        "flash_backward_pass",
        "core ideas",
        "notebook 06 §6, notebook 10 §5.10",
        "FlashAttention-2's backward, tile by tile?",
        "D = rowsum(dO ∘ O) once; per tile P = exp(S − L) from the saved log-sum-exp, "
        "dV += Pᵀ dO, dP = dO Vᵀ, dS = P ∘ (dP − D), dQ += dS K/√hs, dK += dSᵀ Q/√hs. No T × S "
        "tensor is ever stored: recomputing P costs less than reading it from memory.",
    ),
    _card(
        "paged_cache",
        "core ideas",
        f"{SERVED} §1",
        "What is a paged KV cache, and what does it save?",
        "A pool of fixed-size blocks (vLLM: 16 positions) shared by all sequences; each sequence "
        "keeps a block table, and position p lives in block table[p // bs], slot p % bs. Only a "
        "sequence's last block is partly filled, so it wastes under one block, where a "
        "contiguous cache reserves the maximum length up front (60-80% wasted in the systems "
        "vLLM's paper measured).",
    ),
    _card(
        "block_bytes",
        "numbers & pitfalls",
        f"{SERVED} §1, notebook 10 §5.11",
        "Bytes of one 16-token block of Llama 2 7B's cache (32 layers, 32 kv heads of 128, fp16)?",
        "2 (K, V) · 32 layers · 32 · 128 · 16 · 2 bytes = 8 MiB: one table entry stands for the "
        "block in every layer (512 KiB per token).",
    ),
    _card(
        "prefix_caching",
        "core ideas",
        f"{SERVED} §2",
        "What does prefix caching share, and when is a block copied?",
        "Full blocks of a common prefix (a system prompt), found by hashing each block with its "
        "prefix, are prefilled and stored once and shared by reference count: the prefill FLOPs "
        "and the memory are saved. A write into a shared block copies that block first "
        "(copy-on-write).",
    ),
    _card(
        "cu_seqlens",
        "core ideas",
        f"{SERVED} §3",
        "What are cu_seqlens, and which mask do packed sequences need?",
        "Sequences packed into one (total_tokens, C) tensor, no padding; cu_seqlens = [0, l0, "
        "l0 + l1, …] marks where each starts (FlashAttention's varlen API). The mask is "
        "block-diagonal and causal: a query reads its own sequence's keys up to itself.",
    ),
    _card(
        "continuous_batching",
        "intuition",
        f"{SERVED} §3",
        "Continuous against static batching?",
        "Static: a batch runs until its longest reply ends, finished slots idle and pad. "
        "Continuous (Orca, vLLM): scheduling at every step, a finished request leaves and a "
        "waiting one joins at once, so the batch stays full.",
    ),
    _card(
        "chunked_prefill",
        "intuition",
        f"{SERVED} §4",
        "Chunked prefill: what happens to TTFT and TPOT?",
        "A long prompt is prefilled a chunk per step beside the decodes, each chunk attending to "
        "the cache and causally to itself (exact). No step exceeds the token budget, so the "
        "decodes' time per output token stays bounded; the long prompt's time to first token "
        "grows a little.",
    ),
    _card(
        "split_kv_merge",
        "core ideas",
        f"{SERVED} §5",
        "How are split-KV (FlashDecoding) partial results merged?",
        "Each chunk gives o_i (normalised within it) and lse_i. lse = logsumexp_i lse_i; "
        "o = Σ_i exp(lse_i − lse) · o_i. Exact for any number of chunks, an empty one "
        "(lse = −∞) weighing 0; ring attention merges across devices the same way.",
    ),
    _card(
        "speculative_rule",
        "core ideas",
        f"{SERVED} §6, notebook 10 §5.11",
        "Speculative sampling's acceptance rule?",
        "Accept draft x with probability min(1, p(x)/q(x)); at the first rejection, sample from "
        "norm(max(0, p − q)); if all k are accepted, sample a bonus token from the target's "
        "last row. The output follows p exactly; k drafts cost one target pass of k + 1 queries.",
    ),
    _card(
        "speculative_tokens",
        "numbers & pitfalls",
        f"{SERVED} §6",
        "Tokens per target pass of speculative decoding, with acceptance rate α and k drafts?",
        "(1 − α^(k+1)) / (1 − α), with α = Σ min(p, q) (Leviathan et al., 2023): 3.4 at α = 0.8, "
        "k = 4. Each extra draft adds α^k, while drafting it costs the same.",
    ),
    _card(
        "tree_attention",
        "numbers & pitfalls",
        f"{SERVED} §6",
        "The attention mask of a tree of drafts (Medusa, EAGLE)?",
        "Each node sees the cached prefix and its ancestors, itself included: never its "
        "siblings (alternatives to it). A plain causal mask over the flattened tree is the "
        "classic mistake. One pass over the tree equals running each root-to-leaf path alone.",
    ),
)

GROUPS = ("all", "core ideas", "intuition", "numbers & pitfalls")

# Every point of the course's two source texts on multi-head attention (a glossary entry, "000",
# and an explainer, "004") -> the cards that cover it; tests/test_flashcards.py checks the map.
SEED_POINTS: dict[str, tuple[str, ...]] = {
    "000 definition": ("definition",),
    "000 why: diverse representations": ("diverse",),
    "000 why: richer expressiveness": ("expressive",),
    "000 why: stable training": ("stability",),
    "000 why: interpretability": ("interpretable",),
    "000 how it works (project, attend, concatenate, project)": ("mechanics",),
    "000 formula": ("formula",),
    "000 question: how many heads": ("head_count", "gpt3"),
    "000 question: do heads learn different things": ("specialise",),
    "000 question: why not a wider single head": ("wide_head",),
    "000 question: what is GQA": ("gqa", "params", "kv_bytes"),
    "000 references": ("papers",),
    "004 summary": ("definition", "parallel"),
    "004 why one head is not enough": ("one_head_limit",),
    "004 illustrative example and its caveat": ("example",),
    "004 mechanical process": ("mechanics",),
    "004 parallel, not sequential": ("parallel", "flops", "matmul_count"),
    "004 practical use: head count and model size": ("model_size",),
    "004 mistake: fixed human-interpretable jobs": ("mistake_jobs",),
    "004 mistake: more heads is always better": ("mistake_more",),
    "004 interview relevance": ("interview",),
    "004 practice question": ("practice",),
}
