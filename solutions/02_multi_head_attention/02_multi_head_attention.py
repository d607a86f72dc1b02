# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 02 · Multi-head attention
#
# **Time:** about 3.5 h (~120 min of exercises) · **Prerequisites:** 01
#
# In notebook 01 every query produced **one** set of attention weights: one softmax, one way of
# mixing the values. Multi-head attention runs several attentions side by side, each on its own
# learned projection of the input, and combines their results. In this notebook you will:
#
# 1. Read the definition and see that "nh small projections" is the same as one big projection.
# 2. **Split** a tensor into heads and **merge** it back (two exercises), and see why `view` alone
#    silently scrambles tokens.
# 3. Build the **`MultiHeadAttention`** module (exercise) and show that it equals PyTorch's
#    `nn.MultiheadAttention` when both share the same weights.
# 4. **Count its parameters** (exercise) and compute real head configurations (GPT-2, GPT-3).
# 5. Answer the interview question *"why not one wide head?"* with a count and a measurement.
# 6. Sort out what heads are, and are not, known to learn.
# 7. Put the module to work: **cross-attention** over a padded encoder output, **attention
#    dropout** (by hand, and through `F.scaled_dot_product_attention` in a module), and a pre-LN
#    **transformer block** with its parameter count (five exercises).
# 8. Build the **Llama-style** block's parts, **RMSNorm** and **SwiGLU**, its MLP width and its
#    parameter count (four exercises).
#
# **How this notebook is graded.** Run each test cell after its exercise: it names the likely
# mistake when something is wrong. Hidden tests try more shapes when grading.
# **Run › Run All Cells** goes on past failing test cells, and past examples that need an
# exercise you have not finished yet, so the plots and sliders further down run too; a failing
# test cell still counts as failed when the notebook is graded.
# In a terminal (**File › New › Terminal**), `python -m autograder check 02` grades the whole
# notebook, hidden tests included.
#
# ## Shape legend
#
# | symbol | meaning |
# |---|---|
# | `B` | batch size |
# | `T` | number of queries (query sequence length) |
# | `S` | number of keys/values (`S = T` in self-attention) |
# | `C` | model width, `d_model` |
# | `nh` | number of heads |
# | `hs` | head size, `C // nh` |
#
# While heads attend they live in dimension 1: `(B, nh, T, hs)`.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
import json
import math
import os
import time
import warnings

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks.nb02_block import (
    check_block_matches_torch,
    check_block_param_count,
    check_block_structure,
)
from autograder.checks.nb02_cross import check_cross_attend
from autograder.checks.nb02_dropout import (
    check_dropout_eval,
    check_dropout_training,
    check_sdpa_dropout,
)
from autograder.checks.nb02_llama import check_rmsnorm, check_swiglu
from autograder.checks.nb02_llama_count import check_llama_block_param_count, check_swiglu_hidden
from autograder.checks.nb02_multihead import (
    check_merge_heads,
    check_mha_edge_cases,
    check_mha_mask,
    check_mha_matches_torch,
    check_mha_param_count,
    check_mha_structure,
    check_split_heads,
)
from autograder.tools import nb02_mha_diagram, plots
from autograder.tools.tiny_model import DATA_DIR

warnings.filterwarnings("ignore")
torch.manual_seed(0)
AUTOGRADING = os.environ.get("NBGRADER_EXECUTION") == "autograde"
# %matplotlib inline

# %% [markdown]
# ### Given: attention from notebook 01
#
# Multi-head attention calls scaled dot-product attention once for all heads. Here is a version of
# the function you wrote in notebook 01 (it uses `torch.softmax`, which is allowed from now on), so
# that this notebook stands on its own. If you have not done notebook 01 yet, do it first: this
# cell is one solution to it.


# %% nbgrader={"grade": false, "grade_id": "given_attention", "locked": true, "schema_version": 3, "solution": false, "task": false}
def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q kᵀ / √d_k) v. q ``(..., T, d_k)``, k ``(..., S, d_k)``, v ``(..., S, d_v)``.

    ``mask``: bool, broadcastable to ``(..., T, S)``, True = may attend; a query with no allowed
    key gets zero weights. Returns ``(out (..., T, d_v), weights (..., T, S))``.
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # (..., T, S)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)  # fully masked rows: NaN -> 0
    return weights @ v, weights  # (..., T, d_v), (..., T, S)


# %% [markdown]
# ## 1 · The definition
#
# Multi-head attention with $nh$ heads (Vaswani et al., 2017), with the heads numbered from 0 as
# in code (the paper counts from 1):
#
# $$\mathrm{MultiHead}(Q, K, V) = \mathrm{Concat}(\mathrm{head}_0, \dots, \mathrm{head}_{nh-1})\,W^O,
# \qquad \mathrm{head}_i = \mathrm{Attention}(Q W^Q_i,\; K W^K_i,\; V W^V_i).$$
#
# Each head $i$ has its own projection matrices $W^Q_i, W^K_i, W^V_i$ of size $C \times hs$, so it
# looks at the input through its own $hs$-dimensional lens and computes its **own** attention
# weights. The $nh$ outputs, each $hs$ wide, are concatenated back to width $nh \cdot hs = C$, and
# the output projection $W^O$ ($C \times C$) mixes the heads' results. In self-attention,
# $Q = K = V = X$, the same sequence.
#
# Drawn for three heads: one input fans out to every head, each head projects it with its own three
# matrices and runs its own softmax, and the outputs meet again in the concatenation.

# %%
nb02_mha_diagram.plot_mha_fanout(num_heads=3)
plt.show()

# %% [markdown]
# The mechanical process, with shapes (B = batch, T = tokens, C = width):
#
# ```
#                  project            split into heads          attend, all heads at once           merge          project
# query (B, T, C) ─ q_proj ─→ (B, T, C) ─→ (B, nh, T, hs) ─┐
# key   (B, S, C) ─ k_proj ─→ (B, S, C) ─→ (B, nh, S, hs) ─┼─→ out (B, nh, T, hs) ─→ (B, T, nh·hs = C) ─ out_proj ─→ (B, T, C)
# value (B, S, C) ─ v_proj ─→ (B, S, C) ─→ (B, nh, S, hs) ─┘     weights (B, nh, T, S): one softmax per head
# ```
#
# Two things make this efficient:
#
# - **The $nh$ small projections are one big one.** Stack $W^Q_0, \dots, W^Q_{nh-1}$ side by
#   side and you get one $C \times C$ matrix, so one `nn.Linear(C, C)` computes every head's queries
#   at once. Head $i$ owns output features `i*hs : (i+1)*hs` (the layout PyTorch uses too; formula
#   and code both count heads from 0, so head 1 below is the second head).
# - **The heads attend in parallel.** Moving heads into dimension 1 makes them a batch dimension,
#   and one batched matrix product serves them all (notebook 05 measures what that buys).
#
# Check the first claim on a small example: the slice of a big projection equals a separate small
# projection with the matching rows of the weight.

# %%
C, nh = 8, 2
hs = C // nh
q_proj = nn.Linear(C, C, bias=False)  # weight (C_out, C_in): rows i*hs:(i+1)*hs belong to head i
x = torch.randn(1, 3, C)  # (B, T, C)

all_heads = q_proj(x)  # (B, T, C): every head's queries side by side
W_q1 = q_proj.weight[1 * hs : 2 * hs]  # (hs, C): head 1's own projection
head_1 = x @ W_q1.T  # (B, T, C) @ (C, hs) -> (B, T, hs)
print(
    "head 1's queries = features 4:8 of the big projection:",
    torch.allclose(head_1, all_heads[..., 1 * hs : 2 * hs]),
)

# %% [markdown]
# ## 2 · Splitting into heads
#
# After the projection, the queries are a `(B, T, C)` tensor whose last dimension holds the heads
# side by side. Attention wants `(B, nh, T, hs)`: for each head, a `(T, hs)` matrix of its queries.
# Two steps get there:
#
# 1. `x.view(B, T, nh, hs)` cuts each token's `C` features into `nh` consecutive chunks of `hs`.
#    That matches the ownership rule: chunk `i` holds head `i`'s features.
# 2. `.transpose(1, 2)` swaps the token and head dimensions: `(B, T, nh, hs) -> (B, nh, T, hs)`.
#
# Why not `x.view(B, nh, T, hs)` in one go? It has the right *shape*, but `view` never moves
# numbers. It only reads the same memory with new sizes. In memory, a `(B, T, C)` tensor is stored
# token after token. Reading it as `(nh, T, hs)` cuts that stream into `nh` blocks of `T·hs`
# numbers, so "head 0" receives the *first few tokens, all features*, instead of *all tokens,
# its own features*. No error is raised, and the model trains on scrambled heads.
#
# The picture shows a `(1, 4, 8)` input split into 2 heads. Cell `B5` is feature 5 of token B,
# coloured by the head that should own feature 5.

