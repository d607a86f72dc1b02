# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 06 · Attention on a GPU, and without one
#
# **Time:** about 2 h + 1 h optional (~95 min of exercises, ~40 more optional) · **Prerequisites:** 01, 03
#
# So far every attention you wrote built the full table of scores, one number per (query, key)
# pair. That is fine for a sentence. For a long document it is the single largest thing in memory,
# and on a GPU moving it around costs more time than the arithmetic. In this notebook you will:
#
# 1. Write **device-agnostic** code for a laptop, an Apple GPU or an NVIDIA GPU (exercise).
# 2. Meet `F.scaled_dot_product_attention` (SDPA) and what its fused kernels save; then, as an
#    *optional deep dive*, the **backends** behind it and how to force one.
# 3. Choose **dtypes** (float32, TF32, float16, bfloat16) and the tolerances that go with them.
# 4. Learn the idea behind **FlashAttention**, an online softmax over blocks of keys that never
#    builds the score table (a picture, then an exercise in PyTorch), and write its **backward
#    pass** tile by tile from the saved log-sum-exp (FlashAttention-2's, an exercise); then join
#    the two in a `torch.autograd.Function` that passes `gradcheck` (an exercise).
# 5. *Optional deep dive:* complete a **Triton kernel** that does the same on a GPU, and debug it
#    on your CPU in Triton's interpreter (an exercise with self-checks, no points).
# 6. Time it on a GPU, in TFLOP/s (runs only when a CUDA GPU is present).
#
# **No GPU needed.** Without one, Triton kernels run in Triton's CPU interpreter: exact, slow, and
# good for learning. Where Triton cannot be installed at all (macOS, Windows), the Triton
# self-checks print a message instead.
#
# **Optional deep dives** (SDPA's backends, the Triton kernel) can be skipped: nothing later builds
# on them. Exercise 5, the Triton kernel, is **optional, no points**: its two checks are
# self-checks that tell you whether your kernel is right, and count for nothing in the grade, so
# skipping section 7 costs no points, and neither does a machine without Triton.
#
# **How this notebook is graded.** Each exercise is a function in place of
# `raise NotImplementedError()`; the locked cell after it checks it and names the likely mistake.
# Hidden tests try more shapes when grading. The written answer at the end is graded by a person.
# Exercise 5's two checks are the exception: optional self-checks, no points, skipped while
# grading.
# **Run › Run All Cells** goes on past failing test cells, and past examples that need an
# exercise you have not finished yet, so the plots and sliders further down run too; a failing
# test cell still counts as failed when the notebook is graded.
# In a terminal (**File › New › Terminal**), `python -m autograder check 06` grades the whole
# notebook, hidden tests included.
#
# ## Shape legend
#
# | symbol | meaning |
# |---|---|
# | `B` | batch size |
# | `nh` | number of heads |
# | `T` | number of queries |
# | `S` | number of keys and values (`S = T` in self-attention) |
# | `hs` | head size (width of one head's query, key and value vectors) |
#
# Queries are `(B, nh, T, hs)`; keys and values `(B, nh, S, hs)`.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
import inspect
import math
import os
import warnings

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from autograder.checks.nb06_backward import (
    check_backward_by_hand,
    check_backward_causal,
    check_backward_memory,
    check_backward_values,
)
from autograder.checks.nb06_function import (
    check_flash_function,
    check_flash_memory,
    check_tiled_lse,
)
from autograder.checks.nb06_gpu import (
    check_get_device,
    check_tiled_causal,
    check_tiled_memory,
    check_tiled_no_sdpa,
    check_tiled_values,
    check_triton_causal,
    check_triton_values,
)
from autograder.tools import nb06_gpu_timing, triton_support
from autograder.tools.nb06_gpu import (
    gradients_through,
    plot_online_softmax,
    sdpa_backend,
    track_tensors,
)
from autograder.tools.timing import median, time_interleaved
from autograder.tools.triton_support import tl, triton

warnings.filterwarnings("ignore")
torch.manual_seed(0)
AUTOGRADING = os.environ.get("NBGRADER_EXECUTION") == "autograde"
HAS_CUDA = torch.cuda.is_available()
print(triton_support.describe_mode())
# %matplotlib inline

# %% [markdown]
# The setup cell imported `autograder.tools.triton_support` **before** any Triton kernel, on
# purpose: `@triton.jit` reads `TRITON_INTERPRET` when it decorates a function, to choose between
# compiling for a GPU and interpreting. The helper sets it only when there is no CUDA GPU (the
# interpreter would otherwise run your "GPU" kernel a thousand times slower, without complaint).
#
# ## 1 · Device-agnostic code
#
# The same notebook should run on a laptop CPU, on an Apple-silicon GPU (PyTorch calls it `mps`)
# and on an NVIDIA GPU (`cuda`). The recipe:
#
# - pick the device **once**, in one function, and keep it in a variable;
# - create tensors directly on it (`torch.randn(..., device=device)`) and move modules with
#   `model.to(device)`; never write `.cuda()`, which fails on every machine without NVIDIA;
# - keep the dtype and device of your inputs: helpers such as `torch.zeros_like(x)` or
#   `x.new_zeros(...)` inherit both.
#
# Mixing devices in one operation is an error, not a silent copy: adding a CPU tensor to a GPU
# tensor raises `RuntimeError: Expected all tensors to be on the same device, but found at least
# two devices, cuda:0 and cpu!`. When you see it, look for a tensor created without `device=`.

# %% [markdown]
# ### Exercise 1 · `get_device`
#
# **Difficulty** ●○○ · **Importance** ★★☆ (every later cell uses it) · **Time** ~5 min
#
# Return `torch.device("cuda")` when a CUDA GPU is available, otherwise `torch.device("mps")` when
# Apple's Metal backend is available, otherwise `torch.device("cpu")`.
#
# <details><summary>Hint 1</summary>
#
# `torch.cuda.is_available()` and `torch.backends.mps.is_available()` each return a bool.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Return a `torch.device`, not the string: `torch.device("cpu")`. PyTorch 2.6+ also offers
# `torch.accelerator.current_accelerator()`, which returns the device of whichever accelerator
# is present, or `None`; either way is accepted.
# </details>


# %% nbgrader={"grade": false, "grade_id": "get_device", "locked": false, "schema_version": 3, "solution": true, "task": false}
def get_device() -> torch.device:
    """The best device here: ``cuda`` if available, else ``mps``, else ``cpu``."""
    ### BEGIN SOLUTION
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_get_device_prefers_accelerator", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""get_device returns a torch.device: cuda if available, else mps, else cpu."""
check_get_device(get_device)

# %% [markdown]
# From here on, `device` is where tensors go. On a GPU machine the cells below run there; on a
# laptop they run on the CPU, and nothing else changes.

# %%
device = get_device()
x = torch.randn(2, 3, device=device)  # created on the device, no copy
print(
    "device:", device, "| x is on", x.device, "| zeros_like keeps it:", torch.zeros_like(x).device
)

# %% [markdown]
# ## 2 · `F.scaled_dot_product_attention` and its backends
#
# `torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=None, is_causal=False)`
# computes exactly the function you wrote in notebook 01 (the output, not the weights). What do
# its fused kernels buy? The unfused version (PyTorch's *math* backend) builds the `(B, nh, T, S)`
# score tensor; the fused CPU kernel (its *flash* backend) never does. `track_tensors` records the
# largest tensor any operation *creates* (views are free and do not count), a deterministic way
# to compare memory:

# %%
q = torch.randn(1, 8, 1024, 64)  # (B, nh, T, hs)
for backend in (SDPBackend.MATH, SDPBackend.FLASH_ATTENTION):
    with sdpa_kernel([backend]), track_tensors() as largest:
        F.scaled_dot_product_attention(q, q, q)
    print(f"{backend.name:<16} largest tensor created: {largest.describe()}")

# %% [markdown]
# ### Optional deep dive: the backends behind SDPA
#
# Behind that one name PyTorch keeps several implementations, called **backends** (the two above
# are two of them), and picks one per call from the device, the dtype, the shapes and the
# arguments:
#
# | backend | runs on | in short |
# |---|---|---|
# | math | anywhere | plain PyTorch operations: scores, softmax, product; builds the `(T, S)` scores |
# | flash, CPU kernel | CPU | a fused, tiled C++ kernel: never stores the `(T, S)` scores |
# | flash (FlashAttention-2) | recent NVIDIA GPUs | fused and tiled; float16/bfloat16 only; no arbitrary mask |
# | efficient (memory-efficient) | NVIDIA GPUs | fused and tiled; float32 too; accepts masks |
# | cuDNN | recent NVIDIA GPUs | NVIDIA's own fused kernel, from its cuDNN library |
# | custom hook | other accelerators | lets out-of-tree devices plug in their own kernel |
#
# Which GPU backend PyTorch tries first, and under which conditions (head sizes, dtypes, GPU
# generations), changes between releases, and this course has not measured it on a GPU. Instead
# of memorising a list, ask your own machine: force a backend with the `sdpa_kernel` context
# manager, and PyTorch either uses it or raises an error that says why not. On this machine's CPU
# (and on its GPU, in float16, if it has one):

