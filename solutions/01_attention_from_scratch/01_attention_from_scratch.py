# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 01 · Attention from scratch
#
# **Time:** about 1.5 h (~35 min of exercises) · **Prerequisites:** Python, basic PyTorch tensors
#
# In this notebook you build the core of every Transformer, one small step at a time:
#
# 1. **Dot-product similarity**: how a query decides which keys are relevant.
# 2. **A numerically stable softmax**: turning scores into weights without overflowing (exercise).
# 3. **Scaled dot-product attention**: $\mathrm{softmax}(QK^\top/\sqrt{d_k})\,V$, with a mask (exercise).
# 4. **Why divide by $\sqrt{d_k}$**: measured, not just asserted, with a plot and a slider.
# 5. **What attention cannot see**: word order (permutation equivariance).
# 6. **Your code against PyTorch's** `F.scaled_dot_product_attention`.
#
# **How this notebook is graded.** Each exercise is a function you complete in place of
# `raise NotImplementedError()`. The locked cell right after it checks your function and, if
# something is wrong, says what the likely mistake is. Run it as often as you like. When grading,
# hidden tests try more shapes and edge cases, so make the visible ones pass for the right reason.
# **Run › Run All Cells** goes on past failing test cells, and past examples that need an
# exercise you have not finished yet, so the plots and sliders further down run too; a failing
# test cell still counts as failed when the notebook is graded.
# In a terminal (**File › New › Terminal**), `python -m autograder check 01` grades the whole
# notebook, hidden tests included.
#
# ## Shape legend
#
# Every docstring and shape comment in this course uses the same letters:
#
# | symbol | meaning |
# |---|---|
# | `B` | batch size |
# | `T` | number of queries (query sequence length) |
# | `S` | number of keys and values (key/value sequence length; `S = T` in self-attention) |
# | `d_k` | width of a query or key vector |
# | `d_v` | width of a value vector (often equal to `d_k`, but it does not have to be) |
# | `C` | model width, `d_model` (notebook 02) |
#
# A comment such as `# (B, T, S)` at the end of a line gives the shape of what that line produces.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
import math
import os
import warnings

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from autograder.checks.nb01_attention import (
    check_sdpa_mask,
    check_sdpa_properties,
    check_sdpa_shapes,
    check_sdpa_values,
    check_softmax_no_builtin,
    check_softmax_properties,
    check_softmax_stable,
    check_softmax_values,
)
from autograder.tools import plots
from autograder.tools.widgets import dk_softmax_widget, temperature_widget

warnings.filterwarnings("ignore")
torch.manual_seed(0)
AUTOGRADING = os.environ.get("NBGRADER_EXECUTION") == "autograde"
# %matplotlib inline

# %% [markdown]
# ## 1 · Dot-product similarity
#
# Attention answers one question for every position in a sequence: *which other positions should I
# read from, and how much?* Each position asks with a **query** vector $q$; every position offers a
# **key** vector $k$ (what it can be found by) and a **value** vector $v$ (what it hands over when
# read).
#
# The relevance of key $k$ to query $q$ is their dot product,
#
# $$q \cdot k = \sum_{i=1}^{d_k} q_i k_i = \lVert q\rVert\,\lVert k\rVert \cos\theta .$$
#
# It is large when the two vectors point the same way, zero when they are orthogonal and negative
# when they point apart, and it grows with their lengths.
#
# A hand example in two dimensions. Take the query $q = (1, 0.5)$ and three keys:
#
# | key | vector | $q \cdot k$ |
# |---|---|---|
# | `cat` | $(2, 0)$ | $1\cdot 2 + 0.5\cdot 0 = 2$ |
# | `dog` | $(1, 1)$ | $1\cdot 1 + 0.5\cdot 1 = 1.5$ |
# | `car` | $(-1, 1)$ | $1\cdot(-1) + 0.5\cdot 1 = -0.5$ |
#
# So this query cares most about `cat`, a little less about `dog`, and not about `car`.
# Check the arithmetic with PyTorch:

