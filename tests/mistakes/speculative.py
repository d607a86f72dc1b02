"""Learner implementations of notebook 09's speculative decoding: ``accept_greedy``,
``speculative_accept`` and ``tree_attention_mask``, written the way Hugging Face's assisted
generation, vLLM's rejection sampler and Medusa's tree buffers write them, and the classic
mistakes."""

from __future__ import annotations

import torch

from autograder.checks import nb09_speculative as checks

from . import Mistake, correct, stub

GREEDY = checks.check_accept_greedy
SAMPLE = checks.check_speculative_accept
TREE = checks.check_tree_attention_mask


# ------------------------------------------------------------------- accept_greedy


def greedy_hugging_face(draft_tokens, target_logits):
    """``_assisted_decoding``: the matches counted while no mismatch has been seen."""
    k = draft_tokens.shape[1]
    selected_tokens = target_logits.argmax(dim=-1)  # (N, k + 1)
    n_matches = ((~(draft_tokens == selected_tokens[:, :k])).cumsum(dim=-1) < 1).sum(dim=-1)
    next_token = selected_tokens.gather(-1, n_matches[:, None]).squeeze(-1)
    return n_matches, next_token


def greedy_first_mismatch(draft_tokens, target_logits):
    """The index of the first mismatch, found by argmax over a row padded with one more miss."""
    best = target_logits.argmax(-1)  # (N, k + 1)
    k = draft_tokens.shape[1]
    missed = torch.cat(
        [draft_tokens != best[:, :k], torch.ones_like(best[:, :1], dtype=torch.bool)], -1
    )
    n = missed.int().argmax(-1)  # the first True: argmax returns the first maximal index
    return n, torch.take_along_dim(best, n[:, None], dim=-1)[:, 0]


def _greedy_with(**how):
    def accept_greedy(draft_tokens, target_logits):
        return checks.greedy(draft_tokens, target_logits, **how)

    return accept_greedy


# ------------------------------------------------------------------- speculative_accept


def sample_vllm(draft_tokens, p_draft, p_target, uniforms):
    """vLLM's ``RejectionSampler``: capped ratios, the first rejection by ``max(1).indices``, the
    recovered distribution clamped at a tiny positive value and renormalised."""
    N, k, V = p_draft.shape
    draft_probs = p_draft.gather(-1, draft_tokens[..., None]).squeeze(-1)  # (N, k)
    target_probs = p_target[:, :k].gather(-1, draft_tokens[..., None]).squeeze(-1)
    capped_ratio = torch.minimum(target_probs / draft_probs, torch.ones_like(draft_probs))
    accepted = uniforms[:, :k] < capped_ratio
    rejected = torch.cat([accepted == 0, torch.ones_like(accepted[:, :1])], -1)  # (N, k + 1)
    limits = rejected.max(1).indices  # the first rejection, k when there is none
    difference = p_target[:, :k] - p_draft
    f = torch.clamp(difference, min=torch.finfo(p_draft.dtype).tiny)
    recovered_probs = f / torch.sum(f, dim=-1, keepdim=True)
    probs = torch.cat([recovered_probs, p_target[:, k:]], 1)  # (N, k + 1, V)
    chosen = probs.gather(1, limits[:, None, None].expand(N, 1, V)).squeeze(1)  # (N, V)
    cdf = chosen.cumsum(-1)
    token = torch.searchsorted(cdf, uniforms[:, k:], right=True)[:, 0].clamp(max=V - 1)
    return limits, token


def sample_hugging_face(draft_tokens, p_draft, p_target, uniforms):
    """``_speculative_sampling``: ``r <= p / q`` (no cap), matches counted with a cumsum of the
    rejections, ``p' = clamp(p - q, min=0)`` divided by its sum."""
    N, k, V = p_draft.shape
    q_i = p_draft.gather(-1, draft_tokens[..., None])[..., 0]
    p_i = p_target[:, :k].gather(-1, draft_tokens[..., None])[..., 0]
    is_accepted = uniforms[:, :k] <= p_i / q_i
    n_matches = ((~is_accepted).cumsum(dim=-1) < 1).sum(dim=-1)
    p_prime = torch.clamp(p_target[:, :k] - p_draft, min=0)
    p_prime = p_prime / p_prime.sum(-1, keepdim=True)
    p_prime = torch.cat([p_prime, p_target[:, -1:]], 1)
    dist = p_prime[torch.arange(N), n_matches]  # (N, V)
    below = dist.cumsum(-1) <= uniforms[:, -1:]
    return n_matches, below.sum(-1).clamp(max=V - 1)


