# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 07 · Exploring heads: what a trained model's heads do, measured
#
# **Time:** about 1.5 h (~50 min of exercises) · **Prerequisites:** 02
#
# Notebook 02 ended with some claims from the literature: heads specialise, not all heads matter
# equally, many can be removed, real heads have no clean labels, and more heads are not always
# better. This notebook tests each claim on a small transformer trained in this repository, on
# data generated here. Nothing is downloaded, and every claim comes with a number you can check.
#
# 1. **The model and its data**: two layers of four heads, trained on toy sequences where copying,
#    looking back one token and recalling a topic are all useful.
# 2. **Looking at every head**: eight attention maps for one input.
# 3. **Two head statistics** (exercises): how spread out a head's attention is (entropy), and how
#    much of it goes to the previous token.
# 4. **The head explorer**: pick a layer, a head and an input; switch heads off and watch the loss;
#    plug in your own `MultiHeadAttention` from notebook 02.
# 5. **Head importance** (exercise): how much the loss rises when one head is removed
#    (Michel et al., 2019).
# 6. **Pruning**: remove heads one after another, least useful first, and compare with random
#    orders.
# 7. **More heads at the same width**: what they buy, and where they stop helping.
#
# **How this notebook is graded.** Each exercise is a function you complete in place of
# `raise NotImplementedError()`. The locked cell after it checks your function and names the likely
# mistake when something is wrong. Hidden tests try more shapes and models when grading. One
# written answer is graded by a person.
# **Run › Run All Cells** goes on past failing test cells, and past examples that need an
# exercise you have not finished yet, so the plots and sliders further down run too; a failing
# test cell still counts as failed when the notebook is graded.
# In a terminal (**File › New › Terminal**), `python -m autograder check 07` grades the whole
# notebook, hidden tests included.
#
# ## Shape legend
#
# | symbol | meaning |
# |---|---|
# | `B` | batch size (number of sequences) |
# | `T` | number of queries (sequence length) |
# | `S` | number of keys (`S = T` in self-attention) |
# | `nh` | number of heads per layer |
# | `n_layers` | number of transformer blocks |
# | `V` | vocabulary size |
#
# Attention weights come as `(B, nh, T, S)`: for each sequence, head and query, one row of
# weights over the keys that sums to 1. A comment such as `# (B, nh, T)` gives the shape a line
# produces.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
import json
import os
import warnings

import matplotlib.pyplot as plt
import torch
from IPython.display import display

from autograder.checks.nb07_heads import (
    check_head_entropy_values,
    check_head_entropy_zero_weights,
    check_previous_token_score_patterns,
    check_previous_token_score_values,
)
from autograder.checks.nb07_importance import (
    check_head_importance_leaves_model_unchanged,
    check_head_importance_values,
)
from autograder.tools import nb07_head_plots, nb07_head_stats, plots, toy_data
from autograder.tools.modules import TorchMultiHeadAttention
from autograder.tools.nb07_explorer import HeadExplorer
from autograder.tools.tiny_model import DATA_DIR, load_checkpoint, load_metadata, swap_attention
from autograder.tools.train import evaluate, evaluation_batch, train

warnings.filterwarnings("ignore")
torch.manual_seed(0)
torch.set_num_threads(1)  # a tiny model runs many small operations: one thread is fastest
AUTOGRADING = os.environ.get("NBGRADER_EXECUTION") == "autograde"
# QUICK skips the slow demonstrations (training, pruning with many random orders): the autograder
# sets it, and so does the course's browser test.
QUICK = AUTOGRADING or os.environ.get("MHA_COURSE_QUICK") == "1"
# %matplotlib inline

# %% [markdown]
# ## 1 · The model and its data
#
# ### The data: three jobs in one stream
#
# Every sequence starts with `<s>` (beginning of sequence) and a **topic**, a capital letter from
# `A` to `F`. Then comes one of two kinds of sequence, half of the time each:
#
# - **repeat**: a pattern of 4 to 10 distinct letters, repeated to the end:
#   `<s> C w a q u w a q u w a q u ...`
# - **copy**: *filler* letters, a pattern, the same pattern again, more filler. Each topic owns
#   four filler letters (`A` owns `a b c d`, `B` owns `e f g h`, and so on), and somewhere in the
#   filler a `?` appears, always followed by the topic again:
#   `<s> B e f g e q r s t k l q r s t k l h e f ? B g e`
#
# The model is trained to predict the next token everywhere. Some next tokens are fully
# determined by what came before:
#
# - inside a repeated pattern: find where the current letter appeared before, and copy the letter
#   that followed it;
# - after `?`: the topic, which sits at position 1.
#
# Those positions are marked `^` below, and **accuracy** is measured on them only. Filler letters
# can only be guessed up to their topic (1 in 4), so the loss, which counts every position, never
# reaches zero.

