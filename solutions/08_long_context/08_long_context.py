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
# **Time:** about 3 h (~110 min of exercises) · **Prerequisites:** 03, 04
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
# 4. Compress the cache into a latent, as DeepSeek-V2 and V3 do (multi-head latent attention).
# 5. Stretch RoPE to longer contexts: position interpolation, NTK-aware scaling and YaRN,
#    written the way Hugging Face's `rope_type` functions compute them (exercise 5).
# 6. Replace positions by a per-head linear bias: ALiBi (exercise 6).
# 7. Count what a token costs in cache for Llama-, Mistral- and DeepSeek-shaped models.
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
import warnings

import matplotlib.pyplot as plt
import torch

from autograder.checks.nb08_window import check_sliding_window_mask_values
from autograder.tools.nb03_masks import plot_masks

warnings.filterwarnings("ignore")
torch.manual_seed(0)
# %matplotlib inline

# %% [markdown]
# ## 1 · Sliding-window attention
#
# A causal mask lets the query at position $p$ see every key $0 \dots p$: the work and the cache
# grow with the whole text. A **sliding window** of $W$ keys lets it see only the $W$ most recent
# ones, $p - W + 1 \dots p$ (itself included). Mistral 7B uses $W = 4096$ in every layer; Gemma 2
# and 3 alternate windowed "local" layers with full "global" ones.
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

# %% [markdown]
# ## 3 · Attention sinks

# %% [markdown]
# ## 4 · Multi-head latent attention (MLA)

# %% [markdown]
# <!-- MLA section: owned by the MLA helper -->

# %% [markdown]
# ## 5 · Long-context RoPE: interpolation, NTK and YaRN

# %% [markdown]
# ## 6 · ALiBi: a bias instead of a rotation

# %% [markdown]
# ## 7 · What a token costs: cache bytes per token

# %% [markdown]
# ## Summary
#
# - A sliding window of $W$ keys lets the query at position $p$ see keys $p - W + 1 \dots p$;
#   the cache then never holds more than $W$ positions per layer.
#
# **Next:** notebook 09 puts the whole course to an interview's questions.
