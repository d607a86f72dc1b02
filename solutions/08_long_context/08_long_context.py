# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 08 · Long context: windows, sinks, latent attention, RoPE scaling and ALiBi
#
# **Time:** about 3.5 h (~160 min of exercises) · **Prerequisites:** 03, 04
#
# Notebook 04 shrank the KV cache by sharing key/value heads. Models that read a hundred thousand
# tokens go further, in three directions: they **remember less** (a sliding window, a few "sink"
# tokens), they **store less per token** (multi-head latent attention), and they **stretch the
# positions** a model was trained on (RoPE scaling, or no rotation at all with ALiBi). In this
# notebook you will:
#
# 1. Build the sliding-window mask of Mistral and Gemma's local layers (exercise 1).
# 2. Decode with a rolling KV cache of `W` slots, rotating at absolute positions, and prove it
#    equals one full masked pass (exercises 2-3).
# 3. Keep a few attention sinks besides the window, as StreamingLLM does (exercise 4).
# 4. Compress the cache into a latent, as DeepSeek-V2 and V3 do (multi-head latent attention),
#    then absorb its up-projections to decode from the latent itself (exercises MLA-1 to MLA-3).
# 5. Stretch RoPE to longer contexts: position interpolation, NTK-aware scaling and YaRN,
#    written the way Hugging Face's `rope_type` functions compute them (exercise 5).
# 6. Replace positions by a per-head linear bias: ALiBi (exercises 6-7).
# 7. Count what a token costs in cache for Llama-, Mistral- and DeepSeek-shaped models
#    (exercise 8).
#
# **How this notebook is graded.** Each exercise is a function you complete in place of
# `raise NotImplementedError()`. The locked cell after it checks your code and names the likely
# mistake when something is wrong. Hidden tests try more sizes when grading.
# **Run › Run All Cells** goes on past failing test cells, and past examples that need an
# exercise you have not finished yet; a failing test cell still counts as failed when the
# notebook is graded. In a terminal (**File › New › Terminal**), `python -m autograder check 08`
# grades the whole notebook, hidden tests included.
#
# You need the bottom-right causal mask of notebook 03 and the KV cache and RoPE of notebook 04;
# the functions those notebooks had you write are given here, and attention itself is PyTorch's
# `F.scaled_dot_product_attention`.
#
# ## Shape legend
#
# | symbol | meaning |
# |---|---|
# | `B` | batch size |
# | `T` | number of new positions fed in this call (queries) |
# | `S` | number of keys the queries attend to |
# | `W` | the window: how many most recent positions a query sees, itself included |
# | `nh`, `nkv` | query heads, key/value heads |
# | `hs` | head size |
#
# While heads attend they live in dimension 1: queries `(B, nh, T, hs)`, keys and values
# `(B, nkv, S, hs)`.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
import math
import warnings

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks.nb08_alibi import check_alibi_bias, check_alibi_slopes
from autograder.checks.nb08_mla import (
    check_absorbed_mla_matches_naive,
    check_absorbed_mla_memory,
    check_mla_decoding,
    check_mla_full_pass,
)
from autograder.checks.nb08_mla_cache import check_mla_cache_bytes
from autograder.checks.nb08_numbers import check_window_cache_bytes
from autograder.checks.nb08_rolling import check_sliding_window_decoding
from autograder.checks.nb08_rope_scaling import (
    check_rope_dynamic,
    check_rope_linear,
    check_rope_llama3,
    check_rope_yarn,
)
from autograder.checks.nb08_sinks import check_sink_attention
from autograder.checks.nb08_window import (
    check_rolling_cache_update,
    check_sliding_window_mask_values,
)
from autograder.tools.nb03_masks import plot_masks
from autograder.tools.nb06_gpu import track_tensors

warnings.filterwarnings("ignore")
torch.manual_seed(0)
# %matplotlib inline

# %% [markdown]
# ## 1 · Sliding-window attention
#
# A causal mask lets the query at position $p$ see every key $0 \dots p$: the work and the cache
# grow with the whole text. A **sliding window** of $W$ keys lets it see only the $W$ most recent
# ones, $p - W + 1 \dots p$ (itself included). Conventions differ by one: Mistral's paper lets
# position $i$ see $i - W \dots i$, $W + 1$ keys; this course, vLLM and Hugging Face count $W$
# keys, the query's own included. Mistral 7B v0.1 uses $W = 4096$ in every layer (later
# versions drop the window); Gemma 2 alternates windowed "local" layers ($W = 4096$) one to one
# with full "global" ones, and Gemma 3 runs five local layers ($W = 1024$) per global one.
#
# Information still travels further than $W$: a token at layer 2 sees $W$ tokens of layer 1,
# each of which saw $W$ more, so after $L$ layers the reach is about $L \times W$ (Mistral's
# paper: about 131k tokens for 32 layers of 4096).
#
# As with `causal_mask` in notebook 03, the $T$ queries are the *last* $T$ of the $S$ keys:
# query $i$ sits at position $p = S - T + i$, and key $j$ is allowed when $p - W < j \le p$.
#
# ### Exercise 1 · `sliding_window_mask`
#
# **Difficulty** ●○○ · **Importance** ★★★ (Mistral's and Gemma's local layers) · **Time** ~10 min
#
# <details><summary>Hint</summary>
#
# Two `tril`s: `ones(T, S).tril(S - T)` is the causal mask; `ones(T, S).tril(S - T - W)` holds
# the keys $W$ or more positions behind. Keep the first and not the second.
# </details>


# %% nbgrader={"grade": false, "grade_id": "sliding_window_mask", "locked": false, "schema_version": 3, "solution": true, "task": false}
def sliding_window_mask(
    T: int, window: int, S: int | None = None, device: torch.device | None = None
) -> torch.Tensor:
    """Bool mask ``(T, S)``, True = may attend: query ``i`` sits at position ``p = S - T + i``
    and sees keys ``p - window + 1 … p``. ``S`` defaults to ``T``."""
    ### BEGIN SOLUTION
    S = T if S is None else S
    query = torch.arange(S - T, S, device=device)[:, None]  # (T, 1): query positions
    key = torch.arange(S, device=device)[None, :]  # (1, S): key positions
    return (key <= query) & (key > query - window)  # (T, S)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_sliding_window_mask_values", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""sliding_window_mask(T, W, S): the query at position p sees keys p - W + 1 … p, bottom-right."""
