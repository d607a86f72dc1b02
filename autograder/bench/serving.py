"""Benchmark: the paged KV cache against contiguous preallocation, and continuous against static
batching, both counted in a simulation (notebook 09).

Shape legend: ``B`` slots (sequences served at once), ``L`` a sequence's length, ``bs`` the block
size.

    python -m autograder.bench.serving                # 64 sequences, 512 requests (< 1 s)
    python -m autograder.bench.serving --quick        # a smoke run
    python -m autograder.bench.serving --seed 3 --json out.json

1. Memory. ``--sequences`` log-normal lengths (median 300 tokens, sigma 1, capped at a 4096-token
   context): the KV slots a contiguous cache of 4096 per sequence reserves, against a paged
   cache's whole blocks for several block sizes, and the share of each that holds no token.
2. Batching. ``--requests`` requests with log-normal output lengths (median 128, capped at 2048)
   served ``--slots`` at a time, statically and continuously
   (:func:`autograder.tools.nb09_serving_sim.simulate`): steps, tokens per step, slot-steps
   wasted as padding. Both policies produce the same tokens, so the ratio of their steps is the
   speed-up when a step's cost does not depend on how many slots hold a request (decoding
   bound by reading the weights).

Counts, not timings: the same seed prints the same numbers on any machine.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from autograder.tools.nb09_serving_sim import POLICIES, kv_slots, lognormal_lengths, simulate

MAX_LEN = 4096
BLOCK_SIZES = [1, 8, 16, 32, 128, 512]
CONTEXT = {"median": 300, "sigma": 1.0, "cap": MAX_LEN}
OUTPUTS = {"median": 128, "sigma": 1.0, "cap": 2048}


def memory(sequences: int, seed: int) -> dict:
    """Slots reserved and wasted by each way of keeping ``sequences`` log-normal caches."""
    slots = kv_slots(lognormal_lengths(sequences, seed=seed, **CONTEXT), MAX_LEN, BLOCK_SIZES)
    rows = {"contiguous": slots.contiguous} | {f"paged, bs={b}": n for b, n in slots.paged.items()}
    return {
        "used": slots.used,
        "reserved": rows,
        "wasted_percent": {name: slots.wasted(n) for name, n in rows.items()},
    }


def batching(requests: int, slots: int, seed: int) -> dict:
    """Static against continuous batching of ``requests`` log-normal outputs in ``slots``."""
    outputs = lognormal_lengths(requests, seed=seed + 1, **OUTPUTS)
    runs = {policy: simulate(outputs, slots, policy) for policy in POLICIES}
    return {
        policy: {
            "steps": run.steps,
            "tokens": run.tokens,
            "tokens_per_step": run.throughput,
            "padding_percent": run.padding,
        }
        for policy, run in runs.items()
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m autograder.bench.serving", description=__doc__.split("\n")[0]
    )
    p.add_argument("--quick", action="store_true", help="8 sequences, 32 requests, 4 slots")
    p.add_argument("--seed", type=int, default=0, help="seed of every draw (default 0)")
    p.add_argument("--sequences", type=int, default=None, help="sequences in memory (64)")
    p.add_argument("--requests", type=int, default=None, help="requests to serve (512)")
    p.add_argument("--slots", type=int, default=None, help="requests served at once (32)")
    p.add_argument("--json", default=None, help="also write the results to this file")
    args = p.parse_args(argv)
    sequences = args.sequences or (8 if args.quick else 64)
    requests = args.requests or (32 if args.quick else 512)
    slots = args.slots or (4 if args.quick else 32)

    mem = memory(sequences, args.seed)
    print(
        f"## KV memory: {sequences} sequences, log-normal lengths (median {CONTEXT['median']}, "
        f"cap {MAX_LEN}), seed {args.seed}; {mem['used']:,} tokens"
    )
    print(f"  {'cache':16s} {'slots reserved':>15s} {'wasted':>8s}")
    for name, n in mem["reserved"].items():
        print(f"  {name:16s} {n:15,d} {mem['wasted_percent'][name]:7.1f}%")

    bat = batching(requests, slots, args.seed)
    print(
        f"## batching: {requests} requests, log-normal outputs (median {OUTPUTS['median']}, cap "
        f"{OUTPUTS['cap']}), {slots} slots"
    )
    print(f"  {'policy':10s} {'steps':>7s} {'tokens':>8s} {'tokens/step':>12s} {'padding':>8s}")
    for policy, r in bat.items():
        print(
            f"  {policy:10s} {r['steps']:7d} {r['tokens']:8d} {r['tokens_per_step']:12.2f} "
            f"{r['padding_percent']:7.1f}%"
        )
    speedup = bat["static"]["steps"] / bat["continuous"]["steps"]
    print(f"  continuous takes {speedup:.2f}x fewer steps for the same tokens")

    if args.json:
        results = {"seed": args.seed, "memory": mem, "batching": bat, "speedup": speedup}
        Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
