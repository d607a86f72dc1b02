"""Checks for notebook 09, section 1: the paged KV cache, ``paged_append`` and ``paged_attention``.

Shape legend: ``B`` sequences, ``T`` new tokens, ``L`` a sequence's length, ``nh`` query heads,
``nkv`` key/value heads, ``hs`` head size, ``bs`` the block size.

A pool ``(num_blocks, bs, nkv, hs)`` holds every sequence's keys (and a twin its values) in
fixed-size blocks, as vLLM's cache does; a sequence's block table lists its blocks in order, so
position ``p`` lives in block ``table[p // bs]``, slot ``p % bs``. Slots never written hold noise
(a pool is allocated, not zeroed) and the tables' unused entries name other sequences' blocks, so
reading one slot too many shows.

PyTorch is the oracle: the check keeps each sequence's cache contiguous beside the pool, and
``F.scaled_dot_product_attention(..., enable_gqa=True)`` over it is the answer. Known mistakes are
the same read or write done the wrong way (the last partial block dropped or read whole, the
table's padding read, logical blocks taken for physical ones, ``num_blocks`` taken for ``bs``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from autograder.checks import operators
from autograder.torch_helpers import one_thread

from ._core import (
    call,
    close,
    describe,
    expect_pair,
    expect_shape,
    expect_tensor,
    expect_unmodified,
    fail,
    first_match,
    make_generator,
    randint,
    randn,
)

#: Learner code may attend with PyTorch's SDPA once it has gathered the cache.
OPERATORS = operators.DEFAULT | operators.SDPA

#: Learner-importable names that would compute these answers: none.
ANSWERS_IN_TOOLS: dict[str, str] = {}

APPEND = "paged_append"
ATTEND = "paged_attention"
SHAPES = (
    "the pools are (num_blocks, block_size, nkv, hs): block_size is k_pool.shape[1], "
    "num_blocks is k_pool.shape[0]"
)


def positions_of(table: torch.Tensor, positions: torch.Tensor, bs: int, **how):
    """``(blocks, slots)`` where ``positions`` live, the right way unless ``how`` says otherwise:
    ``physical`` skips the table, ``size`` is the block size used, ``one_block`` keeps every
    position in the block of the first."""
    size = how.get("size", bs)
    logical = positions // size
    if how.get("one_block"):
        logical = torch.full_like(positions, int(positions[0]) // size)
    blocks = logical if how.get("physical") else table[logical]
    return blocks, positions % size


def write(k_pool, v_pool, table, seq_len: int, k_new, v_new, **how):
    """The pools after writing ``k_new, v_new (T, nkv, hs)`` at ``seq_len …``; ``how``: as
    :func:`positions_of`, and ``shift`` moves every position."""
    T, bs = k_new.shape[0], k_pool.shape[1]
    positions = torch.arange(seq_len, seq_len + T) + how.pop("shift", 0)
    blocks, slots = positions_of(table, positions.clamp(min=0), bs, **how)
    k_out, v_out = k_pool.clone(), v_pool.clone()
    k_out[blocks, slots], v_out[blocks, slots] = k_new, v_new
    return k_out, v_out


def gather(pool, table, length: int, **how) -> torch.Tensor:
    """A sequence's cache ``(n, nkv, hs)`` read from the pool; ``how``: as :func:`positions_of`,
    and ``count`` reads that many positions instead of ``length``."""
    count = how.pop("count", length)
    blocks, slots = positions_of(table, torch.arange(count), pool.shape[1], **how)
    return pool[blocks, slots]


def attend(q, k_pool, v_pool, tables, seq_lens, **how) -> torch.Tensor:
    """Decoding attention ``(B, nh, hs)``: each query over its sequence's cache read from the
    pool. ``how``: as :func:`gather`, where ``count`` is a function of the length and block size,
    and ``tiled`` repeats key heads with ``repeat`` instead of ``repeat_interleave``."""
    outs = []
    bs = k_pool.shape[1]
    for b, length in enumerate(seq_lens.tolist()):
        reading = dict(how)
        reading.pop("tiled", None)
        if "count" in how:
            reading["count"] = how["count"](length, bs, tables.shape[1])
        k, v = (gather(p, tables[b], length, **reading).transpose(0, 1) for p in (k_pool, v_pool))
        if how.get("tiled"):
            group = q.shape[1] // k.shape[0]
            k, v = k.repeat(group, 1, 1), v.repeat(group, 1, 1)
        outs.append(
            F.scaled_dot_product_attention(q[b, :, None], k, v, enable_gqa=True)[:, 0]
        )  # (nh, 1, hs) @ (nh, hs, n) -> (nh, 1, n) -> (nh, 1, hs)
    return torch.stack(outs)


def _variants(build: Callable, cases: dict[str, dict]) -> dict[str, torch.Tensor]:
    """Each diagnosis's wrong answer, leaving out those that cannot even run on these inputs."""
    out = {}
    for why, how in cases.items():
        try:
            out[why] = build(**how)
        except (IndexError, RuntimeError):
            continue
    return out