# %%
demo = toy_data.make_batch(4, generator=3)
for tokens, scored in zip(demo.inputs, demo.scored, strict=True):
    print(" ".join(f"{t:>3}" for t in toy_data.decode(tokens)))
    print(" ".join("  ^" if s else "   " for s in scored), "\n")

# %% [markdown]
# ### The model
#
# A decoder-only transformer: token and position embeddings, **2 blocks** with **4 heads** each
# (`d_model = 64`, so head size 16), a final LayerNorm and a linear read-out to the 32 tokens. It is
# *attention-only*: there is no MLP in the blocks, so everything the model computes goes through
# its eight heads. Its attention modules are the course's `TorchMultiHeadAttention`: notebook 02's
# interface, computed by PyTorch. Section 4 swaps in your own.
#
# Each block is wrapped in a **residual connection**: the block does not replace its input, it
# adds its attention output to it, `x = x + attn(LayerNorm(x))`. The running sum `x` that flows
# from the embeddings through every block to the read-out is called the **residual stream**;
# every head writes into it, and every later head and the read-out read from it.
#
# ```
# embeddings ──x──┬──────────────────────(+)──x──┬──────────────────────(+)──x── LayerNorm → read-out
#                 └─ LayerNorm → attn ────┘        └─ LayerNorm → attn ────┘
#                      block 0 (4 heads)                 block 1 (4 heads)
# ```
#
# The committed checkpoint was made by `python -m autograder.tools.train` (fixed seed, one CPU
# thread). Its metadata records how:

# %%
model = load_checkpoint()
meta = load_metadata()
print("config:", meta["config"])
print(
    f"seed {meta['seed']}, {meta['steps']} steps of {meta['batch_size']} sequences, "
    f"{meta['train_cpu_seconds']:.0f} s of CPU time"
)
print("held-out accuracy (stored):", meta["eval"])
now = evaluate(model, evaluation_batch(**meta["eval_set"]))
print("held-out accuracy (now):   ", {k: round(v, 4) for k, v in now.items()})

# %% [markdown]
# ### Train one yourself (optional, about half a minute)
#
# The cell below trains a fresh model for 400 steps instead of 2,000, with a progress bar. It
# already copies well. The full run (`python -m autograder.tools.train` in a terminal: about two
# minutes on two CPU cores, 95 seconds of them training) reproduces the committed checkpoint. The
# rest of the notebook uses the committed model, so that everyone sees the same heads. The
# autograder skips this cell.

# %%
if not QUICK:
    quick = train(steps=400, eval_every=100)
    print({k: round(v, 3) for k, v in quick.evals[-1].items()}, f"in {quick.seconds:.0f} s")
    plots.plot_loss_curves(
        {"training loss (all positions)": quick.losses}, logy=False, title="400 steps from scratch"
    )
    plt.show()

# %% [markdown]
# ## 2 · Looking at every head
#
# Here is one "copy" sequence, and the attention of all eight heads. Row = query, column = key;
# every row sums to 1, and nothing lies above the diagonal because the model is causal (a token
# cannot look ahead).
#
# Before reading on, look for: a head that follows the diagonal just below the main one; heads
# whose weight jumps to "the letter after my previous occurrence" in the second copy of the
# pattern; heads that pile weight on the first column (`<s>`) or the second (the topic).

# %%
example = toy_data.encode(toy_data.example_texts()["copy"])  # (T,)
labels = toy_data.decode(example)
with torch.no_grad():
    _, example_weights = model(example[None])  # n_layers x (1, nh, T, T)
nb07_head_plots.draw_all_heads([w[0] for w in example_weights], labels)
plt.show()

