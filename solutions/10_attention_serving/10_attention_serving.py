# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 10 · Attention as it is served: the paged KV cache
#
# **Time:** about 1 h (~30 min of exercises) · **Prerequisites:** 04
#
# <!-- Numbered 10 while it is being written (issue 48): it becomes 09 and the interview
# notebook 10 when it is finished, so that interview preparation stays last. -->
#
# Notebook 04 gave each sequence one contiguous KV cache. A server holds hundreds of sequences
# whose lengths it does not know in advance, so vLLM, SGLang and TensorRT-LLM keep the cache the
# way an operating system keeps memory: in fixed-size **blocks** (pages) handed out as a sequence
# grows. In this notebook you will:
#
# 1. Write new tokens into a block pool through a sequence's block table, and attend over the
#    blocks, proven equal to attention over the contiguous cache (exercises 1-2); then measure
#    what contiguous preallocation wastes.
# 2. SECTION-2-INTRO (prefix caching)
# 3. SECTION-3-INTRO (continuous batching over packed sequences)
# 4. SECTION-4-INTRO (chunked prefill)
# 5. SECTION-5-INTRO (split-KV decoding)
# 6. SECTION-6-INTRO (speculative decoding's verification)
#
# **How this notebook is graded.** Each exercise is a function you complete in place of
# `raise NotImplementedError()`. The locked cell after it checks your code and names the likely
# mistake when something is wrong. Hidden tests try more sizes when grading.
# **Run › Run All Cells** goes on past failing test cells; a failing test cell still counts as
# failed when the notebook is graded. In a terminal, `python -m autograder check 10` grades the
# whole notebook, hidden tests included.
#
# ## Shape legend
#
# | symbol | meaning |
# |---|---|
# | `B` | number of sequences in the batch |
# | `T` | number of new tokens written in this call |
# | `L` | a sequence's length: how many positions its cache holds |
# | `nh`, `nkv` | query heads, key/value heads |
# | `hs` | head size |
# | `bs` | block size: how many positions one block holds |
#
# A pool of blocks is `(num_blocks, bs, nkv, hs)`, one for keys and one for values, the layout
# of vLLM's FlashAttention backend.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
import math
import warnings

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from autograder.checks.nb10_paged import check_paged_append, check_paged_attention

warnings.filterwarnings("ignore")
torch.manual_seed(0)
# %matplotlib inline

# %% [markdown]
# ## 1 · A paged KV cache
#
# A contiguous cache must be allocated for the longest length a sequence may reach, before the
# server knows how long it will run. A **paged** cache allocates one block of `bs` positions
# at a time from a shared pool. Each sequence keeps a **block table**: the list of its blocks,
# in order. Position `p` of a sequence lives in block `block_table[p // bs]`, at slot `p % bs`:
#
# ```
#  bs = 4, a sequence of 10 tokens, block_table = [7, 2, 5]
#  positions 0-3  -> block 7, slots 0-3
#  positions 4-7  -> block 2, slots 0-3
#  positions 8-9  -> block 5, slots 0-1   (slots 2-3 free: the last, partial block)
# ```
#
# The blocks of one sequence need not be adjacent, nor in order: the table alone says where its
# tokens are. Only the last block can be partly filled, so a sequence wastes fewer than `bs`
# slots. vLLM writes new tokens with a flat **slot mapping**, `block * bs + offset`, into the
# pool seen as `(num_blocks * bs, nkv, hs)`.
#
# ### Exercise 1 · `paged_append`
#
# **Difficulty** ●○○ · **Importance** ★★★ (vLLM's `reshape_and_cache`) · **Time** ~10 min
#
# Given the pools `k_pool, v_pool (num_blocks, bs, nkv, hs)`, one sequence's `block_table`
# (a 1-D long tensor, long enough for the new tokens), the number `seq_len` of positions it
# already holds, and `k_new, v_new (T, nkv, hs)` for positions `seq_len … seq_len + T - 1`,
# return **new** pools `(k_pool, v_pool)` with those positions written and every other slot
# unchanged. Leave the pools you were given as they are: a server writes in place, but a copy
# keeps the exercise easy to test.
#
# <details><summary>Hint</summary>
#
# `positions = torch.arange(seq_len, seq_len + T)`; their blocks are
# `block_table[positions // bs]` and their slots `positions % bs`. Indexing a clone with both,
# `k[blocks, slots] = k_new`, writes every token at once. `bs` is `k_pool.shape[1]`.
# </details>


