"""Problems from the notebook "Attention as it is served": attention over a paged KV cache, and
speculative decoding's verification (the rejection-sampling rule, then a tree of drafts).

Shape legend: ``B`` sequences, ``nh`` query heads, ``nkv`` key/value heads, ``hs`` head size,
``bs`` the block size, ``T`` new tokens; ``N`` rows, ``k`` drafts, ``V`` the vocabulary, ``n``
nodes of a draft tree, ``P`` cached positions.

Each variant hands the course's checks (:mod:`autograder.checks.nb09_paged`,
:mod:`autograder.checks.nb09_speculative`) the candidate's function through an adapter: another
pool layout (FlashInfer's), one stacked pool, one sequence at a time, vLLM's output with ``-1``
for the rejected positions, an additive mask. The notebook is named by its title: its number is
about to change.
"""

from __future__ import annotations

import torch

from autograder.checks import nb09_paged as paged
from autograder.checks import nb09_speculative as speculative

from .task import Problem, Task, Variant, course_check, fail, layout_moved, one_tensor, tensors

SERVED = "the notebook “Attention as it is served”"

# ----------------------------------------------------------------------------- paged attention


def _hnd_attention(fn):
    """The check's pools ``(num_blocks, bs, nkv, hs)`` in FlashInfer's HND layout."""

    def paged_attention(q, k_pool, v_pool, block_tables, seq_lens):
        return fn(q, k_pool.transpose(1, 2), v_pool.transpose(1, 2), block_tables, seq_lens)

    return paged_attention


def _stacked_attention(fn):
    """The check's two pools as one ``(num_blocks, 2, bs, nkv, hs)``, keys first."""

    def paged_attention(q, k_pool, v_pool, block_tables, seq_lens):
        return fn(q, torch.stack((k_pool, v_pool), dim=1), block_tables, seq_lens)

    return paged_attention


def _hnd_append(fn):
    """``paged_append`` on HND pools, its new pools turned back into the check's layout."""

    def paged_append(k_pool, v_pool, block_table, seq_len, k_new, v_new):
        out = fn(k_pool.transpose(1, 2), v_pool.transpose(1, 2), block_table, seq_len, k_new, v_new)
        keys, values = tensors(out, paged.APPEND, ("k_pool", "v_pool"))
        if keys.dim() != 4 or values.dim() != 4:
            fail(f"`{paged.APPEND}` should return the two pools, each (num_blocks, nkv, bs, hs).")
        return keys.transpose(1, 2), values.transpose(1, 2)

    return paged_append


_HND_SIZE = (
    (r"block_size is k_pool\.shape\[1\]", "block_size is k_pool.shape[2]"),
    (r"the pools are \(num_blocks, block_size, nkv, hs\)", "the pools are HND here"),
)

_PAGED = (
    "Decoding over a paged KV cache, as vLLM and FlashInfer keep it: a pool of fixed-size blocks "
    "shared by all sequences. `q` (B, nh, hs) holds each sequence's one new query, whose key and "
    "value are already in the pool; `block_tables` (B, max_blocks) lists each sequence's blocks "
    "in order (entries past its own belong to other sequences), so position p lives in block "
    "`block_tables[b, p // bs]`, slot `p % bs`; `seq_lens` (B,) counts each sequence's positions, "
    "the new one included. GQA: query head h reads key head h // (nh // nkv). Return (B, nh, hs), "
    "each query attending to its sequence's positions exactly as over a contiguous cache."
)

