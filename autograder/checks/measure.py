"""What a learner call ran and materialised: the one measure every "how" rule of the checks uses.

A rule about *how* a result is computed (no PyTorch attention, no autograd, a memory bound, an
absorbed decode step) is judged on the operators that ran, never on the names of the functions
the code called: in the grader, on the kernel's record as :mod:`.rerun` recomputes it; in a
learner's own notebook, on the operators learner code runs. A rule wraps the call in
:func:`measure`, one dispatch mode that sees either, and reads the :class:`Measured` it gives:

- ``sdpa``: the first of PyTorch's attention operators that ran (:data:`.operators.SDPA`, whose
  ``_safe_softmax`` is the softmax of SDPA's math backend and of nothing written by hand), by
  any name, through TorchScript or an operator overload alike;
- ``engine``: the first operator autograd's engine ran, however the engine was reached
  (``loss.backward()``, ``torch.autograd.grad``, its private entry points). The kernel's recorder
  marks each operator autograd is running a node for, and the rerun replays those marks
  (:func:`engine_replayed`); learner code cannot unmark one without changing the recorder;
- ``largest``: the largest tensor an operator created (views and in-place results create none),
  as its size, shape, dtype and operator;
- ``peak``: the most numbers the created tensors hold at once, each counted from the operator
  that made it to the last operator that reads or writes it: chunks that are each small but
  alive together count together;
- ``total``: the numbers of every tensor created.
- ``flops``: the arithmetic, every operator counted: a matrix product by its multiply-adds
  (PyTorch's FLOP formulas), an element-wise operator by the numbers it writes (once per
  operand past the first: ``addcmul`` writes a multiply and an add per number), whether into a
  new tensor or in place, a product PyTorch has no formula for (``mv``, ``dot``) by twice the
  numbers it reads, and any other operator (reductions, copies) by the numbers it reads.
  Up-projecting a cache costs as much by multiply and add, one feature at a time, as by one
  matrix product.

Sizes count numbers (elements of the memory a tensor owns, whatever its shape says), not bytes:
the rules bound how much of a (T, S) matrix or an up-projected cache exists, and a loop that
keeps float32 state for float16 inputs is not a bigger one.

Tensors that existed before the call (its inputs, a module's weights) are not counted.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import operators


@dataclass
class Created:
    """One tensor an operator created: its size and where it came from."""

    numel: int = 0  # the numbers its memory holds (more than its shape's if it is strided)
    shape: tuple[int, ...] = ()
    dtype: torch.dtype | None = None
    op: str = ""


@dataclass
class Measured:
    """What one measured block ran and materialised (see the module docstring)."""

    sdpa: str | None = None
    engine: str | None = None
    largest: Created = field(default_factory=Created)
    peak: int = 0
    total: int = 0
    flops: float = 0.0
    _lives: dict = field(default_factory=dict)  # storage -> [first op, last op, bytes]
    _ended: list = field(default_factory=list)  # lives whose memory was reused
    _step: int = 0

    def _use(self, key: tuple) -> None:
        life = self._lives.get(key)
        if life is not None:
            life[1] = self._step

    def _create(self, t: torch.Tensor, key: tuple, op: str) -> None:
        numel = t.untyped_storage().nbytes() // t.element_size()
        if not numel:
            return
        if key in self._lives:  # freed and reused: the old tensor's life is over
            self._ended.append(self._lives.pop(key))
        self._lives[key] = [self._step, self._step, numel]
        self.total += numel
        if numel > self.largest.numel:
            self.largest = Created(numel, tuple(t.shape), t.dtype, op)

    def _settle(self) -> None:
        """``peak`` from the lives seen: the most numbers alive at one operator."""
        changes: dict[int, int] = {}
        for first, last, numel in [*self._ended, *self._lives.values()]:
            changes[first] = changes.get(first, 0) + numel
            changes[last + 1] = changes.get(last + 1, 0) - numel
        alive = 0
        for step in sorted(changes):
            alive += changes[step]
            self.peak = max(self.peak, alive)


def _where(t: torch.Tensor) -> tuple:
    """The memory a tensor views: its storage's address (or the storage itself, if it has none)."""
    storage = t.untyped_storage()
    return (t.device.type, storage.data_ptr() or storage._cdata)


