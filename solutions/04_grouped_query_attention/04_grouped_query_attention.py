# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 · Grouped-query attention and the KV cache
#
# **Time:** about 2.5 h (~100 min of exercises) · **Prerequisites:** 02, 03
#
# A language model writes one token at a time, and every new token attends to all the tokens
# before it. Recomputing their keys and values at every step would be wasteful, so models keep
# them: the **KV cache**. For long texts that cache, not the weights, often decides how much fits
# on a GPU. **Grouped-query attention** (GQA) shrinks it by letting several query heads share one
# key/value head. In this notebook you will:
#
# 1. Count the bytes of a KV cache for real models (exercise 1).
# 2. Share key/value heads between query heads with `repeat_kv`, and see why
#    `repeat_interleave` is right and `repeat` silently wrong (exercise 2).
# 3. Build a `GroupedQueryAttention` module with a KV cache, whose causal mask still works when
#    the queries are only the newest tokens (exercise 3).
# 4. Check its two ends: one key/value head per query head is ordinary multi-head attention
#    (MHA), a single shared one is multi-query attention (MQA).
# 5. Count parameters and cache memory of MHA, GQA and MQA at real sizes (exercise 4).
# 6. Measure how much faster decoding gets with the cache.
# 7. Turn a trained MHA into a GQA by averaging key/value heads, and measure what that costs
#    (exercise 5).
# 8. Give the queries and keys their positions by rotating them (RoPE, exercise 6; in float32,
#    even for bfloat16 models), and cache the keys already rotated, at positions that are an
#    input of the layer (exercise 7).
#
# **How this notebook is graded.** Each exercise is a function or class you complete in place of
# `raise NotImplementedError()`. The locked cell after it checks your code and names the likely
# mistake when something is wrong. Hidden tests try more sizes when grading.
# **Run › Run All Cells** goes on past failing test cells, and past examples that need an
# exercise you have not finished yet, so the plots and sliders further down run too; a failing
# test cell still counts as failed when the notebook is graded.
# In a terminal (**File › New › Terminal**), `python -m autograder check 04` grades the whole
# notebook, hidden tests included.
#
# You need notebook 02 (multi-head
# attention) and the idea of a causal mask from notebook 03; attention itself is computed here by
# PyTorch's `F.scaled_dot_product_attention`.
#
# ## Shape legend
#
# | symbol | meaning |
# |---|---|
# | `B` | batch size |
# | `T` | number of **new** positions fed in this call (queries) |
# | `S` | number of positions in the cache after this call (keys/values): past + new |
# | `C` | model width, `d_model` |
# | `nh` | number of query heads |
# | `nkv` | number of key/value heads (`nkv` divides `nh`) |
# | `hs` | head size, `C // nh`, the same for queries, keys and values |
# | `n_rep` | query heads per key/value head, `nh // nkv` |
#
# While heads attend they live in dimension 1: queries `(B, nh, T, hs)`, keys and values
# `(B, nkv, S, hs)`.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
import os
import time
import warnings

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks.nb04_gqa import (
    check_gqa_decoding,
    check_gqa_kv_cache,
    check_gqa_param_count,
    check_kv_cache_bytes,
    check_mha_to_gqa,
    check_repeat_kv,
)
from autograder.checks.nb04_gqa_attention import check_gqa_matches_torch, check_gqa_structure
from autograder.checks.nb04_rope import check_apply_rope_relative, check_apply_rope_values
from autograder.checks.nb04_rotary import (
    check_rotary_gqa_decoding,
    check_rotary_gqa_full_pass,
    check_rotary_gqa_positions,
)
from autograder.tools import nb04_gqa_plots, plots
from autograder.tools.modules import TorchMultiHeadAttention
from autograder.tools.nb03_masks import plot_masks, top_left_causal
from autograder.tools.nb04_gqa import TinyDecoder, benchmark_decoding, cache_nbytes

warnings.filterwarnings("ignore")
torch.manual_seed(0)
AUTOGRADING = os.environ.get("NBGRADER_EXECUTION") == "autograde"
# %matplotlib inline

# %% [markdown]
# ## 1 · Generating text, and what it keeps in memory
#
# A decoder generates like this: run the model on the prompt, take the prediction at the last
# position, append that token, run again, and so on. Look at what step $t$ needs. Its one new
# query must be compared with the keys of **all** $t$ positions so far, and mixes their values.
# Those keys and values, in every layer, are exactly the ones computed at the earlier steps: a
# token's key does not change when later tokens arrive (the causal mask sees to that).
#
# So instead of recomputing them, a model stores them. After each step every layer appends the
# new position's key and value to its **KV cache**, and the next step feeds only the newest token.
#
# ```
#  step 1 (prompt "the cat")   K, V cache per layer:  [the, cat]
#  step 2 (new token "sat")    only "sat" goes in  ->  [the, cat, sat]          "sat" attends to all 3
#  step 3 (new token "on")     only "on" goes in   ->  [the, cat, sat, on]      "on" attends to all 4
# ```
#
# The price is memory. Per token, each layer stores one key and one value vector for each
# key/value head:
#
# $$\text{bytes} = 2 \times \text{layers} \times n_{kv} \times hs \times \text{tokens} \times \text{batch} \times \text{bytes per value},$$
#
# where the 2 counts K and V. In ordinary multi-head attention $n_{kv} = n_h$. For a model the size
# of Llama 2 7B (32 layers, 32 heads of 128, fp16 = 2 bytes per value), that is:

# %%
per_token = 2 * 32 * 32 * 128 * 2  # K and V × layers × heads × head size × bytes
print(f"{per_token:,} bytes per token = {per_token / 2**20:.2f} MiB")
print(f"one 4,096-token conversation: {per_token * 4096 / 1e9:.2f} GB")
print(
    f"a batch of 32 of them:        {per_token * 4096 * 32 / 1e9:.1f} GB  (the fp16 weights: ~13.5 GB)"
)

# %% [markdown]
# At a serving batch size, the cache outgrows the model itself. Reading it also costs time: every
# decoding step reads the whole cache once, so a bigger cache means slower tokens (on a GPU,
# decoding is usually limited by memory traffic, not by arithmetic).
#
# ### Exercise 1 · `kv_cache_bytes`
#
# **Difficulty** ●○○ · **Importance** ★★★ (the number that sizes deployments) · **Time** ~5 min
#
# Turn the formula into a function. Use integer arithmetic only: it must answer instantly for any
# size.
#
# <details><summary>Hint</summary>
#
# Multiply all six arguments together, and by 2 for K and V.
# </details>


