"""One check, run twice: record learner calls in the kernel, replay them in a trusted process.

In classroom grading the learner's code shares the kernel with the test cells, so it can patch
the checks, ``torch.allclose`` or anything else there. So, after a test cell, the grader runs that
cell's own check calls again in the kernel (:func:`record_cell`): every call of learner code made
through ``_core.call`` stores

- a digest of its inputs (tensors by shape, dtype and bytes; numbers; modules by their state),
- the ATen operators it ran, as PyTorch's dispatcher saw them, with every tensor named by where it
  came from: an input, an earlier operator's output, or a constant of at most one element,
- its outcome: the result (tensors as references into that trace), or the error it raised.

The trusted grading process then runs the very same checks (:func:`replay_cell`). Each call of
learner code is answered from the recording once its input digest matches, and every tensor it
returns or changes in place is *recomputed* by running the recorded operators on the trusted
process's own inputs. How each kind of rule is made trustworthy:

- values (a tensor equals PyTorch's): the tensors are recomputed here, so a recording cannot claim a
  value it did not compute from the inputs with ATen operators;
- how a result is computed (no built-in softmax or SDPA, matmul counts, FLOPs, largest tensor): the
  recomputation runs inside the check's own dispatch modes in this process, so they measure the
  recomputed operators, not a log the kernel wrote;
- in-place edits of inputs: recomputed in-place operators edit the trusted inputs;
- Python numbers, strings, devices and the answers to quizzes: compared as recorded; they are the
  answer itself, and the checks hold them to the trusted oracle;
- modules a learner builds: rebuilt as stand-ins with the same submodules and state, their tensors
  recomputed where an operator made them;
- gradients and other state left behind on a module: applied as recorded (the autograd engine
  stores gradients without an operator the trace could name); the forward pass is still recomputed.

Calls whose results PyTorch's dispatcher cannot see at all (a Triton kernel writes its output
behind PyTorch's back) cannot be recomputed: :data:`UNVERIFIABLE` names those checks, and the
grader reports their cells as not verified, for a person.

Shape legend: none; this module moves tensors of any shape.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import math
import numbers
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

MIME = "application/vnd.mha-replay+json"
MAX_RECORDING_BYTES = 64 * 1024**2  # a recording larger than this is refused, not parsed
MAX_ELEMENTS = 200_000  # a tensor value larger than this is not recorded
MAX_CONSTANT_ELEMENTS = 1  # tensors neither inputs nor made by an operator: scalars only
MAX_OPS = 200_000

UNVERIFIABLE = {
    "check_triton_values": "a Triton kernel writes its output without an operator PyTorch sees",
    "check_triton_causal": "a Triton kernel writes its output without an operator PyTorch sees",
}


class ReplayError(BaseException):
    """The recording does not answer the trusted check's calls: the cell is refuted.

    A ``BaseException``, so that no ``except Exception`` in a check can swallow it.
    """


# ----------------------------------------------------------------------------- values


def _encode_value(value: Any) -> Any:
    """A JSON image of a plain value (number, string, device, dtype, containers of those)."""
    if value is None or isinstance(value, bool | str):
        return {"v": value}
    if isinstance(value, numbers.Integral):
        return {"int": int(value)}
    if isinstance(value, numbers.Real):
        f = float(value)
        return {"float": f if math.isfinite(f) else repr(f)}
    if isinstance(value, torch.device):
        return {"device": str(value)}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value)}
    if isinstance(value, torch.memory_format | torch.layout):
        return {"torch": str(value).removeprefix("torch.")}
    if isinstance(value, tuple | list | set | frozenset):
        kind = {tuple: "tuple", list: "list", set: "set", frozenset: "set"}[type(value)]
        return {kind: [_encode_value(v) for v in value]}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"dict": {k: _encode_value(v) for k, v in value.items()}}
    return {"opaque": type(value).__name__}


class _Opaque:
    """Stands for a value the recording could not carry: it equals nothing."""

    def __init__(self, name: str):
        self.name = str(name)[:80]

    def __repr__(self) -> str:
        return f"<a {self.name}>"


def _decode_value(obj: Any) -> Any:
    """The inverse of :func:`_encode_value`; anything malformed raises ReplayError."""
    if not isinstance(obj, dict) or len(obj) != 1:
        raise ReplayError("a recorded value is malformed")
    ((key, v),) = obj.items()
    if key == "v" and (v is None or isinstance(v, bool | str)):
        return v
    if key == "int" and type(v) is int:
        return v
    if key == "float" and (type(v) in (int, float) or v in ("nan", "inf", "-inf")):
        return float(v)
    if key == "device" and isinstance(v, str):
        return torch.device(v)
    if key == "dtype" and isinstance(v, str) and isinstance(_dtype(v), torch.dtype):
        return _dtype(v)
    if key == "torch" and isinstance(v, str):
        found = getattr(torch, v, None)
        if isinstance(found, torch.memory_format | torch.layout):
            return found
    if key in ("tuple", "list", "set") and isinstance(v, list):
        items = [_decode_value(x) for x in v]
        return {"tuple": tuple, "list": list, "set": set}[key](items)
    if key == "dict" and isinstance(v, dict):
        return {k: _decode_value(x) for k, x in v.items()}
    if key == "opaque":
        return _Opaque(v)
    raise ReplayError("a recorded value is malformed")


def _dtype(name: str) -> torch.dtype | None:
    value = getattr(torch, str(name).removeprefix("torch."), None)
    return value if isinstance(value, torch.dtype) else None


def digest(value: Any) -> str:
    """A digest of call inputs: tensors by shape, dtype, device and bytes; modules by state."""
    h = hashlib.sha256()

    def feed(v: Any) -> None:
        if isinstance(v, torch.Tensor):
            h.update(f"T{tuple(v.shape)}{v.dtype}{v.device.type}".encode())
            if v.device.type != "meta" and not v.is_sparse:
                h.update(v.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())
        elif isinstance(v, torch.nn.Module):
            h.update(b"M")
            for name, t in _module_tensors(v):
                h.update(name.encode())
                feed(t)
            h.update(str([m.training for m in v.modules()]).encode())
        elif isinstance(v, tuple | list):
            h.update(f"L{len(v)}".encode())
            for x in v:
                feed(x)
        elif isinstance(v, dict):
            for k in sorted(v, key=str):
                h.update(str(k).encode())
                feed(v[k])
        elif callable(v):
            h.update(b"F")
        else:
            h.update(json.dumps(_encode_value(v), sort_keys=True).encode())

    feed(value)
    return h.hexdigest()[:32]


def _module_tensors(module: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """Every tensor a module holds, by dotted path: parameters, buffers, tensor attributes."""
    found = []
    for prefix, m in module.named_modules(remove_duplicate=False):
        head = f"{prefix}." if prefix else ""
        for name, t in list(m._parameters.items()) + list(m._buffers.items()):
            if t is not None:
                found.append((head + name, t))
        for name, t in vars(m).items():
            if isinstance(t, torch.Tensor) and not name.startswith("_"):
                found.append((head + name, t))
    return found


# ----------------------------------------------------------------------------- inputs


def _inputs(fn: Any, args: tuple, kwargs: dict) -> list[tuple[str, torch.Tensor]]:
    """The tensors a call receives, by path: ``self.q_proj.weight``, ``args.0``, ``kwargs.m.1``."""
    found: list[tuple[str, torch.Tensor]] = []

    def walk(path: str, v: Any) -> None:
        if isinstance(v, torch.Tensor):
            found.append((path, v))
        elif isinstance(v, torch.nn.Module):
            found.extend((f"{path}.{n}", t) for n, t in _module_tensors(v))
        elif isinstance(v, tuple | list):
            for i, x in enumerate(v):
                walk(f"{path}.{i}", x)
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(f"{path}.{k}", x)

    owner = getattr(fn, "__self__", None)
    walk("self", owner if isinstance(owner, torch.Tensor | torch.nn.Module) else fn)
    walk("args", list(args))
    walk("kwargs", kwargs)
    return found


def _modules(fn: Any, args: tuple, kwargs: dict) -> list[tuple[str, torch.nn.Module]]:
    """The modules a call receives (whose state it may change), by path."""
    found = []
    owner = getattr(fn, "__self__", None)
    for path, v in (
        [("self", owner if owner is not None else fn)]
        + [(f"args.{i}", a) for i, a in enumerate(args)]
        + [(f"kwargs.{k}", a) for k, a in kwargs.items()]
    ):
        if isinstance(v, torch.nn.Module):
            found.append((path, v))
    return found


# ----------------------------------------------------------------------------- the trace


def _key(t: torch.Tensor) -> tuple:
    """Tensors that view the same memory the same way are the same value."""
    if t.device.type == "meta":
        return ("id", id(t))
    return (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride(), t.dtype)


class _Tracer(TorchDispatchMode):
    """In the kernel: names every tensor and logs every ATen operator of one learner call."""

    def __init__(self, refs: _Refs, ops: list):
        super().__init__()
        self.refs, self.ops = refs, ops

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        entry = {"op": func._schema.name, "overload": func._overloadname}
        entry["grad"] = torch.is_grad_enabled()  # so recomputed tensors track gradients alike
        entry["args"] = self.refs.encode_tree(list(args), self.ops)
        entry["kwargs"] = self.refs.encode_tree(kwargs, self.ops)
        out = func(*args, **kwargs)
        entry["out"] = self.refs.register_tree(out)
        self.ops.append(entry)
        return out


class _Refs:
    """Numbers every tensor seen in a recording; keeps them alive so memory is not reused."""

    def __init__(self):
        self.by_key: dict[tuple, int] = {}
        self.alive: list[torch.Tensor] = []

    def register(self, t: torch.Tensor) -> int:
        self.alive.append(t)
        self.by_key[_key(t)] = len(self.alive) - 1
        return len(self.alive) - 1

    def find(self, t: torch.Tensor) -> int | None:
        return self.by_key.get(_key(t))

    def register_tree(self, tree: Any) -> Any:
        def one(v):
            if isinstance(v, torch.Tensor):
                return {"ref": self.register(v)}
            return _encode_value(v)

        return _map_tree(tree, one)

    def encode_tree(self, tree: Any, ops: list) -> Any:
        def one(v):
            if not isinstance(v, torch.Tensor):
                return _encode_value(v)
            ref = self.find(v)
            if ref is not None:
                return {"ref": ref}
            # a constant: made outside any operator (torch.tensor(...), a global tensor)
            value = _encode_tensor(v)  # the trusted side decides whether it may be used
            ref = self.register(v)
            ops.append({"const": ref, "value": value})
            return {"ref": ref}

        return _map_tree(tree, one)


def _map_tree(tree: Any, one: Callable) -> Any:
    if isinstance(tree, tuple | list):
        return {"seq": [_map_tree(v, one) for v in tree]}
    if isinstance(tree, dict):
        return {"map": {str(k): _map_tree(v, one) for k, v in tree.items()}}
    return one(tree)


def _encode_tensor(t: torch.Tensor, limit: int = MAX_ELEMENTS) -> dict:
    t = t.detach()
    image = {"shape": list(t.shape), "dtype": str(t.dtype), "device": t.device.type}
    if t.device.type == "meta" or t.numel() > limit:
        return image | {"data": None}
    image["data"] = [
        v if math.isfinite(v) else repr(v) for v in t.cpu().double().reshape(-1).tolist()
    ]
    if t.is_complex():
        image["data"] = None
    return image


def _decode_tensor(obj: Any) -> torch.Tensor:
    if not isinstance(obj, dict) or not isinstance(obj.get("shape"), list):
        raise ReplayError("a recorded tensor is malformed")
    dtype = _dtype(obj.get("dtype", ""))
    if dtype is None or obj.get("data") is None or obj.get("device") not in ("cpu", "meta"):
        raise ReplayError("a tensor the call used cannot be recomputed (too large or not on cpu)")
    try:
        data = [float(x) for x in obj["data"]]
        shape = [int(n) for n in obj["shape"]]
        t = torch.tensor(data, dtype=torch.float64).reshape(shape).to(dtype)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ReplayError("a recorded tensor is malformed") from err
    return t.to("meta") if obj["device"] == "meta" else t


# ----------------------------------------------------------------------------- sessions


@dataclass
class _Session:
    mode: str  # "record" or "replay"
    calls: list = field(default_factory=list)
    refs: _Refs = field(default_factory=_Refs)  # record
    tensors: dict = field(default_factory=dict)  # replay: ref -> recomputed tensor
    modules: list = field(default_factory=list)  # every module the calls saw, in order
    cursor: int = 0
    depth: int = 0


_SESSION: _Session | None = None


@contextlib.contextmanager
def _session(session: _Session) -> Iterator[_Session]:
    global _SESSION
    outer, _SESSION = _SESSION, session
    try:
        yield session
    finally:
        _SESSION = outer


def intercept(fn: Callable, args: tuple, kwargs: dict, invoke: Callable) -> tuple:
    """``invoke(fn, args, kwargs)``'s outcome, recorded or replayed when a session is active.

    ``_core.call`` sends every call of learner code through here. An outcome is
    ``("ok", value)``, ``("check_failure", message)`` or ``("error", type name, text, flags)``.
    """
    session = _SESSION
    if session is None or session.depth:
        return invoke(fn, args, kwargs)
    session.depth += 1
    try:
        if session.mode == "record":
            return _record(session, fn, args, kwargs, invoke)
        return _replay(session, fn, args, kwargs)
    finally:
        session.depth -= 1


def _record(session: _Session, fn, args, kwargs, invoke) -> tuple:
    refs, ops = session.refs, []
    entry = {"digest": digest([fn if isinstance(fn, torch.nn.Module) else None, args, kwargs])}
    entry["inputs"] = {path: refs.register(t) for path, t in _inputs(fn, args, kwargs)}
    _note_modules(session, fn, args, kwargs)
    if _is_backward(fn):  # autograd stores gradients without an operator: see "after"
        outcome = invoke(fn, args, kwargs)
    else:
        with _Tracer(refs, ops):
            outcome = invoke(fn, args, kwargs)
    entry["ops"] = ops
    if outcome[0] == "ok":
        entry["outcome"] = ["ok", _encode_result(outcome[1], refs)]
        _note_result_modules(session, outcome[1])
    elif outcome[0] == "error":
        flags = {k: v for k, v in outcome[3].items() if k in ("stub", "shape_error")}
        entry["outcome"] = ["error", outcome[1], str(outcome[2])[:300], flags]
    else:
        entry["outcome"] = list(outcome)
    entry["after"] = [_module_state(m, refs) for m in session.modules]
    entry["grad_enabled"] = torch.is_grad_enabled()  # a call may switch gradients off for good
    session.calls.append(entry)
    return outcome


def _is_backward(fn: Any) -> bool:
    return getattr(fn, "__name__", "") == "backward" and isinstance(
        getattr(fn, "__self__", None), torch.Tensor
    )


def _note_modules(session: _Session, fn, args, kwargs) -> None:
    """Remember every module a call sees, in order: their state is recorded after each call."""
    for _, module in _modules(fn, args, kwargs):
        if not any(module is m for m in session.modules):
            session.modules.append(module)


def _note_result_modules(session: _Session, value: Any) -> None:
    for v in value if isinstance(value, tuple | list) else [value]:
        if isinstance(v, torch.nn.Module) and not any(v is m for m in session.modules):
            session.modules.append(v)


def _encode_result(value: Any, refs: _Refs) -> Any:
    if isinstance(value, torch.Tensor):
        ref = refs.find(value)
        return {"tensor": ref} if ref is not None else {"value": _encode_tensor(value)}
    if isinstance(value, torch.nn.Module):
        return {"module": _module_state(value, refs)}
    if isinstance(value, tuple | list):
        return {
            "tuple" if isinstance(value, tuple) else "list": [
                _encode_result(v, refs) for v in value
            ]
        }
    return {"plain": _encode_value(value)}


def _module_state(module: torch.nn.Module, refs: _Refs) -> dict:
    """A module's tree: each submodule's class, plain attributes, mode and tensors (with grads)."""
    tree = {}
    for prefix, m in module.named_modules(remove_duplicate=False):
        plain = {
            k: _encode_value(v)
            for k, v in vars(m).items()
            if not k.startswith("_") and isinstance(v, bool | int | float | str | type(None))
        }
        tensors = {}
        for name, t in _module_tensors_own(m):
            if t is None:
                kind = "param" if name in m._parameters else "buffer"
                tensors[name] = {"none": True, "kind": kind}
                continue
            ref = refs.find(t)
            image = {"ref": ref} if ref is not None else {"value": _encode_tensor(t)}
            image["kind"] = (
                "param" if name in m._parameters else ("buffer" if name in m._buffers else "attr")
            )
            image["requires_grad"] = bool(t.requires_grad)
            if t.grad is not None:
                image["grad"] = _encode_tensor(t.grad)
            tensors[name] = image
        cls = type(m)
        tree[prefix] = {
            "class": [cls.__module__, cls.__qualname__],
            "plain": plain,
            "tensors": tensors,
        }
    return tree


def _module_tensors_own(m: torch.nn.Module) -> list[tuple[str, torch.Tensor | None]]:
    """A module's own tensors by name; parameters and buffers set to None included."""
    own = [(n, t) for n, t in list(m._parameters.items()) + list(m._buffers.items())]
    return own + [(n, t) for n, t in vars(m).items() if isinstance(t, torch.Tensor) and n[0] != "_"]


