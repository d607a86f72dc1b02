"""Plain values and tensors as JSON, and the one walker over the tensors a call can see.

Both ends of a verification use this module: the kernel encodes what learner code did, the
trusted grader decodes it (anything malformed raises :class:`ReplayError`). Tensors travel as
shape, dtype and their values as float64 in base64; a value that cannot travel becomes an
:class:`Opaque`, which equals nothing.

Shape legend: none; this module moves tensors of any shape.
"""

from __future__ import annotations

import base64
import itertools
import json
import math
import numbers
import re
from collections.abc import Callable
from typing import Any

import numpy
import torch

MAX_ELEMENTS = 200_000  # a tensor value larger than this is not carried
MAX_DEPTH = 100  # a record nests a few levels; the decoders below recurse once per level


class ReplayError(BaseException):
    """The kernel's record does not answer the trusted check's call: the cell is refuted.

    A ``BaseException``, so that no ``except Exception`` in a check can swallow it.
    """


class UnreadableReply(ReplayError):
    """The kernel's reply is not a record the grader can read (malformed, or nested too deep)."""


def read_reply(text: str) -> dict:
    """The JSON object a kernel replied, nested at most ``MAX_DEPTH`` levels: every decoder of
    its parts can then recurse without running out of stack. Anything else raises
    :class:`UnreadableReply`, saying that the reply could not be read."""
    unreadable = "the kernel's reply could not be read"
    try:
        reply = json.loads(text)
    except RecursionError:
        raise UnreadableReply(f"{unreadable}: it is nested too deep") from None
    except ValueError:
        raise UnreadableReply(f"{unreadable}: it is not valid JSON") from None
    if not isinstance(reply, dict):
        raise UnreadableReply(f"{unreadable}: it is not a record")
    if _depth(text) > MAX_DEPTH:
        raise UnreadableReply(f"{unreadable}: it is nested over {MAX_DEPTH} levels deep")
    return reply


_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')  # unrolled: fast on long strings
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _depth(text: str) -> int:
    """How deep lists and objects nest in valid JSON ``text``: its brackets outside strings,
    counted without recursion (in C but for one step per bracket: walking the parsed value
    visited every number of every tensor, a twentieth of a verification's time)."""
    brackets = _NOT_BRACKETS.sub("", _STRINGS.sub("", text))
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0)


def encode_value(value: Any) -> Any:
    """A JSON image of a plain value (number, string, device, dtype, containers of those)."""
    if value is None or isinstance(value, bool | str):
        return {"v": value if not isinstance(value, str) else str(value)}
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
        kind = "tuple" if isinstance(value, tuple) else "list" if isinstance(value, list) else "set"
        return {kind: [encode_value(v) for v in value]}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"dict": {str(k): encode_value(v) for k, v in value.items()}}
    return {"opaque": type(value).__name__}


class Opaque:
    """Stands for a value the record could not carry: it equals nothing."""

    def __init__(self, name: str):
        self.name = str(name)[:80]

    def __repr__(self) -> str:
        return f"<a {self.name}>"


def dtype_named(name: str) -> torch.dtype | None:
    value = getattr(torch, str(name).removeprefix("torch."), None)
    return value if isinstance(value, torch.dtype) else None


def decode_value(obj: Any) -> Any:
    """The inverse of :func:`encode_value`; anything malformed raises ReplayError."""
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
        try:
            return torch.device(v)
        except RuntimeError as err:
            raise ReplayError("a recorded value is malformed") from err
    if key == "dtype" and isinstance(v, str) and dtype_named(v) is not None:
        return dtype_named(v)
    if key == "torch" and isinstance(v, str):
        found = getattr(torch, v, None)
        if isinstance(found, torch.memory_format | torch.layout):
            return found
    if key in ("tuple", "list", "set") and isinstance(v, list):
        items = [decode_value(x) for x in v]
        return {"tuple": tuple, "list": list, "set": set}[key](items)
    if key == "dict" and isinstance(v, dict):
        return {k: decode_value(x) for k, x in v.items()}
    if key == "opaque":
        return Opaque(v)
    raise ReplayError("a recorded value is malformed")


def encode_tensor(t: torch.Tensor, limit: int = MAX_ELEMENTS) -> dict:
    """Shape, dtype and values (``None`` when larger than ``limit``, complex, or on meta).

    The values travel as float64 in base64 (NaN and infinities included): as a JSON list of
    numbers they cost both ends about ten times the CPU, and the grader's reading of a reply
    walked every digit.
    """
    t = t.detach()
    image = {"shape": list(t.shape), "dtype": str(t.dtype), "device": t.device.type}
    if t.device.type == "meta" or t.numel() > limit or t.is_complex():
        return image | {"data": None}
    values = t.cpu().double().contiguous().numpy(force=True).astype("<f8", copy=False)
    return image | {"data": base64.b64encode(values.tobytes()).decode("ascii")}