# %%
q = torch.randn(1, 4, 128, 64)  # (B, nh, T, hs)
for where, x in [("cpu", q)] + ([("cuda", q.to("cuda", torch.float16))] if HAS_CUDA else []):
    for backend in (
        SDPBackend.MATH,
        SDPBackend.FLASH_ATTENTION,
        SDPBackend.EFFICIENT_ATTENTION,
        SDPBackend.CUDNN_ATTENTION,
    ):
        try:
            with sdpa_kernel([backend]):
                F.scaled_dot_product_attention(x, x, x)
            print(f"{where:<5} {backend.name:<20} ran")
        except RuntimeError as err:
            print(f"{where:<5} {backend.name:<20} RuntimeError: {str(err).splitlines()[0][:60]}...")

# %% [markdown]
# And when PyTorch chooses by itself, which backend runs? `sdpa_backend` (from the course's tools)
# records the operators a call dispatches to and names the backend. Notice the cases where the
# CPU falls back to math: dropout, and inputs without a batch-and-heads layout. With a CUDA GPU
# the last lines say which backend your GPU and your PyTorch pick, which is the only answer to
# "which one runs first" that holds for your machine.

# %%
mask = torch.rand(128, 128) > 0.5  # (T, S), True = may attend
cases = {
    "float32": dict(),
    "float16": dict(dtype=torch.float16),
    "causal": dict(is_causal=True),
    "boolean mask": dict(attn_mask=mask),
    "dropout 0.1": dict(dropout_p=0.1),
}
for name, kwargs in cases.items():
    x = q.to(kwargs.pop("dtype", torch.float32))
    print(f"{name:<13} -> {sdpa_backend(x, x, x, **kwargs)}")
x3 = q[0]  # (nh, T, hs): three dimensions only
print(f"{'3-D input':<13} -> {sdpa_backend(x3, x3, x3)}")
if HAS_CUDA:
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        xg = q.to("cuda", dtype)  # (B, nh, T, hs) on the GPU
        print(f"cuda {str(dtype)[6:]:<8} -> {sdpa_backend(xg, xg, xg)}")

# %% [markdown]
# `sdpa_kernel` takes a *list*: the backends PyTorch may choose from. On a GPU you would write,
# for example, `with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):`
# to rule out cuDNN and math. When a backend you expected is refused on a GPU,
# `torch.backends.cuda.can_use_flash_attention(params, debug=True)` (and its siblings for the
# other backends) prints the reasons.
#
# ## 3 · Dtypes and their tolerances
#
# GPUs are fastest on 16-bit numbers: a tensor core multiplies float16 or bfloat16 matrices many
# times faster than float32 ones, and half the bytes means half the memory traffic. The cost is
# precision. Four formats matter for attention:
#
# | format | exponent bits | mantissa bits | relative step (eps) | largest value | where |
# |---|---|---|---|---|---|
# | float32 | 8 | 23 | 1.2e-7 | 3.4e38 | default everywhere |
# | TF32 | 8 | 10 | 9.8e-4 | 3.4e38 | NVIDIA tensor cores, for float32 matmuls when allowed |
# | float16 | 5 | 10 | 9.8e-4 | 65504 | GPUs; overflows easily |
# | bfloat16 | 8 | 7 | 7.8e-3 | 3.4e38 | GPUs, recent CPUs; float32's range, less precision |
#
# TF32 is not a storage type: tensors stay float32 but the tensor cores round the inputs of a
# matrix product to 10 mantissa bits. PyTorch uses it for float32 matmuls only when you allow it
# (`torch.backends.cuda.matmul.allow_tf32 = True`, or `torch.set_float32_matmul_precision("high")`),
# while **Triton's `tl.dot` uses TF32 for float32 inputs by default on a GPU**; the interpreter
# computes exactly. So a float32 Triton kernel is exact on your laptop and accurate to about
# 1e-3 on a GPU. The checks allow for that.
#
# Measure the error each format brings to attention, against float64:

# %%
x64 = torch.randn(2, 8, 256, 64, dtype=torch.float64)  # (B, nh, T, hs)
reference = F.scaled_dot_product_attention(x64, x64, x64)
for dtype in (torch.float32, torch.float16, torch.bfloat16):
    x_low = x64.to(dtype)
    err = (F.scaled_dot_product_attention(x_low, x_low, x_low).double() - reference).abs().max()
    print(f"{str(dtype):<15} eps {torch.finfo(dtype).eps:.1e}   max |error| {err:.1e}")

x32 = x64.float()
tf32 = ((x32.view(torch.int32) + 0x1000) & ~0x1FFF).view(torch.float32)  # round to 10 mantissa bits
exact = x64 @ x64.transpose(-2, -1)  # (B, nh, T, T) scores in float64
for name, x in (("float32", x32), ("TF32 (emulated)", tf32)):
    err = ((x @ x.transpose(-2, -1)).double() - exact).abs().max()
    print(
        f"{name:<15} scores q @ kᵀ: max |error| {err:.1e}, relative {err / exact.abs().max():.1e}"
    )

# %% [markdown]
# The checks in this notebook compare against float64 with these tolerances (absolute and
# relative): float32 2e-5, float32 through TF32 on a GPU 3e-3, float16 5e-3, bfloat16 3e-2.
# float64 inputs are held to float32's 2e-5, because exercise 2 lets you accumulate in float32.
# An answer that misses by more than its tolerance but by no more than rounding could (1e-2 for
# float32 and float64 inputs) is told that it loses precision, not that its loop is wrong.
#
# One trap with 16-bit types: the "large negative number" people use instead of $-\infty$ for
# masking. `-1e9` does not exist in float16: it becomes $-\infty$. Nor does the most negative
# finite value, `torch.finfo(dtype).min`, stay finite: notebook 03 §7 showed that two of them
# added together overflow to $-\infty$ in every dtype, and that a row whose keys are all masked
# with a finite fill spreads its weight evenly over exactly the keys it must not read. So the rule
# is the one of notebook 03: **mask with $-\infty$, and guard the rows that have no allowed key.**
# In a softmax the guard zeroes those rows' weights; in the online softmax of section 5 it
# subtracts 0 while the running maximum is still $-\infty$, and gives a row with $\ell = 0$ a zero
# output.

# %%
for dtype in (torch.float16, torch.bfloat16, torch.float32):
    low = torch.tensor(torch.finfo(dtype).min, dtype=dtype)
    print(
        f"{str(dtype):<15} -1e9 is stored as {torch.tensor(-1e9, dtype=dtype).item():.4g}; "
        f"finfo.min + finfo.min = {(low + low).item()}"
    )

# %% [markdown]
# ## 4 · The trouble with the `(T, S)` table
#
# Naive attention stores one score per (query, key) pair, for every head and every sequence in
# the batch. In float32 that is `4 · B · nh · T · S` bytes, and it grows with the *square* of the
# sequence length:

# %%
B, nh = 8, 12
print("   T  | scores, float32, B=8, nh=12")
for T in (1024, 4096, 16384, 65536):
    print(f"{T:6d} | {4 * B * nh * T * T / 1e9:10.1f} GB")

