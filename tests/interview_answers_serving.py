"""Right and wrong answers to the mock interview's problems from the notebook "Attention as it is
served" (the paged cache, speculative decoding), built on the course's right answers
(``tests/mistakes``) the way a codebase with each variant's contract writes them.
``interview_answers`` merges them into its ``ANSWERS`` and ``WRONG``.

Shape legend: ``B`` sequences, ``nh`` query heads, ``nkv`` key/value heads, ``hs`` head size,
``N`` rows, ``k`` drafts, ``V`` the vocabulary.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from mistakes import speculative

from autograder.checks import nb09_speculative as checks

# ------------------------------------------------------------------------------- paged cache


def paged_hnd(q, k_pool, v_pool, block_tables, seq_lens):
    """FlashInfer's HND pools (num_blocks, nkv, bs, hs): a sequence's blocks side by side."""
    bs = k_pool.shape[2]
    out = []
    for b, length in enumerate(seq_lens.tolist()):
        blocks = block_tables[b, : -(-length // bs)]
        k = k_pool[blocks].transpose(0, 1).flatten(1, 2)[:, :length]  # (nkv, L, hs)
        v = v_pool[blocks].transpose(0, 1).flatten(1, 2)[:, :length]
        out.append(F.scaled_dot_product_attention(q[b, :, None], k, v, enable_gqa=True)[:, 0])
    return torch.stack(out)


def paged_hnd_whole_block(q, k_pool, v_pool, block_tables, seq_lens):
    """Reads the last block whole, its unwritten slots included."""
    bs = k_pool.shape[2]
    out = []
    for b, length in enumerate(seq_lens.tolist()):
        blocks = block_tables[b, : -(-length // bs)]
        k = k_pool[blocks].transpose(0, 1).flatten(1, 2)  # (nkv, n · bs, hs)
        v = v_pool[blocks].transpose(0, 1).flatten(1, 2)
        out.append(F.scaled_dot_product_attention(q[b, :, None], k, v, enable_gqa=True)[:, 0])
    return torch.stack(out)


def paged_stacked(q, kv_pool, block_tables, seq_lens):
    """One pool (num_blocks, 2, bs, nkv, hs), keys at index 0."""
    bs = kv_pool.shape[2]
    out = []
    for b, length in enumerate(seq_lens.tolist()):
        kv = kv_pool[block_tables[b, : -(-length // bs)]]  # (n, 2, bs, nkv, hs)
        k, v = (kv[:, i].flatten(0, 1)[:length].transpose(0, 1) for i in (0, 1))  # (nkv, L, hs)
        out.append(F.scaled_dot_product_attention(q[b, :, None], k, v, enable_gqa=True)[:, 0])
    return torch.stack(out)


def append_hnd(k_pool, v_pool, block_table, seq_len, k_new, v_new, shift=0):
    bs = k_pool.shape[2]
    positions = torch.arange(seq_len, seq_len + k_new.shape[0]) + shift
    blocks, slots = block_table[positions // bs], positions % bs
    k_out, v_out = k_pool.clone(), v_pool.clone()
    k_out[blocks, :, slots], v_out[blocks, :, slots] = k_new, v_new  # (T, nkv, hs) each
    return k_out, v_out


def append_hnd_late(k_pool, v_pool, block_table, seq_len, k_new, v_new):
    return append_hnd(k_pool, v_pool, block_table, seq_len, k_new, v_new, shift=1)


# ----------------------------------------------------------------------- speculative decoding


def _inverse_cdf(dist, u) -> int:
    return int((dist.cumsum(0) <= u).sum().clamp(max=dist.shape[0] - 1))


def accept_one(draft_tokens, p_draft, p_target, uniforms):
    """One sequence, draft by draft, as a first version (and Hugging Face's batch of 1) goes."""
    k = draft_tokens.shape[0]
    for i in range(k):
        x = int(draft_tokens[i])
        if not float(uniforms[i]) < min(1.0, float(p_target[i, x] / p_draft[i, x])):
            residual = (p_target[i] - p_draft[i]).clamp(min=0)
            return i, _inverse_cdf(residual / residual.sum(), uniforms[k])
    return k, _inverse_cdf(p_target[k], uniforms[k])


def _output_ids(n, token, drafts):
    k = drafts.shape[1]
    ids = torch.full((drafts.shape[0], k + 1), -1, dtype=torch.long)
    ids[:, :k] = torch.where(torch.arange(k) < n[:, None], drafts, -1)
    return ids.scatter(1, n[:, None], token[:, None])


def accept_vllm_output(draft_tokens, p_draft, p_target, uniforms):
    """vLLM's rejection sampler, its ``output_token_ids`` with -1 past the next token."""
    n, token = speculative.sample_vllm(draft_tokens, p_draft, p_target, uniforms)
    return _output_ids(n, token, draft_tokens)


def accept_vllm_output_inverse(draft_tokens, p_draft, p_target, uniforms):
    n, token = checks.sample(draft_tokens, p_draft, p_target, uniforms, inverse=True)
    return _output_ids(n, token, draft_tokens)


def tree_additive(parents, prefix_len):
    allowed = speculative.tree_medusa(parents, prefix_len)
    return torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf"))


ANSWERS = {
    ("paged_attention", "hnd"): paged_hnd,
    ("paged_attention", "kv_stacked"): paged_stacked,
    ("paged_attention", "extension"): append_hnd,
    ("speculative_decoding", "one_sequence"): accept_one,
    ("speculative_decoding", "vllm_output"): accept_vllm_output,
    ("speculative_decoding", "extension"): tree_additive,
}

WRONG_EXTENSIONS = [  # (problem, answer, words of its diagnosis)
    ("paged_attention", append_hnd_late, "one position too late"),
    ("speculative_decoding", speculative.tree_medusa, "this one is additive"),
]

WRONG = [  # (problem, variant, answer, words of its diagnosis)
    ("paged_attention", "hnd", paged_hnd_whole_block, "reads the last block whole"),
    ("speculative_decoding", "vllm_output", accept_vllm_output_inverse, "q(x) / p(x)"),
]