check_sliding_window_mask_values(sliding_window_mask)
### BEGIN HIDDEN TESTS
check_sliding_window_mask_values(sliding_window_mask, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# The window next to the causal mask: the band keeps the same width however long the text gets.

# %%
plot_masks(
    {
        "causal (notebook 03)": torch.ones(10, 10, dtype=torch.bool).tril(),
        "sliding window, W = 4": sliding_window_mask(10, 4),
    }
)
plt.show()

# %% [markdown]
# ## 2 · Decoding with a rolling KV cache
#
# With a window, a key older than $W$ positions is never read again, so the cache needs only $W$
# slots per layer, however long the text. Mistral's reference code keeps them in a **ring
# buffer**: position $p$ is written into slot $p \bmod W$, over the key that was there $W$
# positions earlier. Nothing already cached is moved. (Hugging Face's static sliding-window
# cache chooses the other way: it shifts its $W$ slots left by one at each step, a copy of the
# window per token, to keep keys in position order at a fixed address for compiled kernels.)
#
# ```
#  W = 4 slots            slot 0  slot 1  slot 2  slot 3
#  after positions 0-3      p0      p1      p2      p3
#  after position 4         p4      p1      p2      p3      p4 overwrote p0
#  after position 6         p4      p5      p6      p3      oldest is p3, in slot 3
# ```
#
# The slots are no longer in position order once the ring has wrapped. For one new query that
# does not matter, since attention is a weighted sum and the order of the keys changes nothing.
# It matters as soon as anything depends on the order: a chunk of several new tokens needs a
# mask in which every query sees its own window, and that mask is laid out by position. So the
# cache is read **oldest position first** (Mistral calls it `unrotate`).
#
# Which old positions are needed? The new queries sit at `start … start+T-1`. The first of them
# sees `start - W + 1 … start`: so the `W - 1` positions before `start` (fewer at the beginning
# of the text), then the `T` new ones.
#
# ### Exercise 2 · `rolling_cache_update`
#
# **Difficulty** ●●○ · **Importance** ★★★ (Mistral's rotating buffer) · **Time** ~15 min
#
# Given the ring `buffer (B, nkv, W, hs)` holding positions before `start` in slots `p % W`, and
# `new (B, nkv, T, hs)` for positions `start … start+T-1` (`1 ≤ T ≤ W`), return
# `(buffer, recent)`: a **new** buffer with the new positions written in their slots (leave the
# one you were given unchanged), and `recent`, positions `max(0, start - W + 1) … start + T - 1`
# in position order. Read the old positions before you write: a new one may land on a slot whose
# position the first new queries still need. Returning a new buffer and a reordered copy keeps
# the exercise easy to test; serving code writes the slots in place (`index_copy_`) and hands
# the kernel the positions each slot holds instead of reordering.
#
# <details><summary>Hint 1: the old positions</summary>
#
# `past = min(start, W - 1)` of them, at positions `torch.arange(start - past, start)`; their
# slots are those positions `% W`. Indexing `buffer[:, :, slots]` with that tensor returns them
# in the order of `slots`, oldest first.
# </details>
#
# <details><summary>Hint 2: writing</summary>
#
# `buffer = buffer.clone()`, then `buffer[:, :, torch.arange(start, start + T) % W] = new`.
# </details>


# %% nbgrader={"grade": false, "grade_id": "rolling_cache_update", "locked": false, "schema_version": 3, "solution": true, "task": false}
def rolling_cache_update(
    buffer: torch.Tensor, new: torch.Tensor, start: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Write ``new`` into a ring buffer of ``W`` slots and return what the new queries can see.

    Args:
        buffer: ``(B, nkv, W, hs)``; position ``p < start`` lives in slot ``p % W``.
        new: ``(B, nkv, T, hs)``, positions ``start … start + T - 1``, ``1 <= T <= W``.
        start: the position of the first new entry.

    Returns:
        ``(buffer, recent)``: a new ``(B, nkv, W, hs)`` buffer holding the new positions too, and
        ``recent (B, nkv, n, hs)``: positions ``max(0, start - W + 1) … start + T - 1``, oldest
        first.
    """
    ### BEGIN SOLUTION
    W, T = buffer.shape[2], new.shape[2]
    past = min(start, W - 1)  # old positions the first new query still sees
    slots = torch.arange(start - past, start, device=buffer.device) % W  # (past,), oldest first
    recent = torch.cat([buffer[:, :, slots], new], dim=2)  # (B, nkv, past + T, hs)
    buffer = buffer.clone()
    buffer[:, :, torch.arange(start, start + T, device=buffer.device) % W] = new
    return buffer, recent
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_rolling_cache_update_positions", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""rolling_cache_update writes slot p % W and returns positions start - W + 1 … start + T - 1, oldest first."""
check_rolling_cache_update(rolling_cache_update)
### BEGIN HIDDEN TESTS
check_rolling_cache_update(rolling_cache_update, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### Positions stay absolute
#
# The slot says where a key is stored, not where its token sits in the text. RoPE (notebook 04)
# must turn each query and key by its **absolute position** `start + t`: token 4 and token 0
# share slot 0 of a 4-slot ring, and rotating token 4 as if it were at position 0 would put it
# right next to every token it follows. Keys are rotated once, when they are written, and stored
# rotated, exactly as in notebook 04's cache. Here is notebook 04's `apply_rope`, given:


# %%
def apply_rope(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Notebook 04's rotary embedding: pair ``(x_i, x_{i+hs/2})`` of ``x (..., T, hs)`` turned by
    ``positions (T,) · base^(-2i/hs)``, angles in float32, the result in ``x.dtype``."""
    hs = x.shape[-1]
    theta = base ** -(torch.arange(0, hs, 2, device=x.device, dtype=torch.float32) / hs)
    angles = positions.to(x.device, torch.float32)[:, None] * theta  # (T, hs/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)  # (T, hs/2) each
    x1, x2 = x[..., : hs // 2], x[..., hs // 2 :]  # (..., T, hs/2) each
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)  # (..., T, hs)


# %% [markdown]
# ### Exercise 3 · `sliding_window_attention`
#
# **Difficulty** ●●○ · **Importance** ★★★ (the strongest test of the cache) · **Time** ~15 min
#
# One decoding step of a sliding-window layer. It receives the new queries, keys and values
# *before* rotation, `q (B, nh, T, hs)`, `k` and `v (B, nkv, T, hs)`, for positions
# `start … start+T-1` (`T ≤ W`), and the two rings `cache_k`, `cache_v (B, nkv, W, hs)`
# (rotated keys, raw values). Rotate `q` and `k` at their absolute positions, update both rings
# with your `rolling_cache_update`, attend with `sliding_window_mask(T, W, S)` over the recent
# keys (`F.scaled_dot_product_attention(..., enable_gqa=True)` groups the heads), and return
# `(out (B, nh, T, hs), (cache_k, cache_v))`. Fed a whole sequence piece by piece, starting from
# empty rings, it must give what one full pass with the window mask gives.
#
# <details><summary>Hint</summary>
#
# `positions = torch.arange(start, start + T)`; then `apply_rope` on `q` and `k`; two calls of
# `rolling_cache_update`; `S = keys.shape[2]`.
# </details>


# %% nbgrader={"grade": false, "grade_id": "sliding_window_attention", "locked": false, "schema_version": 3, "solution": true, "task": false}
def sliding_window_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cache_k: torch.Tensor,
    cache_v: torch.Tensor,
    start: int,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Attend the new positions ``start … start+T-1`` through rings of ``W`` slots.

    Args:
        q: new queries ``(B, nh, T, hs)``, not rotated yet.
        k, v: new keys and values ``(B, nkv, T, hs)``, not rotated yet; ``T <= W``.
        cache_k, cache_v: the rings ``(B, nkv, W, hs)``: rotated keys, raw values.
        start: the absolute position of the first new token.

    Returns:
        ``(out (B, nh, T, hs), (cache_k, cache_v))`` with the new positions written.
    """
    ### BEGIN SOLUTION
    T, W = q.shape[2], cache_k.shape[2]
    positions = torch.arange(start, start + T, device=q.device)  # (T,): absolute, not slots
    q, k = apply_rope(q, positions), apply_rope(k, positions)
    cache_k, keys = rolling_cache_update(cache_k, k, start)  # keys (B, nkv, S, hs)
    cache_v, values = rolling_cache_update(cache_v, v, start)  # values (B, nkv, S, hs)
    mask = sliding_window_mask(T, W, keys.shape[2], device=q.device)  # (T, S)
    out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, enable_gqa=True)
    return out, (cache_k, cache_v)  # out (B, nh, T, hs)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_sliding_window_attention_decoding", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
"""Decoding token by token and in chunks through the rings equals one full pass with the window mask."""
check_sliding_window_decoding(sliding_window_attention)
### BEGIN HIDDEN TESTS
check_sliding_window_decoding(sliding_window_attention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# Decode 11 tokens one at a time through a ring of 4 slots and compare with one full pass. The
# ring never holds more than 4 keys, and the positions stored in its slots show the wrap.

# %%
torch.manual_seed(0)
B, nh, nkv, S, hs, W = 1, 4, 2, 11, 8, 4
q, k, v = torch.randn(B, nh, S, hs), torch.randn(B, nkv, S, hs), torch.randn(B, nkv, S, hs)
positions = torch.arange(S)
full = F.scaled_dot_product_attention(
    apply_rope(q, positions),
    apply_rope(k, positions),
    v,
    attn_mask=sliding_window_mask(S, W),
    enable_gqa=True,
)  # (B, nh, S, hs)
cache = torch.zeros(B, nkv, W, hs), torch.zeros(B, nkv, W, hs)
steps = []
for t in range(S):
    out, cache = sliding_window_attention(
        q[:, :, t : t + 1], k[:, :, t : t + 1], v[:, :, t : t + 1], *cache, start=t
    )
    steps.append(out)
print(
    "token by token vs full pass, largest difference:",
    (torch.cat(steps, 2) - full).abs().max().item(),
)
print(
    "positions held in slots 0..3 at the end:",
    [p for s in range(W) for p in range(S - W, S) if p % W == s],
)

# %% [markdown]
# ## 3 · Attention sinks
#
# A sliding window forgets the start of the text. That sounds harmless, but Xiao et al. (2023,
# *StreamingLLM*, ICLR 2024) measured something odd: a model run with a plain window collapses
# (its perplexity explodes) the moment the very first tokens leave the cache. In most heads past
# the first two layers, trained models park a large share of the attention on the first token
# or two, whatever they say: a softmax
# must put its weight somewhere, and the first tokens, which every later token has seen, become
# the place to dump it. Notebook 07's heads do the same. Remove those **attention sinks** and
# the weight they held is spread over tokens that never carried it.
#
# The fix: keep the first `n_sink` tokens (4 in the paper) for good, plus the `window` most
# recent ones (the new token included). When a token arrives and the cache is full, the oldest
# token *after* the sinks is evicted:
#
# ```
#  n_sink = 2, window = 3     cache after each token (positions in the text)
#  token 4                    [0, 1, 2, 3, 4]
#  token 5                    [0, 1, 3, 4, 5]          2 evicted
#  token 6                    [0, 1, 4, 5, 6]          3 evicted
# ```
#
# **Which positions does RoPE use?** Not those of the text: StreamingLLM numbers positions
# **inside the cache**. At token 6 above, the five kept keys are rotated at positions 0 … 4 and
# the new query at 4, so the distances the model sees never exceed the cache's size, however
# long the stream runs (rotating at text positions would put the sinks thousands of positions
# away, further than anything seen in training). Since a key's place in the cache moves whenever
# a token is evicted, the cache stores keys **before** rotation and rotates all of them at every
# step: the opposite of notebook 04's cache and of §2's ring. (Hugging Face's former
# `SinkCache` kept rotated keys and turned the kept ones back by the shift instead; the numbers
# are the same.)
#
# ### Exercise 4 · `sink_attention`
#
# **Difficulty** ●●○ · **Importance** ★★☆ (streaming and very long chats) · **Time** ~15 min
#
# One decoding step of a sink cache. It receives the new token's raw `q (B, nh, 1, hs)`, `k` and
# `v (B, nkv, 1, hs)`, and the raw kept keys and values `past_k`, `past_v (B, nkv, P, hs)`
# (empty, `P = 0`, at the first token). Append the new token; if more than `n_sink + window`
# tokens are now kept, keep the first `n_sink` and the last `window`. Rotate the kept keys at
# `0 … n-1` and the query at `n - 1` with `apply_rope`, attend (no mask: the new token sees
# everything kept), and return `(out (B, nh, 1, hs), (past_k, past_v))` with the raw keys.
#
# <details><summary>Hint</summary>
#
# `torch.cat([keys[:, :, :n_sink], keys[:, :, -window:]], dim=2)` evicts; `positions =
# torch.arange(n)`; the query at `positions[-1:]`.
# </details>


# %% nbgrader={"grade": false, "grade_id": "sink_attention", "locked": false, "schema_version": 3, "solution": true, "task": false}
def sink_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    past_k: torch.Tensor,
    past_v: torch.Tensor,
    n_sink: int,
    window: int,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """One step of StreamingLLM: keep ``n_sink`` first and ``window`` last tokens, positions
    numbered inside the cache.

    Args:
        q: the new query ``(B, nh, 1, hs)``; k, v: its key and value ``(B, nkv, 1, hs)``; raw.
        past_k, past_v: the kept raw keys and values ``(B, nkv, P, hs)``, in text order.
        n_sink: first tokens kept for good; window: most recent tokens kept (the new one too).

    Returns:
        ``(out (B, nh, 1, hs), (past_k, past_v))``: the kept raw keys and values after this token.
    """
    ### BEGIN SOLUTION
    keys = torch.cat([past_k, k], dim=2)  # (B, nkv, P + 1, hs): raw, in text order
    values = torch.cat([past_v, v], dim=2)  # (B, nkv, P + 1, hs)
    if keys.shape[2] > n_sink + window:  # evict the oldest token after the sinks
        keys = torch.cat([keys[:, :, :n_sink], keys[:, :, -window:]], dim=2)  # (B, nkv, n, hs)
        values = torch.cat([values[:, :, :n_sink], values[:, :, -window:]], dim=2)
    positions = torch.arange(keys.shape[2], device=q.device)  # (n,): places in the cache
    out = F.scaled_dot_product_attention(
        apply_rope(q, positions[-1:]), apply_rope(keys, positions), values, enable_gqa=True
    )  # (B, nh, 1, hs)
    return out, (keys, values)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_sink_attention_streaming", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""Token by token, sink_attention attends to the sinks and the window at their places in the cache."""
check_sink_attention(sink_attention)
### BEGIN HIDDEN TESTS
check_sink_attention(sink_attention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# Stream 40 tokens through a cache of 2 sinks and a window of 6: the cache never holds more than
# 8 tokens, and the largest position RoPE ever sees is 7.

# %%
torch.manual_seed(0)
nkv, hs, n_sink, window = 2, 8, 2, 6
past = torch.zeros(1, nkv, 0, hs), torch.zeros(1, nkv, 0, hs)
for _ in range(40):
    q_t = torch.randn(1, 4, 1, hs)  # (B, nh, 1, hs)
    k_t, v_t = torch.randn(1, nkv, 1, hs), torch.randn(1, nkv, 1, hs)  # (B, nkv, 1, hs)
    out, past = sink_attention(q_t, k_t, v_t, *past, n_sink=n_sink, window=window)
print(f"after 40 tokens the cache holds {past[0].shape[2]} keys: 2 sinks and the last 6 tokens")

# %% [markdown]
# **Sinks learned instead of kept.** If a head needs somewhere to put weight it does not want to
# give any token, the model can be handed that place directly. OpenAI's gpt-oss (2025) gives each
# head one learned logit, its `sinks` parameter: it joins the row of scores before the softmax
# and is dropped after, so the weights over the real keys sum to less than one and a head may
# attend to almost nothing. No token needs keeping for it, and its sliding-window layers evict
# freely. FlashAttention and vLLM take such a logit as an extra input. Gated attention
# (Qwen3-Next) attacks the same need from the output side, with a learned gate per head that can
# shut the head off.

# %%
scores = torch.tensor([[2.0, 1.0, 0.5]])  # (T, S): one query, three keys
sink_logit = torch.tensor([3.0])  # one head's learned logit
weights = torch.cat([scores, sink_logit.expand(1, 1)], dim=-1).softmax(dim=-1)[:, :-1]  # (T, S)
print(f"weights {weights.numpy().round(3)}, sum {weights.sum().item():.3f} (not 1)")

# %% [markdown]
# ## 4 · Multi-head latent attention (MLA)

# %% [markdown]
# Grouped-query attention shrinks the cache by letting heads share keys and values; MQA goes all
# the way to one shared head. DeepSeek-V2 (2024) took a third road, kept in V3, R1 and Kimi K2:
# every head keeps keys and values of its own, but the cache stores none of them. Per token it
# stores one short **latent** vector $c$ (512 numbers in DeepSeek-V3), and each head re-makes its
# keys and values from it with learned up-projections. That is **multi-head latent attention**.
#
# One layer, token $t$, head $h$ (vectors as columns, DeepSeek's names in code font):
#
# | step | what | DeepSeek's layer | width |
# |---|---|---|---|
# | compress | $c_t = \mathrm{RMSNorm}(W^{DKV} x_t)$, the latent | `wkv_a`, then `kv_norm` | $d_c$ |
# | decoupled RoPE key | $k^R_t = \mathrm{rope}(W^{KR} x_t, t)$, one for **all** heads | `wkv_a` too | $d_r$ |
# | up-project | $k^{C}_{t,h} = W^{UK}_h c_t$, $\;v_{t,h} = W^{UV}_h c_t$ | `wkv_b` | $d_h$ each |
# | query | $[\,q^C_{t,h} \mid \mathrm{rope}(q^R_{t,h}, t)\,]$ | `wq` | $d_h + d_r$ |
# | score | $\big(q^C_{t,h} \cdot k^C_{s,h} + q^R_{t,h} \cdot k^R_s\big) / \sqrt{d_h + d_r}$ | | |
# | output | $\sum_s p_{ts,h}\, v_{s,h}$ per head, heads merged | `wo` | $d_{model}$ |
#
# In code: `d_latent` $= d_c$, `head_dim` $= d_h$ (the no-RoPE part of a query or key, and a
# value), `d_rope` $= d_r$. One `wkv_a` makes the latent and the RoPE key side by side; one
# `wkv_b` makes, for each head in turn, its $d_h$ key features then its $d_h$ value features
# (`[k_nope | v]`, the rows of $W^{UK}_h$ then of $W^{UV}_h$). The cache holds, per layer and
# token, $c_t$ and $k^R_t$: $d_c + d_r = 576$ numbers in DeepSeek-V3, where multi-head attention
# with the same 128 heads of 128 would hold $2 \times 128 \times 128 = 32{,}768$.
#
# **Why a separate RoPE key?** Exercise MLA-2's trick ("absorption") rewrites
# $q \cdot (W^{UK} c_s)$ as $(W^{UK\top} q) \cdot c_s$, so that attention reads the cached latent
# without re-making any key. Rotate that query and key by their positions $t$ and $s$ and the
# score becomes $q \cdot R_{s-t} W^{UK} c_s$: a rotation that depends on the key's position sits
# between the query and $W^{UK}$, so no single matrix can be folded into the query for every key
# at once. So the keys made from the latent carry no position at all; position lives in a small
# extra part of $d_r$ features, rotated as in notebook 04 and shared by every head, so it costs
# the cache only $d_r$ numbers per token.
#
# DeepSeek-V3 also makes its queries through a low-rank step (`wq_a`, a norm, `wq_b`): that saves
# memory in training, not in the cache, so here one `wq` does it, as in DeepSeek-V2-Lite.
# DeepSeek's own code rotates neighbouring pairs of features; this course pairs halves (notebook
# 04's `apply_rope`), which is the same rotation on reordered features.
#
# ### Exercise MLA-1 · `MultiHeadLatentAttention`
#
# **Difficulty** ●●● · **Importance** ★★☆ (DeepSeek-V2 and V3, Kimi K2) · **Time** ~25 min
#
# `__init__(d_model, num_heads, d_latent, head_dim, d_rope)` stores the four sizes (as
# `self.num_heads`, `self.d_latent`, `self.head_dim`, `self.d_rope`) and builds, all with
# `bias=False`: `wq = nn.Linear(d_model, num_heads * (head_dim + d_rope))`,
# `wkv_a = nn.Linear(d_model, d_latent + d_rope)`, `kv_norm = nn.RMSNorm(d_latent)`,
# `wkv_b = nn.Linear(d_latent, num_heads * 2 * head_dim)` and
# `wo = nn.Linear(num_heads * head_dim, d_model)`.
#
# `forward(x, past_kv=None) -> (out, (c_kv, k_rope))` is causal self-attention. The new tokens sit
# at positions `P … P+T-1`, where `P` is the cache's length (0 without one); rotate with section
# 2's `apply_rope` at those positions. Compute the queries, the normalised latent and the rotated
# RoPE key of the new tokens, append the latent and the key to `past_kv` along dim 1, then
# up-project the **whole** latent into each head's `k_nope` and `v` and attend. Return the cache `(c_kv (B, S, d_latent), k_rope (B, S, d_rope))`: nothing
# up-projected goes in it. The tests compare your module with DeepSeek's computation on your own
# weights, then decode in pieces and compare with one full pass.
#
# <details><summary>Hint 1: splitting per head</summary>
#
# `self.wq(x).view(B, T, num_heads, head_dim + d_rope).transpose(1, 2)` gives each head its own
# `[q_nope | q_rope]`; `.split([head_dim, d_rope], dim=-1)` separates them. Do the same with
# `self.wkv_b(c_kv)` viewed as `(B, S, num_heads, 2 * head_dim)`. Splitting the flat output in two
# halves first would give head 1, as its keys, the values of head 0.
# </details>
#
# <details><summary>Hint 2: one RoPE key for every head</summary>
#
# `k_rope` is `(B, S, d_rope)`; `k_rope[:, None].expand(B, num_heads, S, d_rope)` lends it to every
# head without copying. Keys `torch.cat([k_nope, that], -1)` and queries `torch.cat([q_nope,
# q_rope], -1)` are both `head_dim + d_rope` wide, so `F.scaled_dot_product_attention` with a
# bottom-right causal mask scales by $1/\sqrt{d_h + d_r}$ on its own.
# </details>


# %% nbgrader={"grade": false, "grade_id": "MultiHeadLatentAttention", "locked": false, "schema_version": 3, "solution": true, "task": false}
class MultiHeadLatentAttention(nn.Module):
    """Causal multi-head latent attention in DeepSeek's layout, caching only a latent per token.

    Attributes:
        num_heads, d_latent, head_dim, d_rope: the sizes given.
        wq: ``Linear(d_model, nh * (head_dim + d_rope))``, each head's ``[q_nope | q_rope]``.
        wkv_a: ``Linear(d_model, d_latent + d_rope)``, the latent then the shared RoPE key.
        kv_norm: ``RMSNorm(d_latent)``, applied to the latent before caching it.
        wkv_b: ``Linear(d_latent, nh * 2 * head_dim)``, each head's ``[k_nope | v]``.
        wo: ``Linear(nh * head_dim, d_model)``. No projection has a bias.
    """

    def __init__(self, d_model: int, num_heads: int, d_latent: int, head_dim: int, d_rope: int):
        super().__init__()
        ### BEGIN SOLUTION
        self.num_heads, self.d_latent, self.head_dim, self.d_rope = (
            num_heads,
            d_latent,
            head_dim,
            d_rope,
        )
        self.wq = nn.Linear(d_model, num_heads * (head_dim + d_rope), bias=False)
        self.wkv_a = nn.Linear(d_model, d_latent + d_rope, bias=False)
        self.kv_norm = nn.RMSNorm(d_latent)
        self.wkv_b = nn.Linear(d_latent, num_heads * 2 * head_dim, bias=False)
        self.wo = nn.Linear(num_heads * head_dim, d_model, bias=False)
        ### END SOLUTION

    def forward(
        self, x: torch.Tensor, past_kv: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Attend from the ``T`` new tokens to the cached ones and to themselves, causally.

        Args:
            x: the new tokens ``(B, T, C)``, at positions ``P … P+T-1``.
            past_kv: ``(c_kv (B, P, d_latent), k_rope (B, P, d_rope))``, or None at the start.

        Returns:
            ``(out (B, T, C), (c_kv (B, S, d_latent), k_rope (B, S, d_rope)))``, ``S = P + T``:
            the normalised latent and the rotated RoPE key of every position so far.
        """
        ### BEGIN SOLUTION
        B, T, _ = x.shape
        nh, hd, dr = self.num_heads, self.head_dim, self.d_rope
        P = 0 if past_kv is None else past_kv[0].shape[1]
        positions = torch.arange(P, P + T, device=x.device)  # (T,)
        q = self.wq(x).view(B, T, nh, hd + dr).transpose(1, 2)  # (B, nh, T, hd + dr)
        q_nope, q_rope = q.split([hd, dr], dim=-1)  # (B, nh, T, hd), (B, nh, T, dr)
        c_kv, k_rope = self.wkv_a(x).split([self.d_latent, dr], dim=-1)  # (B, T, dc), (B, T, dr)
        c_kv, k_rope = self.kv_norm(c_kv), apply_rope(k_rope, positions)
        if past_kv is not None:
            c_kv = torch.cat([past_kv[0], c_kv], dim=1)  # (B, S, dc)
            k_rope = torch.cat([past_kv[1], k_rope], dim=1)  # (B, S, dr)
        S = c_kv.shape[1]
        kv = self.wkv_b(c_kv).view(B, S, nh, 2 * hd).transpose(1, 2)  # (B, nh, S, 2 hd)
        k_nope, v = kv.split([hd, hd], dim=-1)  # (B, nh, S, hd) each
        q = torch.cat([q_nope, apply_rope(q_rope, positions)], dim=-1)  # (B, nh, T, hd + dr)
        k = torch.cat([k_nope, k_rope[:, None].expand(B, nh, S, dr)], dim=-1)  # (B,nh,S,hd+dr)
        mask = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(S - T)  # (T, S)
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, scale=1 / math.sqrt(hd + dr)
        )  # (B, nh, T, hd + dr) @ (B, nh, hd + dr, S) -> (B, nh, T, S) -> (B, nh, T, hd)
        out = out.transpose(1, 2).reshape(B, T, nh * hd)  # (B, T, nh * hd)
        return self.wo(out), (c_kv, k_rope)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_MultiHeadLatentAttention_full_pass", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
"""MLA equals DeepSeek's computation on your weights; the cache holds kv_norm(latent) and the rotated RoPE key."""
check_mla_full_pass(MultiHeadLatentAttention)
### BEGIN HIDDEN TESTS
check_mla_full_pass(MultiHeadLatentAttention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_MultiHeadLatentAttention_decoding", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""Decoding in pieces with the latent cache equals one full causal pass, cache included."""
check_mla_decoding(MultiHeadLatentAttention)
### BEGIN HIDDEN TESTS
check_mla_decoding(MultiHeadLatentAttention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# Token by token with the latent cache, then in one pass: the same outputs. Next to it, what one
# token costs the cache, against multi-head attention with the same 8 heads of `head_dim` (keys
# and values `head_dim` wide, the baseline DeepSeek-V2's paper uses), in numbers per layer.

# %%
torch.manual_seed(0)
mla = MultiHeadLatentAttention(d_model=64, num_heads=8, d_latent=16, head_dim=8, d_rope=4).eval()
x = torch.randn(1, 6, 64)  # (B, T, C)
with torch.no_grad():
    full, _ = mla(x)  # (B, T, C)
    cache, steps = None, []
    for t in range(6):
        out, cache = mla(x[:, t : t + 1], cache)  # (B, 1, C); the cache grows by one position
        steps.append(out)
gap = (torch.cat(steps, dim=1) - full).abs().max().item()
print(f"token by token vs one pass, largest difference: {gap:.1e}")
c_kv, k_rope = cache
print(f"cache after 6 tokens: c_kv {tuple(c_kv.shape)}, k_rope {tuple(k_rope.shape)}")
print(f"numbers per token: {16 + 4} (MLA) against {2 * 8 * 8} (MHA, same heads)")

# %% [markdown]
# ### Absorbing the up-projections
#
# Decoding one token with the module above re-makes every cached position's keys and values for
# every head: a `(B, nh, S, head_dim)` tensor twice per layer and per token, just what the latent
# was meant to save. Matrix products regroup. For head $h$, query $q$ (its no-RoPE part) and
# cached latent $c_s$:
#
# $$q \cdot (W^{UK}_h c_s) = (W^{UK\top}_h q) \cdot c_s, \qquad
# \sum_s p_s\, W^{UV}_h c_s = W^{UV}_h \Big(\sum_s p_s\, c_s\Big).$$
#
# So turn each head's query into a **latent query** $W^{UK\top}_h q$ (`d_latent` wide), score it
# against the cached latents themselves (plus $q^R \cdot k^R_s$ as before), average the cached
# latents with the weights, and only then apply $W^{UV}_h$ to that one `d_latent` vector per head
# and query. $W^{UK}$ has been **absorbed** into the query side and $W^{UV}$ into the output side:
# at inference the weights never change, so serving code could even multiply them into `wq` and
# `wo` once, though for DeepSeek-V3 that makes `wo` four times larger (512 latent features per
# head instead of 128), so engines usually keep them as separate small products. The scores are
# the same numbers as before, so the scale stays $1/\sqrt{d_h + d_r}$, not one over the square
# root of the latent query's width (section 5 adds a long-context temperature to it).
#
# Seen from the cache, this is multi-query attention: one shared "head" whose keys are
# $[c_s \mid k^R_s]$ ($d_c + d_r$ wide) and whose values are the first $d_c$ features of those same
# keys. That is why DeepSeek's FlashMLA and vLLM decode MLA with MQA-shaped kernels. The price is
# arithmetic: a latent query is $d_c$ wide instead of $d_h$, so for a long prompt (many queries at
# once) the naive form is cheaper, and serving code uses it for the prompt and the absorbed form
# for decoding.
#
# ### Exercise MLA-2 · `AbsorbedLatentAttention`
#
# **Difficulty** ●●● · **Importance** ★★☆ (how MLA is served) · **Time** ~20 min
#
# A subclass of your `MultiHeadLatentAttention`, with the same `__init__`, weights, `forward`
# signature and returned cache; only the attention differs. Take each head's $W^{UK}_h$ and
# $W^{UV}_h$ from `self.wkv_b.weight` inside `forward` (weights may be loaded after `__init__`),
# and never up-project the cache. The first test compares your module with the naive computation
# on the same weights, in a full pass and decoding in pieces; the second decodes one token after
# 119 cached positions and fails if any operator creates a tensor as large as the up-projected
# keys (or values) of the cache, or if the step costs as many FLOPs as making them (so
# up-projecting one head at a time does not pass either).
#
# <details><summary>Hint 1: where W_UK and W_UV are</summary>
#
# `nn.Linear` stores its weight as `(out_features, in_features)`, so
# `self.wkv_b.weight.view(num_heads, 2 * head_dim, d_latent)` holds, per head, the `head_dim` rows
# of $W^{UK}_h$ then the `head_dim` rows of $W^{UV}_h$: `w[:, :head_dim]` and `w[:, head_dim:]`,
# each `(nh, head_dim, d_latent)`.
# </details>
#
# <details><summary>Hint 2: the three products</summary>
#
# `q_lat = q_nope @ w_uk`: `(B, nh, T, hd) @ (nh, hd, dc) -> (B, nh, T, dc)`. Scores
# `torch.einsum("bhtc,bsc->bhts", q_lat, c_kv)` plus the same with `q_rope` and `k_rope`, scaled,
# masked, softmaxed; `out_lat = torch.einsum("bhts,bsc->bhtc", weights, c_kv)`; then
# `out_lat @ w_uv.transpose(1, 2)` gives `(B, nh, T, hd)`, merged and passed to `wo` as before.
# </details>


# %% nbgrader={"grade": false, "grade_id": "AbsorbedLatentAttention", "locked": false, "schema_version": 3, "solution": true, "task": false}
class AbsorbedLatentAttention(MultiHeadLatentAttention):
    """``MultiHeadLatentAttention`` with W_UK absorbed into the queries and W_UV into the output:
    attention reads the cached latent directly."""

    def forward(
        self, x: torch.Tensor, past_kv: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """As ``MultiHeadLatentAttention.forward``: same arguments, outputs and cache."""
        ### BEGIN SOLUTION
        B, T, _ = x.shape
        nh, hd, dr, dc = self.num_heads, self.head_dim, self.d_rope, self.d_latent
        P = 0 if past_kv is None else past_kv[0].shape[1]
        positions = torch.arange(P, P + T, device=x.device)  # (T,)
        q = self.wq(x).view(B, T, nh, hd + dr).transpose(1, 2)  # (B, nh, T, hd + dr)
        q_nope, q_rope = q.split([hd, dr], dim=-1)  # (B, nh, T, hd), (B, nh, T, dr)
        c_kv, k_rope = self.wkv_a(x).split([dc, dr], dim=-1)  # (B, T, dc), (B, T, dr)
        c_kv, k_rope = self.kv_norm(c_kv), apply_rope(k_rope, positions)
        if past_kv is not None:
            c_kv = torch.cat([past_kv[0], c_kv], dim=1)  # (B, S, dc)
            k_rope = torch.cat([past_kv[1], k_rope], dim=1)  # (B, S, dr)
        S = c_kv.shape[1]
        w = self.wkv_b.weight.view(nh, 2 * hd, dc)  # per head: W_UK's rows, then W_UV's
        w_uk, w_uv = w[:, :hd], w[:, hd:]  # (nh, hd, dc) each
        q_lat = q_nope @ w_uk  # (B, nh, T, hd) @ (nh, hd, dc) -> (B, nh, T, dc)
        q_rope = apply_rope(q_rope, positions)  # (B, nh, T, dr)
        scores = torch.einsum("bhtc,bsc->bhts", q_lat, c_kv)  # (B, nh, T, S)
        scores = scores + torch.einsum("bhtr,bsr->bhts", q_rope, k_rope)  # (B, nh, T, S)
        scores = scores / math.sqrt(hd + dr)  # the naive scores' scale
        mask = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(S - T)  # (T, S)
        weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        out_lat = torch.einsum("bhts,bsc->bhtc", weights, c_kv)  # (B, nh, T, dc)
        out = out_lat @ w_uv.transpose(1, 2)  # (B, nh, T, dc) @ (nh, dc, hd) -> (B, nh, T, hd)
        out = out.transpose(1, 2).reshape(B, T, nh * hd)  # (B, T, nh * hd)
        return self.wo(out), (c_kv, k_rope)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_AbsorbedLatentAttention_matches_naive", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""With the same weights, the absorbed module gives the naive outputs and cache, in one pass and decoding."""
check_absorbed_mla_matches_naive(AbsorbedLatentAttention)
### BEGIN HIDDEN TESTS
check_absorbed_mla_matches_naive(AbsorbedLatentAttention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_AbsorbedLatentAttention_memory", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""Decoding a token creates no tensor as large as the cache's up-projected keys, nor costs the FLOPs to make them."""
check_absorbed_mla_memory(AbsorbedLatentAttention)
### BEGIN HIDDEN TESTS
check_absorbed_mla_memory(AbsorbedLatentAttention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# The same weights in both modules (a latent twice as wide as a head, as in DeepSeek-V3, which
# has 4 times): a prompt in one pass, then three tokens one at a time. The outputs agree to
# rounding, and the largest tensor each module creates for a new token shows what absorption
# saves (`track_tensors`, from notebook 06, sees every tensor an operator makes).


# %%
def prompt_then_tokens(module, x, prompt):
    """``module`` on ``x[:, :prompt]`` in one pass, then on each later token with the cache;
    the outputs ``(B, T, C)`` and the largest tensor created for the last token."""
    with torch.no_grad():
        out, cache = module(x[:, :prompt])  # (B, prompt, C)
        outs = [out]
        for t in range(prompt, x.shape[1]):
            with track_tensors() as largest:
                out, cache = module(x[:, t : t + 1], cache)  # (B, 1, C)
            outs.append(out)
    return torch.cat(outs, dim=1), largest


torch.manual_seed(0)
sizes = {"d_model": 64, "num_heads": 16, "d_latent": 32, "head_dim": 16, "d_rope": 4}
naive, absorbed = MultiHeadLatentAttention(**sizes), AbsorbedLatentAttention(**sizes)
absorbed.load_state_dict(naive.state_dict())
x = torch.randn(1, 40, 64)  # (B, T, C)
out_naive, largest_naive = prompt_then_tokens(naive, x, prompt=37)
out_absorbed, largest_absorbed = prompt_then_tokens(absorbed, x, prompt=37)
print(f"outputs, largest difference: {(out_naive - out_absorbed).abs().max().item():.1e}")
print(f"largest tensor for a new token, naive:    {largest_naive.describe()}")
print(f"largest tensor for a new token, absorbed: {largest_absorbed.describe()}")

# %% [markdown]
# ### What the latent saves: DeepSeek-V3's cache per token
#
# One formula gives the size of any latent cache; then DeepSeek-V3's, beside the other three
# ways to cache keys and values.
#
# ### Exercise MLA-3 · `mla_cache_bytes`
#
# **Difficulty** ●○○ · **Importance** ★★★ (the number behind MLA) · **Time** ~5 min
#
# Bytes of a latent cache: every layer stores, for each sequence of the batch and each position,
# one latent of `d_latent` values and one RoPE key of `d_rope` values. Count with integer
# arithmetic only (the test refuses a function that builds tensors to measure them).


# %% nbgrader={"grade": false, "grade_id": "mla_cache_bytes", "locked": false, "schema_version": 3, "solution": true, "task": false}
def mla_cache_bytes(
    num_layers: int,
    d_latent: int,
    d_rope: int,
    seq_len: int,
    batch_size: int = 1,
    bytes_per_value: int = 2,
) -> int:
    """Bytes of the latent caches of ``num_layers`` layers: ``(B, S, d_latent)`` plus
    ``(B, S, d_rope)`` per layer, ``bytes_per_value`` bytes each (2 for bfloat16)."""
    ### BEGIN SOLUTION
    per_token = num_layers * (d_latent + d_rope) * bytes_per_value  # one latent, one RoPE key
    return per_token * seq_len * batch_size
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_mla_cache_bytes_values", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""mla_cache_bytes equals the bytes of the latent and RoPE-key tensors, DeepSeek-V3 included."""
check_mla_cache_bytes(mla_cache_bytes)
### BEGIN HIDDEN TESTS
check_mla_cache_bytes(mla_cache_bytes, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# DeepSeek-V3 has 61 layers of 128 heads, `head_dim` 128, `d_latent` 512 and `d_rope` 64, and
# caches in bfloat16. Its cache per token next to what the same 128 heads would need as
# multi-head attention, as GQA with 8 key/value heads (Llama 3 70B's choice) and as MQA,
# `2 × layers × kv heads × head_dim × 2` bytes each (notebook 04's `kv_cache_bytes`):

# %%
layers, heads, head_dim = 61, 128, 128
rows = {
    "MLA (d_latent 512 + d_rope 64)": mla_cache_bytes(layers, 512, 64, seq_len=1),
    "MHA, 128 kv heads": 2 * layers * heads * head_dim * 2,
    "GQA, 8 kv heads": 2 * layers * 8 * head_dim * 2,
    "MQA, 1 kv head": 2 * layers * 1 * head_dim * 2,
}
for name, per_token in rows.items():
    at_128k = per_token * 128 * 1024 / 2**30
    print(f"{name:<32} {per_token:>10,} B/token  {at_128k:8.1f} GiB for 128k tokens")

# %% [markdown]
# MLA's 70,272 bytes per token are 57 times less than multi-head attention's, and about what
# GQA would cache with 2.25 key/value heads ($576 = 2.25 \times 2 \times 128$). MQA caches less
# still, but gives every head the same keys and values; MLA gives each of the 128 heads keys and
# values of its own, re-made from the latent, and DeepSeek-V2's paper reports it matching or
# beating multi-head attention where MQA and GQA fall behind. The decoupled RoPE key is 64 of the
# 576 numbers: positions cost MLA a ninth of its cache.
#
# The multi-head row is the paper's baseline: keys and values 128 wide. A naive MLA cache that
# stored what `wkv_b` makes, keys 192 wide ($d_h + d_r$) and values 128, would hold
# $61 \times 128 \times 320 \times 2 = 4{,}997{,}120$ bytes per token, 71 times MLA's. This
# course quotes 57×, against the paper's baseline, everywhere.
#
# ### What decoding reads, and what it computes
#
# Decoding is limited by memory: each new token reads the whole cache and does little arithmetic
# on it. Per cached position and layer, for one new query token: absorbed MLA reads 576 bf16
# numbers (1,152 bytes) and, for each of its 128 heads, scores them (576 multiply-adds) and
# averages 512 of them (512 more). GQA with 64 query heads and 8 key/value heads of 128 reads
# 4,096 bytes and makes 8 heads use each key and value; multi-head attention makes one head use
# each. FLOPs per byte read:

# %%
per_position = {  # (FLOPs, bytes) per cached position, layer and new token, bf16
    "MLA absorbed, 128 heads": (128 * 2 * (576 + 512), 576 * 2),
    "GQA, 64 q heads / 8 kv heads": (64 * 2 * (128 + 128), 2 * 8 * 128 * 2),
    "MHA, 128 heads": (128 * 2 * (128 + 128), 2 * 128 * 128 * 2),
}
for name, (flops, bytes_read) in per_position.items():
    print(f"{name:<30} {flops:>8,} FLOPs / {bytes_read:>6,} B = {flops / bytes_read:6.1f} FLOP/B")
print(f"an H100 SXM needs about {989e12 / 3.35e12:.0f} FLOP/B to keep its tensor cores busy")

# %% [markdown]
# About 242 FLOPs per byte against 8 and 1: absorbed MLA decoding is close to compute-bound,
# which is why FlashMLA is written as a compute kernel and why MLA's 128 heads cost decoding
# almost nothing extra. GQA and MHA decoding wait on memory.
#
# The shared latent has a price in **tensor parallelism**. Splitting attention by heads across
# GPUs (notebook 10 §5.3) divides a GQA cache too: 8 GPUs each keep one of 8 key/value heads.
# Every MLA head reads the whole latent, so every GPU must keep the whole latent cache: like MQA's
# single head, it is copied to every GPU, and the cache per GPU does not shrink with more GPUs. SGLang and vLLM therefore serve
# DeepSeek models with data-parallel attention: each GPU runs attention for its own requests,
# with all heads, and tensor parallelism is kept for the other layers.

# %% [markdown]
# ## 5 · Long-context RoPE: interpolation, NTK and YaRN
#
# RoPE turns pair $i$ of every query and key by $\theta_i = \text{base}^{-2i/hs}$ per position
# (notebook 04). Pair $i$ comes back to where it started every $2\pi / \theta_i$ positions: its
# **wavelength**. With base 10000 and $hs = 128$, the first pair's wavelength is about 6 tokens,
# the last pair's about 54,000. A model trained on $L$ tokens has seen every angle of the fast
# pairs many times, but the slow pairs never went round once: past $L$ they reach angles the
# model has never seen, and quality collapses. Four ways to stretch a model to $s$ times its
# trained length $L$ (the **factor** $s$), each a `rope_type` of Hugging Face's
# `config.rope_scaling`:
#
# - **Position interpolation** (`"linear"`, Chen et al. 2023): divide every $\theta_i$ by $s$,
#   which is the same as dividing every position by $s$. No angle leaves the trained range, but
#   neighbouring tokens now differ by $s$ times less in every pair: local order gets blurry.
# - **NTK-aware scaling** (`"dynamic"` in Hugging Face): raise the **base** instead, to
#   $\text{base} \cdot \text{scale}^{hs/(hs-2)}$. Pair 0 keeps $\theta_0 = 1$; the exponent makes
#   the last pair slow down by exactly the scale; the pairs in between by less. The dynamic form
#   computes the scale from the current length $L_{now} = \max(\text{seq\_len}, L)$:
#   $\text{scale} = s \cdot L_{now}/L - (s - 1)$, which is 1 (nothing changes) up to the trained
#   length. Past it the scale grows $s$ times faster than the length: at $s = 4$ and four times
#   the trained length it is $4 \cdot 4 - 3 = 13$, so here `factor` is a slope, not the stretch
#   (only $s = 1$ gives $\text{scale} = L_{now}/L$). A changing base also sits badly with a KV
#   cache: keys cached while the text was short were rotated at an older base, and queries
#   rotated at the new one no longer meet them at the angles the formula intends. Re-rotating
#   every cached key each time the base moves costs a pass over the whole cache, so
#   implementations either accept the mismatch (Hugging Face's cache keeps the old rotations) or
#   fix one base for the longest length they will serve, which is static NTK again.
# - **YaRN** (`"yarn"`, Peng et al. 2023, used by Qwen2.5 and DeepSeek-V3): decide per pair, by
#   its wavelength. A pair that turns more than `beta_fast` = 32 times over $L$ keeps $\theta_i$;
#   one that turns less than `beta_slow` = 1 time gets $\theta_i / s$; in between a linear
#   ramp. The pair index that turns $r$ times over $L$ is
#   $d(r) = \dfrac{hs \cdot \ln\!\big(L / (2\pi r)\big)}{2 \ln \text{base}}$; the ramp runs from
#   $\lfloor d(\text{beta\_fast}) \rfloor$ (0) to $\lceil d(\text{beta\_slow}) \rceil$ (1).
#   YaRN also multiplies cos and sin by an **attention factor** $0.1 \ln s + 1$: the scores grow
#   by its square, which sharpens a softmax that more keys would otherwise flatten.
# - **Llama 3.1's rule** (`"llama3"`, Meta 2024; Llama 3.1 to 3.3, and 3.2 with factor 32):
#   decide per pair too, by its wavelength $\lambda_i = 2\pi/\theta_i$ in tokens. A pair whose
#   wavelength is shorter than $L / \text{high\_freq\_factor}$ (2048 tokens for Llama 3.1's
#   $L = 8192$ and high factor 4) keeps $\theta_i$; one longer than
#   $L / \text{low\_freq\_factor}$ (8192, low factor 1) gets $\theta_i / s$ ($s = 8$). In
#   between, with $\text{smooth} = (L/\lambda_i - \text{low}) / (\text{high} - \text{low})$,
#   the pair gets $(1 - \text{smooth})\,\theta_i / s + \text{smooth}\,\theta_i$. Since
#   $L/\lambda_i$ is how many turns the pair makes over $L$, this is YaRN's idea with other
#   ends (4 and 1 turns, not 32 and 1) and a blend linear in the turns rather than in the pair
#   index; and there is no attention factor.
#
# **Where the temperature goes.** Scaling cos and sin by $a$ scales a score by $a^2$ only when
# every feature is rotated, as in Qwen2.5's full rotary. With partial or decoupled RoPE the
# same trick reaches only the rotated features: in MLA (section 4) that is 64 of each head's 192
# query–key features. So DeepSeek-V3 puts the temperature in the softmax scale instead: its
# config sets `mscale` and `mscale_all_dim` both to 1, Hugging Face's YaRN then returns an
# attention factor of $\text{mscale}(s, 1) / \text{mscale}(s, 1) = 1$, and the model multiplies
# its $1/\sqrt{d_h + d_r}$ by $(0.1 \ln 40 + 1)^2 \approx 1.874$ whenever it is set up to serve
# more than its original 4096 tokens.
#
# The model's weights do not change in any of them; the rotation does (YaRN and position
# interpolation work best after a short fine-tune at the new length).
#
# **Other levers, named for the interview.** Before any of these, most long-context models simply
# train with a larger `rope_theta` (adjusted base frequency, "ABF"): 500,000 for Llama 3,
# 1,000,000 for Code Llama and Qwen2.5, so that the slow pairs turn less over the long texts of a
# final training stage. Phi-3's LongRoPE (`"longrope"`) stores one searched rescale factor per
# pair, a short and a long list, instead of a formula. Llama 4's iRoPE leaves every fourth layer
# without any position encoding (NoPE): those layers attend by content alone, at any length.
#
# ### Exercise 5 · `rope_parameters`
#
# **Difficulty** ●●○ · **Importance** ★★☆ (every long-context checkpoint's config) · **Time**
# ~25 min
#
# Return `(inv_freq, attention_factor)` for a `rope_type` of `"default"`, `"linear"`,
# `"dynamic"`, `"yarn"` or `"llama3"`, as Hugging Face's `_compute_*_parameters` functions do:
# `inv_freq` holds the $hs/2$ angles per position, `attention_factor` is 1 except for YaRN.
# `original_max_position` is $L$, the length the model was trained on. Every argument is a Python
# number, so build the tensor as you like: with torch operations on `torch.arange`, as Hugging
# Face does, or as a Python list made a tensor at the end, as Meta's `apply_scaling` does. The
# grader accepts both, and reruns your function on configurations it has never shown.
#
# <details><summary>Hint 1: linear and dynamic</summary>
#
# `exponents = torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim`, `inv_freq = 1.0 /
# base ** exponents`. Linear: divide by `factor`. Dynamic: compute the new base with Python
# numbers, then the same formula with it.
# </details>
#
# <details><summary>Hint 2: YaRN's ramp</summary>
#
# `low = max(math.floor(d(beta_fast)), 0)`, `high = min(math.ceil(d(beta_slow)), head_dim - 1)`
# (add 0.001 to `high` if they are equal), then `ramp = ((torch.arange(head_dim // 2) - low) /
# (high - low)).clamp(0, 1)` and `inv_freq * (1 - ramp) + inv_freq / factor * ramp`.
# </details>
#
# <details><summary>Hint 3: Llama 3.1</summary>
#
# `turns = original_max_position * inv_freq / (2 * math.pi)` is $L / \lambda_i$. Clamped to
# [0, 1], `(turns - low_freq_factor) / (high_freq_factor - low_freq_factor)` is 1 for the pairs
# kept and 0 for the pairs divided, so one blend covers all three bands.
# </details>


# %% nbgrader={"grade": false, "grade_id": "rope_parameters", "locked": false, "schema_version": 3, "solution": true, "task": false}
def rope_parameters(
    rope_type: str,
    head_dim: int,
    base: float = 10000.0,
    factor: float = 1.0,
    original_max_position: int = 4096,
    seq_len: int | None = None,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
    low_freq_factor: float = 1.0,
    high_freq_factor: float = 4.0,
) -> tuple[torch.Tensor, float]:
    """RoPE's angles per position ``inv_freq (hs/2,)`` and the attention factor for ``rope_type``.

    ``"default"``: ``base^(-2i/hs)``. ``"linear"``: divided by ``factor``. ``"dynamic"``: the base
    raised to ``base · (factor · L / original_max_position - (factor - 1)) ** (hs / (hs - 2))``,
    ``L = max(seq_len, original_max_position)``. ``"yarn"``: the ramp between the two by
    wavelength, and the attention factor ``0.1 · ln(factor) + 1``. ``"llama3"``: by wavelength
    ``λ = 2π / θ``: kept below ``original_max_position / high_freq_factor``, divided by
    ``factor`` above ``original_max_position / low_freq_factor``, blended between.
    """
    ### BEGIN SOLUTION
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim  # (hs/2,): 2i/hs
    inv_freq = 1.0 / base**exponents  # (hs/2,): θ_i
    if rope_type == "default":
        return inv_freq, 1.0
    if rope_type == "linear":
        return inv_freq / factor, 1.0  # the same as positions / factor
    if rope_type == "dynamic":
        length = max(seq_len or 0, original_max_position)
        scale = factor * length / original_max_position - (factor - 1)
        return 1.0 / (base * scale ** (head_dim / (head_dim - 2))) ** exponents, 1.0
    if rope_type == "yarn":

        def pair_turning(rotations: float) -> float:  # the pair index that turns this often in L
            return (
                head_dim
                * math.log(original_max_position / (rotations * 2 * math.pi))
                / (2 * math.log(base))
            )

        low = max(math.floor(pair_turning(beta_fast)), 0)
        high = min(math.ceil(pair_turning(beta_slow)), head_dim - 1)
        high = high + 0.001 if low == high else high
        pairs = torch.arange(head_dim // 2, dtype=torch.float32)  # (hs/2,)
        ramp = ((pairs - low) / (high - low)).clamp(0, 1)  # 0: keep θ_i, 1: θ_i / factor
        return inv_freq * (1 - ramp) + inv_freq / factor * ramp, 0.1 * math.log(factor) + 1.0
    if rope_type == "llama3":
        turns = original_max_position * inv_freq / (2 * math.pi)  # (hs/2,): L / wavelength
        smooth = (turns - low_freq_factor) / (high_freq_factor - low_freq_factor)
        smooth = smooth.clamp(0, 1)  # (hs/2,): 1 keeps θ_i, 0 gives θ_i / factor
        return inv_freq / factor * (1 - smooth) + inv_freq * smooth, 1.0
    raise ValueError(f"unknown rope_type {rope_type!r}")
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_rope_parameters_linear", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""rope_type="linear": every angle divided by the factor (position interpolation); attention factor 1."""
check_rope_linear(rope_parameters)
### BEGIN HIDDEN TESTS
check_rope_linear(rope_parameters, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_rope_parameters_dynamic", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""rope_type="dynamic": the base raised by the NTK formula, and only beyond the trained length."""
check_rope_dynamic(rope_parameters)
### BEGIN HIDDEN TESTS
check_rope_dynamic(rope_parameters, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_rope_parameters_yarn", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""rope_type="yarn": the per-pair ramp by wavelength, and the attention factor 0.1 ln(factor) + 1."""
check_rope_yarn(rope_parameters)
### BEGIN HIDDEN TESTS
check_rope_yarn(rope_parameters, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_rope_parameters_llama3", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""rope_type="llama3": pairs kept, divided by the factor or blended by wavelength; factor 1."""
check_rope_llama3(rope_parameters)
### BEGIN HIDDEN TESTS
check_rope_llama3(rope_parameters, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# What each one does to the frequencies of a Llama-2-shaped head ($hs = 128$, base 10000,
# trained on 4096 tokens, factor 4, read at 16,384 tokens): each curve is the scaled angle over
# the original one, per pair. Interpolation slows every pair 4×. Dynamic NTK leaves the fast
# pairs almost alone and slows the slowest by its scale, $4 \cdot 16384/4096 - 3 = 13$ times
# (the curve ends at $1/13 \approx 0.077$), far more than the factor. YaRN keeps the fast pairs
# exactly and divides the slow ones by 4, with a ramp over the pair index in between; Llama 3.1's
# rule does the same with its band at wavelengths of 1024 to 4096 tokens here.

# %%
original, _ = rope_parameters("default", 128)
fig, ax = plt.subplots(figsize=(7, 3.2))
for rope_type in ("linear", "dynamic", "yarn", "llama3"):
    scaled, attention = rope_parameters(
        rope_type, 128, factor=4.0, original_max_position=4096, seq_len=16384
    )
    ax.plot(scaled / original, label=f"{rope_type} (attention factor {attention:.3f})")
ax.set(xlabel="pair i (fast → slow)", ylabel="θ_i scaled / θ_i", ylim=(0, 1.05))
ax.set_title("RoPE scaling, factor 4")
ax.legend()
plt.show()

# %% [markdown]
# ## 6 · ALiBi: a bias instead of a rotation
#
# ALiBi (Press et al. 2022, used by BLOOM and MPT) gives attention no position embedding at
# all. It adds to each score a penalty that grows linearly with the distance between query and
# key: head $h$ adds $-m_h \cdot (p - j)$ to the score of the query at position $p$ with the key
# at position $j \le p$. Each head has its own slope $m_h$: a steep one makes a head look at the
# last few tokens, a shallow one lets it read far back. Since nothing is learned per position,
# a model trained on 1024 tokens still computes something sensible at 2048 (the paper's claim,
# measured on perplexity).
#
# The slopes form a geometric sequence. For $n$ heads, a power of two, head $h$ (from 0) gets
# $2^{-8(h+1)/n}$: for 8 heads $\tfrac12, \tfrac14, \dots, \tfrac1{256}$. For any other $n$, the
# paper takes the slopes of the nearest lower power of two $2^{\lfloor \log_2 n \rfloor}$, then
# adds every other slope (the 1st, 3rd, 5th...) of twice that many heads, which fall between
# the first ones, until there are $n$. BLOOM-176B has 112 heads: 64 slopes, then 48 of the 128.
#
# ### Exercise 6 · `alibi_slopes`
#
# **Difficulty** ●●○ · **Importance** ★★☆ (BLOOM, MPT; a classic interview question) · **Time**
# ~15 min
#
# Return the slopes `(nh,)` as a float32 tensor. The only argument is a head count, so either
# form is accepted: torch operations (`torch.pow` of a base over `torch.arange`, as BLOOM's
# `build_alibi_tensor` does) or the ALiBi repository's `get_slopes`, a Python list of floats
# made a tensor at the end.
#
# <details><summary>Hint</summary>
#
# `lower = 2 ** math.floor(math.log2(num_heads))`; the first slopes are
# `torch.pow(2.0, -8 / lower * torch.arange(1, lower + 1))`; the extra ones
# `torch.pow(2.0, -8 / (2 * lower) * torch.arange(1, 2 * (num_heads - lower) + 1, 2))`.
# </details>


# %% nbgrader={"grade": false, "grade_id": "alibi_slopes", "locked": false, "schema_version": 3, "solution": true, "task": false}
def alibi_slopes(num_heads: int) -> torch.Tensor:
    """ALiBi's slope per head ``(nh,)``, float32: ``2^(-8(h+1)/n)`` when ``n`` is a power of two,
    else those of the lower power of two, then every other slope of twice as many heads."""
    ### BEGIN SOLUTION
    lower = 2 ** math.floor(math.log2(num_heads))  # the nearest power of two at or below
    first = torch.pow(2.0, -8 / lower * torch.arange(1, lower + 1))  # (lower,)
    odd = torch.arange(1, 2 * (num_heads - lower) + 1, 2)  # 1st, 3rd, ... of 2·lower heads
    extra = torch.pow(2.0, -8 / (2 * lower) * odd)  # (nh - lower,)
    return torch.cat([first, extra]).float()  # (nh,)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_alibi_slopes_values", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""alibi_slopes(n) equals the ALiBi paper's slopes, for head counts that are powers of two and not."""
check_alibi_slopes(alibi_slopes)
### BEGIN HIDDEN TESTS
check_alibi_slopes(alibi_slopes, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 7 · `alibi_bias`
#
# **Difficulty** ●○○ · **Importance** ★★☆ · **Time** ~10 min
#
# Return the float bias `(nh, T, S)` that `F.scaled_dot_product_attention` adds to the scores
# through `attn_mask`: `-slopes[h] · (p - j)` for keys `j <= p`, and `-inf` after `p` (ALiBi's
# causal mask is folded into it). As with every mask of this course, the `T` queries are the
# last `T` of the `S` positions: `p = S - T + i`. The check attends with your bias through SDPA
# and compares with attention computed by hand.
#
# <details><summary>Hint</summary>
#
# `distance = torch.arange(S - T, S)[:, None] - torch.arange(S)[None, :]` is `p - j`, `(T, S)`;
# multiply by `-slopes[:, None, None]`, then `masked_fill(distance < 0, float("-inf"))`.
# </details>


# %% nbgrader={"grade": false, "grade_id": "alibi_bias", "locked": false, "schema_version": 3, "solution": true, "task": false}
def alibi_bias(slopes: torch.Tensor, T: int, S: int | None = None) -> torch.Tensor:
    """ALiBi's bias ``(nh, T, S)``: ``-slopes[h] · (p - j)`` for keys ``j <= p = S - T + i``,
    ``-inf`` after. ``S`` defaults to ``T``."""
    ### BEGIN SOLUTION
    S = T if S is None else S
    query = torch.arange(S - T, S, device=slopes.device)[:, None]  # (T, 1): positions p
    key = torch.arange(S, device=slopes.device)[None, :]  # (1, S)
    distance = (query - key).to(slopes.dtype)  # (T, S): p - j
    bias = -slopes[:, None, None] * distance  # (nh, 1, 1) * (T, S) -> (nh, T, S)
    return bias.masked_fill(distance < 0, float("-inf"))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_alibi_bias_attention", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""SDPA with alibi_bias as its float attn_mask equals ALiBi's attention computed by hand, S > T too."""
check_alibi_bias(alibi_bias)
### BEGIN HIDDEN TESTS
check_alibi_bias(alibi_bias, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# **The forms real code uses.** BLOOM does not build $-m_h (p - j)$: it adds $m_h \cdot j$, the
# key's position alone. The two differ by $-m_h\,p$, the same number for every key of a query's
# row, and a softmax does not change when a whole row shifts by one number; the causal mask
# removes the keys after $p$ either way. MPT's `gen_slopes` rounds the head count up to a power
# of two and takes every other slope of that longer list, first the odd ones, then the even
# ones: the same slopes in the same order as the paper. On a GPU, FlashAttention-2 takes the
# slopes themselves (`alibi_slopes`) and builds the bias inside the kernel, whereas SDPA given a
# float `attn_mask` cannot use its flash backend and falls back to a slower one.
#
# A 12-head model: heads 0-7 get the slopes of 8 heads, heads 8-11 the ones that fall between
# them. Below, the bias of its steepest head (8, slope $2^{-1/2}$), which forgets within a few
# tokens, and its shallowest (7, slope $2^{-8}$), which still reads far back. A float
# `attn_mask` is added to the scores before the softmax, so SDPA runs ALiBi as it is:

# %%
slopes_12 = alibi_slopes(12)
print("12 heads:", [f"{m:.4f}" for m in slopes_12.tolist()])
bias = alibi_bias(slopes_12, 10)  # (nh, T, S)
fig, axes = plt.subplots(1, 2, figsize=(7, 3))
for ax, h in zip(axes, (8, 7), strict=True):
    ax.imshow(bias[h].clamp(min=-8), cmap="viridis")
    ax.set(title=f"head {h}, slope {slopes_12[h]:.4f}", xlabel="key j", ylabel="query p")
plt.show()
q, k, v = torch.randn(1, 12, 10, 16), torch.randn(1, 12, 10, 16), torch.randn(1, 12, 10, 16)
by_hand = ((q @ k.transpose(-2, -1)) / 4 + bias).softmax(-1) @ v  # (B, nh, T, hs)
print(
    "SDPA with attn_mask=bias vs by hand:",
    (F.scaled_dot_product_attention(q, k, v, attn_mask=bias) - by_hand).abs().max().item(),
)

# %% [markdown]
# ## 7 · What a token costs: cache bytes per token
#
# Notebook 04's formula, $2 \times \text{layers} \times n_{kv} \times hs \times \text{tokens}
# \times \text{batch} \times \text{bytes}$, counted every token of the text. A sliding window
# changes one factor: the cache holds $\min(\text{tokens}, W)$ positions, so past $W$ tokens
# its size stops growing. (Mistral's reference code allocates the $W$ slots of its ring up front,
# as does Hugging Face's static sliding-window cache; its dynamic one grows until it reaches
# $W$. The formula below counts what is held, the second way.)
#
# ### Exercise 8 · `window_cache_bytes`
#
# **Difficulty** ●○○ · **Importance** ★★★ (the number that sizes a long-context deployment) ·
# **Time** ~5 min
#
# Integer arithmetic only; `window=None` means no window (every token is kept).


# %% nbgrader={"grade": false, "grade_id": "window_cache_bytes", "locked": false, "schema_version": 3, "solution": true, "task": false}
def window_cache_bytes(
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    seq_len: int,
    window: int | None = None,
    batch_size: int = 1,
    bytes_per_value: int = 2,
) -> int:
    """Bytes of a KV cache that keeps at most ``window`` positions per layer (all of them when
    ``window`` is None): K and V of shape ``(batch_size, num_kv_heads, held, head_dim)``."""
    ### BEGIN SOLUTION
    held = seq_len if window is None else min(seq_len, window)  # positions in the cache
    return 2 * num_layers * num_kv_heads * head_dim * held * batch_size * bytes_per_value
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_window_cache_bytes_values", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""window_cache_bytes equals the bytes of the cache tensors: min(seq_len, window) positions per layer."""
check_window_cache_bytes(window_cache_bytes)
### BEGIN HIDDEN TESTS
check_window_cache_bytes(window_cache_bytes, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# Three recent shapes at growing lengths, bf16, one sequence: a Llama-3.1-8B-shaped model
# (32 layers, GQA with 8 key/value heads of 128, no window), a Mistral-7B-v0.1-shaped one (the
# same cache shape with a 4096-token window), and DeepSeek-V3's latent cache of §4 (61 layers,
# a 512-wide latent and a 64-wide RoPE key per token and layer).

# %%
lengths = (4096, 32768, 131072)
shapes = {
    "Llama 3.1 8B (GQA 8 × 128)": lambda n: window_cache_bytes(32, 8, 128, n),
    "Mistral 7B (GQA, W = 4096)": lambda n: window_cache_bytes(32, 8, 128, n, window=4096),
    "DeepSeek-V3 (MLA 512 + 64)": lambda n: mla_cache_bytes(61, 512, 64, n),
}
print(f"{'':28s}" + "".join(f"{n:>12,} tok" for n in lengths))
for name, size in shapes.items():
    print(f"{name:28s}" + "".join(f"{size(n) / 2**30:>12.2f} GiB" for n in lengths))

# %% [markdown]
# **Hybrid caches.** Most 2025 models mix the two kinds of layer, so the estimate is one
# `window_cache_bytes` per kind of layer, added. Gemma 3 27B has 62 layers of 16 key/value heads
# of 128, five local layers ($W = 1024$) for each global one: 52 local, 10 global. gpt-oss-120b
# alternates 128-token windows and full layers, 18 of each, with 8 key/value heads of 64. At
# 128k tokens the global layers are nearly the whole cache: Gemma 3's is about 10.4 GiB, where
# 62 global layers would hold 62 GiB.

# %%
hybrids = {
    "Gemma 3 27B (52 × W=1024 + 10 full)": lambda n: (
        window_cache_bytes(52, 16, 128, n, window=1024) + window_cache_bytes(10, 16, 128, n)
    ),
    "gpt-oss-120b (18 × W=128 + 18 full)": lambda n: (
        window_cache_bytes(18, 8, 64, n, window=128) + window_cache_bytes(18, 8, 64, n)
    ),
}
for name, size in hybrids.items():
    print(f"{name:36s}" + "".join(f"{size(n) / 2**30:>9.2f} GiB" for n in lengths))

# %% [markdown]
# ## Summary
#
# - A sliding window of $W$ keys lets the query at position $p$ see keys $p - W + 1 \dots p$;
#   the cache then never holds more than $W$ positions per layer: a ring buffer writes
#   position $p$ into slot $p \bmod W$. Read it oldest position first whenever order matters
#   (a chunk's mask), and rotate with RoPE at the absolute position, never at the slot.
# - StreamingLLM keeps the first few tokens (attention sinks) besides the window, stores keys
#   unrotated and numbers positions inside the cache, so distances stay within training range.
# - Long-context RoPE changes the frequencies, not the weights: linear interpolation divides all
#   of them by the factor, NTK-aware scaling raises the base (fast pairs kept, slow pairs
#   interpolated), YaRN decides per pair by wavelength and multiplies cos and sin by
#   $0.1 \ln s + 1$.
# - ALiBi adds $-m_h (p - j)$ to the scores, with geometric slopes per head ($2^{-8(h+1)/n}$,
#   and an interleaved second series when $n$ is not a power of two); SDPA takes it as a float
#   `attn_mask`.
# - Multi-head latent attention caches one latent ($d_c$) and one RoPE key ($d_r$) per token and
#   layer, shared by every head, which re-makes its keys and values with $W^{UK}_h$ and
#   $W^{UV}_h$. Positions live only in the decoupled RoPE part, so at inference $W^{UK}$ folds
#   into the query and $W^{UV}$ into the output: attention reads the latent itself, like MQA with
#   one head $d_c + d_r$ wide, scaled as before by $1/\sqrt{d_h + d_r}$.
# - Past its window, a Mistral-shaped cache stops growing; a latent cache (MLA) grows with the
#   text but costs about half of a Llama-3.1-8B-shaped GQA cache per token here, for a far larger
#   model.
#
# **Next:** notebook 10 puts the whole course to an interview's questions.
