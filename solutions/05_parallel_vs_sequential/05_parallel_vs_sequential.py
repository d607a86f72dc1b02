# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 · Parallel vs sequential heads
#
# **Time:** about 2 h (~60 min of exercises and writing) · **Prerequisites:** 02
#
# A classic interview question about multi-head attention:
#
# > *Explain why running attention heads in parallel is more efficient than running them one
# > after another.*
#
# "Because GPUs are parallel" is true but too thin to earn the point. In this notebook you build
# the evidence for a complete answer, then write it:
#
# 1. **Two schedules for one computation.** Multi-head attention one head at a time (exercise 1)
#    and with every head in one batched computation (exercise 2). Both must equal PyTorch's.
# 2. **Count the operations** that each version sends to PyTorch, and predict the count first
#    (graded numbers).
# 3. **Count the FLOPs** (exercise 3). Same FLOPs for both, and $nh$ heads of width $C/nh$ cost
#    what one head of width $C$ costs.
# 4. **Why fewer, larger operations win:** per-call overhead, independence of the heads, and data
#    reuse, each measured.
# 5. **Time it properly:** warm-up, interleaved runs, medians. Then read what a 2-core CPU really
#    shows, and what changes on a GPU.
# 6. **Quiz**, then the **written answer** to the question above, graded by your instructor.
#
# **How this notebook is graded.** Exercises and quiz answers are checked by the locked cell
# after them: run it as often as you like. Nothing here is graded by a timing: timings depend on
# your machine and on what else it runs. Operation counts and FLOPs do not, so those are graded.
# **Run › Run All Cells** goes on past failing test cells, and past examples that need an
# exercise you have not finished yet, so the plots and sliders further down run too; a failing
# test cell still counts as failed when the notebook is graded.
# In a terminal (**File › New › Terminal**), `python -m autograder check 05` grades the notebook
# and lists the written answer under "manual".
#
# ## Shape legend
#
# | symbol | meaning |
# |---|---|
# | `B` | batch size |
# | `T` | sequence length (self-attention: queries and keys are the same `T` tokens) |
# | `C` | model width, `d_model` |
# | `nh` | number of heads |
# | `hs` | head size, `C // nh` |
#
# A comment like `# (B, nh, T, hs)` gives the shape of what its line produces.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
import math
import os
import warnings

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from autograder.checks.nb05_flops import check_attention_flops, check_same_flops
from autograder.checks.nb05_parallel import (
    check_mha_parallel_batches,
    check_mha_parallel_values,
    check_mha_sequential_loops,
    check_mha_sequential_values,
)
from autograder.checks.nb05_quiz import check_predicted_matmul_counts, check_quiz_answer
from autograder.tools.modules import TorchMultiHeadAttention
from autograder.tools.nb05_parallel_heads import fused_heads
from autograder.tools.timing import (
    count_ops,
    median,
    plot_bars,
    plot_op_counts,
    plot_timings,
    time_interleaved,
)

warnings.filterwarnings("ignore")
torch.manual_seed(0)
AUTOGRADING = os.environ.get("NBGRADER_EXECUTION") == "autograde"
# %matplotlib inline

# %% [markdown]
# ## 1 · One computation, two schedules
#
# Throughout this notebook, `mha` is a multi-head attention module with the interface you built in
# notebook 02: attributes `num_heads`, `q_proj`, `k_proj`, `v_proj` and `out_proj`, each an
# `nn.Linear(C, C)`. `TorchMultiHeadAttention` is PyTorch's own implementation behind that
# interface, so your functions are compared with PyTorch. (Your `MultiHeadAttention` from
# notebook 02 would work in its place.)
#
# The layout rule from notebook 02: **head `i` owns output features `i*hs : (i+1)*hs` of each
# projection.** `nn.Linear` stores its weight as `(out_features, in_features)`, so those features
# are the **rows** `weight[i*hs:(i+1)*hs]`, a `(hs, C)` block, and the matching slice of the bias.
#
# The same multi-head attention can be scheduled two ways:
#
# ```
#  ONE HEAD AT A TIME (a Python loop)                   ALL HEADS AT ONCE (batched)
#
#  for i in range(nh):                                  q = q_proj(x)           (B, T, C)   1 product
#      rows = i*hs : (i+1)*hs                           k = k_proj(x)           (B, T, C)   1 product
#      q_h = x @ W_q[rows]ᵀ + b_q[rows]   (B, T, hs)    v = v_proj(x)           (B, T, C)   1 product
#      k_h = x @ W_k[rows]ᵀ + b_k[rows]   (B, T, hs)    split q, k, v           (B, nh, T, hs)
#      v_h = x @ W_v[rows]ᵀ + b_v[rows]   (B, T, hs)    s = q @ kᵀ / √hs        (B, nh, T, T)  1 product
#      s_h = q_h @ k_hᵀ / √hs             (B, T, T)     o = softmax(s) @ v      (B, nh, T, hs) 1 product
#      o_h = softmax(s_h) @ v_h           (B, T, hs)    merge o                 (B, T, C)
#  concat o_0 … o_{nh-1}                  (B, T, C)     out_proj                (B, T, C)   1 product
#  out_proj                               (B, T, C)
#
#  5 products per head, + 1  =  5·nh + 1               3 + 2 + 1  =  6, whatever nh
# ```
#
# The left column is the definition of multi-head attention read literally: $nh$ separate
# attentions, each with its own $W^Q_i, W^K_i, W^V_i$. The right column is how every real
# implementation runs it. Here is the module, and head 1's slice of the query projection:

