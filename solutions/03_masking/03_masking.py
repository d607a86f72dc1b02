# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 03 · Masking: who may attend to whom
#
# **Time:** about 1.5 h (~30 min of exercises) · **Prerequisites:** 01
#
# So far every query could read every key. Real models forbid some pairs, for two reasons:
#
# - A **language model** learns to predict each next token. If position 5 could read position 6,
#   it would copy the answer instead of learning to predict it. Each query may only read keys at
#   or before its own position: a **causal** mask.
# - A **batch** stacks sequences of different lengths into one tensor by filling the short ones
#   with padding. Padding is filler, not data: no real token may read it. That is a **padding**
#   mask.
#
# Both are the same tool: a table of booleans saying which query may read which key. In this
# notebook you will:
#
# 1. See where a mask enters attention, and measure why it has to be *before* the softmax.
# 2. Build the causal mask, including the shape used when decoding with a cache, and see why
#    `is_causal=True` gets that case wrong (exercise 1).
# 3. Write a leakage test: proof that no output depends on a later token.
# 4. Build the padding mask and see why it applies to keys, not queries (exercise 2).
# 5. Combine both into the mask of a batched decoder (exercise 3).
# 6. Translate masks for `nn.MultiheadAttention`, which reads them the other way round
#    (exercise 4).
# 7. Choose a fill value: $-\infty$ or a large negative number, in float16 and bfloat16.
#
# **How this notebook is graded.** Each exercise is a function you complete in place of
# `raise NotImplementedError()`. The locked cell after it checks your function and names the
# likely mistake when something is wrong. Hidden tests try more sizes when grading.
# **Run › Run All Cells** goes on past failing test cells, and past examples that need an
# exercise you have not finished yet, so the plots and sliders further down run too; a failing
# test cell still counts as failed when the notebook is graded.
# In a terminal (**File › New › Terminal**), `python -m autograder check 03` grades the whole
# notebook, hidden tests included.
#
# The notebook stands on its own: attention is computed by PyTorch's
# `F.scaled_dot_product_attention`, not by your code from notebook 01.
#
# ## Shape legend
#
# | symbol | meaning |
# |---|---|
# | `B` | batch size |
# | `T` | number of queries |
# | `S` | number of keys/values (`S = T` in self-attention without a cache) |
# | `C` | model width, `d_model` |
# | `nh` | number of heads |
# | `hs` | head size, `C // nh` |
#
# A mask is indexed like the scores it filters: `mask[..., t, s]` is about query `t` and key `s`.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
import os
import warnings

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks.nb03_masking import (
    check_attention_mask_padding_invariance,
    check_attention_mask_values,
    check_causal_mask_no_leak,
    check_causal_mask_values,
    check_padding_mask_values,
)
from autograder.checks.nb03_nn_masks import check_to_nn_mha_masks
from autograder.tools import plots
from autograder.tools.modules import TorchMultiHeadAttention
from autograder.tools.nb03_masks import (
    causal_alignment_widget,
    plot_batch_mask,
    plot_mask,
    sdpa_weights,
)

warnings.filterwarnings("ignore")
torch.manual_seed(0)
AUTOGRADING = os.environ.get("NBGRADER_EXECUTION") == "autograde"
# %matplotlib inline

# %% [markdown]
# ## 1 · A mask is a table of permissions
#
# For `T` queries and `S` keys, a mask is a `(T, S)` tensor of booleans. Entry `[t, s]` answers
# one question: *may query `t` read key `s`?* Throughout this course, as in PyTorch's
# `F.scaled_dot_product_attention` (SDPA from now on), **`True` means yes, it may attend**.
#
# SDPA returns only the attended output, not the weights. To look at the weights, the course's
# `sdpa_weights(q, k, mask)` runs SDPA with the identity matrix as values: row `t` of
# `weights @ I` is row `t` of the weights.
#
# A hand-made mask on four toy tokens (the vectors serve as queries and keys at once):

# %%
tokens = ["I", "like", "green", "tea"]
x_toy = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))  # (T, d_k)
hand_mask = torch.tensor(
    [
        [True, False, False, False],  # "I" may read only itself
        [True, True, False, False],
        [False, True, True, True],  # "green" may not read "I"
        [True, True, True, True],  # "tea" may read everything
    ]
)  # (T, S)
hand_weights = sdpa_weights(x_toy, x_toy, hand_mask)  # (T, S)

fig, (ax_mask, ax_weights) = plt.subplots(1, 2, figsize=(9.5, 3.6))
plot_mask(hand_mask, tokens, tokens, ax=ax_mask, title="mask: T = may attend")
plots.attention_heatmap(hand_weights, tokens, tokens, ax=ax_weights, title="weights (SDPA)")
fig.tight_layout()
plt.show()

# %% [markdown]
# Every `F` cell of the mask became an exact 0 in the weights, and each row still sums to 1.
#
# ### Where the mask goes: on the scores, before the softmax
#
# SDPA sets forbidden **scores** to $-\infty$ and then takes the softmax, so each forbidden key
# contributes $e^{-\infty} = 0$ to the numerator and to the denominator. Three other
# placements look reasonable, and each one fails. Take one query with four scores, the last key
# forbidden (think: a future token):