# %%
q = torch.tensor([1.0, 0.5])  # (d_k,)
keys = torch.tensor([[2.0, 0.0], [1.0, 1.0], [-1.0, 1.0]])  # (S, d_k): cat, dog, car
key_names = ["cat", "dog", "car"]
scores = keys @ q  # (S, d_k) @ (d_k,) -> (S,)
print(dict(zip(key_names, scores.tolist(), strict=True)))

# %% [markdown]
# With many queries at once, stack them as the rows of a matrix $Q$ `(T, d_k)` and the keys as the
# rows of $K$ `(S, d_k)`. Then **one** matrix product gives every query–key score:
# $(QK^\top)_{ts} = q_t \cdot k_s$, a `(T, S)` table with one row per query.

# %%
Q = torch.tensor([[1.0, 0.5], [0.0, 1.0]])  # (T, d_k): two queries
all_scores = Q @ keys.T  # (T, d_k) @ (d_k, S) -> (T, S)
print(all_scores)
print("row 0 equals the hand example:", torch.equal(all_scores[0], scores))

# %% [markdown]
# ## 2 · From scores to weights: a stable softmax
#
# Scores can be any real numbers. To *mix* values we want weights that are positive and sum to 1.
# The softmax does that, and keeps the order of the scores:
#
# $$\mathrm{softmax}(x)_i = \frac{e^{x_i}}{\sum_j e^{x_j}} .$$
#
# Written literally, it breaks on large scores. `float32` cannot hold numbers above about
# $3.4\times10^{38}$, and $e^{89}$ is already larger than that. Watch what happens to scores of
# size $10^4$, which a badly scaled model can produce:

# %%
x = torch.tensor([1e4, 1e4 - 1.0, 0.0])  # float32
naive = torch.exp(x) / torch.exp(x).sum()
print("exp(x)       =", torch.exp(x))
print("naive softmax =", naive, " <- inf / inf is NaN")
print("torch.softmax =", torch.softmax(x, dim=-1))

# %% [markdown]
# The fix rests on one identity: adding the same constant $c$ to every score does not change the
# softmax, because $e^{x_i - c} = e^{x_i}e^{-c}$ and the factor $e^{-c}$ cancels between the
# numerator and the denominator. Choose $c = \max_j x_j$. Then every exponent is $\le 0$, so every
# $e^{x_i - c}$ lies in $(0, 1]$, and the largest one is exactly $e^0 = 1$, so the denominator is
# at least 1. Nothing can overflow, and nothing divides by zero.

# %%
shifted = x - x.max()
print("x - max(x)       =", shifted)
print("stable by hand   =", torch.exp(shifted) / torch.exp(shifted).sum())

# %% [markdown]
# ### Exercise 1 · `softmax`
#
# **Difficulty** ●○○ · **Importance** ★★★ (used by everything that follows) · **Time** ~10 min
#
# Write a numerically stable softmax along any dimension `dim` of a tensor of any shape.
#
# - Do **not** call `torch.softmax`, `Tensor.softmax`, `F.softmax` or `F.log_softmax`: the check
#   watches for them. `torch.exp`, `amax`/`max` and `sum` are what you need.
# - Keep the input's dtype and device, and do not modify the input in place.
#
# <details><summary>Hint 1</summary>
#
# Reduce along `dim` with `keepdim=True`, so the maximum has a size-1 dimension where `dim` was and
# broadcasts back against `x`.
# </details>
#
# <details><summary>Hint 2</summary>
#
# `x.amax(dim=dim, keepdim=True)` returns only the maxima (`x.max(dim=...)` returns a pair of
# values and indices).
# </details>
#
# <details><summary>Hint 3</summary>
#
# Three lines: subtract the max, exponentiate, divide by the sum along `dim` (again with
# `keepdim=True`).
# </details>


