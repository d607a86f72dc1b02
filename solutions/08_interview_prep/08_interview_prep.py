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
# | 3 | Find and fix the bug: attention, head split, causal mask, GQA | ●●○ | ~40 min | 10 |
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

from autograder.checks.attention import check_sdpa_mask, check_sdpa_values
from autograder.checks.gqa import check_repeat_kv
from autograder.checks.interview import check_choice, check_number
from autograder.checks.masking import check_causal_mask_no_leak, check_causal_mask_values
from autograder.checks.multihead import check_merge_heads, check_split_heads
from autograder.lab.flashcards import flashcard_widget

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
    print(f"attention weights: {answer_attention_matrix_bytes / 1e6:.0f} MB at T = 1024, "
          f"{answer_attention_matrix_bytes * 16 / 1e9:.1f} GB at T = 4096")

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
# quickly"* and labels three heads of a trained model: head 1 "coreference" (*it* → *function*),
# head 2 "who did it" (*fixed* → *developer*), head 3 "manner" (*quickly* → *fixed*). In an
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
# - (d) The heads of a layer are computed together in batched products, so at a fixed width
#   adding heads does not multiply the compute.
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
# Live-coding rounds often hand you code that *runs* and ask what is wrong with it. Each
# function below runs without an error and returns tensors of the right shape, which is exactly
# why its bugs survive. For each one: read it, predict what goes wrong, run the symptom cell,
# then write the fixed function in the answer cell (start by copying the buggy body). The checks
# are the course's own: they compare with PyTorch and name the mistake they recognise.
#
# ### 3.1 · Attention with three bugs
#
# **Time** ~15 min

# %% nbgrader={"grade": false, "grade_id": "given_buggy_attention", "locked": true, "schema_version": 3, "solution": false, "task": false}
def buggy_attention(q, k, v, mask=None):
    """Meant to be softmax(q kᵀ / √d_k) v with a boolean mask (True = may attend). Three bugs.

    q (..., T, d_k), k (..., S, d_k), v (..., S, d_v) -> (out (..., T, d_v), weights (..., T, S)).
    """
    scores = q @ k.transpose(-2, -1)  # (..., T, d_k) @ (..., d_k, S) -> (..., T, S)
    weights = torch.softmax(scores, dim=-2)  # (..., T, S)
    if mask is not None:
        weights = weights * mask  # (..., T, S)
    return weights @ v, weights  # (..., T, d_v), (..., T, S)


# %%
q, k, v = torch.randn(2, 4, 64), torch.randn(2, 6, 64), torch.randn(2, 6, 8)  # T = 4, S = 6
mask = torch.ones(4, 6, dtype=torch.bool).tril(diagonal=2)  # (T, S): a causal mask, S > T
out, weights = buggy_attention(q, k, v, mask)
print("row sums of the weights (each should be 1):", weights[0].sum(-1))
print("largest difference from PyTorch's attention:",
      (out - F.scaled_dot_product_attention(q, k, v, attn_mask=mask)).abs().max().item())

# %% [markdown]
# Write `scaled_dot_product_attention` without the bugs. Contract (notebook 01): the mask is
# boolean, broadcastable to `(..., T, S)`, True = may attend, and a query with **no** allowed key
# gets all-zero weights and an all-zero output, never NaN.
#
# <details><summary>Hint 1: where to look</summary>
#
# Check the three lines that turn scores into weights: the scaling, the axis of the softmax, and
# *when* the mask is applied.
# </details>
#
# <details><summary>Hint 2: the mask</summary>
#
# `scores.masked_fill(~mask, float("-inf"))` before the softmax. A row of only `-inf` gives NaN
# after the softmax; fill the weights of masked positions with 0 afterwards to get zeros there.
# </details>

# %% nbgrader={"grade": false, "grade_id": "fixed_attention", "locked": false, "schema_version": 3, "solution": true, "task": false}
def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q kᵀ / √d_k) v with an optional boolean mask (True = may attend).

    q ``(..., T, d_k)``, k ``(..., S, d_k)``, v ``(..., S, d_v)``, mask broadcastable to
    ``(..., T, S)``. Returns ``(out (..., T, d_v), weights (..., T, S))``; a query with no
    allowed key gets zero weights and a zero output.
    """
    ### BEGIN SOLUTION
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # over the keys
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)  # rows with no allowed key: NaN -> 0
    return weights @ v, weights  # (..., T, d_v), (..., T, S)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_fixed_attention_values", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""The fixed attention equals PyTorch's without a mask: weights and output, T ≠ S, d_k ≠ d_v."""