PAGED_ATTENTION = Problem(
    "paged_attention",
    "Attention over a paged KV cache",
    f"{SERVED}, §1",
    "Attend from each sequence's new query over its cache, read through a block table.",
    (
        Variant(
            "hnd",
            layout_moved(
                Task(
                    paged.ATTEND,
                    "def paged_attention(q, k_pool, v_pool, block_tables, seq_lens):",
                    f"{_PAGED} The pools are in FlashInfer's **HND** layout, `k_pool` and "
                    "`v_pool` each (num_blocks, nkv, bs, hs).",
                    (course_check(paged.check_paged_attention, _hnd_attention),),
                    (paged.ATTEND,),
                    replacements=_HND_SIZE,
                )
            ),
        ),
        Variant(
            "kv_stacked",
            layout_moved(
                Task(
                    paged.ATTEND,
                    "def paged_attention(q, kv_pool, block_tables, seq_lens):",
                    f"{_PAGED} Keys and values share **one** pool `kv_pool` (num_blocks, 2, bs, "
                    "nkv, hs), keys at index 0 of dimension 1 (FlashInfer's single-tensor cache).",
                    (course_check(paged.check_paged_attention, _stacked_attention),),
                    (paged.ATTEND,),
                )
            ),
        ),
    ),
    layout_moved(
        Task(
            paged.APPEND,
            "def paged_append(k_pool, v_pool, block_table, seq_len, k_new, v_new):",
            "Now write into the same HND pools (num_blocks, nkv, bs, hs): one sequence's "
            "`block_table` (1-D), the `seq_len` positions it holds already, and `k_new`, `v_new` "
            "(T, nkv, hs) for positions seq_len … seq_len + T − 1. Return new pools `(k_pool, "
            "v_pool)` with those positions written and every other slot unchanged; leave the "
            "inputs as they are.",
            (course_check(paged.check_paged_append, _hnd_append),),
            (paged.APPEND,),
            replacements=_HND_SIZE,
        )
    ),
    ("paged_block_size", "prefix_caching"),
    written=("paged_cache",),
    numeric=("paged_blocks_fit",),
    box_minutes=20,
)

# ------------------------------------------------------------------------ speculative decoding


def _row_by_row(fn):
    """The check's batch, one sequence (row) at a time; a row's answer may be ints."""

    def speculative_accept(drafts, p_draft, p_target, uniforms):
        counts, tokens = [], []
        for row in zip(drafts, p_draft, p_target, uniforms, strict=True):
            out = fn(*row)
            if not isinstance(out, tuple | list) or len(out) != 2:
                fail(
                    f"`{speculative.SAMPLE}` should return the pair (n_accepted, next_token) for "
                    f"one sequence, but it returned {type(out).__name__}."
                )
            counts.append(torch.as_tensor(out[0]).long().reshape(()))
            tokens.append(torch.as_tensor(out[1]).long().reshape(()))
        return torch.stack(counts), torch.stack(tokens)

    return speculative_accept


def _vllm_output(fn):
    """``output_token_ids (N, k + 1)`` read back as ``(n_accepted, next_token)``, once its
    accepted prefix is checked to be the drafts."""

    def speculative_accept(drafts, p_draft, p_target, uniforms):
        out = one_tensor(fn(drafts, p_draft, p_target, uniforms), speculative.SAMPLE, "the ids")
        N, k = drafts.shape
        if tuple(out.shape) != (N, k + 1) or out.is_floating_point():
            fail(
                f"`{speculative.SAMPLE}` should return integer ids of shape {(N, k + 1)}, one row "
                f"per sequence, but it returned {tuple(out.shape)} {out.dtype}."
            )
        emitted = (out >= 0).long()
        n = emitted.sum(-1) - 1  # (N,): the emitted tokens but the last are accepted drafts
        prefix = torch.arange(k + 1) < n[:, None]  # (N, k + 1)
        if (emitted.cumprod(-1) != emitted).any() or (n < 0).any():
            fail(
                f"`{speculative.SAMPLE}` should emit at least one id per row, then only -1: the "
                "accepted drafts, the next token, then -1 for every rejected position."
            )
        if (out[:, :k][prefix[:, :k]] != drafts[prefix[:, :k]]).any():
            fail(
                f"`{speculative.SAMPLE}`'s rows must begin with the accepted drafts themselves: "
                "a row's first n ids are draft_tokens[b, :n]."
            )
        return n, out.gather(-1, n[:, None])[:, 0]

    return speculative_accept