def decode_tensor(obj: Any) -> torch.Tensor:
    if not isinstance(obj, dict) or not isinstance(obj.get("shape"), list):
        raise ReplayError("a recorded tensor is malformed")
    dtype = dtype_named(obj.get("dtype", ""))
    if dtype is not None and obj.get("device") == "meta":  # no values: it carries nothing
        try:
            return torch.empty([int(n) for n in obj["shape"]], dtype=dtype, device="meta")
        except (TypeError, ValueError, RuntimeError) as err:
            raise ReplayError("a recorded tensor is malformed") from err
    if dtype is None or obj.get("data") is None or obj.get("device") != "cpu":
        raise ReplayError("a tensor the call used cannot be recomputed (too large or not on cpu)")
    try:
        shape = [int(n) for n in obj["shape"]]
        size, data = math.prod(shape), obj["data"]
        # the length is checked before decoding, so a forged reply cannot make a large buffer
        if size > MAX_ELEMENTS or not isinstance(data, str) or len(data) != 4 * -(-8 * size // 3):
            raise ValueError("size")
        values = numpy.frombuffer(base64.b64decode(data, validate=True), dtype="<f8")
        return torch.from_numpy(values.copy()).reshape(shape).to(dtype)
    except (TypeError, ValueError, RuntimeError, OverflowError) as err:
        raise ReplayError("a recorded tensor is malformed") from err


def map_tree(tree: Any, one: Callable[[Any], Any]) -> Any:
    """``one`` applied to every leaf of nested lists, tuples and dicts, as ``seq``/``map`` JSON."""
    if isinstance(tree, tuple | list):
        return {"seq": [map_tree(v, one) for v in tree]}
    if isinstance(tree, dict):
        return {"map": {str(k): map_tree(v, one) for k, v in tree.items()}}
    return one(tree)


def own_tensors(m: torch.nn.Module) -> list[tuple[str, torch.Tensor | None]]:
    """A module's own tensors by name: parameters, buffers (``None`` ones too), attributes."""
    own = list(m._parameters.items()) + list(m._buffers.items())
    attrs = [(n, t) for n, t in vars(m).items() if isinstance(t, torch.Tensor) and n[0] != "_"]
    return own + attrs


def module_tensors(module: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """Every tensor a module holds, by dotted path (``q_proj.weight``), ``None`` ones left out."""
    found = []
    for prefix, m in module.named_modules(remove_duplicate=False):
        head = f"{prefix}." if prefix else ""
        found += [(head + name, t) for name, t in own_tensors(m) if t is not None]
    return found


def call_parts(fn: Any, args: tuple, kwargs: dict) -> list[tuple[str, Any]]:
    """What a call receives, by path: ``self`` (the module or tensor it is bound to), ``args``,
    ``kwargs``."""
    owner = getattr(fn, "__self__", None)
    this = owner if isinstance(owner, torch.Tensor | torch.nn.Module) else fn
    return [("self", this), ("args", list(args)), ("kwargs", dict(kwargs))]


def walk(path: str, value: Any, found: list, modules: list) -> None:
    """Append ``(path, tensor)`` for every tensor in ``value`` and ``(path, module)`` for every
    module; containers are followed, modules by their tensors."""
    if isinstance(value, torch.Tensor):
        found.append((path, value))
    elif isinstance(value, torch.nn.Module):
        modules.append((path, value))
        found += [(f"{path}.{n}", t) for n, t in module_tensors(value)]
    elif isinstance(value, tuple | list):
        for i, x in enumerate(value):
            walk(f"{path}.{i}", x, found, modules)
    elif isinstance(value, dict):
        for k, x in value.items():
            walk(f"{path}.{k}", x, found, modules)


def call_inputs(fn: Any, args: tuple, kwargs: dict) -> tuple[list, list]:
    """``([(path, tensor)], [(path, module)])`` of a call: ``self.q_proj.weight``, ``args.0``."""
    found: list = []
    modules: list = []
    for path, value in call_parts(fn, args, kwargs):
        walk(path, value, found, modules)
    return found, modules


def watched_inputs(modules: dict[str, torch.nn.Module]) -> list[tuple[str, torch.Tensor]]:
    """The tensors of every module a statement has seen, as inputs of each call:
    ``watch.<id>.<path>``. So whatever a call leaves on them is named, not carried by value."""
    return [(f"watch.{mid}.{p}", t) for mid, m in modules.items() for p, t in module_tensors(m)]


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


def rebuild_tensor(t: torch.Tensor, requires_grad: bool) -> torch.Tensor:
    """How the kernel unpickles a grader's tensor (the grader pickles them detached)."""
    return t.requires_grad_(requires_grad) if t.is_floating_point() or t.is_complex() else t


def rebuild_as(cls: type, state: dict) -> Any:
    """An instance of ``cls`` with ``state``: how the kernel gets a grader's object whose own
    class (a check's subclass) it does not have."""
    obj = cls.__new__(cls)
    if hasattr(obj, "__setstate__"):
        obj.__setstate__(state)
    else:
        obj.__dict__.update(state)
    return obj
