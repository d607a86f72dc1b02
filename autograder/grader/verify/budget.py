"""What a statement's rerun may spend: operators, output sizes, FLOPs and bytes.

:meth:`Budget.charge` runs before each recorded operator is recomputed. Views cost nothing and an
element-wise operator's output size is its inputs' broadcast; any other operator first runs on
shapes only (the meta device), once per operator and argument shapes, so a record that asks for
a giant tensor or a week of arithmetic is refused before anything is computed.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_map

from autograder.kernel.codec import ReplayError

MAX_OPS = 100_000  # operators per statement
MAX_OUTPUT_ELEMENTS = 1 << 24  # elements of one operator's outputs
MAX_FLOPS = 2e10  # per statement: about ten seconds of one core
MAX_BYTES = 4 << 30  # bytes of all outputs of a statement


@dataclass
class Budget:
    """What a statement has spent; :meth:`charge` refuses the operator that would overspend."""

    ops: int = 0
    flops: float = 0.0
    bytes: int = 0

    def charge(self, op, args: list, kwargs: dict, given: list[torch.Tensor]) -> None:
        """``given``: the tensors in ``args`` and ``kwargs``."""
        self.ops += 1
        if self.ops > MAX_OPS:
            raise ReplayError("your code ran more operators than any check needs")
        on_meta = all(t.is_meta for t in given) if given else (str(kwargs.get("device")) == "meta")
        if on_meta:  # shapes only: no memory, no work
            return
        elements = _cheap_elements(op, given, args, kwargs)
        if elements is None:  # run it on shapes only first (once per operator and shapes)
            key = _signature(op, args, kwargs)
            cost = _COSTS.get(key) if key is not None else None
            if cost is None:
                cost = _shape_cost(op, args, kwargs)
                if key is not None and len(_COSTS) < MAX_COSTS_KEPT:
                    _COSTS[key] = cost
            elements, flops = cost
            self.flops += flops
        if elements > MAX_OUTPUT_ELEMENTS:
            raise ReplayError(
                f"your code made a tensor of {elements:,} elements, far more than the check needs"
            )
        self.bytes += 8 * elements
        self.flops += elements
        if self.flops > MAX_FLOPS or self.bytes > MAX_BYTES:
            raise ReplayError("your code did far more work than the check needs")


MAX_COSTS_KEPT = 1 << 14
_COSTS: dict[tuple, tuple[int, float]] = {}  # (operator, argument shapes) -> its output size, FLOPs


def _signature(op, args: list, kwargs: dict) -> tuple | None:
    """What an operator's output size depends on: its arguments, tensors as shape, stride and
    dtype; None when an argument cannot be a key."""

    def one(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return ("tensor", tuple(v.shape), v.stride(), v.dtype, v.device.type)
        if isinstance(v, list | tuple):
            return (type(v).__name__, *(one(x) for x in v))
        if v is None or isinstance(v, bool | int | float | str | torch.dtype | torch.device):
            return (type(v).__name__, v)
        if isinstance(v, torch.memory_format | torch.layout):
            return ("enum", str(v))
        raise TypeError

    try:
        return (op, one(list(args)), tuple(sorted((k, one(v)) for k, v in kwargs.items())))
    except TypeError:
        return None


def _shape_cost(op, args: list, kwargs: dict) -> tuple[int, float]:
    """(Elements of the outputs, FLOPs beyond one per element), from a run on shapes only."""
    with quiet():
        meta_args = tree_map(_to_meta, args)
        meta_kwargs = tree_map(_to_meta, kwargs)
        try:
            out = op(*meta_args, **meta_kwargs)
        except Exception:  # no meta kernel (data-dependent shapes): judged by its inputs
            out = args
    # imported here: flop_counter imports Triton, which must come after triton_support has set
    # up the interpreter (a notebook's set-up imports the checks before it imports Triton)
    from torch.utils.flop_counter import flop_registry

    elements = sum(t.numel() for t in _tensors(out))
    packet = op.overloadpacket
    flops = 0.0
    if elements <= MAX_OUTPUT_ELEMENTS and packet in flop_registry:
        shape = lambda t: t.shape if isinstance(t, torch.Tensor) else t  # noqa: E731
        try:
            flops = flop_registry[packet](
                *tree_map(shape, meta_args), **meta_kwargs, out_shape=tree_map(shape, out)
            )
        except Exception:
            flops = elements
    return elements, float(flops)


_KINDS: dict[Any, tuple[bool, bool]] = {}  # operator -> (a view, element-wise)


def _cheap_elements(op, given: list, args: list, kwargs: dict) -> int | None:
    """The output size of a view (none: it shares memory) or of an element-wise operator (the
    broadcast of its inputs), from shapes alone; None for every other operator."""
    kind = _KINDS.get(op)
    if kind is None:  # read once per operator: both are slow properties
        kind = _KINDS[op] = (op.is_view, torch.Tag.pointwise in op.tags)
    view, pointwise = kind
    if view:
        return 0
    if pointwise and given:
        if any(isinstance(v, list | tuple) for v in [*args, *kwargs.values()]):
            return None
        return _broadcast_elements([t.shape for t in given])
    return None


def _broadcast_elements(shapes: list) -> int | None:
    """Elements of the broadcast of ``shapes``, or None where they do not broadcast (in Python:
    ``torch.broadcast_shapes`` took a tenth of a rerun's time)."""
    size = [1] * max(len(s) for s in shapes)
    for shape in shapes:
        for i, n in enumerate(reversed(shape)):
            if n != 1:
                if size[i] not in (1, n):
                    return None
                size[i] = n
    return math.prod(size)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """No dispatch or torch-function mode (the checks' own rules) sees the grader's bookkeeping."""
    with _disable_current_modes(), torch._C.DisableTorchFunction():
        yield


def _to_meta(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="meta")
    return v


def _tensors(tree: Any, found: list | None = None) -> list[torch.Tensor]:
    """The tensors in nested lists, tuples and dicts (by hand: pytree's walk was a fifth of a
    rerun's time)."""
    found = [] if found is None else found
    if isinstance(tree, torch.Tensor):
        found.append(tree)
    elif isinstance(tree, list | tuple):
        for v in tree:
            _tensors(v, found)
    elif isinstance(tree, dict):
        for v in tree.values():
            _tensors(v, found)
    return found