def _additive_tree(fn):
    """An additive float mask (0 where a node may attend, -inf elsewhere) as the check's bool."""

    def tree_attention_mask(parents, prefix_len):
        out = one_tensor(fn(parents, prefix_len), speculative.TREE, "the mask")
        if not out.is_floating_point():
            fail(
                f"`{speculative.TREE}` returned a {str(out.dtype).removeprefix('torch.')} mask: "
                "this one is additive, a float tensor with 0 where a node may attend and -inf "
                "elsewhere."
            )
        if not ((out == 0) | (out == float("-inf"))).all():
            fail(
                f"`{speculative.TREE}` should hold only 0 (may attend) and -inf (blocked): an "
                "additive mask is added to the scores before the softmax."
            )
        return out == 0

    return tree_attention_mask


_SPECULATIVE = (
    "Speculative sampling's verification. A draft model proposed `k` tokens, draft i drawn from "
    "its probabilities q = `p_draft[..., i, :]`; one target pass gave `p_target` with k + 1 "
    "rows, row i its distribution p for draft i, row k the token after the last draft. Accept "
    "draft i (x) while `uniforms[..., i] < min(1, p(x) / q(x))`, counting only the leading "
    "acceptances; then draw the next token with `u = uniforms[..., k]` by inverse CDF (the "
    "smallest token j whose cumulative probability exceeds u, the last if none) from "
    "norm(max(0, p − q)) of the first rejected row, or from `p_target`'s row k when all k were "
    "accepted."
)

SPECULATIVE = Problem(
    "speculative_decoding",
    "Speculative decoding: verify the drafts",
    f"{SERVED}, §6",
    "Decide which drafted tokens to keep so that the output follows the target model exactly.",
    (
        Variant(
            "one_sequence",
            layout_moved(
                Task(
                    speculative.SAMPLE,
                    "def speculative_accept(draft_tokens, p_draft, p_target, uniforms):",
                    f"{_SPECULATIVE} **One sequence**: `draft_tokens` (k,), `p_draft` (k, V), "
                    "`p_target` (k + 1, V), `uniforms` (k + 1,). Return `(n_accepted, "
                    "next_token)`, two ints (or 0-d tensors).",
                    (course_check(speculative.check_speculative_accept, _row_by_row),),
                    (speculative.SAMPLE,),
                )
            ),
        ),
        Variant(
            "vllm_output",
            Task(
                speculative.SAMPLE,
                "def speculative_accept(draft_tokens, p_draft, p_target, uniforms):",
                f"{_SPECULATIVE} A batch of N sequences: `draft_tokens` (N, k), `p_draft` (N, "
                "k, V), `p_target` (N, k + 1, V), `uniforms` (N, k + 1). Return vLLM's "
                "`output_token_ids` (N, k + 1), long: each row's accepted drafts, then the "
                "next token, then -1 in every position left.",
                (course_check(speculative.check_speculative_accept, _vllm_output),),
                (speculative.SAMPLE,),
            ),
        ),
    ),
    Task(
        speculative.TREE,
        "def tree_attention_mask(parents, prefix_len):",
        "Now verify a tree of drafts in one pass (Medusa, EAGLE). The n nodes are flattened, a "
        "parent before its children: `parents` is a list of ints, `parents[i]` the index of "
        "node i's parent, -1 for a root. They are fed as queries after `prefix_len` cached "
        "positions. Return the **additive** float mask (n, prefix_len + n): 0 where node i may "
        "attend (every cached position, and the nodes on its path from the root, itself "
        "included), -inf elsewhere.",
        (course_check(speculative.check_tree_attention_mask, _additive_tree),),
        (speculative.TREE,),
    ),
    ("speculative_rule", "chunked_prefill"),
    written=("speculative_exact",),
    numeric=("speculative_tokens",),
    box_minutes=25,
)
