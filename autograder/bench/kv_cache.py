"""Benchmark: decoding with and without a KV cache, and KV-cache memory for MHA, GQA and MQA.

Shape legend: ``B`` batch, ``S`` positions, ``nh`` query heads, ``nkv`` key/value heads,
``hs`` head size.

    python -m autograder.bench.kv_cache                 # 256 new tokens, 5 repeats (~1 min)
    python -m autograder.bench.kv_cache --quick         # tiny model, seconds: a smoke test
    python -m autograder.bench.kv_cache --plot out/     # also save the two pictures as PNG

1. Speed. A small GPT-style decoder (:class:`autograder.tools.nb04_gqa.TinyDecoder`, random weights,
   grouped-query attention) generates greedily, once recomputing the whole sequence at every step
   and once feeding one token at a time with the cache. Warm-up first, then interleaved repeats;
   the table reports medians. Both runs must produce the same tokens.
2. Memory. The KV cache of a Llama-2-70B-like model (80 layers, 64 query heads of 128) with 64
   (MHA), 8 (GQA, the published model) and 1 (MQA) kv heads, counted from the cache tensors
   themselves, built on the meta device (no memory used). The tiny model's real cache is
   counted too, and must match the same formula.

Timings depend on the machine and its load: this is a measurement to read, never a test to pass.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import torch

from autograder.tools.nb04_gqa import TinyDecoder, benchmark_decoding, cache_nbytes, meta_cache

LLAMA2_70B = {"num_layers": 80, "num_heads": 64, "head_dim": 128}  # from the published config
KV_CHOICES = {"MHA (64 kv heads)": 64, "GQA (8 kv heads)": 8, "MQA (1 kv head)": 1}
SEQ_LENS = [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
FULL = {"d_model": 192, "num_layers": 2, "num_heads": 8, "num_kv_heads": 2, "vocab": 512}
QUICK = {"d_model": 32, "num_layers": 2, "num_heads": 4, "num_kv_heads": 2, "vocab": 64}


def measure_speed(cfg: dict, prompt_len: int, new_tokens: int, repeats: int):
    """Median tokens/s with and without the cache for a random-weight ``TinyDecoder``."""
    torch.manual_seed(0)
    model = TinyDecoder(
        vocab_size=cfg["vocab"],
        d_model=cfg["d_model"],
        num_layers=cfg["num_layers"],
        num_heads=cfg["num_heads"],
        num_kv_heads=cfg["num_kv_heads"],
        max_len=prompt_len + new_tokens,
    )
    prompt = torch.randint(
        0, cfg["vocab"], (1, prompt_len), generator=torch.Generator().manual_seed(0)
    )
    bench = benchmark_decoding(model, prompt, new_tokens, repeats=repeats)
    with torch.inference_mode():
        _, caches = model(torch.cat([prompt, bench.runs["KV cache"][0].tokens], dim=1))
    hs = cfg["d_model"] // cfg["num_heads"]
    formula = 2 * cfg["num_layers"] * cfg["num_kv_heads"] * hs * (prompt_len + new_tokens) * 4
    return bench, {"measured": cache_nbytes(caches), "formula_fp32": formula}


def memory_table(seq_lens: list[int]) -> dict[str, list[int]]:
    """Bytes of the fp16 KV cache of a Llama-2-70B-like model, per kv-head choice and length."""
    L, hd = LLAMA2_70B["num_layers"], LLAMA2_70B["head_dim"]
    return {
        name: [cache_nbytes(meta_cache(L, nkv, hd, S, dtype=torch.float16)) for S in seq_lens]
        for name, nkv in KV_CHOICES.items()
    }


def _save_plots(folder: Path, bench, memory: dict, seq_lens: list[int]) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    from autograder.tools import nb04_gqa_plots

    folder.mkdir(parents=True, exist_ok=True)
    speed = nb04_gqa_plots.plot_decode_benchmark(bench)
    speed.savefig(folder / "kv_cache_speed.png", dpi=120, bbox_inches="tight")
    ax = nb04_gqa_plots.plot_kv_cache_memory(
        seq_lens,
        memory,
        80e9,
        "80 GB accelerator",
        title="Llama-2-70B-like KV cache, fp16, batch 1",
    )
    ax.figure.savefig(folder / "kv_cache_memory.png", dpi=120, bbox_inches="tight")
    return [folder / "kv_cache_speed.png", folder / "kv_cache_memory.png"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m autograder.bench.kv_cache", description=__doc__.split("\n")[0]
    )
    p.add_argument("--quick", action="store_true", help="tiny model, 16 tokens (seconds)")
    p.add_argument("--tokens", type=int, default=None, help="tokens to generate (default 256)")
    p.add_argument("--repeats", type=int, default=None, help="timed repeats (default 5)")
    p.add_argument("--plot", default=None, help="save the pictures as PNG into this folder")
    p.add_argument("--json", default=None, help="also write the results to this file")
    args = p.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    new_tokens = args.tokens or (16 if args.quick else 256)
    repeats = args.repeats or (2 if args.quick else 5)
    prompt_len = 4 if args.quick else 16

    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}, 1 thread")
    print(f"decoder: {cfg}, prompt {prompt_len} tokens, {new_tokens} new, {repeats} repeats")
    bench, nbytes = measure_speed(cfg, prompt_len, new_tokens, repeats)
    for name in bench.runs:
        print(f"  {name:9s} {bench.tokens_per_s(name):9.1f} tokens/s (median)")
    print(f"  speed-up {bench.speedup:.1f}x, same tokens: {bench.same_tokens}")
    print(
        f"  tiny model's cache: {nbytes['measured']:,} B measured, {nbytes['formula_fp32']:,} B "
        "by formula (fp32)"
    )

    seq_lens = SEQ_LENS[:3] if args.quick else SEQ_LENS
    memory = memory_table(seq_lens)
    per_token = {name: values[0] // seq_lens[0] for name, values in memory.items()}
    print("Llama-2-70B-like KV cache, fp16, batch 1 (GB = 1e9 bytes):")
    print(f"  {'tokens':>8s} " + " ".join(f"{name:>18s}" for name in memory))
    for i, S in enumerate(seq_lens):
        print(f"  {S:8d} " + " ".join(f"{values[i] / 1e9:18.2f}" for values in memory.values()))
    print("  per token: " + ", ".join(f"{n} {b:,} B" for n, b in per_token.items()))

    results = {
        "decoder": cfg,
        "new_tokens": new_tokens,
        "tokens_per_s": {name: bench.tokens_per_s(name) for name in bench.runs},
        "speedup": bench.speedup,
        "same_tokens": bench.same_tokens,
        "cache_bytes": nbytes,
        "memory_bytes": {"seq_lens": seq_lens, **memory},
    }
    if args.plot:
        for path in _save_plots(Path(args.plot), bench, memory, seq_lens):
            print(f"saved {path}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")
    ok = bench.same_tokens and nbytes["measured"] == nbytes["formula_fp32"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