# %%
scores = torch.tensor([2.0, 1.0, 0.5, 3.0])  # (S,): one query's scores; key 3 is forbidden
allowed = torch.tensor([True, True, True, False])  # (S,)

before = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
after = torch.softmax(scores, dim=-1) * allowed  # zero the forbidden weight afterwards
print("mask the scores :", before, " sum", round(before.sum().item(), 4))
print("mask the weights:", after, " sum", round(after.sum().item(), 4))

# %% [markdown]
# Masking the weights after the softmax leaves a row that sums to 0.37, so the output shrinks
# towards zero. Worse, the surviving weights still depend on the forbidden key, because its
# score sits in the softmax's denominator. Change only the forbidden score and watch the allowed
# weights:

# %%
changed = scores.clone()
changed[3] = -3.0  # only the forbidden key changes
print("mask the scores :", torch.softmax(changed.masked_fill(~allowed, float("-inf")), dim=-1))
print("mask the weights:", torch.softmax(changed, dim=-1) * allowed)

# %% [markdown]
# With the mask on the scores, nothing moves. With the mask on the weights, the allowed weights
# roughly triple. In a language model, the next token's key would steer the weights used to
# predict that same token: a leak, and training would happily exploit it.
#
# Dividing the masked weights by their sum repairs the row in exact arithmetic: it is the same
# formula as masking the scores. In floating point it breaks when the forbidden score dominates,
# because the allowed weights underflow to exactly 0 before the division. And multiplying the
# scores by the mask does not forbid anything: it sets the forbidden score to 0, and $e^0$ is not 0.

# %%
dominant = torch.tensor([1.0, 2.0, 0.5, 200.0])  # the forbidden key has a huge score
w = torch.softmax(dominant, dim=-1) * allowed
print("weights, then renormalise:", w / w.sum(), " <- 0/0")
print(
    "mask the scores          :", torch.softmax(dominant.masked_fill(~allowed, float("-inf")), -1)
)
print("scores * mask            :", torch.softmax(scores * allowed, dim=-1), " <- key 3 still read")

# %% [markdown]
# **Rule:** the mask replaces forbidden scores by $-\infty$ *before* the softmax. Section 7
# revisits the choice of $-\infty$.
#
# ## 2 · The causal mask
#
# A language model sees a sequence and predicts, at every position $t$, the token at $t+1$.
# All positions are trained in parallel, in one attention call. Query $t$ may therefore read keys
# $0, \dots, t$ and nothing later: the mask is the lower triangle, diagonal included (a token may
# read itself).
#
# **When there are more keys than queries.** When a model generates text, it keeps the keys and
# values of the tokens it has already processed (the *KV cache*, notebook 04) and feeds only the
# new tokens. With `S - T` tokens cached and `T` new ones, the keys cover positions
# `0 … S-1` but the queries are only the **last** `T` positions: query `i` sits at position
# `S - T + i` and may read keys `0 … S - T + i`. The triangle's diagonal moves `S - T` columns to
# the right, so it ends in the bottom-right corner:
#
# ```
#               keys  k0  k1  k2  k3  k4  k5          S = 6 keys (4 cached + 2 new)
# query 0 = position 4   T   T   T   T   T   F        T = 2 new queries
# query 1 = position 5   T   T   T   T   T   T        the last query reads everything
# ```
#
# ### Exercise 1 · `causal_mask`
#
# **Difficulty** ●●○ · **Importance** ★★★ (every decoder uses it) · **Time** ~10 min
#
# Return the `(T, S)` bool mask, `True` where query `i` may attend to key `j`. `S` defaults to
# `T`. When `S > T` the queries are the last `T` positions. Create the tensor directly on `device`
# (`None` means the default device).
#
# <details><summary>Hint 1</summary>
#
# `torch.ones(T, S, dtype=torch.bool, device=device).tril(diagonal=d)` keeps the entries `[i, j]`
# with `j <= i + d` and sets the rest to `False`.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Query `i` may read key `j` when `j <= S - T + i`. Which `diagonal` is that?
# </details>
#
# <details><summary>Hint 3</summary>
#
# Without `tril`: compare the key positions `torch.arange(S)` (one row) with the query positions
# `torch.arange(S - T, S)` (one column, `[:, None]`) using `<=`; broadcasting gives `(T, S)`.
# </details>


# %% nbgrader={"grade": false, "grade_id": "causal_mask", "locked": false, "schema_version": 3, "solution": true, "task": false}
def causal_mask(T: int, S: int | None = None, device=None) -> torch.Tensor:
    """Causal mask for ``T`` queries that are the last ``T`` of ``S`` positions.

    Args:
        T: number of queries.
        S: number of keys; defaults to ``T``. When ``S > T`` the queries sit at positions
            ``S - T … S - 1`` (bottom-right aligned, as when decoding with a KV cache).
        device: where to create the mask (``None``: the default device).

    Returns:
        A bool tensor ``(T, S)``: ``True`` where query ``i`` may attend to key ``j``, i.e. when
        ``j <= S - T + i``.
    """
    ### BEGIN SOLUTION
    S = T if S is None else S
    return torch.ones(T, S, dtype=torch.bool, device=device).tril(diagonal=S - T)  # (T, S)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_causal_mask_values", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""causal_mask is bool (T, S), bottom-right aligned when S > T, S defaults to T, device kept."""