# %% [markdown]
# To compare heads, and many sequences at once, we need numbers. Two are yours to write.
#
# ## 3 · Two head statistics
#
# ### Entropy: how spread out is a head's attention?
#
# One query's weights $p_1, \dots, p_S$ form a probability distribution over the keys. Its
# **entropy**, in nats (natural logarithm), is
#
# $$H(p) = -\sum_{k=1}^{S} p_k \ln p_k .$$
#
# It is 0 when all the weight is on one key, and $\ln S$ (its largest value) when the weight is
# spread evenly over $S$ keys. A term with $p_k = 0$ contributes nothing: $p \ln p \to 0$ as
# $p \to 0$, so by convention $0 \ln 0 = 0$. Zeros are common here: in a causal model, query $t$
# gives zero weight to every key after $t$.
#
# A head's entropy is the **mean over its queries** of their entropies. Causal heads have a
# built-in trend: query $t$ sees only $t+1$ keys, so its entropy is at most $\ln(t+1)$.
#
# ### Exercise 1 · `head_entropy`
#
# **Difficulty** ●○○ · **Importance** ★★☆ · **Time** ~10 min
#
# Given weights `(..., nh, T, S)` (any number of leading dimensions), return each head's mean
# entropy, shape `(..., nh)`, in nats, with the input's dtype.
#
# <details><summary>Hint 1: the two reductions</summary>
#
# Sum $-p \ln p$ over the keys (`dim=-1`), which leaves `(..., nh, T)`, then average over the
# queries (`dim=-1` again).
# </details>
#
# <details><summary>Hint 2: when a weight is exactly 0</summary>
#
# `torch.log(0.0)` is `-inf`, and `0 * -inf` is `nan` in floating point. `torch.special.entr(p)`
# computes $-p \ln p$ with the convention built in; `torch.xlogy(p, p)` computes $p \ln p$ the same
# way; or replace the terms where `p == 0` with `torch.where`.
# </details>


# %% nbgrader={"grade": false, "grade_id": "head_entropy", "locked": false, "schema_version": 3, "solution": true, "task": false}
def head_entropy(weights: torch.Tensor) -> torch.Tensor:
    """Mean over queries of the entropy (in nats) of each query's attention weights, per head.

    Args:
        weights: ``(..., nh, T, S)``; each row over the last dimension sums to 1 (or is all
            zeros for a query that may attend to nothing). Zero weights count as 0 · ln 0 = 0.

    Returns:
        ``(..., nh)``, same dtype as ``weights``.
    """
    ### BEGIN SOLUTION
    row_entropy = torch.special.entr(weights).sum(dim=-1)  # (..., nh, T): -Σ_k p ln p, 0 at p = 0
    return row_entropy.mean(dim=-1)  # (..., nh, T) -> (..., nh)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_head_entropy_values", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""head_entropy equals the mean over queries of each row's entropy in nats, for any leading dims."""
