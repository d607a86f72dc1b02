"""Learner implementations of notebook 09's paged KV cache: ``paged_append`` and
``paged_attention``, written the way vLLM's reference code and a plain gather write them, and the
classic mistakes."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from autograder.checks import nb09_paged as checks

from . import Mistake, correct, stub

APPEND = checks.check_paged_append
ATTEND = checks.check_paged_attention


# ------------------------------------------------------------------- paged_append


def append_slot_mapping(k_pool, v_pool, block_table, seq_len, k_new, v_new):
    """vLLM's ``reshape_and_cache``: a flat slot per token, block * block_size + offset."""
    num_blocks, block_size = k_pool.shape[:2]
    positions = torch.arange(seq_len, seq_len + k_new.shape[0])
    slot_mapping = block_table[positions // block_size] * block_size + positions % block_size
    k_out, v_out = k_pool.clone(), v_pool.clone()
    k_out.view(num_blocks * block_size, *k_pool.shape[2:])[slot_mapping] = k_new
    v_out.view(num_blocks * block_size, *v_pool.shape[2:])[slot_mapping] = v_new
    return k_out, v_out


def append_loop(k_pool, v_pool, block_table, seq_len, k_new, v_new):
    """One token at a time, as a first version would."""
    block_size = k_pool.shape[1]
    k_out, v_out = k_pool.clone(), v_pool.clone()
    for t in range(k_new.shape[0]):
        p = seq_len + t
        block = int(block_table[p // block_size])
        k_out[block, p % block_size] = k_new[t]
        v_out[block, p % block_size] = v_new[t]
    return k_out, v_out


def _append_with(**how):
    def paged_append(k_pool, v_pool, block_table, seq_len, k_new, v_new):
        return checks.write(k_pool, v_pool, block_table, seq_len, k_new, v_new, **how)

    return paged_append


def _append_in_place(k_pool, v_pool, block_table, seq_len, k_new, v_new):
    block_size = k_pool.shape[1]
    positions = torch.arange(seq_len, seq_len + k_new.shape[0])
    blocks, slots = block_table[positions // block_size], positions % block_size
    k_pool[blocks, slots], v_pool[blocks, slots] = k_new, v_new
    return k_pool, v_pool


def _append_size_swapped(k_pool, v_pool, block_table, seq_len, k_new, v_new):
    block_size = k_pool.shape[0]  # num_blocks, taken for the block size
    positions = torch.arange(seq_len, seq_len + k_new.shape[0])
    blocks, slots = block_table[positions // block_size], positions % block_size
    k_out, v_out = k_pool.clone(), v_pool.clone()
    k_out[blocks, slots], v_out[blocks, slots] = k_new, v_new
    return k_out, v_out


# ------------------------------------------------------------------- paged_attention


def attention_vllm_reference(q, k_pool, v_pool, block_tables, seq_lens):
    """vLLM's ``ref_single_query_cached_kv_attention``: gather position by position, then
    attention by hand with the key heads repeated for GQA."""
    num_query_heads, head_size = q.shape[1:]
    num_kv_heads = k_pool.shape[2]
    block_size = k_pool.shape[1]
    scale = 1.0 / math.sqrt(head_size)
    outputs = []
    for i in range(q.shape[0]):
        block_table = block_tables[i]
        seq_len = int(seq_lens[i])
        keys, values = [], []
        for j in range(seq_len):
            block_number = int(block_table[j // block_size])
            block_offset = j % block_size
            keys.append(k_pool[block_number, block_offset])
            values.append(v_pool[block_number, block_offset])
        keys = torch.stack(keys, dim=0)  # (L, nkv, hs)
        values = torch.stack(values, dim=0)
        if num_query_heads > num_kv_heads:
            group = num_query_heads // num_kv_heads
            keys = torch.repeat_interleave(keys, group, dim=1)
            values = torch.repeat_interleave(values, group, dim=1)
        attn = scale * torch.einsum("hd,khd->hk", q[i], keys)  # (nh, L)
        attn = torch.softmax(attn, dim=-1)
        outputs.append(torch.einsum("hk,khd->hd", attn, values))  # (nh, hs)
    return torch.stack(outputs)


def attention_gather(q, k_pool, v_pool, block_tables, seq_lens):
    """Gather whole blocks, flatten, cut at the length, then SDPA with ``enable_gqa``."""
    block_size = k_pool.shape[1]
    out = []
    for b, length in enumerate(seq_lens.tolist()):
        blocks = block_tables[b, : -(-length // block_size)]
        k = k_pool[blocks].flatten(0, 1)[:length].transpose(0, 1)  # (nkv, L, hs)
        v = v_pool[blocks].flatten(0, 1)[:length].transpose(0, 1)
        out.append(F.scaled_dot_product_attention(q[b, :, None], k, v, enable_gqa=True)[:, 0])
    return torch.stack(out)


def _attend_with(**how):
    def paged_attention(q, k_pool, v_pool, block_tables, seq_lens):
        return checks.attend(q, k_pool, v_pool, block_tables, seq_lens, **how)

    return paged_attention


def _attend_size_swapped(q, k_pool, v_pool, block_tables, seq_lens):
    return checks.attend(q, k_pool, v_pool, block_tables, seq_lens, size=k_pool.shape[0])


CORRECT = [
    *correct([APPEND], {"slot mapping (vLLM)": append_slot_mapping, "loop": append_loop}),
    *correct(
        [ATTEND], {"vLLM reference": attention_vllm_reference, "gather + SDPA": attention_gather}
    ),
]
MISTAKES = [
    Mistake("append: one late", _append_with(shift=1), APPEND, "one position too late"),
    Mistake("append: one early", _append_with(shift=-1), APPEND, "one position too early"),
    Mistake("append: no table", _append_with(physical=True), APPEND, "logical block"),
    Mistake("append: num_blocks as size", _append_size_swapped, APPEND, "block_size"),
    Mistake("append: one block", _append_with(one_block=True), APPEND, "next block"),
    Mistake("append: in place", _append_in_place, APPEND, "changed its input in place"),
    Mistake(
        "attend: last partial block dropped",
        _attend_with(count=lambda n, size, width: n // size * size),
        ATTEND,
        "drops the last partial block",
    ),
    Mistake(
        "attend: last block whole",
        _attend_with(count=lambda n, size, width: -(-n // size) * size),
        ATTEND,
        "reads the last block whole",
    ),
    Mistake(
        "attend: whole table row",
        _attend_with(count=lambda n, size, width: width * size),
        ATTEND,
        "belong to other sequences",
    ),
    Mistake(
        "attend: newest token missed",
        _attend_with(count=lambda n, size, width: n - 1),
        ATTEND,
        "misses the newest token",
    ),
    Mistake("attend: no table", _attend_with(physical=True), ATTEND, "logical block"),
    Mistake("attend: num_blocks as size", _attend_size_swapped, ATTEND, "block_size"),
    Mistake("attend: heads tiled", _attend_with(tiled=True), ATTEND, "repeat_interleave"),
]
STUBS = [(APPEND, stub), (ATTEND, stub)]
REPLAY = [APPEND, ATTEND]
