"""PyTorch helpers that the checks and the learner tools both use (neither imports the other's).

- :func:`one_thread`: PyTorch on one CPU thread, as a ``with`` block or a decorator;
- :func:`record_torch_calls`: which torch functions and ATen operators a piece of code ran;
- :func:`note_claimed_calls`: torch functions that learner code run in the kernel reported;
- :func:`operator_packet`: the operator a recorded name calls, whatever overload it names.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from autograder.kernel.recorder import MAX_FUNCTIONS


@contextlib.contextmanager
def _single_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def one_thread(check: Callable | None = None):
    """Run PyTorch on one CPU thread, then restore the setting: ``with one_thread():`` or
    ``@one_thread`` over a function.

    The tensors in checks and in the toy model are tiny: on a busy 2-core machine, extra threads
    spin waiting for each other and make the work 10-20 times slower (and less deterministic).
    """
    if check is None:
        return _single_thread()

    @functools.wraps(check)
    def wrapper(*args, **kwargs):
        __tracebackhide__ = True
        with _single_thread():
            return check(*args, **kwargs)

    return wrapper


class _FunctionRecorder(TorchFunctionMode):
    """Records the names of torch functions and methods called while active."""

    def __init__(self, names: set[str]):
        super().__init__()
        self.names = names

    def __torch_function__(self, func, types, args=(), kwargs=None):
        module = getattr(func, "__module__", None) or "torch.Tensor"
        self.names.add(f"{module}.{getattr(func, '__name__', func)}")
        return func(*args, **(kwargs or {}))


class _OpRecorder(TorchDispatchMode):
    """Records the ATen operators that actually ran (catches calls that bypass Python)."""

    def __init__(self, names: set[str]):
        super().__init__()
        self.names = names

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Otherwise the first use imports torch._dynamo, seconds on a small machine.
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(func._schema.name)
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def record_torch_calls() -> Iterator[set[str]]:
    """Collect the torch functions (``torch.softmax``) and ATen ops (``aten::_softmax``) called."""
    names: set[str] = set()
    _LISTENING.append(names)
    try:
        with _FunctionRecorder(names), _OpRecorder(names):
            yield names
    finally:
        _LISTENING.remove(names)


_LISTENING: list[set[str]] = []


def note_claimed_calls(names: list[str]) -> None:
    """Add torch functions that code run elsewhere says it called to every open recorder.

    The grader runs learner code in the kernel, which reports the torch functions it called. A
    report can only hurt the learner (a rule finds a forbidden call in it); a kernel that hides
    one is caught, if at all, by the operators the grader recomputes.
    """
    for found in _LISTENING:  # marked, so that a rule names the recomputed operator first
        found.update(f"kernel::{str(n)[:120]}" for n in names[:MAX_FUNCTIONS])


def operator_packet(name: str) -> str | None:
    """``namespace::operator`` when ``name`` calls a PyTorch operator, None otherwise.

    An operator is one name whatever overload is called: ``aten::_softmax`` (what a dispatch
    mode records), ``torch._ops.aten._softmax.default`` or ``torch._ops.aten._softmax`` (what a
    torch-function mode records for ``torch.ops.aten._softmax.default(...)`` and for its packet)
    and ``kernel::`` claims of either are all ``aten::_softmax``.
    """
    text = name.removeprefix("kernel::")
    if text.startswith("torch._ops."):
        parts = text.removeprefix("torch._ops.").split(".")
        return f"{parts[0]}::{parts[1]}" if len(parts) > 1 and all(parts[:2]) else None
    namespace, sep, rest = text.partition("::")
    if sep and namespace.isidentifier() and rest:
        return f"{namespace}::{rest.split('.')[0]}"
    return None
