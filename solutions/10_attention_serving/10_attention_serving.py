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
# 6. Verify a draft model's tokens in one target pass, greedily and by rejection sampling
#    (proven to give the target's distribution by exact counting), roll the cache back, and
#    verify a tree of drafts with its attention mask (exercises 11-13).
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
from autograder.checks.nb10_speculative import (
    check_accept_greedy,
    check_speculative_accept,
    check_tree_attention_mask,
)

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
