"""Recompute a kernel's record on the grader's own tensors, believing nothing it claims.

Every tensor a learner call returns or leaves behind must be the output of an operator rerun
here, from the grader's inputs. The rerun refuses:

- an operator the check does not allow (:mod:`.operators`), by name;
- an operator that writes into a tensor the check passed (:mod:`.writes`: the rerun holds
  copies of them, so the check's own stay as they were);
- a *constant* (a tensor that is neither an input nor an operator's output) of more than one
  element, unless the call had no tensor input (then its result is computed from Python values),
  and more than :data:`MAX_CONSTANTS` constants in one call (where the call read an input's
  values into Python before it, such a constant may be computed from them, as ``cu_seqlens``
  from lengths read with ``.tolist()``: that record cannot be told from a table of answers, and
  is :class:`CannotReplay`, for a person);
- literal numbers beyond :data:`MAX_LITERALS` distinct values per call, constants' values
  included where the call could reach a tensor, given or held by a module the statement already
  handed the kernel (they could spell out an answer one element at a time; reaching none, the
  answer is a function of Python values the check drew, and a Python list of numbers made a
  tensor is how real code writes it: ALiBi's slopes, one per head);
  ``arange``'s integer bounds, which are positions, excepted; integer lists longer than
  :data:`MAX_LIST`. Integer constants no larger than the largest size of a tensor the call is
  given are positions too (an index built from Python ints, a ring buffer's slots), free of
  both rules where every such tensor is floating-point (new inputs redraw those, so an index
  that encodes one input's answer fails there); where one is an integer or bool tensor (which
  new inputs keep), 1-D lists no longer than that size, at most :data:`MAX_SHAPE_LISTS`.
  A 1-D list of floats is a function of the shapes and the call's Python arguments, free of
  both rules too (a rotary layer's ``inv_freq`` from a Python list), where the call is given a
  floating-point tensor: new inputs redraw it, and the outputs must still match there, so the
  list is believed as a vector the computation applies, never as an answer. What could spell
  an answer for what new inputs keep (angles for the integer positions a check passes) is a
  table over two dimensions, and stays refused, also where a check writes its floating inputs
  out rather than drawing them (new inputs keep those): a 2-D constant, float lists whose lengths
  together exceed the largest size (a table pasted row by row, or in chunks of one size each),
  more than :data:`MAX_SHAPE_LISTS` lists, and float lists in a call given no floating-point
  tensor (nothing there is redrawn);
- a tensor subclass of the learner's that runs code of its own (a ``__torch_function__`` or
  ``__torch_dispatch__``): the kernel's recording modes are off while it runs, so what it reads
  into Python or calls there escapes the record (the recorder marks each such call,
  :mod:`autograder.kernel.recorder`); PyTorch's ``CausalBias`` is not one of them;
- a call that had tensor inputs but returns only floating tensors (of more than one element)
  that depend on none of them, and read none of them into Python (``.item()``);
- more work than any check needs: each operator first runs on shapes only (the meta device), and
  one output of more than :data:`.budget.MAX_OUTPUT_ELEMENTS` elements, or a statement beyond
  :data:`.budget.MAX_FLOPS` or :data:`.budget.MAX_BYTES`, stops the rerun before anything is
  computed.

An operator the recorder marks as run by autograd's engine is recomputed as such for the
checks' rules (:func:`.measure.engine_replayed`).

A rerun keeps a *trace*: each operator's output shapes and the Python values it returned
(``.item()``, ``bool(t)``), and the values of every tensor the call read into Python without an
operator (``.tolist()``, ``.numpy()``, printing: the kernel logs them as reads). A second rerun
of the same record on other inputs (:mod:`.fresh`) is given the first one's trace as
``expected``: where they part, the learner's operators depended on the values of their inputs (a
branch on ``.item()`` or ``.tolist()``, a data-dependent shape), and the record cannot stand for
the function: :class:`CannotReplay`.

Shape legend: none; this module recomputes tensors of any shape.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import re
from dataclasses import dataclass, field
from typing import Any

import torch

from autograder.checks import operators
from autograder.checks.measure import engine_replayed
from autograder.kernel.codec import Opaque, ReplayError, decode_tensor, decode_value

from .budget import Budget, quiet
from .writes import refuse_writes

MAX_LITERALS = 32  # distinct literal numbers per call
MAX_LIST = 16  # numbers in one list argument
MAX_CONSTANT_ELEMENTS = 1
# Different lists a call makes from its shapes (integer lists of positions where it is given an
# integer tensor, float lists): a rotary layer's frequencies and its grouped heads' index are two;
# an answer spelled row by row needs a row each.
MAX_SHAPE_LISTS = 4
# One-element constants per call. The most any correct implementation in the catalogues makes is
# 609 (a tiled loop's per-tile scalars); an answer spelled one element at a time makes one or more
# per element, and refusing it before decoding them keeps its grading from costing minutes.
MAX_CONSTANTS = 4096
_NOTHING = contextlib.nullcontext()


class CannotReplay(ReplayError):
    """The record holds only for the values it was made with: a person must judge the cell."""


def _subclass_refused(entry: dict) -> str:
    hook = entry.get("hook")
    if hook not in ("__torch_function__", "__torch_dispatch__"):
        raise ReplayError("the kernel's operator log is malformed")
    name = re.sub(r"[^\w.]", "?", str(entry["subclass"]))[:80]
    return (
        f"your code gave PyTorch a tensor subclass of its own ({name}) whose {hook} runs where "
        "the grader cannot follow it: write it with plain tensors"
    )


@dataclass
class Rerun:
    """One statement's recomputation: refs to trusted tensors, which refs come from an input."""

    allowed: frozenset[str] = operators.DEFAULT
    tensors: dict = field(default_factory=dict)
    derived: set = field(default_factory=set)
    budget: Budget = field(default_factory=Budget)
    read_inputs: bool = False  # this call read an input-derived value into Python (``.item()``)
    protected: dict = field(default_factory=dict)  # the call's copied inputs' memory (.writes)
    trace: list = field(default_factory=list)  # per operator: output shapes, Python values
    expected: list | None = None  # the trace of the same record rerun on the kernel's inputs
    sizes: int = 0  # the largest size of a tensor the call sees
    exact: bool = True  # every tensor the call sees is one a check's new inputs redraw
    redrawn: bool = False  # some tensor the call sees is one a check's new inputs redraw

    def bind_inputs(self, refs: dict, given: dict) -> None:
        if not isinstance(refs, dict) or set(refs) != set(given):
            raise ReplayError("the kernel's record does not match the call's inputs")
        for path, ref in refs.items():
            self.tensors[ref_number(ref)] = given[path]
            self.derived.add(ref)
        self.sizes = max((max(t.shape, default=1) for t in given.values()), default=0)
        self.exact = not any(_kept(t) for t in given.values())
        self.redrawn = not all(_kept(t) for t in given.values())

    def run(self, ops: Any, has_inputs: bool, sees_tensors: bool = True) -> None:
        """Recompute the recorded operators, in order. ``has_inputs``: the call was given a
        tensor; ``sees_tensors``: it was given one or could reach one (a module the statement
        already handed the kernel)."""
        if not isinstance(ops, list):
            raise ReplayError("the kernel's operator log is malformed")
        literals: set = set()
        self.read_inputs = False
        shape_lists: set = set()  # lists made from the shapes (see _of_shapes)
        if sum(isinstance(e, dict) and "const" in e for e in ops) > MAX_CONSTANTS:
            raise ReplayError(
                "your code made more constant tensors than a computation needs: compute the "
                "result from the inputs, not from numbers typed or copied into it"
            )
        for entry in ops:
            if not isinstance(entry, dict):
                raise ReplayError("the kernel's operator log is malformed")
            if "read" in entry:
                self._read(entry["read"])
                continue
            if "subclass" in entry:
                raise ReplayError(_subclass_refused(entry))
            if "const" in entry:
                with quiet():  # once per constant: entering it is most of a small one's cost
                    self._constant(entry, literals, shape_lists, has_inputs, sees_tensors)
                continue
            self._one(entry, literals)

    def _constant(
        self, entry: dict, literals: set, shape_lists: set, has_inputs: bool, sees_tensors: bool
    ) -> None:
        """Bind a recorded constant, or refuse it (see the module docstring); run in quiet()."""
        value = decode_tensor(entry.get("value"))
        if not self._of_shapes(value, shape_lists):
            if value.numel() > MAX_CONSTANT_ELEMENTS and has_inputs:
                if self.read_inputs:  # honest code builds cu_seqlens from lengths it read
                    raise CannotReplay(
                        "your code made a tensor from values it read into Python (`.tolist()`"
                        ", `.item()`), which the grader cannot tell from a table of answers"
                    )
                raise ReplayError(
                    "your code used a tensor that is neither an input nor computed from one"
                )
            if sees_tensors:  # else every value comes from the call's Python arguments
                _count_constant(value, literals)
        self.tensors[ref_number(entry["const"])] = value

    def _of_shapes(self, value: torch.Tensor, lists: set) -> bool:
        """Whether a constant is a function of the shapes, not values (see the module
        docstring): integers no larger than the sizes the call sees; where the call sees an
        integer tensor (which new inputs keep as it was), 1-D such lists no longer than those
        sizes; 1-D float lists where it sees a floating-point tensor, together no longer than
        the largest size. At most :data:`MAX_SHAPE_LISTS` different lists per call (added to
        ``lists``). Run in quiet()."""
        if value.dtype in (torch.bool, torch.uint8) or value.is_complex():
            return False
        if value.device.type == "meta" or not value.numel():
            return False
        if value.is_floating_point():
            if not self.redrawn or value.dim() != 1 or value.numel() > self.sizes:
                return False
        else:
            within = int(value.abs().max()) <= self.sizes
            if self.exact or not within:
                return within
            if value.dim() != 1 or value.numel() > self.sizes:
                return False
        key = (value.is_floating_point(), tuple(value.tolist()))
        if key in lists:
            return True
        if len(lists) >= MAX_SHAPE_LISTS:
            return False
        if key[0] and len(key[1]) + sum(len(v) for f, v in lists if f) > self.sizes:
            return False
        lists.add(key)
        return True

    def _one(self, entry: dict, literals: set) -> None:
        op, name, mutable = _operator(entry.get("op"), entry.get("overload"))
        operators.refuse_unless_allowed(self.allowed, name)
        used: list = []
        # the grader's bookkeeping reads tensors' shapes: no torch-function mode (the checks'
        # rules, the fresh run's redraws) is meant to see it, and each would cost a Python call
        with torch._C.DisableTorchFunction():
            args = self.decode(entry.get("args"), used)
            kwargs = self.decode(entry.get("kwargs"), used)
            if not isinstance(args, list) or not isinstance(kwargs, dict):
                raise ReplayError("the kernel's operator log is malformed")
            if mutable:
                refuse_writes(op, args, kwargs, self.protected)
            _count_literals(op, name, args, kwargs, literals)
            # decoded values hold no tensor but by ref: the tensors the operator is given
            self.budget.charge(op, args, kwargs, [self.tensors[r] for r in used])
        grad = entry.get("grad") is True
        # entered only where it changes the mode: it reaches every torch-function mode twice
        mode = torch.set_grad_enabled(grad) if grad != torch.is_grad_enabled() else _NOTHING
        engine = engine_replayed(True) if entry.get("engine") is True else _NOTHING
        try:
            with mode, engine:
                out = op(*args, **kwargs)
        except Exception as err:
            if self.expected is not None:
                raise CannotReplay(f"{name} fails on other inputs") from err
            raise ReplayError(f"a recorded operator ({name}) could not be rerun") from err
        with torch._C.DisableTorchFunction():
            self._follow(name, _observed(out))
            derived = any(r in self.derived for r in used)
            self.bind(entry.get("out"), out, derived)
        if derived and name in ("aten::_local_scalar_dense", "aten::item"):
            self.read_inputs = True
        if mutable:  # an in-place operator: its first argument now depends too
            for ref in used[:1]:
                if any(r in self.derived for r in used):
                    self.derived.add(ref)

    def _read(self, ref: Any) -> None:
        """A tensor's values read into Python without an operator (``.tolist()``, ``.numpy()``,
        printing it): traced as ``.item()``'s value is, so a record whose reads differ on other
        inputs cannot stand for the function."""
        ref = ref_number(ref)
        if ref not in self.tensors:
            raise ReplayError("the kernel's record reads a tensor before it exists")
        if ref in self.derived:
            self.read_inputs = True
        with quiet():
            self._follow("reading a tensor into Python", _digest(self.tensors[ref]))

    def _follow(self, name: str, seen: Any) -> None:
        """Add what the learner's Python code could see of an operator (:func:`_observed`) or a
        read to the trace; on a second rerun, refuse one that departs from the first (see the
        module docstring)."""
        if self.expected is not None:
            at = len(self.trace)
            if at >= len(self.expected) or self.expected[at] != seen:
                what = name.removeprefix("aten::")
                raise CannotReplay(f"{what} gave a different shape or Python value on other inputs")
        self.trace.append(seen)

    def decode(self, obj: Any, used: list) -> Any:
        """A recorded argument tree, its tensors by ref (each ref appended to ``used``)."""
        if not isinstance(obj, dict) or len(obj) != 1:
            raise ReplayError("the kernel's operator log is malformed")
        ((key, value),) = obj.items()
        if key == "ref":
            ref = ref_number(value)
            if ref not in self.tensors:
                raise ReplayError("the kernel's record uses a tensor before it exists")
            used.append(ref)
            return self.tensors[ref]
        if key == "seq" and isinstance(value, list):
            return [self.decode(v, used) for v in value]
        if key == "map" and isinstance(value, dict):
            return {k: self.decode(v, used) for k, v in value.items()}
        value = decode_value(obj)
        if isinstance(value, Opaque):
            raise ReplayError("the kernel's operator log holds a value it cannot carry")
        return value

    def bind(self, obj: Any, out: Any, derived: bool) -> None:
        if not isinstance(obj, dict) or len(obj) != 1:
            raise ReplayError("the kernel's operator log is malformed")
        if "seq" in obj:
            if not isinstance(out, tuple | list) or len(out) != len(obj["seq"]):
                raise ReplayError("a rerun operator returned something else than recorded")
            for o, v in zip(obj["seq"], out, strict=True):
                self.bind(o, v, derived)
        elif "ref" in obj:
            if not isinstance(out, torch.Tensor):
                raise ReplayError("a rerun operator returned something else than recorded")
            ref = ref_number(obj["ref"])
            self.tensors[ref] = out
            if derived:
                self.derived.add(ref)

    def tensor(self, image: Any, has_inputs: bool, what: str) -> torch.Tensor:
        """A tensor a record names: by ref (recomputed here), or by value if it is a scalar."""
        if isinstance(image, dict) and "ref" in image:
            ref = ref_number(image["ref"])
            if ref not in self.tensors:
                raise ReplayError(f"{what} is not a tensor the call computed")
            return self.tensors[ref]
        value = decode_tensor(image.get("value") if isinstance(image, dict) else None)
        if value.numel() > MAX_CONSTANT_ELEMENTS and has_inputs:
            raise ReplayError(f"{what} was not computed by an operator")
        return value

    def from_inputs(self, image: Any) -> bool:
        """Whether a tensor a record names by ref depends on one of the call's inputs."""
        return isinstance(image, dict) and image.get("ref") in self.derived


