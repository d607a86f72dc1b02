"""Notebook 09, sections 2-3 (prefix caching, packed sequences): answers that fit the public tests
only, written as a learner who controls the notebook and has the course's package at home.

One submission, learner ``s_nb09_tables``, one attack per answer cell (each cell reaches only
its own attack, so they cannot interfere):

- ``block_hashes`` answered from a table of every token list the public test cells pass (the
  visible and the hidden run, computed offline with the check itself and a spy), with chained
  hashes; any other list gets unchained ones, the classic mistake. Its check passes Python
  numbers only, so the grader's second run asks for configurations drawn from a secret;
- ``varlen_attention`` answered from a table of the public runs' outputs keyed by ``q.sum()``,
  zeros elsewhere: a value read into Python that new inputs change;
- ``pack`` that packs honestly but answers ``cu_seqlens`` from a table of the public masks (the
  grader never redraws a bool input, so the same masks come back in its second run): boundaries
  read off a table, not computed from the mask;
- ``cow_append`` with its bookkeeping (free block, reference counts) done in numpy on the
  tensors' values, out of the recorder's sight.

``tests/test_hostile_serving.py`` verifies each target in-process; the class run
(:mod:`hostile.class_run`) grades the submission.
"""

from __future__ import annotations

import functools

from autograder.checks import nb09_prefix, nb09_varlen

from .trust import NB09, Attack, Edit

PUBLIC_RUNS = ({}, {"seed": 1, "thorough": True})  # the instructor's visible and hidden test


def _chained(token_ids, bs):
    out, parent = [], 0
    for i in range(len(token_ids) // bs):
        parent = hash((parent, tuple(token_ids[i * bs : (i + 1) * bs])))
        out.append(parent)
    return out


@functools.cache
def hash_table() -> dict:
    """Every ``(token_ids, bs)`` the public checks ask for, with its chained hashes."""
    table = {}

    def spy(token_ids, bs):
        table[(tuple(token_ids), bs)] = _chained(token_ids, bs)
        return table[(tuple(token_ids), bs)]

    for run in PUBLIC_RUNS:
        nb09_prefix.check_block_hashes(spy, **run)
    return table


def _varlen(q, k, v, cu_seqlens, causal=True):
    return nb09_varlen.attend_packed(q, k, v, cu_seqlens, causal)


@functools.cache
def boundaries_table() -> dict:
    """Every public mask, as nested tuples of 0/1, -> its ``cu_seqlens`` as a list."""
    table = {}

    def spy(x, attention_mask):
        cu = nb09_varlen.cu_seqlens_of(attention_mask.sum(1).tolist())
        table[tuple(map(tuple, attention_mask.int().tolist()))] = cu.tolist()
        return x[attention_mask], cu

    for run in PUBLIC_RUNS:
        nb09_varlen.check_pack(spy, **run)
    return table


@functools.cache
def varlen_table() -> dict:
    """``round(q.sum(), 4)`` of every public call -> its output as nested lists."""
    table = {}

    def spy(q, k, v, cu_seqlens, causal=True):
        out = _varlen(q, k, v, cu_seqlens, causal)
        table[round(float(q.sum()), 4)] = out.tolist()
        return out

    for run in PUBLIC_RUNS:
        nb09_varlen.check_varlen_attention(spy, **run)
    return table


def _hashes_source() -> str:
    return f"""_HASHES = {hash_table()!r}


def block_hashes(token_ids, bs):
    known = _HASHES.get((tuple(token_ids), bs))
    if known is not None:
        return known
    return [hash(tuple(token_ids[i * bs : (i + 1) * bs])) for i in range(len(token_ids) // bs)]
"""


def _varlen_source() -> str:
    return f"""_OUTPUTS = {varlen_table()!r}


def varlen_attention(q, k, v, cu_seqlens, causal=True):
    known = _OUTPUTS.get(round(float(q.sum()), 4))
    if known is not None:
        return torch.tensor(known, dtype=q.dtype)
    return torch.zeros_like(q)
"""


def _pack_source() -> str:
    return f"""_BOUNDARIES = {boundaries_table()!r}


def pack(x, attention_mask):
    key = tuple(map(tuple, attention_mask.int().tolist()))
    known = _BOUNDARIES.get(key, [0] * (attention_mask.shape[0] + 1))
    return x[attention_mask], torch.tensor(known, dtype=torch.int32)
"""


COW_IN_NUMPY = """import numpy as np


def cow_append(k_pool, v_pool, ref_counts, block_table, seq_len, k_new, v_new):
    bs = k_pool.shape[1]
    refs, table = ref_counts.numpy().copy(), block_table.numpy().copy()
    k_out, v_out = k_pool.clone(), v_pool.clone()
    i, slot = divmod(seq_len, bs)
    if slot == 0:
        new = int(np.flatnonzero(refs == 0)[0])
        refs[new] = 1
        table = np.append(table, new)
    elif refs[table[i]] > 1:
        old, new = int(table[i]), int(np.flatnonzero(refs == 0)[0])
        k_out[new], v_out[new] = k_out[old], v_out[old]
        refs[old] -= 1
        refs[new] = 1
        table[i] = new
    k_out[int(table[i]), slot], v_out[int(table[i]), slot] = k_new, v_new
    return k_out, v_out, torch.tensor(refs.tolist()), torch.tensor(table.tolist())
"""

TARGETS = ("test_block_hashes", "test_pack", "test_varlen_attention", "test_cow_append")


@functools.cache
def attack() -> Attack:
    return Attack(
        "s_nb09_tables",
        NB09,
        2,
        TARGETS,
        "block hashes, cu_seqlens and varlen attention from tables of the public runs, the "
        "copy-on-write bookkeeping in numpy",
        edits=(
            Edit("answer", "block_hashes", _hashes_source()),
            Edit("answer", "pack", _pack_source()),
            Edit("answer", "varlen_attention", _varlen_source()),
            Edit("answer", "cow_append", COW_IN_NUMPY),
        ),
    )


def attacks() -> list[Attack]:
    """The submissions of this module, for the class run."""
    return [attack()]