# ----------------------------------------------------------------------------- replay


def _replay(session: _Session, fn, args, kwargs) -> tuple:
    if session.cursor >= len(session.calls):
        raise ReplayError("the recording has fewer calls of your code than the check makes")
    entry = session.calls[session.cursor]
    session.cursor += 1
    if not isinstance(entry, dict):
        raise ReplayError("the recording is malformed")
    if entry.get("digest") != digest(
        [fn if isinstance(fn, torch.nn.Module) else None, args, kwargs]
    ):
        raise ReplayError("the recording was made on other inputs than the check's")
    tensors = session.tensors
    given = dict(_inputs(fn, args, kwargs))
    inputs = entry.get("inputs")
    if not isinstance(inputs, dict) or set(inputs) != set(given):
        raise ReplayError("the recording's inputs do not match the call")
    for path, ref in inputs.items():
        tensors[_ref(ref)] = given[path]
    _note_modules(session, fn, args, kwargs)
    # Constants beyond a scalar could smuggle in an answer, unless the call had no tensor inputs:
    # then its result is computed in Python from Python values, like a returned number.
    _run_ops([] if _is_backward(fn) else entry.get("ops"), tensors, big_constants=not given)
    outcome = entry.get("outcome")
    if not isinstance(outcome, list) or not outcome:
        raise ReplayError("the recording is malformed")
    if outcome[0] == "ok" and len(outcome) == 2:
        result = ("ok", _decode_result(outcome[1], tensors, big_constants=not given))
        _note_result_modules(session, result[1])
    elif outcome[0] == "check_failure" and len(outcome) == 2 and isinstance(outcome[1], str):
        result = ("check_failure", outcome[1][:600])
    elif outcome[0] == "error" and len(outcome) == 4 and isinstance(outcome[3], dict):
        flags = {k: bool(outcome[3].get(k)) for k in ("stub", "shape_error")}
        flags["exception"] = rebuilt_exception(str(outcome[1])[:80], str(outcome[2])[:300])
        result = ("error", str(outcome[1])[:80], str(outcome[2])[:300], flags)
    else:
        raise ReplayError("the recording is malformed")
    after = entry.get("after")
    if not isinstance(after, list) or len(after) != len(session.modules):
        raise ReplayError("the recording lacks the state your code left on a module")
    for module, tree in zip(session.modules, after, strict=True):
        _apply_state(module, tree, tensors)
    torch.set_grad_enabled(entry.get("grad_enabled") is not False)
    return result