# %% [markdown]
# At T = 1024 this is 0.4 GB per layer, tolerable; at T = 16384 it is 103 GB, more than most GPUs
# hold. And memory size is only half of the story. A GPU has two kinds of memory:
#
# - **HBM**, the big one (141 GB on an H200), read at about 4.8 TB/s;
# - **on-chip SRAM** (registers and shared memory), a few hundred kilobytes per streaming
#   multiprocessor, a few tens of MB in all, and far faster.
#
# Naive attention writes the score table to HBM, reads it back for the softmax, writes the weights,
# and reads them again for the product with `v`. Per (query, key) pair that is 4·hs FLOPs of
# matrix products against at least 8 bytes of float16 traffic: 32 FLOPs per byte at hs = 64, while
# an H100 or H200 needs a few hundred FLOPs per byte to keep its tensor cores busy. The kernel
# spends its time waiting for memory. FlashAttention (Dao et al., 2022) keeps each tile of scores
# in SRAM, uses it, and throws it away. Only `q`, `k`, `v` and the output ever travel through HBM.
#
# The catch is the softmax: every weight in a row depends on the sum over *all* keys of that row.
# How can you finish with a tile of keys before you have seen the others? That is the next
# section.
#
# ## 5 · Online softmax: the idea behind FlashAttention
#
# Take one query and its row of scores $s_1, \dots, s_S$. The stable softmax from notebook 01
# needs the row maximum $m$ and the sum $\ell = \sum_j e^{s_j - m}$ before any weight is known.
# Now read the scores in blocks and keep two running numbers: the maximum so far, $m$, and the sum
# so far, $\ell$, measured *relative to that maximum*. When a new block arrives with block maximum
# $\tilde m$:
#
# $$m_{\text{new}} = \max(m, \tilde m), \qquad
#   \ell_{\text{new}} = \ell \, e^{m - m_{\text{new}}} + \sum_{j \in \text{block}} e^{s_j - m_{\text{new}}} .$$
#
# The factor $e^{m - m_{\text{new}}}$ (never above 1) re-expresses the old sum relative to the new
# maximum. If the maximum did not change it is 1; if it grew, the old terms shrink accordingly.
# After the last block, $m$ and $\ell$ are exactly the row's maximum and sum. Check it on ten
# scores in blocks of four:

# %%
scores = torch.tensor([1.0, 3.0, 0.5, 2.0, 6.0, -1.0, 4.0, 0.0, 7.5, 2.5], dtype=torch.float64)
m_i, l_i = -math.inf, 0.0
for start in range(0, len(scores), 4):
    block = scores[start : start + 4]
    m_new = max(m_i, block.max().item())
    l_i = l_i * math.exp(m_i - m_new) + torch.exp(block - m_new).sum().item()
    print(
        f"block {block.tolist()}: m = {m_new:.1f}, l = {l_i:.4f}, old sum rescaled by "
        f"{math.exp(m_i - m_new):.4f}"
    )
    m_i = m_new
print(
    f"one pass:   m = {scores.max().item():.1f}, l = {torch.exp(scores - scores.max()).sum():.4f}"
)

# %% [markdown]
# Attention needs more than the sum: it needs $\sum_j e^{s_j - m} v_j$, a weighted sum of value
# vectors. The same trick works for it. Keep an unnormalised output $\mathrm{acc}$ next to $\ell$,
# rescale it by the same factor, and add the block's contribution:
#
# $$\mathrm{acc}_{\text{new}} = \mathrm{acc}\, e^{m - m_{\text{new}}} + \sum_{j \in \text{block}} e^{s_j - m_{\text{new}}}\, v_j ,
#   \qquad \text{and at the very end} \quad \mathrm{out} = \mathrm{acc} / \ell .$$
#
# Do this for every query at once, and the work per block is two small matrix products, a
# `(T, block)` tile of scores and a `(T, hs)` update. The picture shows scores cut into key
# blocks, and for one query the running maximum and the rescaling factors as blocks arrive:

# %%
demo_q = torch.randn(16, 8)  # (T, hs)
demo_k = torch.randn(24, 8) + torch.linspace(-1, 2, 24)[:, None]  # (S, hs): later keys score higher
plot_online_softmax(demo_q @ demo_k.T / math.sqrt(8), block_size=6, row=3)  # scores (T, S)
plt.show()

# %% [markdown]
# On the left, each gold rectangle is one **tile**: a block of queries against a block of keys,
# the unit of work of one step of a GPU kernel. On the right, each time a block brings a larger
# score, the running maximum steps up and everything accumulated so far is multiplied by the factor
# shown.
#
# ### Exercise 2 · `tiled_attention`
#
# **Difficulty** ●●● · **Importance** ★★★ (the core idea of this notebook) · **Time** ~35 min
#
# Write attention that loops over blocks of `block_size` keys and keeps, for every query, the
# running maximum `m_i`, running sum `l_i` and unnormalised output `acc`, as above (the names
# of the FlashAttention paper, and of the Triton kernel later). Rules:
#
# - **Never create a tensor as large as one head's `(T, S)` score matrix.** The check tracks every
#   tensor your function creates and fails if any has `T·S` elements or more (on shapes where
#   `(B, nh, T, block_size)`, one block of scores for every head, is at most half of that).
#   Build masks per block too.
# - Do not call `F.scaled_dot_product_attention` (the check watches for it); `torch.exp`,
#   `amax`, `maximum` and `@` are what you need.
# - `block_size` need not divide `S`: the last block may be shorter. `S` may differ from `T`.
# - `causal=True` aligns the mask **bottom-right**, as in notebook 03: the `T` queries are the
#   *last* `T` of the `S` positions, so query `i` may attend key `j` iff `j <= i + S - T`.
#   (SDPA's `is_causal=True` aligns top-left; the two agree when `S = T`.) When `S < T` the first
#   `T - S` queries may attend nothing, and their output must be zeros, not NaN.
# - Keep the input dtype (you may accumulate in float32 and cast back).
# - With `return_lse=True`, return the pair `(out, lse)`: `lse` is the **log-sum-exp** of each
#   query's scaled scores, $L_i = m_i + \log \ell_i$ after the last block, shape `(B, nh, T)`
#   (one number per query: drop the last dimension). A query with no allowed key has
#   $\ell_i = 0$ and $L_i = \log 0 = -\infty$. Section 6's backward needs it; until then,
#   ignore it.
#
# <details><summary>Hint 1: what to keep</summary>
#
# Before the loop: `m_i` of shape `(B, nh, T, 1)` filled with `-inf`, `l_i` of zeros `(B, nh, T, 1)`,
# `acc` of zeros `(B, nh, T, hs)`. `q.new_full(...)` and `q.new_zeros(...)` keep dtype and device.
# </details>
#
# <details><summary>Hint 2: one block</summary>
#
# `for start in range(0, S, block_size):` then `kb = k[..., start:start + block_size, :]` (Python
# slicing stops at `S` by itself) and the same for `v`. Scores:
# `s = q @ kb.transpose(-2, -1) / math.sqrt(hs)`, shape `(B, nh, T, b)`.
# </details>
#
# <details><summary>Hint 3: the update</summary>
#
# Per block: `m_new = torch.maximum(m_i, s.amax(-1, keepdim=True))` and the rescaling factor
# `alpha = torch.exp(m_i - m_new)`. Then follow the two formulas above: the block's
# exponentials are taken relative to `m_new`; `l_i` and `acc` are multiplied by `alpha` before
# the block's contribution is added. What is `out` after the last block?
# </details>
#
# <details><summary>Hint 4: causal, and the NaN trap</summary>
#
# Key `j` of the block sits at position `start + j`; query `i` sits at position `i + S - T`.
# Mask the scores with `-inf` where the key's position is larger. A query whose keys so far were
# all masked has `m_new = -inf`, and `exp(-inf - (-inf))` is NaN: while the maximum is still
# `-inf`, subtract 0 instead (`torch.where`). At the end, such a query has `l_i = 0`: give it a
# zero output rather than dividing.
# </details>