def _observed(out: Any) -> Any:
    """What of an operator's output the learner's Python code could branch on: tensors'
    shapes, and Python values (NaN equal to itself)."""
    if isinstance(out, torch.Tensor):
        return tuple(out.shape)
    if isinstance(out, tuple | list):
        return tuple(_observed(o) for o in out)
    if isinstance(out, float) and math.isnan(out):
        return "nan"
    return out if isinstance(out, bool | int | float | complex | type(None)) else type(out).__name__


def _kept(t: torch.Tensor) -> bool:
    """Whether a check's new inputs keep ``t`` as it was: integer and bool tensors are not
    redrawn (:mod:`.fresh`)."""
    return not (t.is_floating_point() or t.is_complex())


def _digest(t: torch.Tensor) -> tuple:
    """A tensor's shape, dtype and values, as one comparable value."""
    if t.device.type == "meta":
        return (tuple(t.shape), str(t.dtype))
    data = t.detach().contiguous().reshape(-1).view(torch.uint8)
    return (tuple(t.shape), str(t.dtype), hashlib.sha256(data.numpy().tobytes()).hexdigest())


def _count_constant(value: torch.Tensor, literals: set) -> None:
    """A constant's distinct values join the call's literal numbers (see the module docstring);
    run in quiet(). A one-element constant (the most common) is its own distinct value."""
    if value.device.type == "meta":  # shapes only: no values to carry
        return
    flat = value.detach().reshape(-1)
    distinct = flat.tolist() if flat.numel() == 1 else flat.unique().tolist()
    if len(distinct) <= MAX_LITERALS:
        for v in distinct:
            literals.add(float(v) if isinstance(v, int | float) and math.isfinite(v) else repr(v))
    if len(distinct) > MAX_LITERALS or len(literals) > MAX_LITERALS:
        raise ReplayError(
            "your code wrote more literal numbers into its operators than a computation needs"
        )


