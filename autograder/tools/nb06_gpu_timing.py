"""Notebook 06's timing of attention on a GPU: CUDA-event timing, peak memory, a sweep over T.

Shape legend: ``B`` batch, ``nh`` heads, ``T`` query length, ``S`` key/value length, ``hs`` head
size. ``python -m autograder.bench.gpu_attention`` runs the full sweep and writes a CSV and a PNG.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from functools import partial

import torch
import torch.nn.functional as F

from autograder.tools.nb06_gpu import attention_flops

FIELDS = ["method", "dtype", "causal", "B", "nh", "T", "hs", "ms", "tflops", "peak_mib", "note"]


def naive_attention(q, k, v, causal=False):
    """softmax(q kᵀ / √hs) v with the whole (T, S) score matrix in memory."""
    T, S = q.shape[-2], k.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, nh, T, S)
    if causal:
        allowed = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(S - T)  # (T, S)
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v  # (B, nh, T, S) @ (B, nh, S, hs) -> (B, nh, T, hs)


def sdpa(backend=None) -> Callable:
    """SDPA, left to choose its backend or restricted to ``backend``; causal is top-left, which
    equals bottom-right here because S = T."""

    def run(q, k, v, causal=False):
        if backend is None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        with torch.nn.attention.sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return run


def cuda_time_ms(fn: Callable[[], object], warmup: int = 5, reps: int = 30) -> float:
    """Median milliseconds per call of ``fn`` on the GPU.

    Kernel launches return before the GPU has finished, so a wall clock read right after a call
    measures the launch, not the work. CUDA events are recorded into the stream around each call
    and read after ``torch.cuda.synchronize()``. The first calls (Triton's compilation, cuDNN's
    plan choice, the allocator growing its pool) are warm-up and not timed.
    """
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def peak_memory_mib(fn: Callable[[], object]) -> float:
    """MiB the call allocated at its peak, beyond what was allocated before it."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def cpu_time_ms(fn: Callable[[], object], warmup: int = 1, reps: int = 5) -> float:
    """Median milliseconds per call on the CPU (a wall clock is right there: calls are blocking)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(1e3 * (time.perf_counter() - start))
    return statistics.median(times)


def measure(
    methods: dict[str, Callable],
    seq_lens: Sequence[int],
    hs: int = 64,
    dtype: torch.dtype = torch.float16,
    causal: bool = False,
    tokens: int = 16384,
    width: int = 2048,
    reps: int = 30,
    device: str = "cuda",
    echo=print,
) -> list[dict]:
    """Time every method at every T with B = tokens // T and nh = width // hs; one row each.

    On a GPU: CUDA-event medians and the peak memory of the call. On a CPU (the smoke test):
    wall-clock medians, no memory figure.
    """
    nh = width // hs
    on_gpu = device == "cuda"
    budget = torch.cuda.get_device_properties(0).total_memory // 4 if on_gpu else 2**31
    rows = []
    for T in seq_lens:
        B = max(1, tokens // T)
        q, k, v = (torch.randn(B, nh, T, hs, device=device, dtype=dtype) for _ in range(3))
        flops = attention_flops(B, nh, T, T, hs, causal)
        for name, fn in methods.items():
            row = {
                "method": name,
                "dtype": str(dtype).removeprefix("torch."),
                "causal": causal,
                "B": B,
                "nh": nh,
                "T": T,
                "hs": hs,
                "ms": "",
                "tflops": "",
                "peak_mib": "",
                "note": "",
            }
            if name.startswith("naive") and 3 * B * nh * T * T * q.element_size() > budget:
                row["note"] = "skipped: the (T, S) matrices would not fit comfortably"
                rows.append(row)
                continue
            call = partial(fn, q, k, v, causal=causal)
            try:
                if on_gpu:
                    ms = cuda_time_ms(call, reps=reps)
                    row["peak_mib"] = round(peak_memory_mib(call), 1)
                else:
                    ms = cpu_time_ms(call, reps=reps)
                row.update(ms=float(f"{ms:.4g}"), tflops=float(f"{flops / ms / 1e9:.4g}"))
            except (RuntimeError, ValueError) as exc:  # a backend that cannot take the inputs
                row["note"] = f"unavailable: {str(exc).splitlines()[0][:80]}"
                if on_gpu:
                    torch.cuda.empty_cache()
            rows.append(row)
            echo(" ".join(f"{key}={row[key]}" for key in FIELDS if row[key] != ""))
    return rows


def plot(rows: Sequence[dict], title: str = ""):
    """TFLOP/s and peak memory against T: one row of panels per head size, one colour per
    method, dashed lines for causal attention."""
    import matplotlib.pyplot as plt

    head_sizes = sorted({r["hs"] for r in rows})
    methods = list(dict.fromkeys(r["method"] for r in rows))
    colours = dict(zip(methods, plt.get_cmap("tab10").colors, strict=False))
    fig, axes = plt.subplots(len(head_sizes), 2, figsize=(12, 4 * len(head_sizes)), squeeze=False)
    for (ax_speed, ax_mem), hs in zip(axes, head_sizes, strict=True):
        for method in methods:
            for causal in (False, True):
                key = (method, causal, hs)
                pts = [
                    r
                    for r in rows
                    if (r["method"], r["causal"], r["hs"]) == key and r["tflops"] != ""
                ]
                style = dict(
                    color=colours[method],
                    ls="--" if causal else "-",
                    marker="o",
                    label=f"{method}{', causal' if causal else ''}",
                )
                if pts:
                    ax_speed.plot([r["T"] for r in pts], [r["tflops"] for r in pts], **style)
                mem = [r for r in pts if r["peak_mib"] != ""]
                if mem:
                    ax_mem.plot([r["T"] for r in mem], [r["peak_mib"] for r in mem], **style)
        seq_lens = sorted({r["T"] for r in rows})
        for ax in (ax_speed, ax_mem):
            ax.set_xscale("log")
            ax.set_xticks(seq_lens, [str(t) for t in seq_lens])
            ax.minorticks_off()
            ax.set_xlabel("sequence length T (B·T fixed)")
        ax_speed.set(ylabel="achieved TFLOP/s", title=f"{title}, hs={hs}")
        ax_mem.set(ylabel="peak memory of the call (MiB)", title="memory (GPU only)")
        if ax_mem.lines:
            ax_mem.set_yscale("log")
        ax_speed.legend(fontsize=7)
    fig.tight_layout()
    return fig