check_causal_mask_values(causal_mask)
### BEGIN HIDDEN TESTS
check_causal_mask_values(causal_mask, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# Your masks for a full sequence of 6 tokens, for 2 new tokens after 4 cached ones, and for a
# single new token (the usual step of text generation):

# %%
fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
cases = [(6, "training, T = S"), (2, "2 new, 4 cached"), (1, "1 new, 5 cached")]
for ax, (T_new, story) in zip(axes, cases, strict=True):
    rows = [f"q{6 - T_new + i}" for i in range(T_new)]  # each query named by its position
    plot_mask(
        causal_mask(T_new, 6),
        rows,
        [f"k{s}" for s in range(6)],
        ax=ax,
        title=f"causal_mask({T_new}, 6): {story}",
    )
fig.tight_layout()
plt.show()

# %% [markdown]
# ### `is_causal=True` aligns top-left
#
# SDPA can build the causal mask itself: `F.scaled_dot_product_attention(q, k, v, is_causal=True)`.
# It assumes that query `i` sits at position `i`, so its triangle starts in the **top-left**
# corner. When `T = S` that is the same mask as yours. When `S > T` it is not: the new queries
# lose sight of the most recent cached tokens.
#
# The test: attend over 6 tokens in one pass, then recompute the last 2 tokens against all 6 keys,
# as a cached decoder does. The two results must agree.

# %%
gen = torch.Generator().manual_seed(3)
q, k, v = (torch.randn(1, 2, 6, 8, generator=gen) for _ in range(3))  # (B, nh, S, hs): 6 tokens
full = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, S, hs): one full pass

new_q = q[:, :, -2:]  # (B, nh, T, hs): the 2 newest tokens
with_mask = F.scaled_dot_product_attention(
    new_q, k, v, attn_mask=causal_mask(2, 6)
)  # (B, nh, T, hs)
with_flag = F.scaled_dot_product_attention(new_q, k, v, is_causal=True)  # (B, nh, T, hs)
print("attn_mask=causal_mask(2, 6) vs full pass:", (with_mask - full[:, :, -2:]).abs().max().item())
print("is_causal=True              vs full pass:", (with_flag - full[:, :, -2:]).abs().max().item())

one_new = q[:, :, -1:]  # (B, nh, 1, hs): the usual decoding step, one token at a time
print(
    "one new token, is_causal=True, weights of head 0:",
    sdpa_weights(one_new, k, is_causal=True)[0, 0, 0],
)

# %% [markdown]
# With the top-left mask, the single new token (position 5) may read only key 0, the very first
# token of the text. The model would generate nonsense, and nothing raises an error.
#
# When it matters: whenever queries and keys have different lengths, i.e. decoding with a cache,
# processing a long prompt in chunks, or checking several drafted tokens at once (speculative
# decoding). PyTorch offers the bottom-right version as
# `torch.nn.attention.bias.causal_lower_right(T, S)`, which SDPA accepts as `attn_mask`; for a
# single new token, `is_causal=False` (no mask) is also right, since the newest token may read
# every cached key.
#
# Try other sizes below. The right panel shows the mask that `is_causal=True` applies, read off
# SDPA's own weights.

# %%
if not AUTOGRADING:
    display(causal_alignment_widget(causal_mask, T=2, S=6))

# %% [markdown]
# ## 3 · A leakage test
#
# A picture of a mask convinces a person; a test convinces a computer, and keeps convincing it
# after every refactor. The property to test: **rewriting the tokens from position $p$ onwards
# never changes an output before $p$.** The function below rewrites the future for every $p$
# and reports the first $p$ that changes an earlier output. It takes any attention function
# `attend(q, k, v)`, so it can test more than masks.


# %%
def first_leak(attend, T: int = 6, seed: int = 0):
    """The first position p whose rewriting changes an earlier output of ``attend``, else None."""
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 1, T, 8, generator=gen) for _ in range(3))  # (B, nh, T, hs)
    out = attend(q, k, v)  # (B, nh, T, hs)
    for p in range(1, T):
        rewritten = [t.clone() for t in (q, k, v)]
        for t in rewritten:
            t[:, :, p:] = torch.randn(t[:, :, p:].shape, generator=gen)  # a different future
        if not torch.allclose(attend(*rewritten)[:, :, :p], out[:, :, :p]):
            return p
    return None


def masked_after_softmax(q, k, v):
    """The section-1 mistake: zero the future weights after the softmax."""
    weights = torch.softmax(q @ k.transpose(-2, -1) / 8**0.5, dim=-1)  # (B, nh, T, T)
    return (weights * causal_mask(q.shape[-2])) @ v  # (B, nh, T, hs)


