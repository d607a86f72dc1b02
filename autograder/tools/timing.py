"""Counting operations and timing them fairly: tools for notebooks 05 and 06.

Shape legend: ``B`` batch, ``T`` query length, ``S`` key/value length, ``C`` = d_model,
``nh`` heads, ``hs`` = C // nh.

Counting is deterministic, so it can be graded; timing is not, so it never is.

- :class:`OpCounter` is a ``TorchDispatchMode``: while active it sees every ATen operation that
  runs. It counts them by name, counts the matrix-product family and fused attention calls
  separately, adds up the bytes those products read and write, and remembers the largest tensor
  any operation created (views and in-place results excluded, as they allocate nothing).
  :func:`count_ops` runs a function under it.
- :func:`time_interleaved` times several functions fairly: warm-up calls first, then rounds in
  which every function runs once, in a rotating order, so that background load hits all of
  them alike. Report medians (:func:`median`), never a single run.

Op names depend on the grad mode: under ``torch.no_grad()`` a linear layer shows up as
``addmm`` (or ``mm``) and ``@`` as ``bmm``; under ``torch.inference_mode()`` as ``linear`` and
``matmul``. All of them are in :data:`MATMUL_OPS`, so the counts agree.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

# Matrix products as they reach the dispatcher, whatever the grad mode.
MATMUL_OPS = frozenset(
    {
        "mm",
        "bmm",
        "addmm",
        "baddbmm",
        "addbmm",
        "_addmm_activation",
        "matmul",
        "linear",
        "einsum",
        "mv",
        "addmv",
        "dot",
        "vdot",
        "inner",
        "outer",
        "tensordot",
        "bilinear",
        "chain_matmul",
        "linalg_multi_dot",
        "_int_mm",
        "_scaled_mm",
    }
)
# Fused attention: one call does q @ kᵀ, the softmax and @ v for every head at once.
SDPA_OPS = frozenset(
    {
        "scaled_dot_product_attention",
        "_scaled_dot_product_attention_math",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_fused_attention_overrideable",
        "_scaled_dot_product_attention_math_for_mps",
        "_flash_attention_forward",
        "_efficient_attention_forward",
    }
)


def _op_name(func) -> str:
    """``aten::addmm`` -> ``addmm``."""
    return func._schema.name.split("::")[-1]


class OpCounter(TorchDispatchMode):
    """Count the ATen operations that run while active (see the module docstring).

    Attributes:
        ops: ``Counter`` of operation names, e.g. ``{"addmm": 4, "bmm": 2, ...}``.
        matmul_bytes: bytes read and written by the matrix products and fused attention calls.
        largest_numel, largest_shape, largest_op: the biggest tensor an operation created.
    """

    def __init__(self):
        super().__init__()
        self.ops: Counter[str] = Counter()
        self.matmul_bytes = 0
        self.largest_numel = 0
        self.largest_shape: tuple[int, ...] = ()
        self.largest_op = ""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = _op_name(func)
        self.ops[name] += 1
        outputs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        if name in MATMUL_OPS or name in SDPA_OPS:
            inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
            self.matmul_bytes += sum(t.numel() * t.element_size() for t in inputs + outputs)
        aliases = func.is_view or any(r.alias_info is not None for r in func._schema.returns)
        if not aliases:
            for t in outputs:
                if t.numel() > self.largest_numel:
                    self.largest_numel, self.largest_shape = t.numel(), tuple(t.shape)
                    self.largest_op = name
        return out

    @property
    def matmuls(self) -> int:
        """Number of matrix-product calls (``mm``, ``bmm``, ``addmm``, ``linear``, ...)."""
        return sum(n for name, n in self.ops.items() if name in MATMUL_OPS)

    @property
    def sdpa_calls(self) -> int:
        """Number of fused attention calls (``scaled_dot_product_attention`` and its kernels)."""
        return sum(n for name, n in self.ops.items() if name in SDPA_OPS)

    @property
    def big_ops(self) -> int:
        """Matrix products plus fused attention calls: the work that dominates the cost."""
        return self.matmuls + self.sdpa_calls

    @property
    def total(self) -> int:
        """Every operation, views and element-wise ones included."""
        return sum(self.ops.values())

    def summary(self) -> str:
        """One line, e.g. ``"6 matmuls + 0 fused attention calls (31 ops in all)"``."""
        return (
            f"{self.matmuls} matmuls + {self.sdpa_calls} fused attention calls "
            f"({self.total} ops in all)"
        )


_GRAD_MODES = {
    "no_grad": torch.no_grad,
    "inference_mode": torch.inference_mode,
    "enable_grad": torch.enable_grad,
}


def count_ops(
    fn: Callable[..., Any], *args: Any, grad_mode: str = "no_grad", **kwargs: Any
) -> OpCounter:
    """Run ``fn(*args, **kwargs)`` once under an :class:`OpCounter` and return the counter.

    ``grad_mode`` is ``"no_grad"`` (default), ``"inference_mode"`` or ``"enable_grad"``.
    """
    counter = OpCounter()
    with _GRAD_MODES[grad_mode](), counter:
        fn(*args, **kwargs)
    return counter


def _synchronize(device: torch.device | str | None) -> None:
    """Wait for queued GPU work, so a clock reading covers the work and not just its launch."""
    kind = torch.device(device).type if device is not None else "cpu"
    if kind == "cuda":
        torch.cuda.synchronize()
    elif kind == "mps":
        torch.mps.synchronize()


def time_interleaved(
    fns: Mapping[str, Callable[[], Any]],
    repeats: int = 15,
    warmup: int = 2,
    device: torch.device | str | None = None,
) -> dict[str, list[float]]:
    """Seconds per call of each zero-argument function, measured fairly.

    Every function first runs ``warmup`` times untimed (first calls pay for memory allocation,
    caches and lazy initialisation). Then ``repeats`` rounds each run every function once, the
    order rotating from round to round, so slow moments of a shared machine spread over all of
    them. On a GPU the device is synchronised around each timed call. Runs under ``no_grad``.
    """
    names = list(fns)
    times: dict[str, list[float]] = {name: [] for name in names}
    with torch.no_grad():
        for name in names:
            for _ in range(warmup):
                fns[name]()
        _synchronize(device)
        for r in range(repeats):
            for i in range(len(names)):
                name = names[(i + r) % len(names)]
                start = time.perf_counter()
                fns[name]()
                _synchronize(device)
                times[name].append(time.perf_counter() - start)
    return times


def median(samples: Sequence[float]) -> float:
    """The middle value: unlike the mean, one slow outlier barely moves it."""
    return float(statistics.median(samples))


def quartiles(samples: Sequence[float]) -> tuple[float, float]:
    """The 25th and 75th percentiles: the spread of the middle half of the runs."""
    low, high = np.percentile(np.asarray(samples, dtype=np.float64), [25, 75])
    return float(low), float(high)


def _new_ax(ax: Axes | None, figsize: tuple[float, float]) -> Axes:
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def plot_timings(
    xs: Sequence[float],
    samples: Mapping[str, Sequence[Sequence[float]]],
    xlabel: str,
    ax: Axes | None = None,
    title: str | None = None,
    unit: str = "ms",
) -> Axes:
    """Median time per call against ``xs``, one line per name, the middle half shaded.

    ``samples[name][i]`` holds the measured seconds at ``xs[i]``. Both axes are logarithmic, so
    a straight line means a power law and equal gaps mean equal ratios.
    """
    scale = {"s": 1.0, "ms": 1e3, "us": 1e6}[unit]
    ax = _new_ax(ax, (6.0, 3.6))
    x = np.asarray(xs, dtype=np.float64)
    for name, per_x in samples.items():
        med = np.array([median(s) for s in per_x]) * scale
        low, high = (np.array(v) * scale for v in zip(*(quartiles(s) for s in per_x), strict=True))
        (line,) = ax.plot(x, med, "o-", label=name)
        ax.fill_between(x, low, high, color=line.get_color(), alpha=0.2)
    ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel=f"median time per call ({unit})")
    ax.set_xticks(x, [f"{v:g}" for v in x])
    ax.minorticks_off()
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8)
    return ax


def plot_op_counts(
    xs: Sequence[float],
    counts: Mapping[str, Sequence[int]],
    xlabel: str = "number of heads nh",
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Operation counts against ``xs`` on log-log axes, one line per name, points labelled.

    Labels of different lines are stacked, so lines that overlap stay readable.
    """
    ax = _new_ax(ax, (6.0, 3.4))
    for k, (name, values) in enumerate(counts.items()):
        (line,) = ax.plot(xs, values, "o-", label=name)
        for x, v in zip(xs, values, strict=True):
            ax.annotate(
                str(v),
                (x, v),
                textcoords="offset points",
                xytext=(0, 4 + 9 * k),
                ha="center",
                fontsize=7,
                color=line.get_color(),
            )
    ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="calls")
    ax.margins(y=0.25)
    ax.set_xticks(list(xs), [f"{v:g}" for v in xs])
    ax.minorticks_off()
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8)
    return ax


def plot_bars(
    values: Mapping[str, float],
    ylabel: str,
    ax: Axes | None = None,
    title: str | None = None,
    fmt: str = "{:,.0f}",
) -> Axes:
    """One labelled bar per name, its value written on top (e.g. FLOPs or bytes)."""
    ax = _new_ax(ax, (1.9 * len(values) + 2.0, 3.2))
    names, heights = list(values), [float(v) for v in values.values()]
    bars = ax.bar(names, heights, color=plt.get_cmap("tab10").colors[: len(heights)])
    ax.bar_label(bars, labels=[fmt.format(v) for v in heights], padding=2, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, max(heights) * 1.18 if heights and max(heights) > 0 else 1)
    ax.tick_params(axis="x", labelsize=8)
    if title:
        ax.set_title(title)
    return ax