def rebuilt_exception(type_name: str, text: str) -> Exception:
    """An exception like the one learner code raised: the builtin class of that name, if any."""
    import builtins

    cls = getattr(builtins, type_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = type(type_name if type_name.isidentifier() else "Error", (Exception,), {})
    try:
        return cls(text)
    except Exception:  # an exception class with another signature
        return Exception(text)


def _ref(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ReplayError("the recording is malformed")
    return value


def _run_ops(ops: Any, tensors: dict, big_constants: bool = False) -> None:
    """Recompute the recorded operators, in order, on trusted tensors."""
    if not isinstance(ops, list) or len(ops) > MAX_OPS:
        raise ReplayError("the recording's operator log is malformed or too long")
    for entry in ops:
        if not isinstance(entry, dict):
            raise ReplayError("the recording's operator log is malformed")
        if "const" in entry:
            value = _decode_tensor(entry.get("value"))
            if value.numel() > MAX_CONSTANT_ELEMENTS and not big_constants:
                raise ReplayError(
                    "your code used a tensor that is neither an input nor computed from one"
                )
            tensors[_ref(entry["const"])] = value
            continue
        op = _aten_op(entry.get("op"), entry.get("overload"))
        args = _decode_tree(entry.get("args"), tensors)
        kwargs = _decode_tree(entry.get("kwargs"), tensors)
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise ReplayError("the recording's operator log is malformed")
        try:
            with torch.set_grad_enabled(entry.get("grad") is True):
                out = op(*args, **kwargs)
        except Exception as err:
            raise ReplayError(f"a recorded operator ({entry['op']}) could not be rerun") from err
        _bind_tree(entry.get("out"), out, tensors)


def _aten_op(name: Any, overload: Any) -> Any:
    if not isinstance(name, str) or not name.startswith("aten::") or not isinstance(overload, str):
        raise ReplayError("the recording names an operator outside ATen")
    packet = getattr(torch.ops.aten, name.removeprefix("aten::"), None)
    op = getattr(packet, overload or "default", None) if packet is not None else None
    if not isinstance(op, torch._ops.OpOverload):
        raise ReplayError(f"the recording names an unknown operator ({name[:60]})")
    return op


def _decode_tree(obj: Any, tensors: dict) -> Any:
    if not isinstance(obj, dict) or len(obj) != 1:
        raise ReplayError("the recording's operator log is malformed")
    if "seq" in obj and isinstance(obj["seq"], list):
        return [_decode_tree(v, tensors) for v in obj["seq"]]
    if "map" in obj and isinstance(obj["map"], dict):
        return {k: _decode_tree(v, tensors) for k, v in obj["map"].items()}
    if "ref" in obj:
        ref = _ref(obj["ref"])
        if ref not in tensors:
            raise ReplayError("the recording uses a tensor before it exists")
        return tensors[ref]
    value = _decode_value(obj)
    if isinstance(value, _Opaque):
        raise ReplayError("the recording's operator log holds a value it cannot carry")
    return value


def _bind_tree(obj: Any, out: Any, tensors: dict) -> None:
    if not isinstance(obj, dict) or len(obj) != 1:
        raise ReplayError("the recording's operator log is malformed")
    if "seq" in obj:
        if not isinstance(out, tuple | list) or len(out) != len(obj["seq"]):
            raise ReplayError("a rerun operator returned something else than recorded")
        for o, v in zip(obj["seq"], out, strict=True):
            _bind_tree(o, v, tensors)
    elif "ref" in obj:
        if not isinstance(out, torch.Tensor):
            raise ReplayError("a rerun operator returned something else than recorded")
        tensors[_ref(obj["ref"])] = out


def _decode_result(obj: Any, tensors: dict, big_constants: bool = False) -> Any:
    if not isinstance(obj, dict) or len(obj) != 1:
        raise ReplayError("the recorded result is malformed")
    ((key, v),) = obj.items()
    if key == "tensor":
        if _ref(v) not in tensors:
            raise ReplayError("the recorded result is not a tensor the call computed")
        return tensors[v]
    if key == "value":
        value = _decode_tensor(v)
        if value.numel() > MAX_CONSTANT_ELEMENTS and not big_constants:
            raise ReplayError("your code returned a tensor that was not computed by an operator")
        return value
    if key in ("tuple", "list") and isinstance(v, list):
        items = [_decode_result(x, tensors, big_constants) for x in v]
        return tuple(items) if key == "tuple" else items
    if key == "module" and isinstance(v, dict):
        return _build_module(v, tensors)
    if key == "plain":
        return _decode_value(v)
    raise ReplayError("the recorded result is malformed")


class StandIn(torch.nn.Module):
    """A learner's module, rebuilt from a recording; its calls are answered from the recording."""

    def forward(self, *args, **kwargs):
        raise ReplayError("a rebuilt module can only be called through the check")


def _build_module(tree: dict, tensors: dict) -> torch.nn.Module:
    """A module with the recorded submodules, attributes and tensors."""
    built: dict[str, torch.nn.Module] = {}
    for prefix in tree:  # recorded parents-first, in the learner's order
        node = tree[prefix]
        if not isinstance(node, dict) or not isinstance(node.get("class"), list):
            raise ReplayError("a recorded module is malformed")
        module = _blank(node["class"])
        if prefix:
            parent, _, name = prefix.rpartition(".")
            if parent not in built:
                raise ReplayError("a recorded module is malformed")
            built[parent].add_module(name, module)
        built[prefix] = module
        _apply_node(module, node, tensors)
    if "" not in built:
        raise ReplayError("a recorded module is malformed")
    return built[""]


def _blank(cls_path: list) -> torch.nn.Module:
    """An empty ``torch.nn`` class instance, else a :class:`StandIn` named like the learner's."""
    module_name, qualname = (str(x) for x in cls_path[:2])
    cls = None
    if module_name.startswith("torch.nn.modules."):
        cls = getattr(torch.nn, qualname, None)
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        cls = type(qualname[:80] or "Module", (StandIn,), {"__module__": "learner"})
    module = cls.__new__(cls)
    torch.nn.Module.__init__(module)
    return module


def _apply_node(module: torch.nn.Module, node: Any, tensors: dict) -> None:
    if not isinstance(node, dict):
        raise ReplayError("a recorded module is malformed")
    for name, value in (node.get("plain") or {}).items():
        if not isinstance(name, str) or name.startswith("_"):
            raise ReplayError("a recorded module is malformed")
        object.__setattr__(module, name, _decode_value(value)) if name == "training" else setattr(
            module, name, _decode_value(value)
        )
    for name, image in (node.get("tensors") or {}).items():
        if not isinstance(image, dict) or not isinstance(name, str) or name.startswith("_"):
            raise ReplayError("a recorded module is malformed")
        if image.get("none") is True:
            if image.get("kind") == "param":
                module._buffers.pop(name, None)
                module._parameters[name] = None
            else:
                module._parameters.pop(name, None)
                module._buffers[name] = None
            continue
        if "ref" in image:
            if _ref(image["ref"]) not in tensors:
                raise ReplayError("a recorded module holds a tensor the call did not compute")
            t = tensors[image["ref"]]
        else:
            t = _decode_tensor(image.get("value"))
        current = _module_tensors_dict(module).get(name)
        kind = image.get("kind")
        grad = _decode_tensor(image["grad"]) if "grad" in image else None
        if current is not t:
            t = t.detach()
            if kind == "param":
                t = torch.nn.Parameter(t, requires_grad=bool(image.get("requires_grad")))
            module._parameters.pop(name, None)
            module._buffers.pop(name, None)
            module.__dict__.pop(name, None)
            if kind == "param":
                module._parameters[name] = t
            elif kind == "buffer":
                module._buffers[name] = t
            else:
                module.__dict__[name] = t
        elif t.is_leaf:
            t.requires_grad_(bool(image.get("requires_grad")))
        if isinstance(t, torch.nn.Parameter):
            t.grad = None if grad is None else grad.to(t.dtype).reshape(t.shape)


def _module_tensors_dict(m: torch.nn.Module) -> dict:
    return dict(_module_tensors_own(m))


def _apply_state(module: torch.nn.Module, tree: Any, tensors: dict) -> None:
    """Give a trusted module the state the learner's call left on it."""
    if not isinstance(tree, dict):
        raise ReplayError("the recording lacks the state your code left on a module")
    subs = dict(module.named_modules(remove_duplicate=False))
    if set(tree) != set(subs):
        raise ReplayError("your code changed a module's submodules")
    for prefix, node in tree.items():
        _apply_node(subs[prefix], node, tensors)


# ----------------------------------------------------------------------------- test cells


@dataclass(frozen=True)
class CheckCall:
    """One statement of a test cell: ``check_name(arg, ..., key=constant)``."""

    check: str
    args: tuple  # ("name", learner global) or ("const", value)
    kwargs: tuple  # (key, value) pairs of constants


def parse_test_cell(source: str) -> list[CheckCall]:
    """The check calls of a test cell; anything else in it raises ``ValueError``."""
    calls = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        call = node.value if isinstance(node, ast.Expr) else None
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id.startswith("check_")
        ):
            raise ValueError(f"line {node.lineno} is not a call of a check_* function")
        args = tuple(_argument(a) for a in call.args)
        kwargs = tuple((k.arg, ast.literal_eval(k.value)) for k in call.keywords if k.arg)
        calls.append(CheckCall(call.func.id, args, kwargs))
    return calls


def _argument(node: ast.expr) -> tuple:
    if isinstance(node, ast.Name):
        return ("name", node.id)
    return ("const", ast.literal_eval(node))


def _plain(value: Any) -> bool:
    """Learner values carried by value (answers), not called (functions and classes)."""
    return not callable(value) and not isinstance(value, torch.nn.Module | torch.Tensor)


@contextlib.contextmanager
def _stock_state() -> Iterator[None]:
    """The same starting point on both sides: PyTorch's stock defaults and a fixed seed."""
    dtype, threads = torch.get_default_dtype(), torch.get_num_threads()
    rng = torch.get_rng_state()
    torch.set_default_dtype(torch.float32)
    torch.set_num_threads(1)  # reductions split the same way on both sides: bit-equal results
    torch.manual_seed(0)
    try:
        with torch.device("cpu"):
            yield
    finally:
        torch.set_default_dtype(dtype)
        torch.set_num_threads(threads)
        torch.set_rng_state(rng)


# One module per notebook, named after its number (nb01_attention ...): see the README.
CHECK_MODULES = tuple(sorted(p.stem for p in Path(__file__).parent.glob("nb[0-9][0-9]_*.py")))


def find_check(name: str) -> Callable:
    """The ``check_*`` function of that name, from the checks package (imported on demand)."""
    import importlib

    for module in CHECK_MODULES:
        found = getattr(importlib.import_module(f"{__package__}.{module}"), name, None)
        if name.startswith("check_") and callable(found):
            return found
    raise ValueError(f"there is no check named {name}")


def record_cell(source: str, namespace: dict) -> str:
    """In the kernel: run a test cell's check calls again, recording; the recording as JSON."""
    statements = []
    for item in parse_test_cell(source):
        values = {
            name: _encode_value(namespace[name])
            for kind, name in item.args
            if kind == "name" and name in namespace and _plain(namespace[name])
        }
        session = _Session("record")
        outcome = ["passed", ""]
        args = [namespace.get(v, None) if kind == "name" else v for kind, v in item.args]
        try:
            with _session(session), _stock_state(), torch.enable_grad():
                find_check(item.check)(*args, **dict(item.kwargs))
        except AssertionError as err:
            outcome = ["failed", str(err)[:600]]
        except Exception as err:  # the trusted side decides what a failure means
            outcome = ["failed", f"{type(err).__name__}: {err}"[:600]]
        statements.append({"values": values, "calls": session.calls, "kernel_outcome": outcome})
    return json.dumps({"statements": statements})


def publish_recording(source: str, namespace: dict) -> None:
    """In the kernel: publish :func:`record_cell`'s recording as display data for the grader."""
    from IPython.display import publish_display_data

    publish_display_data({MIME: record_cell(source, namespace)})


def probe_source(test_source: str) -> str:
    """The code of the cell the grader runs after a test cell to record its checks."""
    return (
        "from autograder.checks.replay import publish_recording as _mha_record\n"
        f"_mha_record({test_source!r}, globals())\n"
        "del _mha_record\n"
    )


@dataclass
class Verdict:
    """What replaying one test cell established."""

    status: str  # "verified", "refuted" or "unverified"
    message: str = ""


class _Learner:
    """Stands for a learner's function or class during replay: only the recording answers it."""

    def __init__(self, name: str):
        self.__name__ = name

    def __call__(self, *args, **kwargs):
        raise ReplayError(f"`{self.__name__}` was called outside a recorded call")


def replay_cell(source: str, recording: str | None) -> Verdict:
    """In the trusted process: the test cell's checks, learner calls answered by a recording."""
    from ._core import CheckFailure

    try:
        statements = parse_test_cell(source)
        for item in statements:
            find_check(item.check)
    except (SyntaxError, ValueError) as err:
        return Verdict("unverified", f"the test cell cannot be replayed ({err})")
    unverifiable = [UNVERIFIABLE[s.check] for s in statements if s.check in UNVERIFIABLE]
    if unverifiable:
        return Verdict("unverified", unverifiable[0])
    if recording is None:
        return Verdict("refuted", "the checks could not be re-run on your code (no recording)")
    if len(recording) > MAX_RECORDING_BYTES:
        return Verdict("refuted", "the recording of your code's calls is too large")
    try:
        data = json.loads(recording)
        recorded = data["statements"]
        if not isinstance(recorded, list) or len(recorded) != len(statements):
            raise ReplayError("the recording does not match the test cell")
        for item, rec in zip(statements, recorded, strict=True):
            _replay_statement(item, rec)
    except CheckFailure as err:
        return Verdict("refuted", str(err))
    except ReplayError as err:
        return Verdict("refuted", f"the re-run did not match: {err}")
    except (ValueError, KeyError, TypeError, IndexError, RecursionError, AttributeError) as err:
        return Verdict("refuted", f"the recording is malformed ({type(err).__name__})")
    return Verdict("verified")


def _replay_statement(item: CheckCall, rec: Any) -> None:
    from ._core import CheckFailure

    if not isinstance(rec, dict) or not isinstance(rec.get("calls"), list):
        raise ReplayError("the recording is malformed")
    values = rec.get("values") or {}
    args = []
    for kind, v in item.args:
        if kind == "const":
            args.append(v)
        elif v in values:
            args.append(_decode_value(values[v]))
        else:
            args.append(_Learner(v))
    session = _Session("replay", calls=rec["calls"])
    kernel = rec.get("kernel_outcome")
    with _session(session), _stock_state(), torch.enable_grad():
        try:
            find_check(item.check)(*args, **dict(item.kwargs))
        except CheckFailure:
            raise
        except ReplayError:
            # The check went on where the kernel's run stopped at a rule this process cannot
            # see (a Python-level call, say): the kernel's own diagnosis explains it best.
            if isinstance(kernel, list) and kernel[:1] == ["failed"] and isinstance(kernel[1], str):
                raise CheckFailure(kernel[1].splitlines()[0][:300] if kernel[1] else "") from None
            raise
        except Exception as err:  # a check crashing on recorded data: not verified
            raise ReplayError(
                f"the check could not digest the recording ({type(err).__name__})"
            ) from None