# %%
B, T, C, nh = 2, 5, 12, 3
hs = C // nh
mha = TorchMultiHeadAttention(C, nh)
x = torch.randn(B, T, C)  # (B, T, C)

rows = slice(1 * hs, 2 * hs)  # head 1 owns features 4:8
W_q1, b_q1 = mha.q_proj.weight[rows], mha.q_proj.bias[rows]  # (hs, C), (hs,)
q_1 = F.linear(x, W_q1, b_q1)  # (B, T, C) @ (C, hs) + (hs,) -> (B, T, hs)
print("W_q1:", tuple(W_q1.shape), "| q_1:", tuple(q_1.shape))
print(
    "q_1 equals features 4:8 of the full projection:", torch.allclose(q_1, mha.q_proj(x)[..., rows])
)

# %% [markdown]
# ### Exercise 1 · `mha_sequential`
#
# **Difficulty** ●●○ · **Importance** ★★☆ (the baseline everything is measured against) ·
# **Time** ~20 min
#
# Compute the self-attention output of `mha` **one head at a time**, as in the left column:
#
# - a Python loop over the heads;
# - in iteration `i`, only head `i`'s slices of the query, key and value weights **and biases**
#   (a module built with `bias=False` has `bias = None`);
# - that head's attention on `(B, T, hs)` tensors, scaled by $1/\sqrt{hs}$: write the softmax
#   yourself or call `F.scaled_dot_product_attention` for the head;
# - after the loop, concatenate the heads in order and apply `mha.out_proj`.
#
# Do not call `mha(x)` or `F.multi_head_attention_forward`: the check notices. The result must
# equal `mha(x)[0]`.
#
# <details><summary>Hint 1: one head's projections</summary>
#
# `F.linear(x, w, b)` computes `x @ w.T + b` and accepts `b=None`. With
# `rows = slice(i * hs, (i + 1) * hs)`, head `i`'s queries are
# `F.linear(x, mha.q_proj.weight[rows], bias)` where `bias` is `mha.q_proj.bias[rows]`, or `None`
# when `mha.q_proj.bias is None`.
# </details>
#
# <details><summary>Hint 2: one head's attention</summary>
#
# `scores = q_h @ k_h.transpose(-2, -1) / math.sqrt(hs)` is `(B, T, T)`; then
# `torch.softmax(scores, dim=-1) @ v_h` is `(B, T, hs)`. Append it to a list.
# </details>
#
# <details><summary>Hint 3: after the loop</summary>
#
# `torch.cat(heads, dim=-1)` puts head 0's features first, then head 1's, …, which is the order
# `out_proj` expects. Then `mha.out_proj(...)`.
# </details>


# %% nbgrader={"grade": false, "grade_id": "mha_sequential", "locked": false, "schema_version": 3, "solution": true, "task": false}
def mha_sequential(x: torch.Tensor, mha) -> torch.Tensor:
    """Self-attention output of ``mha`` computed one head at a time.

    Args:
        x: ``(B, T, C)``.
        mha: a module with ``num_heads`` and ``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``
            (each ``nn.Linear(C, C)``); head ``i`` owns rows ``i*hs:(i+1)*hs`` of the q/k/v
            weights and biases.

    Returns:
        ``(B, T, C)``, equal to ``mha(x)[0]``, computed with a Python loop over the heads.
    """
    ### BEGIN SOLUTION
    B, T, C = x.shape
    hs = C // mha.num_heads
    heads = []
    for i in range(mha.num_heads):
        rows = slice(i * hs, (i + 1) * hs)  # head i's output features
        q, k, v = (
            F.linear(x, lin.weight[rows], None if lin.bias is None else lin.bias[rows])
            for lin in (mha.q_proj, mha.k_proj, mha.v_proj)
        )  # (B, T, C) -> (B, T, hs) each
        scores = q @ k.transpose(-2, -1) / math.sqrt(hs)  # (B, T, hs) @ (B, hs, T) -> (B, T, T)
        heads.append(torch.softmax(scores, dim=-1) @ v)  # (B, T, T) @ (B, T, hs) -> (B, T, hs)
    return mha.out_proj(torch.cat(heads, dim=-1))  # (B, T, nh*hs) -> (B, T, C)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_mha_sequential_matches_torch", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""mha_sequential equals mha(x)[0]: with and without bias, nh = 1, nh = C, batch 1, T = 1."""
