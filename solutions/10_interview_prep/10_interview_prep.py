# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 10 · Interview preparation
#
# **Time:** about 4 h (plus 10 min a day of flashcards) · **Prerequisites:** 01–09
#
# Interviewers ask about multi-head attention in three ways: *numbers* you should be able to work
# out on a whiteboard, *claims* you should be able to confirm or push back on, and *code* you
# should be able to read and fix. They usually end with an open question that you answer out
# loud. This notebook drills all four, then the follow-ups of a full interview loop (cost,
# kernels, serving, long context, the block) and a timed live-coding round, and gives you a
# deck of flashcards for the days before the interview.
#
# | § | what | difficulty | time | points |
# |---|---|---|---|---|
# | 1 | Numbers worth knowing: head size, parameters, memory, FLOPs, matmul counts | ●●○ | ~30 min | 10 |
# | 2 | Claims to confirm or push back on (multiple choice) | ●○○ – ●●○ | ~25 min | 12 |
# | 3 | Find and fix the bug: a ported MHA module, a packed qkv projection, a rotary layer | ●●○ | ~40 min | 10 |
# | 4 | Say it out loud: two written answers | ●●● | ~25 min | 7, by your instructor |
# | 5 | The rest of the loop: complexity, FlashAttention, GQA and sharding, serving, long context, RoPE, the block; live coding of grouped-query attention; rolling caches, MLA, RoPE scaling, ALiBi, the Llama block and FlashAttention's backward; the paged cache, prefix caching, batching, chunked prefill, split-KV and speculative decoding | ●●○ – ●●● | ~95 min | 36 |
# | 6 | Flashcards for spaced review | ●○○ | 10 min a day | — |
# | 7 | If you got it wrong: where to revisit | — | — | — |
#
# **How to work.** Treat each question like an interview: answer it first without scrolling back
# to earlier notebooks, then run the locked cell after it. A wrong answer gets a one-sentence
# diagnosis that says what to reconsider, not what the answer is. Each answer is a variable
# (`answer_...`) or a small function; replace `raise NotImplementedError()` and run the cell.
# **Run › Run All Cells** goes on past failing test cells, and past examples that need an
# exercise you have not finished yet, so the plots and sliders further down run too; a failing
# test cell still counts as failed when the notebook is graded.
# In a terminal (**File › New › Terminal**), `python -m autograder check 10` grades the whole
# notebook and lists the two written answers under "manual". Section 7 maps every question to the
# notebook and section that teaches it.
#
# ## Shape legend
#
# | symbol | meaning |
# |---|---|
# | `B` | batch size |
# | `T` | number of queries (sequence length) |
# | `S` | number of keys/values (`S = T` in self-attention, `S ≥ T` with a KV cache) |
# | `C` | model width, `d_model` |
# | `nh` | number of (query) heads |
# | `nkv` | number of key/value heads (grouped-query attention) |
# | `hs` | head size, `C // nh` |
#
# While heads attend they live in dimension 1: `(B, nh, T, hs)`.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
import math
import os
import warnings

import torch
import torch.nn.functional as F
from IPython.display import display
from torch import nn

from autograder.checks.nb10_bugs import check_packed_attention
from autograder.checks.nb10_interview import check_choice, check_number
from autograder.checks.nb10_live import check_causal_gqa_live
from autograder.checks.nb10_ported import check_fixed_mha_mask, check_fixed_mha_matches_torch
from autograder.checks.nb10_rotary import check_rope_decoding, check_rope_full_pass
from autograder.tools.live_timer import LiveTimer
from autograder.tools.nb10_flashcards import flashcard_widget

warnings.filterwarnings("ignore")
torch.manual_seed(0)
AUTOGRADING = os.environ.get("NBGRADER_EXECUTION") == "autograde"

# %% [markdown]
# ## 1 · Numbers worth knowing
#
# **Difficulty** ●●○ · **Time** ~30 min · **Points** 10
#
# Interviewers like numbers because they cannot be bluffed: either you know what the layer is
# made of, or you do not. Work each one out from the structure of the layer, on paper or in the
# answer cell (Python arithmetic is fine: `answer_x = 12 * 64`). The checks recompute every
# number with PyTorch from the same configuration, so there is nothing to look up.
#
# ### 1.1 · Head size and head count
#
# GPT-3 (175B) has `d_model = 12,288` and 96 attention heads per layer. What is its **head
# size**? Set `answer_gpt3_head_size` to a whole number.
#
# <details><summary>Hint</summary>
#
# Each head works on its own slice of the width, and the slices are equal.
# </details>

# %% nbgrader={"grade": false, "grade_id": "numbers_head_size", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_gpt3_head_size = None  # a whole number
### BEGIN SOLUTION
answer_gpt3_head_size = 12_288 // 96  # each of the 96 heads gets an equal slice of d_model
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_numbers_gpt3_head_size", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_gpt3_head_size: the head size of GPT-3 175B."""
check_number("gpt3_head_size", answer_gpt3_head_size)

# %% [markdown]
# **Question.** How do model designers usually choose the number of heads?
#
# - (a) They use 8, the original Transformer's number, at every size; larger models add layers and
#   width, not heads.
# - (b) So that the head size `d_model / nh` lands near 64 or 128: the head count grows with the
#   width.
# - (c) As many as possible: one head per feature, `nh = d_model`.
# - (d) They set it equal to the number of layers.
#
# Answer each multiple-choice question with one letter as a string, e.g. `answer_head_count = "a"`.

# %% nbgrader={"grade": false, "grade_id": "choice_head_count", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_head_count = None  # one letter: "a", "b", "c" or "d"
### BEGIN SOLUTION
answer_head_count = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_head_count", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_head_count: how the number of heads is usually chosen."""
check_choice("head_count", answer_head_count)

# %% [markdown]
# ### 1.2 · Parameter counts
#
# Count the trainable parameters of one attention layer with four projections, `q_proj`,
# `k_proj`, `v_proj` and `out_proj` (as in notebook 02), for three configurations:
#
# 1. `answer_params_gpt2_small`: GPT-2 small's size, `C = 768`, 12 heads, built as in many
#    from-scratch implementations: **no bias** on the q, k and v projections, **a bias** on the
#    output projection.
# 2. `answer_params_mha`: a Llama-style layer, `C = 4096`, 32 heads, **no biases** anywhere.
# 3. `answer_params_gqa`: the same layer with grouped-query attention, 32 query heads and **8
#    key/value heads**, no biases (notebook 04's `GroupedQueryAttention`).
#
# <details><summary>Hint 1</summary>
#
# An `nn.Linear(n_in, n_out)` has `n_in · n_out` weights, plus `n_out` biases if it has a bias.
# Ask yourself whether the number of heads appears anywhere in that count.
# </details>
#
# <details><summary>Hint 2</summary>
#
# In GQA the query and output projections keep their full width. The key and value projections
# produce only `nkv · hs` features, where `hs = C / nh` is still the head size of the query heads.
# </details>

