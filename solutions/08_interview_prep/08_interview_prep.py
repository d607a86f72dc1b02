# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 08 · Interview preparation
#
# **Time:** about 2 h (plus 10 min a day of flashcards) · **Prerequisites:** 01–07
#
# Interviewers ask about multi-head attention in three ways: *numbers* you should be able to work
# out on a whiteboard, *claims* you should be able to confirm or push back on, and *code* you
# should be able to read and fix. They usually end with an open question that you answer out
# loud. This notebook drills all four, then gives you a deck of flashcards for the days before
# the interview.
#
# | § | what | difficulty | time | points |
# |---|---|---|---|---|
# | 1 | Numbers worth knowing: head size, parameters, memory, FLOPs, matmul counts | ●●○ | ~30 min | 10 |
# | 2 | Claims to confirm or push back on (multiple choice) | ●○○ – ●●○ | ~25 min | 12 |
# | 3 | Find and fix the bug: a ported MHA module, a batch mask, a GQA cache | ●●○ | ~40 min | 10 |
# | 4 | Say it out loud: two written answers | ●●● | ~25 min | 7, by your instructor |
# | 5 | Flashcards for spaced review | ●○○ | 10 min a day | — |
# | 6 | If you got it wrong: where to revisit | — | — | — |
#
# **How to work.** Treat each question like an interview: answer it first without scrolling back
# to earlier notebooks, then run the locked cell after it. A wrong answer gets a one-sentence
# diagnosis that says what to reconsider, not what the answer is. Each answer is a variable
# (`answer_...`) or a small function; replace `raise NotImplementedError()` and run the cell.
# **Run › Run All Cells** goes on past failing test cells, and past examples that need an
# exercise you have not finished yet, so the plots and sliders further down run too; a failing
# test cell still counts as failed when the notebook is graded.
# In a terminal (**File › New › Terminal**), `python -m autograder check 08` grades the whole
# notebook and lists the two written answers under "manual". Section 6 maps every question to the
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