def _sample_with(**how):
    def speculative_accept(draft_tokens, p_draft, p_target, uniforms):
        return checks.sample(draft_tokens, p_draft, p_target, uniforms, **how)

    return speculative_accept


# ------------------------------------------------------------------- tree_attention_mask


def tree_medusa(parents, prefix_len):
    """Medusa's ``generate_medusa_buffers``: each node's ancestors marked one by one, after an
    all-True block for the cache."""
    n = len(parents)
    tree_attn_mask = torch.eye(n, dtype=torch.bool)
    for i in range(n):
        ancestor = parents[i]
        while ancestor >= 0:
            tree_attn_mask[i, ancestor] = True
            ancestor = parents[ancestor]
    return torch.cat([torch.ones(n, prefix_len, dtype=torch.bool), tree_attn_mask], dim=1)


def tree_rows(parents, prefix_len):
    """Each row copies its parent's row and adds itself (parents come before children)."""
    n = len(parents)
    mask = torch.zeros(n, prefix_len + n, dtype=torch.bool)
    mask[:, :prefix_len] = True
    for i, parent in enumerate(parents):
        if parent >= 0:
            mask[i] = mask[parent]
        mask[i, prefix_len + i] = True
    return mask


def tree_closure(parents, prefix_len):
    """The transitive closure of "is the parent of" by repeated boolean products."""
    n = len(parents)
    up = torch.zeros(n, n)
    for i, parent in enumerate(parents):
        if parent >= 0:
            up[i, parent] = 1.0
    reach = torch.eye(n)
    for _ in range(n):
        reach = ((reach + reach @ up) > 0).float()
    return torch.cat([torch.ones(n, prefix_len, dtype=torch.bool), reach.bool()], dim=1)


def _tree_with(**how):
    def tree_attention_mask(parents, prefix_len):
        return checks.tree_mask(parents, prefix_len, **how)

    return tree_attention_mask


def _tree_float(parents, prefix_len):
    return checks.tree_mask(parents, prefix_len).float()


def _tree_no_prefix_columns(parents, prefix_len):
    return checks.tree_mask(parents, 0)


CORRECT = [
    *correct(
        [GREEDY], {"Hugging Face": greedy_hugging_face, "first mismatch": greedy_first_mismatch}
    ),
    *correct([SAMPLE], {"vLLM": sample_vllm, "Hugging Face": sample_hugging_face}),
    *correct([TREE], {"Medusa": tree_medusa, "parent's row": tree_rows, "closure": tree_closure}),
]
MISTAKES = [
    Mistake("greedy: past a mismatch", _greedy_with(all_matches=True), GREEDY, "first mismatch"),
    Mistake("greedy: rows shifted", _greedy_with(shift=True), GREEDY, "row i + 1"),
    Mistake("greedy: bonus always", _greedy_with(row="last"), GREEDY, "from the last row"),
    Mistake("greedy: row n - 1", _greedy_with(row="before"), GREEDY, "one row early"),
    Mistake("sample: q / p", _sample_with(inverse=True), SAMPLE, "q(x) / p(x)"),
    Mistake("sample: not clipped", _sample_with(unclipped=True), SAMPLE, "without clipping"),
    Mistake("sample: not renormalised", _sample_with(unnormalised=True), SAMPLE, "renormalise"),
    Mistake("sample: correction from p", _sample_with(from_p=True), SAMPLE, "from the target's p"),
    Mistake("sample: past a rejection", _sample_with(all_accepts=True), SAMPLE, "first rejection"),
    Mistake("sample: row after", _sample_with(shift=True), SAMPLE, "row after the first"),
    Mistake("tree: causal", _tree_with(causal=True), TREE, "plain causal mask"),
    Mistake("tree: siblings", _tree_with(siblings=True), TREE, "its siblings"),
    Mistake("tree: parent only", _tree_with(parent_only=True), TREE, "only its parent"),
    Mistake("tree: no self", _tree_with(no_self=True), TREE, "the node itself"),
    Mistake("tree: no prefix", _tree_with(no_prefix=True), TREE, "cached prefix"),
    Mistake("tree: float", _tree_float, TREE, "must be bool"),
    Mistake("tree: no prefix columns", _tree_no_prefix_columns, TREE, "add the prefix"),
]
STUBS = [(GREEDY, stub), (SAMPLE, stub), (TREE, stub)]
REPLAY = [GREEDY, SAMPLE, TREE]