check_sdpa_values(scaled_dot_product_attention)
### BEGIN HIDDEN TESTS
check_sdpa_values(scaled_dot_product_attention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_fixed_attention_mask", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""The fixed attention applies the mask before the softmax; rows with no allowed key give zeros."""
check_sdpa_mask(scaled_dot_product_attention)
### BEGIN HIDDEN TESTS
check_sdpa_mask(scaled_dot_product_attention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### 3.2 · Splitting and merging heads
#
# **Time** ~10 min

# %% nbgrader={"grade": false, "grade_id": "given_buggy_heads", "locked": true, "schema_version": 3, "solution": false, "task": false}
def buggy_split_heads(x, num_heads):
    """Meant to be (B, T, C) -> (B, nh, T, hs), head h holding features h*hs:(h+1)*hs."""
    B, T, C = x.shape
    return x.view(B, num_heads, T, C // num_heads)  # (B, nh, T, hs)


def buggy_merge_heads(x):
    """Meant to be the inverse: (B, nh, T, hs) -> (B, T, nh*hs)."""
    B, nh, T, hs = x.shape
    return x.reshape(B, T, nh * hs)  # (B, T, C)


# %% [markdown]
# A round-trip test passes, so the pair looks consistent. Now tag every feature of token `t`
# with the number `t` and look at what "head 0" receives:

# %%
x = torch.randn(2, 5, 12)  # (B, T, C)
print("round trip gives x back:", torch.equal(buggy_merge_heads(buggy_split_heads(x, 3)), x))
tagged = torch.arange(4.0)[None, :, None].repeat(1, 1, 6)  # (B=1, T=4, C=6): token t holds t
print("head 0's rows, one per token (row t should hold t, for t = 0, 1, 2, 3):")
print(buggy_split_heads(tagged, 2)[0, 0])  # (T, hs)

# %% [markdown]
# Write `split_heads` and `merge_heads` correctly.
#
# <details><summary>Hint</summary>
#
# `view` never moves numbers: it reinterprets memory that is laid out token after token. Cut the
# features first, `(B, T, nh, hs)`, then move the head dimension: `.transpose(1, 2)`. Merging
# undoes both steps in reverse order, and after a transpose use `reshape` (or
# `.contiguous().view`).
# </details>

# %% nbgrader={"grade": false, "grade_id": "fixed_split_heads", "locked": false, "schema_version": 3, "solution": true, "task": false}
def split_heads(x, num_heads):
    """``(B, T, C) -> (B, nh, T, hs)``; head ``h`` holds features ``h*hs:(h+1)*hs``."""
    ### BEGIN SOLUTION
    B, T, C = x.shape
    return x.reshape(B, T, num_heads, C // num_heads).transpose(1, 2)  # (B, nh, T, hs)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_fixed_split_heads_layout", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""split_heads gives (B, nh, T, hs) with head h holding features h*hs:(h+1)*hs of every token."""
check_split_heads(split_heads)
### BEGIN HIDDEN TESTS
check_split_heads(split_heads, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "fixed_merge_heads", "locked": false, "schema_version": 3, "solution": true, "task": false}
def merge_heads(x):
    """``(B, nh, T, hs) -> (B, T, nh*hs)``, head ``h`` in features ``h*hs:(h+1)*hs``."""
    ### BEGIN SOLUTION
    B, nh, T, hs = x.shape
    return x.transpose(1, 2).reshape(B, T, nh * hs)  # (B, T, nh, hs) -> (B, T, C)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_fixed_merge_heads_layout", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""merge_heads undoes the split: (B, T, nh*hs), for contiguous and non-contiguous input."""
check_merge_heads(merge_heads)
### BEGIN HIDDEN TESTS
check_merge_heads(merge_heads, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### 3.3 · A causal mask for decoding with a cache
#
# **Time** ~10 min
#
# During generation with a KV cache, the `T` newest tokens are the queries and all `S ≥ T` tokens
# so far are the keys. The mask is `(T, S)`, True = may attend.

# %% nbgrader={"grade": false, "grade_id": "given_buggy_causal_mask", "locked": true, "schema_version": 3, "solution": false, "task": false}
def buggy_causal_mask(T, S=None, device=None):
    """Meant to be the (T, S) causal mask, True = may attend; the queries are the last T tokens."""
    S = T if S is None else S
    return torch.ones(T, S, dtype=torch.bool, device=device).tril(diagonal=-1)  # (T, S)


# %%
print("buggy_causal_mask(3):\n", buggy_causal_mask(3).int())
print("buggy_causal_mask(2, 5): two new tokens after three cached ones:\n",
      buggy_causal_mask(2, 5).int())

# %% [markdown]
# Write `causal_mask` correctly (the contract of notebook 03: `S` defaults to `T`, and the
# result lives on `device`).
#
# <details><summary>Hint</summary>
#
# Two bugs. What should the first query of `buggy_causal_mask(3)` be allowed to see? And in the
# `(2, 5)` case, query `i` is the token at position `S - T + i`: which keys are at or before it?
# `torch.tril` takes a `diagonal` offset.
# </details>

# %% nbgrader={"grade": false, "grade_id": "fixed_causal_mask", "locked": false, "schema_version": 3, "solution": true, "task": false}
def causal_mask(T, S=None, device=None):
    """``(T, S)`` bool, True = may attend: query ``i`` (position ``S - T + i``) sees keys
    ``0 … S - T + i``. ``S`` defaults to ``T``."""
    ### BEGIN SOLUTION
    S = T if S is None else S
    return torch.ones(T, S, dtype=torch.bool, device=device).tril(diagonal=S - T)  # (T, S)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_fixed_causal_mask_values", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""causal_mask equals PyTorch's bottom-right causal mask, S = T and S > T, on the right device."""
check_causal_mask_values(causal_mask)
### BEGIN HIDDEN TESTS
check_causal_mask_values(causal_mask, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_fixed_causal_mask_no_leak", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""With causal_mask no output sees the future, and cached decoding equals the full pass."""
check_causal_mask_no_leak(causal_mask)
### BEGIN HIDDEN TESTS
check_causal_mask_no_leak(causal_mask, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### 3.4 · Sharing key/value heads
#
# **Time** ~5 min
#
# In grouped-query attention, `repeat_kv` expands `nkv` key/value heads to the `nh` query heads:
# query head `h` must read key/value head `h // n_rep`, where `n_rep = nh // nkv`.

# %% nbgrader={"grade": false, "grade_id": "given_buggy_repeat_kv", "locked": true, "schema_version": 3, "solution": false, "task": false}
def buggy_repeat_kv(x, n_rep):
    """Meant to be (B, nkv, S, hs) -> (B, nkv*n_rep, S, hs), query head h reading kv head h // n_rep."""
    return x.repeat(1, n_rep, 1, 1)  # (B, nkv*n_rep, S, hs)


# %%
kv = torch.arange(2.0)[None, :, None, None].repeat(1, 1, 3, 4)  # (B, nkv=2, S, hs): head j holds j
print("kv head read by each of the 4 query heads (should be 0, 0, 1, 1):",
      buggy_repeat_kv(kv, 2)[0, :, 0, 0].tolist())

# %% [markdown]
# Write `repeat_kv` correctly.
#
# <details><summary>Hint</summary>
#
# You want `[K0, K0, K1, K1]`, not `[K0, K1, K0, K1]`: each head repeated in place, along dim 1.
# </details>

# %% nbgrader={"grade": false, "grade_id": "fixed_repeat_kv", "locked": false, "schema_version": 3, "solution": true, "task": false}
def repeat_kv(x, n_rep):
    """``(B, nkv, S, hs) -> (B, nkv*n_rep, S, hs)``; output head ``h`` is input head ``h // n_rep``."""
    ### BEGIN SOLUTION
    return x.repeat_interleave(n_rep, dim=1)  # (B, nkv*n_rep, S, hs)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_fixed_repeat_kv_order", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""repeat_kv gives query head h the key/value head h // n_rep, for any n_rep and dtype."""
check_repeat_kv(repeat_kv)
### BEGIN HIDDEN TESTS
check_repeat_kv(repeat_kv, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# What the four bugs have in common: none raises an error, and none changes a shape. Only a
# comparison with a trusted reference (PyTorch), or a property test (rows sum to 1, no leak from
# the future, cached decoding equals the full pass), exposes them. In an interview, name the
# test that would have caught the bug, not only the fix.
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
# the width into h subspaces, each with its own query, key and value projections and its own
# softmax, so every token gathers h differently weighted mixtures side by side, and the output
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
# 1. *Same work:* equal FLOPs for both schedules (a formula or a number), and h heads of width
#    C / h do not cost h full-size attentions.
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
# (`autograder.lab.flashcards.deck_markdown()` returns the whole deck as text, to print.)

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
# | `test_fixed_attention_values` | notebook 01 §3–4 (scaled dot-product attention; the scaling) |
# | `test_choice_mask_after_softmax`, `test_fixed_attention_mask` | notebook 03 §1–2 (masks as permissions; the causal mask) |
# | `test_fixed_split_heads_layout`, `test_fixed_merge_heads_layout` | notebook 02 §2–3 (splitting and merging heads) |
# | `test_fixed_causal_mask_values`, `test_fixed_causal_mask_no_leak` | notebook 03 §2–3 (the causal mask; a leakage test) and notebook 04 §3 (masks when the queries are the newest tokens) |
# | `test_fixed_repeat_kv_order` | notebook 04 §2 (sharing key/value heads) |
#
# ## Summary
#
# - **Numbers:** the head size is `d_model / nh`; the attention parameters do not depend on the
#   head count; GQA shrinks only `k_proj`, `v_proj` and the KV cache; the attention weights hold
#   `B·nh·T²` values; the FLOPs do not depend on the schedule, the number of products does.
# - **Claims:** several heads give several softmax weightings per token at the same cost; head
#   roles emerge from training and must be measured; more heads is a trade-off; the √d_k keeps
#   the softmax out of saturation; masks go on the scores, before the softmax.
# - **Bugs:** wrong softmax axis, missing scale, mask after the softmax, `view` without
#   `transpose`, a causal mask without its diagonal or aligned top-left under a cache, `repeat`
#   instead of `repeat_interleave`. None raises an error; references and property tests find
#   them.
# - **Out loud:** lead with the mechanism, back it with a number, end with the limits.
