"""Toy next-token tasks, generated here (no downloads), on which attention heads specialise.

Shape legend: ``B`` batch, ``T`` sequence length (model input), ``V`` vocabulary size.

Every sequence starts with ``<s>`` (a beginning-of-sequence token) and a **topic** (``A``–``F``).
The rest is one of two kinds, drawn with equal probability:

- **repeat**: a pattern of ``n`` distinct letters (4 ≤ n ≤ 10) repeated until the end,
  e.g. ``<s> C q f w k q f w k q f w k ...``. Once the pattern has been seen, every next letter is
  predictable by looking up where the current letter last occurred and copying what followed it
  (an *induction* lookup).
- **copy**: filler letters, the pattern, the pattern again, filler,
  e.g. ``<s> B f e e h q r s t q r s t g f ? B e h``. Filler letters are drawn from the topic's own
  four letters (topic ``A`` owns ``a b c d``, ``B`` owns ``e f g h``, ...), and one filler slot is
  replaced by ``?`` followed by the topic again.

So a model can predict: the second copy of a pattern (induction), the token after ``?`` (always the
topic, at position 1: a positional lookup), and filler letters only up to their topic (1 in 4).
``Batch.scored`` marks the positions whose next token is fully determined by the context; accuracy
is measured there. The loss is over every position, as in language modelling.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import torch

LETTERS = [chr(ord("a") + i) for i in range(24)]  # a..x
TOPICS = [chr(ord("A") + i) for i in range(6)]  # A..F, topic i owns letters 4i..4i+3
BOS, QUERY = "<s>", "?"
TOKENS = LETTERS + TOPICS + [BOS, QUERY]
VOCAB_SIZE = len(TOKENS)
N_LETTERS, N_TOPICS = len(LETTERS), len(TOPICS)
BOS_ID, QUERY_ID = TOKENS.index(BOS), TOKENS.index(QUERY)
FILLER_PER_TOPIC = N_LETTERS // N_TOPICS
SEQ_LEN = 32
MIN_PATTERN, MAX_PATTERN = 4, 10
_INDEX = {tok: i for i, tok in enumerate(TOKENS)}


class Batch(NamedTuple):
    """Inputs and next-token targets: ``inputs[:, t + 1] == targets[:, t]``.

    ``scored`` (B, T) is True where the target is determined by the context (accuracy is measured
    there); ``recall`` (B, T) is True where the input is ``?`` and the target is the topic.
    """

    inputs: torch.Tensor  # (B, T) long
    targets: torch.Tensor  # (B, T) long
    scored: torch.Tensor  # (B, T) bool
    recall: torch.Tensor  # (B, T) bool


def encode(text: str) -> torch.Tensor:
    """Token ids ``(T,)`` of a string such as ``"<s> B qrst qrst ? B"`` (spaces are ignored).

    Every character is one token, except ``<s>``, which is added in front when missing.
    Raises ``ValueError`` for a character outside the vocabulary.
    """
    pieces = re.findall(r"<s>|\S", text)
    unknown = sorted({p for p in pieces if p not in _INDEX})
    if unknown:
        raise ValueError(f"unknown tokens {unknown}: use letters a-x, topics A-F, '?' and '<s>'")
    if not pieces or pieces[0] != BOS:
        pieces.insert(0, BOS)
    return torch.tensor([_INDEX[p] for p in pieces], dtype=torch.long)


def decode(ids) -> list[str]:
    """The token strings of a sequence of ids."""
    return [TOKENS[int(i)] for i in ids]


def _random_pick(candidates: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Index of one True entry per row, uniformly at random (rows need at least one True)."""
    noise = torch.rand(candidates.shape, generator=gen)  # (B, L)
    return torch.where(candidates, noise, torch.full_like(noise, -1.0)).argmax(-1)  # (B,)


