"""Triton for notebook 06, on a GPU or in Triton's CPU interpreter, or cleanly absent.

Shape legend: ``B`` batch, ``nh`` heads, ``T`` query length, ``S`` key/value length,
``hs`` head size.

Importing this module decides how Triton kernels will run, *before* any ``@triton.jit`` runs
(``triton.jit`` reads ``TRITON_INTERPRET`` when it decorates a function, not when it runs it):

- a CUDA GPU is present: kernels are compiled for it, and ``TRITON_INTERPRET`` is switched off
  if it was on (the interpreter on a GPU machine would silently run CPU code, very slowly);
- no CUDA GPU: ``TRITON_INTERPRET=1``, so kernels run in the interpreter on CPU tensors;
- Triton cannot be imported (no wheels for macOS or Windows): :data:`triton` and :data:`tl`
  are stand-ins that let kernel cells *define* without error, and launching a kernel raises
  :class:`TritonUnavailable`; the checks print :data:`SKIP_MESSAGE` and pass.

:func:`check_inputs` rejects what compiles on one side and not the other (``tl.dot`` needs inner
sizes of at least 16 on a GPU; the interpreter accepts 8 and is silently exact) so that a mistake
fails the same way with and without a GPU.
"""

from __future__ import annotations

import os
from typing import Any

import torch

__all__ = [
    "AVAILABLE",
    "MODE",
    "SKIP_MESSAGE",
    "TritonUnavailable",
    "check_inputs",
    "check_kernel_mode",
    "describe_mode",
    "launch_config",
    "tl",
    "triton",
]

SKIP_MESSAGE = "Triton is not available on this platform; this exercise is skipped."


class TritonUnavailable(RuntimeError):
    """Raised when a kernel is launched where Triton cannot be imported."""


def _configure_interpreter() -> None:
    if torch.cuda.is_available():
        os.environ.pop("TRITON_INTERPRET", None)  # never interpret where a GPU exists
    else:
        os.environ["TRITON_INTERPRET"] = "1"