# %%
plots.plot_head_layout(T=4, C=8, num_heads=2)
plt.show()

# %% [markdown]
# With `view` + `transpose`, head 0 is all blue: every token (A–D), only head 0's features (0–3).
# With `view` alone, "head 0" sees only tokens A and B and mixes both heads' features, while
# tokens C and D are missing from it altogether.
#
# ### Exercise 1 · `split_heads`
#
# **Difficulty** ●○○ · **Importance** ★★★ (the classic silent bug) · **Time** ~10 min
#
# <details><summary>Hint 1</summary>
#
# Read `B, T, C = x.shape` and compute `hs = C // num_heads` first.
# </details>
#
# <details><summary>Hint 2</summary>
#
# `x.view(B, T, num_heads, hs).transpose(1, 2)`. If the input may not be contiguous, `reshape`
# instead of `view` works in every case.
# </details>


# %% nbgrader={"grade": false, "grade_id": "split_heads", "locked": false, "schema_version": 3, "solution": true, "task": false}
def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Split the last dimension into heads and move heads next to the batch.

    Head ``i`` gets features ``i*hs : (i+1)*hs`` of every token.

    Args:
        x: ``(B, T, C)`` with ``C`` divisible by ``num_heads``.
        num_heads: ``nh``.

    Returns:
        ``(B, nh, T, hs)`` with ``hs = C // nh``.
    """
    ### BEGIN SOLUTION
    B, T, C = x.shape
    return x.reshape(B, T, num_heads, C // num_heads).transpose(
        1, 2
    )  # (B, T, nh, hs) -> (B, nh, T, hs)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_split_heads_layout", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""split_heads gives (B, nh, T, hs) and head i holds features i*hs:(i+1)*hs of every token."""