# %% nbgrader={"grade": false, "grade_id": "kv_cache_bytes", "locked": false, "schema_version": 3, "solution": true, "task": false}
def kv_cache_bytes(
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    seq_len: int,
    batch_size: int = 1,
    bytes_per_value: int = 2,
) -> int:
    """Bytes of the KV cache: K and V of ``seq_len`` positions in every layer, for a whole batch.

    Every layer stores keys and values of shape ``(batch_size, num_kv_heads, seq_len, head_dim)``,
    each value taking ``bytes_per_value`` bytes (2 for fp16/bf16).
    """
    ### BEGIN SOLUTION
    return 2 * num_layers * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_value
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_kv_cache_bytes_values", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""kv_cache_bytes equals the size of the cache tensors themselves, Llama 2 70B included."""
check_kv_cache_bytes(kv_cache_bytes)
### BEGIN HIDDEN TESTS
check_kv_cache_bytes(kv_cache_bytes, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# Check it against real tensors: allocate the cache of a small model and add up their bytes.

# %%
cache = [
    (torch.zeros(4, 8, 100, 64, dtype=torch.bfloat16),) * 2 for _ in range(6)
]  # 6 layers of (B, nkv, S, hs)
print(
    f"tensors: {cache_nbytes(cache):,} bytes | formula: {kv_cache_bytes(6, 8, 64, 100, batch_size=4):,} bytes"
)

# %% [markdown]
# In that formula the layers, the head size, the length and the batch are set by the model and the
# job. The number of key/value heads is the knob: nothing forces it to equal the number of query
# heads.
#
# ## 2 · Sharing key/value heads
#
# In multi-head attention each of the $n_h$ query heads has its own key head and value head.
# Shazeer (2019) asked what happens if all query heads share **one** key/value head:
# **multi-query attention** (MQA). The cache shrinks by a factor $n_h$, but quality can drop, and
# training can become less stable. **Grouped-query attention** (Ainslie et al., 2023) sits in
# between: the query heads are split into $n_{kv}$ groups of $n_{rep} = n_h / n_{kv}$
# consecutive heads, and each group shares one key/value head. Llama 2 70B has 64 query heads in
# 8 groups (its 7B and 13B siblings still use MHA); Llama 3 and Mistral 7B use 8 key/value heads
# too.
#
# Each query head keeps its own queries, so each still computes its own attention pattern. What
# the heads of a group share is *what they compare against and read*: the same keys and values.

# %%
nb04_gqa_plots.plot_head_sharing(num_heads=8, kv_heads=(8, 2, 1))
plt.show()

# %% [markdown]
# In code, the simplest way to attend is to make the key/value heads as many as the query heads
# again, by repeating each one, and then run ordinary attention. With heads numbered from 0,
# query head `h` belongs to group `h // n_rep`, so slot `h` must hold kv head `h // n_rep`:
#
# ```
# kv heads                 [K0, K1]                    (B, nkv=2, S, hs)
# query heads              [Q0, Q1, Q2, Q3]            groups: Q0, Q1 -> K0   Q2, Q3 -> K1
# repeat_interleave(2)     [K0, K0, K1, K1]   right    (B, nh=4, S, hs)
# repeat(1, 2, 1, 1)       [K0, K1, K0, K1]   wrong: Q1 reads K1, Q2 reads K0
# ```
#
# Both give the right shape and run without error. Only one matches the weights the model was
# trained with, so an imported checkpoint would produce nonsense with the other.
#
# ### Exercise 2 · `repeat_kv`
#
# **Difficulty** ●○○ · **Importance** ★★★ (the classic silent GQA bug) · **Time** ~5 min
#
# <details><summary>Hint 1</summary>
#
# `torch.repeat_interleave(x, n_rep, dim=1)` repeats each head `n_rep` times in place.
# </details>
#
# <details><summary>Hint 2: without copying first (the Llama reference code)</summary>
#
# `x[:, :, None].expand(B, nkv, n_rep, S, hs)` makes a view with a new dimension after the heads;
# `.reshape(B, nkv * n_rep, S, hs)` then merges `(nkv, n_rep)` into one head dimension with
# kv head `g` first `n_rep` times, then `g + 1`...
# </details>


# %% nbgrader={"grade": false, "grade_id": "repeat_kv", "locked": false, "schema_version": 3, "solution": true, "task": false}
def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Repeat each key/value head ``n_rep`` times so that query head ``h`` reads kv head ``h // n_rep``.

    Args:
        x: keys or values ``(B, nkv, S, hs)``.
        n_rep: query heads per key/value head, ``nh // nkv``.

    Returns:
        ``(B, nkv * n_rep, S, hs)``; output head ``h`` is input head ``h // n_rep``.
    """
    ### BEGIN SOLUTION
    return torch.repeat_interleave(x, n_rep, dim=1)  # (B, nkv, S, hs) -> (B, nh, S, hs)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_repeat_kv_grouping", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""repeat_kv gives (B, nkv*n_rep, S, hs) with kv head h // n_rep in slot h (repeat_interleave, not repeat)."""
check_repeat_kv(repeat_kv)
### BEGIN HIDDEN TESTS
check_repeat_kv(repeat_kv, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# Your function in the picture (last row): every box should carry the colour of the query head
# above it.

# %%
nb04_gqa_plots.plot_kv_grouping(num_heads=8, num_kv_heads=2, repeat_fn=repeat_kv)
plt.show()

# %% [markdown]
# ### PyTorch does the grouping for you
#
# Since version 2.5, `F.scaled_dot_product_attention` accepts keys and values with fewer heads
# than the queries when you pass `enable_gqa=True`. It groups them the same way (its reference
# implementation calls `repeat_interleave`, exactly as you did). Compare:

# %%
B, nh, nkv, T, hs = 2, 8, 2, 5, 16
q = torch.randn(B, nh, T, hs)  # (B, nh, T, hs)
k = torch.randn(B, nkv, T, hs)  # (B, nkv, S, hs)
v = torch.randn(B, nkv, T, hs)  # (B, nkv, S, hs)
n_rep = nh // nkv
ours = F.scaled_dot_product_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep))  # (B, nh, T, hs)
builtin = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)  # (B, nh, T, hs)
tiled = F.scaled_dot_product_attention(q, k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1))
print(
    "repeat_kv + SDPA vs enable_gqa=True, largest difference:", (ours - builtin).abs().max().item()
)
print(
    "with .repeat instead, largest difference:              ", (tiled - builtin).abs().max().item()
)

# %% [markdown]
# ## 3 · Causal masks when the queries are the newest tokens
#
# Without a cache, queries and keys cover the same positions ($T = S$), and the causal mask is
# the lower triangle. With a cache they do not: the call receives only the $T$ newest tokens, while
# the keys cover all $S$ positions, past and new. The new queries are the **last** $T$ of the $S$
# positions, so query $t$ sits at position $S - T + t$ and may see keys $0 \dots S - T + t$.
# The allowed region is the lower triangle aligned to the **bottom-right** corner:
# `torch.ones(T, S, dtype=torch.bool).tril(S - T)`.
#
# `is_causal=True` in `F.scaled_dot_product_attention` aligns the triangle to the **top-left**
# corner instead, as if the queries were the *first* $T$ positions (notebook 03). That is right
# when $T = S$ and wrong with a cache: a single new token would see only position 0.

# %%
T_new, S_all = 2, 6
bottom_right = torch.ones(T_new, S_all, dtype=torch.bool).tril(S_all - T_new)  # (T, S)
plot_masks(
    {
        "bottom-right: tril(S - T)  (right)": bottom_right,
        "top-left: is_causal=True  (wrong here)": top_left_causal(T_new, S_all),
    },
    query_labels=[f"pos {S_all - T_new + t}" for t in range(T_new)],
)
plt.show()

q1 = torch.randn(1, 1, 1, 8)  # (B, nh, T=1, hs): one new token
k6 = torch.randn(1, 1, 6, 8)  # (B, nh, S=6, hs): 5 cached positions + the new one
eye = torch.eye(6).view(1, 1, 6, 6)  # identity values: the output is the attention weights
print(
    "weights with is_causal=True:",
    F.scaled_dot_product_attention(q1, k6, eye, is_causal=True)[0, 0, 0],
)
print(
    "weights, bottom-right mask: ",
    F.scaled_dot_product_attention(q1, k6, eye, attn_mask=torch.ones(1, 6, dtype=torch.bool))[
        0, 0, 0
    ],
)

# %% [markdown]
# ### Exercise 3 · `GroupedQueryAttention`
#
# **Difficulty** ●●● · **Importance** ★★★ (what Llama-style models run) · **Time** ~35 min
#
# A causal self-attention module with $n_h$ query heads, $n_{kv}$ key/value heads and a cache.
#
# - `__init__`: raise a `ValueError` unless `d_model % num_heads == 0` and
#   `num_heads % num_kv_heads == 0`. Store `num_heads` and `num_kv_heads`. Create `q_proj` and
#   `out_proj` as `nn.Linear(d_model, d_model, bias=bias)`, and `k_proj` and `v_proj` as
#   `nn.Linear(d_model, num_kv_heads * hs, bias=bias)`: one `hs`-wide slice per key/value head,
#   in the head layout of notebook 02 (head `g` owns features `g*hs : (g+1)*hs`).
# - `forward(x, past_kv=None, causal=True)`:
#   1. project and split: `q` into `(B, nh, T, hs)`, `k` and `v` into `(B, nkv, T, hs)`;
#   2. if `past_kv = (past_k, past_v)` is given, append the new keys and values after the past
#      ones, along the positions (dim 2): `(B, nkv, S, hs)`;
#   3. attend: repeat `k`, `v` with your `repeat_kv` and call `F.scaled_dot_product_attention`
#      (or pass `enable_gqa=True`), with the bottom-right causal mask when `causal` is True;
#   4. merge the heads, apply `out_proj`, and return `(out, (k, v))` where `k`, `v` are the
#      **un-repeated** `(B, nkv, S, hs)` tensors: the cache the next call receives as `past_kv`.
#
# With `causal=False` every query may read every key (an encoder).
#
# <details><summary>Hint 1: splitting</summary>
#
# `self.k_proj(x).view(B, T, self.num_kv_heads, hs).transpose(1, 2)` gives `(B, nkv, T, hs)`.
# </details>
#
# <details><summary>Hint 2: the mask</summary>
#
# Build it after appending, when `S = k.shape[2]` is known:
# `torch.ones(T, S, dtype=torch.bool, device=x.device).tril(S - T)`. Without a cache `S = T` and
# it is the usual lower triangle.
# </details>
#
# <details><summary>Hint 3: what goes in the cache</summary>
#
# Cache `k` and `v` *before* `repeat_kv`. Storing the repeated copies would give the cache `nh`
# heads again and throw away the memory GQA saves.
# </details>


