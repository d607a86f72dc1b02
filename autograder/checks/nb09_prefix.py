"""Checks for notebook 09, section 2: prefix caching, ``block_hashes`` and ``cow_append``.

Shape legend: ``L`` a sequence's length in tokens, ``bs`` the block size, ``nkv`` key/value
heads, ``hs`` head size; a pool is ``(num_blocks, bs, nkv, hs)`` as in section 1.

``block_hashes`` is judged by what a prefix cache needs of its hashes, not by their values (any
hash function, any way of chaining will do): one hash per *full* block; the same first blocks
give the same hashes whatever follows; a change in block ``i`` changes the hashes of blocks
``i, i + 1, …`` and no earlier one; the same tokens after another prefix, or in another order,
hash differently. Each property has a wrong way to break it, which the failure names.

``cow_append`` is judged as an allocator: several sequences forked from one prompt share its
blocks (a reference count per block says by how many tables), and each then writes its own tokens.
After every write the check reads each sequence's cache through its table and compares it with
the tokens it was given (the contiguous reference), and recounts the references from the tables:
a block another sequence holds must never be written, a shared block is copied into a free one
(reference count 0) before the first write, and only then.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable

import torch

from autograder.torch_helpers import one_thread

from ._core import (
    call,
    expect_shape,
    expect_tensor,
    expect_unmodified,
    fail,
    make_generator,
    randint,
    randn,
)

#: Learner code copies, indexes and compares: nothing fused is needed.
ANSWERS_IN_TOOLS: dict[str, str] = {}

HASHES = "block_hashes"
COW = "cow_append"
VOCAB = 50


# ------------------------------------------------------------------- block_hashes


def _hashes(block_hashes: Callable, tokens: list[int], bs: int) -> list[int]:
    __tracebackhide__ = True
    got = call(block_hashes, HASHES, (list(tokens), bs))
    if not isinstance(got, list | tuple) or not all(
        isinstance(h, numbers.Integral) and not isinstance(h, bool) for h in got
    ):
        fail(
            f"`{HASHES}` should return a list of ints, one hash per full block, but it returned "
            f"{type(got).__name__}{'' if not isinstance(got, list | tuple) else ' of other items'}."
        )
    where = f"`{HASHES}` of {len(tokens)} tokens with block_size={bs}"
    full = len(tokens) // bs
    if len(got) != full:
        partial = len(got) == -(-len(tokens) // bs) and len(tokens) % bs
        fail(
            f"{where} gives the last, partial block a hash: only full blocks are hashed (and "
            "shared), since a block still filling changes with every token."
            if partial
            else f"{where} returns {len(got)} hashes: one per full block, {full} here "
            f"(len(token_ids) // block_size)."
        )
    return [int(h) for h in got]


def _hash_cases(gen, thorough: bool) -> list[tuple[int, int, int]]:
    """``(bs, full blocks, tokens of the partial block)``."""
    cases = [(4, 3, 2), (3, 3, 0), (1, 3, 0), (5, 2, 4)]
    for _ in range(3 if thorough else 0):
        bs = randint(gen, 1, 6)
        cases.append((bs, randint(gen, 2, 4), randint(gen, 0, bs - 1)))
    return cases


def _tokens(gen, n: int) -> list[int]:
    return torch.randint(0, VOCAB, (n,), generator=gen).tolist()


def _changed(tokens: list[int], position: int) -> list[int]:
    out = list(tokens)
    out[position] = (out[position] + 1) % VOCAB
    return out


@one_thread
def check_block_hashes(block_hashes: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``block_hashes(token_ids, bs)``: one int per full block, the same for the same first
    blocks whatever follows, chained so that a change in block ``i`` changes hashes ``i…`` only,
    different for the same tokens after another prefix or in another order."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for bs, full, tail in _hash_cases(gen, thorough):
        tokens = _tokens(gen, full * bs + tail)
        where = f"`{HASHES}` of {len(tokens)} tokens with block_size={bs}"
        got = _hashes(block_hashes, tokens, bs)
        if _hashes(block_hashes, tokens, bs) != got:
            fail(
                f"{where} gives other hashes when called again on the same tokens: hash values, "
                "not objects (hash of a tuple of ints, never id() or a random draw)."
            )
        longer = tokens[: full * bs] + _tokens(gen, bs + randint(gen, 1, bs))
        if _hashes(block_hashes, longer, bs)[:full] != got:
            fail(
                f"{where}: the same first {full} blocks hash differently when other tokens "
                "follow them: block i's hash depends on blocks 0 … i only (never on the partial "
                "block or the length), or a cached prefix could never be found."
            )
        for i in range(full):
            position = i * bs + randint(gen, 0, bs - 1)
            again = _hashes(block_hashes, _changed(tokens, position), bs)
            _expect_chained(got, again, i, position, where)
        _expect_prefix_matters(block_hashes, gen, bs, where)
        if bs > 1:
            block = tokens[:bs]
            turned = block[1:] + block[:1]
            if turned != block and _hashes(block_hashes, turned, bs) == _hashes(
                block_hashes, block, bs
            ):
                fail(
                    f"{where}: a block and the same tokens in another order get the same hash: "
                    "hash the tuple of the block's tokens in order (not their sum, set or "
                    "sorted list)."
                )


def _expect_chained(got: list[int], again: list[int], i: int, position: int, where: str) -> None:
    __tracebackhide__ = True
    changed = f"{where}: after a change of token {position} (in block {i})"
    if again[:i] != got[:i]:
        fail(
            f"{changed} the hash of an earlier block changed too: block j's hash may depend on "
            "blocks 0 … j only (its parent's hash and its own tokens)."
        )
    if again[i] == got[i]:
        fail(
            f"{changed} block {i}'s hash stayed the same: hash every token of the block, "
            "token_ids[i * block_size : (i + 1) * block_size]."
        )
    same = [j for j in range(i + 1, len(got)) if again[j] == got[j]]
    if same:
        fail(
            f"{changed} the hash of block {same[0]} stayed the same: the hashes are not chained. "
            "Each block's hash must include its parent's hash, so that it stands for the whole "
            "prefix up to that block (vLLM hashes (parent_hash, block tokens))."
        )


def _expect_prefix_matters(block_hashes: Callable, gen, bs: int, where: str) -> None:
    """The same block after two different prefixes, and twice in one sequence."""
    __tracebackhide__ = True
    a, b, block = _tokens(gen, bs), _tokens(gen, bs), _tokens(gen, bs)
    if a == b:
        b = _changed(b, 0)
    first = _hashes(block_hashes, a + block, bs)[1]
    second = _hashes(block_hashes, b + block, bs)[1]
    repeated = _hashes(block_hashes, block + block, bs)
    if first == second or repeated[0] == repeated[1]:
        fail(
            f"{where}: the same {bs} tokens after different prefixes get the same hash: the "
            "hashes are not chained. Each block's hash must include its parent's hash "
            "(vLLM hashes (parent_hash, block tokens)), as a block's keys and values depend on "
            "every token before it."
        )


# ------------------------------------------------------------------- cow_append


class _Forks:
    """A pool shared by sequences forked from one prompt, and one bystander sequence.

    ``tables[s]`` and ``keys[s]``/``values[s]`` (contiguous ``(L, nkv, hs)``) are sequence
    ``s``'s blocks and tokens; the last sequence is the bystander, which shares the prompt's
    first block when it is full, and holds one block of its own.
    """

    def __init__(self, gen, bs: int, prompt: int, forks: int, steps: int, nkv: int, hs: int = 4):
        prompt_blocks = -(-prompt // bs)
        own = -(-(prompt + steps) // bs) - prompt_blocks + 1  # what each fork may take
        num_blocks = prompt_blocks + 1 + forks * own + 2
        self.k_pool = randn(gen, num_blocks, bs, nkv, hs, dtype=torch.float32)
        self.v_pool = randn(gen, num_blocks, bs, nkv, hs, dtype=torch.float32)
        order = torch.randperm(num_blocks, generator=gen)
        shared, mine = order[:prompt_blocks], order[prompt_blocks : prompt_blocks + 1]
        k = randn(gen, prompt, nkv, hs, dtype=torch.float32)
        v = randn(gen, prompt, nkv, hs, dtype=torch.float32)
        by = bs if prompt >= bs else 0  # the bystander's tokens in the prompt's first block
        self.tables = [shared.clone() for _ in range(forks)] + [
            torch.cat([shared[: by // bs], mine])
        ]
        self.keys = [k.clone() for _ in range(forks)]
        self.values = [v.clone() for _ in range(forks)]
        self.keys.append(torch.cat([k[:by], randn(gen, 1, nkv, hs, dtype=torch.float32)]))
        self.values.append(torch.cat([v[:by], randn(gen, 1, nkv, hs, dtype=torch.float32)]))
        for s in range(forks + 1):
            self._scatter(s)
        self.ref_counts = self.recount()

    def _scatter(self, s: int) -> None:
        bs, n = self.k_pool.shape[1], len(self.keys[s])
        blocks, slots = self.tables[s][torch.arange(n) // bs], torch.arange(n) % bs
        self.k_pool[blocks, slots], self.v_pool[blocks, slots] = self.keys[s], self.values[s]

    def recount(self, tables: list[torch.Tensor] | None = None) -> torch.Tensor:
        """How many tables hold each block."""
        held = torch.cat(self.tables if tables is None else tables)
        return torch.bincount(held, minlength=self.k_pool.shape[0])

    def read(self, k_pool, v_pool, table, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Positions ``0 … n - 1`` read through ``table``: ``(n, nkv, hs)`` twice."""
        bs = k_pool.shape[1]
        blocks, slots = table[torch.arange(n) // bs], torch.arange(n) % bs
        return k_pool[blocks, slots], v_pool[blocks, slots]


def _fork_configs(gen, thorough: bool) -> list[tuple[int, int, int, int]]:
    """``(bs, prompt, forks, steps)``: a shared partial block (copied, then written in place by
    the last fork), a prompt of whole blocks (no copy), three forks of one token's block."""
    configs = [(4, 6, 2, 4), (3, 3, 3, 4), (2, 5, 3, 3), (1, 2, 2, 2)]
    for _ in range(2 if thorough else 0):
        bs = randint(gen, 2, 5)
        configs.append((bs, randint(gen, 1, 3 * bs), randint(gen, 2, 3), randint(gen, 1, bs + 1)))
    return configs


def _returned(result, state: _Forks, where: str) -> tuple[torch.Tensor, ...]:
    __tracebackhide__ = True
    names = ("k_pool", "v_pool", "ref_counts", "block_table")
    if not isinstance(result, tuple | list) or len(result) != 4:
        fail(f"`{COW}` should return four tensors `({', '.join(names)})`.")
    got = tuple(
        expect_tensor(t, COW, f"a tensor as `{n}`") for t, n in zip(result, names, strict=True)
    )
    shapes = (state.k_pool.shape, state.v_pool.shape, state.ref_counts.shape)
    for t, name, shape in zip(got, names, shapes, strict=False):
        expect_shape(t, shape, f"The {name} `{COW}` returns", where, f"the same {name}")
    if got[3].dim() != 1 or got[3].is_floating_point():
        fail(f"{where}: the block_table `{COW}` returns should be a 1-D tensor of block numbers.")
    return got


@one_thread
def check_cow_append(cow_append: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``cow_append(k_pool, v_pool, ref_counts, block_table, seq_len, k_new, v_new)`` writes one
    token at position ``seq_len`` and returns ``(k_pool, v_pool, ref_counts, block_table)``: a
    new block (ref count 0 before) when the last is full, a copy of the last block first when
    other tables share it; no block another table holds is written."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for bs, prompt, forks, steps in _fork_configs(gen, thorough):
        state = _Forks(gen, bs, prompt, forks, steps, nkv=randint(gen, 1, 2))
        for _ in range(steps):
            for s in range(forks):
                _one_write(cow_append, state, s, gen)


def _one_write(cow_append: Callable, state: _Forks, s: int, gen) -> None:
    __tracebackhide__ = True
    table, n = state.tables[s], len(state.keys[s])
    nkv, hs = state.k_pool.shape[2:]
    k_new = randn(gen, nkv, hs, dtype=torch.float32)
    v_new = randn(gen, nkv, hs, dtype=torch.float32)
    args = (state.k_pool, state.v_pool, state.ref_counts, table, n, k_new, v_new)
    before = tuple(t.clone() for t in (state.k_pool, state.v_pool, state.ref_counts, table))
    result = call(cow_append, COW, args, hint="the pools are (num_blocks, block_size, nkv, hs)")
    expect_unmodified(before, args[:4], COW)
    where = (
        f"`{COW}` at seq_len={n} with block_size={state.k_pool.shape[1]}, the sequence's last "
        f"block held by {int(state.ref_counts[table[-1]])} table(s)"
    )
    k_pool, v_pool, ref_counts, new_table = _returned(result, state, where)
    _expect_blocks(state, table, new_table, n, where)
    others = [t for i, t in enumerate(state.tables) if i != s]
    for i, other in enumerate(state.tables):
        if i != s and not _reads_the_same(state, i, k_pool, v_pool, other):
            fail(
                f"{where} wrote into a block another sequence holds: when the block the token "
                "goes into has a ref count above 1, copy it into a free block first "
                "(copy-on-write) and write into the copy."
            )
    state.keys[s] = torch.cat([state.keys[s], k_new[None]])
    state.values[s] = torch.cat([state.values[s], v_new[None]])
    k, v = state.read(k_pool, v_pool, new_table, n + 1)
    if not (torch.equal(k[:n], state.keys[s][:n]) and torch.equal(v[:n], state.values[s][:n])):
        fail(
            f"{where}: the sequence's earlier tokens are no longer in its blocks: the copy of a "
            "shared block must hold its slots first (k_pool[new] = k_pool[old], the same for "
            "v_pool), then the new token."
        )
    if not (torch.equal(k[n], k_new) and torch.equal(v[n], v_new)):
        fail(
            f"{where}: the new token is not at position seq_len: block block_table[seq_len // "
            "block_size], slot seq_len % block_size."
        )
    _expect_ref_counts(state, ref_counts, table, new_table, others, where)
    state.k_pool, state.v_pool, state.ref_counts = k_pool, v_pool, ref_counts
    state.tables[s] = new_table


def _expect_blocks(state: _Forks, table, new_table, n: int, where: str) -> None:
    """The table grows by one block exactly when the last is full, and only the block the token
    goes into may change, into a free one, when it was shared."""
    __tracebackhide__ = True
    bs, refs = state.k_pool.shape[1], state.ref_counts
    if len(new_table) != -(-(n + 1) // bs):
        fail(
            f"{where} opens no new block though the last one is full (seq_len % block_size == "
            "0): take a free block and append it to the table."
            if len(new_table) == len(table) and n % bs == 0
            else f"{where} returns a table of {len(new_table)} blocks: a sequence of L tokens "
            "holds ceil(L / block_size) of them, one more only when the last one was full."
        )
    last = n // bs
    moved = [i for i in range(len(table)) if int(new_table[i]) != int(table[i])]
    if any(i != last for i in moved):
        fail(
            f"{where} replaced block {moved[0]} of the table, which the new token does not go "
            "into: only the block of position seq_len may be copied."
        )
    taken = [int(b) for b in new_table[len(table) :]] + [int(new_table[i]) for i in moved]
    busy = [b for b in taken if int(refs[b]) > 0]
    if busy:
        fail(
            f"{where} took block {busy[0]}, which {int(refs[busy[0]])} table(s) hold: a free "
            "block is one whose ref count is 0."
        )
    if moved and int(refs[table[last]]) == 1:
        fail(
            f"{where} copies a block only this sequence holds (ref count 1): write the token "
            "into that block itself; copy only when its ref count is above 1."
        )
    if not moved and n % bs and int(refs[table[last]]) > 1:
        fail(
            f"{where} writes into a block {int(refs[table[last]])} tables share: copy it into a "
            "free block first (copy-on-write), point the table at the copy and write there."
        )


def _reads_the_same(state: _Forks, i: int, k_pool, v_pool, table) -> bool:
    k, v = state.read(k_pool, v_pool, table, len(state.keys[i]))
    return torch.equal(k, state.keys[i]) and torch.equal(v, state.values[i])


def _expect_ref_counts(state: _Forks, got, table, new_table, others, where: str) -> None:
    __tracebackhide__ = True
    expected = state.recount([*others, new_table])
    if torch.equal(got.to(expected.dtype), expected):
        return
    old = [int(b) for b in table if int(b) not in new_table.tolist()]
    new = [int(b) for b in new_table if int(b) not in table.tolist()]
    if old and int(got[old[0]]) == int(state.ref_counts[old[0]]):
        fail(
            f"{where}: the shared block's ref count still counts this sequence after the copy: "
            "decrement it (ref_counts[old] -= 1)."
        )
    if new and int(got[new[0]]) != 1:
        fail(
            f"{where}: the block it took has ref count {int(got[new[0]])}: a block that one "
            "table holds has ref count 1."
        )
    fail(
        f"{where} returns ref counts that do not count the tables holding each block: only the "
        "blocks it took or let go of change."
    )