check_split_heads(split_heads)
### BEGIN HIDDEN TESTS
check_split_heads(split_heads, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# Draw what *your* function does (last row); it should match the middle row.

# %%
plots.plot_head_layout(T=4, C=8, num_heads=2, split_fn=split_heads)
plt.show()

# %% [markdown]
# ## 3 · Merging heads back
#
# After attention each head has produced `(B, nh, T, hs)`. To concatenate the heads, undo the
# split: transpose back to `(B, T, nh, hs)`, then flatten the last two dimensions into `C = nh·hs`.
# That puts head 0's features first, then head 1's, and so on: exactly $\mathrm{Concat}(\mathrm{head}_0,
# \dots, \mathrm{head}_{nh-1})$.
#
# One catch: after `transpose`, the tensor is no longer stored row by row (it is not
# *contiguous*), and `view` refuses to flatten it. Use `.reshape(...)`, which copies when it must,
# or `.contiguous().view(...)`.
#
# ### Exercise 2 · `merge_heads`
#
# **Difficulty** ●○○ · **Importance** ★★★ · **Time** ~5 min
#
# <details><summary>Hint</summary>
#
# `x.transpose(1, 2).reshape(B, T, nh * hs)`, with `B, nh, T, hs = x.shape`.
# </details>


# %% nbgrader={"grade": false, "grade_id": "merge_heads", "locked": false, "schema_version": 3, "solution": true, "task": false}
def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Concatenate the heads: the inverse of ``split_heads``.

    Args:
        x: ``(B, nh, T, hs)``.

    Returns:
        ``(B, T, nh*hs)``, with head ``i`` in features ``i*hs : (i+1)*hs``.
    """
    ### BEGIN SOLUTION
    B, nh, T, hs = x.shape
    return x.transpose(1, 2).reshape(B, T, nh * hs)  # (B, T, nh, hs) -> (B, T, C)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_merge_heads_layout", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""merge_heads gives (B, T, nh*hs) with head i in features i*hs:(i+1)*hs, for non-contiguous input too."""
check_merge_heads(merge_heads)
### BEGIN HIDDEN TESTS
check_merge_heads(merge_heads, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### Why a round-trip test is not enough
#
# A tempting test is "`merge_heads(split_heads(x))` gives back `x`". Yours passes it. But so does
# the *wrong* pair, `view` alone in both directions, because one `view` exactly undoes the other:


# %%
def split_view_only(x, num_heads):  # WRONG: has the right shape, scrambles tokens
    B, T, C = x.shape
    return x.view(B, num_heads, T, C // num_heads)


def merge_view_only(x):  # WRONG: the matching inverse
    B, nh, T, hs = x.shape
    return x.reshape(B, T, nh * hs)


x = torch.randn(2, 5, 12)  # (B, T, C)
print("correct pair round-trips:", torch.equal(merge_heads(split_heads(x, 3)), x))
print("wrong pair round-trips:  ", torch.equal(merge_view_only(split_view_only(x, 3)), x))
print(
    "but the wrong split differs from yours:",
    not torch.equal(split_view_only(x, 3), split_heads(x, 3)),
)

# %% [markdown]
# A round trip only proves the two functions are inverses of each other. The checks above test
# what a head *means* (which token and which features land where), and later the whole module is
# compared with PyTorch's. A wrong merge has slipped past shape-only tests in other courses, so
# this is worth remembering when you test your own code.
#
# ## 4 · The `MultiHeadAttention` module
#
# ### Exercise 3 · `MultiHeadAttention`
#
# **Difficulty** ●●○ · **Importance** ★★★ · **Time** ~25 min
#
# Fill in `__init__` and `forward`:
#
# - `__init__`: raise a `ValueError` with a clear message when `d_model` is not divisible by
#   `num_heads`; store `num_heads`; create `q_proj`, `k_proj`, `v_proj` and `out_proj`, each an
#   `nn.Linear(d_model, d_model, bias=bias)`. Use exactly these names: the tests and the weight
#   copy in section 5 rely on them.
# - `forward`: follow the diagram in section 1: project, split, attend (one call for all heads),
#   merge, project. `key` and `value` default to `query` (self-attention). Pass `mask` straight to
#   `scaled_dot_product_attention`; it broadcasts against `(B, nh, T, S)`, so a `(T, S)` mask
#   applies to every sequence and head, and a `(B, 1, T, S)` or `(B, 1, 1, S)` mask to every head.
# - Return the output `(B, T, C)` and the per-head weights `(B, nh, T, S)`.
#
# <details><summary>Hint 1: the order of operations</summary>
#
# `q = split_heads(self.q_proj(query), self.num_heads)`, the same for `k` and `v`; then
# `out, weights = scaled_dot_product_attention(q, k, v, mask)`; then
# `self.out_proj(merge_heads(out))`.
# </details>
#
# <details><summary>Hint 2: if your output differs from PyTorch's</summary>
#
# Check that the output projection comes *after* the merge, that you divide by √hs (the head size,
# which `scaled_dot_product_attention` reads from the last dimension of `q`), not by √C, and that
# `key`/`value` go through `k_proj`/`v_proj`, not `q_proj`.
# </details>


# %% nbgrader={"grade": false, "grade_id": "MultiHeadAttention", "locked": false, "schema_version": 3, "solution": true, "task": false}
class MultiHeadAttention(nn.Module):
    """Multi-head attention, batch first, with the weight layout of ``nn.MultiheadAttention``.

    Attributes:
        num_heads: ``nh``.
        q_proj, k_proj, v_proj, out_proj: ``nn.Linear(d_model, d_model, bias=bias)``; head ``i``
            uses output features ``i*hs : (i+1)*hs`` of ``q_proj``, ``k_proj`` and ``v_proj``.
    """

    def __init__(self, d_model: int, num_heads: int, bias: bool = True):
        """Raise ``ValueError`` when ``d_model`` is not divisible by ``num_heads``."""
        super().__init__()
        ### BEGIN SOLUTION
        if d_model % num_heads != 0:
            raise ValueError(
                f"d_model={d_model} must be divisible by num_heads={num_heads} "
                "so that every head gets the same size"
            )
        self.num_heads = num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        ### END SOLUTION

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query: ``(B, T, C)``.
            key: ``(B, S, C)``; defaults to ``query``.
            value: ``(B, S, C)``; defaults to ``query``.
            mask: optional bool, broadcastable to ``(B, nh, T, S)``; True = may attend.

        Returns:
            ``(out, weights)``: out ``(B, T, C)``, weights ``(B, nh, T, S)``.
        """
        ### BEGIN SOLUTION
        key = query if key is None else key
        value = query if value is None else value
        q = split_heads(self.q_proj(query), self.num_heads)  # (B, T, C) -> (B, nh, T, hs)
        k = split_heads(self.k_proj(key), self.num_heads)  # (B, S, C) -> (B, nh, S, hs)
        v = split_heads(self.v_proj(value), self.num_heads)  # (B, S, C) -> (B, nh, S, hs)
        out, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, nh, T, hs), (B, nh, T, S)
        return self.out_proj(merge_heads(out)), weights  # (B, nh, T, hs) -> (B, T, C)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_MultiHeadAttention_structure", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""MultiHeadAttention has num_heads, four d_model x d_model projections and rejects d_model % num_heads != 0."""
check_mha_structure(MultiHeadAttention)
### BEGIN HIDDEN TESTS
check_mha_structure(MultiHeadAttention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_MultiHeadAttention_matches_torch", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
"""MultiHeadAttention equals nn.MultiheadAttention with the same weights: outputs and per-head weights."""
check_mha_matches_torch(MultiHeadAttention)
### BEGIN HIDDEN TESTS
check_mha_matches_torch(MultiHeadAttention, seed=1, thorough=True)
check_mha_edge_cases(MultiHeadAttention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_MultiHeadAttention_mask", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""MultiHeadAttention applies the mask (True = may attend) to every head; fully masked rows give zeros."""
check_mha_mask(MultiHeadAttention)
### BEGIN HIDDEN TESTS
check_mha_mask(MultiHeadAttention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ## 5 · Your module equals `nn.MultiheadAttention`: shown, not only asserted
#
# PyTorch's `nn.MultiheadAttention` stores the three input projections stacked in one
# `in_proj_weight` of shape `(3C, C)` (queries, then keys, then values) and the output projection in
# `out_proj`. Copy your weights into it and compare. Two differences in its interface matter:
#
# - It defaults to `batch_first=False`, meaning inputs shaped `(T, B, C)`. Pass
#   `batch_first=True` for `(B, T, C)`.
# - Its `attn_mask` uses the **opposite** meaning (True = *not* allowed), so pass `~mask`.
#   It averages the weights over heads unless `average_attn_weights=False`.

# %%
B, T, C, nh = 2, 5, 16, 4
mha = MultiHeadAttention(C, nh)
torch_mha = nn.MultiheadAttention(C, nh, batch_first=True)
with torch.no_grad():
    torch_mha.in_proj_weight.copy_(
        torch.cat([mha.q_proj.weight, mha.k_proj.weight, mha.v_proj.weight])  # (3C, C)
    )
    torch_mha.in_proj_bias.copy_(torch.cat([mha.q_proj.bias, mha.k_proj.bias, mha.v_proj.bias]))
    torch_mha.out_proj.weight.copy_(mha.out_proj.weight)
    torch_mha.out_proj.bias.copy_(mha.out_proj.bias)

x = torch.randn(B, T, C)  # (B, T, C)
mask = torch.ones(T, T, dtype=torch.bool).tril()  # (T, S): query t may attend to keys <= t
ours, ours_w = mha(x, mask=mask)  # (B, T, C), (B, nh, T, S)
theirs, theirs_w = torch_mha(x, x, x, attn_mask=~mask, average_attn_weights=False)
print("outputs, largest difference:", (ours - theirs).abs().max().item())
print("weights, largest difference:", (ours_w - theirs_w).abs().max().item())

# %% [markdown]
# Equal to float32 rounding, per-head weights included. Now the two interface mistakes. Neither
# raises an error; both change the numbers:

# %%
wrong_mask, _ = torch_mha(x, x, x, attn_mask=mask)  # our mask meaning passed unchanged
nan_rows = wrong_mask.isnan().any(-1)  # (B, T): queries whose output is NaN
print(
    "mask not inverted: queries with NaN output:",
    nan_rows[0].nonzero().flatten().tolist(),
    "| largest difference on the others:",
    (wrong_mask - ours)[~nan_rows].abs().max().item(),
)

seq_first = nn.MultiheadAttention(C, nh)  # batch_first=False: reads x as (T=2, B=5, C)
seq_first.load_state_dict(torch_mha.state_dict())
wrong_layout, _ = seq_first(x, x, x)
print(
    "batch_first forgotten, output shape",
    tuple(wrong_layout.shape),
    "| largest difference from ours (no mask):",
    (wrong_layout - mha(x)[0]).abs().max().item(),
)

# %% [markdown]
# With the mask not inverted, every query may look only at *later* tokens, and the last query at
# none at all. For that query `nn.MultiheadAttention` returns NaN (it has no "zeros for an empty
# row" rule like ours). The other outputs are simply wrong.
#
# Forgetting `batch_first=True` is especially sneaky: the shapes still fit, but attention now
# mixes the *examples in the batch* at each position instead of the tokens of each sequence.
#
# ## 6 · Counting parameters
#
# Each of the four projections is a $C \times C$ weight matrix plus (optionally) a bias of length
# $C$. Notice what is *not* in that sentence: the number of heads.
#
# ### Exercise 4 · `mha_param_count`
#
# **Difficulty** ●○○ · **Importance** ★★☆ · **Time** ~5 min
#
# Return the number of trainable parameters of `MultiHeadAttention(d_model, num_heads, bias)` with a
# formula. Do not build the module. Raise a `ValueError` when `d_model` is not divisible by
# `num_heads`, as the module does.
#
# <details><summary>Hint</summary>
#
# Four matrices of `d_model * d_model` weights, plus four biases of `d_model` when `bias` is True.
# </details>


# %% nbgrader={"grade": false, "grade_id": "mha_param_count", "locked": false, "schema_version": 3, "solution": true, "task": false}
def mha_param_count(d_model: int, num_heads: int, bias: bool = True) -> int:
    """Trainable parameters of ``MultiHeadAttention(d_model, num_heads, bias)``, by formula.

    ``ValueError`` when ``d_model`` is not divisible by ``num_heads``.
    """
    ### BEGIN SOLUTION
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
    return 4 * (d_model * d_model + (d_model if bias else 0))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_mha_param_count_values", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""mha_param_count agrees with the parameters of nn.MultiheadAttention, with and without bias."""
check_mha_param_count(mha_param_count)
### BEGIN HIDDEN TESTS
check_mha_param_count(mha_param_count, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# Compare your formula with the modules themselves, at GPT-2 small's size ($C = 768$, 12 heads).
# GPT-2's attention layers have biases, so this is the parameter count of one of its 12 attention
# layers:

# %%
counted = sum(p.numel() for p in MultiHeadAttention(768, 12).parameters())
torch_counted = sum(p.numel() for p in nn.MultiheadAttention(768, 12).parameters())
print(
    f"formula {mha_param_count(768, 12):,} | your module {counted:,} | PyTorch's {torch_counted:,}"
)

# %% [markdown]
# ### How many heads do real models use?
#
# Common choices are 8, 12 or 16 heads; the largest models use many more. Designers usually fix
# the head size at 64 or 128 and let the head count grow with the width:

# %%
models = {  # name: (d_model C, heads nh), from the models' published configurations
    "Transformer base (2017)": (512, 8),
    "BERT-base / GPT-2 small": (768, 12),
    "BERT-large / GPT-2 medium": (1024, 16),
    "GPT-2 XL": (1600, 25),
    "Llama 2 7B": (4096, 32),
    "GPT-3 175B": (12288, 96),
}
for name, (d_model, heads) in models.items():
    print(f"{name:26s} C = {d_model:6,d} = {heads:3d} heads × {d_model // heads:3d} per head")

# %% [markdown]
# ## 7 · Why not one wide head?
#
# Start with a picture of what several heads *could* do. Take the sentence
#
# > *The developer who wrote the buggy function fixed it quickly.*
#
# and imagine three heads, each with its own softmax, reading it at the same time:
#
# | head | query token | reads mostly | the relation |
# |---|---|---|---|
# | 0 | "fixed" | "developer" | who did the fixing: subject and verb, across a relative clause |
# | 1 | "it" | "function" | what was fixed: a pronoun and the code object it names |
# | 2 | "quickly" | "fixed" | how and when the fixing went: an adverb and its verb |
#
# A single head compares every pair of tokens through one pair of query and key projections, so
# those would have to serve all three relations at once, and each token would get one mixture.
# Three heads can each tune their projections to one relation, each token gets one mixture per
# head, and the output projection combines them. **Treat this table as an illustration, not a finding.** Nobody assigns these jobs, and a
# trained model's heads rarely line up with tidy grammatical labels: a head's pattern depends on
# the input, several heads share a job, and some do nothing readable at all. Section 8 and
# notebook 07 look at what real heads do.
#
# Now the interview question, *"why not one wide head?"* First the count: at a fixed width $C$,
# one head of size $C$ and twelve heads of size $C/12$ have **exactly** the same parameters,
# because the projections are $C \times C$ either way. Your function says so:

# %%
counts = {f"{n} head{'s' * (n > 1)} × {768 // n}": mha_param_count(768, n) for n in (1, 12, 768)}
plots.plot_param_counts(counts, title="Attention parameters at C = 768")
plt.show()

# %% [markdown]
# So the difference is not size. It is **how many independent weightings** the layer can use at
# once. Each head has its own softmax, so each head chooses its own distribution over positions.
# One head gives each query a single weighted average of the values. With $nh$ heads, each query
# can read $nh$ different mixtures, one per head, each into its own $hs$ features, and the output
# projection combines them.
#
# The price: each head's scores are dot products in only $hs$ dimensions, so with very many heads
# each one's query–key comparison becomes coarse (the extreme above, 768 heads of size 1, compares
# single numbers). More heads is a trade of head size for head count, not a free improvement.
#
# ### A measured demo: a job for two heads
#
# A toy task. Each of 6 tokens carries 8 random features plus a one-hot position (so $C = 16$).
# The target at **every** position is the first token's features followed by the last token's
# features: the layer must read two positions at once.
#
# - **Two heads (size 8):** one head can attend to the first token and copy it into its 8 features,
#   the other to the last token.
# - **One head (size 16):** one softmax means one mixture, $a\,v_{\text{first}} + (1-a)\,v_{\text{last}}$.
#   Getting both halves right would need $a = 1$ and $1 - a = 1$. Its best compromise (an
#   average) has a squared error of about 0.5, where predicting zeros gives 1.0.
#
# Same parameter count, same data, same optimiser: let's train your module both ways (about a
# second; skipped during grading).


# %%
def first_and_last_batch(batch_size, T=6, d=8, generator=None):
    """x: (B, T, 2d) = random content + one-hot position; target: (B, T, 2d) = [first, last]."""
    content = torch.randn(batch_size, T, d, generator=generator)  # (B, T, d)
    position = torch.eye(T, d).expand(batch_size, T, d)  # (B, T, d): one-hot position
    x = torch.cat([content, position], dim=-1)  # (B, T, 2d)
    target = torch.cat([content[:, :1], content[:, -1:]], dim=-1).expand(-1, T, -1)  # (B, T, 2d)
    return x, target


def train_toy(num_heads, steps=200, seed=0):
    """Train MultiHeadAttention(16, num_heads) on the task; return the model and its losses."""
    torch.manual_seed(seed)
    model = MultiHeadAttention(16, num_heads)
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)
    data = torch.Generator().manual_seed(seed)
    losses = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tensors this small train fastest on one thread
    try:
        for _ in range(steps):
            x, target = first_and_last_batch(64, generator=data)
            loss = F.mse_loss(model(x)[0], target)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            losses.append(loss.item())
    finally:
        torch.set_num_threads(threads)
    return model, losses


if AUTOGRADING:
    print("Skipped while grading.")
else:
    start = time.perf_counter()
    toy = {n: train_toy(n) for n in (1, 2)}  # {num_heads: (model, losses)}
    x_test, target_test = first_and_last_batch(2048, generator=torch.Generator().manual_seed(123))
    with torch.no_grad():
        for n, (model, _) in toy.items():
            test_loss = F.mse_loss(model(x_test)[0], target_test).item()
            print(
                f"{n} head{'s' * (n > 1)}: test MSE {test_loss:.4f} "
                f"({sum(p.numel() for p in model.parameters())} parameters)"
            )
    print(f"trained both in {time.perf_counter() - start:.1f} s")
    plots.plot_loss_curves(
        {f"{n} head{'s' * (n > 1)}": losses for n, (_, losses) in toy.items()},
        title="Copy the first and the last token",
        ylabel="training MSE",
    )
    plt.show()

# %% [markdown]
# Two heads drive the error to about zero; one head stalls near 0.5, the error of the averaging
# compromise described above. Same parameters, very different ability. Look at what each model
# learned to attend to, for one example:

# %%
if not AUTOGRADING:
    labels = [f"pos {t}" for t in range(6)]
    with torch.no_grad():
        for n, (model, _) in toy.items():
            weights = model(x_test[:1])[1][0]  # (nh, T, S) for the first example
            plots.attention_heatmaps(
                weights, labels, labels, suptitle=f"{n} head{'s' * (n > 1)}, after training"
            )
    plt.show()

# %% [markdown]
# The two-head model split the job between its heads: one reads the first position, the other the
# last, from every query. The one-head model must share a single weighting between both tokens.
# This toy was designed so the split is clean. In a real model, a job is rarely this tidy.
#
# ## 8 · What heads learn, and what they do not
#
# It is tempting to picture each head with a job title ("the coreference head", "the subject–verb
# head"). The evidence is more mixed:
#
# - **Some heads do specialise.** Voita et al. (2019) found, in translation Transformers, heads
#   that attend to the neighbouring token, heads that follow particular syntactic relations, and a
#   head that attends to rare words. These specialised heads were the ones that mattered most.
# - **Many heads can be removed.** In the same study, pruning 38 of the 48 encoder heads cost only
#   about 0.15 BLEU. Michel et al. (2019) removed a large share of heads at test time without a
#   significant drop, and some layers worked with a single head. Note what these results are
#   about: removing heads from a model *after* it was trained with all of them. They do not show
#   that a model trained with fewer heads from the start would do as well.
# - **Real heads have no clean labels.** What a head does emerges from training, nobody assigns
#   it. A head's pattern often depends on the input, several heads can overlap, and a head that
#   looks meaningful in a heatmap may hardly affect the output. Attention patterns are evidence,
#   not explanations.
# - **More heads is not unconditionally better.** At a fixed width, more heads means smaller
#   heads. The head count is tuned with depth and width, as the table in section 6 shows.
#
# Notebook 07 lets you measure these claims on a small trained model: head entropy,
# previous-token heads, and how much the loss rises when you remove each head.
#
# ### Four claims, weighed
#
# Texts on multi-head attention often list four benefits. Here is how much support each one has,
# in this course and in the papers it cites. Two of them need numbers from notebook 07's sweep
# over the head count (2 layers, `d_model = 64`, one seed per setting), stored in
# `autograder/tools/data/nh_sweep.json`:

# %%
sweep = json.loads((DATA_DIR / "nh_sweep.json").read_text())
print(" nh   hs  loss at step 200  final loss  final accuracy")
for n, run in sweep["runs"].items():
    at_200 = next(e["loss"] for e in run["history"] if e["step"] == 200)
    print(
        f"{n:>3} {run['head_size']:>4} {at_200:17.2f} {run['final']['loss']:11.2f} "
        f"{run['final']['accuracy']:15.3f}"
    )

# %% [markdown]
# - **Diversity of attention** (different heads, different relations): well supported. Section 7
#   measured it on a toy task, Voita et al. (2019) found specialised heads in trained translation
#   models, and notebook 07 finds a previous-token head and induction heads in a model trained
#   here. The caveat is the one above: specialisation is partial and input-dependent.
# - **Expressiveness** (several patterns at once): supported, with a limit. At the same parameter
#   count, two heads solved section 7's task and one could not; in the sweep above the final loss
#   falls from 1 head to 8. Past that, heads become too narrow: 16 heads of size 4 end worse.
# - **Stable training** (redundant heads smooth the gradients): the weakest claim, and the course
#   has no evidence for it. Every model of the sweep trained without diverging, the single-head
#   one included, and it was the *fastest* starter (look at the loss at step 200). With one seed
#   per setting the sweep cannot measure run-to-run variance, the thing "stable" would mean.
#   What is well shown is redundancy *after* training (notebook 07 §5–6; Michel et al., 2019):
#   that is robustness to removing heads, not a property of the training run.
# - **Interpretability** (heads map to readable patterns): sometimes. Some heads have a clear
#   pattern, but a heatmap shows where a head looks, not what the model would lose without it;
#   notebook 07 measures both and finds they can disagree.
#
# In an interview, lead with the first two, and treat the last two as claims to qualify.

# %% [markdown]
# ## 9 · Cross-attention: queries from one sequence, keys and values from another
#
# So far `query`, `key` and `value` were the same tensor. In an encoder–decoder model
# (translation, speech recognition) the decoder reads the encoder's output: each of its `T`
# positions asks a question, and the answers come from the `S` positions of the *source*
# sequence. Same module, different inputs:
#
# ```
# decoder_x   (B, T, C) ─ q_proj ─→ queries (B, nh, T, hs) ─┐
# encoder_out (B, S, C) ─ k_proj ─→ keys    (B, nh, S, hs) ─┼─→ weights (B, nh, T, S) ─→ out (B, T, C)
# encoder_out (B, S, C) ─ v_proj ─→ values  (B, nh, S, hs) ─┘
# ```
#
# Nothing forces `S = T`, which is why your `forward` already reads `S` from `key`. Source
# sentences in a batch have different lengths, so the encoder output is padded to the longest one,
# and the decoder must never read the padding. That is a mask over the **keys** (the last axis):
# True for the `encoder_lengths[b]` real positions of sequence `b`. Every decoder query and every
# head sees the same padding, so the mask is `(B, 1, 1, S)` and broadcasts against `(B, nh, T, S)`.
#
# `nn.MultiheadAttention` takes the same information as `key_padding_mask`, shaped `(B, S)`, with
# the **opposite** meaning: True = *ignore this key*. And again, it expects `(S, B, C)` inputs
# unless you pass `batch_first=True`.
#
# ### Exercise 5 · `cross_attend`
#
# **Difficulty** ●○○ · **Importance** ★★☆ · **Time** ~10 min
#
# Build the padding mask from `encoder_lengths` and call `mha` with the decoder as the query and
# the encoder as key and value.
#
# <details><summary>Hint 1</summary>
#
# `torch.arange(S) < encoder_lengths[:, None]` is `(B, S)`: True where the position is real.
# </details>
#
# <details><summary>Hint 2</summary>
#
# A `(B, 1, S)` mask broadcasts as `(1, B, 1, S)`: it lines the batch up with the *heads*. Add both
# singleton dimensions: `keep[:, None, None, :]`.
# </details>


# %% nbgrader={"grade": false, "grade_id": "cross_attend", "locked": false, "schema_version": 3, "solution": true, "task": false}
def cross_attend(
    mha: nn.Module,
    decoder_x: torch.Tensor,
    encoder_out: torch.Tensor,
    encoder_lengths: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Decoder queries attend over the real (unpadded) encoder positions.

    Args:
        mha: a ``MultiHeadAttention``.
        decoder_x: ``(B, T, C)``, the queries.
        encoder_out: ``(B, S, C)``, the keys and values, padded after ``encoder_lengths[b]``.
        encoder_lengths: ``(B,)`` integers in ``1..S``.

    Returns:
        ``mha``'s ``(out (B, T, C), weights (B, nh, T, S))``; padded positions get weight 0.
    """
    ### BEGIN SOLUTION
    S = encoder_out.shape[1]
    keep = torch.arange(S, device=encoder_out.device) < encoder_lengths[:, None]  # (B, S)
    return mha(decoder_x, encoder_out, encoder_out, mask=keep[:, None, None, :])  # (B, 1, 1, S)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_cross_attend_matches_torch", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""cross_attend equals nn.MultiheadAttention with the same weights and a key_padding_mask, S != T."""
check_cross_attend(cross_attend, MultiHeadAttention)
### BEGIN HIDDEN TESTS
check_cross_attend(cross_attend, MultiHeadAttention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# The same computation with PyTorch's module, in its default sequence-first layout, to see both
# interface differences at once: transpose to `(S, B, C)`, and pass the *padded* positions.

# %%
B, T, S, C, nh = 2, 3, 5, 16, 4
cross = MultiHeadAttention(C, nh)
decoder_x, encoder_out = torch.randn(B, T, C), torch.randn(B, S, C)
encoder_lengths = torch.tensor([5, 2])  # the second source sentence has 3 padded positions

torch_cross = nn.MultiheadAttention(C, nh)  # batch_first=False: (T, B, C) and (S, B, C)
with torch.no_grad():
    torch_cross.in_proj_weight.copy_(
        torch.cat([cross.q_proj.weight, cross.k_proj.weight, cross.v_proj.weight])  # (3C, C)
    )
    torch_cross.in_proj_bias.copy_(
        torch.cat([cross.q_proj.bias, cross.k_proj.bias, cross.v_proj.bias])
    )
    torch_cross.out_proj.load_state_dict(cross.out_proj.state_dict())
padded = torch.arange(S) >= encoder_lengths[:, None]  # (B, S): True = ignore, torch's meaning
theirs, _ = torch_cross(
    decoder_x.transpose(0, 1),  # (T, B, C)
    encoder_out.transpose(0, 1),  # (S, B, C)
    encoder_out.transpose(0, 1),
    key_padding_mask=padded,
)
ours, ours_w = cross_attend(cross, decoder_x, encoder_out, encoder_lengths)
print("largest difference:", (ours - theirs.transpose(0, 1)).abs().max().item())
print("weight on padded positions of sequence 1:", ours_w[1, :, :, 2:].abs().max().item())

# %% [markdown]
# ## 10 · Attention dropout
#
# Transformers are usually trained with dropout, and one of its places is inside attention:
# on the **weights**, after the softmax and before they multiply `V`. Each weight is set to zero
# with probability `p`, so a query randomly loses some of the positions it would have read, and
# cannot rely on any single one. This is what nanoGPT's `attn_dropout`, `nn.MultiheadAttention`'s
# `dropout=` and the `dropout_p` of `F.scaled_dot_product_attention` do.
#
# Two details are easy to get wrong:
#
# - **The rescale.** The weights that survive are divided by `1 - p`. A dropped row then no longer
#   sums to 1, but its *expected* sum is still 1, so the next layer sees values of the same size in
#   training and in evaluation.
# - **Evaluation turns it off.** `model.eval()` (or `training=False`) makes dropout the identity:
#   predictions must not be random, and thanks to the rescale nothing else has to change. But
#   `eval()` only reaches `nn.Dropout` *modules*: a probability you pass to a function as a number
#   stays on (the end of this section measures it).
#
# Measured on one row of weights:

# %%
torch.manual_seed(0)
weights = torch.softmax(torch.randn(1, 8), dim=-1)  # (T=1, S=8): one query's weights
torch.manual_seed(2)  # a draw that drops two of the eight weights
dropped = F.dropout(weights, p=0.25, training=True)  # (1, 8)
kept = dropped != 0
print("kept positions:           ", kept.int().tolist()[0])
print(f"row sum before dropout:    {weights.sum().item():.3f}")
print(f"kept mass, no rescale:     {weights[kept].sum().item():.3f}")
print(f"row sum after the rescale: {dropped.sum().item():.3f}")
sums = F.dropout(weights.expand(10_000, 8), p=0.25).sum(-1)  # 10,000 independent draws
print(f"mean row sum over 10,000 draws: {sums.mean().item():.3f} (std {sums.std().item():.3f})")
print("eval mode leaves the weights alone:", torch.equal(F.dropout(weights, 0.25, False), weights))

# %% [markdown]
# A single draw drops some of the row's mass, and the rescale alone does not bring one row back to
# exactly 1; only the average over draws is 1. Dropout on the scores *before* the softmax would do
# something else entirely: a zeroed score is not a removed key, it still gets weight `e⁰/Σ`.
#
# ### Exercise 6 · `attention_with_dropout`
#
# **Difficulty** ●○○ · **Importance** ★★☆ · **Time** ~10 min
#
# Softmax attention as in notebook 01 (no mask here), with dropout on the weights. Use PyTorch's
# random generator (`F.dropout` does): the test seeds it with `torch.manual_seed` and compares
# with `F.dropout` under the same seed. `training` defaults to True, as in `F.dropout`.
#
# <details><summary>Hint 1 (the idea)</summary>
#
# Three steps: the weights of notebook 01, then dropout on those weights, then the weighted sum of
# `v`. Dropout zeroes each weight with probability `p` and divides the survivors by `1 - p`, and
# only when `training` is True.
# </details>
#
# <details><summary>Hint 2 (the shapes)</summary>
#
# The scores `q @ k.transpose(-2, -1) / √d` (with `d = q.shape[-1]`) are `(..., T, S)`; the softmax
# runs over the last axis, the keys. Dropout keeps the shape, and
# `(..., T, S) @ (..., S, d_v) -> (..., T, d_v)`. Return the weights *after* dropout: the ones that
# multiplied `v`.
# </details>
#
# <details><summary>Hint 3 (the code)</summary>
#
# `weights = F.dropout(torch.softmax(scores, dim=-1), p=p, training=training)`, then
# `return weights @ v, weights`. Passing `training` matters: `F.dropout`'s own default is
# `training=True`, so leaving it out keeps dropping in eval mode.
# </details>


# %% nbgrader={"grade": false, "grade_id": "attention_with_dropout", "locked": false, "schema_version": 3, "solution": true, "task": false}
def attention_with_dropout(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, p: float, training: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q kᵀ / √d) with dropout on the weights, then times v.

    Args:
        q: ``(..., T, d)``; k: ``(..., S, d)``; v: ``(..., S, d_v)``.
        p: probability of dropping each weight, ``0 <= p < 1``.
        training: dropout is applied only when True.

    Returns:
        ``(out (..., T, d_v), weights (..., T, S))``, ``weights`` after dropout (the ones that
        multiply ``v``).
    """
    ### BEGIN SOLUTION
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., T, S)
    weights = F.dropout(torch.softmax(scores, dim=-1), p=p, training=training)  # (..., T, S)
    return weights @ v, weights  # (..., T, S) @ (..., S, d_v) -> (..., T, d_v)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_attention_with_dropout_training", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""In training mode the weights are F.dropout of the softmax weights (same seed), before v."""
check_dropout_training(attention_with_dropout)
### BEGIN HIDDEN TESTS
check_dropout_training(attention_with_dropout, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_attention_with_dropout_eval", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""With training=False attention_with_dropout is plain softmax attention, whatever p."""
check_dropout_eval(attention_with_dropout)
### BEGIN HIDDEN TESTS
check_dropout_eval(attention_with_dropout, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### Dropout inside `F.scaled_dot_product_attention`
#
# Real models rarely write attention out by hand: they call
# `F.scaled_dot_product_attention(q, k, v, dropout_p=...)`, which drops weights inside the fused
# kernel. Its `dropout_p` is a plain number, and the function cannot know whether the model is
# training: `model.eval()` switches off every `nn.Dropout` *module*, but it does not reach a number
# passed to a function. Measured, on two modules in eval mode:


# %%
class AlwaysDropping(nn.Module):
    """Passes its dropout probability to SDPA as a number: eval() cannot reach it."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=self.p)


class DropoutModule(nn.Module):
    """The weights written out, dropped by an nn.Dropout module: eval() switches it off."""

    def __init__(self, p: float):
        super().__init__()
        self.drop = nn.Dropout(p)

    def forward(self, q, k, v):
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
        return self.drop(weights) @ v


q = k = v = torch.randn(1, 2, 4, 8)  # (B, nh, T, hs)
for module in (AlwaysDropping(0.5).eval(), DropoutModule(0.5).eval()):
    agree = torch.equal(module(q, k, v), module(q, k, v))
    print(f"{type(module).__name__:>14}, eval mode, p=0.5: two calls agree: {agree}")

# %% [markdown]
# ### Exercise 6b · `SDPAAttention`
#
# **Difficulty** ●○○ · **Importance** ★★☆ · **Time** ~5 min
#
# Write the module real code writes: attention through `F.scaled_dot_product_attention` with
# dropout `p` while the module trains, and none after `.eval()`. The test compares it, in
# training mode, with SDPA's own dropout under the same seed, and in eval mode with SDPA without
# dropout. Exercise 6's eval test catches the function form of the same bug: with
# `training=False`, an `out` that still changes from one seed to the next.
#
# <details><summary>Hint 1 (the idea)</summary>
#
# Every `nn.Module` has a `self.training` flag, which `.train()` sets and `.eval()` clears. Choose
# the probability from it on every call.
# </details>
#
# <details><summary>Hint 2 (the code)</summary>
#
# `F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0)`, the line
# nanoGPT's `CausalSelfAttention` uses; Hugging Face writes
# `dropout=0.0 if not self.training else self.attention_dropout`.
# </details>


# %% nbgrader={"grade": false, "grade_id": "SDPAAttention", "locked": false, "schema_version": 3, "solution": true, "task": false}
class SDPAAttention(nn.Module):
    """``F.scaled_dot_product_attention`` with attention dropout ``p`` while training only.

    ``forward(q (..., T, d), k (..., S, d), v (..., S, d_v)) -> (..., T, d_v)``.
    """

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        return F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_SDPAAttention_eval", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""SDPAAttention drops like SDPA's dropout_p while training and not at all after .eval()."""
check_sdpa_dropout(SDPAAttention)
### BEGIN HIDDEN TESTS
check_sdpa_dropout(SDPAAttention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# Yours next to the module that passes its probability as it is:

# %%
for module in (AlwaysDropping(0.5).eval(), SDPAAttention(0.5).eval()):
    agree = torch.equal(module(q, k, v), module(q, k, v))
    print(f"{type(module).__name__:>14}, eval mode, p=0.5: two calls agree: {agree}")

# %% [markdown]
# ## 11 · The transformer block
#
# A transformer is a stack of identical **blocks**, and multi-head attention is half of each one.
# The other half is a small MLP applied to every position on its own: `C → 4C → C` with a GELU in
# between. Attention moves information *between* positions; the MLP transforms it *at* each
# position. Each half is wrapped in a residual connection and a LayerNorm:
#
# ```
# x ─┬─ ln1 ─ attn ─(+)─┬─ ln2 ─ mlp ─(+)─→ out      x = x + attn(ln1(x))
#    └──────────────────┘└─────────────┘             x = x + mlp(ln2(x))
# ```
#
# This is the **pre-LN** layout of GPT-2 and most models since: each sub-layer reads a normalised
# copy of `x`, and the residual path `x → out` carries `x` through untouched. The original
# Transformer (2017) was **post-LN**: `x = ln1(x + attn(x))`, normalising *after* the sum, so a
# LayerNorm sits on the residual path itself. Xiong et al. (2020) showed that at initialisation
# post-LN's gradients are largest near the output, which is why post-LN stacks need a
# learning-rate warm-up, while pre-LN stacks train well without one. The untouched residual path
# has a price: nothing normalises what leaves the last pre-LN block, so a pre-LN *stack* ends with
# one more LayerNorm before the output layer (GPT-2's `ln_f`).
#
# PyTorch has both layouts in `nn.TransformerEncoderLayer`, whose defaults are not this block's.
# It equals the block below only as
# `nn.TransformerEncoderLayer(C, nh, dim_feedforward=4 * C, dropout=0.0, activation="gelu",
# batch_first=True, norm_first=True)`: the defaults are a 2048-wide MLP, dropout 0.1, ReLU,
# `(T, B, C)` inputs and post-LN. The test compares yours with it, holding your weights.
#
# GELU comes in two forms: the exact one (`nn.GELU()`, nanoGPT) and GPT-2's tanh approximation
# (`nn.GELU(approximate="tanh")`, Hugging Face's `gelu_new`), which differ by less than 10⁻³. Both
# are accepted here: the test tries the tanh form when the exact one does not match.
#
# ### Exercise 7 · `Block`
#
# **Difficulty** ●●○ · **Importance** ★★★ · **Time** ~15 min
#
# Attributes: `ln1`, `ln2` (`nn.LayerNorm(d_model)`), `attn` (your `MultiHeadAttention`) and
# `mlp`, whose two `nn.Linear` are `d_model → 4·d_model` and `4·d_model → d_model`. `forward`
# passes `mask` to the attention and returns the new `x`.
#
# <details><summary>Hint 1 (the idea)</summary>
#
# Two sub-layers, each "normalise a copy, transform it, add the result back": the attention mixes
# positions, the MLP transforms each position on its own. The residual adds to `x` itself, not to
# its normalised copy.
# </details>
#
# <details><summary>Hint 2 (the steps)</summary>
#
# In `__init__`: two `nn.LayerNorm(d_model)`, your `MultiHeadAttention(d_model, num_heads)`, and an
# `nn.Sequential` of Linear, GELU, Linear. In `forward`, every step keeps `(B, T, C)`.
# `self.attn(...)` returns `(out, weights)`: keep `out` only. Pass the mask by name, `mask=mask`,
# since the second positional argument of your `forward` is `key`.
# </details>
#
# <details><summary>Hint 3 (the code)</summary>
#
# `self.mlp = nn.Sequential(nn.Linear(C, 4 * C), nn.GELU(), nn.Linear(4 * C, C))`; in `forward`,
# `x = x + self.attn(self.ln1(x), mask=mask)[0]`, then `return x + self.mlp(self.ln2(x))`.
# </details>


# %% nbgrader={"grade": false, "grade_id": "Block", "locked": false, "schema_version": 3, "solution": true, "task": false}
class Block(nn.Module):
    """A pre-LN transformer block: ``x + attn(ln1(x))``, then ``x + mlp(ln2(x))``.

    Attributes:
        ln1, ln2: ``nn.LayerNorm(d_model)``.
        attn: ``MultiHeadAttention(d_model, num_heads)``.
        mlp: ``Linear(d_model, 4*d_model)``, GELU, ``Linear(4*d_model, d_model)``.
    """

    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        ### BEGIN SOLUTION
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, num_heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model)
        )
        ### END SOLUTION

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``x`` ``(B, T, C)``, ``mask`` bool broadcastable to ``(B, nh, T, T)`` (True = may
        attend) -> ``(B, T, C)``."""
        ### BEGIN SOLUTION
        x = x + self.attn(self.ln1(x), mask=mask)[0]  # (B, T, C)
        return x + self.mlp(self.ln2(x))  # (B, T, C)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_Block_structure", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""Block has ln1, attn, ln2 and a 4x MLP, and as many parameters as nn.TransformerEncoderLayer."""
check_block_structure(Block)
### BEGIN HIDDEN TESTS
check_block_structure(Block, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_Block_matches_torch", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""Block equals nn.TransformerEncoderLayer(norm_first=True, activation='gelu'), causal mask or none."""
check_block_matches_torch(Block)
### BEGIN HIDDEN TESTS
check_block_matches_torch(Block, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 8 · `block_param_count`
#
# **Difficulty** ●○○ · **Importance** ★★☆ · **Time** ~5 min
#
# Count the parameters of a block by formula: the attention (your `mha_param_count`), the MLP's
# two `nn.Linear` with a hidden width `d_mlp` (default `4 * d_model`) and the two LayerNorms,
# each a scale and a shift of length `d_model`. With `bias=False` the linear layers lose their
# biases and each LayerNorm keeps only its scale (`nn.LayerNorm(C, bias=False)`). Return an `int`
# on every call: a ratio written as a float (timm's `mlp_ratio = 4.0`) makes `C * 4.0` a float, so
# take `int(...)` of it.
#
# <details><summary>Hint</summary>
#
# With `h = d_mlp`: attention `4C² + 4C`, MLP `C·h + h + h·C + C`, LayerNorms `2·2C`.
# </details>


# %% nbgrader={"grade": false, "grade_id": "block_param_count", "locked": false, "schema_version": 3, "solution": true, "task": false}
def block_param_count(d_model: int, d_mlp: int | None = None, bias: bool = True) -> int:
    """Trainable parameters of one pre-LN block of width ``d_model``, by formula.

    ``d_mlp``: the MLP's hidden width, ``4 * d_model`` when None.
    """
    ### BEGIN SOLUTION
    C = d_model
    h = 4 * C if d_mlp is None else d_mlp
    attention = 4 * C * C + (4 * C if bias else 0)
    mlp = 2 * C * h + ((h + C) if bias else 0)
    norms = 2 * (C + (C if bias else 0))
    return attention + mlp + norms
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_block_param_count_values", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""block_param_count equals the parameters of nn.TransformerEncoderLayer, with and without bias."""
check_block_param_count(block_param_count)
### BEGIN HIDDEN TESTS
check_block_param_count(block_param_count, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# With the default `d_mlp = 4C` the weights add up to $4C^2 + 8C^2 = 12C^2$: the MLP holds twice
# as many as the attention, and the biases and LayerNorms add only $13C$. That is the rule of
# thumb "12·C² per layer". GPT-2 small stacks 12 blocks of width 768:

# %%
C = 768
per_block = block_param_count(C)
print(f"one block: {per_block:,} = 12·C² ({12 * C * C:,}) + 13·C ({13 * C:,})")
print(f"your Block module: {sum(p.numel() for p in Block(C, 12).parameters()):,}")
print(f"12 blocks: {12 * per_block / 1e6:.1f} M parameters")

# %% [markdown]
# About 85 M of GPT-2 small's 124 M parameters sit in its blocks; most of the rest is the token
# embedding (50,257 × 768 ≈ 38.6 M). A model is a stack of such blocks: notebook 04 counts its
# KV cache per layer of the stack.
#
# ## 12 · The Llama-style block: RMSNorm and SwiGLU
#
# Llama (Touvron et al., 2023) and most open models since keep the pre-norm layout of section 11
# and change four parts: **RMSNorm** instead of LayerNorm, a **SwiGLU** MLP instead of
# Linear–GELU–Linear, rotary position embeddings (RoPE, notebook 04) instead of learned absolute
# ones, and, from Llama 2 70B on, GQA (notebook 04) instead of full multi-head attention (Llama 1
# and the 7B and 13B Llama 2 models keep every key/value head). No linear layer has a bias. You
# build the first two here, then count what they change.
#
# **RMSNorm** (Zhang and Sennrich, 2019) keeps only half of LayerNorm. LayerNorm subtracts the
# mean and divides by the standard deviation, then scales and shifts. RMSNorm subtracts nothing
# and divides by the root mean square, then scales:
#
# $$\mathrm{RMSNorm}(x) = \frac{x}{\sqrt{\tfrac{1}{C}\sum_i x_i^2 + \varepsilon}} \circ w .$$
#
# The authors found that re-centring bought nothing measurable, and skipping it saves a
# reduction per token; `eps` sits **inside** the square root, and `w` (the `weight`) starts at
# ones. PyTorch ships it as `nn.RMSNorm`, the test's reference.
#
# ### Exercise 9 · `RMSNorm`
#
# **Difficulty** ●○○ · **Importance** ★★☆ · **Time** ~10 min
#
# `RMSNorm(dim, eps=1e-6)` (the default of Meta's `RMSNorm` class; the released Llama 2 and 3
# configs build every block with `norm_eps` 1e-5) with one parameter, `weight`, of shape `(dim,)`
# and initialised to ones; `forward(x)` normalises over the last dimension of any `(..., dim)`
# input. The output has `x`'s dtype, as `nn.RMSNorm`'s does; like it, compute the mean square in
# float32 for float16 or bfloat16 input (in float16, `x²` overflows past 65,504) and cast the
# result back. Compute it yourself: `F.rms_norm` and `nn.RMSNorm` are the answer, not the means.
#
# <details><summary>Hint</summary>
#
# `xf = x.float()`, then `(xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps))`,
# cast back with `.type_as(x)`, times `self.weight`: Llama's own code.
# </details>


# %% nbgrader={"grade": false, "grade_id": "RMSNorm", "locked": false, "schema_version": 3, "solution": true, "task": false}
class RMSNorm(nn.Module):
    """Root-mean-square normalisation over the last dimension, with a learned scale.

    Attributes:
        weight: ``(dim,)``, initialised to ones.
        eps: added to the mean square, inside the square root.
    """

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        ### BEGIN SOLUTION
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``(..., dim)`` -> ``(..., dim)`` in ``x``'s dtype (the weight in that dtype too,
        as after ``model.to(dtype)``): the mean square is taken in float32 for float16 and
        bfloat16 input, then the result cast back, as ``nn.RMSNorm`` does."""
        ### BEGIN SOLUTION
        xf = x.float()  # (..., dim): float16's x² overflows past 65,504
        rms = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)  # (..., 1)
        return (xf * rms).type_as(x) * self.weight  # (..., dim), x's dtype
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_RMSNorm_matches_torch", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""RMSNorm equals nn.RMSNorm holding the same weight, eps where it matters, the default eps."""
check_rmsnorm(RMSNorm)
### BEGIN HIDDEN TESTS
check_rmsnorm(RMSNorm, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# **SwiGLU** (Shazeer, 2020) replaces the MLP's single hidden layer by a *gated* one: two
# projections of `x` to width `h`, one passed through SiLU (`x · sigmoid(x)`, also called swish)
# and used as a gate that multiplies the other elementwise, then a projection back:
#
# $$\mathrm{SwiGLU}(x) = \big(\mathrm{SiLU}(x W_1) \circ x W_3\big)\, W_2 .$$
#
# Meta's code names the three matrices `w1` (the gate), `w3` (up) and `w2` (down); Hugging Face's
# `LlamaMLP` calls them `gate_proj`, `up_proj` and `down_proj`. Either naming is accepted here.
# With GELU in place of SiLU the same layout is GEGLU; with a plain sigmoid it is the original GLU.
#
# ### Exercise 10 · `SwiGLU`
#
# **Difficulty** ●○○ · **Importance** ★★☆ · **Time** ~10 min
#
# `SwiGLU(d_model, hidden)` with three bias-free `nn.Linear`: `w1` and `w3` (`d_model → hidden`)
# and `w2` (`hidden → d_model`); `forward(x)` maps `(..., d_model)` to `(..., d_model)`.


# %% nbgrader={"grade": false, "grade_id": "SwiGLU", "locked": false, "schema_version": 3, "solution": true, "task": false}
class SwiGLU(nn.Module):
    """Llama's MLP: ``w2(SiLU(w1(x)) * w3(x))``, no biases."""

    def __init__(self, d_model: int, hidden: int):
        super().__init__()
        ### BEGIN SOLUTION
        self.w1 = nn.Linear(d_model, hidden, bias=False)  # gate
        self.w3 = nn.Linear(d_model, hidden, bias=False)  # up
        self.w2 = nn.Linear(hidden, d_model, bias=False)  # down
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``(..., d_model)`` -> ``(..., d_model)``."""
        ### BEGIN SOLUTION
        return self.w2(F.silu(self.w1(x)) * self.w3(x))  # (..., h) -> (..., d_model)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_SwiGLU_matches_definition", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""SwiGLU equals w2(SiLU(x W1) * (x W3)) with its own weights, no biases."""
check_swiglu(SwiGLU)
### BEGIN HIDDEN TESTS
check_swiglu(SwiGLU, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 11 · `swiglu_hidden`: how wide?
#
# **Difficulty** ●○○ · **Importance** ★☆☆ · **Time** ~5 min
#
# SwiGLU has three matrices where the GELU MLP had two. To keep the parameter budget, Llama takes
# two thirds of the usual `4·C`, so that `3·C·h ≈ 8C²`, and rounds **up** to a multiple of
# `multiple_of` (good for GPU tiles). Larger models scale the width by `ffn_dim_multiplier`
# first. Meta's code: `h = int(2 * 4 * C / 3)`; if a multiplier is given, `h = int(multiplier * h)`;
# then round up. Return an `int`, using integer arithmetic (no tensors). Llama 2 7B
# (`C = 4096`) gets 11,008; Llama 3 8B (`multiple_of=1024`, `ffn_dim_multiplier=1.3`) 14,336.


# %% nbgrader={"grade": false, "grade_id": "swiglu_hidden", "locked": false, "schema_version": 3, "solution": true, "task": false}
def swiglu_hidden(
    d_model: int, multiple_of: int = 256, ffn_dim_multiplier: float | None = None
) -> int:
    """Llama's SwiGLU width: 2/3 of 4·d_model, times the multiplier, rounded up."""
    ### BEGIN SOLUTION
    h = int(2 * 4 * d_model / 3)
    if ffn_dim_multiplier is not None:
        h = int(ffn_dim_multiplier * h)
    return multiple_of * ((h + multiple_of - 1) // multiple_of)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_swiglu_hidden_values", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""swiglu_hidden follows Meta's rule and gives the published Llama 2 and Llama 3 widths."""
check_swiglu_hidden(swiglu_hidden)
### BEGIN HIDDEN TESTS
check_swiglu_hidden(swiglu_hidden, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 12 · `llama_block_param_count`
#
# **Difficulty** ●○○ · **Importance** ★★☆ · **Time** ~5 min
#
# Count one Llama block by formula, as `block_param_count` did for GPT-2's:
#
# - two **RMSNorms**: a scale and no shift, so `C` each;
# - **GQA** attention: `q_proj` and `o_proj` stay `C × C`, `k_proj` and `v_proj` shrink to
#   `C × nkv·hs` with `hs = C // nh`;
# - **SwiGLU**: `3·C·h`;
# - no biases anywhere.
#
# (The test compares with the same modules built on PyTorch's `meta` device.)


# %% nbgrader={"grade": false, "grade_id": "llama_block_param_count", "locked": false, "schema_version": 3, "solution": true, "task": false}
def llama_block_param_count(d_model: int, num_heads: int, num_kv_heads: int, hidden: int) -> int:
    """Parameters of one Llama block: GQA attention, SwiGLU MLP, two RMSNorms, no biases."""
    ### BEGIN SOLUTION
    C, hs = d_model, d_model // num_heads
    attention = 2 * C * C + 2 * C * num_kv_heads * hs  # q, o: C x C; k, v: C x nkv*hs
    mlp = 3 * C * hidden  # w1, w3: C -> h; w2: h -> C
    return attention + mlp + 2 * C  # two RMSNorms, a scale each
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_llama_block_param_count_values", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""llama_block_param_count equals the parameters of the block's modules, GQA and SwiGLU included."""
check_llama_block_param_count(llama_block_param_count)
### BEGIN HIDDEN TESTS
check_llama_block_param_count(llama_block_param_count, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# Two real configurations, with your width and your count:

# %%
for name, C, nh, nkv, multiple_of, multiplier, layers in [
    ("Llama 2 7B", 4096, 32, 32, 256, None, 32),
    ("Llama 2 70B", 8192, 64, 8, 4096, 1.3, 80),
]:
    hidden = swiglu_hidden(C, multiple_of, multiplier)
    n = llama_block_param_count(C, nh, nkv, hidden)
    print(
        f"{name}: h = {hidden:,}; {n:,} per block = {n / C**2:.2f}·C²; "
        f"{layers} blocks: {layers * n / 1e9:.1f} B"
    )

# %% [markdown]
# Llama 2 7B (no GQA, `h = 11008 ≈ 2.69·C`) lands on 12.06·C², the rule of thumb again. Llama 2 70B
# saves `2C²·(1 − 8/64) ≈ 1.75·C²` with 8 key/value heads for 64 query heads, and spends more
# than that on a wider MLP (`h = 3.5·C`, so `3·C·h = 10.5·C²`): 12.75·C² per block. Its 80
# blocks hold 68.5 B of the model's 69 B parameters; the embedding and the output layer hold the
# rest.
#
# **A note on QK-norm.** Some newer models (OLMo 2, Gemma 3, Qwen 3) add an RMSNorm on the
# queries and another on the keys, after the projections and before RoPE and the dot product. It
# bounds the size of the scores, so no logit can grow without limit and push the softmax into a
# one-hot corner; training at large learning rates becomes steadier. Where it normalises
# differs. Qwen 3 and Gemma 3 normalise each head's `hs` features, with one scale vector shared
# by the heads: `2·hs` parameters per layer. OLMo 2 normalises the whole query projection
# (`nh·hs` features) and the whole key projection (`nkv·hs`) at once, with a scale per feature:
# `(nh + nkv)·hs` parameters. Either way a rounding error next to the `12·C²`.
#
# Two more choices you will meet in 2025 configs. Many models decouple the head size from the
# width, `hs ≠ C / nh`: Qwen3-4B has `C = 2560` and 32 query heads of 128, so its `q_proj` is
# 2560 × 4096, not square. And Gemma stores RMSNorm's scale as an offset from one, `x̂ ∘ (1 + w)`
# with `w` starting at zero; the function is the same, the checkpoint's numbers are not.
#
# ## Summary
#
# - $\mathrm{MultiHead}(Q,K,V) = \mathrm{Concat}(\mathrm{head}_0..\mathrm{head}_{nh-1})W^O$ with
#   $\mathrm{head}_i = \mathrm{Attention}(QW^Q_i, KW^K_i, VW^V_i)$. In code: project, split, attend
#   in parallel, merge, project.
# - Split = `view(B, T, nh, hs)` + `transpose(1, 2)`; `view` alone scrambles tokens without any
#   error, and a round-trip test cannot catch it.
# - Your module equals `nn.MultiheadAttention` when the weights are copied, once you account for
#   `batch_first=False` and its inverted mask.
# - Parameters: $4(C^2 + C)$, whatever the number of heads.
# - Several heads buy several independent softmax weightings per query, at the cost of smaller
#   heads.
# - Cross-attention is the same module with queries from the decoder and keys/values from the
#   encoder (`S ≠ T`), masked over the encoder's padding: `(B, 1, 1, S)` here, `key_padding_mask`
#   with True = ignore in `nn.MultiheadAttention`.
# - Attention dropout acts on the weights, after the softmax and before `V`, rescales by
#   `1/(1 - p)` and is off in eval mode; `eval()` does not reach SDPA's `dropout_p`, so pass
#   `dropout_p=self.p if self.training else 0.0`.
# - A pre-LN block is `x + attn(ln1(x))`, then `x + mlp(ln2(x))`: about $12C^2$ parameters, and a
#   pre-LN stack ends with a final LayerNorm.
# - Llama's block: RMSNorm is `x / sqrt(mean(x²) + eps) · w` (no mean subtracted, no shift),
#   SwiGLU is `w2(SiLU(w1 x) ∘ w3 x)` with `h ≈ 2/3 · 4C` rounded up; with GQA they change the
#   parts, not the order of magnitude: $2C^2 + 2C \cdot nkv \cdot hs + 3Ch + 2C$.
#
# **Interview answer, in one breath:** *"Same parameters either way. What heads add is several
# independent attention distributions per token. One softmax gives one weighted average, so a
# single wide head cannot attend to, say, the subject and the previous word at once, while
# separate heads can, each in its own subspace. All heads run as one batched matrix product, so
# they cost little extra time."*
#
# **Next:** notebook 03 builds masks (causal, padding), notebook 04 shares key/value heads across a
# stack of such blocks, and notebook 05 measures why running the heads in parallel beats running
# them one after another.