# %% nbgrader={"grade": false, "grade_id": "paged_append", "locked": false, "schema_version": 3, "solution": true, "task": false}
def paged_append(
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    block_table: torch.Tensor,
    seq_len: int,
    k_new: torch.Tensor,
    v_new: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Copies of the pools ``(num_blocks, bs, nkv, hs)`` with ``k_new, v_new (T, nkv, hs)``
    written at positions ``seq_len …`` of the sequence whose blocks ``block_table`` lists."""
    ### BEGIN SOLUTION
    bs = k_pool.shape[1]
    positions = torch.arange(seq_len, seq_len + k_new.shape[0])  # (T,)
    blocks, slots = block_table[positions // bs], positions % bs  # (T,), (T,)
    k_out, v_out = k_pool.clone(), v_pool.clone()
    k_out[blocks, slots] = k_new  # (T, nkv, hs) into T slots of the pool
    v_out[blocks, slots] = v_new
    return k_out, v_out
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_paged_append", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""paged_append: position p goes to block block_table[p // bs], slot p % bs, in copies."""
check_paged_append(paged_append)
### BEGIN HIDDEN TESTS
check_paged_append(paged_append, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 2 · `paged_attention`
#
# **Difficulty** ●●○ · **Importance** ★★★ (vLLM's `paged_attention` kernel) · **Time** ~20 min
#
# Decoding: each of the `B` sequences brings one new query, `q (B, nh, hs)`, whose key and value
# are already in the pools. `block_tables (B, max_blocks)` holds each sequence's blocks in a row;
# a row is longer than a short sequence needs, and its extra entries name blocks of **other**
# sequences (vLLM pads the rows of a batch the same way, with whatever is there).
# `seq_lens (B,)` says how many positions each sequence holds, the new one included. Return
# `(B, nh, hs)`: each query attending to its own `seq_lens[b]` positions, exactly as attention
# over notebook 04's contiguous cache would (with GQA: query head `h` reads key head
# `h // (nh // nkv)`).
#
# The kernel reads the blocks where they lie; here you may gather a sequence's positions into
# a contiguous `(nkv, L, hs)` and call `F.scaled_dot_product_attention(..., enable_gqa=True)`.
#
# <details><summary>Hint</summary>
#
# For sequence `b` of length `L`: `ceil(L / bs)` blocks, `block_tables[b, :n]`; `k_pool[blocks]`
# is `(n, bs, nkv, hs)`: flatten the first two dimensions and keep the first `L` positions. The
# last block's slots past `L` were never written.
# </details>


# %% nbgrader={"grade": false, "grade_id": "paged_attention", "locked": false, "schema_version": 3, "solution": true, "task": false}
def paged_attention(
    q: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
) -> torch.Tensor:
    """``(B, nh, hs)``: query ``q[b]`` over the ``seq_lens[b]`` cached positions of sequence
    ``b``, read from the pools ``(num_blocks, bs, nkv, hs)`` through ``block_tables[b]``."""
    ### BEGIN SOLUTION
    bs = k_pool.shape[1]
    out = []
    for b, length in enumerate(seq_lens.tolist()):
        blocks = block_tables[b, : math.ceil(length / bs)]  # (n,)
        k = k_pool[blocks].flatten(0, 1)[:length].transpose(0, 1)  # (nkv, L, hs)
        v = v_pool[blocks].flatten(0, 1)[:length].transpose(0, 1)  # (nkv, L, hs)
        o = F.scaled_dot_product_attention(q[b, :, None], k, v, enable_gqa=True)  # (nh, 1, hs)
        out.append(o[:, 0])
    return torch.stack(out)  # (B, nh, hs)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_paged_attention", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
"""paged_attention equals attention over each sequence's contiguous cache."""
check_paged_attention(paged_attention)
### BEGIN HIDDEN TESTS
check_paged_attention(paged_attention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### What contiguous preallocation wastes
#
# A contiguous cache reserves `max_len` positions per sequence however short it stays; a paged
# one holds `ceil(L / bs) * bs`. Chat lengths are skewed: most replies are short, a few are very
# long. Below, 64 sequences with log-normal lengths (a median near 300 tokens), capped at a
# 4096-token context: the share of reserved slots that hold no token, for each way.

# %%
lengths = torch.distributions.LogNormal(math.log(300), 1.0).sample((64,)).clamp(1, 4096).long()
max_len = 4096
block_sizes = [1, 8, 16, 32, 128, 512]
used = int(lengths.sum())
contiguous = len(lengths) * max_len
paged = [int(((lengths + bs - 1) // bs * bs).sum()) for bs in block_sizes]
labels = ["contiguous"] + [f"paged, bs={bs}" for bs in block_sizes]
wasted = [100 * (1 - used / r) for r in [contiguous, *paged]]
fig, ax = plt.subplots(figsize=(7, 3))
ax.barh(labels, wasted, color=["tab:red"] + ["tab:blue"] * len(block_sizes))
ax.set_xlabel("% of reserved KV slots holding no token")
ax.invert_yaxis()
for y, w in enumerate(wasted):
    ax.text(w, y, f" {w:.1f}%", va="center")
ax.set_xlim(0, 110)
plt.tight_layout()
plt.show()

# %% [markdown]
# vLLM's paper measured 60-80% of the cache wasted by contiguous allocation in earlier
# systems, and under 4% with blocks of 16. The block size is a trade: small blocks waste less,
# large ones make fewer, longer reads for the kernel and shorter tables.

# %% [markdown]
# ## 2 · Prefix caching
#
# SECTION-2-BODY: replaced by the section's author.

# %% [markdown]
# ## 3 · Continuous batching over packed sequences
#
# SECTION-3-BODY: replaced by the section's author.

# %% [markdown]
# ## 4 · Chunked prefill
#
# SECTION-4-BODY: replaced by the section's author.

# %% [markdown]
# ## 5 · Split-KV decoding
#
# SECTION-5-BODY: replaced by the section's author.

# %% [markdown]
# ## 6 · Speculative decoding's verification
#
# SECTION-6-BODY: replaced by the section's author.
