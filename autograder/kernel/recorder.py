"""Run one learner call and record what it did, as the trusted grader needs it to recompute.

For one call the record holds: the call's input tensors by path (each numbered as a *ref*),
every ATen operator it ran as PyTorch's dispatcher saw it (marked ``engine`` when autograd's
engine ran it, for a backward pass; each tensor argument named by ref: an input, an earlier
operator's output, or a *constant* carried by value), each read of a tensor's values into Python
that runs no operator (``.tolist()``, ``.numpy()``, printing), the torch functions it called by
name, its outcome (the result as refs, or the error it raised) and the state it left on every
module the grader watches. A record is a claim: the grader believes none of it without
recomputing it (see :mod:`autograder.grader.verify.rerun`).

Tensor subclasses: PyTorch's ``CausalBias`` (``causal_lower_right``, notebook 03's advice for a
cache) is built under the tracer like any tensor, and SDPA given one runs its own code, whose
operators the tracer sees as they run. Any other subclass with a ``__torch_function__`` or
``__torch_dispatch__`` of its own runs learner code while the mode that sees it is off (a
mode's handler runs with itself switched off), where reads into Python and torch functions
called would escape the record: the record says so (``{"subclass": name}``) and the grader
refuses it.

Shape legend: none; this module records tensors of any shape.
"""

from __future__ import annotations

import sys
import traceback
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from .codec import encode_tensor, encode_value, map_tree, own_tensors

_TORCH_DIR = torch.__file__.rsplit("/", 1)[0]
FLAGS = ("stub", "shape_error", "stub_where", "stub_depth")  # what an error's record says
# Distinct torch functions a record names: more than PyTorch's whole API, so that no flood of
# harmless calls can push one a rule looks for out of the report (operators first regardless).
MAX_FUNCTIONS = 4096


def _is_stub(exc: NotImplementedError) -> bool:
    """True for a ``raise NotImplementedError`` written in learner code (not PyTorch's own)."""
    frames = traceback.extract_tb(exc.__traceback__)
    return (
        bool(frames)
        and not frames[-1].filename.startswith(_TORCH_DIR)
        and (frames[-1].line or "raise").startswith("raise")
    )


def invoke(fn: Callable[..., Any], args: tuple, kwargs: dict) -> tuple:
    """Run learner code; its outcome as ``("ok", value)``, ``("check_failure", message)`` or
    ``("error", type name, message, flags)``."""
    __tracebackhide__ = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ("ok", fn(*args, **kwargs))
        except AssertionError as exc:
            if type(exc).__name__ != "CheckFailure":
                error = exc
            else:
                return ("check_failure", str(exc))
        except NotImplementedError as exc:
            if _is_stub(exc):
                frames = traceback.extract_tb(exc.__traceback__)
                where = {"stub_where": frames[-1].name, "stub_depth": len(frames)}
                return ("error", type(exc).__name__, str(exc), {"stub": True} | where)
            error = exc
        except Exception as exc:  # any learner error becomes feedback
            error = exc
    flags = {"shape_error": isinstance(error, RuntimeError | IndexError), "exception": error}
    return ("error", type(error).__name__, str(error), flags)


def _key(t: torch.Tensor) -> tuple:
    """Tensors that view the same memory the same way are the same value.

    Memory is named by its address; a storage of no bytes has none (every empty tensor's is 0),
    so it is named by the storage itself. Both are unique only among live storages: :class:`Refs`
    keeps every storage it has seen alive.
    """
    if t.is_meta:
        return ("id", id(t))
    offset = t.storage_offset()
    # the storage's address, without making a storage object (a twentieth of a recording's time)
    where = t.data_ptr() - offset * t.element_size()
    if not where:
        where = ("storage", t.untyped_storage()._cdata)
    return (where, offset, tuple(t.shape), t.stride(), t.dtype)


