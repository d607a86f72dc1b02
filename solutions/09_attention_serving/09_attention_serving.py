# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 09 · Attention as it is served: paged caches, batching, split-KV and speculative decoding
#
# **Time:** about 3 h (~1.5 h of exercises) · **Prerequisites:** 04, 06
#
# Notebook 04 gave each sequence one contiguous KV cache. A server holds hundreds of sequences
# whose lengths it does not know in advance, so vLLM, SGLang and TensorRT-LLM keep the cache the
# way an operating system keeps memory: in fixed-size **blocks** (pages) handed out as a sequence
# grows. In this notebook you will:
#
# 1. Write new tokens into a block pool through a sequence's block table, and attend over the
#    blocks, proven equal to attention over the contiguous cache (exercises 1-2); then measure
#    what contiguous preallocation wastes.
# 2. Let sequences that start with the same prompt share its blocks: chained hashes of full
#    blocks find a cached prefix, reference counts and copy-on-write keep the sharing safe
#    (exercises 3-4); then count the memory and prefill FLOPs a shared system prompt saves.
# 3. Pack sequences of different lengths into one tensor with `cu_seqlens`, FlashAttention's
#    varlen layout, and attend within each sequence (exercises 5-6); then simulate continuous
#    batching against static batching.
# 4. Prefill a long prompt in chunks beside decoding requests, each chunk's causal mask aligned
#    to its own cache (exercise 7); then see in a cost model why chunks bound the decoders'
#    latency.
# 5. Split a long cache into chunks that each return `(o, lse)` and merge them exactly, empty
#    chunks included (exercises 8-10): FlashDecoding, and the same merge for ring attention.
# 6. Verify a draft model's tokens in one target pass, greedily and by rejection sampling
#    (proven to give the target's distribution by exact counting), roll the cache back, and
#    verify a tree of drafts with its attention mask (exercises 11-13).
#
# **How this notebook is graded.** Each exercise is a function you complete in place of
# `raise NotImplementedError()`. The locked cell after it checks your code and names the likely
# mistake when something is wrong. Hidden tests try more sizes when grading.
# **Run › Run All Cells** goes on past failing test cells; a failing test cell still counts as
# failed when the notebook is graded. In a terminal, `python -m autograder check 09` grades the
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

from autograder.checks.nb09_chunked import check_prefill_chunk
from autograder.checks.nb09_paged import check_paged_append, check_paged_attention
from autograder.checks.nb09_prefix import check_block_hashes, check_cow_append
from autograder.checks.nb09_speculative import (
    check_accept_greedy,
    check_speculative_accept,
    check_tree_attention_mask,
)
from autograder.checks.nb09_split_kv import (
    check_attend_chunk,
    check_merge_splits,
    check_split_kv_decode,
)
from autograder.checks.nb09_varlen import check_pack, check_varlen_attention
from autograder.tools.nb09_serving_sim import kv_slots, lognormal_lengths, simulate

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
# The count `python -m autograder.bench.serving` prints too (tools/nb09_serving_sim.py)
max_len, block_sizes = 4096, [1, 8, 16, 32, 128, 512]
lengths = lognormal_lengths(64, median=300, sigma=1.0, cap=max_len, seed=0)
slots = kv_slots(lengths, max_len, block_sizes)
labels = ["contiguous"] + [f"paged, bs={bs}" for bs in block_sizes]
wasted = [slots.wasted(reserved) for reserved in [slots.contiguous, *slots.paged.values()]]
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
# Chats with one assistant start with the same system prompt; a few-shot template, a long
# document asked several questions and the turns of one conversation repeat a prefix too. A
# token's key and value depend on it and on the tokens before it only, so every request that
# starts with the same tokens computes the same keys and values for them. A server that keeps
# them computes the prefix once and lets the requests **share its blocks**. Two pieces make it
# work: finding a prefix already in the pool (hashes of full blocks), and sharing blocks safely
# (reference counts and copy-on-write).
#
# ### Finding a cached prefix: chained hashes of full blocks
#
# vLLM's automatic prefix caching names each **full** block by a hash of its tokens *and of its
# parent's hash*:
#
# ```
#  h_0 = hash((0, tuple(tokens[0 : bs])))            0 stands for "no parent"
#  h_i = hash((h_{i-1}, tuple(tokens[i*bs : (i+1)*bs])))
# ```
#
# Chained, `h_i` stands for the whole prefix up to the end of block `i`: the same tokens after
# another prefix get another hash, as they should, since their keys and values differ (other
# positions, other context in every layer below). A dictionary `hash -> block` then finds the
# longest cached prefix of a new prompt: walk its hashes until one is missing. Only full blocks
# get a hash: a partial block still changes as tokens arrive, so it is never shared this way.
#
# ### Exercise 3 · `block_hashes`
#
# **Difficulty** ●○○ · **Importance** ★★☆ (vLLM's `hash_block_tokens`) · **Time** ~10 min
#
# Given a list of token ids and the block size, return the list of hashes of the full blocks,
# chained as above (`len(token_ids) // bs` of them). The test judges what a prefix cache needs,
# not the values: the same first blocks hash the same whatever follows, a change in block `i`
# changes hashes `i, i + 1, …` and no earlier one, and the same tokens after another prefix or in
# another order hash differently. Python's `hash` of a tuple of ints is the same in every
# process, so any chaining of `hash` over tuples like the one above passes.
#
# <details><summary>Hint</summary>
#
# Keep `parent = 0`; for each full block `i`, `parent = hash((parent, tuple(block)))` and append
# it. `range(len(token_ids) // bs)` visits the full blocks only.
# </details>