from autograder.checks.nb02_multihead import check_mha_mask, check_mha_matches_torch
from autograder.checks.nb03_masking import (
    check_attention_mask_padding_invariance,
    check_attention_mask_values,
)
from autograder.checks.nb04_gqa import check_gqa_decoding, check_gqa_kv_cache
from autograder.checks.nb08_interview import check_choice, check_number
from autograder.tools.nb08_flashcards import flashcard_widget

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
# - (a) They use 8, the number of heads of the original Transformer, at every size.
# - (b) They pick it so that the head size `d_model / nh` lands near 64 or 128, so the head count
#   grows with the width.
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
# by a stored answer.
#
# ### 2.1 · The interview question, multiple-choice version
#
# *"Why use multiple attention heads instead of one larger attention computation?"* Which answer
# would you give? (You will write your own in section 4.)
#
# - (a) Several heads have more parameters than one head, so the layer has more capacity.
# - (b) Several small heads run faster than one large head, because each of them is smaller.
# - (c) Each head has its own projections and its own softmax, so every token can gather several
#   differently weighted mixtures of the other tokens at once, each in its own subspace, where a
#   single head gives one weighted average; parameters and FLOPs stay the same.
# - (d) A single attention head can only attend to one token at a time.

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
# - (c) They can be read straight off the attention map: the token a head looks at most is its
#   job.
# - (d) They illustrate the kind of specialisation that can emerge, but real heads carry no
#   labels: what a head does is learned, often mixed or input-dependent, and has to be
#   measured (for example by removing the head), not read from one picture.

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
# - (a) It is a trade-off: each head shrinks to a quarter of its size, so every query–key
#   comparison happens in fewer dimensions. The head count is tuned together with width and
#   depth, and trained models often have redundant heads already.
# - (b) Agreed: more heads is always better; only the compute budget limits it.
# - (c) Agreed, and the attention parameters grow four times, which adds capacity.
# - (d) No: 64 heads run one after another, so the layer becomes four times slower.

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
# - (a) Multi-head attention is unnecessary: models should be trained with a single head.
# - (b) The removed heads had learned nothing during training.
# - (c) After training, heads differ widely in importance and many are redundant at inference,
#   so pruning them can save compute; it says little about training with fewer heads.
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
# - (a) It performs fewer FLOPs.
# - (b) All heads share one softmax, which is computed only once.
# - (c) It needs fewer parameters, so less data is loaded.
# - (d) The heads are independent until the concatenation, so the same arithmetic fits in a few
#   large batched products: less fixed cost per operation and better use of parallel hardware.

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
# - (a) The number of query heads: 64 become 8.
# - (b) The number of key/value heads: each group of 8 query heads shares one key/value head,
#   so `k_proj`, `v_proj` and the KV cache shrink 8 times.
# - (c) The head size: every head becomes 8 times narrower.
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
# - (c) To normalise the values `v` before they are mixed.
# - (d) Because the dot product of two random vectors with unit-variance components has variance
#   d_k: unscaled, a large d_k pushes the softmax towards one-hot, where its gradients nearly
#   vanish; the division brings the variance back to about 1.

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
# - (a) Yes: future keys end up with zero weight, which is all a mask has to achieve.
# - (b) No: the future keys still took part in the normalisation, so each row sums to less than
#   1 and the output shrinks by a different factor for every query. Fill the masked scores with
#   `-inf` before the softmax.
# - (c) Yes, provided the mask is also applied to the values.
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
# its bugs survive. None of these bugs appeared in the earlier notebooks' exercises. For each one:
# read it, predict what goes wrong, run the symptom cell, then write the fixed version in the
# answer cell (start by copying the buggy body). The checks are the course's own: they compare
# with PyTorch and name the mistake they recognise, one at a time.
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
check_mha_matches_torch(MultiHeadAttention)
### BEGIN HIDDEN TESTS
check_mha_matches_torch(MultiHeadAttention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_fixed_mha_mask", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""The fixed module reads the mask as True = may attend; rows with no allowed key give zeros."""
check_mha_mask(MultiHeadAttention)
### BEGIN HIDDEN TESTS
check_mha_mask(MultiHeadAttention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### 3.2 · A batch mask that meets the heads
#
# **Time** ~10 min
#
# This function builds the mask of a padded, causal batch: `lengths[b]` real tokens in row `b`,
# padding after them. The mask is meant for multi-head attention, whose scores are
# `(B, nh, T, S)`.


# %% nbgrader={"grade": false, "grade_id": "given_buggy_attention_mask", "locked": true, "schema_version": 3, "solution": false, "task": false}
def buggy_attention_mask(lengths, max_len, causal=True):
    """Meant to be True where key j of sequence b may be read by query i: j < lengths[b] and,
    if causal, j <= i. For scores (B, nh, T, S) with T = S = max_len."""
    positions = torch.arange(max_len, device=lengths.device)  # (T,)
    real = positions < lengths[:, None]  # (B, S): real keys
    allowed = real[:, None, :].expand(-1, max_len, -1)  # (B, T, S)
    if causal:
        allowed = allowed & (positions[None, :] <= positions[:, None])  # (B, T, S) & (T, S)
    return allowed  # (B, T, S)


# %% [markdown]
# Every entry of this mask is right. Now apply it to the scores of a batch of two sequences and
# two heads, the way attention does (`masked_fill` broadcasts the mask against the scores):

# %%
lengths = torch.tensor([2, 4])  # sequence 0 has two real tokens, sequence 1 has four
mask = buggy_attention_mask(lengths, 4, causal=False)  # (B, T, S)
scores = torch.zeros(2, 2, 4, 4)  # (B, nh, T, S)
allowed = mask.expand_as(scores)  # what masked_fill and SDPA do with a (B, T, S) mask
for head in range(2):
    print(f"sequence 0, head {head}: query 0 may read keys", allowed[0, head, 0].int().tolist())
try:
    mask.expand(2, 3, 4, 4)  # the same mask against three heads
except RuntimeError as err:
    print("with three heads:", str(err).splitlines()[0])

# %% [markdown]
# Write `attention_mask(lengths, max_len, causal=True)` so that it works with any number of heads
# (the contract of notebook 03: a bool tensor on the device of `lengths`).
#
# <details><summary>Hint 1: where to look</summary>
#
# Broadcasting lines shapes up from the **right**. Write the mask's shape under the scores'
# shape, right-aligned: which dimension of the mask ends up against the heads?
# </details>
#
# <details><summary>Hint 2: the shape</summary>
#
# The mask should say nothing about heads, so it needs a dimension of size 1 where the heads are,
# in the position that lines up with `nh` in `(B, nh, T, S)`.
# </details>


# %% nbgrader={"grade": false, "grade_id": "fixed_attention_mask", "locked": false, "schema_version": 3, "solution": true, "task": false}
def attention_mask(lengths, max_len, causal=True):
    """``(B, 1, T, S)`` bool with T = S = ``max_len``: key ``j`` of sequence ``b`` may be read by
    query ``i`` iff ``j < lengths[b]`` and, if ``causal``, ``j <= i``; on ``lengths.device``."""
    ### BEGIN SOLUTION
    positions = torch.arange(max_len, device=lengths.device)  # (T,)
    real = positions < lengths[:, None]  # (B, S): real keys
    allowed = real[:, None, :].expand(-1, max_len, -1)  # (B, T, S)
    if causal:
        allowed = allowed & (positions[None, :] <= positions[:, None])  # (B, T, S) & (T, S)
    return allowed[:, None]  # (B, 1, T, S): broadcasts over any number of heads
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_fixed_attention_mask_values", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""attention_mask gives (B, 1, T, T): a key may be read iff it is real and (if causal) not later."""
check_attention_mask_values(attention_mask)
### BEGIN HIDDEN TESTS
check_attention_mask_values(attention_mask, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_fixed_attention_mask_padding", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""With attention_mask, real tokens' outputs equal each sequence run alone, without padding."""
check_attention_mask_padding_invariance(attention_mask)
### BEGIN HIDDEN TESTS
check_attention_mask_padding_invariance(attention_mask, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### 3.3 · Decoding with shared key/value heads
#
# **Time** ~15 min
#
# A grouped-query attention layer for token-by-token generation (notebook 04's interface):
# `forward(x, past_kv=None, causal=True)` takes the `T` newest tokens and the cache `(k, v)` of
# the earlier ones, and returns `(out, (k, v))` with the cache extended. Query head `i` reads
# key/value head `i // n_rep`. Decoding piece by piece with the cache must equal one full causal
# pass. Two things are wrong.


# %% nbgrader={"grade": false, "grade_id": "given_buggy_gqa", "locked": true, "schema_version": 3, "solution": false, "task": false}
class BuggyGroupedQueryAttention(nn.Module):
    """Meant to be GQA with a KV cache: nh query heads share nkv key/value heads. Two bugs."""

    def __init__(self, d_model, num_heads, num_kv_heads, bias=False):
        super().__init__()
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.head_size = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, num_kv_heads * self.head_size, bias=bias)
        self.v_proj = nn.Linear(d_model, num_kv_heads * self.head_size, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, past_kv=None, causal=True):
        B, T, C = x.shape
        nh, nkv, hs = self.num_heads, self.num_kv_heads, self.head_size
        q = self.q_proj(x).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = self.k_proj(x).view(B, T, nkv, hs).transpose(1, 2)  # (B, nkv, T, hs)
        v = self.v_proj(x).view(B, T, nkv, hs).transpose(1, 2)  # (B, nkv, T, hs)
        k = k.repeat_interleave(nh // nkv, dim=1)  # (B, nh, T, hs)
        v = v.repeat_interleave(nh // nkv, dim=1)  # (B, nh, T, hs)
        if past_kv is not None:
            k = torch.cat([past_kv[0], k], dim=2)  # (B, nh, S, hs)
            v = torch.cat([past_kv[1], v], dim=2)  # (B, nh, S, hs)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # (B, nh, T, hs)
        out = out.transpose(1, 2).reshape(B, T, C)  # (B, T, C)
        return self.out_proj(out), (k, v)  # (B, T, C), cache


# %%
torch.manual_seed(0)
gqa = BuggyGroupedQueryAttention(32, num_heads=8, num_kv_heads=2).eval()
x = torch.randn(1, 6, 32)  # (B, T, C)
with torch.no_grad():
    full, (k_full, _) = gqa(x)  # one causal pass over all six tokens
    past, steps = None, []
    for t in range(6):  # the same tokens, one at a time, with the cache
        out, past = gqa(x[:, t : t + 1], past_kv=past)
        steps.append(out)
print("cache after the full pass:", tuple(k_full.shape), "(B, heads, S, hs)")
print(
    "token by token vs full pass, largest difference per position:",
    [round(d, 3) for d in (torch.cat(steps, 1) - full).abs().amax(dim=(0, 2)).tolist()],
)

# %% [markdown]
# Write `GroupedQueryAttention` without the bugs: the same interface, the cache holds
# `(B, nkv, S, hs)` keys and values, and decoding with the cache equals the full causal pass.
#
# <details><summary>Hint 1: where to look</summary>
#
# Two symptoms above. How many heads does the cache hold, and how many does grouped-query
# attention exist to store? And which position is the only one that comes out right when
# decoding one token at a time?
# </details>
#
# <details><summary>Hint 2: the mask</summary>
#
# With a cache the `T` new queries are the *last* `T` of the `S` positions. Read what
# `is_causal=True` assumes about where the queries sit (notebook 03 §2 and notebook 04 §3), and
# build the mask yourself.
# </details>


# %% nbgrader={"grade": false, "grade_id": "fixed_gqa", "locked": false, "schema_version": 3, "solution": true, "task": false}
class GroupedQueryAttention(nn.Module):
    """GQA with a KV cache: nh query heads share nkv key/value heads; query head i reads kv head
    i // (nh // nkv).

    ``forward(x (B, T, C), past_kv=None, causal=True)`` returns ``(out (B, T, C), (k, v))`` with
    ``k``, ``v`` of shape ``(B, nkv, S, hs)``: the past positions, then the new ones.
    """

    def __init__(self, d_model, num_heads, num_kv_heads, bias=False):
        super().__init__()
        ### BEGIN SOLUTION
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.head_size = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, num_kv_heads * self.head_size, bias=bias)
        self.v_proj = nn.Linear(d_model, num_kv_heads * self.head_size, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        ### END SOLUTION

    def forward(self, x, past_kv=None, causal=True):
        ### BEGIN SOLUTION
        B, T, C = x.shape
        nh, nkv, hs = self.num_heads, self.num_kv_heads, self.head_size
        q = self.q_proj(x).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = self.k_proj(x).view(B, T, nkv, hs).transpose(1, 2)  # (B, nkv, T, hs)
        v = self.v_proj(x).view(B, T, nkv, hs).transpose(1, 2)  # (B, nkv, T, hs)
        if past_kv is not None:
            k = torch.cat([past_kv[0], k], dim=2)  # (B, nkv, S, hs): cache the kv heads only
            v = torch.cat([past_kv[1], v], dim=2)  # (B, nkv, S, hs)
        S = k.shape[2]
        mask = None
        if causal:  # the new queries are the last T of S positions: bottom-right
            mask = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(S - T)  # (T, S)
        k_rep = k.repeat_interleave(nh // nkv, dim=1)  # (B, nh, S, hs)
        v_rep = v.repeat_interleave(nh // nkv, dim=1)  # (B, nh, S, hs)
        out = F.scaled_dot_product_attention(q, k_rep, v_rep, attn_mask=mask)  # (B, nh, T, hs)
        out = out.transpose(1, 2).reshape(B, T, C)  # (B, T, C)
        return self.out_proj(out), (k, v)  # (B, T, C), cache (B, nkv, S, hs)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_fixed_gqa_cache", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""The fixed module caches (B, nkv, S, hs) keys and values: the past, then the new positions."""
check_gqa_kv_cache(GroupedQueryAttention)
### BEGIN HIDDEN TESTS
check_gqa_kv_cache(GroupedQueryAttention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_fixed_gqa_decoding", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""Decoding piece by piece with the fixed module's cache equals one full causal pass."""
check_gqa_decoding(GroupedQueryAttention)
### BEGIN HIDDEN TESTS
check_gqa_decoding(GroupedQueryAttention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# What the six bugs have in common: none raises an error, and none changes the shape of an
# output. A (B, T, S) mask even broadcasts silently whenever the batch size happens to equal the
# head count. Only a comparison with a trusted reference (PyTorch), or a property test (padding
# does not change real tokens, cached decoding equals the full pass), exposes them. In an
# interview, name the test that would have caught the bug, not only the fix.
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
# ## 5 · Flashcards for spaced review
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
# (`autograder.tools.nb08_flashcards.deck_markdown()` returns the whole deck as text, to print.)

# %%
if AUTOGRADING:
    print("Flashcards are skipped while grading.")
else:
    display(flashcard_widget("flashcards_progress.json"))

# %% [markdown]
# ## 6 · If you got it wrong: where to revisit
#
# `python -m autograder check 08` lists every test cell. For each one that failed, this table
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
# | `test_fixed_attention_mask_values`, `test_fixed_attention_mask_padding` | notebook 03 §4–5 (padding; the mask of a batched decoder) |
# | `test_fixed_gqa_cache`, `test_fixed_gqa_decoding` | notebook 04 §2–4 (sharing key/value heads; causal masks when the queries are the newest tokens; decoding with the cache) |
#
# ## Summary
#
# - **Numbers:** the head size is `d_model / nh`; the attention parameters do not depend on the
#   head count; GQA shrinks only `k_proj`, `v_proj` and the KV cache; the attention weights hold
#   `B·nh·T²` values; the FLOPs do not depend on the schedule, the number of products does.
# - **Claims:** several heads give several softmax weightings per token at the same cost; head
#   roles emerge from training and must be measured; more heads is a trade-off; the √d_k keeps
#   the softmax out of saturation; masks go on the scores, before the softmax.
# - **Bugs:** scaling by √C instead of √hs, a mask read with the opposite convention, a
#   `(B, T, S)` mask that lines the batch up with the heads, a cache that stores the repeated
#   key/value heads, and `is_causal=True` (aligned top-left) with a cache. None raises an error;
#   references and property tests find them.
# - **Out loud:** lead with the mechanism, back it with a number, end with the limits.