candidates = {
    "SDPA with your causal_mask": lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=causal_mask(q.shape[-2])
    ),
    "SDPA without a mask": F.scaled_dot_product_attention,
    "diagonal one step too far": lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=torch.ones(6, 6, dtype=torch.bool).tril(1)
    ),
    "mask applied after the softmax": masked_after_softmax,
}
for name, attend in candidates.items():
    print(f"{name:32s} first leak at position: {first_leak(attend)}")

# %% [markdown]
# The mask applied after the softmax leaks, as predicted in section 1: the future's scores still
# reach the past through the denominator.
#
# A leakage test alone is not enough: a mask that forbids *everything* never leaks. The graded
# test below therefore also checks the opposite, that every query does read its whole past
# (itself included), and that decoding the last `T` of `S` tokens with `causal_mask(T, S)` matches
# the full pass.

# %% nbgrader={"grade": true, "grade_id": "test_causal_mask_no_leak", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""With SDPA and causal_mask, no output depends on a later token, and cached decoding equals the full pass."""
check_causal_mask_no_leak(causal_mask)
### BEGIN HIDDEN TESTS
check_causal_mask_no_leak(causal_mask, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ## 4 · Padding
#
# Three sentences of different lengths go into one batch. The tensor must be rectangular, so each
# sentence is filled up to the longest length with a padding token. Padding is usually placed at
# the end (right padding, used throughout this notebook; left padding comes at the end of this
# section). `lengths[b]` says how many positions of row `b` are real.

# %%
sentences = [["the", "cat", "sat"], ["birds", "sing"], ["a", "dog", "ran", "home", "fast"]]
lengths = torch.tensor([len(s) for s in sentences])  # (B,)
max_len = int(lengths.max())
for words in sentences:
    print(words + ["<pad>"] * (max_len - len(words)))

# %% [markdown]
# ### Exercise 2 · `padding_mask`
#
# **Difficulty** ●○○ · **Importance** ★★★ · **Time** ~5 min
#
# Return a `(B, max_len)` bool mask that is `True` at the real positions `0 … lengths[b] - 1` of
# each row and `False` at the padding. Create it on `lengths.device` (on a GPU, a helper tensor left
# on the CPU raises an error).
#
# <details><summary>Hint 1</summary>
#
# `torch.arange(max_len, device=lengths.device)` lists the positions. Compare them with the
# lengths.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Broadcasting `(1, max_len)` against `(B, 1)` gives `(B, max_len)`: `positions[None, :]` and
# `lengths[:, None]`. A sequence of length 3 has real positions 0, 1, 2: is that `<` or `<=`?
# </details>


# %% nbgrader={"grade": false, "grade_id": "padding_mask", "locked": false, "schema_version": 3, "solution": true, "task": false}
def padding_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """Which positions of a right-padded batch hold real tokens.

    Args:
        lengths: integer tensor ``(B,)``, the number of real tokens of each sequence
            (``0 <= lengths[b] <= max_len``).
        max_len: the padded length.

    Returns:
        A bool tensor ``(B, max_len)`` on ``lengths.device``: ``True`` at positions
        ``t < lengths[b]`` (real tokens), ``False`` at padding.
    """
    ### BEGIN SOLUTION
    positions = torch.arange(max_len, device=lengths.device)  # (max_len,)
    return positions[None, :] < lengths[:, None]  # (1, max_len) < (B, 1) -> (B, max_len)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_padding_mask_values", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""padding_mask is a bool (B, max_len) mask, True exactly at positions < length, on lengths' device."""
check_padding_mask_values(padding_mask)
### BEGIN HIDDEN TESTS
check_padding_mask_values(padding_mask, seed=1, thorough=True)
### END HIDDEN TESTS

# %%
plot_batch_mask(padding_mask(lengths, max_len), sentences, suptitle="padding_mask: T = real token")
plt.show()

# %% [markdown]
# ### Pad the keys, not the queries
#
# A padding mask answers *which keys are real*. In attention it filters the **columns**: reshape
# it to `(B, 1, 1, S)` and it broadcasts over every head and every query, so no query reads a
# padding key.
#
# What about the **rows**, the padded *queries*? Their outputs are computed and never used: the
# loss skips padded positions, and no real query reads them, since their keys are masked. They are
# "don't care". The proof, with a multi-head attention layer (`TorchMultiHeadAttention`,
# PyTorch's implementation with notebook 02's interface): each sentence's real outputs equal
# running that sentence alone with no padding at all, and random junk in the padding changes
# nothing but the padded rows.

# %%
C, nh = 16, 2
mha = TorchMultiHeadAttention(C, nh).eval()
x = torch.randn(
    len(sentences), max_len, C
)  # (B, T, C): the padded positions hold arbitrary vectors
real = padding_mask(lengths, max_len)  # (B, T)
key_mask = real[:, None, None, :]  # (B, 1, 1, T): broadcasts over heads and queries

with torch.no_grad():
    out, _ = mha(x, mask=key_mask)  # (B, T, C)
    for b, n in enumerate(lengths.tolist()):
        alone, _ = mha(x[b : b + 1, :n])  # (1, n, C): the sentence on its own
        print(
            f"sentence {b}: real outputs equal the unpadded run:",
            torch.allclose(out[b, :n], alone[0], atol=1e-6),
        )
    junk = torch.where(real[..., None], x, 100 * torch.randn_like(x))  # (B, T, C): new padding
    out_junk, _ = mha(junk, mask=key_mask)  # (B, T, C)
print("largest change of a real output  :", (out_junk - out)[real].abs().max().item())
print(
    "largest change of a padded output:", (out_junk - out)[~real].abs().max().item(), "(don't care)"
)

# %% [markdown]
# Two tempting variations, both worse:
#
# - **Masking the queries instead of the keys** (`real[:, None, :, None]`) leaves every real
#   query free to read the padding, so the junk leaks into real outputs.
# - **Masking the queries as well as the keys** leaves each padded query with no allowed key at
#   all. Its row of scores is all $-\infty$, and a hand-written softmax returns $0/0 = $ NaN. The
#   usual "multiply the loss by the mask" does not remove it, since NaN × 0 is NaN, and the NaN
#   reaches the gradients. (The course's convention, zeros for a row with no allowed key, avoids
#   that, but there is no reason to create such rows.)

# %%
query_mask = real[:, None, :, None]  # (B, 1, T, 1): the wrong axis
with torch.no_grad():
    change = (mha(junk, mask=query_mask)[0] - mha(x, mask=query_mask)[0])[real].abs().max()
print("queries masked instead of keys, largest change of a real output:", change.item())
print("softmax of a fully masked row:", torch.softmax(torch.full((4,), float("-inf")), dim=-1))
print("NaN * 0 =", float("nan") * 0)

# %% [markdown]
# ### Left padding
#
# Batched *generation* with a decoder-only model usually pads on the **left** instead: then the
# last column holds every row's newest token, and the next token of every row is appended in the
# same column. The real positions of row `b` are now its last `lengths[b]`, so the mask is True
# at `t >= max_len - lengths[b]`: the right-padded mask flipped left to right. Two things change
# with it. Positions must be counted from each row's first real token, not from column 0, or a
# row's position embeddings shift with the amount of padding. And with a causal mask, each padded
# query at the start of a row has no allowed key at all, since every key up to it is padding:
# these are the empty rows of section 7, which must give zeros, not NaN. `padding_mask` here, and
# `attention_mask` in section 5, describe right padding only.

# %%
left = padding_mask(lengths, max_len).flip(-1)  # (B, max_len): real tokens at the end
for words, row in zip(sentences, left.int().tolist(), strict=True):
    print(f"{' '.join(['<pad>'] * (max_len - len(words)) + words):30s} {row}")
future_ok = torch.ones(max_len, max_len, dtype=torch.bool).tril()  # (T, T): the causal mask
allowed = left[:, None, :] & future_ok  # (B, 1, T) & (T, T) -> (B, T, T)
print("queries with no allowed key, per row:", (~allowed.any(-1)).sum(-1).tolist())

# %% [markdown]
# ## 5 · Combining: the mask of a batched decoder
#
# A language model trained on a padded batch needs both rules at once: query `i` of sequence `b`
# may read key `j` when **key `j` is a real token AND `j` is not in the future**. The scores of
# multi-head attention are `(B, nh, T, T)`, so the combined mask is `(B, 1, T, T)`: one `(T, T)`
# table per sequence, and a size-1 head dimension that broadcasts over the `nh` heads.
#
# ```
# padding (B, 1, 1, T)  &  causal (T, T)  ->  (B, 1, T, T)
#   rows: same for every query   columns: same for every sequence
# ```
#
# ### Exercise 3 · `attention_mask`
#
# **Difficulty** ●●○ · **Importance** ★★★ · **Time** ~10 min
#
# Return the `(B, 1, max_len, max_len)` bool mask, `True` where the key is real and, if `causal`,
# not after the query. Without `causal`, it is the padding mask repeated over the rows, still
# `(B, 1, max_len, max_len)`. Use your two functions above; create everything on `lengths.device`.
#
# <details><summary>Hint 1</summary>
#
# Index the padding mask so that it describes the **keys** (the last dimension):
# `padding_mask(lengths, max_len)[:, None, None, :]` is `(B, 1, 1, T)`.
# </details>
#
# <details><summary>Hint 2</summary>
#
# `&` broadcasts: `(B, 1, 1, T) & (T, T) -> (B, 1, T, T)`. Both conditions must hold, so it is
# `&`, not `|`.
# </details>
#
# <details><summary>Hint 3</summary>
#
# When `causal` is False, `.expand(-1, -1, max_len, -1)` turns `(B, 1, 1, T)` into
# `(B, 1, T, T)` without copying.
# </details>


# %% nbgrader={"grade": false, "grade_id": "attention_mask", "locked": false, "schema_version": 3, "solution": true, "task": false}
def attention_mask(lengths: torch.Tensor, max_len: int, causal: bool = True) -> torch.Tensor:
    """The self-attention mask of a right-padded batch.

    Args:
        lengths: integer tensor ``(B,)``, real tokens per sequence.
        max_len: the padded length ``T``.
        causal: also forbid keys after the query.

    Returns:
        A bool tensor ``(B, 1, T, T)`` on ``lengths.device``: ``[b, 0, i, j]`` is ``True`` when
        ``j < lengths[b]`` and, if ``causal``, ``j <= i``.
    """
    ### BEGIN SOLUTION
    keys = padding_mask(lengths, max_len)[:, None, None, :]  # (B, 1, 1, T): real keys
    if not causal:
        return keys.expand(-1, -1, max_len, -1)  # (B, 1, T, T)
    return keys & causal_mask(
        max_len, device=lengths.device
    )  # (B, 1, 1, T) & (T, T) -> (B, 1, T, T)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_attention_mask_values", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""attention_mask is bool (B, 1, T, T): the key is real AND (if causal) not in the future."""
check_attention_mask_values(attention_mask)
### BEGIN HIDDEN TESTS
check_attention_mask_values(attention_mask, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_attention_mask_padding_invariance", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""In multi-head attention with attention_mask, real tokens' outputs equal each sequence run alone."""
check_attention_mask_padding_invariance(attention_mask)
### BEGIN HIDDEN TESTS
check_attention_mask_padding_invariance(attention_mask, seed=1, thorough=True)
### END HIDDEN TESTS

# %%
plot_batch_mask(attention_mask(lengths, max_len), sentences, suptitle="attention_mask (causal)")
plt.show()

# %% [markdown]
# Each panel is the causal triangle with the padding columns switched off. The padded rows still
# have allowed keys (the real tokens before them), so no row is empty, and their outputs are
# "don't care" as before.
#
# ### Why the `1`? A mask without a head dimension
#
# Broadcasting lines up shapes **from the right**. A `(B, T, T)` mask against `(B, nh, T, T)`
# scores is read as `(1, B, T, T)`: the batch dimension of the mask lands on the **heads**.
# With `B ≠ nh` that raises an error; with `B = nh` it runs and quietly gives sequence `b`'s mask
# to head `b` of every sequence:

# %%
q3 = torch.randn(3, 3, max_len, 8)  # (B, nh, T, hs) with B = nh = 3
good = attention_mask(lengths, max_len)  # (B, 1, T, T)
flat = good[:, 0]  # (B, T, T): the head dimension forgotten
diff = (
    (
        F.scaled_dot_product_attention(q3, q3, q3, attn_mask=good)
        - F.scaled_dot_product_attention(q3, q3, q3, attn_mask=flat)
    )
    .abs()
    .max()
)
print("B = nh = 3, (B, T, T) mask: no error, outputs off by", diff.item())
try:
    q2 = torch.randn(3, 2, max_len, 8)  # (B, nh, T, hs) with nh = 2
    F.scaled_dot_product_attention(q2, q2, q2, attn_mask=flat)
except RuntimeError as error:
    print("B = 3, nh = 2:", type(error).__name__, str(error).splitlines()[0][:90])

# %% [markdown]
# ## 6 · `nn.MultiheadAttention` reads masks the other way round
#
# PyTorch's module `nn.MultiheadAttention` predates SDPA and uses the **opposite** convention for
# boolean masks:
#
# | | this course, `F.scaled_dot_product_attention` | `nn.MultiheadAttention` |
# |---|---|---|
# | bool `True` means | may attend | **may not** attend |
# | causal + padding | one mask `(B, 1, T, S)` | `attn_mask (T, S)` and `key_padding_mask (B, S)`, both True = blocked |
# | input layout | batch first, `(B, T, C)` | `(T, B, C)` unless `batch_first=True` |
#
# `key_padding_mask` is `(B, S)` whichever `batch_first` you choose. Both APIs also accept float
# masks, which are *added* to the scores (0 = keep, $-\infty$ = block).
#
# Passing the course's masks unchanged raises no error. Here `mha_torch` is an
# `nn.MultiheadAttention` and `mha_ours` a `TorchMultiHeadAttention` with the same weights:

# %%
mha_torch = nn.MultiheadAttention(C, nh, batch_first=True).eval()
mha_ours = TorchMultiHeadAttention(C, nh).eval()
with torch.no_grad():  # copy the weights: in_proj_weight stacks the q, k and v projections
    projections = (mha_ours.q_proj, mha_ours.k_proj, mha_ours.v_proj)
    weights3, biases3 = mha_torch.in_proj_weight.chunk(3), mha_torch.in_proj_bias.chunk(3)
    for proj, weight, bias in zip(projections, weights3, biases3, strict=True):
        proj.weight.copy_(weight)  # (C, C)
        proj.bias.copy_(bias)  # (C,)
    mha_ours.out_proj.load_state_dict(mha_torch.out_proj.state_dict())

    reference, _ = mha_ours(x, mask=attention_mask(lengths, max_len))  # (B, T, C)
    unchanged, _ = mha_torch(
        x, x, x, attn_mask=causal_mask(max_len), key_padding_mask=padding_mask(lengths, max_len)
    )  # (B, T, C)
print(
    "course masks given unchanged to nn.MultiheadAttention, real outputs off by:",
    (unchanged - reference)[real].abs().max().item(),
)
print("NaN in its output:", unchanged.isnan().any().item())
nan_queries = unchanged.isnan().any(-1)  # (B, T): queries whose output is NaN
for b, n in enumerate(lengths.tolist()):
    print(
        f"sequence {b} (length {n} of {max_len}): NaN at queries",
        nan_queries[b].nonzero().flatten().tolist(),
    )

# %% [markdown]
# Read as "True = blocked", the causal mask lets each query see only the keys *after* it, and the
# padding mask lets it see only *padding* keys. A query may attend a key only if both allow it,
# that is a padding key in its future. Two kinds of query have none:
#
# - every query of the full-length sentence, which has no padding at all;
# - the last query of every sequence, which has no future at all. In a padded sequence that
#   last position is itself padding, so its NaN stays out of the comparison of real tokens.
#
# A softmax over a row with no allowed key is $0/0$, hence NaN. The full-length sentence puts NaN
# among the real tokens, and the largest difference of a set that contains NaN is NaN: that is
# why the first line prints "off by: nan" rather than a number.
#
# ### Exercise 4 · `to_nn_mha_masks`
#
# **Difficulty** ●○○ · **Importance** ★★☆ (you will meet this module in real code) ·
# **Time** ~5 min
#
# Return the pair `(attn_mask, key_padding_mask)` that makes `nn.MultiheadAttention` attend exactly
# as `attention_mask(lengths, max_len, causal)` does: `attn_mask` is a `(T, T)` bool mask, `True`
# where the key is in the future (or `None` when `causal` is False), and `key_padding_mask` a
# `(B, T)` bool mask, `True` at padding.
#
# <details><summary>Hint</summary>
#
# `~` inverts a bool tensor. Both masks are your earlier ones, inverted.
# </details>


# %% nbgrader={"grade": false, "grade_id": "to_nn_mha_masks", "locked": false, "schema_version": 3, "solution": true, "task": false}
def to_nn_mha_masks(lengths: torch.Tensor, max_len: int, causal: bool = True):
    """Masks in ``nn.MultiheadAttention``'s convention (``True`` = may NOT attend).

    Args:
        lengths: integer tensor ``(B,)``, real tokens per sequence.
        max_len: the padded length ``T``.
        causal: also forbid keys after the query.

    Returns:
        ``(attn_mask, key_padding_mask)``: ``attn_mask`` bool ``(T, T)``, ``True`` where the key
        is after the query (``None`` when not ``causal``); ``key_padding_mask`` bool ``(B, T)``,
        ``True`` at padding positions.
    """
    ### BEGIN SOLUTION
    key_padding_mask = ~padding_mask(lengths, max_len)  # (B, T): True = padding
    attn_mask = ~causal_mask(max_len, device=lengths.device) if causal else None  # (T, T)
    return attn_mask, key_padding_mask
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_to_nn_mha_masks_equivalent", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""nn.MultiheadAttention with to_nn_mha_masks attends like SDPA with the course's attention mask."""
check_to_nn_mha_masks(to_nn_mha_masks)
### BEGIN HIDDEN TESTS
check_to_nn_mha_masks(to_nn_mha_masks, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# With the translated masks the two modules agree, in both input layouts:

# %%
nn_attn_mask, nn_padding_mask = to_nn_mha_masks(lengths, max_len)
mha_time_first = nn.MultiheadAttention(C, nh).eval()  # batch_first=False: inputs (T, B, C)
mha_time_first.load_state_dict(mha_torch.state_dict())
with torch.no_grad():
    batch_first_out, _ = mha_torch(
        x, x, x, attn_mask=nn_attn_mask, key_padding_mask=nn_padding_mask
    )
    x_t = x.transpose(0, 1)  # (T, B, C)
    time_first_out, _ = mha_time_first(
        x_t, x_t, x_t, attn_mask=nn_attn_mask, key_padding_mask=nn_padding_mask
    )  # (T, B, C); mask stays (B, T)
print(
    "batch_first=True,  real outputs off by:",
    (batch_first_out - reference)[real].abs().max().item(),
)
print(
    "batch_first=False, real outputs off by:",
    (time_first_out.transpose(0, 1) - reference)[real].abs().max().item(),
)

# %% [markdown]
# ## 7 · $-\infty$ or a large negative number?
#
# Many codebases fill forbidden scores with a large finite number instead of $-\infty$: `-1e9`,
# `-1e4`, or `torch.finfo(dtype).min` (the most negative finite value of the dtype). Usually the
# aim is to avoid NaN. Whether that works depends on the dtype:
#
# | dtype | largest finite value | significant digits |
# |---|---|---|
# | float32 | $3.4\times10^{38}$ | about 7 |
# | float16 | 65504 | about 3 |
# | bfloat16 | $3.4\times10^{38}$ (float32's range) | about 2 |
#
# Before running the next cell, predict: which fill values can float16 even store? What does a row
# whose keys are *all* forbidden (a query with nothing to read) turn into, with each fill value?

# %%
scores_2rows = torch.tensor([[1.0, 2.0, 0.5, 3.0]] * 2)  # (T, S): two queries, same scores
mask_2rows = torch.tensor([[True, True, True, False], [False] * 4])  # (T, S): query 1 reads nothing
expected = torch.softmax(scores_2rows[0, :3], dim=-1)  # the right weights of query 0's keys

print(
    f"{'dtype':9s} {'fill':10s} {'stored as':>12s}  {'partly masked row ok':>20s}  fully masked row"
)
for dtype in (torch.float32, torch.float16, torch.bfloat16):
    fills = {"-inf": float("-inf"), "-1e9": -1e9, "-1e4": -1e4, "finfo.min": torch.finfo(dtype).min}
    for name, fill in fills.items():
        try:
            filled = scores_2rows.to(dtype).masked_fill(~mask_2rows, fill)  # (T, S)
        except RuntimeError:
            print(f"{str(dtype)[6:]:9s} {name:10s} {'error: overflow':>12s}")
            continue
        weights = torch.softmax(filled, dim=-1)  # (T, S)
        ok = torch.allclose(weights[0, :3].float(), expected, atol=1e-2)
        print(
            f"{str(dtype)[6:]:9s} {name:10s} {filled[1, 0].item():12.4g}  {ok!s:>20s}  "
            f"{[round(w, 3) for w in weights[1].float().tolist()]}"
        )

# %% [markdown]
# What the table shows:
#
# - **Partly masked rows come out right with every fill value** that can be stored: $e^{-10^4}$
#   is already exactly 0 in every dtype.
# - **float16 cannot store `-1e9`.** `masked_fill` refuses it. Built another way, for example as
#   an additive mask `(~mask).half() * -1e9` or with `torch.tensor(-1e9, dtype=torch.float16)`, it
#   silently becomes $-\infty$. bfloat16 stores it, rounded to $-998\,244\,352$.
# - **A fully masked row never comes out as zeros.** With $-\infty$ the softmax is $0/0 =$ NaN.
#   With a finite fill every forbidden score is the same number, so the softmax spreads the weight
#   *uniformly over the forbidden keys*: no NaN, but the query now reads exactly what it must not
#   read (padding, or the future).
#
# And "finite" does not stay finite under arithmetic. Additive masks (`scores + mask`) are common,
# and two of them (causal plus padding) are often added together:

# %%
print("additive float16 mask (~mask).half() * -1e9:", ((~mask_2rows[0]).half() * -1e9).tolist())
for dtype in (torch.float32, torch.float16, torch.bfloat16):
    low = torch.tensor(torch.finfo(dtype).min, dtype=dtype)
    score = torch.tensor(-100.0, dtype=dtype)
    print(
        f"{str(dtype)[6:]:9s} finfo.min + finfo.min = {(low + low).item():<8} "
        f"score -100 + finfo.min = {(score + low).item():.4g}"
    )

# %% [markdown]
# Two `finfo.min` added together overflow to $-\infty$ in every dtype, and in float16 a modest
# negative score is already enough. A row you believed safe from NaN can become one after all.
#
# This is why the course's convention is explicit: **fill with $-\infty$, and give a row with no
# allowed key all-zero weights**. A hand-written attention does it with one extra line after the
# softmax, `weights = weights.masked_fill(~mask, 0.0)`. In ordinary rows the forbidden weights are
# already 0, and in an empty row it turns the NaNs into zeros. SDPA in this PyTorch version
# returns zeros for such rows on the CPU (older releases and some GPU kernels return NaN, so do
# not depend on it):

# %%
q_rows = torch.randn(2, 8)  # (T, d_k)
k_rows = torch.randn(4, 8)  # (S, d_k)
print(sdpa_weights(q_rows, k_rows, mask_2rows))  # (T, S): row 1 has no allowed key

# %% [markdown]
# ## Summary
#
# - A boolean mask `(…, T, S)` says which query may read which key; here and in SDPA,
#   **True = may attend**. It replaces forbidden *scores* by $-\infty$ before the softmax; masking
#   the weights afterwards leaks the forbidden scores through the denominator.
# - The causal mask is the lower triangle, diagonal included. With a cache (`S > T`) it is aligned
#   **bottom-right**: query `i` sits at position `S - T + i`. `is_causal=True` aligns top-left,
#   which is only right when `T = S`.
# - A leakage test (rewrite the future, compare the past) catches masks that peek ahead, and also
#   masks applied in the wrong place. Pair it with a test that the past is visible.
# - Padding is masked on the **keys**; padded query rows are don't-care. Masking the queries
#   instead leaks padding into real tokens; masking them too creates empty rows.
# - A batched decoder uses `real key AND not future`, shaped `(B, 1, T, T)` so it broadcasts over
#   heads; `(B, T, T)` silently mixes batch and heads when `B = nh`.
# - `nn.MultiheadAttention` uses True = blocked, separate `attn_mask`/`key_padding_mask`, and
#   `batch_first=False` by default.
# - Large finite fill values overflow in float16 and turn empty rows into uniform attention over
#   forbidden keys; use $-\infty$ and zero the empty rows explicitly. Notebook 06 keeps the same
#   rule in its block-by-block attention.
#
# **Next, notebook 04:** grouped-query attention and the KV cache, where `causal_mask(T, S)` with
# `S > T` does real work.