# ------------------------------------------------------------------- paged_append


def _append_cases(gen, thorough: bool) -> list[tuple[int, int, int]]:
    """``(bs, seq_len, T)``: a first block, filling one, opening one, crossing two boundaries."""
    cases = [(4, 0, 3), (4, 3, 1), (4, 4, 1), (4, 2, 7), (1, 5, 2), (3, 7, 4), (8, 0, 8)]
    for _ in range(5 if thorough else 0):
        bs = randint(gen, 1, 6)
        cases.append((bs, randint(gen, 0, 3 * bs), randint(gen, 1, 2 * bs)))
    return cases


def _pool_and_table(gen, bs: int, needed: int, nkv: int, hs: int):
    """Noise pools ``(num_blocks, bs, nkv, hs)`` and a table of ``needed`` scattered blocks, padded
    with two more blocks of the pool (another sequence's)."""
    num_blocks = needed + 3 + (1 if needed + 3 == bs else 0)
    k_pool = randn(gen, num_blocks, bs, nkv, hs, dtype=torch.float32)
    v_pool = randn(gen, num_blocks, bs, nkv, hs, dtype=torch.float32)
    table = torch.randperm(num_blocks, generator=gen)[: needed + 2]
    return k_pool, v_pool, table


@one_thread
def check_paged_append(paged_append: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``paged_append(k_pool, v_pool, block_table, seq_len, k_new, v_new)`` returns new pools with
    position ``p = seq_len + t`` written in block ``block_table[p // bs]``, slot ``p % bs``, and
    every other slot untouched; the inputs stay unchanged."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for bs, seq_len, T in _append_cases(gen, thorough):
        nkv, hs = randint(gen, 1, 2), 4
        needed = -(-(seq_len + T) // bs)
        k_pool, v_pool, table = _pool_and_table(gen, bs, needed, nkv, hs)
        k_new = randn(gen, T, nkv, hs, dtype=torch.float32)
        v_new = randn(gen, T, nkv, hs, dtype=torch.float32)
        args = (k_pool, v_pool, table, seq_len, k_new, v_new)
        before = tuple(t.clone() for t in (k_pool, v_pool, table, k_new, v_new))
        result = call(paged_append, APPEND, args, hint=SHAPES)
        expect_unmodified(before, (k_pool, v_pool, table, k_new, v_new), APPEND)
        got = expect_pair(result, APPEND, "k_pool", "v_pool")
        inputs = describe(args)
        for name, t in zip(("k_pool", "v_pool"), got, strict=True):
            expect_shape(t, k_pool.shape, f"The {name} `{APPEND}` returns", inputs, "same pool")
        expected = torch.stack(write(*args))
        if close(torch.stack(got), expected):
            continue
        where = f"`{APPEND}` with block_size={bs}, seq_len={seq_len} and {T} new token(s)"
        wrong = _variants(
            lambda args=args, **how: torch.stack(write(*args, **how)),
            {
                f"{where} writes one position too late: the first new token sits at position "
                "seq_len (positions start at 0).": {"shift": 1},
                f"{where} writes one position too early, over the last cached token: the first "
                "new token sits at position seq_len.": {"shift": -1},
                f"{where} writes into block p // block_size of the pool itself: that is the "
                "sequence's logical block, look its physical block up in the table, "
                "block_table[p // block_size].": {"physical": True},
                f"{where} divides by num_blocks where it should divide by block_size: block "
                "table[p // block_size], slot p % block_size, with block_size = "
                "k_pool.shape[1].": {"size": k_pool.shape[0]},
                f"{where} keeps every new token in the block of seq_len: once the last partial "
                "block is full, go on in the next block of the table (each position computes "
                "its own block).": {"one_block": True},
            },
        )
        fail(
            first_match(torch.stack(got), wrong)
            or f"{where} does not hold position p in block block_table[p // block_size], slot "
            "p % block_size, with every other slot of the pools unchanged."
        )


# ------------------------------------------------------------------- paged_attention


def _attention_configs(gen, thorough: bool) -> list[tuple[int, int, int, list[int]]]:
    """``(nh, nkv, bs, lengths)``: GQA, MHA, MQA; full blocks, partial ones, a single token."""
    configs = [(4, 2, 4, [5, 8, 1]), (2, 2, 3, [7, 3]), (3, 1, 2, [4, 1, 6])]
    for _ in range(2 if thorough else 0):
        nkv = randint(gen, 1, 2)
        bs = randint(gen, 1, 5)
        lengths = [randint(gen, 1, 4 * bs) for _ in range(randint(gen, 1, 4))]
        configs.append((nkv * randint(gen, 1, 3), nkv, bs, lengths))
    return configs


def _paged_batch(gen, nkv: int, bs: int, lengths: list[int], hs: int):
    """Contiguous caches and the same tokens scattered through noise pools: ``(keys, values,
    k_pool, v_pool, tables)``; each table row is padded with blocks of other sequences."""
    counts = [-(-n // bs) for n in lengths]
    width = max(counts) + 1
    num_blocks = sum(counts) + 2 + (1 if sum(counts) + 2 == bs else 0)
    k_pool = randn(gen, num_blocks, bs, nkv, hs, dtype=torch.float32)
    v_pool = randn(gen, num_blocks, bs, nkv, hs, dtype=torch.float32)
    order = torch.randperm(num_blocks, generator=gen)
    tables = torch.empty(len(lengths), width, dtype=torch.long)
    keys, values, used = [], [], 0
    for b, (n, count) in enumerate(zip(lengths, counts, strict=True)):
        own = order[used : used + count]
        used += count
        others = order[(used + torch.arange(width - count)) % num_blocks]
        tables[b] = torch.cat([own, others])
        k = randn(gen, n, nkv, hs, dtype=torch.float32)
        v = randn(gen, n, nkv, hs, dtype=torch.float32)
        blocks, slots = positions_of(tables[b], torch.arange(n), bs)
        k_pool[blocks, slots], v_pool[blocks, slots] = k, v
        keys.append(k)
        values.append(v)
    return keys, values, k_pool, v_pool, tables


@one_thread
def check_paged_attention(
    paged_attention: Callable, *, seed: int = 0, thorough: bool = False
) -> None:
    """``paged_attention(q, k_pool, v_pool, block_tables, seq_lens)``: each sequence's one new
    query ``(B, nh, hs)`` attends to its ``seq_lens[b]`` cached positions, read through its
    block table, exactly as attention over the contiguous cache does."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for nh, nkv, bs, lengths in _attention_configs(gen, thorough):
        hs = 4
        keys, values, k_pool, v_pool, tables = _paged_batch(gen, nkv, bs, lengths, hs)
        q = randn(gen, len(lengths), nh, hs, dtype=torch.float32)
        seq_lens = torch.tensor(lengths)
        args = (q, k_pool, v_pool, tables, seq_lens)
        before = tuple(t.clone() for t in args)
        out = call(paged_attention, ATTEND, args, hint=SHAPES)
        expect_unmodified(before, args, ATTEND)
        out = expect_tensor(out, ATTEND)
        expect_shape(out, q.shape, f"The output of `{ATTEND}`", describe(args), "(B, nh, hs)")
        expected = torch.stack(
            [
                F.scaled_dot_product_attention(
                    q[b, :, None], k.transpose(0, 1), v.transpose(0, 1), enable_gqa=True
                )[:, 0]
                for b, (k, v) in enumerate(zip(keys, values, strict=True))
            ]
        )  # (B, nh, hs)
        if close(out, expected):
            continue
        _diagnose(out, args, bs, lengths, nh, nkv)


def _diagnose(out, args, bs: int, lengths: list[int], nh: int, nkv: int) -> None:
    __tracebackhide__ = True
    where = f"`{ATTEND}` with block_size={bs}, seq_lens={lengths}, nh={nh}, nkv={nkv}"
    full = {"count": lambda n, size, width: n // size * size}
    whole = {"count": lambda n, size, width: -(-n // size) * size}
    wrong = _variants(
        lambda **how: attend(*args, **how),
        {
            f"{where} drops the last partial block: a sequence of L tokens fills ceil(L / "
            "block_size) blocks, the last one only up to slot (L - 1) % block_size.": full,
            f"{where} reads the last block whole: its slots past the sequence's length were "
            "never written (noise), so keep only the first seq_lens[b] positions.": whole,
            f"{where} reads every entry of the block table: the entries past the sequence's "
            "own blocks belong to other sequences, so their slots leak in; read ceil(L / "
            "block_size) blocks, then seq_lens[b] positions.": {
                "count": lambda n, size, width: width * size
            },
            f"{where} misses the newest token: seq_lens[b] counts every cached position, the "
            "last one included (positions 0 … seq_lens[b] - 1).": {
                "count": lambda n, size, width: n - 1
            },
            f"{where} reads one position too many: positions run 0 … seq_lens[b] - 1.": {
                "count": lambda n, size, width: n + 1
            },
            f"{where} reads block p // block_size of the pool itself: that is the logical "
            "block, look its physical block up in block_tables[b].": {"physical": True},
            f"{where} divides by num_blocks where it should divide by block_size (block_size "
            "= k_pool.shape[1]).": {"size": args[1].shape[0]},
            f"{where} gives query head h the key head h % nkv (repeat): with GQA it is h // "
            "(nh // nkv), as repeat_interleave or enable_gqa=True lay them out.": {"tiled": True},
        },
    )
    fail(
        first_match(out, wrong)
        or f"{where} differs from attention over each sequence's contiguous cache: position p "
        "lives in block block_tables[b, p // block_size], slot p % block_size, for p < "
        "seq_lens[b]."
    )
