"""Benchmark: attention heads one after another vs all at once vs PyTorch's fused kernel.

Shape legend: ``B`` batch, ``T`` sequence length, ``C`` = d_model, ``nh`` heads, ``hs`` = C // nh.

    python -m autograder.bench.heads_timing            # full sweeps (a minute or two on 2 cores)
    python -m autograder.bench.heads_timing --quick    # tiny sizes, seconds: a smoke test
    python -m autograder.bench.heads_timing --threads 1  # steadier on a shared machine
    python -m autograder.bench.heads_timing --device cuda --json gpu.json

Three implementations of the same self-attention forward of a module with notebook 02's
interface (``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``, ``num_heads``):

- ``loop``: a Python loop over heads, each with its own slice of the weights (5·nh + 1 matmuls);
- ``batched``: one projection each, heads as a batch dimension (6 matmuls whatever nh);
- ``fused``: ``batched`` with ``F.scaled_dot_product_attention`` (4 matmuls + 1 fused call).

Sweeps against nh at fixed T and against T at fixed nh (on the CPU, the sizes of notebook 05's
experiments). Each point is timed with warm-up calls and interleaved rounds
(``autograder.tools.timing.time_interleaved``); the table reports medians. Timings depend on the
machine and on its load: this is a measurement to read, never a test to pass.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from datetime import date

import torch

from autograder.tools.modules import TorchMultiHeadAttention
from autograder.tools.nb05_parallel_heads import IMPLEMENTATIONS
from autograder.tools.timing import count_ops, median, time_interleaved


def measure(B: int, T: int, C: int, nh: int, repeats: int, device: str) -> dict:
    """Median seconds and op counts of every implementation at one size."""
    torch.manual_seed(0)
    mha = TorchMultiHeadAttention(C, nh).to(device).eval()
    x = torch.randn(B, T, C, device=device)
    fns = {name: (lambda f=f: f(x, mha)) for name, f in IMPLEMENTATIONS.items()}
    times = time_interleaved(fns, repeats=repeats, warmup=2, device=device)
    return {
        "B": B,
        "T": T,
        "C": C,
        "nh": nh,
        "median_s": {name: median(t) for name, t in times.items()},
        "big_ops": {name: count_ops(f, x, mha).big_ops for name, f in IMPLEMENTATIONS.items()},
    }


def _row(r: dict) -> str:
    t, ops = r["median_s"], r["big_ops"]
    return (
        f"{r['B']:>3} {r['T']:>5} {r['C']:>5} {r['nh']:>4} | {1e3 * t['loop']:>10.3f} "
        f"{1e3 * t['batched']:>10.3f} {1e3 * t['fused']:>10.3f} | "
        f"{t['loop'] / t['batched']:>12.2f} {t['loop'] / t['fused']:>10.2f} | "
        f"{ops['loop']:>4} {ops['batched']:>4} {ops['fused']:>4}"
    )


HEADER = (
    f"{'B':>3} {'T':>5} {'C':>5} {'nh':>4} | {'loop ms':>10} {'batched ms':>10} "
    f"{'fused ms':>10} | {'loop/batched':>12} {'loop/fused':>10} | big ops l/b/f"
)


def sweeps(device: str, quick: bool) -> dict[str, list[tuple[int, int, int, int]]]:
    """Name -> the ``(B, T, C, nh)`` points of each sweep.

    On the CPU these are notebook 05's three experiments, so its plots can be compared with a
    run of this script; a GPU gets sizes large enough to keep it busy.
    """
    if quick:
        return {
            "by_heads": [(1, 8, 16, nh) for nh in (1, 2, 4)],
            "by_length": [(1, T, 16, 2) for T in (8, 16)],
        }
    if device == "cpu":
        return {
            "small_by_heads": [(1, 16, 64, nh) for nh in (1, 2, 4, 8, 16, 32)],
            "by_heads": [(4, 128, 256, nh) for nh in (1, 2, 4, 8, 16, 32)],
            "by_length": [(2, T, 256, 8) for T in (32, 64, 128, 256, 512, 1024)],
        }
    return {
        "by_heads": [(8, 1024, 1024, nh) for nh in (1, 2, 4, 8, 16, 32, 64)],
        "by_length": [(8, T, 1024, 16) for T in (256, 512, 1024, 2048, 4096)],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m autograder.bench.heads_timing", description=__doc__.splitlines()[0]
    )
    p.add_argument("--quick", action="store_true", help="tiny sizes and 3 repeats (seconds)")
    p.add_argument("--device", default="cpu", help="cpu (default), cuda or mps")
    p.add_argument("--repeats", type=int, default=None, help="timed rounds per point")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch.set_num_threads (1 gives steadier numbers on a busy machine)",
    )
    p.add_argument("--json", default=None, help="also write the results to this file")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    repeats = args.repeats or (3 if args.quick else 15)
    device_name = (
        torch.cuda.get_device_name()
        if args.device == "cuda"
        else f"{platform.processor() or platform.machine()} CPU"
    )
    print(
        f"# {date.today()} | torch {torch.__version__} | {args.device}: {device_name} | "
        f"{torch.get_num_threads()} threads | {repeats} interleaved rounds, medians"
    )
    results = {
        "date": str(date.today()),
        "torch": torch.__version__,
        "device": device_name,
        "threads": torch.get_num_threads(),
        "repeats": repeats,
    }
    for name, points in sweeps(args.device, args.quick).items():
        print(f"\n## {name.replace('_', ' ')}\n{HEADER}")
        results[name] = []
        for B, T, C, nh in points:
            results[name].append(measure(B, T, C, nh, repeats, args.device))
            print(_row(results[name][-1]), flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