check_head_entropy_values(head_entropy)
### BEGIN HIDDEN TESTS
check_head_entropy_values(head_entropy, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_head_entropy_zero_weights", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""head_entropy counts 0·log 0 as 0: one-hot rows, causal weights and all-zero rows give no NaN."""
check_head_entropy_zero_weights(head_entropy)
### BEGIN HIDDEN TESTS
check_head_entropy_zero_weights(head_entropy, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### Previous-token score
#
# A **previous-token head** makes each query attend to the token just before it. Its score is the
# average, over queries $t = 1, \dots, T-1$, of the weight $w_{t,\,t-1}$: the entries just below
# the main diagonal of the `(T, T)` weight matrix. Query 0 is left out because it has no
# previous token. A perfect previous-token head scores 1; a head that attends evenly to all
# visible keys scores about $\frac{1}{T-1}\sum_{t=1}^{T-1} \frac{1}{t+1}$, small for long inputs.
#
# ```
#           keys →  0    1    2    3
#   query 0      [ w00   .    .    .  ]
#   query 1      [ w10  w11   .    .  ]     previous-token score
#   query 2      [ w20  w21  w22   .  ]  =  mean(w10, w21, w32)
#   query 3      [ w30  w31  w32  w33 ]
# ```
#
# ### Exercise 2 · `previous_token_score`
#
# **Difficulty** ●○○ · **Importance** ★★☆ · **Time** ~10 min
#
# Given self-attention weights `(..., nh, T, T)`, return each head's previous-token score,
# `(..., nh)`, with the input's dtype. Assume `T ≥ 2`.
#
# <details><summary>Hint 1</summary>
#
# `torch.diagonal(x, offset=..., dim1=-2, dim2=-1)` returns a diagonal of the last two dimensions
# as a new last dimension. Positive offsets are above the main diagonal, negative ones below it.
# </details>
#
# <details><summary>Hint 2</summary>
#
# The diagonal with `offset=-1` has exactly `T - 1` entries, one per query `1 … T-1`, so its mean
# is the score. Dividing by `T` would count query 0 as a zero.
# </details>


# %% nbgrader={"grade": false, "grade_id": "previous_token_score", "locked": false, "schema_version": 3, "solution": true, "task": false}
def previous_token_score(weights: torch.Tensor) -> torch.Tensor:
    """Mean over queries 1..T-1 of the weight each query puts on the key just before it.

    Args:
        weights: self-attention weights ``(..., nh, T, T)`` with ``T >= 2``.

    Returns:
        ``(..., nh)``, same dtype as ``weights``.
    """
    ### BEGIN SOLUTION
    below = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1)  # (..., nh, T-1): w[t, t-1]
    return below.mean(dim=-1)  # (..., nh, T-1) -> (..., nh)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_previous_token_score_values", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""previous_token_score equals the mean over queries 1..T-1 of w[t, t-1], for any leading dims."""
check_previous_token_score_values(previous_token_score)
### BEGIN HIDDEN TESTS
check_previous_token_score_values(previous_token_score, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_previous_token_score_patterns", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
"""A perfect previous-token head scores exactly 1; self and first-token heads score 0 and 1/(T-1)."""
check_previous_token_score_patterns(previous_token_score)
### BEGIN HIDDEN TESTS
check_previous_token_score_patterns(previous_token_score, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### Every head, measured
#
# Your two functions, plus four more statistics from `autograder.tools.nb07_head_stats`, on 512 held-out
# sequences:
#
# | statistic | what it measures |
# |---|---|
# | `entropy` | your `head_entropy` (nats) |
# | `previous` | your `previous_token_score` |
# | `first` | weight on key 0, the `<s>` token (an **attention sink**, below) |
# | `self` | weight a query puts on itself |
# | `topic` | weight on key 1, where the topic sits |
# | `induction` | weight on keys that *follow an earlier copy* of the query's token |

# %%
probe = evaluation_batch(512, seed=10_001)
with torch.no_grad():
    _, probe_weights = model(probe.inputs)  # n_layers x (B, nh, T, T)
table = nb07_head_stats.head_table(probe_weights, probe.inputs, head_entropy, previous_token_score)
print("head  " + "".join(f"{name:>10}" for name in table))
for layer in range(model.n_layers):
    for head in range(model.num_heads):
        values = "".join(f"{float(table[name][layer, head]):10.2f}" for name in table)
        print(f"L{layer}H{head}{values}   {nb07_head_stats.describe_head(table, layer, head)}")

# %% [markdown]
# What the numbers say about the committed model (your table shows the same values):
#
# - **Layer 0, head 1 is a previous-token head**: about 0.8 of its weight is on the previous
#   token, and its entropy is the lowest in layer 0.
# - **All four layer-1 heads are induction heads**: 0.67 to 0.79 of their weight sits on "the
#   token after an earlier copy of mine". Together with the previous-token head they form the
#   two-step circuit described by Olsson et al. (2022): layer 0 writes "my previous token was X"
#   into each position, and layer 1 looks for the position whose previous token equals the
#   current one, then copies what is there. No layer-0 head does induction (scores below 0.1),
#   because a single layer cannot compare a query with a key's *previous* token.
# - **Positional heads.** The previous-token head is positional in the relative sense (one step
#   back, whatever the token). Heads 2 and 3 of layer 0 put about half of their weight on
#   two fixed positions, 0 (`<s>`) and 1 (the topic): positional in the absolute sense.
# - **But the rest of layer 0 resists labels.** Head 3 puts 0.38 of its weight on `<s>` overall;
#   head 2 splits between the topic (0.32) and `<s>` (0.19); head 0 is the most spread out of all.
#
# One average per head hides a lot. The same head can do different things for different queries,
# which you can see by splitting its weight by the kind of query:

# %%
is_query = probe.inputs == toy_data.QUERY_ID  # (B, T): the '?' positions
is_filler = (probe.inputs < toy_data.N_LETTERS) & (
    probe.inputs // toy_data.FILLER_PER_TOPIC == probe.inputs[:, 1:2] - toy_data.N_LETTERS
)  # (B, T): letters owned by the sequence's topic
is_pattern = (probe.inputs < toy_data.N_LETTERS) & ~is_filler  # (B, T)
kinds = {"pattern letter": is_pattern, "filler letter": is_filler, "'?'": is_query}
print("weight on <s> | on the topic, for queries that are a ...")
print("head  " + "".join(f"{kind:>22}" for kind in kinds))
for layer in range(model.n_layers):
    for head in range(model.num_heads):
        w = probe_weights[layer][:, head]  # (B, T, T)
        cells = "".join(
            f"{w[..., 0][m].mean():>12.2f} | {w[..., 1][m].mean():<7.2f}" for m in kinds.values()
        )
        print(f"L{layer}H{head}{cells}")

# %% [markdown]
# Read the `'?'` column. After `?` the answer is the topic, so some head must fetch position 1:
# four heads (L0H0, L0H2, L1H1, L1H3) each put 0.2 to 0.3 of their weight on it. Yet three heads
# (L0H1, L1H0, L1H2) put almost **all** their weight on `<s>` there: the previous-token head and
# two induction heads have nothing to look up after `?`, and since a softmax must give its weight
# to *some* key, they park it on the first token. This is an **attention sink** (Xiao et al.,
# 2023, found the same on the first token of large language models).
#
# Also look at L0H3: on filler letters it reads the topic (0.44), which tells it which four letters
# can come next; on pattern letters it parks on `<s>` instead (0.43). One head, two behaviours.
# **A head's label depends on the input**, and a heatmap of a single sentence can mislead.
#
# ## 4 · The head explorer
#
# The explorer below shows one head at a time for any input. What it gives you:
#
# - **input**: pick an example or type tokens (`a`–`x`, `A`–`F`, `?`; spaces are ignored);
#   inputs longer than the model's 32 positions are cut;
# - **layer**, **head**, **view**: a heatmap, lines from each query to the keys it reads (thicker
#   = more weight), or both;
# - **Heads on/off**: click to remove heads from the model. The loss and accuracy on a held-out
#   batch and the table of statistics update at once (removing a layer-0 head also changes layer
#   1's patterns);
# - **Save PNG / Save SVG**: writes the current figure next to this notebook and says where.
#
# It uses your `head_entropy` and `previous_token_score` for the title and the table.
#
# ### Your own `MultiHeadAttention` inside the model
#
# Paste your class from notebook 02 into the next cell, in place of the line that names
# PyTorch's. `swap_attention` builds a copy of the model with your module in every block and the
# trained weights copied into it. If your module is right, nothing changes.

# %%
MultiHeadAttention = TorchMultiHeadAttention  # paste your notebook 02 class here instead

mine = swap_attention(model, MultiHeadAttention)
with torch.no_grad():
    difference = (mine(probe.inputs)[0] - model(probe.inputs)[0]).abs().max().item()
print(
    f"attention module: {type(mine.blocks[0].attn).__name__}; "
    f"largest logit difference from the committed model: {difference:.2e}"
)

# %%
if not AUTOGRADING:
    explorer = HeadExplorer(mine, entropy_fn=head_entropy, previous_fn=previous_token_score)
    display(explorer.widget)

# %% [markdown]
# Things to try:
#
# 1. Input "copy", layer 1: in the second copy of the pattern, the induction heads look one
#    position *past* the first copy of the current letter. Switch off L0H1 and look again.
# 2. Input "recall": which heads read the topic at each `?`, and which park on `<s>`?
# 3. Type a pattern that breaks the rules, such as `<s> A abcabcabd abc`. What do the induction
#    heads do when the pattern changes?
# 4. Input "no pattern, all filler": what is left for layer 1 to do?
#
# (If you see text like `VBox(children=...` instead of controls, the notebook is not connected to
# the widget extension: open it in JupyterLab, VS Code or Colab with `ipywidgets` installed.)
#
# ## 5 · Which heads matter? Importance by ablation
#
# A head can *look* specialised and still hardly matter. Michel et al. (2019) measure a head's
# importance by what the model loses without it. Multiply each head's output by a gate
# $\xi_h \in \{0, 1\}$ before the output projection,
#
# $$\mathrm{MHA}(x) = \sum_{h} \xi_h \,\mathrm{head}_h(x)\, W^O_h ,$$
#
# and define the **importance** of head $h$ as the increase of the loss when $\xi_h = 0$ and every
# other gate is 1:
#
# $$I_h = \mathcal{L}(\text{head } h \text{ removed}) - \mathcal{L}(\text{all heads}).$$
#
# The model implements the gates as a **head mask** of shape `(n_layers, nh)`:
#
# ```python
# mask = torch.ones(model.n_layers, model.num_heads)
# mask[1, 2] = 0.0                                   # remove layer 1, head 2
# model.loss(batch, head_mask=mask)                  # mean next-token cross-entropy, a scalar
# ```
#
# (`model.head_mask` is a buffer of ones used when no mask is passed; the explorer's on/off
# switches pass masks instead. Leave the buffer alone.)
#
# ### Exercise 3 · `head_importance`
#
# **Difficulty** ●●○ · **Importance** ★★★ · **Time** ~20 min
#
# Return the importance of every head, `(n_layers, nh)`: row = layer, column = head. Measure like a
# careful experimenter:
#
# - in **eval mode** (a model with dropout is random in training mode), and put the model back in
#   the mode it was in;
# - **without gradients** (`torch.no_grad()`): only forward passes are needed;
# - leave the model **exactly as you found it**: weights, mode, `head_mask` buffer.
#
# <details><summary>Hint 1: the loop</summary>
#
# Compute the loss of the full model once. Then for each `(layer, head)`, make a *fresh* mask of
# ones, set that one entry to 0, and store `model.loss(batch, head_mask=mask) - base`.
# </details>
#
# <details><summary>Hint 2: restoring the mode</summary>
#
# `was_training = model.training` before `model.eval()`; `model.train(was_training)` at the end.
# </details>


# %% nbgrader={"grade": false, "grade_id": "head_importance", "locked": false, "schema_version": 3, "solution": true, "task": false}
def head_importance(model, batch) -> torch.Tensor:
    """Loss increase when each head alone is removed (Michel et al., 2019).

    Args:
        model: a ``TinyTransformer``: ``model.n_layers``, ``model.num_heads`` and
            ``model.loss(batch, head_mask=mask)`` with ``mask`` of shape ``(n_layers, nh)``.
        batch: a ``toy_data.Batch`` of sequences to measure the loss on.

    Returns:
        ``(n_layers, nh)``: ``loss(head removed) - loss(all heads)`` per head, computed in eval mode
        without gradients; the model is left exactly as it was (mode, weights, head mask).
    """
    ### BEGIN SOLUTION
    was_training = model.training
    model.eval()  # dropout off: every loss below is deterministic
    importance = torch.zeros(model.n_layers, model.num_heads)  # (n_layers, nh)
    with torch.no_grad():
        base = model.loss(batch)
        for layer in range(model.n_layers):
            for head in range(model.num_heads):
                mask = torch.ones(model.n_layers, model.num_heads)  # fresh: one head off at a time
                mask[layer, head] = 0.0
                importance[layer, head] = model.loss(batch, head_mask=mask) - base
    model.train(was_training)
    return importance
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_head_importance_values", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
"""head_importance is loss(head removed) - loss(all heads) per head, shape (n_layers, nh)."""
check_head_importance_values(head_importance)
### BEGIN HIDDEN TESTS
check_head_importance_values(head_importance, seed=1, thorough=True)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_head_importance_leaves_model_unchanged", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
"""head_importance measures in eval mode without gradients and leaves mode, weights and mask as found."""
check_head_importance_leaves_model_unchanged(head_importance)
### BEGIN HIDDEN TESTS
check_head_importance_leaves_model_unchanged(head_importance, seed=1, thorough=True)
### END HIDDEN TESTS

# %% [markdown]
# ### The trained model's heads, ranked

# %%
importance_batch = evaluation_batch(512, seed=20_000)
importance = head_importance(model, importance_batch)  # (n_layers, nh)
nb07_head_plots.plot_head_grid(importance, "loss increase when the head alone is removed (nats)")
plt.show()
for rank, flat in enumerate(importance.flatten().argsort(descending=True).tolist()):
    layer, head = divmod(flat, model.num_heads)
    print(
        f"{rank + 1}. L{layer}H{head}: +{importance[layer, head]:.3f} nats   "
        f"({nb07_head_stats.describe_head(table, layer, head)})"
    )

# %% [markdown]
# One head dwarfs the others: removing the previous-token head L0H1 adds about 2.6 nats to the
# loss, almost nine times more than any other head. Each induction head alone costs only 0.13 to
# 0.20 nats, although induction is what the model is for. Why? There are four of them, doing the
# same job, so any three cover for the fourth. Importance measures what a head adds *given all the
# others*, which is a different question from "what does this head do?".
#
# The loss is also one number for several jobs. Split the damage by job instead: the accuracy on
# copied pattern letters and on recall (the topic after `?`), with each head removed alone, on the
# same 512 sequences (about a second):

# %%
full = evaluate(model, importance_batch)
print("removed  copy accuracy  recall accuracy")
print(f"none     {full['copy_accuracy']:13.3f}  {full['recall_accuracy']:15.3f}")
for layer in range(model.n_layers):
    for head in range(model.num_heads):
        mask = torch.ones(model.n_layers, model.num_heads)  # (n_layers, nh)
        mask[layer, head] = 0.0
        alone = evaluate(model, importance_batch, head_mask=mask)
        print(
            f"L{layer}H{head}     {alone['copy_accuracy']:13.3f}  {alone['recall_accuracy']:15.3f}"
        )

# %% [markdown]
# The jobs come apart. Without L1H0, copying still works on about 95% of the pattern letters, but
# recall falls from 100% to about 42%, as low as without the previous-token head, although after
# `?` L1H0 parks almost all its weight on `<s>`. Without L1H2, the reverse: copying drops to about
# 93% and recall does not move. Without the previous-token head L0H1, copying collapses too.
#
# To prune, Michel et al. use a cheaper estimate of $I_h$ built from gradients: the mean over
# examples of $|\partial \mathcal{L} / \partial \xi_h|$, how fast the loss would change if the
# gate moved a little. The mask accepts any float values, so the estimate takes a few lines here
# (one backward pass per sequence, on 64 sequences; skipped by the autograder):

# %%
if not QUICK:
    grad_batch = evaluation_batch(64, seed=20_000)
    estimate = torch.zeros(model.n_layers, model.num_heads)  # (n_layers, nh)
    for i in range(grad_batch.inputs.shape[0]):
        one = toy_data.Batch(*(t[i : i + 1] for t in grad_batch))  # one sequence: (1, T) each
        gate = torch.ones(model.n_layers, model.num_heads, requires_grad=True)  # (n_layers, nh)
        (grad,) = torch.autograd.grad(model.loss(one, head_mask=gate), gate)  # (n_layers, nh)
        estimate += grad.abs() / grad_batch.inputs.shape[0]
    for name, values in (("exact (ablation)", importance), ("mean |dL/d gate|", estimate)):
        top = divmod(int(values.argmax()), model.num_heads)
        print(
            f"{name:>17}: "
            + " ".join(f"{v:6.3f}" for v in values.flatten().tolist())
            + f"   largest: L{top[0]}H{top[1]}"
        )

# %% [markdown]
# On this model the estimate fails. All eight gradients are small and nearly equal, and the
# previous-token head, which the model cannot do without, does not stand out. A gradient describes
# a *small* move of the gate; removing a head moves it from 1 all the way to 0, and for a head the
# model relies on, the loss is far from linear over that range. The estimate is cheap and can rank
# heads well when each of many heads matters a little, but when one head carries a whole circuit,
# measure by removing it.
#
# ## 6 · Pruning: how many heads can go?
#
# Now remove heads **one after another**, keeping the earlier ones removed, in three orders: least
# important first (by your `head_importance`), most important first, and ten random orders. After
# each removal, measure accuracy on 512 held-out sequences. This takes a few seconds; the autograder
# skips it and shows the same study precomputed by `python -m autograder.tools.train` (stored in
# `autograder/tools/data/pruning.json`) instead.

# %%
stored = json.loads((DATA_DIR / "pruning.json").read_text())
if QUICK:
    study = stored
else:
    study = nb07_head_stats.pruning_study(model, evaluation_batch(512), importance, n_random=10)
nb07_head_plots.plot_pruning(study, "accuracy", "Removing heads from the trained model")
plt.show()
print("heads removed:          ", "  ".join(f"{n:5d}" for n in study["removed"]))
for name in ("least_important_first", "most_important_first"):
    print(f"{name:<24}", "  ".join(f"{a:5.3f}" for a in study[name]["accuracy"]))
random_mean = torch.tensor(study["random_accuracy"]).mean(0)
print(f"{'random (mean)':<24}", "  ".join(f"{a:5.3f}" for a in random_mean.tolist()))

# %%
live, saved = (torch.tensor(s["least_important_first"]["accuracy"]) for s in (study, stored))
print("agrees with the precomputed study (to 0.001):", torch.allclose(live, saved, atol=1e-3))

# %% [markdown]
# What the curves show:
#
# - **Most heads can go, if you pick them well.** With the three least important heads removed,
#   accuracy is still about 98%; removing heads in random order costs far more on average (about
#   70% after three). Removing the most important head first costs three quarters of the accuracy
#   at once. This is the pattern Michel et al. (2019) and Voita et al. (2019) report for real
#   translation and language models: a few specialised heads do most of the work, many others can be
#   pruned.
# - **Importance is not additive.** The fourth and fifth removals in the "least important" order
#   take the last two induction heads, and accuracy falls from 98% to 80%, then to 4%. Each
#   induction head looked cheap alone *because* the others were still there. This is why
#   careful pruning re-measures importance after each removal, and why "this head is
#   unimportant" always means "given the other heads".
#
# ### Written answer
#
# **2 points, graded by a person · ~10 min.** A colleague looks at the heatmaps and concludes:
# *"L1H2 is the induction head and L1H0 is useless: it just stares at `<s>`."* Using the numbers
# you measured in this notebook (statistics, importance, pruning), say in four to six sentences what
# is right and what is wrong in that conclusion, and how you would test it further. Write in the
# cell below (double-click it to edit). A strong answer:
#
# - quotes the statistics of all four layer-1 heads, not only L1H2's;
# - separates "where a head looks" from "what the model loses without it";
# - uses both kinds of removal: one head alone, and several together;
# - proposes a measurement that would settle the question.

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_head_labels", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# ### BEGIN SOLUTION
# **Model answer.** L1H2 does behave like an induction head (about three quarters of its weight goes
# to the token after an earlier copy of the current one), but so do the other three layer-1 heads:
# there is no single induction head, the job is shared, which is why removing any one of them costs
# little and removing all four destroys copying. L1H0 is not useless: it is an induction head on
# pattern letters and parks on `<s>` only after `?`, where there is nothing to copy. Removing it
# alone costs about 0.2 nats, more than L1H1 or L1H3, and it drops recall accuracy from 100% to
# about 42% while copying stays near 95%: recall needs it as much as it needs the previous-token
# head. Attending to `<s>` is not doing nothing: the head's output is still added to the residual
# stream. To test further: remove L1H0 only at the `?` positions and see whether recall alone falls,
# remove it together with the other induction heads, and compare its pattern on inputs with and
# without a repeated pattern.
# ### END SOLUTION

# %% [markdown]
# ## 7 · More heads at the same width
#
# "More heads is better" is a common misconception. At a fixed `d_model`, more heads means *smaller*
# heads: `hs = d_model / nh`. To measure the trade-off, `python -m autograder.tools.train --sweep`
# trains the same model (2 layers, `d_model = 64`, same data, seed and 2,000 steps) with nh = 1, 2,
# 4, 8, 16 and 64 heads, that is head sizes from 64 down to 1. Training the six models took about 25
# minutes of CPU time (14 of them for nh = 64), so the results were precomputed and stored in
# `autograder/tools/data/nh_sweep.json`. The **filler loss** is the loss on filler letters: ln 4 =
# 1.386 nats at best, reachable only by a model that knows the topic while it predicts.

# %%
sweep = json.loads((DATA_DIR / "nh_sweep.json").read_text())
nb07_head_plots.plot_nh_sweep(sweep)
plt.show()
print(" nh   hs  accuracy  recall   loss  filler loss  accuracy >= 0.95 at step  CPU seconds")
for nh, run in sweep["runs"].items():
    final = run["final"]
    reached = next((e["step"] for e in run["history"] if e["accuracy"] >= 0.95), "never")
    print(
        f"{nh:>3} {run['head_size']:>4} {final['accuracy']:9.3f} {final['recall_accuracy']:7.3f} "
        f"{final['loss']:6.3f} {final['filler_loss']:12.3f} {reached!s:>25} "
        f"{run['cpu_seconds']:12.0f}"
    )

# %% [markdown]
# What the sweep shows. Each setting was trained once, with one seed, so treat differences of a
# few hundredths of a nat as noise.
#
# - **The copying and recall jobs need few heads.** Every model from 1 to 8 heads ends at 99.9%
#   accuracy and passes 95% by step 300 or 400. With two layers, one head per layer is enough for
#   the induction circuit: a previous-token head below, an induction head above.
# - **What more heads buy is several things at once.** From 1 to 8 heads the filler loss falls
#   steadily, from 1.79 to 1.63 nats, and the total loss from 1.33 to 1.27. To predict a filler
#   letter well, a position must read the topic *and* keep track of its neighbours; a single
#   head has one softmax, so one weighting per query, and must choose.
# - **Where they stop helping.** With 16 heads of size 4, the model learns more slowly and ends
#   worse on everything: 93% accuracy after 2,000 steps, loss 1.48. A head of size 4 compares a
#   query with a key through 4 numbers, too few to single out one position sharply. Oddly, 64
#   heads of size 1 end better than 16 (99.2%, loss 1.32) but need 700 steps to reach 95%; with
#   one seed per setting we cannot tell a trend from luck there, only that both are worse than 4
#   or 8 heads.
# - **Heads are not free.** Every setting does the same number of multiply-adds, yet a training
#   step took 2.4 times more CPU time with 8 heads than with 1, and 12 times more with 64: many
#   tiny matrix products use the processor badly (notebook 05 measures why).
#
# Real models choose the head count with the width: head sizes of 64 or 128 are the usual choice,
# so more heads come with a wider model, not with smaller heads.
#
# ## Summary
#
# - **Entropy** (nats, $0 \ln 0 = 0$) says how concentrated a head is; the **previous-token score**
#   (queries $1 \dots T-1$, the diagonal below the main one) finds one common job.
# - In the trained model, heads do specialise: a previous-token head and four induction heads form
#   a copying circuit, and several heads park on `<s>` (an attention sink) when they have nothing
#   to do. But labels are approximate: the same head does different things for different queries.
# - **Importance by ablation** (Michel et al., 2019) ranks heads by the loss they save. One head is
#   essential; most can be removed one at a time at a small cost. Importance is measured given the
#   other heads, and it is not additive.
# - **Pruning** with importance keeps accuracy far longer than random pruning, until the last
#   members of a redundant group go.
# - **More heads at a fixed width** help only up to a point: past it, the heads become too small.
#
# **Interview answer, in one breath:** *"Do heads specialise? Some do, measurably: previous-token,
# induction and positional heads show up even in tiny models, and several heads attend to the first
# token when they have nothing to do. But many heads are redundant: removing one at a time barely
# hurts, so you can prune a large fraction, as Michel et al. and Voita et al. showed. Redundant
# heads are cheap alone and essential together, so importance has to be measured, not read off a
# heatmap."*