_REPLAYED = threading.local()


@contextlib.contextmanager
def engine_replayed(marked: bool) -> Iterator[None]:
    """Inside, operators count as autograd's engine's when ``marked``: the rerun recomputes a
    recorded operator in it with the recorder's mark (see the module docstring)."""
    before = getattr(_REPLAYED, "marked", False)
    _REPLAYED.marked = marked
    try:
        yield
    finally:
        _REPLAYED.marked = before


@dataclass(frozen=True)
class _Operator:
    """What the measure needs to know of an operator, read from its schema once."""

    name: str
    sdpa: bool
    aliased: bool  # it returns a view or its input: it creates nothing
    pointwise: bool
    mutable: bool
    formula: Callable | None  # PyTorch's FLOP formula, if it has one


@functools.cache
def _operator(func) -> _Operator:
    # imported here: flop_counter imports Triton, which must come after triton_support has set
    # up the interpreter (a notebook's set-up imports the checks before it imports Triton)
    from torch.utils.flop_counter import flop_registry

    schema = func._schema
    return _Operator(
        name=schema.name,
        sdpa=schema.name in operators.SDPA,
        aliased=any(r.alias_info is not None for r in schema.returns),
        pointwise=torch.Tag.pointwise in func.tags,
        mutable=schema.is_mutable,
        formula=flop_registry.get(func.overloadpacket),
    )


class _Measure(TorchDispatchMode):
    def __init__(self, measured: Measured):
        super().__init__()
        self.measured = measured

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # otherwise the first use imports torch._dynamo, seconds on a small machine

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        m, op = self.measured, _operator(func)
        if m.sdpa is None and op.sdpa:
            m.sdpa = op.name.removeprefix("aten::")
        if m.engine is None and (
            getattr(_REPLAYED, "marked", False) or torch._C._current_autograd_node() is not None
        ):
            m.engine = op.name.removeprefix("aten::")
        m._step += 1
        given = _tensors((args, kwargs))
        read = [_where(t) for t in given]
        for key in read:
            m._use(key)
        out = func(*args, **kwargs)
        made = _tensors(out)
        wrote = [_where(t) for t in made]
        for t, key in zip(made, wrote, strict=True):
            m._use(key) if op.aliased else m._create(t, key, op.name)
        m.flops += _flops(op, args, kwargs, out, given, made, set(read), wrote)
        return out


def _flops(op: _Operator, args, kwargs, out, given: list, made: list, read: set, wrote) -> float:
    """The arithmetic of one operator (see the module docstring)."""
    if not (op.pointwise or op.mutable) and all(key in read for key in wrote):
        return 0.0  # a view, however it is spelled (``_unsafe_view``): nothing computed
    if op.formula is not None:
        try:
            return float(op.formula(*args, **kwargs, out_val=out))
        except Exception:  # an argument the formula does not take: count what it reads
            pass
    if op.pointwise:
        return float(max(1, len(given) - 1) * sum(t.numel() for t in made))
    reads = sum(t.numel() for t in given)
    return 2.0 * reads if op.name in _VECTOR_PRODUCTS else float(reads)


# Products PyTorch has no FLOP formula for: a multiply and an add per number read.
_VECTOR_PRODUCTS = frozenset(f"aten::{n}" for n in "mv addmv dot vdot inner outer addr".split())


def _tensors(tree) -> list[torch.Tensor]:
    """The tensors of a tree of lists, tuples and dicts (an operator's arguments or results)."""
    if isinstance(tree, torch.Tensor):
        return [tree]
    found: list[torch.Tensor] = []
    if isinstance(tree, list | tuple | dict):
        _collect(tree, found)
    return found


def _collect(tree, found: list) -> None:
    for v in tree.values() if isinstance(tree, dict) else tree:
        if isinstance(v, torch.Tensor):
            found.append(v)
        elif isinstance(v, list | tuple | dict):
            _collect(v, found)


@contextlib.contextmanager
def measure() -> Iterator[Measured]:
    """Measure the operators run inside the block (see the module docstring); ``peak`` is
    known once the block has ended."""
    measured = Measured()
    try:
        with _Measure(measured):
            yield measured
    finally:
        measured._settle()
