"""Notebook 09's serving simulations: the KV memory a batch reserves, and batching schedules.

Shape legend: ``B`` the batch's slots (sequences served at once), ``L`` a sequence's length in
tokens, ``bs`` the paged cache's block size.

Both are counts, not timings: the same seed gives the same numbers on any machine, so the
notebook's plots and ``python -m autograder.bench.serving`` show the one computation.

- :func:`kv_slots` counts the KV slots a batch reserves: a contiguous cache holds ``max_len``
  per sequence, a paged one ``ceil(L / bs) * bs``.
- :func:`simulate` runs a queue of requests through ``B`` slots, one decoding step at a time.
  *Static* batching takes ``B`` requests, runs them until the longest is done, then takes the
  next ``B``: a slot whose request finished early idles (it is padding). *Continuous* batching
  (Orca, vLLM's scheduler) admits a waiting request into a slot the step after it frees. Each
  step gives one token to every request in a slot, the request's first token included (its
  prompt is prefilled in the step that admits it), so both policies do the same work and differ
  only in the steps they take.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import torch

POLICIES = ("static", "continuous")


def lognormal_lengths(n: int, median: float, sigma: float, cap: int, seed: int = 0) -> list[int]:
    """``n`` lengths drawn log-normal around ``median`` (chat lengths are skewed: most short, a
    few long), clamped to ``[1, cap]``."""
    gen = torch.Generator().manual_seed(seed)
    draws = (torch.randn(n, generator=gen, dtype=torch.float64) * sigma).exp() * median
    return [int(x) for x in draws.round().clamp(1, cap)]


@dataclass(frozen=True)
class Slots:
    """KV slots (positions of one layer's cache) a batch reserves and how many hold a token."""

    used: int
    contiguous: int
    paged: dict[int, int]  # block size -> slots

    def wasted(self, reserved: int) -> float:
        """The share of ``reserved`` slots that hold no token, in percent."""
        return 100 * (1 - self.used / reserved)


def kv_slots(lengths: list[int], max_len: int, block_sizes: list[int]) -> Slots:
    """Slots a contiguous cache (``max_len`` per sequence) and a paged one (whole blocks of each
    size in ``block_sizes``) reserve for sequences of ``lengths``."""
    return Slots(
        used=sum(lengths),
        contiguous=len(lengths) * max_len,
        paged={bs: sum(math.ceil(n / bs) * bs for n in lengths) for bs in block_sizes},
    )


@dataclass(frozen=True)
class Schedule:
    """What one policy did: the tokens of each step, over ``slots`` slots per step."""

    policy: str
    slots: int
    tokens_per_step: list[int]

    @property
    def steps(self) -> int:
        return len(self.tokens_per_step)

    @property
    def tokens(self) -> int:
        return sum(self.tokens_per_step)

    @property
    def throughput(self) -> float:
        """Tokens per step."""
        return self.tokens / self.steps

    @property
    def padding(self) -> float:
        """The share of slot-steps that produced no token, in percent."""
        return 100 * (1 - self.tokens / (self.steps * self.slots))


def simulate(outputs: list[int], slots: int, policy: str) -> Schedule:
    """Serve requests that produce ``outputs[i]`` tokens each, in order, ``slots`` at a time,
    with ``policy`` ``"static"`` or ``"continuous"`` (see the module docstring)."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    waiting, running, per_step = deque(outputs), [], []
    while waiting or running:
        if policy == "continuous" or not running:
            while waiting and len(running) < slots:
                running.append(waiting.popleft())  # remaining tokens of an admitted request
        per_step.append(len(running))
        running = [left - 1 for left in running if left > 1]
    return Schedule(policy, slots, per_step)