class Refs:
    """Numbers every tensor seen in a statement; keeps its memory alive so it is not reused.

    A tensor is found by identity first: autograd's own ``detach`` of a saved output has the same
    memory layout as the output, and must not stand in for it. Memory layout is the fallback (a
    ``Parameter`` wrapping an operator's output, ``.data``), among the tensors that still view
    that memory that way: the first one registered.

    Neither a Python tensor nor its address names memory for good. ``t.data = other`` (how the
    server gives every watched module the grader's state before each call; learner code may do
    it too) points the same object at other memory without any operator, and frees the old
    memory unless something holds it: the allocator then hands its address to the next tensor of
    that size, whose layout equals the old entry's. So each ref keeps the storage it was
    registered with alive (an address in the table is never reused while the table lives), and a
    ref stands for a tensor only while that tensor still has the layout it was registered with.
    """

    def __init__(self):
        self.by_id: dict[int, int] = {}
        self.by_key: dict[tuple, list[int]] = {}
        self.alive: list[torch.Tensor] = []
        self.keys: list[tuple] = []  # each ref's layout when registered
        self.storages: list[Any] = []  # each ref's storage, alive even if its tensor moves

    def register(self, t: torch.Tensor) -> int:
        key = _key(t)
        self.alive.append(t)
        self.keys.append(key)
        self.storages.append(None if t.device.type == "meta" else t.untyped_storage())
        ref = len(self.alive) - 1
        self.by_id[id(t)] = ref
        self.by_key.setdefault(key, []).append(ref)
        return ref

    def find(self, t: torch.Tensor) -> int | None:
        key = _key(t)
        ref = self.by_id.get(id(t))
        if ref is not None and self.alive[ref] is t and self.keys[ref] == key:
            return ref
        # only a ref whose tensor still views that memory that way (registered with ``key``)
        return next((r for r in self.by_key.get(key, ()) if _key(self.alive[r]) == key), None)

    def outputs(self, tree: Any) -> Any:
        return map_tree(
            tree,
            lambda v: {"ref": self.register(v)} if isinstance(v, torch.Tensor) else encode_value(v),
        )

    def arguments(self, tree: Any, ops: list) -> Any:
        def one(v):
            if not isinstance(v, torch.Tensor):
                return encode_value(v)
            ref = self.find(v)
            if ref is None:  # made outside any operator: the grader decides if it may be used
                ref = self.register(v)
                ops.append({"const": ref, "value": encode_tensor(v)})
            return {"ref": ref}

        return map_tree(tree, one)


def _causal_bias() -> type | None:
    """PyTorch's ``CausalBias`` once imported, made to build under the tracer (idempotent).

    ``torch.Tensor.__new__`` allocates through the dispatcher; under a dispatch mode the mode
    hands back a plain tensor that can no longer become the subclass ("Creating a new Tensor
    subclass ..."). The allocation holds no value anyone reads (the bias is its variant and
    sizes), so it runs without Python dispatch; ``__init__``, and the learner code of a
    subclass's, runs traced.
    """
    bias = sys.modules.get("torch.nn.attention.bias")
    cls = getattr(bias, "CausalBias", None)
    if cls is not None and "__new__" not in vars(cls):
        cls.__new__ = _new_untraced
    return cls


def _new_untraced(cls, *args, **kwargs):
    with torch._C._DisableTorchDispatch():
        return torch.Tensor.__new__(cls, *args, **kwargs)


# What a tensor class runs for each hook when it runs no code of its own: Tensor's default
# ``__torch_function__`` calls the function itself; ``Parameter`` has neither hook.
_PLAIN = {
    "__torch_function__": (
        torch.Tensor.__torch_function__.__func__,
        torch._C._disabled_torch_function_impl,
    ),
    "__torch_dispatch__": (torch._C._disabled_torch_dispatch_impl,),
}


def _foreign(types, hook: str, trusted: tuple = ()) -> dict | None:
    """A ``{"subclass": name}`` entry for the first class of ``types`` (other than ``trusted``)
    whose ``hook`` runs code of its own, if any."""
    for t in types:
        run = getattr(t, hook, None)
        if t not in trusted and getattr(run, "__func__", run) not in _PLAIN[hook]:
            return {"subclass": str(getattr(t, "__qualname__", t))[:120], "hook": hook}
    return None


class _Tracer(TorchDispatchMode):
    """Logs every ATen operator of one learner call, with its tensors named by ref."""

    def __init__(self, refs: Refs, ops: list):
        super().__init__()
        self.refs, self.ops = refs, ops

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        foreign = _foreign(types, "__torch_dispatch__")
        if foreign:  # its hook runs with this mode off
            self.ops.append(foreign)
        entry = {"op": func._schema.name, "overload": func._overloadname}
        entry["grad"] = torch.is_grad_enabled()
        if torch._C._current_autograd_node() is not None:  # a backward pass autograd runs
            entry["engine"] = True
        entry["args"] = self.refs.arguments(list(args), self.ops)
        entry["kwargs"] = self.refs.arguments(kwargs, self.ops)
        out = func(*args, **kwargs)
        entry["out"] = self.refs.outputs(out)
        self.ops.append(entry)
        return out