def ref_number(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ReplayError("the kernel's record is malformed")
    return value


_OPERATORS: dict[tuple[str, str], tuple] = {}  # (name, overload) -> (op, its name, mutable)


def _operator(name: Any, overload: Any) -> tuple[torch._ops.OpOverload, str, bool]:
    """The operator a record names, its schema's name and whether it is mutable; looked up
    once per operator (schema properties are slow)."""
    if not isinstance(name, str) or not name.startswith("aten::") or not isinstance(overload, str):
        raise ReplayError("the kernel's record names an operator outside ATen")
    found = _OPERATORS.get((name, overload))
    if found is None:
        packet = getattr(torch.ops.aten, name.removeprefix("aten::"), None)
        op = getattr(packet, overload or "default", None) if packet is not None else None
        if not isinstance(op, torch._ops.OpOverload):
            raise ReplayError(f"the kernel's record names an unknown operator ({name[:60]})")
        found = _OPERATORS[(name, overload)] = (op, op._schema.name, op._schema.is_mutable)
    return found


_VALUE_TYPES = ("Scalar", "float", "complex", "number")
# Integer bounds of these are positions, not values: a tiled loop has one per block. A constant
# spelled with them is still a constant, which the check's run on new inputs refutes.
_POSITIONS = frozenset({"aten::arange"})


_ARGUMENTS: dict[Any, tuple] = {}  # operator -> ((argument name, holds values), ...)


def _arguments(op) -> tuple:
    """Each argument of ``op`` and whether it holds values (not sizes or flags); read once per
    operator: the schema's properties were a tenth of a rerun's time."""
    found = _ARGUMENTS.get(op)
    if found is None:
        found = _ARGUMENTS[op] = tuple(
            (a.name, any(t in str(a.type) for t in _VALUE_TYPES)) for a in op._schema.arguments
        )
    return found


def _count_literals(op, name: str, args: list, kwargs: dict, literals: set) -> None:
    """Refuse literal numbers that could spell out an answer (see the module docstring)."""
    schema = _arguments(op)
    values = list(zip(schema, args, strict=False))
    if kwargs:
        values += [(a, kwargs[a[0]]) for a in schema if a[0] in kwargs]
    for (_, holds_values), value in values:
        if isinstance(value, list | tuple):
            numbers = [v for v in value if isinstance(v, int | float) and not isinstance(v, bool)]
            if len(numbers) > MAX_LIST:
                raise ReplayError("your code passed an operator a long list of literal numbers")
            if holds_values:
                literals.update(float(v) for v in numbers)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            if isinstance(value, int) and name in _POSITIONS:
                continue  # a block's positions (arange(q0, q0 + b)), judged on new inputs
            if holds_values:
                literals.add(float(value) if math.isfinite(value) else repr(value))
    if len(literals) > MAX_LITERALS:
        raise ReplayError(
            "your code wrote more literal numbers into its operators than a computation needs"
        )