# %% nbgrader={"grade": false, "grade_id": "softmax", "locked": false, "schema_version": 3, "solution": true, "task": false}
def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax of ``x`` along ``dim``.

    Args:
        x: a floating-point tensor of any shape ``(...)``; any finite values, e.g. 1e4 in float32.
        dim: the dimension whose entries become a probability distribution.

    Returns:
        A tensor of the same shape, dtype and device as ``x``: positive entries that sum to 1
        along ``dim``.
    """
    ### BEGIN SOLUTION
    x_max = x.amax(dim=dim, keepdim=True)  # size 1 along dim, broadcasts back against x
    e = torch.exp(x - x_max)  # every exponent <= 0, so every entry lies in (0, 1]
    return e / e.sum(dim=dim, keepdim=True)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_softmax_matches_torch", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""softmax matches torch.softmax on several shapes and along any dim."""
check_softmax_values(softmax)
### BEGIN HIDDEN TESTS
check_softmax_values(softmax, seed=1, thorough=True)
check_softmax_properties(softmax, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_softmax_stable", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""softmax stays finite and correct for scores as large as 1e4 in float32."""
check_softmax_stable(softmax)
### BEGIN HIDDEN TESTS
check_softmax_stable(softmax, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_softmax_no_builtin", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""softmax is computed by hand, without calling a built-in softmax."""
check_softmax_no_builtin(softmax)

# %% [markdown]
# Your softmax on the overflow example, and on the hand scores from section 1. Notice that
# `cat` (score 2) gets more weight than `dog` (score 1.5), but not *all* of it: the softmax is a
# soft version of "pick the maximum".

# %%
print("softmax(x)      =", softmax(x))
print("cat, dog, car   =", softmax(scores))

# %% [markdown]
# ## 3 · Scaled dot-product attention
#
# Now put the pieces together. For queries $Q$ `(T, d_k)`, keys $K$ `(S, d_k)` and values
# $V$ `(S, d_v)`:
#
# $$\mathrm{Attention}(Q, K, V) = \underbrace{\mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right)}_{\text{weights } (T,\,S)} V .$$
#
# ```
#   Q (T, d_k) ──┐
#                ├─ Q @ Kᵀ / √d_k ─→ scores (T, S) ─→ mask ─→ softmax over S ─→ weights (T, S) ─┐
#   K (S, d_k) ──┘                                                                              ├─ @ ─→ out (T, d_v)
#   V (S, d_v) ─────────────────────────────────────────────────────────────────────────────────┘
# ```
#
# Row $t$ of the output is a weighted average of the value vectors, with weights that say how well
# each key matched query $t$. Section 4 explains the $\sqrt{d_k}$; for now take it as part of the
# recipe.
#
# Real inputs have extra leading dimensions, such as a batch `B` and (from notebook 02) heads `nh`.
# Write the function for shapes `(..., T, d_k)` and let matrix multiplication broadcast over the
# `...`: `@` treats the last two dimensions as matrices and everything before them as a batch.
#
# ### Masks: True means "may attend"
#
# Often a query must not look at some keys: padding tokens, or future tokens in a language model
# (notebook 03). A **boolean mask** broadcastable to `(..., T, S)` says which pairs are allowed.
# In this course, as in `torch.nn.functional.scaled_dot_product_attention`, **`True` means the query
# may attend to that key**.
#
# The standard way to apply it: set forbidden scores to $-\infty$ *before* the softmax. Then
# $e^{-\infty} = 0$, the forbidden keys get exactly zero weight, and the allowed weights still sum
# to 1. (Masking *after* the softmax would leave rows that no longer sum to 1.)
#
# One edge case needs a decision. If a query may attend to **no** key at all, its row of scores is
# all $-\infty$ and the softmax computes $0/0 = \text{NaN}$. A single NaN spreads through the
# rest of the network and through training. The convention here: **such a row gets all-zero weights
# and an all-zero output, never NaN.**
#
# > **Careful with `torch.nn.MultiheadAttention`.** Its `attn_mask` and `key_padding_mask` use the
# > *opposite* meaning: `True` there means "may **not** attend". It also defaults to
# > `batch_first=False`, i.e. inputs shaped `(T, B, C)`. Passing a mask with the wrong meaning
# > raises no error; it silently gives wrong numbers. Notebook 02 compares against it.

# %% [markdown]
# ### Exercise 2 · `scaled_dot_product_attention`
#
# **Difficulty** ●●○ · **Importance** ★★★ (the heart of the course) · **Time** ~20 min
#
# Implement the formula above for inputs with any number of leading dimensions. Return both the
# output and the attention weights. Use your own `softmax`; do not call
# `F.scaled_dot_product_attention`.
#
# <details><summary>Hint 1: the transpose</summary>
#
# `k.transpose(-2, -1)` swaps only the last two dimensions, so `q @ k.transpose(-2, -1)` works for
# any leading dimensions: `(..., T, d_k) @ (..., d_k, S) -> (..., T, S)`. (`k.T` reverses *all*
# dimensions, which is wrong as soon as there is a batch.)
# </details>
#
# <details><summary>Hint 2: the mask</summary>
#
# `scores.masked_fill(~mask, float("-inf"))` puts $-\infty$ wherever the mask is `False`. It
# returns a new tensor; `masked_fill_` (with an underscore) would modify `scores` in place.
# </details>
#
# <details><summary>Hint 3: rows with no allowed key</summary>
#
# After the softmax, set the weights of forbidden positions to 0 again, with the same mask. In
# ordinary rows those weights are already 0, so nothing changes; in fully masked rows this replaces
# the NaNs with zeros. The output is then `weights @ v`.
# </details>


# %% nbgrader={"grade": false, "grade_id": "scaled_dot_product_attention", "locked": false, "schema_version": 3, "solution": true, "task": false}
def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention(q, k, v) = softmax(q kᵀ / √d_k) v, with an optional boolean mask.

    Args:
        q: queries ``(..., T, d_k)``.
        k: keys ``(..., S, d_k)``.
        v: values ``(..., S, d_v)``.
        mask: optional bool tensor broadcastable to ``(..., T, S)``; True = the query may attend
            to that key. A query with no allowed key gets zero weights and a zero output.

    Returns:
        ``(out, weights)``: out ``(..., T, d_v)``, weights ``(..., T, S)``; same dtype as ``q``.
    """
    ### BEGIN SOLUTION
    d_k = q.size(-1)
    scores = (
        q @ k.transpose(-2, -1) / math.sqrt(d_k)
    )  # (..., T, d_k) @ (..., d_k, S) -> (..., T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # forbidden keys: exp(-inf) = 0
    weights = softmax(scores, dim=-1)  # (..., T, S), each row sums to 1 (NaN if fully masked)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)  # fully masked rows: NaN -> 0, others unchanged
    out = weights @ v  # (..., T, S) @ (..., S, d_v) -> (..., T, d_v)
    return out, weights
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_scaled_dot_product_attention_shapes", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""scaled_dot_product_attention returns (out, weights) with the right shapes, T != S and d_k != d_v."""
check_sdpa_shapes(scaled_dot_product_attention)
### BEGIN HIDDEN TESTS
check_sdpa_shapes(scaled_dot_product_attention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_scaled_dot_product_attention_matches_torch", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
"""scaled_dot_product_attention matches F.scaled_dot_product_attention, weights included."""
check_sdpa_values(scaled_dot_product_attention)
### BEGIN HIDDEN TESTS
check_sdpa_values(scaled_dot_product_attention, seed=1, thorough=True)
check_sdpa_properties(scaled_dot_product_attention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_scaled_dot_product_attention_mask", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""The mask means True = may attend; masked keys get zero weight; fully masked rows give zeros."""
check_sdpa_mask(scaled_dot_product_attention)
### BEGIN HIDDEN TESTS
check_sdpa_mask(scaled_dot_product_attention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### Seeing it: an attention heatmap
#
# Take the sentence "the cat sat on the mat" and give every *word* a fixed random vector (a toy
# embedding: the two "the" get the same vector). Use these vectors directly as queries, keys and
# values. A real model first passes them through learned projections; that is notebook 02.
#
# Before running the cell, predict: where is each row's largest weight? What do the two rows for
# "the" have in common?

# %%
tokens = "the cat sat on the mat".split()
vocab = sorted(set(tokens))
embedding = torch.randn(len(vocab), 16, generator=torch.Generator().manual_seed(1))  # (V, d_k)
X = embedding[[vocab.index(w) for w in tokens]]  # (T, d_k) with T = 6

out, weights = scaled_dot_product_attention(X, X, X)  # out (T, d_k), weights (T, T)
plots.attention_heatmap(weights, tokens, tokens, title="self-attention, no projections")
plt.show()

# %% [markdown]
# Each word attends mostly to itself (a vector matches itself best: $x \cdot x = \lVert x\rVert^2$),
# and the two "the" rows are identical, because identical queries see identical keys. Also, both
# "the" *columns* receive the same weight from every query: attention does not know that one "the"
# comes first and the other fifth.
#
# Now a mask. Pad the sentence to 8 positions with `<pad>` tokens and allow attention only to real
# tokens. The mask is `(1, S)`, one flag per key, and broadcasts over all queries.

# %%
padded = tokens + ["<pad>", "<pad>"]
X_pad = torch.cat([X, torch.randn(2, 16)])  # (T=8, d_k): two padding positions
key_is_real = torch.tensor([[True] * 6 + [False] * 2])  # (1, S) broadcasts to (T, S)
out_pad, weights_pad = scaled_dot_product_attention(X_pad, X_pad, X_pad, mask=key_is_real)
plots.attention_heatmap(weights_pad, padded, padded, title="padding keys masked out")
plt.show()
print("weight on padding keys:", weights_pad[:, 6:].abs().max().item())

# %% [markdown]
# The padding columns are exactly zero, and every row still sums to 1. And when a query has **no**
# allowed key at all:

# %%
nothing_allowed = torch.zeros(1, 8, dtype=torch.bool)  # (1, S): every key forbidden
out_none, weights_none = scaled_dot_product_attention(X_pad, X_pad, X_pad, mask=nothing_allowed)
print("any NaN?", out_none.isnan().any().item(), "| largest |output|:", out_none.abs().max().item())

# %% [markdown]
# ## 4 · Why divide by √d_k? Measured
#
# Suppose the components of $q$ and $k$ are independent, with mean 0 and variance 1 (roughly what
# a well-initialised network produces). Each product $q_i k_i$ then has mean 0 and variance 1,
# and the dot product adds $d_k$ independent such terms, so
#
# $$\mathrm{Var}(q \cdot k) = d_k, \qquad \mathrm{Var}\!\left(\frac{q \cdot k}{\sqrt{d_k}}\right) = 1 .$$
#
# A typical score is therefore about $\sqrt{d_k}$ in size: 8 for $d_k = 64$, 32 for $d_k = 1024$.
# The softmax turns differences of that size into near one-hot weights. Do not take this on trust:
# the next cell draws random unit-variance vectors for several $d_k$ and measures three things,
# with and without the scaling:
#
# - the variance of the scores;
# - the mean **largest weight** in a softmax over 16 keys (1/16 = uniform, 1 = one-hot);
# - the mean **entropy** of those weights, in nats ($\log 16 \approx 2.77$ = uniform, 0 = one-hot).

# %%
d_ks = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
n_queries, n_keys = 1000, 16
gen = torch.Generator().manual_seed(0)


def random_scores(d_k):
    """Scores of n_queries random queries against n_keys random keys, unit-variance components."""
    q_s = torch.randn(n_queries, 1, d_k, generator=gen)  # (N, 1, d_k): one query per row
    k_s = torch.randn(n_queries, n_keys, d_k, generator=gen)  # (N, S, d_k)
    return (q_s @ k_s.transpose(-2, -1)).squeeze(1)  # (N, 1, d_k) @ (N, d_k, S) -> (N, S)


if AUTOGRADING:
    print("Skipped while grading (a few seconds).")
else:
    names = ["q·k", "q·k / √d_k"]
    variance = {name: [] for name in names}
    max_weight = {name: [] for name in names}
    entropy = {name: [] for name in names}
    for d_k in d_ks:
        raw = random_scores(d_k)  # (N, S)
        for name, s in zip(names, [raw, raw / math.sqrt(d_k)], strict=True):
            w = softmax(s)  # (N, S)
            variance[name].append(s.var().item())
            max_weight[name].append(w.amax(-1).mean().item())
            entropy[name].append(-(w * w.clamp_min(1e-30).log()).sum(-1).mean().item())

    plots.plot_scaling_study(d_ks, variance, max_weight, entropy, n_keys)
    plt.show()
    print(" d_k | var(q·k) | var(q·k/√d_k) | max weight raw | max weight scaled")
    for i, d_k in enumerate(d_ks):
        print(
            f"{d_k:4d} | {variance[names[0]][i]:8.1f} | {variance[names[1]][i]:13.2f} | "
            f"{max_weight[names[0]][i]:14.2f} | {max_weight[names[1]][i]:17.2f}"
        )

# %% [markdown]
# What the measurement shows:
#
# - The variance of the raw scores tracks the dotted line $\mathrm{Var} = d_k$; after dividing by
#   $\sqrt{d_k}$ it stays near 1 for every $d_k$.
# - Without scaling, the softmax saturates as $d_k$ grows. At $d_k = 64$, a common head width, the
#   largest of the 16 weights is already about 0.85 on average and the entropy has dropped from
#   about 2.4 to about 0.4 nats: each query reads essentially one key, chosen by chance at
#   initialisation. With scaling, the weights look the same for every $d_k$: spread out, but
#   not uniform.
#
# Why does saturation matter? Besides ignoring most keys, a saturated softmax passes almost no
# gradient. Its Jacobian is $\mathrm{diag}(p) - pp^\top$, which is zero when $p$ is one-hot. At
# initialisation, then, the unscaled model would barely learn which keys to attend to. Measured:

# %%
for d_k in (4, 64, 1024):
    raw = random_scores(d_k)  # (N, S)
    norms = []
    for s in (raw, raw / math.sqrt(d_k)):
        p = softmax(s)  # (N, S)
        jacobian = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (N, S, S)
        norms.append(jacobian.norm(dim=(-2, -1)).mean().item())
    print(f"d_k={d_k:4d}: mean softmax Jacobian norm  raw {norms[0]:.4f}  scaled {norms[1]:.4f}")

# %% [markdown]
# ### Try it: the d_k slider
#
# Move the slider to change $d_k$ for one random query and 8 random keys, and tick the box to
# divide by $\sqrt{d_k}$. The vectors stay the same for a given $d_k$, so the box compares the very
# same scores with and without scaling. (If no slider appears, the widget extension is missing:
# run this notebook in JupyterLab with `ipywidgets` installed.)

# %%
dk_softmax_widget(n_keys=8)

# %% [markdown]
# Dividing the scores by a number $\tau$ before a softmax is called using a **temperature** $\tau$.
# Scaled dot-product attention is a softmax at temperature $\sqrt{d_k}$, chosen so that the scores
# have unit variance. Below, the hand scores from section 1 at different temperatures: a low
# temperature picks `cat` alone, a high one spreads the weight evenly.

# %%
temperature_widget(scores, labels=key_names)

# %% [markdown]
# ## 5 · What attention cannot see: word order
#
# Shuffle the input tokens, and the outputs are shuffled the same way, with no other change. This
# property is called **permutation equivariance**: `attention(X[perm]) == attention(X)[perm]`.
# The reason: every output row is a sum over *all* keys, and a sum does not care about the order of
# its terms.
#
# Test it on "the cat sat on the mat" against "the mat sat on the cat":

# %%
perm = torch.tensor([0, 5, 2, 3, 4, 1])  # swap "cat" and "mat"
swapped = [tokens[i] for i in perm]
out_swapped, _ = scaled_dot_product_attention(X[perm], X[perm], X[perm])  # (T, d_k)
print(" ".join(tokens), "->", " ".join(swapped))
print(
    "attention(X[perm]) == attention(X)[perm]:", torch.allclose(out_swapped, out[perm], atol=1e-6)
)
cat_before, cat_after = out[tokens.index("cat")], out_swapped[swapped.index("cat")]
print(
    "output for 'cat' identical in both sentences:",
    torch.allclose(cat_before, cat_after, atol=1e-6),
)

# %% [markdown]
# So attention alone cannot tell who sat on whom: "cat" gets the same output vector in both
# sentences. Language depends on order, so Transformers add **positional information** to the
# input, for example a vector per position added to each token's embedding (learned, or sinusoidal
# as in Vaswani et al., 2017), or a rotation of queries and keys by position (RoPE). Adding one
# random vector per position is enough to break the symmetry:

# %%
positions = 0.5 * torch.randn(6, 16, generator=torch.Generator().manual_seed(2))  # (T, d_k)
X_pos, X_pos_swapped = X + positions, X[perm] + positions  # position i gets vector i
out_pos, _ = scaled_dot_product_attention(X_pos, X_pos, X_pos)
out_pos_swapped, _ = scaled_dot_product_attention(X_pos_swapped, X_pos_swapped, X_pos_swapped)
diff = (out_pos[tokens.index("cat")] - out_pos_swapped[swapped.index("cat")]).abs().max().item()
print("with positions, 'cat' output changes by up to", round(diff, 3))

# %% [markdown]
# ## 6 · Your attention against PyTorch's
#
# PyTorch ships the same computation as `torch.nn.functional.scaled_dot_product_attention`. It
# returns only the output (not the weights), because its fast kernels never store the `(T, S)`
# weight matrix at all (notebook 06). It uses the same mask meaning as yours, and it also accepts a
# float mask that is *added* to the scores (0 = keep, $-\infty$ = drop). Compare on a batch with
# heads, `T != S`, `d_k != d_v` and a random mask:

# %%
q_b = torch.randn(2, 3, 5, 8)  # (B, nh, T, d_k)
k_b = torch.randn(2, 3, 7, 8)  # (B, nh, S, d_k)
v_b = torch.randn(2, 3, 7, 4)  # (B, nh, S, d_v)
mask_b = torch.rand(2, 1, 5, 7) > 0.3  # (B, 1, T, S) broadcasts over heads
mask_b[0, 0, 0] = False  # one query with no allowed key

ours, _ = scaled_dot_product_attention(q_b, k_b, v_b, mask=mask_b)  # (B, nh, T, d_v)
theirs = F.scaled_dot_product_attention(q_b, k_b, v_b, attn_mask=mask_b)  # (B, nh, T, d_v)
print("largest difference:", (ours - theirs).abs().max().item())
print("fully masked query, PyTorch's output:", theirs[0, 0, 0])

# %% [markdown]
# The differences are at float32 rounding level. For the fully masked query, PyTorch 2.13 on the
# CPU also returns zeros (older releases returned NaN here, so do not rely on it across versions
# and devices; your function guarantees it).
#
# And the mistake that raises no error: passing a mask with the opposite meaning, as
# `nn.MultiheadAttention` expects, to a function that wants True = may attend.

# %%
wrong = F.scaled_dot_product_attention(q_b, k_b, v_b, attn_mask=~mask_b)
print(
    "inverted mask, largest difference:", (wrong - theirs).abs().max().item(), "(no error raised)"
)

# %% [markdown]
# ## Summary
#
# - A query scores every key with a dot product; $QK^\top$ computes all scores in one product.
# - Softmax turns scores into weights; subtracting the row maximum first makes it overflow-proof.
# - Attention = $\mathrm{softmax}(QK^\top/\sqrt{d_k})V$; a boolean mask (True = may attend) sets
#   forbidden scores to $-\infty$; a query with nothing to attend to gets zeros, not NaN.
# - Unit-variance vectors give scores with variance $d_k$. Dividing by $\sqrt{d_k}$ brings it
#   back to 1, which keeps the softmax from saturating and its gradient from vanishing (you measured
#   both).
# - Attention is permutation equivariant: order must come from positional information.
# - Your function matches `F.scaled_dot_product_attention`; watch the mask convention of
#   `nn.MultiheadAttention`.
#
# **Next, notebook 02:** learned projections and many heads in parallel: multi-head attention.