# %% nbgrader={"grade": false, "grade_id": "block_hashes", "locked": false, "schema_version": 3, "solution": true, "task": false}
def block_hashes(token_ids: list[int], bs: int) -> list[int]:
    """One int per full block of ``token_ids``: ``h_i = hash((h_{i-1}, block_i's tokens))``,
    the first block's parent 0; the last block gets none unless it is full."""
    ### BEGIN SOLUTION
    hashes, parent = [], 0
    for i in range(len(token_ids) // bs):
        parent = hash((parent, tuple(token_ids[i * bs : (i + 1) * bs])))
        hashes.append(parent)
    return hashes
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_block_hashes", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""block_hashes: full blocks only, chained, equal for equal prefixes, order and prefix matter."""
check_block_hashes(block_hashes)
### BEGIN HIDDEN TESTS
check_block_hashes(block_hashes, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### Sharing blocks: reference counts and copy-on-write
#
# Once blocks are shared, a block is free only when no sequence holds it any more: each block
# keeps a **reference count**, the number of block tables that list it (0: free). Sharing is
# safe as long as nobody writes into a shared block. Prefix caching shares full blocks only, and
# new tokens go into the last block, so hashing alone never writes into one. **Forking** does:
# parallel sampling (`n > 1`) and beam search start several sequences from one prompt, sharing
# every block, the partial last one included, and each sample then writes its own next token
# there. vLLM's original block manager did what an operating system does for `fork()`'s memory
# pages: **copy-on-write**. The first write into a block whose reference count is above 1 copies it into
# a free block, and the writer continues in its copy.
#
# ```
#  bs = 4, a prompt of 6 tokens, two samples forked from it
#  table A = [3, 7]   table B = [3, 7]       ref_counts[3] = 2, ref_counts[7] = 2
#  A writes position 6: block 7 is shared -> copy it into free block 1, ref_counts[7] = 1
#  table A = [3, 1]   table B = [3, 7]       ref_counts[1] = 1
#  B writes position 6: block 7 is its own now (ref count 1) -> write in place
#  A writes position 8: block 1 is full -> take a free block (ref count 0 -> 1)
# ```
#
# ### Exercise 4 · `cow_append`
#
# **Difficulty** ●●○ · **Importance** ★★★ (vLLM's `append_slots` and copy-on-write) ·
# **Time** ~20 min
#
# One decoding step of one sequence. Given the pools `(num_blocks, bs, nkv, hs)`, the
# `ref_counts (num_blocks,)` of every block, the sequence's `block_table` (its
# `ceil(seq_len / bs)` blocks), the number `seq_len` of positions it holds, and the new token's
# `k_new, v_new (nkv, hs)` for position `seq_len`, return new `(k_pool, v_pool, ref_counts,
# block_table)`:
#
# - if the last block is full (`seq_len % bs == 0`), take a free block (any block whose
#   reference count is 0), give it reference count 1 and append it to the table;
# - else, if the last block is shared (reference count above 1), take a free block, copy the
#   last block into it, decrement the shared block's count, give the copy count 1 and put it in
#   the table in its place;
# - then write the token at block `table[seq_len // bs]`, slot `seq_len % bs`.
#
# A block another table holds is never written. As in exercise 1, leave the tensors you were
# given as they are and return new ones.
#
# <details><summary>Hint</summary>
#
# `i, slot = divmod(seq_len, bs)`. A free block: `int((ref_counts == 0).nonzero()[0])`. Clone
# the four tensors first; `k[new] = k[old]` copies a whole block; `torch.cat([table,
# torch.tensor([new])])` appends to the table.
# </details>


# %% nbgrader={"grade": false, "grade_id": "cow_append", "locked": false, "schema_version": 3, "solution": true, "task": false}
def cow_append(
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    ref_counts: torch.Tensor,
    block_table: torch.Tensor,
    seq_len: int,
    k_new: torch.Tensor,
    v_new: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """New ``(k_pool, v_pool, ref_counts, block_table)`` with ``k_new, v_new (nkv, hs)`` at
    position ``seq_len``: a free block when the last is full, a copy of it when it is shared."""
    ### BEGIN SOLUTION
    bs = k_pool.shape[1]
    k_out, v_out = k_pool.clone(), v_pool.clone()
    refs, table = ref_counts.clone(), block_table.clone()
    i, slot = divmod(seq_len, bs)
    if slot == 0:  # the last block is full: open a new one
        new = int((refs == 0).nonzero()[0])
        refs[new] = 1
        table = torch.cat([table, torch.tensor([new])])  # (n + 1,)
    elif refs[table[i]] > 1:  # shared: copy on write
        old, new = int(table[i]), int((refs == 0).nonzero()[0])
        k_out[new], v_out[new] = k_out[old], v_out[old]  # (bs, nkv, hs) each
        refs[old] -= 1
        refs[new] = 1
        table[i] = new
    k_out[table[i], slot], v_out[table[i], slot] = k_new, v_new
    return k_out, v_out, refs, table
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_cow_append", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
"""cow_append: forked sequences read back their own tokens; shared blocks are never written."""
check_cow_append(cow_append)
### BEGIN HIDDEN TESTS
check_cow_append(cow_append, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### What one system prompt saves
#
# A batch of 32 chats, each a 1000-token system prompt followed by the user's own message
# (log-normal, a median of 60 tokens), arriving one after another, with blocks of 16. With
# prefix caching the first chat computes and stores the system prompt; every later one finds its
# full blocks by their hashes (your `block_hashes`), holds them with its reference count, and
# prefills only what follows. The sizes are Llama 3 8B's (32 layers, width 4096, 8 key/value
# heads of 128, MLP width 14336, fp16 cache). Prefill FLOPs per token: `2 ×` the weights of the
# layers (a multiply and an add per weight), plus attention's `4 × C × (t + 1)` per layer for
# the token at position `t` (its scores and its weighted sum over `t + 1` keys).

# %%
bs, n_layers, C, nkv, hs, mlp = 16, 32, 4096, 8, 128, 14336
weights_per_layer = C * (2 * C + 2 * nkv * hs) + 3 * C * mlp  # W_q, W_o, W_k, W_v; SwiGLU
kv_bytes_per_token = 2 * n_layers * nkv * hs * 2  # K and V, every layer, fp16


def prefill_flops(start: int, end: int) -> int:
    """FLOPs to prefill positions start … end - 1 when the earlier ones are cached."""
    attention = sum(4 * C * (t + 1) for t in range(start, end))
    return n_layers * (2 * weights_per_layer * (end - start) + attention)


gen = torch.Generator().manual_seed(0)
system = torch.randint(0, 128_000, (1000,), generator=gen).tolist()
own = lognormal_lengths(32, median=60, sigma=0.8, cap=1000, seed=1)
chats = [system + torch.randint(0, 128_000, (n,), generator=gen).tolist() for n in own]

cached: set[int] = set()  # hashes of the full blocks already in the pool
blocks = {"without": 0, "with": 0}
flops = {"without": 0, "with": 0}
for chat in chats:
    hashes = block_hashes(chat, bs)
    hits = next((i for i, h in enumerate(hashes) if h not in cached), len(hashes))
    cached.update(hashes)
    blocks["without"] += math.ceil(len(chat) / bs)
    blocks["with"] += math.ceil(len(chat) / bs) - hits  # the hits' blocks are shared
    flops["without"] += prefill_flops(0, len(chat))
    flops["with"] += prefill_flops(hits * bs, len(chat))

print(f"shared per chat: {len(system) // bs} full blocks = {len(system) // bs * bs} tokens")
print(f"{'':8s} {'KV blocks':>10s} {'KV GB':>7s} {'prefill TFLOPs':>15s}")
for way in blocks:
    gb = blocks[way] * bs * kv_bytes_per_token / 1e9
    print(f"{way:8s} {blocks[way]:10d} {gb:7.2f} {flops[way] / 1e12:15.1f}")
print(
    f"saved: {100 * (1 - blocks['with'] / blocks['without']):.0f}% of the KV memory, "
    f"{100 * (1 - flops['with'] / flops['without']):.0f}% of the prefill FLOPs"
)

# %% [markdown]
# Both savings grow with the share of the prompt that is common, and they are counted on the
# blocks: the system prompt's last `1000 % 16 = 8` tokens share a block with each user's own
# message, so every chat recomputes and stores them. Decoding is not cheaper: each new token
# still reads the whole prefix, shared or not. Real servers also evict cached blocks whose
# count fell to 0 when the pool runs short (least recently used first, in vLLM), so a prefix is
# found only while it is still in the pool.

# %% [markdown]
# ## 3 · Continuous batching over packed sequences
#
# A server's batch holds sequences of different lengths. Padding them to one `(B, S)` tensor
# spends compute on padding, and the set of sequences changes at every step as requests finish
# and new ones arrive. Serving engines **pack** instead: the tokens of every sequence of the
# step one after another in one `(N, C)` tensor, `N` the total number of tokens, and a vector
# `cu_seqlens (B + 1,)` of boundaries, the running sum of the lengths from 0. Sequence `b` is
# rows `cu_seqlens[b] : cu_seqlens[b + 1]`:
#
# ```
#  lengths 3, 5, 1      packed rows 0-2 | 3-7 | 8      cu_seqlens = [0, 3, 8, 9]
#  padded to (3, 5): 15 slots for 9 tokens
# ```
#
# The projections and the MLP act on each token alone, so they run on `(N, C)` as they would on
# `(B, S, C)`; only attention must know where a sequence ends. This is FlashAttention's varlen
# layout: `flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
# max_seqlen_k, causal=True)` with `q (N, nh, hs)` and `k, v (N, nkv, hs)`, the layout vLLM's
# FlashAttention backend and Hugging Face's FlashAttention-2 path run on.
#
# ### Exercise 5 · `pack`
#
# **Difficulty** ●○○ · **Importance** ★★☆ (flash-attn's `unpad_input`) · **Time** ~10 min
#
# Given a padded batch `x (B, S, …)` and its `attention_mask (B, S)` (bool, True where a token is
# real; the padding may be on the left or on the right), return `(packed, cu_seqlens)`: the real
# tokens `(N, …)`, sequence after sequence and each in its order, and the boundaries
# `(B + 1,)` as `torch.int32`, the dtype FlashAttention's kernels require.
#
# <details><summary>Hint</summary>
#
# Boolean indexing `x[attention_mask]` reads the kept positions row by row. The lengths are
# `attention_mask.sum(1)`; `torch.cumsum(lengths, 0, dtype=torch.int32)` and `F.pad(…, (1, 0))`
# put the 0 in front.
# </details>


# %% nbgrader={"grade": false, "grade_id": "pack", "locked": false, "schema_version": 3, "solution": true, "task": false}
def pack(x: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(packed (N, …), cu_seqlens (B + 1,) int32)``: the real tokens of ``x (B, S, …)`` where
    ``attention_mask (B, S)`` is True, one sequence after another, and their boundaries."""
    ### BEGIN SOLUTION
    lengths = attention_mask.sum(1)  # (B,)
    cu_seqlens = F.pad(torch.cumsum(lengths, 0, dtype=torch.int32), (1, 0))  # (B + 1,)
    return x[attention_mask], cu_seqlens  # (N, ...), (B + 1,)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_pack", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""pack: the real tokens sequence after sequence, and int32 cu_seqlens from 0."""
check_pack(pack)
### BEGIN HIDDEN TESTS
check_pack(pack, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 6 · `varlen_attention`
#
# **Difficulty** ●●○ · **Importance** ★★★ (FlashAttention's varlen API) · **Time** ~20 min
#
# Given packed `q (N, nh, hs)`, `k, v (N, nkv, hs)` and `cu_seqlens (B + 1,)`, return
# `(N, nh, hs)`: each sequence's queries attending to **its own** keys only (causal inside the
# sequence when `causal`), exactly as running each sequence alone would, the outputs packed the
# same way. With GQA, query head `h` reads key head `h // (nh // nkv)`. Three ways are right:
#
# - a loop over the sequences, slicing rows `cu_seqlens[b] : cu_seqlens[b + 1]`;
# - one attention over the whole packed tensor with a **block-diagonal** `(N, N)` mask, causal
#   inside each block: token `p` belongs to sequence `b` when
#   `cu_seqlens[b] <= p < cu_seqlens[b + 1]`;
# - what FlashAttention's kernel does: tiles of one sequence at a time, never building the mask.
#
# The mask costs `N²` memory, most of it to say "another sequence": fine here, not at 100,000
# tokens a step. A causal mask over the packed tensor that forgets the boundaries lets each
# sequence read the ones packed before it, and nothing fails loudly: the output has the right
# shape.
#
# <details><summary>Hint</summary>
#
# Loop: `bounds = cu_seqlens.tolist()`; for `start, end` in consecutive pairs, move the heads
# first (`q[start:end].transpose(0, 1)`, `(nh, L, hs)`) and call
# `F.scaled_dot_product_attention(…, is_causal=causal, enable_gqa=True)`; transpose back and
# `torch.cat` the outputs.
# </details>


# %% nbgrader={"grade": false, "grade_id": "varlen_attention", "locked": false, "schema_version": 3, "solution": true, "task": false}
def varlen_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    causal: bool = True,
) -> torch.Tensor:
    """``(N, nh, hs)``: the queries of each sequence ``cu_seqlens[b] : cu_seqlens[b + 1]`` of
    ``q (N, nh, hs)`` attending to the same rows of ``k, v (N, nkv, hs)`` only."""
    ### BEGIN SOLUTION
    bounds = cu_seqlens.tolist()
    out = []
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        qs, ks, vs = (t[start:end].transpose(0, 1) for t in (q, k, v))  # (nh|nkv, L, hs)
        o = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, enable_gqa=True)
        out.append(o.transpose(0, 1))  # (nh, L, hs) -> (L, nh, hs)
    return torch.cat(out)  # (N, nh, hs)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_varlen_attention", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
"""varlen_attention equals attention over each packed sequence alone, causal or not."""
check_varlen_attention(varlen_attention)
### BEGIN HIDDEN TESTS
check_varlen_attention(varlen_attention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### Continuous batching: a slot is refilled the step after it frees
#
# A server runs one forward pass per step over the `B` sequences it holds, and each gets one new
# token. **Static** batching takes `B` requests and runs them until the longest is done: a slot
# whose request finished early idles, as padding, until the whole batch ends. **Continuous**
# batching (Orca's iteration-level scheduling, vLLM's scheduler) looks at the batch at every
# step: a finished request leaves at once and a waiting one takes its slot, its prompt packed
# into the same step beside the others' single tokens. The packed layout is what makes this
# cheap: a step's batch is just another `cu_seqlens`.
#
# The simulation below serves 512 requests with log-normal output lengths (a median of 128
# tokens) through 32 slots, both ways; `simulate` (in `autograder/tools/nb09_serving_sim.py`) is
# the step scheduler, and `python -m autograder.bench.serving` prints the same numbers. The
# model takes every step to cost the same whatever the number of busy slots, as when decoding
# is bound by reading every weight once per step: then the steps' count is the time.

# %%
outputs = lognormal_lengths(512, median=128, sigma=1.0, cap=2048, seed=1)
runs = {policy: simulate(outputs, 32, policy) for policy in ("static", "continuous")}
fig, ax = plt.subplots(figsize=(8, 3))
for policy, run in runs.items():
    ax.plot(run.tokens_per_step, lw=0.8, label=f"{policy}: {run.throughput:.1f} tokens/step")
ax.set_xlabel("step")
ax.set_ylabel("tokens in the step")
ax.set_ylim(0, 34)
ax.legend(loc="upper right")
plt.tight_layout()
plt.show()
for policy, run in runs.items():
    print(
        f"{policy:10s} {run.steps:6d} steps for {run.tokens} tokens, "
        f"{run.padding:.0f}% of the slot-steps idle"
    )
speedup = runs["static"].steps / runs["continuous"].steps
print(f"continuous batching takes {speedup:.1f}x fewer steps for the same tokens")

# %% [markdown]
# Static batching's idle slots come from the skew of the lengths: a batch of 32 lasts as long as
# its longest request, several times the median. Continuous batching idles only at the end,
# when the queue is empty. The model leaves out what a real server adds: a step with prompts to
# prefill costs more than a decoding step (section 4 bounds it with chunked prefill), a step's
# cost grows with the tokens it holds once compute, not reading the weights, is the limit, and
# the KV pool bounds how many sequences fit at once, which is what the paged cache of section 1
# raises.

# %% [markdown]
# ## 4 · Chunked prefill
#
# A server's step runs one forward pass over every token it was given. Decoding requests bring
# one token each; a new request brings its whole prompt. Prefill a 4k-token prompt in one step
# and every decoding request in that step waits for it: their next token comes late. **Chunked
# prefill** (Sarathi-Serve, Agrawal et al. 2024; vLLM's `--enable-chunked-prefill`) cuts the
# prompt into chunks of `c` tokens, one chunk per step, beside the decoding requests.
#
# Each chunk writes its keys and values into the cache, then its `T` queries attend to the
# whole cache so far: the earlier chunks and itself, `S = start + T` keys. Its mask is notebook
# 03's causal mask **aligned bottom-right**: query `t` of the chunk sits at position
# `S - T + t` and may see keys `0 … S - T + t`.
#
# ```
#  a prompt of 7 tokens in chunks of 3: the third chunk (T = 1) is shorter
#  chunk 0: positions 0-2, keys 0-2     chunk 1: positions 3-5, keys 0-5
#        k0 k1 k2                              k0 k1 k2 k3 k4 k5
#    q0   x  .  .                          q3   x  x  x  x  .  .
#    q1   x  x  .                          q4   x  x  x  x  x  .
#    q2   x  x  x                          q5   x  x  x  x  x  x
# ```
#
# A decoding request is the chunk of one token (`T = 1`, every key allowed), so one rule serves
# both kinds of request: this is how FlashAttention's varlen kernel (`seqlens_q` beside
# `seqlens_k`) and vLLM's attention backends run a mixed step.
#
# ### Exercise 7 · `prefill_chunk`
#
# **Difficulty** ●○○ · **Importance** ★★★ (every mixed prefill/decode step) · **Time** ~10 min
#
# Given the chunk's queries `q (nh, T, hs)` and the cache once the chunk is written, `k, v
# (nh, S, hs)` with `S >= T`, return the chunk's output `(nh, T, hs)`. Fed the chunks of a
# prompt in order, your function must give exactly what one causal pass over the whole prompt
# gives, for every chunk size (the test tries sizes that leave a last, shorter chunk).
#
# <details><summary>Hint</summary>
#
# `is_causal=True` aligns the mask top-left: right only when `T == S` (the first chunk). Build
# the mask: `torch.ones(T, S, dtype=torch.bool).tril(S - T)` keeps key `j` for query `t` when
# `j <= t + S - T`, and pass it to `F.scaled_dot_product_attention` as `attn_mask`. PyTorch's
# `torch.nn.attention.bias.causal_lower_right(T, S)` (notebook 03) is the same mask, ready-made.
# </details>


# %% nbgrader={"grade": false, "grade_id": "prefill_chunk", "locked": false, "schema_version": 3, "solution": true, "task": false}
def prefill_chunk(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``(nh, T, hs)``: the chunk's queries ``q (nh, T, hs)``, the last ``T`` of ``S`` positions,
    attending causally to the cache ``k, v (nh, S, hs)``."""
    ### BEGIN SOLUTION
    T, S = q.shape[-2], k.shape[-2]
    allowed = torch.ones(T, S, dtype=torch.bool).tril(S - T)  # (T, S), bottom-right
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)  # (nh, T, hs)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_prefill_chunk", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
"""prefill_chunk: the chunks of a prompt, in order, give one causal pass over it."""
check_prefill_chunk(prefill_chunk)
### BEGIN HIDDEN TESTS
check_prefill_chunk(prefill_chunk, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### A mixed step, run with your function
#
# One step of a server: a 10-token prompt's second chunk (positions 4-7) beside three
# decoding requests of other lengths. Each request is one call of `prefill_chunk` over its own
# cache; the decoding ones are chunks of one token. Each output equals what running that request
# alone, in one causal pass, gives at the same positions.

# %%
nh_demo, hs_demo = 2, 8
requests = {"prompt, chunk 4-7": (10, 4, 8), "decode A": (5, 4, 5), "decode B": (13, 12, 13)}
for name, (length, start, stop) in requests.items():
    q_all, k_all, v_all = torch.randn(3, nh_demo, length, hs_demo)
    alone = F.scaled_dot_product_attention(q_all, k_all, v_all, is_causal=True)  # (nh, L, hs)
    step = prefill_chunk(q_all[:, start:stop], k_all[:, :stop], v_all[:, :stop])  # (nh, T, hs)
    error = (step - alone[:, start:stop]).abs().max()
    print(f"{name:18} T={stop - start} queries over S={stop} keys: max error {error:.1e}")

# %% [markdown]
# ### Why chunking bounds the decoding latency
#
# Two latencies matter to a user: the **time to first token** (TTFT) of a new request, and the
# **time per output token** (TPOT) of those already decoding. A simple cost model: a step that
# processes `n` tokens takes `a + b·n`. At small batches `a` is the time to read the weights
# once; `b` is the compute per token. Round numbers for a 7B model in float16 on one H100-class
# GPU (assumptions, not a measurement): reading 14 GB at ~3 TB/s gives `a ≈ 5 ms`, and 2 × 7·10⁹
# FLOPs per token at ~400 TFLOP/s gives `b ≈ 0.035 ms`. The model leaves out that attention's
# cost grows with the keys a chunk reads, which makes later chunks a little dearer.
#
# 32 requests are decoding when a 4096-token prompt arrives. Whole, it shares one step of 4128
# tokens with them; in chunks of `c`, it takes `4096 / c` steps of `c + 32` tokens.

# %%
a_ms, b_ms = 5.0, 0.035  # per step, per token (assumed, see above)
prompt_len, decoders = 4096, 32
decode_only = a_ms + b_ms * decoders
print(f"a step of {decoders} decoders alone: {decode_only:.1f} ms per output token")
print(f"{'prefill':>14} {'steps':>6} {'TTFT (ms)':>10} {'decoders TPOT (ms)':>19}")
chunk_sizes = [4096, 2048, 1024, 512, 256, 128]
ttft, tpot = [], []
for c in chunk_sizes:
    steps = math.ceil(prompt_len / c)
    step_ms = a_ms + b_ms * (c + decoders)  # every step of the prefill carries a full chunk
    ttft.append(steps * step_ms)
    tpot.append(step_ms)
    label = "whole" if c == prompt_len else f"chunks of {c}"
    print(f"{label:>14} {steps:>6} {ttft[-1]:>10.0f} {tpot[-1]:>19.1f}")

fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(tpot, ttft, "o-")
for c, x, y in zip(chunk_sizes, tpot, ttft, strict=True):
    ax.annotate(
        "whole" if c == prompt_len else f"c={c}", (x, y), textcoords="offset points", xytext=(5, 5)
    )
ax.axvline(decode_only, color="gray", ls=":", label="decoders alone")
ax.set_xlabel("decoders' time per output token while the prompt is prefilled (ms)")
ax.set_ylabel("new request's TTFT (ms)")
ax.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# Whole, the prompt stalls all 32 decoders for one step ~25 times as long as their usual one.
# Chunks of 512 cap their step at ~4 times as long, and the prompt's first token comes ~30%
# later: chunking trades a little TTFT for a bound on TPOT. Small chunks pay the fixed cost
# `a` once per chunk, so TTFT grows fast below a few hundred tokens; that is why servers pick a
# token budget per step and fill it with decodes first, then as much prefill as fits. vLLM calls
# it `max_num_batched_tokens`: 512 when chunked prefill arrived, and in its V1 engine a default
# of 2,048 to 16,384 that depends on the GPU and on offline or server use (look it up for your
# version: the trade above is the reason it is a setting).

# %% [markdown]
# ## 5 · Split-KV decoding (FlashDecoding)
#
# A FlashAttention kernel gives each (sequence, head) one block of threads, which walks that
# query's keys from first to last. In training, the many query tiles fill the GPU. In decoding
# there is one query per head: with one sequence and 32 heads, 32 blocks, on a GPU of 132
# streaming multiprocessors (SMs). **Split-KV** decoding (FlashDecoding, Dao et al. 2023) cuts
# the cache into `P` chunks, attends to them in parallel, and merges the results.
#
# The merge is exact because a chunk's result carries what notebook 06's online softmax
# carries: its output `o_p` (normalised within the chunk) and the log-sum-exp of its scores,
# `lse_p = log Σ_{j in chunk p} exp(s_j)`. The whole cache's softmax mass is `Σ_p exp(lse_p)`,
# so chunk `p`'s share of it is
#
# $$w_p = \exp(\mathrm{lse}_p - \mathrm{lse}), \qquad \mathrm{lse} = \log \sum_p \exp(\mathrm{lse}_p), \qquad o = \sum_p w_p\, o_p .$$
#
# An empty chunk (possible when there are more splits than keys, or a causal mask hides a whole
# chunk) has no mass: `o_p = 0`, `lse_p = -inf`, `w_p = 0`.
#
# ### Exercise 8 · `attend_chunk`
#
# **Difficulty** ●○○ · **Importance** ★★★ (what every split, tile and device returns) · **Time**
# ~10 min
#
# Return `(o, lse)` for queries `q (B, nh, T, hs)` over one chunk of keys `k, v (B, nh, n, hs)`:
# `o (B, nh, T, hs)` is attention over the chunk alone, `lse (B, nh, T)` the log-sum-exp of the
# scaled scores `q·kᵀ/√hs`. An empty chunk (`n = 0`) must give `o = 0` and `lse = -inf`, with
# no NaN. Write it by hand (PyTorch's attention does not return `lse`); scores may be in the
# hundreds, where `exp` overflows float32.
#
# <details><summary>Hint</summary>
#
# `torch.logsumexp(scores, -1)` subtracts the max for you and returns -inf for an empty row;
# then `torch.exp(scores - lse[..., None]) @ v` is the softmax times `v`, and 0 for an empty
# chunk. `.amax(-1)` of an empty row raises.
# </details>


# %% nbgrader={"grade": false, "grade_id": "attend_chunk", "locked": false, "schema_version": 3, "solution": true, "task": false}
def attend_chunk(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(o (B, nh, T, hs), lse (B, nh, T))`` of ``q (B, nh, T, hs)`` over the chunk ``k, v
    (B, nh, n, hs)``; ``o = 0`` and ``lse = -inf`` when ``n = 0``."""
    ### BEGIN SOLUTION
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, nh, T, hs) @ (B, nh, hs, n)
    lse = torch.logsumexp(scores, dim=-1)  # (B, nh, T)
    return torch.exp(scores - lse[..., None]) @ v, lse  # (B, nh, T, n) @ (B, nh, n, hs)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_attend_chunk", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""attend_chunk: attention over the chunk and its log-sum-exp; an empty chunk gives (0, -inf)."""
check_attend_chunk(attend_chunk)
### BEGIN HIDDEN TESTS
check_attend_chunk(attend_chunk, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 9 · `merge_splits`
#
# **Difficulty** ●●○ · **Importance** ★★★ (FlashDecoding's combine, vLLM's `merge_attn_states`,
# ring attention) · **Time** ~15 min
#
# Given the states of `P` chunks of one cache, stacked: `outputs (P, B, nh, T, hs)` and
# `lses (P, B, nh, T)`, return `(o, lse)`: attention over the whole cache `(B, nh, T, hs)` and
# its log-sum-exp `(B, nh, T)`. Any chunk may be empty (`lse = -inf`), the first ones included;
# every query has at least one non-empty chunk. The lses may be in the hundreds: `exp(lse)`
# itself overflows float32.
#
# <details><summary>Hint</summary>
#
# `lse = torch.logsumexp(lses, 0)`, then weights `torch.exp(lses - lse)` `(P, B, nh, T)`, which
# sum to 1 over the splits; `(weights[..., None] * outputs).sum(0)`. The weights are a softmax of
# the lses over the splits. Averaging the outputs, or weighting them by their chunk's length,
# ignores how much mass each chunk holds.
# </details>


# %% nbgrader={"grade": false, "grade_id": "merge_splits", "locked": false, "schema_version": 3, "solution": true, "task": false}
def merge_splits(outputs: torch.Tensor, lses: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(o (B, nh, T, hs), lse (B, nh, T))``: the states ``outputs (P, B, nh, T, hs)`` and
    ``lses (P, B, nh, T)`` of ``P`` chunks of one cache, merged exactly."""
    ### BEGIN SOLUTION
    lse = torch.logsumexp(lses, dim=0)  # (B, nh, T)
    weights = torch.exp(lses - lse)  # (P, B, nh, T): each chunk's share of the mass
    return (weights[..., None] * outputs).sum(0), lse  # (B, nh, T, hs), (B, nh, T)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_merge_splits", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
"""merge_splits: exact for any number of splits, empty ones and large scores included."""
check_merge_splits(merge_splits)
### BEGIN HIDDEN TESTS
check_merge_splits(merge_splits, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 10 · `split_kv_decode`
#
# **Difficulty** ●○○ · **Importance** ★★☆ · **Time** ~10 min
#
# Put them together: cut the cache `k, v (B, nh, L, hs)` into `num_splits` contiguous chunks
# along the keys, attend to each with `attend_chunk`, merge with `merge_splits`, and return
# `o (B, nh, T, hs)`, equal to attention over the whole cache. `num_splits` may exceed `L`.
# On a GPU the chunks run at once; here a loop shows the arithmetic.
#
# <details><summary>Hint</summary>
#
# `torch.tensor_split(k, num_splits, dim=-2)` gives `num_splits` chunks whose sizes differ by
# at most one, empty ones when `num_splits > L`. FlashDecoding gives each split `ceil(L / P)`
# keys (the last ones shorter or empty); any cut works as long as every key is in exactly one
# chunk. Stack the states with `torch.stack`.
# </details>


# %% nbgrader={"grade": false, "grade_id": "split_kv_decode", "locked": false, "schema_version": 3, "solution": true, "task": false}
def split_kv_decode(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num_splits: int
) -> torch.Tensor:
    """``(B, nh, T, hs)``: ``q (B, nh, T, hs)`` over ``k, v (B, nh, L, hs)`` cut into
    ``num_splits`` chunks, each attended alone, then merged."""
    ### BEGIN SOLUTION
    states = [
        attend_chunk(q, k_part, v_part)
        for k_part, v_part in zip(
            torch.tensor_split(k, num_splits, dim=-2),
            torch.tensor_split(v, num_splits, dim=-2),
            strict=True,
        )
    ]
    outputs = torch.stack([o for o, _ in states])  # (P, B, nh, T, hs)
    lses = torch.stack([lse for _, lse in states])  # (P, B, nh, T)
    return merge_splits(outputs, lses)[0]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_split_kv_decode", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""split_kv_decode equals attention over the whole cache, for any number of splits."""
check_split_kv_decode(split_kv_decode)
### BEGIN HIDDEN TESTS
check_split_kv_decode(split_kv_decode, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### Why split: work per SM for one sequence
#
# A cost model of the decode kernel: one thread block per (sequence, head, split), each reading
# `L / P` keys; blocks run in waves of 132 (one per SM of an H100); the time is the number of
# waves times the keys a block reads, plus a merge that is small beside it. One sequence, 32
# heads, a 32k-token cache:

# %%
sms, heads, cache_len = 132, 32, 32768
splits = list(range(1, 17))
busy, relative = [], []
for P in splits:
    blocks = heads * P
    waves = math.ceil(blocks / sms)
    busy.append(100 * blocks / (waves * sms))  # share of SM-time doing work
    relative.append(waves * math.ceil(cache_len / P) / cache_len)  # time, no splits = 1
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.2))
left.bar(splits, busy)
left.set_xlabel("splits P")
left.set_ylabel("% of SM-time busy")
right.plot(splits, relative, "o-")
right.set_xlabel("splits P")
right.set_ylabel("time (1 = no splits)")
right.set_yscale("log")
plt.tight_layout()
plt.show()
best = min(splits, key=lambda P: relative[P - 1])
print(f"no splits: {busy[0]:.0f}% of the SMs busy; best P = {best}: time x{relative[best - 1]:.2f}")

# %% [markdown]
# Without splits 32 of 132 SMs work and 100 wait. Four splits make 128 blocks, one wave, about
# 4 times faster in this model; five make 160, two waves, and are slower than four. The model
# ignores memory bandwidth shared by the SMs, the merge and launch costs, so measured speedups
# are smaller; FlashAttention picks the number of splits with the same wave arithmetic
# (`num_splits_heuristic` in its `flash_api.cpp`). With a large batch the blocks already fill the
# GPU, and splitting only adds the merge.
#
# ### The same merge across devices: ring attention
#
# Ring attention (Liu et al. 2023) spreads a sequence too long for one GPU over `N` devices:
# device `d` holds the queries, keys and values of positions `d·n … (d+1)·n - 1`. At each of
# `N` steps every device attends its queries to the key/value shard it holds, merges the
# `(o, lse)` into its running state, and passes the shard to the next device on the ring (the
# transfer overlaps the compute). Causal: a shard from the future is an **empty** split (no
# key allowed); the device's own shard needs the causal mask, done here one query at a time
# with `attend_chunk` over the keys it may see. The running state starts empty: `(0, -inf)`.
# Below, 4 "devices" in one process, with your `attend_chunk` and `merge_splits`.

# %%
devices, shard, nh_ring, hs_ring = 4, 3, 2, 8
q_seq, k_seq, v_seq = torch.randn(3, 1, nh_ring, devices * shard, hs_ring)
q_of = list(q_seq.split(shard, dim=-2))  # device d's queries (1, nh, n, hs), kept in place
held = [(k, v) for k, v in zip(k_seq.split(shard, -2), v_seq.split(shard, -2), strict=True)]
state = [(torch.zeros_like(q), torch.full(q.shape[:-1], float("-inf"))) for q in q_of]
for step in range(devices):
    for d in range(devices):
        source = (d - step) % devices  # the device whose shard d holds at this step
        k_held, v_held = held[d]
        if source < d:  # an earlier shard: every key allowed
            o_new, lse_new = attend_chunk(q_of[d], k_held, v_held)
        elif source == d:  # its own shard: causal, query t sees keys 0 … t
            rows = [
                attend_chunk(
                    q_of[d][..., t : t + 1, :], k_held[..., : t + 1, :], v_held[..., : t + 1, :]
                )
                for t in range(shard)
            ]
            o_new = torch.cat([o for o, _ in rows], dim=-2)
            lse_new = torch.cat([lse for _, lse in rows], dim=-1)
        else:  # a later shard: an empty split
            o_new, lse_new = attend_chunk(q_of[d], k_held[..., :0, :], v_held[..., :0, :])
        o_run, lse_run = state[d]
        state[d] = merge_splits(torch.stack([o_run, o_new]), torch.stack([lse_run, lse_new]))
    held = held[-1:] + held[:-1]  # pass every shard to the next device
ring = torch.cat([o for o, _ in state], dim=-2)  # (1, nh, N·n, hs)
whole = F.scaled_dot_product_attention(q_seq, k_seq, v_seq, is_causal=True)
print(
    f"ring attention over {devices} devices vs one causal pass: max error "
    f"{(ring - whole).abs().max():.1e}"
)

# %% [markdown]
# Device 0's first merge joins its empty start with its own shard, and later it merges three
# empty splits from the future: a merge that turned `exp(-inf - (-inf))` into NaN would have
# spoiled its queries at once. Real implementations skip the future shards' compute instead
# (and balance the load by giving each device two shards, one early and one late), but the
# merge is the one you wrote.
# %% [markdown]
# ## 6 · Speculative decoding's verification
#
# Decoding reads every weight and the whole cache to produce one token, so the GPU idles on
# memory traffic (the interview-preparation notebook puts a number on it). **Speculative decoding**
# lets a small draft model propose `k` tokens, one by one and cheaply; the target model then
# scores all of them in **one** pass, and keeps the longest prefix it agrees with. That pass is
# exactly a chunk of `k + 1` queries over the cache: the last emitted token and the `k` drafts,
# each attending to the cache and to the tokens before it, the bottom-right causal mask of
# notebook 03.
#
# ```
#  cache (L positions)       queries of the target pass      its k + 1 output rows predict
#  t_0 … t_{L-1}             t_L, d_0, d_1, …, d_{k-1}        d_0, d_1, …, d_{k-1}, bonus
# ```
#
# Row `i` of the target's output is its own prediction for draft `i`; row `k`, after the last
# draft, predicts one more token for free when every draft is accepted (the **bonus** token).
# The check below shows that the pass gives what `k + 1` single decoding steps give.

# %%
from torch.nn.attention.bias import causal_lower_right

L, k, nh, hs = 9, 4, 2, 8
q, keys, values = (torch.randn(nh, L + k + 1, hs) for _ in range(3))  # (nh, L + k + 1, hs)
one_pass = F.scaled_dot_product_attention(
    q[:, L:], keys, values, attn_mask=causal_lower_right(k + 1, L + k + 1)
)  # (nh, k + 1, L + k + 1) weights -> (nh, k + 1, hs)
step_by_step = torch.stack(
    [
        F.scaled_dot_product_attention(q[:, t : t + 1], keys[:, : t + 1], values[:, : t + 1])[:, 0]
        for t in range(L, L + k + 1)
    ],
    dim=1,
)  # (nh, k + 1, hs)
same = torch.allclose(one_pass, step_by_step, atol=1e-6)
print("one pass of k + 1 queries == k + 1 decoding steps:", same)

# %% [markdown]
# ### Exercise 11 · `accept_greedy`
#
# **Difficulty** ●○○ · **Importance** ★★★ (Hugging Face's assisted generation, vLLM's greedy
# rejection sampler) · **Time** ~10 min
#
# With greedy decoding the target would emit its argmax at every position, so draft `i` is
# right exactly when it equals `target_logits[i].argmax()`, **and** every draft before it was
# right: a draft after a wrong one was drafted from a wrong prefix. Given `draft_tokens (N, k)`
# (`N` independent sequences) and the target pass's `target_logits (N, k + 1, V)`, return
# `(n_accepted, next_token)`, both long tensors of shape `(N,)`:
#
# - `n_accepted[b]`: how many leading drafts of row `b` equal the target's argmax (0 … k);
# - `next_token[b]`: the target's argmax at row `n_accepted[b]`: the correction of the first
#   wrong draft, or the bonus token when all `k` were right.
#
# Each verification step thus emits `n_accepted + 1` tokens, never fewer than plain decoding.
# Use tensor operations only (no `.item()`, no Python `if` on values): a server runs the
# whole batch at once.
#
# <details><summary>Hint</summary>
#
# `best = target_logits.argmax(-1)` is `(N, k + 1)`; `draft_tokens == best[:, :k]` marks the
# matches. A cumulative product along the drafts (`.long().cumprod(-1)`) stays 1 until the
# first mismatch, so its sum counts the leading matches. `best.gather(-1, n[:, None])` picks
# one row per sequence.
# </details>


# %% nbgrader={"grade": false, "grade_id": "accept_greedy", "locked": false, "schema_version": 3, "solution": true, "task": false}
def accept_greedy(
    draft_tokens: torch.Tensor, target_logits: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(n_accepted (N,), next_token (N,))`` for drafts ``(N, k)`` scored by the target's
    ``target_logits (N, k + 1, V)``, row ``i`` predicting draft ``i``."""
    ### BEGIN SOLUTION
    k = draft_tokens.shape[1]
    best = target_logits.argmax(-1)  # (N, k + 1)
    n_accepted = (draft_tokens == best[:, :k]).long().cumprod(-1).sum(-1)  # (N,)
    next_token = best.gather(-1, n_accepted[:, None])[:, 0]  # (N,)
    return n_accepted, next_token
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_accept_greedy", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""accept_greedy: the leading drafts equal to the target's argmax, then its argmax at that row."""
check_accept_greedy(accept_greedy)
### BEGIN HIDDEN TESTS
check_accept_greedy(accept_greedy, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 12 · `speculative_accept`: the rejection-sampling rule
#
# **Difficulty** ●●○ · **Importance** ★★★ (Leviathan et al. 2023; Chen et al. 2023; vLLM's
# `RejectionSampler`) · **Time** ~20 min
#
# When both models sample, the draft proposed `x` with probability `q(x)` and the target would
# have emitted it with probability `p(x)`. The rule that makes the output follow `p` exactly,
# however poor the draft, is:
#
# 1. accept draft `x` with probability `min(1, p(x) / q(x))`: always when the target likes it
#    at least as much as the draft did, less often when the draft over-proposes it;
# 2. at the first rejection, stop, and sample the correction from the **residual**
#    `norm(max(0, p - q))`: the mass the target has where the draft has too little;
# 3. if all `k` drafts are accepted, sample the bonus token from the target's row `k`.
#
# Why it works, for one draft: `P(emit y) = q(y)·min(1, p(y)/q(y)) + P(reject)·r(y)
# = min(q(y), p(y)) + max(0, p(y) - q(y)) = p(y)`, because `P(reject) = Σ max(0, q - p)
# = Σ max(0, p - q)`, the residual's normaliser.
#
# So that your function is deterministic and checkable, the randomness is given to you:
# `uniforms (N, k + 1)`, each uniform on `[0, 1)`. Draft `i` is accepted when
# `uniforms[b, i] < min(1, p(x)/q(x))`; the next token is drawn with `u = uniforms[b, k]` by
# **inverse CDF**: the smallest token `j` whose cumulative probability `cdf[j]` exceeds `u`
# (the last token if rounding leaves none). Inputs: `draft_tokens (N, k)`, the draft's
# probabilities `p_draft (N, k, V)` (row `i` is `q` for draft `i`) and the target's
# `p_target (N, k + 1, V)`. Return `(n_accepted, next_token)` as in exercise 11.
#
# <details><summary>Hint</summary>
#
# `gather(-1, draft_tokens[..., None])` reads `p(x)` and `q(x)`, `(N, k)`. The leading
# acceptances are counted as in exercise 11. The residual of every row is
# `(p_target[:, :k] - p_draft).clamp(min=0)`, divided by its sum over the vocabulary;
# `torch.cat` it with `p_target[:, k:]` into `(N, k + 1, V)` and gather row `n_accepted` of
# each sequence. `(dist.cumsum(-1) <= u[:, None]).sum(-1)` counts the tokens whose cumulative
# probability is not above `u`: that is the index of the first one that is.
# </details>


# %% nbgrader={"grade": false, "grade_id": "speculative_accept", "locked": false, "schema_version": 3, "solution": true, "task": false}
def speculative_accept(
    draft_tokens: torch.Tensor,
    p_draft: torch.Tensor,
    p_target: torch.Tensor,
    uniforms: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(n_accepted (N,), next_token (N,))`` by the rejection-sampling rule, for drafts
    ``(N, k)`` drawn from ``p_draft (N, k, V)``, the target's ``p_target (N, k + 1, V)`` and
    ``uniforms (N, k + 1)``."""
    ### BEGIN SOLUTION
    N, k, V = p_draft.shape
    x = draft_tokens[..., None]  # (N, k, 1)
    ratio = p_target[:, :k].gather(-1, x)[..., 0] / p_draft.gather(-1, x)[..., 0]  # (N, k)
    accepted = uniforms[:, :k] < ratio.clamp(max=1)  # (N, k)
    n_accepted = accepted.long().cumprod(-1).sum(-1)  # (N,)
    residual = (p_target[:, :k] - p_draft).clamp(min=0)  # (N, k, V)
    residual = residual / residual.sum(-1, keepdim=True)
    dists = torch.cat([residual, p_target[:, k:]], dim=1)  # (N, k + 1, V)
    dist = dists.gather(1, n_accepted[:, None, None].expand(N, 1, V))[:, 0]  # (N, V)
    below = dist.cumsum(-1) <= uniforms[:, k:]  # (N, V)
    next_token = below.sum(-1).clamp(max=V - 1)  # (N,)
    return n_accepted, next_token
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_speculative_accept", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
"""speculative_accept follows the rule, and its tokens are distributed exactly as the target's."""
check_speculative_accept(speculative_accept)
### BEGIN HIDDEN TESTS
check_speculative_accept(speculative_accept, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### The proof, by exact counting
#
# Sampling would only show the distributions roughly equal. On a vocabulary of 3 whose
# probabilities are quarters, every threshold the rule compares a uniform with is a multiple of
# 1/12, so the 12 midpoints of each uniform's twelfths, with every draft the draft model can
# propose, enumerate every outcome with its exact probability. Below, the first token your rule
# emits against the target's `p`, for a draft that is badly wrong:

# %%
q_small = torch.tensor([0.75, 0.25, 0.0], dtype=torch.float64)  # the draft's q
p_small = torch.tensor([0.25, 0.25, 0.5], dtype=torch.float64)  # the target's p
grid = torch.arange(12)
x, i0, i1 = (a.reshape(-1) for a in torch.meshgrid(torch.arange(2), grid, grid, indexing="ij"))
u = (torch.stack([i0, i1], -1) + 0.5) / 12  # (M, 2): the midpoints of the twelfths
M = x.numel()  # drafts 0 and 1 (q(2) = 0), 12 × 12 uniforms
n_acc, nxt = speculative_accept(x[:, None], q_small.expand(M, 1, 3), p_small.expand(M, 2, 3), u)
first = torch.where(n_acc == 1, x, nxt)  # the draft if accepted, else the correction
weight = (4 * q_small[x]).long()  # each row's probability, in units of 1 / (4 · 12 · 12)
emitted = torch.zeros(3, dtype=torch.long).index_add(0, first, weight)
print("target p × 576:       ", (576 * p_small).long().tolist())
print("emitted tokens × 576: ", emitted.tolist())
print(f"acceptance rate: {int(weight[n_acc == 1].sum())}/576, and Σ min(p, q) = 0.5")

# %% [markdown]
# ### How many tokens per target pass?
#
# If each draft is accepted with the same probability `α = Σ_x min(p(x), q(x))` (the overlap of
# the two distributions), a verification step emits `n_accepted + 1` tokens, on average
# `(1 - α^(k+1)) / (1 - α)` (Leviathan et al., 2023). Below, the same `p` and `q` at
# every position, 20,000 sequences verified with your rule, against that formula:

# %%
V_toy = 16
p_toy = (1.5 * torch.randn(V_toy, dtype=torch.float64)).softmax(-1)
q_toy = (0.7 * p_toy.log() + 0.8 * torch.randn(V_toy, dtype=torch.float64)).softmax(-1)
alpha = float(torch.minimum(p_toy, q_toy).sum())
ks, measured, predicted = [1, 2, 3, 4, 6, 8], [], []
for k_toy in ks:
    N_toy = 20_000
    drafts = torch.multinomial(q_toy, N_toy * k_toy, replacement=True).reshape(N_toy, k_toy)
    n_acc, _ = speculative_accept(
        drafts,
        q_toy.expand(N_toy, k_toy, V_toy),
        p_toy.expand(N_toy, k_toy + 1, V_toy),
        torch.rand(N_toy, k_toy + 1, dtype=torch.float64),
    )
    measured.append(float((n_acc + 1).double().mean()))
    predicted.append((1 - alpha ** (k_toy + 1)) / (1 - alpha))
fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(ks, predicted, "-", color="tab:gray", label="(1 - α^(k+1)) / (1 - α)")
ax.plot(ks, measured, "o", color="tab:blue", label="measured with speculative_accept")
ax.set_xlabel("k, drafts per step")
ax.set_ylabel("tokens per target pass")
ax.set_title(f"α = {alpha:.2f}")
ax.legend()
plt.tight_layout()
plt.show()
print("measured:", [round(m, 3) for m in measured])
print("formula: ", [round(p, 3) for p in predicted])

# %% [markdown]
# The curve flattens: each extra draft is worth `α^k` tokens more, while drafting it costs the
# same. With a draft that costs `c` target passes per token, a step costs `k·c + 1` passes, so
# the speedup `(1 - α^(k+1)) / ((1 - α)(k·c + 1))` peaks at a small `k` (Leviathan et al. report
# 2-3x for T5-XXL). The verification pass itself is not free either: `k + 1`
# queries instead of one, which is cheap only while decoding stays limited by memory traffic.
#
# ### Rolling the cache back
#
# The target pass wrote keys and values for all `k + 1` positions. After `n_accepted = n`,
# only the first `n + 1` of them (the last emitted token and the accepted drafts) belong to the
# sequence; the next token (correction or bonus) is fed at the next step. So the cache length
# goes back to `L + n + 1`; nothing needs erasing: the stale slots past it are never read
# (attention reads `seq_lens` positions) and the next step's writes overwrite them. With
# exercises 1 and 2:

# %%
bs_rb, nkv_rb, hs_rb, L_rb, k_rb, n_rb = 4, 1, 8, 6, 4, 1
k_pool_rb, v_pool_rb = torch.randn(2, 8, bs_rb, nkv_rb, hs_rb).unbind(0)
table_rb = torch.tensor([5, 2, 7, 0])
kept = torch.randn(L_rb + n_rb + 1, nkv_rb, hs_rb)  # the true keys of the first L + n + 1
stale = torch.randn(k_rb - n_rb, nkv_rb, hs_rb)  # the keys of the rejected drafts
pools = paged_append(k_pool_rb, v_pool_rb, table_rb, 0, kept, kept)
pools = paged_append(*pools, table_rb, L_rb + n_rb + 1, stale, stale)  # the target pass's tail
new_len = L_rb + n_rb + 1  # rolled back: the stale tail is past the sequence's length
fresh = torch.randn(1, nkv_rb, hs_rb)  # the next step writes the next token over the stale slot
pools = paged_append(*pools, table_rb, new_len, fresh, fresh)
q_rb = torch.randn(1, 2, hs_rb)
paged = paged_attention(q_rb, *pools, table_rb[None], torch.tensor([new_len + 1]))
contiguous = torch.cat([kept, fresh]).transpose(0, 1)  # (nkv, new_len + 1, hs)
alone = F.scaled_dot_product_attention(q_rb[0, :, None], contiguous, contiguous, enable_gqa=True)
same = torch.allclose(paged, alone[:, 0][None], atol=1e-6)
print("after rollback, attention equals the accepted sequence's:", same)

# %% [markdown]
# Rolling back is one integer per sequence: no copy, no erasing, and no block freed, since the
# sequence grows into its blocks again at the next step.
#
# ### Exercise 13 · `tree_attention_mask`: verifying a tree of drafts
#
# **Difficulty** ●●○ · **Importance** ★★☆ (Medusa, EAGLE, SpecInfer) · **Time** ~15 min
#
# One chain of drafts is lost at its first wrong token. Medusa and EAGLE draft a **tree**
# instead: several candidates for the next token, several continuations of each, and verify
# every node in the same target pass. The nodes are flattened in an order where a parent comes
# before its children, and fed as queries after the cache. A node must see exactly what it
# would see if its own branch were the sequence: the cache, and the nodes on its path from the
# root (itself included), **not** its siblings or cousins, which are alternatives to it.
#
# ```
#  parents = [-1, 0, 0, 1, 1, 2]          node:  0  1  2  3  4  5
#        0                           row 3 sees: 1  1  0  1  0  0   (0 -> 1 -> 3)
#      /   \                         row 5 sees: 1  0  1  0  0  1   (0 -> 2 -> 5)
#     1     2
#    / \     \
#   3   4     5
# ```
#
# Given `parents` (a Python list: `parents[i]` is the index of node `i`'s parent, `-1` for a
# root, and `parents[i] < i`) and `prefix_len`, the number of cached positions, return the bool
# mask `(n, prefix_len + n)`, True = may attend: the first `prefix_len` columns all True, then
# column `prefix_len + j` True when node `j` is on the path from the root to node `i`.
# Positions (for RoPE) are each node's depth after the cache, not its index.
#
# <details><summary>Hint</summary>
#
# Since a parent comes first, row `i` is its parent's row plus node `i` itself: start from
# `torch.zeros(n, prefix_len + n, dtype=torch.bool)`, set the prefix columns, then for each
# node copy its parent's row (if it has one) and set its own column.
# </details>


# %% nbgrader={"grade": false, "grade_id": "tree_attention_mask", "locked": false, "schema_version": 3, "solution": true, "task": false}
def tree_attention_mask(parents: list[int], prefix_len: int) -> torch.Tensor:
    """``(n, prefix_len + n)`` bool: node ``i`` may attend to the cached prefix and to the nodes
    on its path from the root, itself included."""
    ### BEGIN SOLUTION
    n = len(parents)
    mask = torch.zeros(n, prefix_len + n, dtype=torch.bool)
    mask[:, :prefix_len] = True
    for i, parent in enumerate(parents):
        if parent >= 0:
            mask[i] = mask[parent]  # the parent's path, built already: parent < i
        mask[i, prefix_len + i] = True
    return mask
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_tree_attention_mask", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""tree_attention_mask: the cached prefix, and each node's path from the root only."""
check_tree_attention_mask(tree_attention_mask)
### BEGIN HIDDEN TESTS
check_tree_attention_mask(tree_attention_mask, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### One pass over the tree equals every path alone
#
# The proof that matters: attention over the whole tree with this mask gives, at every node,
# what attention over its own path alone (a plain sequence, causal) gives. Below, random keys,
# values and queries for a cache of 5 and the tree drawn above:

# %%
tree_parents, P_tree = [-1, 0, 0, 1, 1, 2], 5
n_tree = len(tree_parents)
q_t, k_t, v_t = (torch.randn(2, P_tree + n_tree, 8) for _ in range(3))  # (nh, P + n, hs)
tree_out = F.scaled_dot_product_attention(
    q_t[:, P_tree:], k_t, v_t, attn_mask=tree_attention_mask(tree_parents, P_tree)
)  # (nh, n, hs)
worst = 0.0
for node in range(n_tree):
    path = [node]
    while tree_parents[path[-1]] >= 0:
        path.append(tree_parents[path[-1]])
    cols = list(range(P_tree)) + [P_tree + j for j in reversed(path)]  # the path as a sequence
    query = q_t[:, P_tree + node : P_tree + node + 1]  # (nh, 1, hs)
    alone = F.scaled_dot_product_attention(query, k_t[:, cols], v_t[:, cols])  # (nh, 1, hs)
    worst = max(worst, float((alone[:, 0] - tree_out[:, node]).abs().max()))
print(f"largest difference between the tree pass and each path alone: {worst:.1e}")

# %% [markdown]
# A tree of `n` nodes costs one pass of `n` queries, where verifying each of its leaves' paths
# costs one pass per leaf; its depth bounds the tokens a step can accept. Medusa's trees hold
# a few dozen nodes, chosen from the heads' top candidates so that the likeliest paths are
# tried; the accepted path's keys and values are then moved into place in the cache, and the
# rest rolled back as above.