class _Missing:
    """Stands in for ``triton`` / ``triton.language`` where Triton cannot be imported."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str) -> _Missing:
        if attr.startswith("__"):  # keep inspect, pickle and IPython's display from looping
            raise AttributeError(attr)
        return _Missing(f"{self._name}.{attr}")

    def __repr__(self) -> str:
        return f"<{self._name}: Triton is not installed>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._name == "triton.jit" and len(args) == 1 and callable(args[0]) and not kwargs:
            return _Missing(f"kernel {args[0].__name__}")
        if self._name == "triton.jit" and not args:
            return lambda fn: _Missing(f"kernel {fn.__name__}")
        raise TritonUnavailable(f"{SKIP_MESSAGE} (`{self._name}` cannot run without Triton)")

    def __getitem__(self, grid: Any) -> _Missing:
        return _Missing(f"{self._name}[grid]")


_configure_interpreter()
try:
    import triton
    import triton.language as tl

    AVAILABLE = True
except Exception:  # noqa: BLE001 - ImportError, or a broken install: the exercise is skipped
    triton = _Missing("triton")
    tl = _Missing("triton.language")
    AVAILABLE = False

#: ``"gpu"``, ``"interpreter"`` or ``"unavailable"``: how Triton kernels run in this process.
MODE = "unavailable" if not AVAILABLE else "gpu" if torch.cuda.is_available() else "interpreter"


def _index_scalars_of_one_element() -> None:
    """Triton's interpreter before 3.7 (the one torch 2.6 to 2.10 bring) turns a tensor into an
    index with ``int(ndarray)``, which numpy 2.4 refuses for a one-element array that is not
    0-d, so the notebook's kernel failed there (``make test-compat``). Triton 3.7 squeezes the
    array first; an older interpreter gets that line after its own."""
    import inspect

    from triton.runtime import interpreter

    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None or "squeeze" in inspect.getsource(original):
        return

    def patch(tensor, *args, **kwargs):
        original(tensor, *args, **kwargs)
        tensor.__index__ = lambda self: int(self.handle.data.squeeze())

    interpreter._patch_lang_tensor = patch


if MODE == "interpreter":
    _index_scalars_of_one_element()


def describe_mode() -> str:
    """One sentence for the learner about how Triton kernels will run here."""
    if MODE == "gpu":
        return f"Triton kernels are compiled for {torch.cuda.get_device_name()}."
    if MODE == "interpreter":
        return (
            "No CUDA GPU: Triton kernels run in Triton's CPU interpreter (TRITON_INTERPRET=1), "
            "which is exact but slow, so use tiny shapes."
        )
    return SKIP_MESSAGE


def check_kernel_mode(kernel: Any) -> None:
    """Raise a clear error when ``kernel`` was defined in the wrong mode for this machine."""
    interpreted = type(kernel).__name__ == "InterpretedFunction"
    if MODE == "interpreter" and not interpreted:
        raise RuntimeError(
            "This kernel was compiled for a GPU but there is none: TRITON_INTERPRET=1 must be set "
            "before @triton.jit runs, so run the setup cell, then re-run the kernel's cell."
        )
    if MODE == "gpu" and interpreted:
        raise RuntimeError(
            "This kernel was defined with TRITON_INTERPRET=1 on a GPU machine: unset it, restart "
            "the kernel and run the notebook from the top."
        )


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def launch_config(q: torch.Tensor) -> dict[str, int]:
    """Block sizes and launch settings for the attention kernel on ``q``'s device and dtype.

    On a GPU: 128 queries × 64 keys per step, fp32 accumulators in registers, software pipelining
    over 3 stages (2 when the tiles are large), 4 warps (8 for hs = 128 and up), as in
    FlashAttention-2 and Triton's fused-attention tutorial. In the interpreter, where each
    (program, key block) step costs milliseconds whatever its size: 32 × 32, so that tiny test
    shapes still cover several blocks and a partial last block.
    """
    hs = q.shape[-1]
    if q.device.type != "cuda":
        return {"BLOCK_M": 32, "BLOCK_N": 32, "num_warps": 4, "num_stages": 1}
    if q.dtype == torch.float32 or hs > 128:
        return {"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 2}
    return {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4 if hs <= 64 else 8, "num_stages": 3}


def check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, config: dict[str, int]) -> None:
    """Raise ``ValueError`` with a clear message for inputs the attention kernel cannot take.

    q ``(B, nh, T, hs)``, k and v ``(B, nh, S, hs)``; hs a power of two in [16, 256]; blocks
    powers of two ≥ 16; float16, float32, or bfloat16 on a GPU; tensors where kernels run.
    """
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError("q, k and v must be 4-D: q (B, nh, T, hs), k and v (B, nh, S, hs).")
    if k.shape != v.shape or q.shape[:2] != k.shape[:2] or q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"Shapes do not fit: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}; "
            "expected q (B, nh, T, hs) and k, v (B, nh, S, hs)."
        )
    if not q.dtype == k.dtype == v.dtype:
        raise ValueError(f"q, k and v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}.")
    hs = q.shape[-1]
    if hs < 16 or not _is_power_of_two(hs) or hs > 256:
        raise ValueError(
            f"Head size hs={hs} is not supported: tl.dot needs inner sizes of at least 16 on a "
            "GPU and tl.arange needs powers of two, so use hs in 16, 32, 64, 128, 256."
        )
    for name in ("BLOCK_M", "BLOCK_N"):
        if config[name] < 16 or not _is_power_of_two(config[name]):
            raise ValueError(
                f"{name}={config[name]} is not supported: blocks must be powers of two of at "
                "least 16 (tl.dot's smallest tile on a GPU)."
            )
    allowed = {torch.float16, torch.float32} | ({torch.bfloat16} if MODE == "gpu" else set())
    if q.dtype not in allowed:
        raise ValueError(
            f"{q.dtype} is not supported here: the Triton interpreter's tl.dot returns garbage "
            "for bfloat16 (triton issue #11584), so use float16 or float32 without a GPU."
            if q.dtype == torch.bfloat16
            else f"{q.dtype} is not supported: use float16, bfloat16 (GPU only) or float32."
        )
    want = "cuda" if MODE == "gpu" else "cpu"
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.device.type != want:
            raise ValueError(
                f"{name} is on {t.device.type} but Triton kernels run on {want} here: "
                "move the tensors with .to(get_device())."
            )
