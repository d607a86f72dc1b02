"""Benchmark: notebook 06's Triton attention kernel against SDPA and naive attention.

Shape legend: ``B`` batch, ``nh`` heads, ``T`` query length (= ``S`` here), ``hs`` head size.

    python -m autograder.bench.gpu_attention --out bench-out           # CUDA GPU, ≤ 5 minutes
    python -m autograder.bench.gpu_attention --out bench-out --tune    # + a launch-config search
    python -m autograder.bench.gpu_attention --quick --out /tmp/smoke  # anywhere, seconds

The kernel measured is the notebook's own: the ``triton_attention`` answer cell of
``solutions/06_gpu_attention/06_gpu_attention.py`` is loaded as a module, so the figures are
those of the code the course teaches. On a GPU, for T = 512 … 16384 (B·T = 16384 tokens,
nh·hs = 2048), causal and not: median milliseconds over CUDA-event-timed runs after warm-up,
achieved TFLOP/s (4·B·nh·T·S·hs FLOPs, half of that when causal) and the peak memory the call
allocated, written to ``gpu_attention.csv`` and ``gpu_attention.png``. The target: the Triton
kernel reaches at least half of SDPA's TFLOP/s at T = 4096, hs = 64, fp16.

``--quick`` without a GPU runs the kernel in Triton's interpreter at tiny sizes and compares it
with ``F.scaled_dot_product_attention`` (a correctness smoke test; exit status 1 on a mismatch).
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import sys
import tempfile
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F

from autograder import nbcell, paths
from autograder.tools import triton_support
from autograder.tools.nb06_gpu import attention_flops
from autograder.tools.nb06_gpu_timing import cuda_time_ms, measure, naive_attention, plot, sdpa

NOTEBOOK = "06_gpu_attention"
TRITON_CELL = "triton_attention"
_HEADER = (
    "import math\n\nimport torch\n\nfrom autograder.tools import triton_support\n"
    "from autograder.tools.triton_support import tl, triton\n\n"
)


def load_notebook_kernel(source: Path | None = None) -> Callable:
    """``triton_attention`` from the notebook's answer cell, imported from a temporary file.

    ``@triton.jit`` reads its function's source file, so the cell is written out as a module.
    """
    import jupytext

    source = source or paths.source_text(NOTEBOOK)
    cells = jupytext.read(source).cells
    cell = next(c for c in cells if nbcell.grade_id(c) == TRITON_CELL)
    folder = Path(tempfile.mkdtemp(prefix="nb06-kernel-"))
    module_file = folder / "nb06_triton_attention.py"
    module_file.write_text(_HEADER + cell.source + "\n", encoding="utf-8")
    spec = importlib.util.spec_from_file_location("nb06_triton_attention", module_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.triton_attention


def write_csv(rows: Sequence[dict], path: Path) -> None:
    """One row per dict, columns in the order of the first one."""
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def quick_check(triton_attention: Callable, echo=print) -> list[dict]:
    """Tiny shapes, fp32 and fp16, causal and not, ragged T and S: error against SDPA."""
    device = "cuda" if triton_support.MODE == "gpu" else "cpu"
    rows = []
    for dtype, tol in ((torch.float32, 3e-3 if device == "cuda" else 2e-5), (torch.float16, 5e-3)):
        for T, S, causal in ((40, 40, False), (24, 50, False), (40, 40, True), (20, 45, True)):
            gen = torch.Generator().manual_seed(T * S)
            q = torch.randn(1, 2, T, 32, generator=gen, dtype=torch.float64)
            k, v = (torch.randn(1, 2, S, 32, generator=gen, dtype=torch.float64) for _ in "kv")
            allowed = torch.ones(T, S, dtype=torch.bool).tril(S - T) if causal else None
            want = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
            got = triton_attention(*(t.to(device, dtype) for t in (q, k, v)), causal=causal)
            err = (got.cpu().double() - want).abs().max().item()
            row = {
                "dtype": str(dtype).removeprefix("torch."),
                "T": T,
                "S": S,
                "causal": causal,
                "max_abs_error": f"{err:.2e}",
                "ok": err <= tol,
            }
            rows.append(row)
            echo(" ".join(f"{key}={value}" for key, value in row.items()))
    return rows


def tune(triton_attention: Callable, hs: int = 64, T: int = 4096, echo=print) -> list[dict]:
    """Try launch configurations at one shape (fp16, not causal); fastest first."""
    B, nh = max(1, 16384 // T), 2048 // hs
    q, k, v = (torch.randn(B, nh, T, hs, device="cuda", dtype=torch.float16) for _ in range(3))
    flops = attention_flops(B, nh, T, T, hs)
    results = []
    for bm in (64, 128):
        for bn in (32, 64, 128):
            for warps in (4, 8):
                for stages in (2, 3, 4):
                    config = {
                        "BLOCK_M": bm,
                        "BLOCK_N": bn,
                        "num_warps": warps,
                        "num_stages": stages,
                    }
                    call = partial(triton_attention, q, k, v, config=config)
                    try:
                        ms = cuda_time_ms(call, warmup=3, reps=10)
                    except Exception as exc:  # noqa: BLE001 - e.g. out of shared memory
                        echo(f"{config}: failed ({type(exc).__name__})")
                        continue
                    results.append(
                        {
                            **config,
                            "hs": hs,
                            "T": T,
                            "ms": round(ms, 4),
                            "tflops": round(flops / ms / 1e9, 2),
                        }
                    )
                    echo(f"{config}: {flops / ms / 1e9:.1f} TFLOP/s")
    return sorted(results, key=lambda r: r["ms"])


def _summary(rows: Sequence[dict], echo=print) -> None:
    def tflops(method, causal):
        return next(
            (
                r["tflops"]
                for r in rows
                if r["method"] == method
                and r["T"] == 4096
                and r["hs"] == 64
                and r["causal"] == causal
                and r["tflops"] != ""
            ),
            None,
        )

    for causal in (False, True):
        mine, ref = tflops("triton (notebook)", causal), tflops("sdpa", causal)
        if mine and ref:
            verdict = "meets" if mine >= 0.5 * ref else "MISSES"
            echo(
                f"T=4096 hs=64 fp16 causal={causal}: triton {mine} vs SDPA {ref} TFLOP/s "
                f"= {mine / ref:.0%} ({verdict} the 50% target)"
            )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench-out"), help="output folder")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    parser.add_argument("--tune", action="store_true", help="also search launch configs (GPU)")
    parser.add_argument("--head-sizes", type=int, nargs="+", default=[64, 128])
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if not triton_support.AVAILABLE:
        print(triton_support.SKIP_MESSAGE)
        return 0
    print(triton_support.describe_mode())
    kernel = load_notebook_kernel()
    on_gpu = triton_support.MODE == "gpu"
    if not (args.quick or on_gpu):
        print("No CUDA GPU: running the --quick smoke test instead of the benchmark.")
    methods = {"triton (notebook)": kernel, "sdpa": sdpa(), "naive": naive_attention}
    ok = True
    if args.quick or not on_gpu:
        checks = quick_check(kernel)
        ok = all(r["ok"] for r in checks)
        write_csv(checks, args.out / "gpu_attention_quick.csv")
        device, dtype = ("cuda", torch.float16) if on_gpu else ("cpu", torch.float32)
        shape = dict(hs=64, tokens=2048, width=512) if on_gpu else dict(hs=32, tokens=64, width=64)
        rows = [
            row
            for causal in (False, True)
            for row in measure(
                methods,
                [32, 64] if not on_gpu else [512, 1024],
                dtype=dtype,
                causal=causal,
                reps=3,
                device=device,
                **shape,
            )
        ]
    else:
        print(
            f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton "
            f"{triton_support.triton.__version__}"
        )
        methods["sdpa flash"] = sdpa(torch.nn.attention.SDPBackend.FLASH_ATTENTION)
        methods["sdpa cudnn"] = sdpa(torch.nn.attention.SDPBackend.CUDNN_ATTENTION)
        rows = [
            row
            for hs in args.head_sizes
            for causal in (False, True)
            for row in measure(methods, [512, 1024, 2048, 4096, 8192, 16384], hs=hs, causal=causal)
        ]
        _summary(rows)
    write_csv(rows, args.out / "gpu_attention.csv")
    device_name = torch.cuda.get_device_name() if on_gpu else "CPU, Triton interpreter"
    plot(rows, device_name).savefig(args.out / "gpu_attention.png", dpi=120)
    if args.tune and on_gpu:
        best = tune(kernel)
        write_csv(best, args.out / "gpu_attention_tune.csv")
        print("fastest launch config:", best[0])
    print(f"wrote {args.out / 'gpu_attention.csv'} and {args.out / 'gpu_attention.png'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