# %% nbgrader={"grade": false, "grade_id": "tiled_attention", "locked": false, "schema_version": 3, "solution": true, "task": false}
def tiled_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    block_size: int = 64,
    causal: bool = False,
    return_lse: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """softmax(q kᵀ / √hs) v, one block of keys at a time, with an online softmax.

    Never creates a tensor as large as one head's (T, S) score matrix.

    Args:
        q: queries ``(B, nh, T, hs)``.
        k: keys ``(B, nh, S, hs)``.
        v: values ``(B, nh, S, hs)``.
        block_size: keys per block; need not divide ``S``.
        causal: if True, query ``i`` may attend key ``j`` iff ``j <= i + S - T`` (bottom-right);
            a query with no allowed key gets a zero output.
        return_lse: if True, also return each query's log-sum-exp ``m + log(l)``.

    Returns:
        ``(B, nh, T, hs)``, same dtype as ``q``; with ``return_lse``, the pair ``(out, lse)``,
        ``lse`` of shape ``(B, nh, T)`` (``-inf`` for a query with no allowed key).
    """
    ### BEGIN SOLUTION
    B, nh, T, hs = q.shape
    S = k.shape[-2]
    m_i = q.new_full((B, nh, T, 1), float("-inf"))  # running max of each query's scores
    l_i = q.new_zeros((B, nh, T, 1))  # running sum of exp(score - m)
    acc = q.new_zeros((B, nh, T, v.shape[-1]))  # running sum of exp(score - m) * value
    last_key = torch.arange(T, device=q.device)[:, None] + S - T  # (T, 1): bottom-right causal
    for start in range(0, S, block_size):
        kb = k[..., start : start + block_size, :]  # (B, nh, b, hs), b <= block_size
        vb = v[..., start : start + block_size, :]  # (B, nh, b, hs)
        s = (
            q @ kb.transpose(-2, -1) / math.sqrt(hs)
        )  # (B, nh, T, hs) @ (B, nh, hs, b) -> (B, nh, T, b)
        if causal:
            cols = torch.arange(start, start + kb.shape[-2], device=q.device)  # (b,)
            s = s.masked_fill(cols > last_key, float("-inf"))  # (T, b) mask broadcasts
        m_new = torch.maximum(m_i, s.amax(-1, keepdim=True))  # (B, nh, T, 1)
        m_ref = torch.where(torch.isinf(m_new), 0.0, m_new)  # no key yet: avoid -inf - (-inf)
        alpha = torch.exp(m_i - m_ref)  # (B, nh, T, 1), <= 1: rescales what came before
        p = torch.exp(s - m_ref)  # (B, nh, T, b)
        l_i = l_i * alpha + p.sum(-1, keepdim=True)  # (B, nh, T, 1)
        acc = acc * alpha + p @ vb  # (B, nh, T, b) @ (B, nh, b, hs) -> (B, nh, T, hs)
        m_i = m_new
    out = torch.where(l_i > 0, acc / l_i, 0.0)  # (B, nh, T, hs); rows with no key stay 0
    if return_lse:
        return out, (m_i + torch.log(l_i)).squeeze(-1)  # (B, nh, T): log(0) = -inf, no key
    return out
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_tiled_attention_matches_sdpa", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
"""tiled_attention equals SDPA: T != S, block sizes that do not divide S, large scores."""
check_tiled_values(tiled_attention)
### BEGIN HIDDEN TESTS
check_tiled_values(tiled_attention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_tiled_attention_causal", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""Causal tiled_attention equals SDPA with the bottom-right mask j <= i + S - T."""
check_tiled_causal(tiled_attention)
### BEGIN HIDDEN TESTS
check_tiled_causal(tiled_attention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_tiled_attention_memory", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""tiled_attention never creates a tensor as large as one head's (T, S) score matrix."""
check_tiled_memory(tiled_attention)
### BEGIN HIDDEN TESTS
check_tiled_memory(tiled_attention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_tiled_attention_no_sdpa", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""tiled_attention computes attention itself, without calling F.scaled_dot_product_attention."""
check_tiled_no_sdpa(tiled_attention)

# %% nbgrader={"grade": true, "grade_id": "test_tiled_attention_lse", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""return_lse=True returns (out, lse): each query's log-sum-exp, (B, nh, T), from the loop."""
check_tiled_lse(tiled_attention)
### BEGIN HIDDEN TESTS
check_tiled_lse(tiled_attention, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# Compare the largest tensor each version creates for one long sequence: naive attention, yours,
# and PyTorch's fused CPU kernel.


# %%
def naive_attention(q, k, v):
    """softmax(q kᵀ / √hs) v with the whole score matrix in memory."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, nh, T, S)
    return torch.softmax(scores, dim=-1) @ v  # (B, nh, T, hs)


q, k, v = (torch.randn(1, 4, 1024, 64) for _ in range(3))  # (B, nh, T|S, hs)
versions = {
    "naive": naive_attention,
    "tiled, block 128": lambda q, k, v: tiled_attention(q, k, v, block_size=128),
    "SDPA (CPU flash)": F.scaled_dot_product_attention,
}
for name, fn in versions.items():
    with track_tensors() as largest:
        out = fn(q, k, v)
    print(f"{name:<17} largest tensor {largest.describe()}")

# %% [markdown]
# Your version never holds more than a `(T, block_size)` tile of scores per head. Is it also
# faster? Time the three on this CPU (medians of interleaved runs; skipped while grading):

# %%
if AUTOGRADING:
    print("Timing skipped while grading.")
else:
    times = time_interleaved(
        {name: (lambda fn=fn: fn(q, k, v)) for name, fn in versions.items()}, repeats=5, warmup=1
    )
    for name, samples in times.items():
        print(f"{name:<17} {1e3 * median(samples):7.1f} ms")

# %% [markdown]
# On a CPU, tiling in Python is **not** a speed-up: every block is a separate round of PyTorch
# operations with its own overhead, and the CPU's caches already soften the memory traffic of the
# naive version. The fused kernel, the same idea written in C++, wins. On a GPU, the idea pays off
# only when one kernel does the whole loop on chip; the optional section 7 writes one in Triton.
# First, the other half of training: the backward pass.
#
# ## 6 · The backward pass, tile by tile
#
# Training needs gradients, and the backward pass has the same problem as the forward: written
# naively, it keeps the `(T, S)` weights `P` from the forward and builds two more `(T, S)`
# tables, `dP` and `dS`. FlashAttention-2 (Dao, 2023) computes `dQ`, `dK`
# and `dV` tile by tile instead, from what the forward saved: `q`, `k`, `v`, the output `o`, and
# **one number per query**, the log-sum-exp of its scaled scores,
#
# $$L_i = \log \sum_j e^{s_{ij}} = m_i + \log \ell_i \qquad (\text{the running max and sum at the end of the forward loop}).$$
#
# With $L$, any tile of weights comes back exactly and in one step, with no running maximum:
# $P_{ij} = e^{s_{ij} - L_i}$. Given the gradient of the loss with respect to the output, `dO`,
# the chain rule through `o = P v` and the softmax gives, with the scale $c = 1/\sqrt{hs}$:
#
# $$dV = P^\top dO, \qquad dP = dO\, V^\top, \qquad dS = P \circ (dP - D), \qquad
#   dQ = c\, dS\, K, \qquad dK = c\, dS^\top Q,$$
#
# where $D_i = \sum_j P_{ij}\, dP_{ij} = \mathrm{rowsum}(dO \circ O)_i$ is the softmax's
# correction term: one number per query, computed once before the loop from `dO` and `o`, so
# that no tile needs the whole row of `P`. Each tile of keys `j` contributes to its own rows of
# `dK` and `dV`, and adds to **every** query's `dQ`.
#
# **Why recompute instead of saving `P`?** Saving it costs `B·nh·T·S` numbers per layer in HBM,
# the very table the forward avoided; recomputing a tile costs one more small matrix product,
# done on chip from `q`, `k` and `L`. On a GPU, arithmetic is cheap and memory traffic is not, so
# the recomputation makes the backward *faster* as well as smaller. PyTorch's training code calls
# the same trade "activation checkpointing"; here it happens inside one kernel.
#
# ### Exercise 3 · `tiled_attention_backward`
#
# **Difficulty** ●●● · **Importance** ★★☆ · **Time** ~30 min
#
# Write the backward pass with one loop over blocks of `block_size` keys, every query at once
# (or tile the queries too, as a GPU kernel does). Rules, as in exercise 2:
#
# - **Never create a tensor as large as one head's `(T, S)` matrix**: no full `P`, `dP`, `dS` or
#   mask. The check tracks every tensor your function creates.
# - **By hand**: no autograd (`.backward()`, `torch.autograd.grad`) and no PyTorch attention.
# - `lse` is `(B, nh, T)`; `block_size` need not divide `S`; `causal=True` is bottom-right aligned
#   as before (here `S >= T`, so every query has a key).
# - Return `(dq, dk, dv)`, each with the shape and dtype of `q`, `k`, `v`.
#
# <details><summary>Hint 1: before the loop</summary>
#
# `D = (do * o).sum(-1, keepdim=True)`, shape `(B, nh, T, 1)`; `dq` starts at
# `torch.zeros_like(q)`, `dk` and `dv` at `torch.zeros_like(k)` and `torch.zeros_like(v)`.
# </details>
#
# <details><summary>Hint 2: one key block</summary>
#
# Slice `kb`, `vb` as in exercise 2, rebuild the block's scaled scores (and its causal mask, with
# `-inf`), then `p = torch.exp(s - lse[..., None])`, shape `(B, nh, T, b)`.
# </details>
#
# <details><summary>Hint 3: the gradients</summary>
#
# `dv[..., start:start + b, :] = pᵀ @ do`; `ds = p * (do @ vbᵀ - D)`;
# `dk[..., start:start + b, :] = dsᵀ @ q * scale`; and `dq` **accumulates**:
# `dq = dq + ds @ kb * scale`.
# </details>


# %% nbgrader={"grade": false, "grade_id": "tiled_attention_backward", "locked": false, "schema_version": 3, "solution": true, "task": false}
def tiled_attention_backward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    o: torch.Tensor,
    lse: torch.Tensor,
    do: torch.Tensor,
    block_size: int = 64,
    causal: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of attention, one block of keys at a time, from what the forward saved.

    Never creates a tensor as large as one head's (T, S) matrix.

    Args:
        q: queries ``(B, nh, T, hs)``.
        k: keys ``(B, nh, S, hs)``.
        v: values ``(B, nh, S, hs)``.
        o: the forward's output ``(B, nh, T, hs)``.
        lse: the log-sum-exp of each query's scaled scores ``(B, nh, T)``.
        do: the gradient of the loss with respect to ``o``, ``(B, nh, T, hs)``.
        block_size: keys per block; need not divide ``S``.
        causal: if True, query ``i`` may attend key ``j`` iff ``j <= i + S - T`` (``S >= T``).

    Returns:
        ``(dq, dk, dv)``, shaped and typed like ``q``, ``k``, ``v``.
    """
    ### BEGIN SOLUTION
    T, S, hs = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(hs)
    D = (do * o).sum(-1, keepdim=True)  # (B, nh, T, 1): rowsum(dO ∘ O)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    last_key = torch.arange(T, device=q.device)[:, None] + S - T  # (T, 1): bottom-right causal
    for start in range(0, S, block_size):
        kb = k[..., start : start + block_size, :]  # (B, nh, b, hs)
        vb = v[..., start : start + block_size, :]  # (B, nh, b, hs)
        s = q @ kb.transpose(-2, -1) * scale  # (B, nh, T, hs) @ (B, nh, hs, b) -> (B, nh, T, b)
        if causal:
            cols = torch.arange(start, start + kb.shape[-2], device=q.device)  # (b,)
            s = s.masked_fill(cols > last_key, float("-inf"))  # (T, b) mask broadcasts
        p = torch.exp(s - lse[..., None])  # (B, nh, T, b): the forward's weights, recomputed
        dv[..., start : start + block_size, :] = p.transpose(-2, -1) @ do  # (B, nh, b, hs)
        dp = do @ vb.transpose(-2, -1)  # (B, nh, T, hs) @ (B, nh, hs, b) -> (B, nh, T, b)
        ds = p * (dp - D)  # (B, nh, T, b)
        dq = dq + ds @ kb * scale  # (B, nh, T, b) @ (B, nh, b, hs) -> (B, nh, T, hs)
        dk[..., start : start + block_size, :] = ds.transpose(-2, -1) @ q * scale  # (B, nh, b, hs)
    return dq, dk, dv
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_tiled_attention_backward_matches_autograd", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
"""tiled_attention_backward equals autograd's gradients through SDPA: T != S, ragged blocks."""
check_backward_values(tiled_attention_backward)
### BEGIN HIDDEN TESTS
check_backward_values(tiled_attention_backward, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_tiled_attention_backward_causal", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""Causal tiled_attention_backward equals autograd's gradients with the bottom-right mask."""
check_backward_causal(tiled_attention_backward)
### BEGIN HIDDEN TESTS
check_backward_causal(tiled_attention_backward, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_tiled_attention_backward_memory", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""tiled_attention_backward never creates a tensor as large as one head's (T, S) matrix."""
check_backward_memory(tiled_attention_backward)
### BEGIN HIDDEN TESTS
check_backward_memory(tiled_attention_backward, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_tiled_attention_backward_by_hand", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""tiled_attention_backward computes the gradients itself: no autograd, no PyTorch attention."""
check_backward_by_hand(tiled_attention_backward)

# %% [markdown]
# Your gradients against autograd's through `naive_attention` (section 5), and the largest
# tensor each creates. `o` and `lse` come from your forward, `tiled_attention(...,
# return_lse=True)`, exactly what a FlashAttention forward hands its backward.

# %%
q, k, v, do = (torch.randn(1, 2, 512, 32) for _ in range(4))  # (B, nh, T|S, hs); do: dL/do
leaves = [t.clone().requires_grad_() for t in (q, k, v)]
with track_tensors() as largest_autograd:
    naive_attention(*leaves).backward(do)
print(f"largest tensor, naive + autograd: {largest_autograd.describe()}")
o, lse = tiled_attention(q, k, v, block_size=64, return_lse=True)  # (B, nh, T, hs), (B, nh, T)
with track_tensors() as largest:
    grads = tiled_attention_backward(q, k, v, o, lse, do, block_size=64)
print(f"largest tensor, yours:            {largest.describe()}")
for name, mine, leaf in zip(("dq", "dk", "dv"), grads, leaves, strict=True):
    print(f"{name}: max |yours − autograd| = {(mine - leaf.grad).abs().max().item():.1e}")

# %% [markdown]
# ### Exercise 4 · `FlashAttention`: forward and backward joined
#
# **Difficulty** ●●○ · **Importance** ★★☆ · **Time** ~15 min
#
# Autograd does not know that your two functions belong together. A
# `torch.autograd.Function` tells it: `forward` computes the output and keeps what the backward
# will read, `backward` receives `dO` and returns one gradient per input of `forward`. This is
# how flash-attn exposes its kernels to PyTorch (`FlashAttnFunc`), and what Stanford CS336's
# second assignment asks for, tested with `torch.autograd.gradcheck`. Write the class:
#
# - Both methods are `@staticmethod`s, and their first argument `ctx` is the bridge between
#   them: `ctx.save_for_backward(q, k, v, o, lse)` in `forward`, `ctx.saved_tensors` in
#   `backward` (in the same order). Python values such as `causal` are plain attributes:
#   `ctx.causal = causal`.
# - `forward(ctx, q, k, v, causal=False)` returns `o` alone, from `tiled_attention(...,
#   return_lse=True)` with the default block size; `lse` stays inside, for the backward.
# - `backward(ctx, do)` returns `dq, dk, dv` from `tiled_attention_backward`, and `None` for
#   `causal` (a flag has no gradient): four values, because `forward` took four inputs.
# - You call it as `FlashAttention.apply(q, k, v, causal)`, never by making an instance.
#
# **Why gradcheck wants float64.** `torch.autograd.gradcheck` compares your backward with finite
# differences of your forward, $(f(x + \epsilon) - f(x - \epsilon)) / 2\epsilon$ with
# $\epsilon = 10^{-6}$. In float32 the rounding error of $f$ is about $10^{-7}$, a tenth of
# $\epsilon$ itself, so the differences are noise and a correct Function fails; in float64 they
# are good to about $10^{-10}$. The float64 run also catches a Function that silently computes
# in float32 (`.float()` somewhere): every float32 test passes it. So if your exercises 2 or 3
# accumulate in float32, accumulate in `torch.promote_types(q.dtype, torch.float32)`, which keeps
# float64 as float64.
#
# The tests compare your gradients with autograd's through SDPA, to $10^{-9}$ in float64, and
# measure the memory of one forward and backward together. They call your class through
# `gradients_through(FlashAttention, q, k, v, do, causal)` (given): one forward and one backward
# in a single call, as a training step runs them, so that both are graded together.
#
# <details><summary>Hint: the whole forward</summary>
#
# `o, lse = tiled_attention(q, k, v, causal=causal, return_lse=True)`, then
# `ctx.save_for_backward(q, k, v, o, lse)`, `ctx.causal = causal`, `return o`.
# </details>


# %% nbgrader={"grade": false, "grade_id": "FlashAttention", "locked": false, "schema_version": 3, "solution": true, "task": false}
class FlashAttention(torch.autograd.Function):
    """softmax(q kᵀ / √hs) v that autograd can differentiate, tiled both ways.

    Call it as ``FlashAttention.apply(q, k, v, causal)``: q ``(B, nh, T, hs)``, k and v
    ``(B, nh, S, hs)``; causal is bottom-right aligned, as in ``tiled_attention``.
    """

    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        """The output ``(B, nh, T, hs)``; saves ``(q, k, v, o, lse)`` and ``causal`` on ``ctx``."""
        ### BEGIN SOLUTION
        o, lse = tiled_attention(q, k, v, causal=causal, return_lse=True)  # o (B, nh, T, hs)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal = causal
        return o
        ### END SOLUTION

    @staticmethod
    def backward(ctx, do):
        """``(dq, dk, dv, None)``: one gradient per input of ``forward``, none for ``causal``."""
        ### BEGIN SOLUTION
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = tiled_attention_backward(q, k, v, o, lse, do, causal=ctx.causal)
        return dq, dk, dv, None
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_flash_attention_gradients", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
"""FlashAttention's gradients equal autograd's through SDPA: float64 (gradcheck's dtype), causal."""
check_flash_function(FlashAttention, gradients_through)
### BEGIN HIDDEN TESTS
check_flash_function(FlashAttention, gradients_through, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_flash_attention_memory", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""A forward and backward through FlashAttention never hold a (T, S) table: L is what it saves."""
check_flash_memory(FlashAttention, gradients_through)
### BEGIN HIDDEN TESTS
check_flash_memory(FlashAttention, gradients_through, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# Now `gradcheck` itself, on your Function, in float64 and then in float32 (the same inputs,
# rounded):

# %%
q64, k64, v64 = (torch.randn(1, 2, 5, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
print("float64:", torch.autograd.gradcheck(FlashAttention.apply, (q64, k64, v64, True)))
q32, k32, v32 = (t.detach().float().requires_grad_() for t in (q64, k64, v64))
passed = torch.autograd.gradcheck(
    FlashAttention.apply, (q32, k32, v32, True), raise_exception=False
)
print("float32:", passed, "(the same correct code: finite differences in float32 are noise)")

# %% [markdown]
# **What a real kernel changes.** Three things the PyTorch loops above leave out, and the
# follow-up questions an interviewer asks about them:
#
# - **Causal tile skipping.** A real kernel tiles the queries too. With a causal mask, a key tile
#   that lies wholly above the diagonal of a query tile holds nothing but $-\infty$: the forward
#   and the backward skip it instead of masking it, about half of the tiles when $S = T$, hence
#   about twice the speed. Only the tiles the diagonal crosses need a mask at all.
# - **How dQ is accumulated.** Each key tile adds to the `dQ` of every query. FlashAttention-2's
#   backward walks key tiles in parallel (one thread block each, keeping its `dK`, `dV` on chip)
#   and adds into `dQ` in global memory with float32 atomic adds; the Triton tutorial avoids
#   atomics with a second pass, one program per query tile that loops over the key tiles.
# - **GQA.** With grouped keys and values, one key/value head serves `n_rep` query heads, so the
#   gradient of that head is the **sum** of what each of its query heads sends back: compute
#   `dK` and `dV` per query head, then `dk.unflatten(1, (nkv, n_rep)).sum(2)`. That is exactly
#   what autograd does through `repeat_kv`'s copies (the backward of a copy is a sum).
#
# And every accumulator (`dQ`, `dK`, `dV`, `m`, `l`, `acc`) is kept in float32 whatever the input
# dtype: a sum of many bfloat16 terms loses the small ones.

# %% [markdown]
# ## 7 · Optional deep dive: a Triton kernel
#
# *About 60 minutes. Nothing later in the course builds on it.*
#
#
# [Triton](https://triton-lang.org) writes GPU kernels in Python. You think in **blocks**, not
# threads:
#
# - a kernel is a function decorated with `@triton.jit`, launched on a **grid** of **programs**:
#   `kernel[grid](args...)`; each program finds its place with `tl.program_id(axis)`;
# - a program loads blocks of memory with `tl.load(pointers, mask=..., other=...)`, computes on
#   whole blocks (`+`, `tl.exp2`, `tl.max(x, axis)`, `tl.dot(a, b)` for a matrix product on tensor
#   cores), and writes with `tl.store`;
# - block sizes are `tl.constexpr`: known when the kernel compiles, and powers of two;
# - tensors passed in become pointers to their first element; offsets are computed by hand.
#
# A first kernel: the maximum of each block of 16 numbers. The `DEBUG` switch turns on a `print`
# inside the kernel, the simplest debugger there is. In the interpreter it prints like Python; on
# a GPU use `tl.device_print`, which prints from every thread.


# %%
@triton.jit
def block_max_kernel(X, Out, N, BLOCK: tl.constexpr, DEBUG: tl.constexpr):
    pid = tl.program_id(0)  # which block this program handles
    offs = pid * BLOCK + tl.arange(0, BLOCK)  # (BLOCK,) positions of its elements
    x = tl.load(X + offs, mask=offs < N, other=float("-inf"))  # (BLOCK,); past N: -inf
    if DEBUG:
        print("program", pid, "loaded", x)
    tl.store(Out + pid, tl.max(x, axis=0))


if triton_support.AVAILABLE:
    data = torch.arange(40.0, device=device) % 17  # (N,) with N = 40: the last block is partial
    result = torch.empty(triton.cdiv(40, 16), device=device)  # one maximum per block
    debug = triton_support.MODE == "interpreter"  # on a GPU every thread would print
    block_max_kernel[(len(result),)](data, result, 40, BLOCK=16, DEBUG=debug)
    print("block maxima:", result.tolist(), "| torch:", [c.max().item() for c in data.split(16)])
else:
    print(triton_support.SKIP_MESSAGE)

# %% [markdown]
# ### Four pitfalls, shown
#
# **1. An unmasked load past the end reads whatever lies there.** No error, on the GPU or in the
# interpreter. Below, the input is the first 10 elements of a 16-element buffer filled with 999;
# a load of 16 without a mask happily returns the neighbours' 999s. Always mask the ragged edge.


# %%
@triton.jit
def copy_kernel(X, Y, N, BLOCK: tl.constexpr, MASKED: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < N, other=0.0) if MASKED else tl.load(X + offs)
    tl.store(Y + offs, x)


if triton_support.AVAILABLE:
    buffer = torch.full((16,), 999.0, device=device)
    buffer[:10] = torch.arange(10.0)
    for masked in (False, True):
        y = torch.zeros(16, device=device)
        copy_kernel[(1,)](buffer[:10], y, 10, BLOCK=16, MASKED=masked)
        print("masked  " if masked else "unmasked", y.tolist())
else:
    print(triton_support.SKIP_MESSAGE)

# %% [markdown]
# **2. `tl.dot` wants inner sizes of at least 16.** The interpreter computes an 8-wide product
# without complaint; the GPU compiler rejects it. The launcher of your kernel therefore refuses
# head sizes below 16 (and non-powers of two, which `tl.arange` cannot make) on every machine, so
# that a mistake fails the same way with and without a GPU:

# %%
small = torch.randn(1, 1, 8, 8)  # (B, nh, T, hs) with hs = 8
try:
    triton_support.check_inputs(small, small, small, triton_support.launch_config(small))
except ValueError as err:
    print("ValueError:", err)

# %% [markdown]
# **3. bfloat16 `tl.dot` is wrong in the interpreter** (Triton issue #11584): it returns garbage
# with no error, while the GPU gets it right. Without a GPU, test in float16 and float32; the
# launcher refuses bfloat16 in the interpreter.


# %%
@triton.jit
def matmul16_kernel(A, B, C):
    r = tl.arange(0, 16)
    idx = r[:, None] * 16 + r[None, :]  # (16, 16) offsets of a row-major matrix
    tl.store(C + idx, tl.dot(tl.load(A + idx), tl.load(B + idx)))


if triton_support.MODE == "interpreter":
    a, b = torch.randn(16, 16), torch.randn(16, 16)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        c = torch.empty(16, 16)
        matmul16_kernel[(1,)](a.to(dtype), b.to(dtype), c)
        want = a.to(dtype).float() @ b.to(dtype).float()  # (16, 16)
        print(f"{str(dtype):<15} max |tl.dot - torch| = {(c - want).abs().max():.3g}")
else:
    print("Shown only in the interpreter (a GPU computes bfloat16 tl.dot correctly).")

# %% [markdown]
# **4. $-\infty$ minus $-\infty$ is NaN**, in a kernel as in exercise 2 (its hint 4): a row whose
# keys so far were all masked must subtract 0, not its running maximum $-\infty$. One NaN
# poisons the whole row.
#
# ### The attention kernel
#
# One program computes `BLOCK_M` query rows of one (batch, head): the grid is
# `(cdiv(T, BLOCK_M), B·nh)`. The program loads its `q` block once, then walks over the keys in
# blocks of `BLOCK_N`, exactly like your `tiled_attention`, but with everything in registers and
# shared memory:
#
# ```
#                 keys, BLOCK_N at a time ──────────────▶
#            ┌────────┬────────┬────────┬─────┐
#  program 0 │ tile   │ tile   │ tile   │tile │  q rows 0 … BLOCK_M-1: m_i, l_i, acc stay on chip
#            ├────────┼────────┼────────┼─────┤
#  program 1 │ tile   │ tile   │ tile   │tile │  q rows BLOCK_M … 2·BLOCK_M-1
#            └────────┴────────┴────────┴─────┘
#                                      last block partial when S % BLOCK_N != 0
# ```
#
# Details that make it fast on a GPU:
#
# - **exp2.** GPUs compute $2^x$ in one instruction; $e^x = 2^{x \log_2 e}$. The launcher passes
#   `qk_scale = log2(e) / √hs`, so `qk = q·kᵀ · qk_scale` is already in base-2 units: use
#   `tl.math.exp2` everywhere, for `p` and for the rescaling factor.
# - **float32 accumulators.** `q`, `k`, `v` may be float16, but `m_i`, `l_i` and `acc` are
#   float32; `p` is cast to `v`'s dtype only to enter the second `tl.dot`.
# - **constexpr branches.** `CAUSAL` and `EVEN_S` (S is a multiple of `BLOCK_N`) are known at
#   compile time, so `if CAUSAL or not EVEN_S:` costs nothing when it is false: the unmasked
#   version compiles without the mask code.
# - **Causal skipping.** With `CAUSAL`, the loop stops at the last key any row of the block may
#   see, so the upper-right tiles are never computed.
#
# ### Exercise 5 · `triton_attention` (optional, no points)
#
# **Difficulty** ●●● · **Importance** ★★☆ (how FlashAttention really runs) · **Time** ~40 min
#
# Optional, no points: the two locked cells after the kernel are self-checks. They name the likely
# mistake like every other check, but count for nothing in the grade, and grading skips them.
#
# The loads, the loop and the launcher are given. Fill in the two marked places in
# `_attention_kernel`: the online-softmax update inside the loop, and the final division after it
# (the result must be called `out`). Same conventions as `tiled_attention`: bottom-right causal
# mask, zeros for queries with no allowed key.
#
# Without a GPU, each (program, key block) step takes a few milliseconds in the interpreter: test
# with tiny shapes such as `T = S = 40`. If something is off, put a `print(...)` inside the loop,
# run one program (`B = nh = 1`, `T <= 32`), and compare with your `tiled_attention`.
#
# <details><summary>Hint 1: the scores and the mask</summary>
#
# `qk = tl.dot(q, tl.trans(k)) * qk_scale` is `(BLOCK_M, BLOCK_N)`. Inside
# `if CAUSAL or not EVEN_S:` build a boolean `allowed` from `cols` (and, when `CAUSAL`, from
# `offs_m`): padded columns, `cols >= S`, were loaded as zeros and would otherwise score 0, and a
# causal query at position `offs_m + S - T` may not read later keys. `tl.where` applies it.
# </details>
#
# <details><summary>Hint 2: the update</summary>
#
# It is your `tiled_attention` update, translated: `torch.maximum` → `tl.maximum`,
# `amax(-1)` → `tl.max(x, 1)`, `sum(-1)` → `tl.sum(x, 1)`, `@` → `tl.dot` (cast `p` to
# `v.dtype` first), and `torch.exp` → `tl.math.exp2`, since `qk` is already in base-2 units.
# `m_i` and `l_i` are 1-D here: index them with `[:, None]` to broadcast over a row.
# </details>
#
# <details><summary>Hint 3: after the loop</summary>
#
# Divide each row of `acc` by its `l_i`. A row that saw no key has `l_i = 0` and `acc = 0`:
# make sure it stays 0 instead of becoming NaN.
# </details>

# %% nbgrader={"grade": false, "grade_id": "triton_attention", "locked": false, "schema_version": 3, "solution": true, "task": false}
LOG2E = 1.0 / math.log(2.0)  # e**x == 2**(x * LOG2E)


@triton.jit
def _attention_kernel(
    Q,
    K,
    V,
    Out,  # pointers to contiguous (B*nh, T|S, HS) tensors
    T,
    S,
    qk_scale,  # query and key counts; log2(e) / sqrt(HS)
    HS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    EVEN_S: tl.constexpr,
):
    start_m = tl.program_id(0)  # which block of queries
    z = tl.program_id(1).to(tl.int64)  # which (batch, head); int64 offsets for big tensors
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,) query positions
    offs_n = tl.arange(0, BLOCK_N)  # (BLOCK_N,) key positions within a block
    offs_d = tl.arange(0, HS)  # (HS,)
    q_ptrs = Q + z * T * HS + offs_m[:, None] * HS + offs_d[None, :]  # (BLOCK_M, HS)
    k_ptrs = K + z * S * HS + offs_n[:, None] * HS + offs_d[None, :]  # (BLOCK_N, HS)
    v_ptrs = V + z * S * HS + offs_n[:, None] * HS + offs_d[None, :]  # (BLOCK_N, HS)
    q = tl.load(q_ptrs, mask=offs_m[:, None] < T, other=0.0)  # (BLOCK_M, HS)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)  # running max, log2 units
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)  # running sum of exp2(qk - m_i)
    acc = tl.zeros([BLOCK_M, HS], dtype=tl.float32)  # running sum of exp2(qk - m_i) @ v

    end_n = S
    if CAUSAL:  # keys after the block's last row are in every row's future
        end_n = tl.minimum(S, tl.maximum(0, (start_m + 1) * BLOCK_M + S - T))
    for start_n in range(0, end_n, BLOCK_N):
        cols = start_n + offs_n  # (BLOCK_N,) key positions
        if EVEN_S:
            k = tl.load(k_ptrs)  # (BLOCK_N, HS)
            v = tl.load(v_ptrs)  # (BLOCK_N, HS)
        else:  # the last block is partial: padded rows load as zeros
            k = tl.load(k_ptrs, mask=cols[:, None] < S, other=0.0)  # (BLOCK_N, HS)
            v = tl.load(v_ptrs, mask=cols[:, None] < S, other=0.0)  # (BLOCK_N, HS)
        # scores qk (BLOCK_M, BLOCK_N) in log2 units; mask padded columns and, if CAUSAL, the
        # future; then update m_i, l_i and acc
        ### BEGIN SOLUTION
        qk = (
            tl.dot(q, tl.trans(k)) * qk_scale
        )  # (BLOCK_M, HS) @ (HS, BLOCK_N) -> (BLOCK_M, BLOCK_N)
        if CAUSAL or not EVEN_S:
            allowed = cols[None, :] < S  # (1, BLOCK_N): padded columns are not keys
            if CAUSAL:
                allowed = allowed & (cols[None, :] <= offs_m[:, None] + S - T)  # (BLOCK_M, BLOCK_N)
            qk = tl.where(allowed, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))  # (BLOCK_M,)
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)  # no key yet: avoid -inf - (-inf)
        alpha = tl.math.exp2(m_i - m_ref)  # (BLOCK_M,) rescales what came before
        p = tl.math.exp2(qk - m_ref[:, None])  # (BLOCK_M, BLOCK_N)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)  # (BLOCK_M, BLOCK_N) @ (BLOCK_N, HS)
        m_i = m_new
        ### END SOLUTION
        k_ptrs += BLOCK_N * HS
        v_ptrs += BLOCK_N * HS
    # normalise: out (BLOCK_M, HS) = acc / l_i, and zeros for rows that saw no key
    ### BEGIN SOLUTION
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]  # (BLOCK_M, HS)
    ### END SOLUTION
    o_ptrs = Out + z * T * HS + offs_m[:, None] * HS + offs_d[None, :]  # (BLOCK_M, HS)
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=offs_m[:, None] < T)


def triton_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    config: dict | None = None,
) -> torch.Tensor:
    """FlashAttention-style forward pass in Triton; interpreted on CPU when there is no GPU.

    Args:
        q: ``(B, nh, T, hs)``; k, v: ``(B, nh, S, hs)``; hs a power of two in [16, 256];
            float16 or float32 (bfloat16 on a GPU only); on ``get_device()``.
        causal: bottom-right causal mask, as in ``tiled_attention``.
        config: block sizes and launch settings; defaults to ``triton_support.launch_config(q)``.

    Returns:
        ``(B, nh, T, hs)``, same dtype as ``q``.
    """
    config = config or triton_support.launch_config(q)
    triton_support.check_inputs(q, k, v, config)
    triton_support.check_kernel_mode(_attention_kernel)
    B, nh, T, hs = q.shape
    S = k.shape[-2]
    q3, k3, v3 = (t.reshape(B * nh, -1, hs).contiguous() for t in (q, k, v))  # (B*nh, T|S, hs)
    out = torch.empty_like(q3)  # (B*nh, T, hs)
    grid = (triton.cdiv(T, config["BLOCK_M"]), B * nh)
    _attention_kernel[grid](
        q3,
        k3,
        v3,
        out,
        T,
        S,
        LOG2E / math.sqrt(hs),
        HS=hs,
        BLOCK_M=config["BLOCK_M"],
        BLOCK_N=config["BLOCK_N"],
        CAUSAL=causal,
        EVEN_S=S % config["BLOCK_N"] == 0,
        num_warps=config["num_warps"],
        num_stages=config["num_stages"],
    )
    return out.reshape(B, nh, T, hs)  # (B*nh, T, hs) -> (B, nh, T, hs)


# %% nbgrader={"grade": false, "grade_id": "selfcheck_triton_attention_matches_sdpa", "locked": true, "schema_version": 3, "solution": false, "task": false}
"""Optional self-check, no points: triton_attention equals SDPA in float32 and float16, ragged T and S, S != T."""
if AUTOGRADING:
    print("Self-check skipped while grading: it carries no points.")
else:
    check_triton_values(triton_attention)

# %% nbgrader={"grade": false, "grade_id": "selfcheck_triton_attention_causal", "locked": true, "schema_version": 3, "solution": false, "task": false}
"""Optional self-check, no points: causal triton_attention equals SDPA with the mask j <= i + S - T."""
if AUTOGRADING:
    print("Self-check skipped while grading: it carries no points.")
else:
    check_triton_causal(triton_attention)

# %% [markdown]
# Your kernel against your `tiled_attention` and SDPA on one small input (in the interpreter this
# takes about a second; skipped while grading):

# %%
if triton_support.AVAILABLE and not AUTOGRADING:
    q, k, v = (torch.randn(1, 2, 70, 32, device=device) for _ in range(3))  # (B, nh, T|S, hs)
    ours = triton_attention(q, k, v, causal=True)
    sdpa_out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # S = T: same alignment
    print("triton vs SDPA: ", (ours - sdpa_out).abs().max().item())
    print("triton vs tiled:", (ours - tiled_attention(q, k, v, causal=True)).abs().max().item())
elif AUTOGRADING:
    print("Skipped while grading.")
else:
    print(triton_support.SKIP_MESSAGE)

# %% [markdown]
# ## 8 · On a GPU: timing it properly
#
# The rules of notebook 05 §5 still hold: warm up (on a GPU the first calls also pay for Triton's
# compilation and cuDNN's plan choice), repeat, take medians. A GPU adds two:
#
# 1. **Synchronise.** GPU work is *queued*: a call returns as soon as the kernel is scheduled, so
#    a stopwatch around it measures almost nothing. Call `torch.cuda.synchronize()` before reading
#    a clock, or better, record CUDA events before and after the call (`start.elapsed_time(end)`).
# 2. **Report a rate, not only a time**: attention's forward does $4 \cdot B \cdot nh \cdot T \cdot S \cdot hs$
#    floating-point operations (two matrix products, 2 FLOPs per multiply-add; half with a causal
#    mask). Dividing by the time gives TFLOP/s, which can be compared across sequence lengths and
#    with the hardware: NVIDIA's datasheets rate the H100 and H200 (SXM) at about 990 TFLOP/s of
#    dense fp16/bf16 tensor-core math.
#
# Memory: `torch.cuda.reset_peak_memory_stats()` before the call, `torch.cuda.max_memory_allocated()`
# after it. The timing code used below:

# %%
print(inspect.getsource(nb06_gpu_timing.cuda_time_ms))

# %% [markdown]
# The next cell runs only with a CUDA GPU (and never while grading). It measures your kernel, SDPA
# (PyTorch's choice of backend) and naive attention for growing T at hs = 64 in float16, with
# `B·T = 16384` tokens and `nh = 32`, and plots achieved TFLOP/s and peak memory.

# %%
if not HAS_CUDA or not triton_support.AVAILABLE or AUTOGRADING:
    print("Skipped: this section needs a CUDA GPU with Triton (and does not run while grading).")
else:
    methods = {
        "triton (yours)": triton_attention,
        "sdpa": nb06_gpu_timing.sdpa(),
        "naive": nb06_gpu_timing.naive_attention,
    }
    rows = nb06_gpu_timing.measure(
        methods, [512, 1024, 2048, 4096, 8192], hs=64, echo=lambda line: None
    )
    for row in rows:
        print(
            f"{row['method']:<15} T={row['T']:<5} {row['tflops']!s:>7} TFLOP/s  "
            f"{row['peak_mib']!s:>9} MiB  {row['note']}"
        )
    nb06_gpu_timing.plot(rows, f"{torch.cuda.get_device_name()}, fp16, hs=64")
    plt.show()

# %% [markdown]
# **What to expect.** No GPU was available when this notebook was written, so its own GPU figures
# are **still to be measured**; maintainers produce them with
# `python -m autograder.bench.gpu_attention --out <folder>` (a CSV and a PNG, under five minutes).
# Published figures to compare with: FlashAttention-2 reaches 50–73% of an A100's peak (Dao,
# 2023), FlashAttention-3 about 740 TFLOP/s in fp16 on an H100, 75% of peak (Shah et al., 2024),
# and Triton's own fused-attention tutorial reports roughly 110–170 TFLOP/s in fp16 for sequence lengths from 1K to
# 16K. The target for this kernel is at least half of SDPA's TFLOP/s at T = 4096, hs = 64, fp16.
# Naive attention should fall behind as T grows and run out of memory first; its peak memory grows
# with T², the fused kernels' linearly.
#
# ## 9 · In your own words
#
# Your `tiled_attention` does the same multiply-adds as naive attention, and on a CPU it was not
# faster. In four to six sentences, explain why the same idea, fused into a single GPU kernel,
# makes attention faster and able to handle much longer sequences. Say where the scores live,
# what has to travel to and from HBM, and what the running maximum and the rescaling are for.

# %% [markdown] nbgrader={"grade": true, "grade_id": "flash_attention_explained", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# Naive attention writes the whole (T, S) score matrix, and then the weights, to the GPU's large
# but comparatively slow HBM and reads them back, so its running time is dominated by memory
# traffic that grows with T·S, and its memory by the T² table. A fused kernel loads a block of
# queries once, streams blocks of keys and values through on-chip SRAM and registers, and only ever
# writes the (T, hs) output: the scores of a tile live on chip for a moment and are discarded.
# Because the softmax needs each row's maximum and sum over all keys, the kernel keeps a running
# maximum and sum per query and rescales what it accumulated so far by exp(m_old − m_new) whenever
# the maximum grows; the result is exact, not an approximation. The arithmetic is unchanged, but
# it now runs on tensor cores fed from fast memory, and the memory needed grows linearly in T
# instead of quadratically. On a CPU, my Python loop adds per-block overhead and gains little,
# because there is no comparable gap between a small, fast scratchpad and slow main memory that
# my code could exploit.

# %% [markdown]
# ## Summary
#
# - Pick the device once (`get_device()`), create tensors on it, keep inputs' dtype and device.
# - `F.scaled_dot_product_attention`'s fused kernels never store the `(T, S)` scores. It is one
#   name for several backends (optional): math and a fused flash kernel on a CPU; FlashAttention-2, memory-efficient, cuDNN and math on NVIDIA GPUs. Force or
#   exclude them with `sdpa_kernel([...])`.
# - Lower precision is faster and looser: compare float16 at ~1e-3, bfloat16 at ~1e-2, and
#   remember that float32 matmuls may run in TF32 on a GPU (always, for Triton's `tl.dot`).
# - Online softmax: a running maximum, a running sum and a rescaled accumulator give the exact
#   softmax-weighted sum one block of keys at a time, so the `(T, S)` table never exists.
# - The backward pass saves one log-sum-exp `L` per query instead of `P`, recomputes each tile's
#   `P = exp(S − L)`, and needs `D = rowsum(dO ∘ O)` for the softmax's correction:
#   `dS = P ∘ (dP − D)`; dQ accumulates over key blocks, dK and dV over query blocks.
# - A `torch.autograd.Function` joins the two: `forward` returns `o` and saves `(q, k, v, o, L)`,
#   `backward` returns one gradient per input; `gradcheck` judges it in float64, never float32.
# - (Optional) In Triton, a program owns a block of queries and streams key blocks through on-chip
#   memory; mask ragged edges, keep accumulators in float32, use exp2, and guard fully masked rows.
# - Time GPU code with synchronisation or events, after warm-up, as medians, and report TFLOP/s
#   and peak memory. Never trust a single run.
#
# **Next, notebook 07:** a small trained model, and what its heads actually do.