def make_batch(
    batch_size: int,
    generator: torch.Generator | int = 0,
    seq_len: int = SEQ_LEN,
    p_repeat: float = 0.5,
) -> Batch:
    """A batch of toy sequences of ``seq_len`` inputs; an int ``generator`` is a seed."""
    gen = torch.Generator().manual_seed(generator) if isinstance(generator, int) else generator
    B, L = batch_size, seq_len + 1  # L tokens give seq_len (input, target) pairs
    if seq_len < 2 * MAX_PATTERN + 4:
        raise ValueError(f"seq_len must be at least {2 * MAX_PATTERN + 4}")
    topic = torch.randint(0, N_TOPICS, (B, 1), generator=gen)  # (B, 1)
    n = torch.randint(MIN_PATTERN, MAX_PATTERN + 1, (B, 1), generator=gen)  # (B, 1)
    # pattern letters: distinct, and never one of the topic's own filler letters
    own = torch.arange(N_LETTERS) // FILLER_PER_TOPIC == topic  # (B, N_LETTERS)
    order = (torch.rand(B, N_LETTERS, generator=gen) + 2.0 * own).argsort(-1)  # (B, N_LETTERS)
    repeat = torch.rand(B, 1, generator=gen) < p_repeat  # (B, 1)
    room = L - 2 - 2 * n  # (B, 1) filler slots of a "copy" sequence
    a = (torch.rand(B, 1, generator=gen) * (room + 1)).long()  # (B, 1) filler before the pattern
    j = torch.arange(L - 2).expand(B, -1)  # (B, L-2) position after <s> and the topic
    seg = torch.where(repeat, j, j - a)  # (B, L-2) index into the pattern (copy: may be outside)
    in_pattern = repeat | ((seg >= 0) & (seg < 2 * n))  # (B, L-2)
    letter = torch.gather(order, 1, seg.clamp(min=0) % n)  # (B, L-2)
    filler = topic * FILLER_PER_TOPIC + torch.randint(
        0, FILLER_PER_TOPIC, (B, L - 2), generator=gen
    )  # (B, L-2)
    body = torch.where(in_pattern, letter, filler)  # (B, L-2)
    tokens = torch.cat([torch.full((B, 1), BOS_ID), N_LETTERS + topic, body], 1)  # (B, L)

    pos = torch.arange(L).expand(B, -1)  # (B, L)
    second = 2 + a + n  # (B, 1) where the second copy starts
    determined = torch.where(
        repeat, pos >= n + 3, (pos > second) & (pos < second + n)
    )  # (B, L): token predictable from what comes before it
    # "? topic" into two consecutive filler slots of each copy sequence
    is_filler = torch.cat([torch.zeros(B, 2, dtype=torch.bool), ~in_pattern], 1)  # (B, L)
    slot = is_filler[:, :-1] & is_filler[:, 1:]  # (B, L-1): slots p and p+1 both filler
    has_slot = slot.any(-1, keepdim=True) & ~repeat  # (B, 1)
    p = _random_pick(slot | ~has_slot, gen)[:, None]  # (B, 1)
    is_query = has_slot & (pos == p)  # (B, L)
    is_answer = has_slot & (pos == p + 1)  # (B, L)
    tokens = torch.where(is_query, QUERY_ID, tokens)
    tokens = torch.where(is_answer, (N_LETTERS + topic).expand(B, L), tokens)
    determined = determined | is_answer
    return Batch(
        inputs=tokens[:, :-1],  # (B, T)
        targets=tokens[:, 1:],  # (B, T)
        scored=determined[:, 1:],  # (B, T)
        recall=is_query[:, :-1],  # (B, T)
    )


def example_texts() -> dict[str, str]:
    """Named inputs for the explorer: one of each kind, a recall, and an out-of-distribution one."""
    return {
        "copy": "<s> B efge qrstkl qrstkl hef ? B ge",
        "repeat": "<s> C waqu waqu waqu waqu waqu waqu waqu w",
        "recall": "<s> E qrqs rsqr ? E qs ? E rr",
        "random letters": "<s> A hxnmcgtlbwpeovj",
        "no pattern, all filler": "<s> D mnopmnopmponomnpo",
    }
