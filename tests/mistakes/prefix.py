"""Learner implementations of notebook 09's prefix caching: ``block_hashes`` and ``cow_append``,
written the way vLLM's prefix cache and block manager write them, and the classic mistakes."""

from __future__ import annotations

import torch

from autograder.checks import nb09_prefix as checks

from . import Mistake, correct, stub

HASHES = checks.check_block_hashes
COW = checks.check_cow_append


# ------------------------------------------------------------------- block_hashes


def hashes_parent_tuple(token_ids, bs):
    """The notebook's: ``hash((parent, tuple(block)))``, the first block's parent 0."""
    out, parent = [], 0
    for i in range(len(token_ids) // bs):
        parent = hash((parent, tuple(token_ids[i * bs : (i + 1) * bs])))
        out.append(parent)
    return out


def hashes_vllm_v0(token_ids, bs):
    """vLLM v0's ``PrefixCachingBlock.hash_block_tokens``: ``hash((is_first_block,
    prev_block_hash, *cur_block_token_ids))``."""
    hashes, prev = [], None
    for start in range(0, len(token_ids) - bs + 1, bs):
        prev = hash((prev is None, prev, *token_ids[start : start + bs]))
        hashes.append(prev)
    return hashes


def hashes_whole_prefix(token_ids, bs):
    """Hash the whole prefix up to each block: the same properties, quadratic work."""
    return [hash(tuple(token_ids[: (i + 1) * bs])) for i in range(len(token_ids) // bs)]


def _hashes_partial(token_ids, bs):
    out, parent = [], 0
    for i in range(-(-len(token_ids) // bs)):
        parent = hash((parent, tuple(token_ids[i * bs : (i + 1) * bs])))
        out.append(parent)
    return out


def _hashes_unchained(token_ids, bs):
    return [hash(tuple(token_ids[i * bs : (i + 1) * bs])) for i in range(len(token_ids) // bs)]


def _hashes_by_position(token_ids, bs):
    return [hash((i, tuple(token_ids[i * bs : (i + 1) * bs]))) for i in range(len(token_ids) // bs)]


def _hashes_parent_tokens(token_ids, bs):
    """Chains the parent's tokens instead of its hash: a change reaches one block further only."""
    out, parent = [], ()
    for i in range(len(token_ids) // bs):
        block = tuple(token_ids[i * bs : (i + 1) * bs])
        out.append(hash((parent, block)))
        parent = block
    return out


def _hashes_sum(token_ids, bs):
    out, parent = [], 0
    for i in range(len(token_ids) // bs):
        parent = hash((parent, sum(token_ids[i * bs : (i + 1) * bs])))
        out.append(parent)
    return out


def _hashes_short_slice(token_ids, bs):
    out, parent = [], 0
    for i in range(len(token_ids) // bs):
        parent = hash((parent, tuple(token_ids[i * bs : (i + 1) * bs - 1])))
        out.append(parent)
    return out


def _hashes_of_suffix(token_ids, bs):
    """Each block chained with everything after it: the length leaks into every hash."""
    full = len(token_ids) // bs
    return [hash(tuple(token_ids[i * bs :])) for i in range(full)]


# ------------------------------------------------------------------- cow_append


def _free(ref_counts) -> int:
    return int((ref_counts == 0).nonzero()[0])


def cow_solution(k_pool, v_pool, ref_counts, block_table, seq_len, k_new, v_new):
    """The notebook's: the lowest free block, copied whole."""
    bs = k_pool.shape[1]
    k_out, v_out = k_pool.clone(), v_pool.clone()
    refs, table = ref_counts.clone(), block_table.clone()
    i, slot = divmod(seq_len, bs)
    if slot == 0:
        new = _free(refs)
        refs[new] = 1
        table = torch.cat([table, torch.tensor([new])])
    elif refs[table[i]] > 1:
        old, new = int(table[i]), _free(refs)
        k_out[new], v_out[new] = k_out[old], v_out[old]
        refs[old] -= 1
        refs[new] = 1
        table[i] = new
    k_out[table[i], slot], v_out[table[i], slot] = k_new, v_new
    return k_out, v_out, refs, table


def cow_vllm_free_list(k_pool, v_pool, ref_counts, block_table, seq_len, k_new, v_new):
    """vLLM's block manager: a free list popped from its end, ``append_slots`` then the
    copy-on-write it asks the cache engine for (``copy_blocks``: the first ``slot`` slots)."""
    block_size = k_pool.shape[1]
    key_cache, value_cache = k_pool.clone(), v_pool.clone()
    refcounts, block_ids = ref_counts.clone(), block_table.tolist()
    free_blocks = [b for b in range(refcounts.shape[0]) if refcounts[b] == 0]
    if len(block_ids) * block_size == seq_len:
        block_ids.append(free_blocks.pop())
        refcounts[block_ids[-1]] += 1
    elif refcounts[block_ids[-1]] > 1:
        src, dst = block_ids[-1], free_blocks.pop()
        offset = seq_len % block_size
        key_cache[dst, :offset] = key_cache[src, :offset]
        value_cache[dst, :offset] = value_cache[src, :offset]
        refcounts[src] -= 1
        refcounts[dst] += 1
        block_ids[-1] = dst
    slot_mapping = block_ids[seq_len // block_size] * block_size + seq_len % block_size
    key_cache.view(-1, *k_pool.shape[2:])[slot_mapping] = k_new
    value_cache.view(-1, *v_pool.shape[2:])[slot_mapping] = v_new
    return key_cache, value_cache, refcounts, torch.tensor(block_ids)


def _cow_with(**how):
    """The solution with one step done wrong: ``copy`` (never, or always), ``keep`` (the old
    contents not copied), ``decrement``, ``new_ref``, ``grow`` (a new block when full),
    ``pick`` (how a "free" block is chosen)."""

    def cow_append(k_pool, v_pool, ref_counts, block_table, seq_len, k_new, v_new):
        bs = k_pool.shape[1]
        k_out, v_out = k_pool.clone(), v_pool.clone()
        refs, table = ref_counts.clone(), block_table.clone()
        pick = how.get("pick", _pick_lowest)
        i, slot = divmod(seq_len, bs)
        if slot == 0 and how.get("grow", True):
            new = pick(refs, table)
            refs[new] = how.get("new_ref", 1)
            table = torch.cat([table, torch.tensor([new])])
        elif slot == 0:
            i, slot = len(table) - 1, seq_len % bs
        elif {"never": False, "always": True}.get(how.get("copy"), bool(refs[table[i]] > 1)):
            old, new = int(table[i]), pick(refs, table)
            if how.get("keep", True):
                k_out[new], v_out[new] = k_out[old], v_out[old]
            refs[old] -= how.get("decrement", 1)
            refs[new] = how.get("new_ref", 1)
            table[i] = new
        k_out[table[i], slot], v_out[table[i], slot] = k_new, v_new
        return k_out, v_out, refs, table

    return cow_append


def _pick_lowest(refs, table):
    return _free(refs)


def _pick_after_max(refs, table):
    return int(table.max()) + 1 if int(table.max()) + 1 < refs.shape[0] else 0


def _cow_in_place(k_pool, v_pool, ref_counts, block_table, seq_len, k_new, v_new):
    out = cow_solution(k_pool, v_pool, ref_counts, block_table, seq_len, k_new, v_new)
    k_pool.copy_(out[0])
    v_pool.copy_(out[1])
    return (k_pool, v_pool, *out[2:])


CORRECT = [
    *correct(
        [HASHES],
        {
            "parent tuple (notebook)": hashes_parent_tuple,
            "vLLM v0": hashes_vllm_v0,
            "whole prefix": hashes_whole_prefix,
        },
    ),
    *correct([COW], {"notebook": cow_solution, "vLLM free list": cow_vllm_free_list}),
]
MISTAKES = [
    Mistake("hashes: partial block", _hashes_partial, HASHES, "partial block a hash"),
    Mistake("hashes: not chained", _hashes_unchained, HASHES, "not chained"),
    Mistake("hashes: position, not parent", _hashes_by_position, HASHES, "not chained"),
    Mistake("hashes: parent's tokens", _hashes_parent_tokens, HASHES, "not chained"),
    Mistake("hashes: sum of tokens", _hashes_sum, HASHES, "another order"),
    Mistake("hashes: short slice", _hashes_short_slice, HASHES, "hash every token"),
    Mistake("hashes: suffix", _hashes_of_suffix, HASHES, "other tokens follow"),
    Mistake("cow: never copies", _cow_with(copy="never"), COW, "copy-on-write"),
    Mistake("cow: copies unshared", _cow_with(copy="always"), COW, "only this sequence holds"),
    Mistake("cow: copy not filled", _cow_with(keep=False), COW, "earlier tokens"),
    Mistake("cow: no decrement", _cow_with(decrement=0), COW, "decrement"),
    Mistake("cow: new ref 0", _cow_with(new_ref=0), COW, "ref count 0"),
    Mistake("cow: no new block", _cow_with(grow=False), COW, "opens no new block"),
    Mistake("cow: block after max", _cow_with(pick=_pick_after_max), COW, "table(s) hold"),
    Mistake("cow: in place", _cow_in_place, COW, "changed its input in place"),
]
STUBS = [(HASHES, stub), (COW, stub)]
REPLAY = [COW]