# Tensor methods that hand a tensor's values to Python without any ATen operator (``item``,
# ``bool(t)`` and ``float(t)`` run ``_local_scalar_dense``, which the tracer logs).
VALUE_READS = frozenset(
    "tolist numpy __array__ __repr__ __str__ __format__ __reduce_ex__ __dlpack__".split()
)


class _Functions(TorchFunctionMode):
    """The names of the torch functions a call used (``torch.nn.functional.softmax``), and a
    ``{"read": ref}`` entry in the operator log for each of :data:`VALUE_READS`."""

    def __init__(self, names: set[str], refs: Refs, ops: list):
        super().__init__()
        self.names, self.refs, self.ops = names, refs, ops
        self.trusted = (_causal_bias(),)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        foreign = _foreign(types, "__torch_function__", self.trusted)
        if foreign:  # its hook runs with this mode off
            self.ops.append(foreign)
        module = getattr(func, "__module__", None) or "torch.Tensor"
        name = getattr(func, "__name__", "")
        self.names.add(f"{module}.{name or func}"[:120])
        out = func(*args, **(kwargs or {}))
        if name in VALUE_READS and args and isinstance(args[0], torch.Tensor):
            self.ops.append({"read": self.refs.arguments(args[0], self.ops)["ref"]})
        return out


def module_state(module: torch.nn.Module, refs: Refs) -> dict:
    """A module's tree: each submodule's class, plain attributes, mode and tensors (with grads)."""
    tree = {}
    for prefix, m in module.named_modules(remove_duplicate=False):
        plain = {
            k: encode_value(v)
            for k, v in vars(m).items()
            if not k.startswith("_") and isinstance(v, bool | int | float | str | type(None))
        }
        tensors = {}
        for name, t in own_tensors(m):
            kind = "param" if name in m._parameters else "buffer" if name in m._buffers else "attr"
            if t is None:
                tensors[name] = {"none": True, "kind": kind}
                continue
            tensors[name] = _tensor_image(t, refs) | {
                "kind": kind,
                "requires_grad": bool(t.requires_grad),
            }
            if t.grad is not None:
                tensors[name]["grad"] = _tensor_image(t.grad, refs)
        cls = type(m)
        tree[prefix] = {"class": [cls.__module__, cls.__qualname__], "plain": plain}
        tree[prefix]["tensors"] = tensors
    return tree


def _tensor_image(t: torch.Tensor, refs: Refs) -> dict:
    ref = refs.find(t)
    return {"ref": ref} if ref is not None else {"value": encode_tensor(t)}


def encode_result(value: Any, refs: Refs, new_module: Callable[[torch.nn.Module], str]) -> Any:
    """The outcome's value: tensors as refs (or by value), modules by state and a new id."""
    if isinstance(value, torch.Tensor) and type(value) not in (torch.Tensor, torch.nn.Parameter):
        return {"plain": {"opaque": type(value).__name__}}
    if isinstance(value, torch.Tensor):
        return {"tensor": _tensor_image(value, refs)}
    if isinstance(value, torch.nn.Module):
        return {"module": module_state(value, refs), "mid": new_module(value)}
    if isinstance(value, tuple | list):
        kind = "tuple" if isinstance(value, tuple) else "list"
        return {kind: [encode_result(v, refs, new_module) for v in value]}
    return {"plain": encode_value(value)}


def record_call(
    refs: Refs,
    fn: Callable,
    args: tuple,
    kwargs: dict,
    inputs: list[tuple[str, torch.Tensor]],
    watched: dict[str, torch.nn.Module],
    new_module: Callable[[torch.nn.Module], str],
) -> dict:
    """Run ``fn(*args, **kwargs)`` under the tracer; the record the grader recomputes."""
    ops: list = []
    functions: set[str] = set()
    entry: dict = {"inputs": {path: refs.register(t) for path, t in inputs}}
    with _Functions(functions, refs, ops), _Tracer(refs, ops):
        outcome = invoke(fn, args, kwargs)
    entry["ops"] = ops
    entry["functions"] = sorted(functions, key=lambda n: (not n.startswith("torch._ops."), n))[
        :MAX_FUNCTIONS
    ]
    if outcome[0] == "ok":
        entry["outcome"] = ["ok", encode_result(outcome[1], refs, new_module)]
    elif outcome[0] == "error":
        flags = {k: v for k, v in outcome[3].items() if k in FLAGS}
        entry["outcome"] = ["error", outcome[1], str(outcome[2])[:300], flags]
    else:
        entry["outcome"] = [outcome[0], str(outcome[1])[:600]]
    entry["after"] = {mid: module_state(m, refs) for mid, m in watched.items()}
    entry["grad_enabled"] = torch.is_grad_enabled()
    return entry