# %% nbgrader={"grade": false, "grade_id": "numbers_params", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_params_gpt2_small = None  # whole numbers
answer_params_mha = None
answer_params_gqa = None
### BEGIN SOLUTION
answer_params_gpt2_small = 4 * 768 * 768 + 768  # four C × C weights, one bias of C
answer_params_mha = 4 * 4096 * 4096  # four C × C weights; the head count does not appear
answer_params_gqa = 2 * 4096 * 4096 + 2 * 4096 * (8 * 4096 // 32)  # q, out: C × C; k, v: C × nkv·hs
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_numbers_params_gpt2_small", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_params_gpt2_small: C = 768, 12 heads, no q/k/v bias, output bias."""
check_number("params_gpt2_small", answer_params_gpt2_small)

# %% nbgrader={"grade": true, "grade_id": "test_numbers_params_mha", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_params_mha: C = 4096, 32 heads, no biases."""
check_number("params_mha", answer_params_mha)

# %% nbgrader={"grade": true, "grade_id": "test_numbers_params_gqa", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_params_gqa: C = 4096, 32 query heads, 8 key/value heads, no biases."""
check_number("params_gqa", answer_params_gqa)

# %% [markdown]
# Worth saying in an interview: compare your two Llama-style counts. Sharing key/value heads
# removes a sizeable share of the layer's parameters, yet that is not why GQA exists. Its real
# target is the memory of the KV cache, next.
#
# ### 1.3 · Memory
#
# 1. `answer_kv_bytes_per_token`: when Llama 2 70B generates text, every layer keeps the keys and
#    values of all past tokens (the KV cache). How many **bytes** does **one token** add to the
#    cache, over all layers, in fp16? The model has 80 layers, 64 query heads, 8 key/value heads
#    and a head size of 128.
# 2. `answer_attention_matrix_bytes`: a hand-written attention layer materialises its attention
#    weights, shape `(B, nh, T, T)`. How many **bytes** do they take for `B = 8`, `T = 1024`,
#    `nh = 12` (GPT-2 small's head count) in fp32?
#
# <details><summary>Hint</summary>
#
# Write down the shape of every tensor that is stored, multiply the sizes, then multiply by the
# bytes per value (fp16: 2, fp32: 4). For the cache: which heads have keys and values of their
# own, and how many tensors does each layer keep?
# </details>

# %% nbgrader={"grade": false, "grade_id": "numbers_memory", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_kv_bytes_per_token = None  # whole numbers of bytes
answer_attention_matrix_bytes = None
### BEGIN SOLUTION
answer_kv_bytes_per_token = 2 * 80 * 8 * 128 * 2  # (K and V) × layers × kv heads × hs × fp16 bytes
answer_attention_matrix_bytes = 8 * 12 * 1024 * 1024 * 4  # B × nh × T × T × fp32 bytes
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_numbers_kv_bytes_per_token", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_kv_bytes_per_token: Llama 2 70B's fp16 KV cache, bytes per token over all layers."""
check_number("kv_bytes_per_token", answer_kv_bytes_per_token)

# %% nbgrader={"grade": true, "grade_id": "test_numbers_attention_matrix_bytes", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_attention_matrix_bytes: fp32 attention weights for B = 8, T = 1024, nh = 12."""
check_number("attention_matrix_bytes", answer_attention_matrix_bytes)

# %% [markdown]
# Put both numbers in context: the cell below scales your answers up to a 4,096-token
# conversation. The cache grows linearly with the length of the conversation (and would be
# eight times larger with one key/value head per query head); the attention weights grow with
# `T²`. That table is what FlashAttention-style kernels never store (notebook 06).

# %%
if answer_kv_bytes_per_token is None or answer_attention_matrix_bytes is None:
    print("Set both answers above first.")
else:
    print(f"KV cache of 4,096 tokens: {answer_kv_bytes_per_token * 4096 / 1e9:.2f} GB per sequence")
    print(
        f"attention weights: {answer_attention_matrix_bytes / 1e6:.0f} MB at T = 1024, "
        f"{answer_attention_matrix_bytes * 16 / 1e9:.1f} GB at T = 4096"
    )

# %% [markdown]
# ### 1.4 · Compute: FLOPs and matrix products
#
# 1. `answer_flops`: the matrix-product FLOPs (2 per multiply-add) of one multi-head
#    self-attention forward with `B = 2`, `T = 128`, `C = 512`, 8 heads: the q, k, v and output
#    projections and both attention products (`q @ kᵀ` and `weights @ v`) of every head. Ignore
#    biases, scaling and the softmax.
# 2. `answer_matmuls_loop`: at GPT-2 small's size (`C = 768`, 12 heads), a candidate computes
#    the heads **one after another**, in a Python loop: for each head, its own query, key and
#    value projections (three products with that head's slices of the weights), then `q @ kᵀ`
#    and `weights @ v`; after the loop, concatenate and apply the output projection once. How many
#    matrix products does that run?
# 3. `answer_matmuls_packed`: the same layer **batched**, as nanoGPT writes it: **one packed
#    projection** (`c_attn`, `C → 3C`) makes q, k and v at once; the heads become a batch
#    dimension; then the two attention products and the output projection. How many matrix
#    products? (A batched product over all heads counts as one.)
#
# <details><summary>Hint 1: FLOPs</summary>
#
# An `(m, k) @ (k, n)` product costs `2·m·k·n` FLOPs. A projection multiplies `(B·T, C)` by
# `(C, C)`. For each of the `B·nh` (sequence, head) pairs, `q @ kᵀ` is `(T, hs) @ (hs, T)` and
# `weights @ v` is `(T, T) @ (T, hs)`. What happens to `nh` when you add up the heads?
# </details>
#
# <details><summary>Hint 2: products</summary>
#
# Count per head first, then add what runs only once. In the batched version nothing depends on
# the number of heads.
# </details>

# %% nbgrader={"grade": false, "grade_id": "numbers_compute", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_flops = None  # whole numbers
answer_matmuls_loop = None
answer_matmuls_packed = None
### BEGIN SOLUTION
B, T, C, nh = 2, 128, 512, 8
answer_flops = 4 * 2 * B * T * C * C + nh * 2 * (2 * B * T * T * (C // nh))  # 8BTC² + 4BT²C
answer_matmuls_loop = 12 * (3 + 2) + 1  # per head: 3 projections, q @ kᵀ, weights @ v; then out
answer_matmuls_packed = 1 + 2 + 1  # packed qkv, two batched attention products, out
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_numbers_flops", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_flops: matmul FLOPs of one MHA forward, B = 2, T = 128, C = 512, 8 heads."""
check_number("flops", answer_flops)

# %% nbgrader={"grade": true, "grade_id": "test_numbers_matmuls_loop", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_matmuls_loop: matrix products of 12 heads computed one after another."""
check_number("matmuls_loop", answer_matmuls_loop)

# %% nbgrader={"grade": true, "grade_id": "test_numbers_matmuls_packed", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_matmuls_packed: matrix products of the batched version with one packed qkv projection."""
check_number("matmuls_packed", answer_matmuls_packed)

# %% [markdown]
# The two schedules do exactly the same FLOPs, packaged very differently: many small products
# in the loop, a few large ones in the batched version. (Notebook 05 counts the batched version
# with three separate q, k and v projections instead of one packed projection; compare its count
# with yours.) Keep this pair of facts in mind for the written answer in section 4.
#
# ## 2 · Claims to confirm or push back on
#
# **Difficulty** ●○○ – ●●○ · **Time** ~25 min · **Points** 12
#
# Each option below is something people really say. The wrong ones are common misconceptions,
# so when a check rejects your answer, its message explains what is wrong with the claim you
# picked. Two questions (2.2 and 2.6) are graded by measuring PyTorch's own modules rather than
# by a stored answer. Section 4 then asks for your own written answer to 2.1's question.
#
# ### 2.1 · The interview question, multiple-choice version
#
# *"Why use multiple attention heads instead of one larger attention computation?"* Which answer
# would you give?
#
# - (a) Several heads have more parameters than one head of the same width: each head brings its own
#   q, k and v matrices, so every head added gives the layer more capacity.
# - (b) Several small heads run faster than one large head: each computes a smaller score table, and
#   the GPU runs the heads side by side.
# - (c) Each head weights the tokens with its own softmax, in its own subspace, so a token gathers
#   several different mixtures at once, at the same parameters and FLOPs.
# - (d) A single head can only attend to one token at a time: its softmax concentrates the weight on
#   the best-matching key.

# %% nbgrader={"grade": false, "grade_id": "choice_why_heads", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_why_heads = None  # one letter
### BEGIN SOLUTION
answer_why_heads = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_why_heads", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_why_heads: the best short answer to 'why multiple heads?'."""
check_choice("why_heads", answer_why_heads)

# %% [markdown]
# ### 2.2 · One wide head versus many narrow ones (measured)
#
# At `C = 768`, biases included, compare multi-head attention with **one head of size 768** and
# with **12 heads of size 64**. Their parameter counts…
#
# - (a) …favour the single head: it has 12 times more parameters.
# - (b) …favour the 12 heads: they have 12 times more, since each head has its own matrices.
# - (c) …are exactly equal.
# - (d) …differ by a factor of about √12 ≈ 3.5.
#
# The check builds both with `nn.MultiheadAttention` (on the meta device, without memory) and
# counts.

# %% nbgrader={"grade": false, "grade_id": "choice_wide_head_params", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_wide_head_params = None  # one letter
### BEGIN SOLUTION
answer_wide_head_params = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_wide_head_params", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_wide_head_params: parameters of 1 head of 768 vs 12 heads of 64, measured."""
check_choice("wide_head_params", answer_wide_head_params)

# %% [markdown]
# ### 2.3 · What does a head do?
#
# A blog post takes the sentence *"The developer who wrote the buggy function fixed it
# quickly"* and labels three heads of a trained model: head 0 "coreference" (*it* → *function*),
# head 1 "who did it" (*fixed* → *developer*), head 2 "manner" (*quickly* → *fixed*). In an
# interview you are asked what you make of such labels.
#
# - (a) They are accurate: each head is assigned one relation before training, which is why the
#   head count is chosen to match the number of relation types.
# - (b) They are meaningless: all the heads of a layer learn the same pattern, because they all
#   see the same input.
# - (c) They can be read straight off the attention map: the token a head looks at most is its job,
#   which is why attention heatmaps are the standard way to explain a model.
# - (d) They show what can emerge, but real heads carry no labels: a head's role is learned, often
#   mixed, and has to be measured (e.g. by ablation), not read off one map.

# %% nbgrader={"grade": false, "grade_id": "choice_heads_jobs", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_heads_jobs = None  # one letter
### BEGIN SOLUTION
answer_heads_jobs = "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_heads_jobs", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_heads_jobs: whether heads have fixed, human-readable jobs."""
check_choice("heads_jobs", answer_heads_jobs)

# %% [markdown]
# ### 2.4 · More heads?
#
# A teammate wants to go from 16 to 64 heads **at the same `d_model`**: "more heads, more kinds
# of relationships, a better model". Your best reply:
#
# - (a) A trade-off: each head shrinks to a quarter of its size, so query–key comparisons get fewer
#   dimensions; the count is tuned with width and depth.
# - (b) Agreed: more heads is always better; only the compute budget limits it.
# - (c) Agreed, and the attention parameters grow four times, since each of the 64 heads has its own
#   query, key and value matrices, so the layer gains real capacity.
# - (d) No: the 64 heads run one after another, each with its own score table, so the layer becomes
#   four times slower at the same width.

# %% nbgrader={"grade": false, "grade_id": "choice_more_heads", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_more_heads = None  # one letter
### BEGIN SOLUTION
answer_more_heads = "a"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_more_heads", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_more_heads: whether more heads is always better."""
check_choice("more_heads", answer_more_heads)

# %% [markdown]
# ### 2.5 · Pruning heads
#
# Michel et al. (2019, *Are Sixteen Heads Really Better than One?*) removed a large share of the
# heads of trained models at test time and lost little accuracy. What is the right conclusion?
#
# - (a) Multi-head attention is unnecessary: models should be trained with a single head, since most
#   heads can be removed with little loss.
# - (b) The removed heads had learned nothing during training.
# - (c) After training many heads are redundant, so pruning can save inference compute; it says
#   little about training with fewer heads.
# - (d) Removing heads at random is a safe way to speed up any model.

# %% nbgrader={"grade": false, "grade_id": "choice_pruning", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_pruning = None  # one letter
### BEGIN SOLUTION
answer_pruning = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_pruning", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_pruning: what head-pruning results do and do not show."""
check_choice("pruning", answer_pruning)

# %% [markdown]
# ### 2.6 · Does the cost grow with the head count? (measured)
#
# At a fixed width `C`, going from **1 head** to **12 heads**, the matrix-product FLOPs of one
# forward pass…
#
# - (a) …grow 12 times: every head is another attention to compute.
# - (b) …stay exactly the same.
# - (c) …shrink 12 times, because every head is 12 times smaller.
# - (d) …change by a factor of about √12.
#
# The check counts the FLOPs of PyTorch's `nn.MultiheadAttention` with 1 and with 12 heads.

# %% nbgrader={"grade": false, "grade_id": "choice_heads_cost", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_heads_cost = None  # one letter
### BEGIN SOLUTION
answer_heads_cost = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_heads_cost", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_heads_cost: FLOPs with 1 head vs 12 heads at the same width, measured."""
check_choice("heads_cost", answer_heads_cost)

# %% [markdown]
# ### 2.7 · Why is the parallel schedule faster?
#
# The practice question, multiple-choice version: what is the main reason computing all heads
# at once is more efficient than a loop over heads?
#
# - (a) It performs fewer FLOPs: the packed q, k, v projection and the batched products share work
#   across the heads, work that a loop over heads repeats once for every head.
# - (b) All heads share one softmax over the concatenated scores, computed once instead of once per
#   head; that softmax is where most of the time goes.
# - (c) It needs fewer parameters, so less data is loaded.
# - (d) The heads are independent, so the same arithmetic runs as a few large batched products: less
#   fixed cost per operation and far better use of parallel hardware.

# %% nbgrader={"grade": false, "grade_id": "choice_parallel_why", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_parallel_why = None  # one letter
### BEGIN SOLUTION
answer_parallel_why = "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_parallel_why", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_parallel_why: why batching the heads beats a loop over heads."""
check_choice("parallel_why", answer_parallel_why)

# %% [markdown]
# ### 2.8 · Grouped-query attention
#
# Llama 2 70B uses grouped-query attention with 64 query heads and 8 key/value heads. Compared
# with multi-head attention of the same width, what is reduced?
#
# - (a) The number of query heads: 64 become 8, one for each key/value head, so the score tables,
#   the queries and the KV cache all shrink 8 times.
# - (b) The number of key/value heads: each group of 8 query heads shares one, so `k_proj`, `v_proj`
#   and the KV cache shrink 8 times.
# - (c) The head size: every head becomes 8 times narrower, so each cached key and value is 8 times
#   smaller.
# - (d) The number of past tokens kept in the cache.

# %% nbgrader={"grade": false, "grade_id": "choice_gqa", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_gqa = None  # one letter
### BEGIN SOLUTION
answer_gqa = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_gqa", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_gqa: what grouped-query attention shares."""
check_choice("gqa", answer_gqa)

# %% [markdown]
# ### 2.9 · The √d_k
#
# Why are the attention scores divided by √d_k?
#
# - (a) To make the computation faster, by keeping the numbers small.
# - (b) So that each row of attention weights sums to 1.
# - (c) To normalise the output rather than the scores: dividing by √d_k keeps the variance of every
#   output vector near 1, so the next layer's inputs do not grow with the head size.
# - (d) q·k of two vectors with unit-variance components has variance d_k; unscaled, a large d_k
#   pushes the softmax towards one-hot, where its gradients nearly vanish.

# %% nbgrader={"grade": false, "grade_id": "choice_sqrt_dk", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_sqrt_dk = None  # one letter
### BEGIN SOLUTION
answer_sqrt_dk = "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_sqrt_dk", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_sqrt_dk: what the 1/√d_k scaling is for."""
check_choice("sqrt_dk", answer_sqrt_dk)

# %% [markdown]
# ### 2.10 · Masking after the softmax
#
# A colleague takes the softmax over **all** keys, then multiplies the weights by the causal mask
# so that future keys get weight 0. Is that acceptable?
#
# - (a) Yes: the future keys end up with exactly zero weight, so nothing from the future leaks into
#   the output, and stopping that leak is all a causal mask has to achieve.
# - (b) No: the future keys still took part in the normalisation, so each row sums to less than
#   1 by an amount the future scores set, and through it they still reach the output. Fill masked
#   scores with `-inf` before the softmax.
# - (c) Yes, provided the same mask is also applied to the values, so that the future tokens add
#   nothing to the weighted sum either and no path is left from a future token to the output.
# - (d) No, because with a mask the softmax has to be taken over the query axis.

# %% nbgrader={"grade": false, "grade_id": "choice_mask_after_softmax", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_mask_after_softmax = None  # one letter
### BEGIN SOLUTION
answer_mask_after_softmax = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_mask_after_softmax", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_mask_after_softmax: whether masking after the softmax is fine."""
check_choice("mask_after_softmax", answer_mask_after_softmax)

# %% [markdown]
# ### 2.11 · A blog post to review (select all that apply)
#
# Which of these six claims would you **push back on** in an interview? Give every letter that
# applies in one string, for example `answer_pushback = "ae"`.
#
# - (a) Each head has its own learned projections, so different heads can weight the same tokens
#   differently.
# - (b) Heads often specialise in recognisable patterns, so a head's attention heatmap tells you
#   what it does.
# - (c) Multi-head attention is more powerful than single-head attention, so more heads is always
#   better.
# - (d) At a fixed width each head works in C/nh dimensions, so the head count cancels from
#   the FLOPs: adding heads does not multiply the compute, batched or computed one by one.
# - (e) In trained models, a good share of the heads can often be removed with little loss.
# - (f) A single wide head has fewer parameters than several narrow heads of the same total
#   width.

# %% nbgrader={"grade": false, "grade_id": "choice_pushback", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_pushback = None  # a string of letters
### BEGIN SOLUTION
answer_pushback = "bcf"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_pushback", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""answer_pushback: exactly the claims that deserve push-back."""
check_choice("pushback", answer_pushback)

# %% [markdown]
# ## 3 · Find and fix the bug
#
# **Difficulty** ●●○ · **Time** ~40 min · **Points** 10
#
# Live-coding rounds often hand you code that *runs* and ask what is wrong with it. Each piece of
# code below runs without an error and returns tensors of the right shape, which is exactly why
# its bugs survive. The two in 3.1 are mistakes that earlier checks name, here in code someone
# else wrote; the three in 3.2 and 3.3 appear nowhere earlier in the course. For each one:
# read it, predict what goes wrong, run the symptom cell, then write the fixed version in the
# answer cell (start by copying the buggy body). The checks compare with PyTorch, one mistake at
# a time. For the bugs of the given code they report only the symptom, which property fails on
# which input, as a failing test in a real codebase would; finding the line is your part, and
# the hints lead there. A wrong fix of a kind earlier notebooks teach is named outright.
#
# ### 3.1 · A module ported from another codebase
#
# **Time** ~15 min
#
# A colleague wrote this multi-head attention for a project that used `nn.MultiheadAttention`
# before. It has the course's interface (notebook 02): four `nn.Linear(d_model, d_model)`
# projections, `forward(query, key=None, value=None, mask=None) -> (out, weights)`, and a boolean
# mask with **True = may attend**. Two lines are wrong.


# %% nbgrader={"grade": false, "grade_id": "given_buggy_mha", "locked": true, "schema_version": 3, "solution": false, "task": false}
class BuggyMultiHeadAttention(nn.Module):
    """Meant to equal nn.MultiheadAttention (batch first); mask True = may attend. Two bugs."""

    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.scale = 1 / math.sqrt(d_model)

    def forward(self, query, key=None, value=None, mask=None):
        key = query if key is None else key
        value = query if value is None else value
        (B, T, C), S = query.shape, key.shape[1]
        nh, hs = self.num_heads, C // self.num_heads
        q = self.q_proj(query).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = self.k_proj(key).view(B, S, nh, hs).transpose(1, 2)  # (B, nh, S, hs)
        v = self.v_proj(value).view(B, S, nh, hs).transpose(1, 2)  # (B, nh, S, hs)
        scores = (
            q @ k.transpose(-2, -1) * self.scale
        )  # (B, nh, T, hs) @ (B, nh, hs, S) -> (B, nh, T, S)
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))  # (B, nh, T, S)
        weights = torch.softmax(scores, dim=-1)  # (B, nh, T, S)
        if mask is not None:
            weights = weights.masked_fill(mask, 0.0)  # rows with no allowed key: NaN -> 0
        out = (weights @ v).transpose(1, 2).reshape(B, T, C)  # (B, nh, T, hs) -> (B, T, C)
        return self.out_proj(out), weights  # (B, T, C), (B, nh, T, S)


# %%
torch.manual_seed(0)
B, T, C, nh = 2, 5, 16, 4
buggy = BuggyMultiHeadAttention(C, nh)
reference = nn.MultiheadAttention(C, nh, batch_first=True)
with torch.no_grad():  # give PyTorch's module the same weights
    reference.in_proj_weight.copy_(
        torch.cat([buggy.q_proj.weight, buggy.k_proj.weight, buggy.v_proj.weight])
    )  # (3C, C)
    reference.in_proj_bias.copy_(
        torch.cat([buggy.q_proj.bias, buggy.k_proj.bias, buggy.v_proj.bias])
    )  # (3C,)
    reference.out_proj.load_state_dict(buggy.out_proj.state_dict())
x = torch.randn(B, T, C)  # (B, T, C)
causal = torch.ones(T, T, dtype=torch.bool).tril()  # (T, S), True = may attend
with torch.no_grad():
    out, weights = buggy(x)
    expected, expected_weights = reference(x, x, x, average_attn_weights=False)
    print(
        "no mask, largest difference from nn.MultiheadAttention:",
        (out - expected).abs().max().item(),
    )
    print(
        "largest weight, yours vs PyTorch's:", weights.max().item(), expected_weights.max().item()
    )
    _, masked_weights = buggy(x, mask=causal)
    print("with a causal mask, the weights of query 1 in head 0:", masked_weights[0, 0, 1])

# %% [markdown]
# Write `MultiHeadAttention` without the bugs: the same interface, equal to
# `nn.MultiheadAttention` holding the same weights, mask True = may attend, and a query with no
# allowed key gets zero weights.
#
# <details><summary>Hint 1: where to look</summary>
#
# Compare the two largest weights printed above: which of the two softmaxes is flatter, and what
# sets how flat a softmax is? Then read query 1's masked weights: which keys does it read, and
# which should a causal query read?
# </details>
#
# <details><summary>Hint 2: the two lines</summary>
#
# Notebook 01 divided the scores by the square root of the width of the vectors being compared.
# Here those vectors are one head's queries and keys. And `nn.MultiheadAttention`'s `attn_mask`
# says which keys are *blocked*; this course's mask says which are *allowed*.
# </details>


# %% nbgrader={"grade": false, "grade_id": "fixed_mha", "locked": false, "schema_version": 3, "solution": true, "task": false}
class MultiHeadAttention(nn.Module):
    """Multi-head attention equal to nn.MultiheadAttention (batch first); mask True = may attend.

    ``forward(query (B, T, C), key=None, value=None, mask=None)`` returns
    ``(out (B, T, C), weights (B, nh, T, S))``; key and value default to query.
    """

    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        ### BEGIN SOLUTION
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.scale = 1 / math.sqrt(d_model // num_heads)  # 1/√hs: one head compares hs numbers
        ### END SOLUTION

    def forward(self, query, key=None, value=None, mask=None):
        ### BEGIN SOLUTION
        key = query if key is None else key
        value = query if value is None else value
        (B, T, C), S = query.shape, key.shape[1]
        nh, hs = self.num_heads, C // self.num_heads
        q = self.q_proj(query).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = self.k_proj(key).view(B, S, nh, hs).transpose(1, 2)  # (B, nh, S, hs)
        v = self.v_proj(value).view(B, S, nh, hs).transpose(1, 2)  # (B, nh, S, hs)
        scores = (
            q @ k.transpose(-2, -1) * self.scale
        )  # (B, nh, T, hs) @ (B, nh, hs, S) -> (B, nh, T, S)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))  # True = may attend
        weights = torch.softmax(scores, dim=-1)  # (B, nh, T, S)
        if mask is not None:
            weights = weights.masked_fill(~mask, 0.0)  # rows with no allowed key: NaN -> 0
        out = (weights @ v).transpose(1, 2).reshape(B, T, C)  # (B, nh, T, hs) -> (B, T, C)
        return self.out_proj(out), weights  # (B, T, C), (B, nh, T, S)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_fixed_mha_matches_torch", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""The fixed module equals nn.MultiheadAttention with the same weights, self- and cross-attention."""
check_fixed_mha_matches_torch(MultiHeadAttention)
### BEGIN HIDDEN TESTS
check_fixed_mha_matches_torch(MultiHeadAttention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_fixed_mha_mask", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""The fixed module reads the mask as True = may attend; rows with no allowed key give zeros."""
check_fixed_mha_mask(MultiHeadAttention)
### BEGIN HIDDEN TESTS
check_fixed_mha_mask(MultiHeadAttention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### 3.2 · A packed projection, as in nanoGPT
#
# **Time** ~12 min
#
# Many codebases make q, k and v with **one** projection `C → 3C` (nanoGPT's `c_attn`,
# `nn.MultiheadAttention`'s `in_proj_weight`). Here the packed weight stacks all the query rows,
# then all the key rows, then all the value rows: `qkv.weight` is `[W_q; W_k; W_v]`, each
# `(C, C)`, exactly `nn.MultiheadAttention`'s layout. The layer is causal self-attention
# without biases. Two lines are wrong.


# %% nbgrader={"grade": false, "grade_id": "given_buggy_packed", "locked": true, "schema_version": 3, "solution": false, "task": false}
class BuggyPackedCausalSelfAttention(nn.Module):
    """Meant to equal causal nn.MultiheadAttention(bias=False) with in_proj_weight = qkv.weight
    and out_proj.weight = proj.weight. Two bugs."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)  # [W_q; W_k; W_v], (3C, C)
        self.proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        nh, hs = self.num_heads, C // self.num_heads
        q, k, v = self.qkv(x).view(B, T, nh, 3, hs).unbind(dim=3)  # (B, T, nh, hs) each
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
        scores = q @ k.transpose(-2, -1)  # (B, nh, T, hs) @ (B, nh, hs, T) -> (B, nh, T, T)
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()  # (T, T)
        scores = scores.masked_fill(~allowed, float("-inf"))
        weights = torch.softmax(scores, dim=-1) / math.sqrt(hs)  # (B, nh, T, T)
        out = (weights @ v).transpose(1, 2).reshape(B, T, C)  # (B, nh, T, hs) -> (B, T, C)
        return self.proj(out)  # (B, T, C)


# %%
torch.manual_seed(0)
packed = BuggyPackedCausalSelfAttention(16, 4)
reference = nn.MultiheadAttention(16, 4, bias=False, batch_first=True)
with torch.no_grad():  # the same weights: in_proj_weight is [W_q; W_k; W_v] as well
    reference.in_proj_weight.copy_(packed.qkv.weight)  # (3C, C)
    reference.out_proj.weight.copy_(packed.proj.weight)  # (C, C)
    x = torch.randn(2, 5, 16)  # (B, T, C)
    blocked = ~torch.ones(5, 5, dtype=torch.bool).tril()  # nn.MultiheadAttention: True = blocked
    expected, expected_weights = reference(x, x, x, attn_mask=blocked)
    print("largest difference:", (packed(x) - expected).abs().max().item())
    B, T, C, nh, hs = 2, 5, 16, 4, 4
    q, k, v = packed.qkv(x).view(B, T, nh, 3, hs).unbind(dim=3)  # as the buggy code does
    print(
        "its queries equal x @ W_q.T:",
        torch.allclose(q.reshape(B, T, C), x @ packed.qkv.weight[:C].T),
    )

# %% [markdown]
# Write `PackedCausalSelfAttention(d_model, num_heads)` without the bugs: the same attributes
# (`num_heads`, `qkv`, `proj`), `forward(x) -> out (B, T, C)`, equal to the reference above.
#
# <details><summary>Hint 1: where to look</summary>
#
# The printed check says the queries are not `x @ W_q.T`. Write down which of the `3C` output
# features of `qkv` hold queries, and which features `.view(B, T, nh, 3, hs)` hands to head 0's
# queries. Then ask what dividing the weights (not the scores) by √hs does to each row's sum.
# </details>
#
# <details><summary>Hint 2: the two lines</summary>
#
# `self.qkv(x).split(C, dim=-1)` gives the three `C`-wide chunks in stacking order; split each
# into heads afterwards. The 1/√hs belongs on the scores, before the mask and the softmax.
# </details>
#
# **The layout the bug assumes is real.** GPT-NeoX (and Pythia, which uses its code) packs its
# `query_key_value` weight per head, `[q_0; k_0; v_0; q_1; k_1; v_1; …]`, and reads the output
# with `.view(B, T, nh, 3 * hs)`, which is exactly the line above. That code is right for NeoX's
# weights and wrong for nanoGPT's or `nn.MultiheadAttention`'s. Porting a checkpoint from one
# layout to the other is a permutation of the packed weight's rows,
# `w.view(3, nh, hs, C).transpose(0, 1).reshape(3 * C, C)` from stacked to per head, and its
# inverse the other way. Before you reuse code that unpacks a fused projection, find out which
# layout the weights were trained with.


# %% nbgrader={"grade": false, "grade_id": "fixed_packed", "locked": false, "schema_version": 3, "solution": true, "task": false}
class PackedCausalSelfAttention(nn.Module):
    """Causal self-attention with one packed projection ``qkv`` = [W_q; W_k; W_v] and ``proj``.

    ``forward(x (B, T, C))`` returns ``out (B, T, C)``.
    """

    def __init__(self, d_model, num_heads):
        super().__init__()
        ### BEGIN SOLUTION
        self.num_heads = num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)  # [W_q; W_k; W_v], (3C, C)
        self.proj = nn.Linear(d_model, d_model, bias=False)
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        B, T, C = x.shape
        nh, hs = self.num_heads, C // self.num_heads
        q, k, v = self.qkv(x).split(C, dim=-1)  # (B, T, C) each, in stacking order
        q, k, v = (t.view(B, T, nh, hs).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
        scores = q @ k.transpose(-2, -1) / math.sqrt(hs)  # (B, nh, T, T): scale the scores
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()  # (T, T)
        scores = scores.masked_fill(~allowed, float("-inf"))
        weights = torch.softmax(scores, dim=-1)  # (B, nh, T, T)
        out = (weights @ v).transpose(1, 2).reshape(B, T, C)  # (B, nh, T, hs) -> (B, T, C)
        return self.proj(out)  # (B, T, C)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_fixed_packed_matches_torch", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
"""The fixed module equals causal nn.MultiheadAttention holding the same packed weights."""
check_packed_attention(PackedCausalSelfAttention)
### BEGIN HIDDEN TESTS
check_packed_attention(PackedCausalSelfAttention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### 3.3 · A rotary layer ported from a one-head prototype
#
# **Time** ~15 min
#
# Llama-style models encode positions with **RoPE**: before the scores, each query and key is
# rotated by an angle proportional to its position (the helper `rope` below turns feature pair
# `(i, i + hs/2)` by `position · θ_i`, computing the angles in float32 as notebook 04 §8
# explains). The layer decodes with a cache of keys stored **already rotated** (section 5.6 asks
# why). `forward(x, past_kv=None, positions=None)` takes the `T` newest tokens, the cache
# `(k, v)`, each `(B, nh, P, hs)`, and optionally their positions `(T,)` (by default
# `P … P+T-1`); it returns `(out, (k, v))` with the cache extended. Its author tested it on one
# head, and cached decoding equals the full pass. One line is wrong.


# %% nbgrader={"grade": false, "grade_id": "given_buggy_rotary", "locked": true, "schema_version": 3, "solution": false, "task": false}
def rope(x, positions, base=10_000.0):
    """Rotate ``x (..., T, hs)`` at integer ``positions (T,)``: features i and i + hs/2 turn
    together by positions · base^(−2i/hs). Angles in float32, result in x's dtype."""
    half = x.shape[-1] // 2
    theta = base ** (-torch.arange(half, dtype=torch.float32, device=x.device) / half)  # (hs/2,)
    angle = positions.to(x.device).float()[:, None] * theta  # (T, hs/2)
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


class BuggyRotaryCausalAttention(nn.Module):
    """Meant to be causal RoPE attention with a cache of rotated keys. One bug."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, past_kv=None, positions=None):
        B, T, C = x.shape
        nh, hs = self.num_heads, C // self.num_heads
        if positions is None:
            P = 0 if past_kv is None else past_kv[0].shape[2]  # the cache holds every earlier token
            positions = torch.arange(P, P + T, device=x.device)  # (T,)
        q = rope(self.q_proj(x), positions).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = rope(self.k_proj(x), positions).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        v = self.v_proj(x).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        if past_kv is not None:
            k = torch.cat([past_kv[0], k], dim=2)  # (B, nh, S, hs)
            v = torch.cat([past_kv[1], v], dim=2)  # (B, nh, S, hs)
        S = k.shape[2]
        allowed = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(S - T)  # (T, S)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)  # (B, nh, T, hs)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, C)), (k, v)


# %%
torch.manual_seed(0)
x = torch.randn(1, 6, 16)  # (B, T, C)
for heads in (1, 2):
    rotary = BuggyRotaryCausalAttention(16, heads).eval()
    with torch.no_grad():
        full, _ = rotary(x)  # one pass over all six tokens
        past, steps = None, []
        for t in range(6):  # the same tokens, one at a time, with the cache
            out, past = rotary(x[:, t : t + 1], past_kv=past)
            steps.append(out)
        later, _ = rotary(x, positions=torch.arange(6) + 100)  # the same text 100 tokens later
    print(
        f"num_heads={heads}: token by token vs full pass {(torch.cat(steps, 1) - full).abs().max():.1e}, "
        f"same text 100 positions later vs here {(later - full).abs().max():.1e}"
    )

# %% [markdown]
# Write `RotaryCausalAttention(d_model, num_heads)` without the bug: the same attributes and
# interface (`positions` included), `rope` as given, the cache holding the rotated keys.
#
# <details><summary>Hint 1: where to look</summary>
#
# Cached decoding agrees with the full pass, so positions are counted consistently. But with two
# heads, moving the whole text by 100 positions changes the output, which RoPE promises never to
# do: a score may depend only on the distance between query and key. With one head nothing
# changes. What differs between one head and two, in the features that `rope` pairs up?
# </details>
#
# <details><summary>Hint 2: the line</summary>
#
# `rope` pairs feature `i` with feature `i + hs/2` of the vector it is given. Here it is given the
# whole `(B, T, C)` projection, so it pairs features `i` and `i + C/2`, which belong to different
# heads, and each head's dot product no longer sees a rotation. Split into heads first, then
# rotate `(B, nh, T, hs)`.
# </details>


# %% nbgrader={"grade": false, "grade_id": "fixed_rotary", "locked": false, "schema_version": 3, "solution": true, "task": false}
class RotaryCausalAttention(nn.Module):
    """Causal attention with RoPE and a cache of rotated keys.

    ``forward(x (B, T, C), past_kv=None, positions=None)`` returns ``(out (B, T, C), (k, v))``
    with ``k``, ``v`` of shape ``(B, nh, S, hs)``: the past positions, then the new ones; ``k``
    rotated. ``positions (T,)`` defaults to ``P … P+T-1``.
    """

    def __init__(self, d_model, num_heads):
        super().__init__()
        ### BEGIN SOLUTION
        self.num_heads = num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        ### END SOLUTION

    def forward(self, x, past_kv=None, positions=None):
        ### BEGIN SOLUTION
        B, T, C = x.shape
        nh, hs = self.num_heads, C // self.num_heads
        if positions is None:
            P = 0 if past_kv is None else past_kv[0].shape[2]  # the cache holds every earlier token
            positions = torch.arange(P, P + T, device=x.device)  # (T,)
        q = self.q_proj(x).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = self.k_proj(x).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        v = self.v_proj(x).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        q, k = rope(q, positions), rope(k, positions)  # per head: pairs (i, i + hs/2)
        if past_kv is not None:
            k = torch.cat([past_kv[0], k], dim=2)  # (B, nh, S, hs)
            v = torch.cat([past_kv[1], v], dim=2)  # (B, nh, S, hs)
        S = k.shape[2]
        allowed = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(S - T)  # (T, S)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)  # (B, nh, T, hs)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, C)), (k, v)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_fixed_rotary_full_pass", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""Without a cache: causal attention on rotated queries and keys, unchanged when every position moves."""
check_rope_full_pass(RotaryCausalAttention)
### BEGIN HIDDEN TESTS
check_rope_full_pass(RotaryCausalAttention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_fixed_rotary_decoding", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""Decoding piece by piece with the fixed module's cache equals one full pass."""
check_rope_decoding(RotaryCausalAttention)
### BEGIN HIDDEN TESTS
check_rope_decoding(RotaryCausalAttention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# What the five bugs have in common: none raises an error, and none changes the shape of an
# output. The packed split even reads the right number of features for every head, only the
# wrong ones; the rotary layer is right with one head, which is all its author tried, and its
# cached decoding agrees with its full pass. Only a comparison with a trusted reference
# (PyTorch), or a property test (moving the whole text changes nothing under RoPE), exposes them.
# In an interview, name the test that would have caught the bug, not only the fix.
#
# ## 4 · Say it out loud
#
# **Difficulty** ●●● · **Time** ~25 min · **Points** 7, graded by your instructor
#
# Write the answers you would give out loud: full sentences, no bullet lists, no code. Use the
# numbers you worked out above. Double-click a cell to edit it.
#
# ### 4.1 · The interview question (3 points)
#
# *"Why use multiple attention heads instead of one larger attention computation?"*
#
# Aim for 4–7 sentences. A strong answer says what several heads can do that one head cannot,
# what it costs, and where the idea has limits.

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_why_multiple_heads", "locked": false, "points": 3, "schema_version": 3, "solution": true, "task": false}
# ### BEGIN SOLUTION
# **Model answer.** A single attention head gives every token one softmax over the other tokens,
# so what the token reads is one weighted average of their values. Language often needs several
# things at once: in "the developer who wrote the function fixed it", *fixed* needs its subject
# while *it* needs its referent, and one average serves both badly. Multi-head attention splits
# the width into nh subspaces, each with its own query, key and value projections and its own
# softmax, so every token gathers nh differently weighted mixtures side by side, and the output
# projection combines them. At a fixed width this costs nothing extra: the projections are
# C × C either way, so the parameters (4C² + 4C) and the FLOPs equal those of one wide head,
# and all heads run as one batched computation. It is a trade-off rather than a free lunch:
# each head compares queries and keys in fewer dimensions, so the head count is tuned with width
# and depth; and what each head ends up doing is learned, not assigned, with many heads of
# trained models turning out to be redundant.
#
# **Rubric (3 points, one per line; half points allowed).**
#
# 1. *The mechanism:* several independent attention distributions per token (own projections and
#    softmax per head) against a single weighted average for one head, ideally with an example of
#    two relations needed at the same time.
# 2. *The cost:* the same parameters and FLOPs as one head of the full width, with the heads
#    computed together (batched), not one after another.
# 3. *The limits:* the head count trades head size for head count and is tuned, not maximised;
#    specialisation emerges from training, is not assigned and not always clean (redundant,
#    prunable heads).
#
# No credit for a line built on a false claim: "more heads means more parameters" (line 2),
# "each head has a fixed job such as syntax" stated as fact (line 3), or "one head can attend to
# only one token" (line 1).
# ### END SOLUTION

# %% [markdown]
# ### 4.2 · The practice question (4 points)
#
# *"Explain in your own words why running attention heads in parallel is more efficient than
# running them one after another."*
#
# Aim for 5–9 sentences. Use your answers from section 1.4: what stays the same, what changes,
# why the change is allowed, and how much it buys on which hardware.

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_parallel_heads", "locked": false, "points": 4, "schema_version": 3, "solution": true, "task": false}
# ### BEGIN SOLUTION
# **Model answer.** Both schedules perform the same arithmetic: 8·B·T·C² + 4·B·T²·C FLOPs
# whatever the number of heads, 603,979,776 for B = 2, T = 128, C = 512, because splitting the
# width into heads only re-slices the same products. The difference is packaging. A loop
# over 12 heads issues 61 matrix products, each small and skinny, plus the softmax and other
# element-wise steps once per head; the batched version issues 4 with a packed qkv projection
# (6 with separate ones), however many heads there are. Every operation pays a fixed cost
# before doing any arithmetic, such as Python, PyTorch's dispatcher, memory allocation and, on a
# GPU, a kernel launch, so the loop pays it about five times per head. Batching is allowed
# because the heads do not depend on one another until the concatenation: each reads the input
# and its own slice of the weights, so all of them can be handed to the hardware as one batched
# product. Larger products also keep many cores busy and reuse data better: the loop re-reads
# the input for every head and launches products too small to fill a GPU. How much this buys
# depends on the hardware: on a laptop CPU the gain is large for small tensors, where overhead
# dominates, and small for large ones; on a GPU batching, and fused kernels on top of it, are
# far faster.
#
# **Rubric (4 points, one per line; half points allowed).**
#
# 1. *Same work:* equal FLOPs for both schedules (a formula or a number), and nh heads of width
#    C / nh do not cost nh full-size attentions.
# 2. *Fewer, larger operations:* about 5 products per head plus one (61 at 12 heads) against a
#    constant handful (4 or 6), and why that matters: a fixed cost per operation (Python,
#    dispatch, kernel launch).
# 3. *Independence:* no head needs another's result before the concatenation, which is what
#    allows one batched computation spread over the hardware.
# 4. *Hardware, honestly:* better utilisation (filling many cores, data reuse) and a realistic
#    sense of the size of the gain (large on a GPU or for small tensors, modest on a few CPU
#    cores for large tensors).
#
# No credit for a line whose claim is wrong: "the parallel version does fewer FLOPs" or "needs
# fewer parameters" (line 1); "12 heads in parallel are 12 times faster" without qualification
# (line 4).
# ### END SOLUTION

# %% [markdown]
# ## 5 · The rest of the loop
#
# **Difficulty** ●●○ – ●●● · **Time** ~80 min · **Points** 27
#
# Interviews for roles that train or serve models do not stop at "why several heads?". The
# follow-ups go to cost, kernels, serving and the rest of the block, and most end with a
# live-coding round; sections 5.9 and 5.10 then go past GQA, to the caches, positions and block
# parts of recent models, and to FlashAttention's backward pass. Each question below is one of those follow-ups; answer it as you would out
# loud, then check. Numbers are recomputed by PyTorch's FLOP counter, exactly as in section 1.
#
# ### 5.1 · What does attention cost?
#
# One self-attention layer of width `C` on `T` tokens (batch 1). Which pair is right for the
# attention part alone (scores, softmax, weighted sum), computed the standard way?
#
# - (a) Time O(T·C), memory O(T·C): attention is linear in the sequence length, like the
#   projections.
# - (b) Time O(T·log T·C), memory O(T·log T).
# - (c) Time O(T²·C), memory O(T²) per head for the score table.
# - (d) Time O(T·C²), memory O(T²) per head: the C² comes from the weight matrices.

# %% nbgrader={"grade": false, "grade_id": "choice_complexity", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_complexity = None  # one letter
### BEGIN SOLUTION
answer_complexity = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_complexity", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_complexity: time and memory of standard attention."""
check_choice("complexity", answer_complexity)

# %% [markdown]
# The quadratic term is not the whole cost. Per layer and with batch 1, the four projections
# cost `8·T·C²` FLOPs and the two attention products (`q @ kᵀ` and `weights @ v`, all heads
# together) `4·T²·C`. For short sequences the projections dominate; past some length the
# attention products take over. At `C = 5120` (Llama 2 13B's width), **at which `T` are the two
# equal?** Set `answer_crossover_seq_len` to a whole number.
#
# <details><summary>Hint</summary>
#
# Set the two expressions equal and cancel what they share. The answer is a small multiple of
# `C`, so it grows with the width: wide models stay projection-bound for longer.
# </details>

# %% nbgrader={"grade": false, "grade_id": "numbers_crossover", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_crossover_seq_len = None  # a whole number of tokens
### BEGIN SOLUTION
answer_crossover_seq_len = 2 * 5120  # 4·T²·C = 8·T·C²  ->  T = 2C
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_numbers_crossover_seq_len", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_crossover_seq_len: the T at which 4·T²·C equals 8·T·C², at C = 5120."""
check_number("crossover_seq_len", answer_crossover_seq_len)

# %% [markdown]
# ### 5.2 · FlashAttention, three follow-ups
#
# Notebook 06 built the tiled online softmax. An interviewer will ask three things about it.
#
# **(i) Why is the result exact, not an approximation?**
#
# - (a) Running row maxima and sums are updated block by block, and the partial output is rescaled
#   by exp(old max − new max) when the maximum grows: the same softmax, reordered.
# - (b) It keeps only the largest scores of every row and drops the rest: the softmax gives small
#   scores almost no weight, so the output agrees with standard attention to within fp16 rounding.
# - (c) It computes in fp32 throughout, which removes the rounding error of the softmax.
# - (d) It is exact only when the block size divides the sequence length.

# %% nbgrader={"grade": false, "grade_id": "choice_flash_exact", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_flash_exact = None  # one letter
### BEGIN SOLUTION
answer_flash_exact = "a"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_flash_exact", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_flash_exact: why the tiled softmax gives the exact result."""
check_choice("flash_exact", answer_flash_exact)

# %% [markdown]
# **(ii) Why is it faster, if it does the same FLOPs?** ("IO-aware")
#
# - (a) It does fewer FLOPs, because blocks of zeros are skipped.
# - (b) Attention is compute-bound, and FlashAttention's fused kernel runs the scores, the softmax
#   and the weighted sum on the tensor cores' faster matrix instructions, which separate PyTorch
#   kernels cannot use.
# - (c) It moves q, k and v into HBM, which is faster than SRAM.
# - (d) The `T × T` scores and weights never go to the GPU's slow HBM: tiles of q, k, v stay in
#   on-chip SRAM, and the traffic left is Θ(T²·hs²/M) per head for an SRAM of M numbers.

# %% nbgrader={"grade": false, "grade_id": "choice_flash_io", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_flash_io = None  # one letter
### BEGIN SOLUTION
answer_flash_io = "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_flash_io", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_flash_io: where FlashAttention's speed comes from."""
check_choice("flash_io", answer_flash_io)

# %% [markdown]
# **(iii) Why does its backward pass recompute the attention weights?**
#
# Some background first. Training needs the gradient of the loss with respect to q, k and v, and
# the chain rule through `out = P @ v` and `P = softmax(S)` uses the weights `P` themselves: with
# `g` the gradient of `out`, `dv = Pᵀ @ g`, and the gradient of the scores is
# `P ⊙ (g @ vᵀ − rowsum(g ⊙ out))`. Standard attention keeps `P`, a `T × S` table per head, from
# the forward pass for this.
#
# - (a) It does not need them: the gradients of attention depend only on q, k and v.
# - (b) The forward saves one log-sum-exp per query row; the backward remakes the weights block by
#   block from q, k and it, paying extra FLOPs to never store `T × S`.
# - (c) Storing the `T × S` weights would cost no extra memory, since the forward pass already holds
#   them; recomputing is chosen only because it is faster on every GPU.
# - (d) Because fp16 rounding makes stored weights too inaccurate for gradients, while weights
#   recomputed in fp32 from q and k are exact.

# %% nbgrader={"grade": false, "grade_id": "choice_flash_backward", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_flash_backward = None  # one letter
### BEGIN SOLUTION
answer_flash_backward = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_flash_backward", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_flash_backward: why the backward pass recomputes the weights."""
check_choice("flash_backward", answer_flash_backward)

# %% [markdown]
# ### 5.3 · MHA, GQA, MQA, and sharding them
#
# Which comparison would you defend?
#
# - (a) MQA is the most accurate of the three, because its one shared key/value head is trained by
#   the gradients of every query head, so it sees the most training signal.
# - (b) They differ in FLOPs: MQA computes attention for one head, GQA for nkv heads and MHA for all
#   nh, which is where MQA's faster decoding comes from.
# - (c) MHA: best quality, largest KV cache. MQA: smallest cache, fastest decoding, some quality
#   loss. GQA: near MHA's quality with a cache nh/nkv times smaller.
# - (d) Fewer key/value heads make decoding slower, because each one is shared by more queries.

# %% nbgrader={"grade": false, "grade_id": "choice_gqa_tradeoff", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_gqa_tradeoff = None  # one letter
### BEGIN SOLUTION
answer_gqa_tradeoff = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_gqa_tradeoff", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_gqa_tradeoff: quality, speed and memory of MHA, GQA and MQA."""
check_choice("gqa_tradeoff", answer_gqa_tradeoff)

# %% [markdown]
# Tensor parallelism splits a layer's heads across GPUs ("ranks"): with 64 query heads on 8
# ranks, each rank computes 8 query heads. A model with **8 key/value heads** is served on
# **16 ranks**. What happens to the key/value heads?
#
# - (a) Each key/value head is replicated, here on 2 ranks, next to the query heads that read it;
#   the per-rank KV cache stops shrinking at one head.
# - (b) Each key/value head is split in half along its `hs` features, one half per rank, so the KV
#   cache per rank keeps shrinking as ranks are added.
# - (c) The ranks split the cached positions instead: each keeps half of the past tokens.
# - (d) It cannot be served: the number of ranks must divide the number of key/value heads, so 16
#   ranks need at least 16 key/value heads.

# %% nbgrader={"grade": false, "grade_id": "choice_tp_kv_heads", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_tp_kv_heads = None  # one letter
### BEGIN SOLUTION
answer_tp_kv_heads = "a"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_tp_kv_heads", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_tp_kv_heads: tensor parallelism with fewer key/value heads than ranks."""
check_choice("tp_kv_heads", answer_tp_kv_heads)

# %% [markdown]
# ### 5.4 · Serving: prefill and decode
#
# A request is served in two phases. **Prefill** runs the whole prompt through the model at
# once; **decode** then makes one token per step, reusing the KV cache. A GPU of the H100 class
# does roughly 1,000 TFLOP/s of fp16 matrix arithmetic but reads only about 3.3 TB/s from its
# memory: it needs about 300 FLOPs per byte read to keep its arithmetic busy. Below that
# *arithmetic intensity* a computation is **memory-bound**, above it **compute-bound**.
#
# Take one `C × C` projection in fp16, `C = 5120`, and count only the bytes of its weights (read
# once per step; activations are small next to them). The FLOPs of `T` tokens are `2·T·C²`.
#
# 1. `answer_prefill_intensity`: FLOPs per weight byte when prefilling a 2,048-token prompt.
# 2. `answer_decode_intensity`: FLOPs per weight byte of one decoding step (one new token,
#    batch 1).
#
# Compare both with 300: this is why prefill is compute-bound and decoding memory-bound, why
# servers batch many requests' decode steps together, and why a smaller KV cache (GQA) speeds
# decoding up.

# %% nbgrader={"grade": false, "grade_id": "numbers_intensity", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_prefill_intensity = None  # FLOPs per byte
answer_decode_intensity = None
### BEGIN SOLUTION
answer_prefill_intensity = 2 * 2048 * 5120**2 / (2 * 5120**2)  # 2·T·C² FLOPs / 2·C² bytes = T
answer_decode_intensity = 2 * 1 * 5120**2 / (2 * 5120**2)  # one token: 1 FLOP per byte
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_numbers_prefill_intensity", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_prefill_intensity: FLOPs per fp16 weight byte, 2,048 tokens, C = 5120."""
check_number("prefill_intensity", answer_prefill_intensity)

# %% nbgrader={"grade": true, "grade_id": "test_numbers_decode_intensity", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_decode_intensity: FLOPs per fp16 weight byte, one token, C = 5120."""
check_number("decode_intensity", answer_decode_intensity)

# %% [markdown]
# ### 5.5 · Long context
#
# **Sliding-window attention** (Mistral 7B v0.1 used a window of 4,096; later versions dropped
# it): each query reads only the `W` most recent keys. What does that buy, and what does it cost?
#
# - (a) Attention becomes free: no keys are read beyond the window.
# - (b) Work O(T·W) instead of O(T²) and a KV cache capped at `W`; older tokens still reach a query
#   through the layers below, up to about `L·W` back.
# - (c) The tokens outside the window are compressed into one summary key.
# - (d) The model can never use information from more than `W` tokens back, whatever its depth:
#   every layer sees the same `W` keys, so stacking layers cannot widen the window.

# %% nbgrader={"grade": false, "grade_id": "choice_sliding_window", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_sliding_window = None  # one letter
### BEGIN SOLUTION
answer_sliding_window = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_sliding_window", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_sliding_window: what a sliding window buys and costs."""
check_choice("sliding_window", answer_sliding_window)

# %% [markdown]
# **Attention sinks** (Xiao et al., 2023, *StreamingLLM*). A chatbot streams text far past its
# training length and keeps only a window of recent keys in its cache. Quality collapses as
# soon as the very first tokens leave the cache. Why, and what is the fix?
#
# - (a) The first tokens hold the system prompt, whose instructions the model needs at every step;
#   any text would do as long as it is the system prompt, so keep that prompt in the cache.
# - (b) The evicted tokens' keys and values must be recomputed from the text at every step, which a
#   streaming cache cannot afford; the fix is a larger window.
# - (c) Nothing can be done; a window of recent tokens is already the best possible cache.
# - (d) Trained models park much of the softmax's weight on the first few tokens, whatever they say;
#   keep those few "sink" tokens in the cache next to the recent window.
#
# (Notebook 07 found first-token heads in a model trained here.)

# %% nbgrader={"grade": false, "grade_id": "choice_attention_sinks", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_attention_sinks = None  # one letter
### BEGIN SOLUTION
answer_attention_sinks = "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_attention_sinks", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_attention_sinks: why streaming keeps the first tokens."""
check_choice("attention_sinks", answer_attention_sinks)

# %% [markdown]
# ### 5.6 · RoPE and the cache
#
# A rotary layer that decodes with a KV cache stores its keys **after** rotation. Why is that
# right?
#
# - (a) It is a shortcut; the correct method re-rotates every cached key at each step, since the
#   query's position has moved on.
# - (b) Because the values are rotated along with the keys, and caching both already rotated saves
#   redoing both rotations at every decoding step.
# - (c) Each key is rotated once, at its position in the text; the score of query m and key n
#   depends only on n − m, as two rotations compose, so a cached key never changes.
# - (d) Because RoPE acts on the scores, adding a position term to each query–key score, and a
#   cached key enters every later score unchanged, so rotating it early is equivalent.
#
# (Caches that renumber positions, as StreamingLLM does inside its window of sinks and recent
# tokens, are the exception: they store keys unrotated, or re-rotate them when they evict; see
# notebook 04 §8.)

# %% nbgrader={"grade": false, "grade_id": "choice_rope_cache", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_rope_cache = None  # one letter
### BEGIN SOLUTION
answer_rope_cache = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_rope_cache", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_rope_cache: why the cache stores rotated keys."""
check_choice("rope_cache", answer_rope_cache)

# %% [markdown]
# ### 5.7 · The block around attention
#
# **Pre-LN or post-LN?** (Notebook 02 §11 built a pre-LN block.)
#
# - (a) Pre-LN, `x + attn(ln(x))`, keeps the residual path a clean sum, so deep stacks train without
#   a long warm-up; post-LN, `ln(x + attn(x))`, needs one.
# - (b) Post-LN, because it has fewer parameters: pre-LN needs an extra layer norm in front of every
#   sub-layer, which is why modern models moved back to post-LN.
# - (c) Pre-LN is the original Transformer's design (Vaswani et al., 2017); GPT-2 moved to post-LN
#   to train deeper stacks.
# - (d) Pre-LN normalises the residual stream after every addition.

# %% nbgrader={"grade": false, "grade_id": "choice_pre_ln", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_pre_ln = None  # one letter
### BEGIN SOLUTION
answer_pre_ln = "a"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_pre_ln", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_pre_ln: what separates pre-LN from post-LN."""
check_choice("pre_ln", answer_pre_ln)

# %% [markdown]
# **Where does dropout go** in a transformer block?
#
# - (a) On the residual stream itself, after each addition.
# - (b) On the scores, before the softmax, so that dropped keys get no weight at all.
# - (c) Everywhere, including at inference: keeping dropout on while generating makes the model's
#   outputs more robust and varied, as Monte Carlo dropout does.
# - (d) On the attention weights after the softmax and on each residual branch before it is added
#   back; scaled by 1/(1 − p) while training, off at inference.

# %% nbgrader={"grade": false, "grade_id": "choice_dropout_where", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_dropout_where = None  # one letter
### BEGIN SOLUTION
answer_dropout_where = "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_dropout_where", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_dropout_where: where dropout sits in a block."""
check_choice("dropout_where", answer_dropout_where)

# %% [markdown]
# ### 5.8 · Live coding: causal grouped-query attention from a blank cell
#
# **Time** box: 20 minutes · **Points** 3 (the time is shown, not graded)
#
# The last round: an empty editor and "write causal attention for a Llama-style layer". Close
# the earlier notebooks and section 3, run the timer cell, write the function and run its test
# cell. The clock under the timer cell shows the time as it runs and stops by itself when the
# test cell first passes.
#
# `causal_gqa_live(x, w_q, w_kv, w_out, num_heads, num_kv_heads)`: `x` is `(B, T, C)`; `w_q` is
# `(C, C)`; `w_kv` is `(2·nkv·hs, C)`, the key rows of all `nkv` key/value heads followed by
# their value rows (`[W_k; W_v]`, keys = `x @ W_k.T`); `w_out` is `(C, C)`, laid out like an
# `nn.Linear` weight; no biases. Query heads `0 … n_rep−1` share key/value head 0, the next
# `n_rep` share head 1, and so on (`n_rep = nh / nkv`). Return the `(B, T, C)` output of causal
# grouped-query self-attention. Plain tensor operations or `F.scaled_dot_product_attention` are
# both fine; say out loud what each line's shape is as you write it, and which of the inputs the
# test may vary (MQA with `nkv = 1`, MHA with `nkv = nh`).

# %%
live_timer = LiveTimer("check_causal_gqa_live", box_minutes=20)
display(live_timer.start())  # the clock, live; the test cell's first pass stops it


# %% nbgrader={"grade": false, "grade_id": "live_causal_gqa", "locked": false, "schema_version": 3, "solution": true, "task": false}
def causal_gqa_live(x, w_q, w_kv, w_out, num_heads, num_kv_heads):
    """Causal grouped-query self-attention: x (B, T, C), w_q (C, C), w_kv (2·nkv·hs, C),
    w_out (C, C) -> (B, T, C)."""
    ### BEGIN SOLUTION
    B, T, C = x.shape
    hs, n_rep = C // num_heads, num_heads // num_kv_heads
    q = (x @ w_q.T).view(B, T, num_heads, hs).transpose(1, 2)  # (B, nh, T, hs)
    k, v = (x @ w_kv.T).split(num_kv_heads * hs, dim=-1)  # (B, T, nkv·hs) each: keys first
    k, v = (t.view(B, T, num_kv_heads, hs).transpose(1, 2) for t in (k, v))  # (B, nkv, T, hs)
    k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)  # (B, nh, T, hs)
    scores = q @ k.transpose(-2, -1) / math.sqrt(hs)  # (B, nh, T, hs) @ (B, nh, hs, T)
    allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()  # (T, T)
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)  # (B, nh, T, T)
    out = (weights @ v).transpose(1, 2).reshape(B, T, C)  # (B, nh, T, hs) -> (B, T, C)
    return out @ w_out.T  # (B, T, C)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_live_causal_gqa_matches_torch", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
"""causal_gqa_live equals causal nn.MultiheadAttention holding the kv weights repeated per group."""
check_causal_gqa_live(causal_gqa_live)
### BEGIN HIDDEN TESTS
check_causal_gqa_live(causal_gqa_live, seed=1, thorough=True)
### END HIDDEN TESTS

# %%
print(live_timer.text() if "live_timer" in globals() else "Run the timer cell before you start.")

# %% [markdown]
# ### 5.9 · Beyond GQA: the cache and positions at long context
#
# Notebook 08 built the caches and position schemes of 2024–2026 models. The follow-ups an
# interviewer asks about them:
#
# **A rolling cache.** Mistral 7B (v0.1) has 32 layers, 8 key/value heads of size 128, an fp16
# cache and a sliding window of `W = 4,096`, kept in a ring buffer of `W` slots. How many bytes
# does its cache hold, batch 1, after a conversation of 32,768 tokens?

# %% nbgrader={"grade": false, "grade_id": "numbers_window_cache_bytes", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_window_cache_bytes = None  # a whole number
### BEGIN SOLUTION
answer_window_cache_bytes = 2 * 32 * 8 * 128 * 4096 * 2  # K and V, L, nkv, hs, W slots, fp16
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_numbers_window_cache_bytes", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_window_cache_bytes: the rolling cache's bytes."""
check_number("window_cache_bytes", answer_window_cache_bytes)

# %% [markdown]
# **Reading the ring.** That rolling cache writes position `p` into slot `p % W`. Which is right?
#
# - (a) Rotate each key by its slot, `p % W`: the slot is the key's position inside the window.
# - (b) Cache the keys unrotated, and at each step rotate every cached key at the new token's
#   position `p`, as the query is.
# - (c) Rotate each key at its absolute position `p` before writing it to slot `p % W`, and build
#   the mask from the positions the slots hold; overwriting the oldest slot touches nothing else.
# - (d) Once the ring is full, allocate a larger one: a new key needs a free slot.

# %% nbgrader={"grade": false, "grade_id": "choice_ring_buffer", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_ring_buffer = None  # one letter
### BEGIN SOLUTION
answer_ring_buffer = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_ring_buffer", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_ring_buffer: how a ring buffer keeps positions straight."""
check_choice("ring_buffer", answer_ring_buffer)

# %% [markdown]
# **Multi-head latent attention** (DeepSeek-V2/V3) caches one latent `c` per token, 512 numbers
# per layer, from which every head's keys and values are up-projected (`W_UK c`, `W_UV c`).
# At inference, which is right?
#
# - (a) Every step must up-project all cached latents to full keys and values first, so MLA
#   saves memory at the price of much more compute per step.
# - (b) The saving comes from using fewer query heads than multi-head attention.
# - (c) `q·(W_UK c) = (W_UKᵀ q)·c`, so `W_UK` folds into the query side and `W_UV` into the output
#   projection, and decoding attends to the cached latent itself. A position-dependent rotation
#   would sit between `q` and `W_UK` and block that fold, so RoPE goes on a small separate key,
#   shared by the heads and cached next to the latent.
# - (d) MLA drops RoPE: the latent carries no position, and needs none.

# %% nbgrader={"grade": false, "grade_id": "choice_mla_absorb", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_mla_absorb = None  # one letter
### BEGIN SOLUTION
answer_mla_absorb = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_mla_absorb", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_mla_absorb: how MLA decodes from its latent."""
check_choice("mla_absorb", answer_mla_absorb)

# %% [markdown]
# **What the latent saves.** DeepSeek-V3 has 61 layers and 128 heads; per layer, its cache holds
# a latent of 512 numbers and a decoupled RoPE key of 64, in bf16. How many bytes of cache does one
# token take, over all layers? (Multi-head attention with the same 128 heads, keys and values
# 128 wide, the baseline of DeepSeek-V2's paper, would take about 4 MB.)

# %% nbgrader={"grade": false, "grade_id": "numbers_mla_bytes_per_token", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_mla_bytes_per_token = None  # a whole number
### BEGIN SOLUTION
answer_mla_bytes_per_token = 61 * (512 + 64) * 2  # layers, latent + RoPE key, bf16
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_numbers_mla_bytes_per_token", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_mla_bytes_per_token: MLA's cache bytes per token."""
check_number("mla_bytes_per_token", answer_mla_bytes_per_token)

# %% [markdown]
# **What decoding from the latent costs.** At one decoding step, for each cached position and
# layer, DeepSeek-V3's absorbed attention reads the 576 cached bf16 numbers (1,152 bytes); each of
# its 128 heads scores its query against all 576 and averages 512 of them into its output. Which
# is right?
#
# - (a) About 242 FLOPs per byte read, near the roughly 300 an H100 needs to stay busy: MLA
#   decoding is close to compute-bound, and its many heads cost little extra time.
# - (b) Decoding reads every cached number once and uses it once, so MLA, like all attention at
#   decode time, does about 1 FLOP per byte and waits on memory whatever its head count.
# - (c) Absorbing `W_UK` and `W_UV` removes the arithmetic of the up-projections, so MLA does fewer
#   FLOPs per cached byte than GQA does, and decodes even more memory-bound than GQA.
# - (d) The latent is smaller than GQA's keys and values, so MLA reads fewer bytes per step, but
#   its FLOPs per byte stay those of multi-head attention: 1.

# %% nbgrader={"grade": false, "grade_id": "choice_mla_intensity", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_mla_intensity = None  # one letter
### BEGIN SOLUTION
answer_mla_intensity = "a"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_mla_intensity", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_mla_intensity: FLOPs per byte of MLA's absorbed decoding."""
check_choice("mla_intensity", answer_mla_intensity)

# %% [markdown]
# **MLA across GPUs.** DeepSeek-V3's attention is split by heads over 8 GPUs, 16 heads each, the
# tensor parallelism that divides a GQA cache by key/value heads. What happens to each GPU's latent
# cache?
#
# - (a) It shrinks 8 times, as a GQA cache does: each GPU keeps the latent dimensions its own 16
#   heads read.
# - (b) Every head reads the whole latent, so every GPU keeps all of it, as with MQA's single
#   key/value head: the cache per GPU does not shrink.
# - (c) The latent is cut into 8 slices of 64 numbers, one per GPU, and the GPUs gather the slices
#   before each attention step, so the cache per GPU is 8 times smaller at the price of one
#   all-gather per layer.
# - (d) Nothing: tensor parallelism cannot run MLA at all, because its up-projections cannot be
#   split by heads.

# %% nbgrader={"grade": false, "grade_id": "choice_mla_tensor_parallel", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_mla_tensor_parallel = None  # one letter
### BEGIN SOLUTION
answer_mla_tensor_parallel = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_mla_tensor_parallel", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_mla_tensor_parallel: MLA's latent cache under tensor parallelism."""
check_choice("mla_tensor_parallel", answer_mla_tensor_parallel)

# %% [markdown]
# **Stretching RoPE.** A model trained on 4,096 tokens is run on 16,384 (`s = 4`). Which
# describes the three common fixes?
#
# - (a) NTK-aware scaling divides every position by `s`.
# - (b) Position interpolation divides every position by `s`, slowing all frequencies alike (the
#   fastest lose resolution); NTK-aware scaling raises the base to `b·s^(d/(d−2))`, leaving the
#   fastest pairs almost as they were and stretching the slowest by about `s`; YaRN interpolates
#   per pair with a ramp and multiplies `q` and `k` by `0.1·ln s + 1` to sharpen the softmax.
#   (Dynamic NTK puts `s·L_now/L − (s − 1)` in place of `s`, for the current length `L_now`.)
# - (c) All three add frequency pairs, so that the longer positions get angles of their own.
# - (d) YaRN is NTK-aware scaling with a larger base, nothing more.

# %% nbgrader={"grade": false, "grade_id": "choice_rope_scaling", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_rope_scaling = None  # one letter
### BEGIN SOLUTION
answer_rope_scaling = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_rope_scaling", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_rope_scaling: what each RoPE scaling does to the frequencies."""
check_choice("rope_scaling", answer_rope_scaling)

# %% [markdown]
# **Dynamic NTK and the cache.** Dynamic NTK scaling recomputes RoPE's base from the current
# length once the text grows past the trained one. Why does it sit badly with a KV cache?
#
# - (a) Its base depends on the length of the text, which is not known until the prompt has been
#   read to its very end, so no key can be rotated or cached until the whole prompt has arrived.
# - (b) The base changes the values too, so every cached value must be recomputed at each step.
# - (c) Each cached key has to be stored once for every base it has been rotated at, so the cache
#   grows with each change of base as well as with each token.
# - (d) Cached keys keep the rotations of the base they were written at while new queries use the
#   current base; re-rotating them all whenever the base moves costs a pass over the cache.

# %% nbgrader={"grade": false, "grade_id": "choice_dynamic_ntk_cache", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_dynamic_ntk_cache = None  # one letter
### BEGIN SOLUTION
answer_dynamic_ntk_cache = "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_dynamic_ntk_cache", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_dynamic_ntk_cache: why a base that moves sits badly with cached keys."""
check_choice("dynamic_ntk_cache", answer_dynamic_ntk_cache)

# %% [markdown]
# **ALiBi** (Press et al., 2022; BLOOM, MPT). Which is right?
#
# - (a) ALiBi rotates each head's queries and keys by a head-specific angle.
# - (b) Each head adds `−m·(i − j)` to its scores and the model has no position embeddings; the
#   slopes are geometric, `2^(−8(h+1)/n)` for `n` heads, so some heads look far and some near; for
#   `n` not a power of two, take the slopes of the power of two below and fill in with every other
#   slope of twice that power.
# - (c) All heads share one slope, learned in training.
# - (d) For 12 heads, the slopes are `2^(−8(h+1)/12)` for `h = 0…11`.

# %% nbgrader={"grade": false, "grade_id": "choice_alibi", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_alibi = None  # one letter
### BEGIN SOLUTION
answer_alibi = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_alibi", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_alibi: how ALiBi encodes positions."""
check_choice("alibi", answer_alibi)

# %% [markdown]
# ### 5.10 · The Llama block and FlashAttention's backward pass
#
# **RMSNorm or LayerNorm?** (Notebook 02 §12 built it.)
#
# - (a) RMSNorm has a scale and a shift, like LayerNorm; only its mean is cheaper to compute.
# - (b) RMSNorm subtracts the mean and divides by the standard deviation.
# - (c) RMSNorm computes `x / (sqrt(mean(x²)) + eps)`.
# - (d) RMSNorm divides by `sqrt(mean(x²) + eps)` and multiplies by a learned scale: no mean
#   subtracted, no shift, one reduction fewer, and in practice no loss of quality.

# %% nbgrader={"grade": false, "grade_id": "choice_rmsnorm", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_rmsnorm = None  # one letter
### BEGIN SOLUTION
answer_rmsnorm = "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_rmsnorm", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_rmsnorm: what RMSNorm keeps of LayerNorm."""
check_choice("rmsnorm", answer_rmsnorm)

# %% [markdown]
# **SwiGLU's width.** Llama 2 7B has `C = 4096` and an MLP width of 11,008, not `4C = 16,384`.
# Why?
#
# - (a) SwiGLU shares one matrix between the gate and the up projection, so it can afford less
#   width.
# - (b) SwiGLU has three matrices where the GELU MLP has two, so Llama takes `h ≈ 2/3 · 4C` to keep
#   `3·C·h ≈ 8C²`, and rounds `h` up to a multiple of 256.
# - (c) SiLU is more expensive than GELU, so the width is cut to compensate.
# - (d) 11,008 is `2/3 · 4C` rounded down to a multiple of 256.

# %% nbgrader={"grade": false, "grade_id": "choice_swiglu_width", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_swiglu_width = None  # one letter
### BEGIN SOLUTION
answer_swiglu_width = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_swiglu_width", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_swiglu_width: why Llama's MLP is 11,008 wide."""
check_choice("swiglu_width", answer_swiglu_width)

# %% [markdown]
# **Counting it.** How many parameters does one SwiGLU MLP of Llama 2 7B hold (`C = 4096`,
# `h = 11,008`, no biases)?

# %% nbgrader={"grade": false, "grade_id": "numbers_swiglu_params", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_swiglu_params = None  # a whole number
### BEGIN SOLUTION
answer_swiglu_params = 3 * 4096 * 11008  # w1, w3: C × h; w2: h × C
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_numbers_swiglu_params", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_swiglu_params: the SwiGLU MLP's parameters."""
check_number("swiglu_params", answer_swiglu_params)

# %% [markdown]
# **FlashAttention's backward** (notebook 06 §6) computes `D = rowsum(dO ∘ O)` before its loop.
# What is it for?
#
# - (a) `dS = P ∘ (dP − D)` needs `Σⱼ Pᵢⱼ dPᵢⱼ` for every query, which would need its whole row;
#   since that sum equals `dOᵢ · oᵢ`, it is one number per query, computed once before the loop,
#   and every tile stays independent.
# - (b) It normalises `dO` so that the gradients have unit scale.
# - (c) It is the log-sum-exp `L` of the forward under another name.
# - (d) It is an optional refinement: leaving it out changes the gradients only slightly.

# %% nbgrader={"grade": false, "grade_id": "choice_flash_backward_d", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_flash_backward_d = None  # one letter
### BEGIN SOLUTION
answer_flash_backward_d = "a"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_flash_backward_d", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_flash_backward_d: what D is for in FlashAttention's backward."""
check_choice("flash_backward_d", answer_flash_backward_d)

# %% [markdown]
# ### 5.11 · Attention as it is served
#
# The notebook *Attention as it is served* built what an inference server does around the
# attention kernel: the paged KV cache, prefix caching, packed sequences, continuous batching,
# chunked prefill, split-KV decoding and speculative decoding. The follow-ups an interviewer
# asks about them:
#
# **A block of the paged cache.** vLLM keeps the cache in blocks of 16 positions; one entry of a
# sequence's block table stands for the same block in every layer. For Llama 2 7B (32 layers,
# 32 key/value heads of size 128, fp16 cache), how many bytes does one block take, keys and
# values of all layers together?

# %% nbgrader={"grade": false, "grade_id": "numbers_block_bytes", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_block_bytes = None  # a whole number
### BEGIN SOLUTION
answer_block_bytes = 2 * 32 * 32 * 128 * 16 * 2  # K and V, L, nkv, hs, 16 positions, fp16
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_numbers_block_bytes", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_block_bytes: one 16-token block of Llama 2 7B's cache, over all layers."""
check_number("block_bytes", answer_block_bytes)

# %% [markdown]
# **The block size.** Why does vLLM default to blocks of 16 positions, rather than 1 or 512?
#
# - (a) A block must hold as many positions as the head has features, so that one block is one
#   square tile of the attention kernel.
# - (b) Small blocks would waste memory, since each block keeps its own copy of the prompt that
#   the sequence started from.
# - (c) Only a sequence's last block is partly filled, so the waste stays under one block per
#   sequence; smaller blocks mean longer tables and scattered reads.
# - (d) Blocks of 512 would bring back the waste of a contiguous cache: every sequence would
#   again reserve its maximum length up front, however short it stays, as before paging.

# %% nbgrader={"grade": false, "grade_id": "choice_paged_block_size", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_paged_block_size = None  # one letter
### BEGIN SOLUTION
answer_paged_block_size = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_paged_block_size", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_paged_block_size: what the block size trades."""
check_choice("paged_block_size", answer_paged_block_size)

# %% [markdown]
# **Prefix caching.** 100 chats share one 2,000-token system prompt, served with prefix caching
# (vLLM's automatic prefix caching, SGLang's radix tree). What is saved?
#
# - (a) Nothing on the prefill: a token's keys and values depend on the other requests in its
#   batch, so each chat must prefill the shared prompt again.
# - (b) The prompt's full blocks are prefilled and stored once, shared by reference count: their
#   FLOPs and memory for 99 of the 100 chats.
# - (c) The chats' queries skip the system prompt's keys altogether, since every chat sees the
#   same ones, so each attention step reads 2,000 fewer keys.
# - (d) Little: once the chats diverge, copy-on-write gives each of them its own copy of the
#   whole shared prefix, so the memory saving lasts only until their first tokens.

# %% nbgrader={"grade": false, "grade_id": "choice_prefix_caching", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_prefix_caching = None  # one letter
### BEGIN SOLUTION
answer_prefix_caching = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_prefix_caching", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_prefix_caching: what sharing a prompt's blocks saves."""
check_choice("prefix_caching", answer_prefix_caching)

# %% [markdown]
# **Continuous batching.** Why does continuous batching (Orca's iteration-level scheduling,
# vLLM) serve more tokens per second than static batching?
#
# - (a) It schedules at every step: a finished request leaves at once and a waiting one takes
#   its slot, with no padding.
# - (b) It concatenates the batch's prompts into one sequence, so that attention runs once for
#   every request under one plain causal mask over the whole concatenation.
# - (c) It gives every request its own CUDA stream and kernel launches, so that no request ever
#   waits for another one to finish its step.
# - (d) Requests in the same step share their attention scores, which lowers the FLOPs that each
#   generated token costs.

# %% nbgrader={"grade": false, "grade_id": "choice_continuous_batching", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_continuous_batching = None  # one letter
### BEGIN SOLUTION
answer_continuous_batching = "a"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_continuous_batching", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_continuous_batching: where its throughput comes from."""
check_choice("continuous_batching", answer_continuous_batching)

# %% [markdown]
# **Packed sequences.** Three sequences of lengths 3, 5 and 2 are packed into one `(10, C)`
# tensor with `cu_seqlens = [0, 3, 8, 10]`, as FlashAttention's varlen functions take them.
# Which mask gives each sequence what it would get alone?
#
# - (a) The 10 × 10 causal mask: each token reads everything packed before it, and nothing
#   after it, which is what a causal language model needs.
# - (b) A padding mask that blocks the last 2 positions, since 10 is not a multiple of the
#   longest sequence's length.
# - (c) A block-diagonal mask without causality: packing separates the sequences, and the
#   position ids restart at 0 in each, which keeps every token from reading its future.
# - (d) Block-diagonal and causal: a query reads the keys from its sequence's start up to
#   itself.

# %% nbgrader={"grade": false, "grade_id": "choice_varlen_mask", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_varlen_mask = None  # one letter
### BEGIN SOLUTION
answer_varlen_mask = "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_varlen_mask", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_varlen_mask: the mask of packed sequences."""
check_choice("varlen_mask", answer_varlen_mask)

# %% [markdown]
# **Chunked prefill, by the numbers.** A server's steps hold at most 512 tokens (its token
# budget). 32 requests are decoding, one token each per step, and are scheduled first; the rest
# of each step's budget goes to prefilling a new 8,000-token prompt in chunks. How many steps
# does its prefill take?

# %% nbgrader={"grade": false, "grade_id": "numbers_chunked_prefill_steps", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_chunked_prefill_steps = None  # a whole number
### BEGIN SOLUTION
answer_chunked_prefill_steps = math.ceil(8000 / (512 - 32))  # 480 prompt tokens per step
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_numbers_chunked_prefill_steps", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_chunked_prefill_steps: the steps of a chunked prefill beside 32 decodes."""
check_number("chunked_prefill_steps", answer_chunked_prefill_steps)

# %% [markdown]
# **Chunked prefill, TTFT and TPOT.** A 16,000-token prompt arrives while 50 requests are
# decoding. With chunked prefill (Sarathi-Serve, vLLM) it is prefilled 512 tokens per step
# beside the decodes, instead of in one step. What changes?
#
# - (a) Both get faster: the prompt's time to first token (TTFT) and the decodes' time per
#   output token (TPOT) go down, since the same work is spread more evenly over the steps.
# - (b) The decodes' TPOT stays bounded, as no step carries 16,000 tokens; the prompt's TTFT
#   grows.
# - (c) The decodes stall until the prompt's last chunk is done, because the queries of a chunk
#   must see every key of the prompt before any other request may run.
# - (d) The prompt's output changes slightly, because each chunk's queries attend only to the
#   tokens of their own chunk instead of the whole prompt.

# %% nbgrader={"grade": false, "grade_id": "choice_chunked_prefill", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_chunked_prefill = None  # one letter
### BEGIN SOLUTION
answer_chunked_prefill = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_chunked_prefill", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_chunked_prefill: what chunking a long prefill does to TTFT and TPOT."""
check_choice("chunked_prefill", answer_chunked_prefill)

# %% [markdown]
# **Split-KV decoding.** FlashDecoding splits one query's 64k-token cache into 8 chunks, each
# attended on its own: chunk `i` returns its output `o_i`, normalised within the chunk, and its
# log-sum-exp `lse_i`. How are they merged into the exact result?
#
# - (a) Average the eight `o_i`, since each chunk holds the same number of keys and so carries
#   the same share of the softmax's weight.
# - (b) Keep the `o_i` of the chunk with the largest `lse_i`: that chunk holds the largest
#   scores, and the softmax puts nearly all its weight there.
# - (c) `lse = logsumexp_i(lse_i)`, then `o = Σ_i exp(lse_i − lse) · o_i`.
# - (d) Add the eight `o_i`, then divide the sum by the sum of the `lse_i`, the chunks'
#   denominators, so that the merged weights sum to 1 again.

# %% nbgrader={"grade": false, "grade_id": "choice_split_kv_merge", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_split_kv_merge = None  # one letter
### BEGIN SOLUTION
answer_split_kv_merge = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_split_kv_merge", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_split_kv_merge: merging split-KV partial results by their log-sum-exp."""
check_choice("split_kv_merge", answer_split_kv_merge)

# %% [markdown]
# **Speculative sampling.** A draft model proposed token `x` with probability `q(x) = 0.6`; the
# target model gives it `p(x) = 0.3`. What does the verification do?
#
# - (a) Accept `x` with probability `p(x) = 0.3`, and otherwise sample a replacement from `p`:
#   the target's distribution alone decides.
# - (b) Reject `x` outright, since the target likes it less than the draft did, then sample the
#   replacement token from the target's `p`.
# - (c) Accept `x` with probability `min(1, q(x) / p(x))`, so always here: the draft was sampled
#   from a distribution that already follows the target's closely.
# - (d) Accept with probability `min(1, p(x) / q(x)) = 0.5`; on rejection, sample from
#   `norm(max(0, p − q))`.

# %% nbgrader={"grade": false, "grade_id": "choice_speculative_rule", "locked": false, "schema_version": 3, "solution": true, "task": false}
answer_speculative_rule = None  # one letter
### BEGIN SOLUTION
answer_speculative_rule = "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_choice_speculative_rule", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""answer_speculative_rule: the acceptance rule of speculative sampling."""
check_choice("speculative_rule", answer_speculative_rule)

# %% [markdown]
# ## 6 · Flashcards for spaced review
#
# **Difficulty** ●○○ · **Time** 10 minutes a day, ungraded
#
# Reading answers once does not make them available under interview stress; retrieving them
# again and again, spaced out over days, does. The deck below covers everything in this
# notebook, plus the definitions you should be able to recite. Read the question, answer it in
# your head (or out loud), press **Show answer**, then grade yourself:
#
# - **again**: you did not know it; the card comes back a few cards later;
# - **hard**: you got there with effort; it stays in its box and comes back tomorrow at the
#   earliest;
# - **good**: it moves up one box; **easy**: two boxes.
#
# A card in box 0–5 comes back after 0, 1, 2, 4, 8 or 16 days (a Leitner schedule). Progress is
# saved in `flashcards_progress.json` next to this notebook whenever you grade a card, so the
# schedule survives a restart; delete the file to start over. **Review all now** ignores the
# schedule, for a last pass before the interview. The widget needs no internet connection.
# (`autograder.tools.nb10_flashcards.deck_markdown()` returns the whole deck as text, to print.)

# %%
if AUTOGRADING:
    print("Flashcards are skipped while grading.")
else:
    display(flashcard_widget("flashcards_progress.json"))

# %% [markdown]
# ## 7 · If you got it wrong: where to revisit
#
# `python -m autograder check 10` lists every test cell. For each one that failed, this table
# names the notebook and section that teach it.
#
# | test cell(s) | revisit |
# |---|---|
# | `test_numbers_gpt3_head_size`, `test_choice_head_count` | notebook 02 §6 (how many heads real models use) |
# | `test_numbers_params_gpt2_small`, `test_numbers_params_mha`, `test_choice_wide_head_params` | notebook 02 §6–7 (counting parameters; why not one wide head) |
# | `test_numbers_params_gqa`, `test_choice_gqa` | notebook 04 §2 and §5 (sharing key/value heads; what sharing saves) |
# | `test_numbers_kv_bytes_per_token` | notebook 04 §1 (what generation keeps in memory) |
# | `test_numbers_attention_matrix_bytes` | notebook 05 §4(c) and notebook 06 §4 (the trouble with the `(T, S)` table) |
# | `test_numbers_flops`, `test_choice_heads_cost` | notebook 05 §3 (counting FLOPs) |
# | `test_numbers_matmuls_loop`, `test_numbers_matmuls_packed`, `test_choice_parallel_why`, `written_parallel_heads` | notebook 05 §1, §2 and §4 (two schedules; counting operations; why fewer, larger operations win) |
# | `test_choice_why_heads`, `test_choice_more_heads`, `written_why_multiple_heads` | notebook 02 §7 (why not one wide head) |
# | `test_choice_heads_jobs`, `test_choice_pruning`, `test_choice_pushback` | notebook 02 §8 (what heads learn) and notebook 07 (measuring heads: entropy, ablation, pruning) |
# | `test_choice_sqrt_dk` | notebook 01 §4 (why divide by √d_k, measured) |
# | `test_choice_mask_after_softmax` | notebook 03 §1–2 (masks as permissions; the causal mask) |
# | `test_fixed_mha_matches_torch` | notebook 01 §4 (why divide by √d_k) and notebook 02 §4–5 (the module; equality with `nn.MultiheadAttention`) |
# | `test_fixed_mha_mask` | notebook 02 §5 and notebook 03 §6 (`nn.MultiheadAttention` reads masks the other way round) |
# | `test_fixed_packed_matches_torch` | notebook 02 §2–5 (the head layout; equality with `nn.MultiheadAttention`, whose `in_proj_weight` stacks q, k, v), notebook 01 §4 (the scale belongs on the scores) and section 3.2 here (GPT-NeoX's per-head layout) |
# | `test_live_causal_gqa_matches_torch` | notebook 04 §2–3 (which query heads share a kv head; `repeat_interleave`; the GQA module) and notebook 02 §2–5 (the head layout; the output projection) |
# | `test_fixed_rotary_full_pass`, `test_fixed_rotary_decoding` | notebook 04 §8 (RoPE pairs features within one head; the relative property; the cache of rotated keys) and notebook 04 §3–4 (the bottom-right mask; decoding with the cache) |
# | `test_choice_complexity`, `test_numbers_crossover_seq_len` | notebook 05 §3 (counting FLOPs) and notebook 06 (the `(T, S)` table) |
# | `test_choice_flash_exact`, `test_choice_flash_io` | notebook 06 (SDPA's fused kernels; the tiled online softmax) |
# | `test_choice_flash_backward`, `test_choice_flash_backward_d` | notebook 06 §6 (the backward pass, tile by tile: the saved log-sum-exp, D, recomputing P) |
# | `test_choice_tp_kv_heads` | section 5.3 here, whose options and check notes teach it (no earlier notebook covers tensor parallelism) |
# | `test_choice_gqa_tradeoff` | notebook 04 §2–7 (MHA and MQA as the two ends; memory accounting) |
# | `test_numbers_prefill_intensity`, `test_numbers_decode_intensity` | section 5.4 here (arithmetic intensity is taught there) and notebook 04 §1 and §6 (what decoding reads; decoding measured) |
# | `test_choice_sliding_window`, `test_choice_attention_sinks` | notebook 08 §1 and §3 (sliding-window attention; attention sinks), notebook 03 (masks decide what a query reads) and notebook 07 §1–4 (first-token heads) |
# | `test_choice_rope_cache` | notebook 04 §8 (RoPE and the KV cache; positions as an input) and notebook 08 §2 (positions stay absolute in a rolling cache) |
# | `test_numbers_window_cache_bytes`, `test_choice_ring_buffer` | notebook 08 §1–2 (sliding-window attention; decoding with a rolling KV cache), notebook 08 §7 (cache bytes per token, a window's included) and notebook 04 §1 (what generation keeps in memory) |
# | `test_choice_mla_absorb`, `test_numbers_mla_bytes_per_token` | notebook 08 §4 (multi-head latent attention: absorbing the up-projections; DeepSeek-V3's cache per token) and §7 (cache bytes per token) |
# | `test_choice_mla_intensity`, `test_choice_mla_tensor_parallel` | notebook 08 §4 (what decoding reads and what it computes; the latent under tensor parallelism) and section 5.4 here (arithmetic intensity) |
# | `test_choice_rope_scaling`, `test_choice_dynamic_ntk_cache` | notebook 08 §5 (long-context RoPE: interpolation, NTK and YaRN; a base that moves and the cache) |
# | `test_choice_alibi` | notebook 08 §6 (ALiBi: a bias instead of a rotation) |
# | `test_choice_rmsnorm`, `test_choice_swiglu_width`, `test_numbers_swiglu_params` | notebook 02 §12 (the Llama-style block: RMSNorm and SwiGLU, the width and the count) |
# | `test_choice_pre_ln`, `test_choice_dropout_where` | notebook 02 §10–11 (attention dropout; a pre-LN block) |
# | `test_numbers_block_bytes`, `test_choice_paged_block_size` | *Attention as it is served* §1 (the paged KV cache; what contiguous preallocation wastes) and notebook 04 §1 (what generation keeps in memory) |
# | `test_choice_prefix_caching` | *Attention as it is served* §2 (prefix caching: shared blocks, reference counts, copy-on-write) |
# | `test_choice_continuous_batching`, `test_choice_varlen_mask` | *Attention as it is served* §3 (packed sequences and `cu_seqlens`; continuous against static batching) and notebook 03 (masks) |
# | `test_numbers_chunked_prefill_steps`, `test_choice_chunked_prefill` | *Attention as it is served* §4 (chunked prefill; TTFT and TPOT) |
# | `test_choice_split_kv_merge` | *Attention as it is served* §5 (split-KV decoding, merged by log-sum-exp) and notebook 06 (the online softmax) |
# | `test_choice_speculative_rule` | *Attention as it is served* §6 (speculative decoding's verification; the rejection-sampling rule) |
#
# ## Summary
#
# - **Numbers:** the head size is `d_model / nh`; the attention parameters do not depend on the
#   head count; GQA shrinks only `k_proj`, `v_proj` and the KV cache; the attention weights hold
#   `B·nh·T²` values; the FLOPs do not depend on the schedule, the number of products does.
# - **Claims:** several heads give several softmax weightings per token at the same cost; head
#   roles emerge from training and must be measured; more heads is a trade-off; the √d_k keeps
#   the softmax out of saturation; masks go on the scores, before the softmax.
# - **Bugs:** scaling by √C instead of √hs, a mask read with the opposite convention, a packed
#   qkv output read as if each head's q, k and v sat side by side (GPT-NeoX's layout, on weights
#   that are not NeoX's), the scale applied to the weights after the softmax, and RoPE applied
#   before the head split, which pairs features of different heads. None raises an error;
#   references and property tests find them.
# - **Out loud:** lead with the mechanism, back it with a number, end with the limits.
# - **The loop:** attention is O(T²·C) in time and O(T²) per head in memory, and overtakes the
#   projections at T = 2C; FlashAttention is exact (rescaled online softmax), fast because it
#   spares HBM, and recomputes in the backward from row statistics; GQA trades a little quality
#   for a much smaller cache, and its KV heads are replicated when ranks outnumber them;
#   prefill is compute-bound and decoding memory-bound; windows bound the cache and sinks keep
#   streaming stable; cached keys are rotated once at their positions in the text; pre-LN keeps
#   the residual path clean and dropout sits on the weights and the branches.
# - **Beyond GQA:** a rolling cache holds `W` positions in a ring and rotates keys at their
#   absolute positions; MLA caches a latent plus a small RoPE key and folds its up-projections
#   into the query and output, which makes its decoding nearly compute-bound and its cache whole
#   on every GPU; PI scales positions, NTK the base (dynamic NTK by a length that moves, which
#   cached keys do not follow), YaRN each pair with a ramp;
#   ALiBi biases scores by distance with geometric per-head slopes; RMSNorm drops the mean and
#   the shift, SwiGLU's three matrices take `2/3 · 4C`; FlashAttention's backward remakes `P`
#   from the saved log-sum-exp and needs one `D` per query.