# %% nbgrader={"grade": false, "grade_id": "GroupedQueryAttention", "locked": false, "schema_version": 3, "solution": true, "task": false}
class GroupedQueryAttention(nn.Module):
    """Causal self-attention in which groups of query heads share key/value heads, with a cache.

    Attributes:
        num_heads: ``nh``, query heads.
        num_kv_heads: ``nkv``, key/value heads; query head ``h`` reads kv head ``h // (nh // nkv)``.
        q_proj, out_proj: ``nn.Linear(d_model, d_model, bias=bias)``.
        k_proj, v_proj: ``nn.Linear(d_model, num_kv_heads * hs, bias=bias)``, ``hs = d_model // nh``.
    """

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int, bias: bool = False):
        """``ValueError`` unless ``d_model % num_heads == 0 and num_heads % num_kv_heads == 0``."""
        super().__init__()
        ### BEGIN SOLUTION
        if d_model % num_heads != 0 or num_heads % num_kv_heads != 0:
            raise ValueError(
                f"need d_model % num_heads == 0 and num_heads % num_kv_heads == 0, got "
                f"d_model={d_model}, num_heads={num_heads}, num_kv_heads={num_kv_heads}"
            )
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        hs = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, num_kv_heads * hs, bias=bias)
        self.v_proj = nn.Linear(d_model, num_kv_heads * hs, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        ### END SOLUTION

    def forward(
        self,
        x: torch.Tensor,
        past_kv: tuple[torch.Tensor, torch.Tensor] | None = None,
        causal: bool = True,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Attend from the ``T`` new positions in ``x`` to the cached ones and to themselves.

        Args:
            x: the new positions ``(B, T, C)``.
            past_kv: ``(k, v)``, each ``(B, nkv, P, hs)``, from the previous call; None at the start.
            causal: if True, new position ``t`` (position ``P + t`` overall) attends to keys
                ``0 … P + t`` only.

        Returns:
            ``(out, (k, v))``: out ``(B, T, C)``; k and v ``(B, nkv, S, hs)`` with ``S = P + T``,
            past positions first.
        """
        ### BEGIN SOLUTION
        B, T, C = x.shape
        hs = C // self.num_heads
        q = self.q_proj(x).view(B, T, self.num_heads, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = self.k_proj(x).view(B, T, self.num_kv_heads, hs).transpose(1, 2)  # (B, nkv, T, hs)
        v = self.v_proj(x).view(B, T, self.num_kv_heads, hs).transpose(1, 2)  # (B, nkv, T, hs)
        if past_kv is not None:
            past_k, past_v = past_kv
            k = torch.cat(
                [past_k, k], dim=2
            )  # (B, nkv, P, hs) + (B, nkv, T, hs) -> (B, nkv, S, hs)
            v = torch.cat([past_v, v], dim=2)  # (B, nkv, S, hs)
        S = k.shape[2]
        mask = None
        if causal:  # the new queries are the last T of the S positions: bottom-right aligned
            mask = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(S - T)  # (T, S)
        n_rep = self.num_heads // self.num_kv_heads
        out = F.scaled_dot_product_attention(
            q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), attn_mask=mask
        )  # (B, nh, T, hs) @ (B, nh, hs, S) -> (B, nh, T, S) -> (B, nh, T, hs)
        out = out.transpose(1, 2).reshape(B, T, C)  # (B, nh, T, hs) -> (B, T, C)
        return self.out_proj(out), (k, v)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_GroupedQueryAttention_structure", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""GroupedQueryAttention has num_heads, num_kv_heads, narrow k/v projections and rejects indivisible sizes."""
check_gqa_structure(GroupedQueryAttention)
### BEGIN HIDDEN TESTS
check_gqa_structure(GroupedQueryAttention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_GroupedQueryAttention_matches_torch", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
"""GroupedQueryAttention equals SDPA with enable_gqa=True, causal or not, MQA to MHA; nkv = nh equals nn.MultiheadAttention."""
check_gqa_matches_torch(GroupedQueryAttention)
### BEGIN HIDDEN TESTS
check_gqa_matches_torch(GroupedQueryAttention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_GroupedQueryAttention_kv_cache", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""The returned cache holds nkv heads, the past positions followed by the new ones along dim 2."""
check_gqa_kv_cache(GroupedQueryAttention)
### BEGIN HIDDEN TESTS
check_gqa_kv_cache(GroupedQueryAttention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_GroupedQueryAttention_decoding", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""Decoding token by token (or in chunks) with the cache equals one full causal forward pass."""
check_gqa_decoding(GroupedQueryAttention)
### BEGIN HIDDEN TESTS
check_gqa_decoding(GroupedQueryAttention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ## 4 · Decoding with the cache, and the two ends of the family
#
# The property that makes the cache safe to use: feeding a sequence one token at a time, carrying
# the cache along, must give exactly the outputs of one causal pass over the whole sequence.
# Watch the cache grow by one position per step while keeping its 2 heads:

# %%
gqa = GroupedQueryAttention(d_model=32, num_heads=8, num_kv_heads=2).eval()
x = torch.randn(1, 6, 32)  # (B, T, C)
with torch.no_grad():
    full, _ = gqa(x)  # (B, T, C): all positions at once
    past, steps = None, []
    for t in range(x.shape[1]):
        out_t, past = gqa(x[:, t : t + 1], past_kv=past)  # (B, 1, C); cache (B, nkv, t + 1, hs)
        steps.append(out_t)
        print(f"step {t}: cache k {tuple(past[0].shape)}")
print(
    "token by token vs full pass, largest difference:",
    (torch.cat(steps, dim=1) - full).abs().max().item(),
)

# %% [markdown]
# **Real caches preallocate.** Your cache grows with `torch.cat`, which allocates a new tensor at
# every step and copies the whole past into it: step $t$ copies $t$ positions, so decoding $n$
# tokens copies about $n^2/2$ positions per layer, and the allocator sees a new tensor every
# time. That keeps the exercise simple (the module returns its cache and has no state to reset),
# and Hugging Face's default `DynamicCache` also concatenates. Inference code built for speed
# allocates the cache once, for the longest sequence it will serve, and writes each new position
# in place: Hugging Face's `StaticCache` allocates `max_cache_len` positions up front, and vLLM
# reserves the GPU memory for its cache when it starts and hands it out in fixed-size blocks
# (PagedAttention, Kwon et al., 2023). Attention then reads a view of the filled part:

# %%
B, nkv, hs, max_len = 1, 2, 4, 6
cache_k = torch.zeros(B, nkv, max_len, hs)  # (B, nkv, max_len, hs): allocated once
for t in range(3):
    k_new = torch.randn(B, nkv, 1, hs)  # (B, nkv, 1, hs): this step's keys
    cache_k[:, :, t : t + 1] = k_new  # written in place: no new tensor, the past is not copied
    past_k = cache_k[:, :, : t + 1]  # (B, nkv, t + 1, hs): a view, what attention reads
    print(
        f"step {t}: attention reads {tuple(past_k.shape)}, same memory as the buffer:",
        past_k.data_ptr() == cache_k.data_ptr(),
    )

# %% [markdown]
# **The MHA end.** With `num_kv_heads = num_heads` nothing is shared, `n_rep = 1`, and `repeat_kv`
# does nothing: the module is multi-head attention. Copy its weights into PyTorch's own
# `nn.MultiheadAttention` and into the course's `TorchMultiHeadAttention` (notebook 02's interface,
# computed by PyTorch; its boolean mask means True = may attend, like yours):

# %%
C, nh = 32, 4
mha_end = GroupedQueryAttention(C, nh, num_kv_heads=nh, bias=True).eval()
torch_mha = nn.MultiheadAttention(C, nh, batch_first=True)
course_mha = TorchMultiHeadAttention(C, nh)
with torch.no_grad():
    torch_mha.in_proj_weight.copy_(
        torch.cat([mha_end.q_proj.weight, mha_end.k_proj.weight, mha_end.v_proj.weight])
    )  # (3C, C)
    torch_mha.in_proj_bias.copy_(
        torch.cat([mha_end.q_proj.bias, mha_end.k_proj.bias, mha_end.v_proj.bias])
    )  # (3C,)
    torch_mha.out_proj.load_state_dict(mha_end.out_proj.state_dict())
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        getattr(course_mha, name).load_state_dict(getattr(mha_end, name).state_dict())

    x = torch.randn(2, 7, C)  # (B, T, C)
    causal = torch.ones(7, 7, dtype=torch.bool).tril()  # (T, S): True = may attend
    ours, _ = mha_end(x)
    theirs, _ = torch_mha(x, x, x, attn_mask=~causal)  # nn.MultiheadAttention: True = blocked
    course, _ = course_mha(x, mask=causal)
print("vs nn.MultiheadAttention:   ", (ours - theirs).abs().max().item())
print("vs TorchMultiHeadAttention: ", (ours - course).abs().max().item())

# %% [markdown]
# **The MQA end.** With `num_kv_heads = 1`, `repeat_kv` hands the same key/value head to every
# query head. The heads still attend differently, because each has its own queries (the query
# weights are scaled up below so that the random patterns are easier to tell apart):

# %%
mqa = GroupedQueryAttention(C, nh, num_kv_heads=1).eval()
with torch.no_grad():
    mqa.q_proj.weight.mul_(4)  # sharper random queries: patterns that are easier to tell apart
    _, (k_mqa, _) = mqa(x)  # k_mqa: (B, 1, T, hs)
    q_mqa = mqa.q_proj(x).view(2, 7, nh, C // nh).transpose(1, 2)  # (B, nh, T, hs)
    eye = torch.eye(7).expand(2, nh, 7, 7)  # identity values: SDPA returns the weights
    weights = F.scaled_dot_product_attention(
        q_mqa, repeat_kv(k_mqa, nh), eye, attn_mask=causal
    )  # (B, nh, T, S)
print("cached k:", tuple(k_mqa.shape), "for", nh, "query heads")
plots.attention_heatmaps(
    weights[0],
    titles=[f"query head {h}, kv head 0" for h in range(nh)],
    suptitle="MQA: one shared key head, four different patterns",
)
plt.show()

# %% [markdown]
# ## 5 · What sharing saves: parameters and cache
#
# Only `k_proj` and `v_proj` shrink; `q_proj` and `out_proj` keep their `d_model × d_model` size.
#
# ### Exercise 4 · `gqa_param_count`
#
# **Difficulty** ●○○ · **Importance** ★★☆ · **Time** ~5 min
#
# Count the parameters of `GroupedQueryAttention(d_model, num_heads, num_kv_heads, bias)` with a
# formula (no module, no tensors). Raise a `ValueError` for indivisible sizes, as the module does.
#
# <details><summary>Hint</summary>
#
# With `kv = num_kv_heads * (d_model // num_heads)`: two `d_model × d_model` matrices, two
# `d_model × kv` matrices, and with `bias` the biases `d_model + kv + kv + d_model`.
# </details>


# %% nbgrader={"grade": false, "grade_id": "gqa_param_count", "locked": false, "schema_version": 3, "solution": true, "task": false}
def gqa_param_count(d_model: int, num_heads: int, num_kv_heads: int, bias: bool = False) -> int:
    """Trainable parameters of ``GroupedQueryAttention(d_model, num_heads, num_kv_heads, bias)``.

    ``ValueError`` unless ``d_model % num_heads == 0 and num_heads % num_kv_heads == 0``.
    """
    ### BEGIN SOLUTION
    if d_model % num_heads != 0 or num_heads % num_kv_heads != 0:
        raise ValueError("need d_model % num_heads == 0 and num_heads % num_kv_heads == 0")
    kv = num_kv_heads * (d_model // num_heads)  # width of k_proj and v_proj
    weights = 2 * d_model * d_model + 2 * d_model * kv
    biases = 2 * d_model + 2 * kv if bias else 0
    return weights + biases
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_gqa_param_count_values", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""gqa_param_count equals the parameters of the four nn.Linear layers, at toy and Llama sizes."""
check_gqa_param_count(gqa_param_count)
### BEGIN HIDDEN TESTS
check_gqa_param_count(gqa_param_count, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# Now the published configurations. A Llama-3-8B-like attention block has `C = 4096` and 32 query
# heads of 128; GQA gives it 8 key/value heads.

# %%
mha_params, gqa_params = gqa_param_count(4096, 32, 32), gqa_param_count(4096, 32, 8)
print(
    f"attention weights per layer: MHA {mha_params:,} | GQA (8 kv heads) {gqa_params:,} "
    f"({gqa_params / mha_params - 1:+.1%})"
)
counts = {f"nkv = {n}": gqa_param_count(4096, 32, n) for n in (32, 8, 1)}
plots.plot_param_counts(counts, title="Attention parameters per layer, C = 4096, 32 query heads")
plt.show()

mha_cache, gqa_cache = kv_cache_bytes(32, 32, 128, 32768), kv_cache_bytes(32, 8, 128, 32768)
print(
    f"KV cache, 32 layers, 32k tokens, bf16: MHA {mha_cache / 1e9:.2f} GB | GQA {gqa_cache / 1e9:.2f} GB"
)
print(
    f"Llama 2 70B (80 layers, 8 kv heads of 128), fp16: {kv_cache_bytes(80, 8, 128, 1):,} bytes per token"
)

# %% [markdown]
# The parameters fall by 37.5 %, the cache by 75 % (a factor $n_h / n_{kv} = 4$). The parameter
# saving is modest because `q_proj` and `out_proj` stay. The cache saving is the one that
# matters: it grows with every token of every sequence being served. Here is the cache of a
# Llama-2-70B-like model against sequence length, with 64 (MHA), 8 (the real model) and 1 (MQA)
# key/value heads:

# %%
seq_lens = [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
memory = {
    f"{name} ({n} kv head{'s' * (n > 1)})": [kv_cache_bytes(80, n, 128, s) for s in seq_lens]
    for name, n in (("MHA", 64), ("GQA", 8), ("MQA", 1))
}
nb04_gqa_plots.plot_kv_cache_memory(
    seq_lens,
    memory,
    limit_bytes=80e9,
    limit_label="one 80 GB GPU",
    title="Llama-2-70B-like KV cache, fp16, batch 1",
)
plt.show()

# %% [markdown]
# With MHA a single 32k-token conversation would need about 86 GB of cache, more than one 80 GB
# GPU holds before the 140 GB of fp16 weights are even counted. With 8 key/value heads it needs
# 10.7 GB. Better inference scaling is the reason the Llama 2 paper gives for using GQA in its
# largest models.
#
# ## 6 · How much faster is decoding with the cache? Measured
#
# A small GPT-style decoder (2 layers, `C = 192`, 8 query heads sharing 2 key/value heads, random
# weights) built from **your** `GroupedQueryAttention` generates 256 tokens greedily after a
# 16-token prompt, twice:
#
# - **no cache**: every step runs the model over the whole sequence so far;
# - **KV cache**: the prompt once, then one token per step, reusing the cache.
#
# How it is timed: one warm-up run each, then 3 timed runs each, alternating so that background
# load hits both alike; medians reported. PyTorch runs on one thread, which is as fast for a model
# this small and much steadier on a shared machine. About 10–30 seconds; skipped while grading.

# %%
if AUTOGRADING:
    print("Skipped while grading.")
else:
    torch.manual_seed(0)
    decoder = TinyDecoder(
        vocab_size=512,
        d_model=192,
        num_layers=2,
        num_heads=8,
        num_kv_heads=2,
        max_len=272,
        attention=GroupedQueryAttention,
    )
    prompt = torch.randint(0, 512, (1, 16))  # (B, P)
    start = time.perf_counter()
    bench = benchmark_decoding(decoder, prompt, new_tokens=256, repeats=3)
    for name in bench.runs:
        print(f"{name:9s} {bench.tokens_per_s(name):7.1f} tokens/s (median of 3)")
    print(
        f"speed-up {bench.speedup:.1f}×, same 256 tokens: {bench.same_tokens}, "
        f"measured in {time.perf_counter() - start:.0f} s"
    )
    nb04_gqa_plots.plot_decode_benchmark(bench)
    plt.show()

# %% [markdown]
# Reading the result:
#
# - Without the cache the time per step grows with the sequence: step $t$ recomputes $16 + t$
#   positions, so generating $n$ tokens costs about $n^2/2$ position-passes. With the cache each
#   step costs about the same, one position.
# - Both runs produce the same tokens: the cache changes the cost, not the answer.
# - The speed-up grows with the length. Raschka reports 5.3× for a 124M-parameter GPT on a CPU
#   (27 → 144 tokens/s); your number depends on this machine and its load.
# - What this CPU benchmark does *not* show is GQA's own speed-up. At batch 1 on a CPU, reading
#   a cache of a few hundred kilobytes is cheap. On a GPU serving long contexts and large batches,
#   each step must read the whole cache from memory, and a cache 8× smaller is read 8× faster;
#   that is where GQA and MQA pay (Ainslie et al. measured GQA almost as fast as MQA).
#
# ## 7 · From an MHA checkpoint to GQA
#
# Training a big model from scratch to get GQA is expensive. Ainslie et al. (2023) convert a
# trained MHA model instead: keep every query head and the output projection, and build each
# key/value head of the GQA as the **mean** of the key/value heads in its group. Then they
# continue training briefly ("uptraining", about 5 % of the original pre-training compute) so the
# model adapts to the shared heads. Mean pooling worked better than keeping one head per group
# or starting the shared heads from scratch.
#
# The groups must be the ones `repeat_interleave` uses: group `g` is the `n_rep` **consecutive**
# heads `g*n_rep … (g+1)*n_rep - 1`. In weight terms, head `h` of the MHA owns rows
# `h*hs : (h+1)*hs` of `k_proj.weight` (shape `(C, C)`), so
# `weight.view(nkv, n_rep, hs, C).mean(1)` averages each group's rows.
#
# ### Exercise 5 · `mha_to_gqa`
#
# **Difficulty** ●●○ · **Importance** ★★☆ · **Time** ~15 min
#
# Build a `GroupedQueryAttention` with the same sizes and bias setting as `mha` (any module with
# notebook 02's attributes: `num_heads`, `q_proj`, `k_proj`, `v_proj`, `out_proj`), copy `q_proj`
# and `out_proj`, and mean-pool `k_proj` and `v_proj` (weights and biases). Copy the values: the
# new module must not share tensors with `mha`, and `mha` must stay unchanged.
#
# <details><summary>Hint 1: the sizes</summary>
#
# `d_model = mha.q_proj.in_features`, `num_heads = mha.num_heads`,
# `bias = mha.q_proj.bias is not None`.
# </details>
#
# <details><summary>Hint 2: copying into parameters</summary>
#
# Inside `with torch.no_grad():`, `gqa.q_proj.weight.copy_(mha.q_proj.weight)` copies values into
# the new module's own tensor. A bias has one dimension: `bias.view(nkv, n_rep, hs).mean(1)`.
# </details>


# %% nbgrader={"grade": false, "grade_id": "mha_to_gqa", "locked": false, "schema_version": 3, "solution": true, "task": false}
def mha_to_gqa(mha: nn.Module, num_kv_heads: int) -> GroupedQueryAttention:
    """A ``GroupedQueryAttention`` made from a multi-head attention module (Ainslie et al., 2023).

    q_proj and out_proj are copied; each key/value head is the mean of the ``n_rep`` consecutive
    MHA heads of its group (weights and biases). ``mha`` is left unchanged.
    """
    ### BEGIN SOLUTION
    C, nh = mha.q_proj.in_features, mha.num_heads
    bias = mha.q_proj.bias is not None
    gqa = GroupedQueryAttention(C, nh, num_kv_heads, bias=bias)
    gqa.to(mha.q_proj.weight.dtype)
    hs, n_rep = C // nh, nh // num_kv_heads
    with torch.no_grad():
        for name in ("q_proj", "out_proj"):
            getattr(gqa, name).weight.copy_(getattr(mha, name).weight)
            if bias:
                getattr(gqa, name).bias.copy_(getattr(mha, name).bias)
        for name in ("k_proj", "v_proj"):
            source, target = getattr(mha, name), getattr(gqa, name)
            pooled = source.weight.view(num_kv_heads, n_rep, hs, C).mean(1)  # (nkv, hs, C)
            target.weight.copy_(pooled.reshape(num_kv_heads * hs, C))  # (nkv*hs, C)
            if bias:
                pooled_bias = source.bias.view(num_kv_heads, n_rep, hs).mean(1)  # (nkv, hs)
                target.bias.copy_(pooled_bias.reshape(-1))  # (nkv*hs,)
    return gqa
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_mha_to_gqa_pooling", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""mha_to_gqa mean-pools contiguous groups of key/value heads, copies q/out and leaves the MHA unchanged."""
check_mha_to_gqa(mha_to_gqa)
### BEGIN HIDDEN TESTS
check_mha_to_gqa(mha_to_gqa, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### How far do the outputs move?
#
# Convert an MHA with 8 heads into GQA with 8, 4, 2 and 1 key/value heads and measure the relative
# error of the output, $\lVert y_{GQA} - y_{MHA} \rVert / \lVert y_{MHA} \rVert$, on random inputs.
# Two other ways of building the shared heads for comparison: keep the **first** head of each group,
# or start them **from scratch** (new random weights).
#
# The MHA here has random weights, so its heads have nothing in common: a hard case for pooling. In
# a trained model heads are partly redundant (notebook 02, section 8), which is why pooling plus a
# little training works there.


# %%
def first_head_to_gqa(mha, num_kv_heads):
    """Like mha_to_gqa, but each shared head is the first head of its group."""
    gqa = mha_to_gqa(mha, num_kv_heads)
    C, nh = mha.q_proj.in_features, mha.num_heads
    hs, n_rep = C // nh, nh // num_kv_heads
    with torch.no_grad():
        for name in ("k_proj", "v_proj"):
            weight = getattr(mha, name).weight.view(num_kv_heads, n_rep, hs, C)[
                :, 0
            ]  # (nkv, hs, C)
            getattr(gqa, name).weight.copy_(weight.reshape(num_kv_heads * hs, C))
            bias = getattr(mha, name).bias.view(num_kv_heads, n_rep, hs)[:, 0]  # (nkv, hs)
            getattr(gqa, name).bias.copy_(bias.reshape(-1))  # (nkv*hs,)
    return gqa


def scratch_to_gqa(mha, num_kv_heads):
    """Like mha_to_gqa, but k_proj and v_proj start from fresh random weights."""
    gqa = mha_to_gqa(mha, num_kv_heads)
    gqa.k_proj.reset_parameters()
    gqa.v_proj.reset_parameters()
    return gqa


def relative_error(model, reference, x):
    with torch.no_grad():
        return ((model(x)[0] - reference).norm() / reference.norm()).item()


torch.manual_seed(0)
C, nh = 64, 8
teacher = TorchMultiHeadAttention(C, nh).eval()  # the "trained" MHA checkpoint
x_eval = torch.randn(8, 32, C)  # (B, T, C)
with torch.no_grad():
    y_teacher, _ = teacher(x_eval, mask=torch.ones(32, 32, dtype=torch.bool).tril())  # (B, T, C)
kv_choices = [8, 4, 2, 1]
errors = {
    name: [relative_error(convert(teacher, n), y_teacher, x_eval) for n in kv_choices]
    for name, convert in (
        ("mean of each group (yours)", mha_to_gqa),
        ("first head of each group", first_head_to_gqa),
        ("from scratch", scratch_to_gqa),
    )
}
for name, values in errors.items():
    print(
        f"{name:28s}",
        "  ".join(f"nkv={n}: {e:.3f}" for n, e in zip(kv_choices, values, strict=True)),
    )
nb04_gqa_plots.plot_conversion_error(kv_choices, errors, title=f"Converting an MHA with {nh} heads")
plt.show()

# %% [markdown]
# With 8 key/value heads nothing is pooled and the error is 0 (your conversion is exact at the MHA
# end). Fewer key/value heads move the output more. Mean pooling stays closest at every size,
# keeping one head of each group is worse, and fresh weights are worst: the ordering Ainslie et
# al. report.
#
# **Uptraining, in miniature.** Train the 2-kv-head conversions for 150 steps to reproduce the
# MHA's outputs (a distillation loss) and compare their starting points (a few seconds; skipped
# while grading):


# %%
def uptrain(student, steps=150, seed=0):
    """Adam on the mean squared difference from the teacher's outputs; returns the losses."""
    data = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.Adam(student.parameters(), lr=3e-3)
    causal = torch.ones(16, 16, dtype=torch.bool).tril()  # (T, S)
    losses = []
    for _ in range(steps):
        xb = torch.randn(16, 16, C, generator=data)  # (B, T, C)
        with torch.no_grad():
            target, _ = teacher(xb, mask=causal)  # (B, T, C)
        loss = F.mse_loss(student(xb)[0], target)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    return losses


if AUTOGRADING:
    print("Skipped while grading.")
else:
    curves = {}
    for name, convert in (
        ("mean-pooled start", mha_to_gqa),
        ("from-scratch start", scratch_to_gqa),
    ):
        torch.manual_seed(1)
        student = convert(teacher, 2)
        curves[name] = uptrain(student)
        print(
            f"{name:19s} loss {curves[name][0]:.4f} -> {curves[name][-1]:.4f}, "
            f"relative error now {relative_error(student, y_teacher, x_eval):.3f}"
        )
    plots.plot_loss_curves(
        curves, title="Uptraining GQA (2 kv heads) to match the MHA", ylabel="distillation MSE"
    )
    plt.show()

# %% [markdown]
# The mean-pooled model starts far ahead and stays ahead for most of the run. Both end near the
# same error, and it does not fall to zero: 2 key/value heads cannot express everything 8
# independent random heads did. With a real checkpoint, whose heads share structure, the gap that
# remains is much smaller; Ainslie et al. found uptrained GQA-8 close to MHA in quality.

# %% [markdown]
# ## 8 · Positions inside the cache: rotary embeddings (RoPE)
#
# Attention alone does not know where a token is: shuffle the keys and values together and every
# output stays the same (notebook 01, permutation equivariance). The `TinyDecoder` of section 6
# fixes that the way GPT-2 did, by adding a learned vector per position to each token before the
# first layer. Llama, Mistral, Qwen and most recent decoders do something else. They leave the
# tokens alone and, inside every attention layer, **turn** each query and each key by an angle
# that grows with its position: rotary position embeddings (RoPE; Su et al., 2021).
#
# **How the turning works.** Take the `hs` features of one head and group them into `hs/2`
# pairs. Think of each pair as a point in a plane. At position $m$, pair $i$ is rotated by the
# angle $m\,\theta_i$, where
#
# $$\theta_i = \text{base}^{-2i/hs}, \qquad i = 0, 1, \dots, hs/2 - 1, \qquad \text{base} = 10000.$$
#
# Pair 0 turns by one radian per position; each later pair turns more slowly, and the last one
# only by about $1/\text{base}$ radians per position, like the hands of a clock, fast to slow.
# (Llama 3 raised the base to 500,000 so that the slow pairs stay distinguishable over longer
# texts.) For a pair $(a, b)$ a rotation by $\varphi$ gives
# $(a\cos\varphi - b\sin\varphi,\; b\cos\varphi + a\sin\varphi)$.
#
# **Why it encodes *relative* position.** Rotating two points by the same extra angle does not
# change their dot product. So if the query sits at $m$ (turned by $m\theta_i$) and the key at $n$
# (turned by $n\theta_i$), their score equals the score of the unturned vectors with the key alone
# turned by $(n - m)\theta_i$. The score of a query and a key depends on how far apart they are,
# never on where the pair of them sits in the text. Lengths do not change either: a rotation
# keeps $\lVert q \rVert$ and $\lVert k \rVert$.
#
# **Which features form a pair.** Two layouts are in use, and they are not interchangeable:
#
# ```
# hs = 8, features x0 … x7
# split halves  (GPT-NeoX, Hugging Face's Llama; this course):  (x0, x4) (x1, x5) (x2, x6) (x3, x7)
# interleaved   (RoFormer paper, Meta's original Llama code):   (x0, x1) (x2, x3) (x4, x5) (x6, x7)
# ```
#
# Both are the same rotation applied to features in a different order. A model trained with one
# layout needs its query and key weights permuted to run with the other; that is why Hugging
# Face's script that converts Meta's Llama checkpoints permutes the rows of `q_proj` and `k_proj`.
# Using the other layout on someone's weights gives no error, only a model that has lost track
# of word order.
#
# **Not every feature has to turn.** GPT-NeoX rotates only the first `rotary_pct` of each head's
# features (25% by default: 32 of the 128 in each head of Pythia-1.4B) and passes the rest through unchanged; GPT-J
# (`rotary_dim = 64` of 256, interleaved pairs) and Phi-2 (`partial_rotary_factor = 0.4`) do
# the same.
# The unrotated features score by content alone, whatever the distance. Porting such a model
# means rotating `x[..., :rot]` with a head size of `rot` in the frequencies and concatenating
# `x[..., rot:]` back; rotating all `hs` features runs without an error and is wrong. This
# course rotates every feature, as Llama does.
#
# With split halves, `x1, x2 = x[..., :hs//2], x[..., hs//2:]` and the whole rotation is
#
# $$\text{rope}(x) = x \odot \cos + \text{rotate\_half}(x) \odot \sin, \qquad \text{rotate\_half}(x) = [-x_2,\; x_1],$$
#
# where `cos` and `sin` hold the angles of the `hs/2` pairs twice over, `(T, hs)`, so that feature
# $j$ and feature $j + hs/2$ use the same angle.
#
# ### Exercise 6 · `apply_rope`
#
# **Difficulty** ●●○ · **Importance** ★★★ (every Llama-style model runs it in every layer) ·
# **Time** ~15 min
#
# Rotate queries or keys `(B, nh, T, hs)` whose `T` positions are given as integers
# `positions (T,)`. Any leading dimensions work: `(nh, T, hs)` and `(T, hs)` are rotated too. `hs`
# is even. Return a new tensor of the same shape and dtype; do not change `x`. The test also
# feeds bfloat16 and float16 inputs at positions in the thousands, as a long-context model does.
#
# <details><summary>Hint 1: the frequencies and angles</summary>
#
# `theta = base ** -(torch.arange(0, hs, 2, dtype=torch.float32, device=x.device) / hs)` is
# `(hs/2,)`; `positions.float()[:, None] * theta` gives the angles `(T, hs/2)`, which broadcast
# against any leading dimensions. Keep them in float32 even when `x` is bfloat16 or float16
# (section "Half precision" below says why), and cast the result back with `.to(x.dtype)`.
# </details>
#
# <details><summary>Hint 2: the rotation</summary>
#
# With `cos, sin = angles.cos(), angles.sin()`:
# `torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)`. That is the formula above
# written pair by pair, without repeating `cos` and `sin`.
# </details>


# %% nbgrader={"grade": false, "grade_id": "apply_rope", "locked": false, "schema_version": 3, "solution": true, "task": false}
def apply_rope(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotary position embedding, split-halves layout (GPT-NeoX, Hugging Face's Llama).

    Args:
        x: queries or keys ``(..., T, hs)``, usually ``(B, nh, T, hs)``; ``hs`` even.
        positions: the integer position of each of the ``T`` rows, ``(T,)``.
        base: ``θ_i = base ** (-2i / hs)`` for pair ``i = 0 … hs/2 - 1``.

    Returns:
        ``(..., T, hs)`` in ``x.dtype``: features ``i`` and ``i + hs/2`` of row ``t`` rotated
        together by the angle ``positions[t] · θ_i``.
    """
    ### BEGIN SOLUTION
    hs = x.shape[-1]
    theta = base ** -(torch.arange(0, hs, 2, dtype=torch.float32, device=x.device) / hs)  # (hs/2,)
    angles = positions.to(x.device).float()[:, None] * theta  # (T, 1) * (hs/2,) -> (T, hs/2)
    cos, sin = angles.cos(), angles.sin()  # (T, hs/2), float32 whatever x.dtype is
    x1, x2 = x[..., : hs // 2], x[..., hs // 2 :]  # (..., T, hs/2) each
    out = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)  # (..., T, hs)
    return out.to(x.dtype)  # computed in float32 (or float64), returned in x's dtype
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_apply_rope_values", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""apply_rope turns features (i, i + hs/2) by position · base^(-2i/hs), at any given positions and base."""
check_apply_rope_values(apply_rope)
### BEGIN HIDDEN TESTS
check_apply_rope_values(apply_rope, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_apply_rope_relative", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""With apply_rope the score of query position m and key position n depends on m - n only; lengths stay."""
check_apply_rope_relative(apply_rope)
### BEGIN HIDDEN TESTS
check_apply_rope_relative(apply_rope, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# See the relative property. Rotate one query vector to every position $m = 0 \dots 31$ and one
# key vector to every position $n$, and draw all their scores $q_m \cdot k_n$: each diagonal
# (a fixed distance $m - n$) holds one colour. Then move both by 100 positions: the scores do not
# change.

# %%
torch.manual_seed(0)
hs, n_pos = 16, 32
q_vec, k_vec = torch.randn(1, 1, 1, hs), torch.randn(1, 1, 1, hs)  # one query, one key
positions = torch.arange(n_pos)  # (T,)
q_rot = apply_rope(q_vec.expand(1, 1, n_pos, hs), positions)[0, 0]  # (T, hs): q at 0 … 31
k_rot = apply_rope(k_vec.expand(1, 1, n_pos, hs), positions)[0, 0]  # (T, hs): k at 0 … 31
rope_scores = q_rot @ k_rot.T  # (T, hs) @ (hs, T) -> (T, T): query position m, key position n
q_far = apply_rope(q_vec.expand(1, 1, n_pos, hs), positions + 100)[0, 0]  # (T, hs)
k_far = apply_rope(k_vec.expand(1, 1, n_pos, hs), positions + 100)[0, 0]  # (T, hs)
print(
    "both positions moved by 100, largest change of a score:",
    (q_far @ k_far.T - rope_scores).abs().max().item(),
)
print(
    "length of q before and after rotation:", q_vec.norm().item(), q_rot.norm(dim=-1).max().item()
)
fig, ax = plt.subplots(figsize=(4.5, 4))
ax.imshow(rope_scores, cmap="RdBu_r")
ax.set(xlabel="key position n", ylabel="query position m", title="q_m · k_n: one value per m - n")
plt.show()

# %% [markdown]
# The interleaved layout is the same rotation on reordered features. Meta's code writes it with
# complex numbers: each neighbouring pair becomes one complex number, and multiplying by
# $e^{i m \theta_j}$ turns it. Put the even features first and the odd ones second, and your
# split-halves `apply_rope` computes exactly the interleaved result; without that reordering the
# two disagree:


# %%
def apply_rope_interleaved(x, positions, base=10000.0):
    """RoPE with pairs (x0, x1), (x2, x3), … as complex numbers (Meta's Llama layout)."""
    hs = x.shape[-1]
    theta = base ** -(torch.arange(0, hs, 2, dtype=torch.float32) / hs)  # (hs/2,)
    angles = positions.float()[:, None] * theta  # (T, hs/2)
    turn = torch.polar(torch.ones_like(angles), angles)  # (T, hs/2) complex: e^{i·angle}
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], hs // 2, 2))  # (..., T, hs/2)
    turned = torch.view_as_real(pairs * turn)  # (..., T, hs/2, 2): real and imaginary parts
    return turned.flatten(-2).to(x.dtype)  # (..., T, hs)


x = torch.randn(1, 2, 5, 8)  # (B, nh, T, hs)
positions = torch.arange(3, 8)  # (T,)
evens_first = torch.cat([torch.arange(0, 8, 2), torch.arange(1, 8, 2)])  # [0, 2, 4, 6, 1, 3, 5, 7]
back = evens_first.argsort()  # the inverse reordering
reordered = apply_rope(x[..., evens_first], positions)[..., back]  # (B, nh, T, hs)
meta = apply_rope_interleaved(x, positions)  # (B, nh, T, hs)
print("split halves on reordered features vs interleaved:", (reordered - meta).abs().max().item())
print(
    "split halves as is vs interleaved:                ",
    (apply_rope(x, positions) - meta).abs().max().item(),
)

# %% [markdown]
# ### Half precision: compute the angles in float32
#
# Models run in bfloat16 or float16, and a tempting `apply_rope` computes the angles in
# `x.dtype`. bfloat16 keeps 8 significant bits: between 512 and 1024 it can only count in steps of
# 4, beyond 1024 in steps of 8. Positions 1000, 1001 and 1002 are one number to it, and pair 0
# turns by a whole radian per position, so the rotation lands on the wrong angle. float16 keeps 11
# bits: the positions are exact up to 2048, but an angle of 1000 radians is stored only to the
# nearest half radian. Measure both against float64:


# %%
def apply_rope_in_dtype(x, positions, base=10000.0):
    """The tempting version: θ and the angles in x.dtype."""
    hs = x.shape[-1]
    theta = base ** -(torch.arange(0, hs, 2, dtype=x.dtype) / hs)  # (hs/2,)
    angles = positions.to(x.dtype)[:, None] * theta  # (T, hs/2), rounded to x.dtype
    x1, x2 = x[..., : hs // 2], x[..., hs // 2 :]  # (..., T, hs/2) each
    return torch.cat(
        [x1 * angles.cos() - x2 * angles.sin(), x2 * angles.cos() + x1 * angles.sin()], -1
    )


print("1000, 1001, 1002 in bfloat16:", torch.tensor([1000.0, 1001.0, 1002.0]).bfloat16().tolist())
torch.manual_seed(0)
for dtype in (torch.bfloat16, torch.float16):
    for start in (1000, 4000):
        x = torch.randn(1, 2, 8, 64).to(dtype)  # (B, nh, T, hs)
        positions = torch.arange(start, start + 8)  # (T,)
        exact = apply_rope_in_dtype(x.double(), positions)  # (B, nh, T, hs): float64 angles
        for name, fn in (
            ("angles in x.dtype", apply_rope_in_dtype),
            ("angles in float32", apply_rope),
        ):
            error = (fn(x, positions).double() - exact).norm() / exact.norm()
            print(
                f"{str(dtype):15s} positions {start}…{start + 7}  {name}: {error.item():7.2%} off"
            )

# %% [markdown]
# Computed in float32 and cast back, the result is as good as the input's own rounding allows
# (a fraction of a percent); computed in half precision it is wrong by tens of percent, and
# nothing raises an error. Hugging Face's Llama computes its `cos` and `sin` in float32 for
# exactly this reason (its comment: "bfloat16 loses precision on long contexts").
#
# ### RoPE and the KV cache
#
# The rotation of a key depends on nothing but its own position, and in an ordinary cache a
# token keeps its position once it is written. So a key can be rotated once, when it is
# computed, and **cached already rotated**; Hugging Face's Llama does exactly that. Every later
# step reads the cached keys as they are and rotates only what is new: its queries and its keys.
# Values are never rotated; they carry the content that the weights mix, and position only has
# to shape the weights.
#
# **Positions are an input.** With a cache the `T` new tokens are not positions `0 … T-1`. Real
# code is told where they are: Hugging Face's models take `position_ids` (and `cache_position`,
# the slots they fill), vLLM passes a position per token. When nobody says, the cache's length
# `P = past_kv[0].shape[2]` gives `P … P+T-1`, and that is right only while the cache holds every
# token of this one sequence since position 0. It breaks as soon as that stops being true:
#
# - a **sliding-window** cache that keeps the last `W` keys in a rolling buffer (Mistral): its
#   length stops at `W` while the positions go on;
# - a **sink** cache (StreamingLLM) that keeps the first few tokens plus a recent window;
# - a batch of prompts of different lengths padded on the left, where each row starts at its
#   own position (Hugging Face computes `position_ids` from the attention mask for that reason).
#
# Counting from 0 at every call is the classic bug, and a sneaky one: without a cache (`P = 0`)
# it is right, so a model passes every test run on whole sequences and only goes wrong while
# generating. Token by token, every new query and key would then be rotated by 0, and the model
# would generate with no sense of order at all.
#
# **When cached keys do need touching.** A key rotated at its position in the text never needs
# rotating again. StreamingLLM numbers positions *inside the cache* instead, so that distances
# stay within what the model was trained on: when it evicts a token, every kept key moves one
# slot. It therefore caches keys before rotation and rotates them at their cache slots at every
# step (Hugging Face's former `SinkCache` re-rotated the kept keys by the shift instead).
#
# The other way to go wrong is to cache the raw keys and rotate the whole cache again at every
# step: the outputs come out right, but every step redoes the rotation of all $S$ cached
# positions, and the cache no longer means what the rest of the world expects (rotated keys).
# Rotating the already-rotated cache a second time is worse: the old keys drift a little further
# at every step.
#
# ### Exercise 7 · `RotaryGroupedQueryAttention`
#
# **Difficulty** ●●○ · **Importance** ★★★ (the cache of every Llama-style model) · **Time** ~15 min
#
# A subclass of your `GroupedQueryAttention`: the same `__init__` (nothing to add) and
# `forward(x, past_kv=None, causal=True, positions=None) -> (out, (k, v))`. After splitting into
# heads, rotate `q` and the new `k` with your `apply_rope` at `positions`, the integer positions
# `(T,)` of the new tokens; when `positions` is None, use `P … P+T-1` counted from the cache.
# Then append the rotated keys to the cache and attend exactly as before (`causal=False` still
# means no mask). The returned `k` holds rotated keys, `v` raw values. Decoding token by token
# must still equal one full causal pass, and the third test decodes with a rolling buffer that
# keeps only the last 3 keys, passing each token's position.
#
# <details><summary>Hint 1: the positions</summary>
#
# Only when `positions is None`: `P = 0 if past_kv is None else past_kv[0].shape[2]`, then
# `positions = torch.arange(P, P + T, device=x.device)`.
# </details>
#
# <details><summary>Hint 2: where the rotation goes</summary>
#
# Copy your `GroupedQueryAttention.forward` and add two lines after the split, before the
# `torch.cat` with the past: `q = apply_rope(q, positions)` and `k = apply_rope(k, positions)`.
# `v` stays as it is.
# </details>


# %% nbgrader={"grade": false, "grade_id": "RotaryGroupedQueryAttention", "locked": false, "schema_version": 3, "solution": true, "task": false}
class RotaryGroupedQueryAttention(GroupedQueryAttention):
    """``GroupedQueryAttention`` with rotary position embeddings; the cache holds rotated keys."""

    def forward(
        self,
        x: torch.Tensor,
        past_kv: tuple[torch.Tensor, torch.Tensor] | None = None,
        causal: bool = True,
        positions: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """As ``GroupedQueryAttention.forward``, with q and the new k rotated at their positions.

        Args:
            x: the new tokens ``(B, T, C)``.
            past_kv: ``(k, v)``, each ``(B, nkv, P, hs)``: keys already rotated, raw values.
            causal: as in ``GroupedQueryAttention``.
            positions: the integer positions of the new tokens ``(T,)``; None means
                ``P … P+T-1``, right while the cache holds every earlier token.

        Returns:
            ``(out, (k, v))``: out ``(B, T, C)``; k (rotated) and v ``(B, nkv, S, hs)``.
        """
        ### BEGIN SOLUTION
        B, T, C = x.shape
        hs = C // self.num_heads
        if positions is None:
            P = 0 if past_kv is None else past_kv[0].shape[2]  # positions already in the cache
            positions = torch.arange(P, P + T, device=x.device)  # (T,): the new tokens come after
        q = self.q_proj(x).view(B, T, self.num_heads, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = self.k_proj(x).view(B, T, self.num_kv_heads, hs).transpose(1, 2)  # (B, nkv, T, hs)
        v = self.v_proj(x).view(B, T, self.num_kv_heads, hs).transpose(1, 2)  # (B, nkv, T, hs)
        q, k = apply_rope(q, positions), apply_rope(k, positions)  # values are not rotated
        if past_kv is not None:
            k = torch.cat([past_kv[0], k], dim=2)  # (B, nkv, S, hs): rotated keys, in order
            v = torch.cat([past_kv[1], v], dim=2)  # (B, nkv, S, hs)
        S = k.shape[2]
        mask = None
        if causal:
            mask = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(S - T)  # (T, S)
        n_rep = self.num_heads // self.num_kv_heads
        out = F.scaled_dot_product_attention(
            q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), attn_mask=mask
        )  # (B, nh, T, hs) @ (B, nh, hs, S) -> (B, nh, T, S) -> (B, nh, T, hs)
        out = out.transpose(1, 2).reshape(B, T, C)  # (B, nh, T, hs) -> (B, T, C)
        return self.out_proj(out), (k, v)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_RotaryGroupedQueryAttention_full_pass", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""Without a cache, q and k are rotated at 0 … T-1 (values are not) and the cache holds the rotated keys."""
check_rotary_gqa_full_pass(RotaryGroupedQueryAttention)
### BEGIN HIDDEN TESTS
check_rotary_gqa_full_pass(RotaryGroupedQueryAttention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_RotaryGroupedQueryAttention_decoding", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""Decoding with RoPE in pieces (new tokens at P … P+T-1) equals one full causal pass, cache included."""
check_rotary_gqa_decoding(RotaryGroupedQueryAttention)
### BEGIN HIDDEN TESTS
check_rotary_gqa_decoding(RotaryGroupedQueryAttention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_RotaryGroupedQueryAttention_positions", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""Positions passed explicitly are the ones rotated: a later chunk, and a rolling buffer of 3 keys."""
check_rotary_gqa_positions(RotaryGroupedQueryAttention)
### BEGIN HIDDEN TESTS
check_rotary_gqa_positions(RotaryGroupedQueryAttention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# Decode token by token with your module and compare with one pass over the whole sequence: the
# outputs agree, and so do the caches, which hold the same rotated keys either way.

# %%
torch.manual_seed(0)
rotary = RotaryGroupedQueryAttention(d_model=32, num_heads=4, num_kv_heads=2).eval()
x = torch.randn(1, 6, 32)  # (B, T, C)
with torch.no_grad():
    full, (k_full, _) = rotary(x)  # (B, T, C); rotated keys (B, nkv, T, hs)
    past, steps = None, []
    for t in range(x.shape[1]):
        out_t, past = rotary(x[:, t : t + 1], past_kv=past)  # (B, 1, C); cache (B, nkv, t + 1, hs)
        steps.append(out_t)
print(
    "token by token vs full pass, largest difference:",
    (torch.cat(steps, 1) - full).abs().max().item(),
)
print("cached keys vs the full pass's rotated keys:    ", (past[0] - k_full).abs().max().item())

# %% [markdown]
# Now keep only the last 3 keys, as a sliding-window model's rolling buffer does, and decode the
# same tokens again, once letting the layer count positions from the cache and once passing
# each token's position. The reference for token `t` is one pass over the tokens the buffer
# holds, at their own positions.

# %%
window = 3
with torch.no_grad():
    past_counted = past_given = None
    gap_counted = gap_given = 0.0
    for t in range(x.shape[1]):
        lo = max(0, t - window)  # the oldest token still in the buffer
        reference, _ = rotary(x[:, lo : t + 1], positions=torch.arange(lo, t + 1))  # (B, n, C)
        out_counted, (k, v) = rotary(x[:, t : t + 1], past_kv=past_counted)  # positions from P
        past_counted = (k[:, :, -window:], v[:, :, -window:])  # (B, nkv, ≤ 3, hs)
        out_given, (k, v) = rotary(x[:, t : t + 1], past_kv=past_given, positions=torch.tensor([t]))
        past_given = (k[:, :, -window:], v[:, :, -window:])  # (B, nkv, ≤ 3, hs)
        gap_counted = max(gap_counted, (out_counted - reference[:, -1:]).abs().max().item())
        gap_given = max(gap_given, (out_given - reference[:, -1:]).abs().max().item())
print(
    f"rolling buffer of {window}, positions counted from the cache: largest error {gap_counted:.3f}"
)
print(
    f"rolling buffer of {window}, positions passed in:               largest error {gap_given:.1e}"
)

# %% [markdown]
# Counted from the cache, every token from the fifth on is rotated at position 3, the buffer's
# length, and the distances to the cached keys come out wrong. Passed in, the positions stay
# right however many keys the buffer has dropped.

# %% [markdown]
# ## Summary
#
# - Decoding one token at a time reuses the keys and values of every earlier token: the KV cache.
#   Its size is $2 \times \text{layers} \times n_{kv} \times hs \times \text{tokens} \times
#   \text{batch} \times \text{bytes}$, and at long contexts it can exceed the weights.
# - GQA lets groups of $n_h / n_{kv}$ consecutive query heads share one key/value head. $n_{kv} =
#   n_h$ is MHA, $n_{kv} = 1$ is MQA. Each query head still has its own attention pattern.
# - Repeat kv heads with `repeat_interleave` (`[K0, K0, K1, K1]`); `repeat` (`[K0, K1, K0, K1]`)
#   has the right shape and the wrong grouping. `F.scaled_dot_product_attention(...,
#   enable_gqa=True)` groups them for you.
# - Cache the un-repeated keys and values, append new positions along dim 2, and align the causal
#   mask bottom-right (`tril(S - T)`), not top-left (`is_causal=True`).
# - Cached decoding equals a full causal pass and was several times faster here.
# - An MHA checkpoint becomes a GQA one by averaging each group's key/value heads, then uptraining.
# - RoPE turns pair $i$ of every query and key by position $\times\ \text{base}^{-2i/hs}$, so
#   scores depend only on the distance $m - n$. Pairs are split halves here (`rotate_half`);
#   Meta's original code interleaves them, and weights only work with their own layout.
# - Compute RoPE's angles in float32 and cast the result back: bfloat16 cannot tell position 1001
#   from 1000.
# - Positions are an input (`position_ids`). Counting them from the cache's length, $P \dots
#   P+T-1$, holds only while the cache keeps every earlier token; rolling buffers and sink caches
#   need the positions passed in. Rotate queries and keys there, cache the rotated keys, and never
#   rotate the values.
#
# **Interview answer, in one breath:** *"In grouped-query attention the query heads are split
# into groups and each group shares one key and value head. Every head still has its own queries
# and attention pattern, but the KV cache, which dominates memory and memory traffic when
# decoding long sequences, shrinks by the group size: 8× for Llama 2 70B. Quality stays close to
# multi-head attention, better than multi-query attention with one shared head, and an existing
# MHA checkpoint can be converted by mean-pooling its key/value heads and briefly uptraining."*
#
# **Next:** notebook 05 measures why running heads in parallel beats running them one by one.