check_mha_sequential_values(mha_sequential)
### BEGIN HIDDEN TESTS
check_mha_sequential_values(mha_sequential, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_mha_sequential_one_head_at_a_time", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""mha_sequential runs at least one more matrix product per extra head: it really loops."""
check_mha_sequential_loops(mha_sequential)
### BEGIN HIDDEN TESTS
check_mha_sequential_loops(mha_sequential, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 2 · `mha_parallel`
#
# **Difficulty** ●○○ · **Importance** ★★★ (how every real implementation runs) · **Time** ~10 min
#
# Now the right column: the same result with **no loop over heads**. One call to each
# projection, then the heads become a batch dimension, `(B, nh, T, hs)`, and one batched product
# computes every head's scores at once. This is the `forward` of notebook 02, reading the
# projections from `mha`. You may use `F.scaled_dot_product_attention` for the middle part.
#
# <details><summary>Hint 1: split and merge</summary>
#
# Split: `t.view(B, T, nh, hs).transpose(1, 2)` turns `(B, T, C)` into `(B, nh, T, hs)`. Merge:
# `o.transpose(1, 2).reshape(B, T, C)`. (`view(B, nh, T, hs)` alone has the right shape but
# scrambles tokens between heads, as notebook 02 showed.)
# </details>
#
# <details><summary>Hint 2: the batched products</summary>
#
# `@` treats all dimensions but the last two as a batch:
# `(B, nh, T, hs) @ (B, nh, hs, T) -> (B, nh, T, T)`, one call for every `(b, i)` pair.
# </details>


# %% nbgrader={"grade": false, "grade_id": "mha_parallel", "locked": false, "schema_version": 3, "solution": true, "task": false}
def mha_parallel(x: torch.Tensor, mha) -> torch.Tensor:
    """Self-attention output of ``mha`` with every head in one batched computation.

    Args:
        x: ``(B, T, C)``.
        mha: as for ``mha_sequential``.

    Returns:
        ``(B, T, C)``, equal to ``mha(x)[0]``, with no Python loop over the heads.
    """
    ### BEGIN SOLUTION
    B, T, C = x.shape
    nh = mha.num_heads
    q = mha.q_proj(x).view(B, T, nh, C // nh).transpose(1, 2)  # (B, T, C) -> (B, nh, T, hs)
    k = mha.k_proj(x).view(B, T, nh, C // nh).transpose(1, 2)  # (B, nh, T, hs)
    v = mha.v_proj(x).view(B, T, nh, C // nh).transpose(1, 2)  # (B, nh, T, hs)
    scores = (
        q @ k.transpose(-2, -1) / math.sqrt(C // nh)
    )  # (B, nh, T, hs) @ (B, nh, hs, T) -> (B, nh, T, T)
    out = torch.softmax(scores, dim=-1) @ v  # (B, nh, T, T) @ (B, nh, T, hs) -> (B, nh, T, hs)
    return mha.out_proj(out.transpose(1, 2).reshape(B, T, C))  # (B, nh, T, hs) -> (B, T, C)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_mha_parallel_matches_torch", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""mha_parallel equals mha(x)[0]: with and without bias, nh = 1, nh = C, batch 1, T = 1."""
check_mha_parallel_values(mha_parallel)
### BEGIN HIDDEN TESTS
check_mha_parallel_values(mha_parallel, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_mha_parallel_batches_heads", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""mha_parallel does not loop over heads: its number of matrix products does not grow with nh."""
check_mha_parallel_batches(mha_parallel)
### BEGIN HIDDEN TESTS
check_mha_parallel_batches(mha_parallel, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# Both versions against PyTorch, on the module from section 1:

# %%
reference = mha(x)[0]  # (B, T, C)
for fn in (mha_sequential, mha_parallel):
    print(
        f"{fn.__name__:15s} largest difference from mha(x)[0]:",
        (fn(x, mha) - reference).abs().max().item(),
    )

# %% [markdown]
# ## 2 · Counting operations
#
# How can a test tell that one function loops over heads and the other does not, without
# reading your code? By watching what reaches PyTorch. Every tensor operation passes through
# PyTorch's **dispatcher**, which picks the kernel to run. A `TorchDispatchMode` is a hook at that
# point: while it is active, it sees each operation's name (`aten::addmm`, `aten::bmm`,
# `aten::_softmax`, …) and its tensors. `count_ops` runs a function under such a hook,
# `OpCounter`, and returns the tally. The counts do not depend on the machine or on timing, which
# makes them gradable.
#
# ### Predict first
#
# Before measuring, predict. Use the counting rule of the diagram in section 1: **every projection
# (an `nn.Linear` / `F.linear` call) and every `@` counts as one matrix product.** How many
# matrix products does each column of the diagram run at **nh = 16**? Set
# `answer_matmuls_sequential` (left column) and `answer_matmuls_parallel` (right column).
#
# (If your own functions use `F.scaled_dot_product_attention`, the counts you measure below
# will differ a little: one fused call replaces two products. The question is about the
# diagram.)

# %% nbgrader={"grade": false, "grade_id": "predicted_matmul_counts", "locked": false, "schema_version": 3, "solution": true, "task": false}
# answer_matmuls_sequential = ...  (left column, a whole number)
# answer_matmuls_parallel = ...    (right column)
### BEGIN SOLUTION
answer_matmuls_sequential = 81  # 5 per head (3 projections, q @ kᵀ, weights @ v), + out_proj
answer_matmuls_parallel = 6  # 4 projections + 2 batched products, whatever nh
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_predicted_matmul_counts_nh16", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""The predicted number of matrix products at nh = 16, for the loop and for the batched version."""
check_predicted_matmul_counts(answer_matmuls_sequential, answer_matmuls_parallel)

# %% [markdown]
# Now measure your functions. The operation names depend on the grad mode: under
# `torch.no_grad()` PyTorch has already broken `F.linear` into `addmm` (multiply and add the bias)
# and `@` into `bmm`; under `torch.inference_mode()` the dispatcher sees the composite names
# `linear` and `matmul`. `OpCounter` counts all of these as matrix products, so the totals agree.

# %%
x16 = torch.randn(2, 8, 64)  # (B, T, C)
mha16 = TorchMultiHeadAttention(64, 16)
for mode in ("no_grad", "inference_mode"):
    for fn in (mha_sequential, mha_parallel):
        counter = count_ops(fn, x16, mha16, grad_mode=mode)
        names = {
            n: c for n, c in counter.ops.items() if n in ("addmm", "mm", "bmm", "linear", "matmul")
        }
        print(f"{mode:15s} {fn.__name__:15s} {counter.summary():48s} {names}")

# %% [markdown]
# The loop's count grows by 5 with every head; the batched one stays put. The loop also runs
# every *element-wise* operation (slicing, scaling, softmax) once per head: look at the
# "ops in all" column. A sweep over the number of heads, with PyTorch's fused kernel added for
# comparison (`fused_heads`: the batched version with `F.scaled_dot_product_attention`):

# %%
head_counts = [1, 2, 4, 8, 16, 32]
x64 = torch.randn(2, 8, 64)  # (B, T, C)
products = {"your mha_sequential": [], "your mha_parallel": [], "fused (SDPA)": []}
all_ops = {name: [] for name in products}
for n in head_counts:
    m = TorchMultiHeadAttention(64, n)
    for name, fn in zip(products, (mha_sequential, mha_parallel, fused_heads), strict=True):
        counter = count_ops(fn, x64, m)
        products[name].append(counter.big_ops)
        all_ops[name].append(counter.total)

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 3.6))
plot_op_counts(
    head_counts, products, ax=ax1, title="Matrix products + fused attention calls (C = 64)"
)
plot_op_counts(head_counts, all_ops, ax=ax2, title="All operations, element-wise ones included")
fig.tight_layout()
plt.show()

# %% [markdown]
# Training pays again: the backward pass runs products of its own (gradients with respect to
# the weights and the intermediate tensors), and in the loop version again once per head:

# %%
for fn in (mha_sequential, mha_parallel):
    m = TorchMultiHeadAttention(64, 8)
    counter = count_ops(lambda fn=fn, m=m: fn(x64, m).sum().backward(), grad_mode="enable_grad")
    print(f"{fn.__name__:15s} forward + backward at nh = 8: {counter.summary()}")

# %% [markdown]
# ## 3 · Counting FLOPs
#
# More operations does not mean more arithmetic. A matrix product of an `(m, k)` by a `(k, n)`
# matrix does $m \cdot n \cdot k$ multiply-adds; by the usual convention (and
# `torch.utils.flop_counter.FlopCounterMode`'s), that is $2mnk$ **FLOPs**, one multiply plus one
# add. For one self-attention forward:
#
# | product | shapes | FLOPs |
# |---|---|---|
# | each of the 4 projections (q, k, v, out) | `(B·T, C) @ (C, C)` | $2BTC^2$ |
# | scores $qk^\top$, all heads | `(T, hs) @ (hs, T)` per head, for `B·nh` pairs | $2BT^2 \cdot nh \cdot hs$ |
# | weights @ v, all heads | `(T, T) @ (T, hs)` per head, for `B·nh` pairs | $2BT^2 \cdot nh \cdot hs$ |
#
# Biases and the softmax are element-wise work, and are not counted here.
#
# ### Exercise 3 · `attention_flops`
#
# **Difficulty** ●●○ · **Importance** ★★★ (the heart of the answer) · **Time** ~15 min
#
# Return the matrix-product FLOPs (2 per multiply-add) of one MHA self-attention forward,
# projections included, as an `int`. The check compares it with what `FlopCounterMode` measures
# on PyTorch's module, for sizes up to GPT-2 small and beyond.
#
# <details><summary>Hint 1</summary>
#
# In the loop version, head `i`'s query projection is `(B·T, C) @ (C, hs)`. Add that up over
# the heads, and over q, k and v: what is left of `nh`?
# </details>
#
# <details><summary>Hint 2</summary>
#
# `nh · hs = C`, so `nh` cancels everywhere: $8BTC^2 + 4BT^2C$. Use integer arithmetic
# (`*`, `+`, `**`) so the result is an `int`.
# </details>


# %% nbgrader={"grade": false, "grade_id": "attention_flops", "locked": false, "schema_version": 3, "solution": true, "task": false}
def attention_flops(batch: int, seq_len: int, d_model: int, num_heads: int) -> int:
    """Matrix-product FLOPs (2 per multiply-add) of one MHA self-attention forward.

    Counts the q, k, v and out projections and both attention products (q @ kᵀ and
    weights @ v) of every head; biases, scaling and softmax are not counted.
    """
    ### BEGIN SOLUTION
    hs = d_model // num_heads
    projections = 4 * 2 * batch * seq_len * d_model * d_model  # (B·T, C) @ (C, C), four times
    per_head = 2 * 2 * batch * seq_len * seq_len * hs  # q @ kᵀ and weights @ v of one head
    return projections + num_heads * per_head
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_attention_flops_matches_flop_counter", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""attention_flops agrees with torch.utils.flop_counter.FlopCounterMode, nh = 1 to nh = C."""
check_attention_flops(attention_flops)
### BEGIN HIDDEN TESTS
check_attention_flops(attention_flops, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### Measuring FLOPs, and a blind spot of the measuring tool
#
# `FlopCounterMode` is a dispatch mode too: it adds up the FLOPs of every matrix product that runs.
# Measure your two functions, the module itself and the fused version:


# %%
def measured_flops(fn, *args):
    """FLOPs of fn(*args) as FlopCounterMode counts them."""
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        fn(*args)
    return counter.get_total_flops()


xf = torch.randn(2, 128, 512)  # (B, T, C)
mf = TorchMultiHeadAttention(512, 8)
print(f"attention_flops(2, 128, 512, 8)  {attention_flops(2, 128, 512, 8):>13,}")
for name, fn in [
    ("mha_sequential", mha_sequential),
    ("mha_parallel", mha_parallel),
    ("mha(x)", lambda x, m: m(x)),
    ("fused_heads", fused_heads),
]:
    print(f"{name:32s} {measured_flops(fn, xf, mf):>13,}")
with sdpa_kernel([SDPBackend.MATH]):
    print(f"{'fused_heads, math backend':32s} {measured_flops(fused_heads, xf, mf):>13,}")

# %% [markdown]
# Your two versions and the module agree with your formula. The fused version seems cheaper,
# but it is not: on the CPU, `FlopCounterMode` has no rule for the fused attention kernel and
# counts **zero** for it, so only the four projections show. Forcing PyTorch's "math" backend
# (the unfused reference path) with `sdpa_kernel([SDPBackend.MATH])` brings the missing
# products back. The lesson generalises: check a measuring tool on a case you can compute
# by hand before trusting it on one you cannot.
#
# The check below measures your two functions with the math backend forced, so either way of
# computing attention is counted correctly.

# %% nbgrader={"grade": true, "grade_id": "test_mha_parallel_same_flops", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""mha_sequential and mha_parallel do exactly the matmul FLOPs of mha(x) (FlopCounterMode)."""
check_same_flops(mha_sequential, mha_parallel)
### BEGIN HIDDEN TESTS
check_same_flops(mha_sequential, mha_parallel, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### $nh$ heads of width $C/nh$ versus $nh$ full-width attentions
#
# Splitting the width $C$ into $nh$ heads **re-arranges** the products without adding any: the
# head count cancels from $8BTC^2 + 4BT^2C$. Compare with what a naive reading of "run $nh$
# attentions" would cost: $nh$ separate attentions that each use the full width $C$. At GPT-2
# small's size ($C = 768$, 12 heads), with 8 sequences of 1024 tokens:

# %%
Bg, Tg, Cg, nhg = 8, 1024, 768, 12
costs = {
    "1 head of width 768": attention_flops(Bg, Tg, Cg, 1),
    "12 heads of width 64": attention_flops(Bg, Tg, Cg, nhg),
    "12 full-width passes": nhg * attention_flops(Bg, Tg, Cg, 1),
}
plot_bars(
    {k: v / 1e9 for k, v in costs.items()},
    ylabel="GFLOP per forward",
    title="One attention layer, B = 8, T = 1024, C = 768",
    fmt="{:,.1f}",
)
plt.show()

# %% [markdown]
# About 64.4 GFLOP either way for the real layer, and twelve times that (about 773 GFLOP) for
# twelve full-width passes. So multi-head attention does *not* multiply the compute by the
# number of heads. The question left is why the *schedule* matters when the arithmetic is the
# same.
#
# ## 4 · Same arithmetic, different shapes: why fewer, larger operations win
#
# ### (a) Every operation has a fixed cost
#
# Before any arithmetic, each operation costs Python's call, the dispatcher, shape checks and
# memory allocation for its output; on a GPU, also a kernel launch. Measure that fixed cost with
# a matrix product so small that its arithmetic is negligible:

# %%
tiny = torch.randn(2, 2)
rounds = []
for _ in range(7):
    batch_of_calls = time_interleaved({"tiny": lambda: tiny @ tiny}, repeats=200, warmup=20)
    rounds.append(median(batch_of_calls["tiny"]))
overhead_s = median(rounds)
print(f"fixed cost of one tiny matrix product: about {overhead_s * 1e6:.1f} µs")
for name, i in (("your mha_sequential", -1), ("your mha_parallel", -1)):
    if not all_ops[name]:  # its exercise is not written yet: section 3 could not count it
        print(f"{name}: not counted yet (finish it, then run section 3 and this cell again)")
        continue
    ops = all_ops[name][i]
    print(
        f"{name:20s} at nh = {head_counts[i]}: {ops:4d} operations x {overhead_s * 1e6:.1f} µs "
        f"≈ {ops * overhead_s * 1e3:.2f} ms before any arithmetic"
    )

# %% [markdown]
# A rough floor (views and element-wise operations are cheaper than a product, but not free).
# For small tensors that fixed cost *is* the run time, and the loop pays it per head. On a GPU the
# fixed cost is of the same order (microseconds per kernel launch), while the arithmetic is
# hundreds of times faster than on a CPU, so launch overhead dominates much sooner.
#
# ### (b) The heads do not depend on each other
#
# Batching is only allowed because no head needs another head's result: head $i$ reads the
# input and its own weight slices, and nothing else, until the concatenation. Test it with your
# own `mha_parallel`: give a copy of the module an identity output projection, so that the
# function returns the concatenated heads, then change **only head 2's** query weights.

# %%
mi = TorchMultiHeadAttention(32, 4)  # C = 32, nh = 4, hs = 8
with torch.no_grad():
    mi.out_proj.weight.copy_(torch.eye(32))  # out_proj(y) = y: the output is the heads side by side
    mi.out_proj.bias.zero_()
xi = torch.randn(2, 6, 32)  # (B, T, C)
before = mha_parallel(xi, mi).detach()  # (B, T, C) = 4 heads of 8 features
with torch.no_grad():
    mi.q_proj.weight[2 * 8 : 3 * 8] += torch.randn(8, 32)  # perturb head 2's rows only
after = mha_parallel(xi, mi).detach()
change = (
    (after - before).abs().view(2, 6, 4, 8).amax(dim=(0, 1, 3))
)  # (nh,): largest change per head
for i, c in enumerate(change.tolist()):
    print(f"head {i}: output changed by up to {c:.3f}")

# %% [markdown]
# Only head 2 moved. Four independent problems of the same shape are exactly what a batched
# operation is for: one call hands all of them to the library at once, and the library decides
# how to spread them over cores (CPU) or streaming multiprocessors (GPU). The loop imposes an
# order that the mathematics never asked for.
#
# ### (c) Larger products reuse data better
#
# A processor computes far faster than it can fetch data from main memory. A product is
# efficient when it does many FLOPs per byte it moves (its **arithmetic intensity**). The loop
# re-reads the input `x` for every head's projections, three times per head, where the batched
# version reads it three times in all. `OpCounter` adds up the bytes each matrix product reads and
# writes. At GPT-2 small's size this needs no computation at all: on the `meta` device tensors
# have shapes but no data.

# %%
mm = TorchMultiHeadAttention(Cg, nhg).to("meta")
xm = torch.empty(Bg, Tg, Cg, device="meta")  # (B, T, C) without data
flops_g = attention_flops(Bg, Tg, Cg, nhg)
print(
    f"{'':15s} {'products':>8s} {'GFLOP':>7s} {'MB moved':>9s} {'FLOP/byte':>9s} "
    f"{'MFLOP per product':>17s}"
)
for fn in (mha_sequential, mha_parallel):
    c = count_ops(fn, xm, mm)
    print(
        f"{fn.__name__:15s} {c.big_ops:8d} {flops_g / 1e9:7.1f} {c.matmul_bytes / 1e6:9.0f} "
        f"{flops_g / c.matmul_bytes:9.1f} {flops_g / c.big_ops / 1e6:17.0f}"
    )

# %% [markdown]
# Same FLOPs, but the loop moves about 1.7 times as many bytes to do them, in ten times as many
# products that are each ten times smaller. (Both versions still write and re-read the `(B, nh, T, T)` weights: 403 MB in
# float32 for this layer. The fused kernel avoids even that; notebook 06 shows how.)
#
# ## 5 · Timing, done properly
#
# A timing is a measurement with noise, and most published "speed-ups" that cannot be
# reproduced were measured badly. The rules used below:
#
# 1. **Warm up.** The first calls pay one-off costs: memory allocation, caches, lazy
#    initialisation. Run each function a few times before timing.
# 2. **Interleave.** Run the contenders in turns (A, B, C, then B, C, A, …), so a slow moment of
#    the machine hits all of them, not just the one that happened to be running.
# 3. **Repeat and take the median,** and show the spread (here the middle half of the runs). One
#    slow outlier moves the mean a lot and the median hardly at all.
# 4. **Same inputs, same grad mode** for everyone (here `torch.no_grad()`).
# 5. **On a GPU, synchronise** (`torch.cuda.synchronize()`) before reading the clock: GPU calls
#    return as soon as the work is *queued*. `time_interleaved` does this for you.
#
# `time_interleaved` (in `autograder.tools.timing`) follows these rules. The experiments take
# about 20–60 s and are skipped during grading. On a shared or busy machine, where PyTorch's
# threads compete with other programs, numbers can jump by 10× or more between runs; running
# `torch.set_num_threads(1)` first makes them steadier (and slower).


# %%
def sweep(shapes, repeats):
    """Timings of the three versions at each (B, T, C, nh); returns {name: [samples per point]}."""
    samples = {"your mha_sequential": [], "your mha_parallel": [], "fused (SDPA)": []}
    for Bs, Ts, Cs, nhs in shapes:
        m = TorchMultiHeadAttention(Cs, nhs)
        xs = torch.randn(Bs, Ts, Cs)  # (B, T, C)
        fns = {
            name: (lambda fn=fn, xs=xs, m=m: fn(xs, m))
            for name, fn in zip(samples, (mha_sequential, mha_parallel, fused_heads), strict=True)
        }
        for name, times in time_interleaved(fns, repeats=repeats, warmup=2).items():
            samples[name].append(times)
    return samples


def ratios(samples, i):
    """'loop / batched' and 'loop / fused' median ratios at point i."""
    loop, batched, fused = (median(s[i]) for s in samples.values())
    return f"loop/batched {loop / batched:4.2f}x, loop/fused {loop / fused:4.2f}x"


nh_values = [1, 2, 4, 8, 16, 32]
if AUTOGRADING:
    print("Timing skipped while grading.")
else:
    small = sweep([(1, 16, 64, n) for n in nh_values], repeats=9)
    medium = sweep([(4, 128, 256, n) for n in nh_values], repeats=7)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 3.8))
    plot_timings(
        nh_values,
        small,
        "number of heads nh",
        ax=ax1,
        title="Small: B = 1, T = 16, C = 64 (overhead-bound)",
    )
    plot_timings(
        nh_values, medium, "number of heads nh", ax=ax2, title="Medium: B = 4, T = 128, C = 256"
    )
    fig.tight_layout()
    plt.show()
    for label, samples in (("small ", small), ("medium", medium)):
        print(f"{label} nh = 32: {ratios(samples, -1)}")

# %% [markdown]
# And against the sequence length, at 8 heads, up to T = 1024 (the same points as the reference
# run in the table below):

# %%
lengths = [32, 64, 128, 256, 512, 1024]
if not AUTOGRADING:
    by_length = sweep([(2, t, 256, 8) for t in lengths], repeats=5)
    plot_timings(lengths, by_length, "sequence length T", title="B = 2, C = 256, nh = 8")
    plt.show()
    for i, t in enumerate(lengths):
        print(f"T = {t:4d}: {ratios(by_length, i)}")

# %% [markdown]
# ### Reading the result honestly
#
# Your numbers depend on your machine, and on what else it is doing. For comparison, here is
# one run of `python -m autograder.bench.heads_timing --threads 1`, which repeats these three
# experiments (15 interleaved rounds, medians) on the 2-core machine this course was developed
# on (busy with other jobs, hence one thread; 2026-12-02):
#
# | experiment | loop / batched | loop / fused |
# |---|---|---|
# | small, nh = 1 → 32 | 1.1× → 30× | 1.2× → 38× |
# | medium, nh = 1 … 32 | 0.91× … 1.25×, no trend | 0.72× … 2.1× |
# | T = 32 → 1024, nh = 8 | 5.1× → **0.40×** | 5.7× → 1.6× |
#
# The pattern, which you should recognise in your plots:
#
# - **Small tensors (overhead-bound):** the loop is clearly slower, and the gap grows with the
#   number of heads. The work per head is tiny, so the run time is mostly the fixed cost of
#   section 4(a), paid about five times per head.
# - **Larger tensors, batched vs loop:** often *no faster*, sometimes slower, and the ratio
#   wanders from run to run. Two CPU cores are already kept busy by one head's product, so
#   handing the library all heads at once buys little extra parallelism. Worse, the batched
#   version materialises one big `(B, nh, T, T)` weight tensor that no longer fits in the
#   processor's caches, where the loop reuses a smaller one per head: from T = 512 on, the loop
#   won.
# - **The fused kernel** (`F.scaled_dot_product_attention`) is what wins on a CPU once the
#   tensors are large, typically 1.5–3× over either hand-written version: it never writes the
#   full weight matrix to memory, which is the point of notebook 06.
#
# So on a laptop CPU "parallel heads are faster" is only clearly true when the per-operation
# overhead dominates. The claim is really about hardware built for parallel work.
#
# ### What changes on a GPU
#
# No GPU measurement is included in this notebook; with one,
# `python -m autograder.bench.heads_timing --device cuda` runs the same comparison. The published
# figures and the hardware explain what to expect:
#
# - An H200 is rated at about 990 TFLOP/s on dense bf16 matrix products (NVIDIA's H200
#   datasheet: 989 TFLOP/s without sparsity, the figure notebook 06 uses too) and has over a
#   hundred streaming multiprocessors. The 64.4 GFLOP of the GPT-2-sized layer above would take
#   about 65 µs at that peak (64.4 × 10⁹ / 989 × 10¹²).
# - The loop version of that layer issues 61 matrix products plus the per-head element-wise
#   kernels, each launched separately from Python at a cost of a few microseconds. Launching
#   alone can take longer than the ideal arithmetic. The batched version issues six products.
# - Each per-head product is also *skinny*: a `(8192, 768) @ (768, 64)` projection gives the
#   GPU far less independent work than the `(8192, 768) @ (768, 768)` one, and far fewer FLOPs
#   per byte (section 4(c)). Tensor cores stay idle waiting for data.
# - Kernel fusion goes further. Raschka's benchmark of this very layer shape (B = 8, T = 1024,
#   C = 768, 12 heads, causal) measured 3.08 ms for a hand-written batched MHA and 1.10 ms with
#   `F.scaled_dot_product_attention` on an A100 (2.8×), against 166 ms and 110 ms (1.5×) on an
#   Apple M3 CPU. FlashAttention-2 reaches 50–73% of an A100's peak (Dao, 2023).
#
# The GPU advantage comes from the same three facts you measured here: the same FLOPs, in far
# fewer and larger operations, on independent heads. A GPU simply rewards them much more than
# two CPU cores do.
#
# ## 6 · Check your understanding
#
# Answer each question with one letter, as a string, e.g. `answer_q1 = "a"`.
#
# **Question 1.** At a fixed width $C = 768$, going from 1 head (`hs = 768`) to 12 heads
# (`hs = 64`), the matrix-product FLOPs of one MHA forward…
#
# - (a) grow 12×.
# - (b) grow by about $\sqrt{12} \approx 3.5$×.
# - (c) stay exactly the same.
# - (d) shrink 12×.

# %% nbgrader={"grade": false, "grade_id": "quiz_q1", "locked": false, "schema_version": 3, "solution": true, "task": false}
# answer_q1 = "a", "b", "c" or "d"
### BEGIN SOLUTION
answer_q1 = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q1", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""Question 1: the FLOPs of 12 heads against 1 head of the same total width."""
check_quiz_answer("q1", answer_q1)

# %% [markdown]
# **Question 2.** On a GPU the batched version is typically much faster than the loop; on a
# 2-core CPU it often is not. Which explanation fits what you measured?
#
# - (a) The batched version does fewer FLOPs, and a GPU profits more from fewer FLOPs than a
#   CPU does.
# - (b) A GPU needs many independent products at once to fill its arithmetic units, and pays a
#   launch cost per kernel; two CPU cores are already busy with one head's product.
# - (c) Python runs a `for` loop more slowly when the tensors it touches live in GPU memory.
# - (d) The batched version stores one merged copy of the weights, which suits GPU memory
#   better.

# %% nbgrader={"grade": false, "grade_id": "quiz_q2", "locked": false, "schema_version": 3, "solution": true, "task": false}
# answer_q2 = "a", "b", "c" or "d"
### BEGIN SOLUTION
answer_q2 = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q2", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""Question 2: why batching pays off on a GPU and barely on a 2-core CPU."""
check_quiz_answer("q2", answer_q2)

# %% [markdown]
# **Question 3.** What makes it possible to compute the heads in parallel at all?
#
# - (a) Each head reads only the input and its own weight slices; none needs another head's
#   result before the concatenation.
# - (b) The softmax is a linear function, so the heads' results can be added in any order.
# - (c) All heads share one matrix of attention weights, computed once for all of them.
# - (d) The output projection is applied to each head separately, before the concatenation.

# %% nbgrader={"grade": false, "grade_id": "quiz_q3", "locked": false, "schema_version": 3, "solution": true, "task": false}
# answer_q3 = "a", "b", "c" or "d"
### BEGIN SOLUTION
answer_q3 = "a"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q3", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""Question 3: what lets the heads run side by side."""
check_quiz_answer("q3", answer_q3)

# %% [markdown]
# **Question 4.** On a laptop CPU, right after opening the notebook, a colleague times the loop
# version once, then the batched version once, and reports a 3× speed-up. What is the main
# problem?
#
# - (a) Nothing: on a CPU, one run per version is accurate enough to compare.
# - (b) They forgot `torch.cuda.synchronize()`, so the clock stopped too early.
# - (c) They should have reported the mean of the two runs rather than their ratio.
# - (d) No warm-up and one run each: one-off costs and a moment of load can decide it.

# %% nbgrader={"grade": false, "grade_id": "quiz_q4", "locked": false, "schema_version": 3, "solution": true, "task": false}
# answer_q4 = "a", "b", "c" or "d"
### BEGIN SOLUTION
answer_q4 = "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_quiz_q4", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""Question 4: what is wrong with a single cold timing per version."""
check_quiz_answer("q4", answer_q4)

# %% [markdown]
# ## 7 · The practice question, in your own words
#
# *Explain why running attention heads in parallel is more efficient than running them one after
# another.*
#
# Write 6–12 sentences in the cell below (double-click it to edit). A strong answer:
#
# - says what does **not** change, with a number you measured;
# - explains what **does** change, and why that matters to the hardware, with numbers from
#   sections 2 and 4;
# - says why batching the heads is allowed at all;
# - is honest about where the gain is large and where it is small, using your own timings.
#
# This answer is worth 4 points and is graded by your instructor, not by the autograder.

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_answer_parallel_heads", "locked": false, "points": 4, "schema_version": 3, "solution": true, "task": false}
# ### BEGIN SOLUTION
# **Model answer.** Running the heads in parallel does not save any arithmetic: one forward
# pass does $8BTC^2 + 4BT^2C$ FLOPs however the width $C$ is split into heads (603,979,776 for
# $B = 2$, $T = 128$, $C = 512$ in both versions, measured with `FlopCounterMode`). That is also why
# $nh$ heads of width $C/nh$ cost what one head of width $C$ costs, not $nh$ times more. What
# changes is how the work is packaged. The loop issues $5 \cdot nh + 1$ matrix products (81 at
# 16 heads) plus a set of element-wise operations per head; the batched version issues 6, whatever
# the number of heads. Every operation has a fixed cost before any arithmetic (Python, the
# dispatcher, allocation, and on a GPU a kernel launch of a few microseconds), so the loop pays
# that cost about five times per head. Batching is possible because the heads are independent:
# each reads only the input and its own weight slices until the concatenation, so all of them
# can be handed to the hardware as one batched product, and the library spreads them over
# the cores or streaming multiprocessors. A loop imposes an order the mathematics does not
# need. Larger products also use the hardware better: the loop re-reads the input for every
# head, so it moves more bytes per FLOP (lower arithmetic intensity), and each skinny per-head
# product is too small to keep a GPU busy. How much this buys depends on the hardware. On my
# 2-core CPU the loop was clearly slower for small tensors, where overhead dominates, but
# batching was about as fast as the loop for larger ones, because two cores are already busy
# with one head's product; the fused `scaled_dot_product_attention` kernel was what gave a clear
# gain. On a GPU, with thousands of arithmetic units and a launch cost per kernel, batching
# (and fusion on top of it) is far faster.
#
# **Rubric (4 points, one per line; half points allowed).**
#
# 1. *Same work:* the FLOPs are identical (ideally with a measured or computed number); splitting
#    into heads re-arranges the products, and $nh$ heads of width $C/nh$ do not cost $nh$ times one
#    full-width head.
# 2. *Fewer, larger operations:* $5 \cdot nh + 1$ against a constant 6 matrix products (or the
#    learner's own counts), and why that matters: a fixed cost per operation (Python, dispatcher,
#    kernel launch), paid once per head in the loop.
# 3. *Independence:* no head depends on another before the concatenation, which is what allows
#    one batched operation that the hardware spreads over its cores.
# 4. *Hardware and honesty:* better utilisation (data reuse / arithmetic intensity, filling many
#    cores) **and** an honest reading of the timings: a small or no gain on a few CPU cores for
#    large tensors, a large one on a GPU; fused kernels add more.
#
# No credit for a line whose claim is wrong: "batching reduces the FLOPs" or "…the number of
# parameters" (0 for line 1); "the heads run simultaneously, so it is nh times faster" without
# qualification (0 for line 4).
# ### END SOLUTION

# %% [markdown]
# ## Summary
#
# - Both schedules compute the same function: your loop and your batched version both equal
#   PyTorch's multi-head attention.
# - **Same FLOPs**, $8BTC^2 + 4BT^2C$: the head count cancels, so $nh$ heads of width $C/nh$ cost
#   what one full-width head costs, unlike $nh$ full-width passes.
# - **Different packaging:** $5 \cdot nh + 1$ matrix products against 6, and several times more
#   operations overall; counted deterministically with a `TorchDispatchMode`.
# - **Why fewer, larger operations win:** a fixed cost per operation, independent heads that
#   can be batched, and better data reuse per byte moved.
# - **Measured honestly:** on a 2-core CPU batching mostly helps when overhead dominates, and
#   the fused kernel is the big win; on a GPU, batching and fusion are far faster.
# - Measuring tools have blind spots: `FlopCounterMode` counts zero for the fused CPU kernel.
#
# **Next, notebook 06:** the fused kernel itself: tiled attention with an online softmax that
# never stores the `(T, T)` weights, and a Triton version of it.
