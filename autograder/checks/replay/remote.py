"""The trusted end of a learner call: send it to the kernel, rebuild what comes back.

``_core.call`` hands every call of learner code to :func:`intercept`. Outside a verification it
simply runs the call. During one (:func:`active`), the callee is a stand-in (:class:`Learner` for a
global, :class:`StandIn` for a module the learner's code made): the call, its arguments and the
state of every module the statement has seen travel to the kernel as a pickle; the kernel's JSON
record comes back and :class:`.rerun.Rerun` recomputes it. A module the learner's code returns
comes back as a :class:`StandIn` with the same submodules, attributes and (recomputed) tensors.

Gradients: a backward pass the check starts (``loss.backward``) runs here, on the recomputed
graph, so the gradients it leaves are the grader's own.
"""

from __future__ import annotations

import contextlib
import io
import json
import pickle
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from autograder.kernel.codec import (
    ReplayError,
    call_inputs,
    decode_value,
    module_tensors,
    own_tensors,
    rebuild_as,
    rebuild_tensor,
    rebuilt_exception,
    watched_inputs,
)
from autograder.torch_helpers import note_claimed_calls

from . import operators
from .rerun import Rerun, quiet, ref_number

MAX_REPLY_BYTES = 64 * 1024**2


class KernelGone(ReplayError):
    """The kernel did not answer (it died, or ran out of time)."""


class Learner:
    """Stands for a learner's global function or class: only the kernel can run it."""

    def __init__(self, name: str):
        self.__name__ = name

    def __call__(self, *args, **kwargs):
        raise ReplayError(f"`{self.__name__}` was called outside a recorded call")


class StandIn(torch.nn.Module):
    """A module the learner's code made, as the grader rebuilt it; calls go to the kernel."""

    def forward(self, *args, **kwargs):
        raise ReplayError("a rebuilt module can only be called through the check")


@dataclass
class Session:
    """One statement's verification: its kernel, its rerun and the modules it has seen."""

    kernel: Callable[[bytes], str]
    allowed: frozenset[str] = operators.DEFAULT
    rerun: Rerun = field(default_factory=Rerun)
    modules: dict = field(default_factory=dict)  # mid -> trusted module, in the order seen
    depth: int = 0

    def __post_init__(self):
        self.rerun.allowed = self.allowed

    def mid_of(self, module: torch.nn.Module) -> str | None:
        return next((mid for mid, m in self.modules.items() if m is module), None)

    def ask(self, request: dict) -> dict:
        reply = ask(self.kernel, request)
        if "server_error" in reply:
            raise ReplayError(f"the kernel could not run the call ({reply['server_error']})"[:300])
        return reply


def ask(kernel: Callable[[bytes], str | None], request: dict) -> dict:
    """The kernel's JSON reply to one request; silence, excess or nonsense raise."""
    text = kernel(pickle.dumps(request))
    if text is None:
        raise KernelGone("the kernel stopped answering while the checks ran your code")
    if len(text) > MAX_REPLY_BYTES:
        raise ReplayError("the kernel's record of your code's call is too large")
    try:
        reply = json.loads(text)
    except ValueError as err:
        raise ReplayError("the kernel's reply is malformed") from err
    if not isinstance(reply, dict):
        raise ReplayError("the kernel's reply is malformed")
    return reply


_SESSION: Session | None = None


@contextlib.contextmanager
def active(session: Session) -> Iterator[Session]:
    global _SESSION
    outer, _SESSION = _SESSION, session
    try:
        yield session
    finally:
        _SESSION = outer


def intercept(
    fn: Callable, args: tuple, kwargs: dict, invoke: Callable, patches: dict | None = None
) -> tuple:
    """``invoke(fn, args, kwargs)``'s outcome, or the kernel's, recomputed, during a verification.

    An outcome is ``("ok", value)``, ``("check_failure", message)`` or
    ``("error", type name, text, flags)``.
    """
    session = _SESSION
    if session is None or session.depth or _target(session, fn) is None:
        with patched(patches or {}):
            return invoke(fn, args, kwargs)
    session.depth += 1
    try:
        return _remote(session, fn, args, kwargs, patches or {})
    finally:
        session.depth -= 1


def _target(session: Session, fn: Any) -> tuple | None:
    if isinstance(fn, Learner):
        return ("global", fn.__name__)
    if isinstance(fn, StandIn):
        return ("module", session.mid_of(fn))
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, StandIn):
        return ("method", session.mid_of(owner), fn.__name__)
    return None  # the grader's own code (a backward pass on its tensors): run here


class _Pickler(pickle.Pickler):
    def __init__(self, file, session: Session, top: Any = None):
        super().__init__(file)
        self.session, self.top = session, top

    def persistent_id(self, obj):
        if isinstance(obj, Learner):
            return ("global", obj.__name__)
        if isinstance(obj, torch.nn.Module) and obj is not self.top:
            mid = self.session.mid_of(obj)
            if mid is not None:
                return ("module", mid)
        return None

    def reducer_override(self, obj):
        cls = type(obj)
        if cls.__module__.startswith("autograder.checks"):  # the kernel has no such class
            base = next(b for b in cls.__mro__ if not b.__module__.startswith("autograder.checks"))
            if issubclass(base, tuple | list):
                return (base, (list(obj),))
            return (rebuild_as, (base, dict(vars(obj))))
        if isinstance(obj, torch.Tensor) and not isinstance(obj, torch.nn.Parameter):
            if obj.requires_grad:  # a tensor in a graph does not pickle: its values do
                return (rebuild_tensor, (obj.detach(), True))
        return NotImplemented


def _dumps(session: Session, value: Any, top: Any = None) -> bytes:
    buffer = io.BytesIO()
    _Pickler(buffer, session, top).dump(value)
    return buffer.getvalue()


def _state(module: torch.nn.Module) -> dict:
    """What the kernel's copy of a module must match before a call."""
    subs = module.named_modules(remove_duplicate=False)
    plain, training = {}, {}
    for prefix, m in subs:
        training[prefix] = m.training
        plain[prefix] = {
            k: v
            for k, v in vars(m).items()
            if not k.startswith("_") and k != "training" and isinstance(v, bool | int | float | str)
        }
    tensors = {path: t.detach().clone() for path, t in module_tensors(module)}
    return {"tensors": tensors, "training": training, "plain": plain}


@contextlib.contextmanager
def patched(patches: dict) -> Iterator[None]:
    """``unittest.mock.patch(name, return_value=value)`` for each item, here or in the kernel."""
    from autograder.kernel.server import patched as in_kernel

    with in_kernel(patches):
        yield


def _request(session: Session, fn, args, kwargs, modules: list, patches: dict) -> dict:
    new = {}
    for _, module in modules:
        if session.mid_of(module) is None:
            if isinstance(module, StandIn):
                raise ReplayError("a rebuilt module reached the kernel without its id")
            mid = f"t{len(session.modules) + 1}"
            new[mid] = _dumps(session, module, top=module)
            session.modules[mid] = module
    states = {mid: _state(m) for mid, m in session.modules.items() if mid not in new}
    body = {"target": _target(session, fn), "args": list(args), "kwargs": dict(kwargs)}
    body["grad"] = torch.is_grad_enabled()
    body["patches"] = dict(patches)
    payload = {"new": new, "states": states, "watch": list(session.modules)}
    payload["body"] = _dumps(session, body)
    return {"op": "call", "payload": pickle.dumps(payload)}


def _remote(session: Session, fn, args, kwargs, patches: dict) -> tuple:
    with quiet():
        given, modules = call_inputs(fn, args, kwargs)
        request = _request(session, fn, args, kwargs, modules, patches)
        watched = list(session.modules)
        inputs = dict(given + watched_inputs(session.modules))
    record = session.ask(request).get("record")
    if not isinstance(record, dict):
        raise ReplayError("the kernel's reply is malformed")
    rerun = session.rerun
    has_inputs = bool(given)
    rerun.bind_inputs(record.get("inputs"), inputs)
    rerun.run(record.get("ops"), has_inputs)
    note_claimed_calls(record.get("functions") or [])
    with quiet():
        outcome = _outcome(session, record.get("outcome"), has_inputs)
        after = record.get("after")
        if not isinstance(after, dict) or set(after) != set(watched):
            raise ReplayError("the kernel's record lacks the state your code left on a module")
        for mid in watched:
            _apply_state(session.modules[mid], after[mid], rerun, has_inputs)
    torch.set_grad_enabled(record.get("grad_enabled") is not False)
    return outcome


def _outcome(session: Session, outcome: Any, has_inputs: bool) -> tuple:
    if not isinstance(outcome, list) or not outcome:
        raise ReplayError("the kernel's record is malformed")
    if outcome[0] == "ok" and len(outcome) == 2:
        leaves: list = []
        value = _result(session, outcome[1], has_inputs, leaves)
        independent = not any(derived for _, derived in leaves) and not session.rerun.read_inputs
        if has_inputs and leaves and independent:
            if any(t.is_floating_point() and t.numel() > 1 for t, _ in leaves):
                raise ReplayError("your result does not depend on the inputs it was given")
        return ("ok", value)
    if outcome[0] == "check_failure" and len(outcome) == 2 and isinstance(outcome[1], str):
        return ("check_failure", outcome[1][:600])
    if outcome[0] == "error" and len(outcome) == 4 and isinstance(outcome[3], dict):
        flags = {k: bool(outcome[3].get(k)) for k in ("stub", "shape_error")}
        flags["stub_where"] = str(outcome[3].get("stub_where", ""))[:80]
        depth = outcome[3].get("stub_depth", 0)
        flags["stub_depth"] = depth if type(depth) is int else 0
        flags["exception"] = rebuilt_exception(str(outcome[1])[:80], str(outcome[2])[:300])
        return ("error", str(outcome[1])[:80], str(outcome[2])[:300], flags)
    raise ReplayError("the kernel's record is malformed")


def _result(session: Session, obj: Any, has_inputs: bool, leaves: list) -> Any:
    """The recorded result, rebuilt; ``leaves`` gets (tensor, depends on an input) for each."""
    if not isinstance(obj, dict) or len(obj) not in (1, 2):
        raise ReplayError("the kernel's recorded result is malformed")
    rerun = session.rerun
    if "tensor" in obj:
        t = rerun.tensor(obj["tensor"], has_inputs, "your result")
        leaves.append((t, rerun.from_inputs(obj["tensor"])))
        return t
    if "module" in obj and isinstance(obj.get("mid"), str):
        module = _build_module(obj["module"], rerun, has_inputs)
        if obj["mid"] in session.modules or not obj["mid"].startswith("k"):
            raise ReplayError("the kernel's recorded result is malformed")
        session.modules[obj["mid"]] = module
        return module
    if "tuple" in obj or "list" in obj:
        key = "tuple" if "tuple" in obj else "list"
        if not isinstance(obj[key], list):
            raise ReplayError("the kernel's recorded result is malformed")
        items = [_result(session, x, has_inputs, leaves) for x in obj[key]]
        return tuple(items) if key == "tuple" else items
    if "plain" in obj:
        return decode_value(obj["plain"])
    raise ReplayError("the kernel's recorded result is malformed")


def _build_module(tree: Any, rerun: Rerun, has_inputs: bool) -> torch.nn.Module:
    """A module with the recorded submodules, attributes and tensors."""
    if not isinstance(tree, dict):
        raise ReplayError("a recorded module is malformed")
    built: dict[str, torch.nn.Module] = {}
    for prefix, node in tree.items():  # recorded parents first, in the learner's order
        if not isinstance(node, dict) or not isinstance(node.get("class"), list):
            raise ReplayError("a recorded module is malformed")
        module = _blank(node["class"])
        if prefix:
            parent, _, name = prefix.rpartition(".")
            if parent not in built:
                raise ReplayError("a recorded module is malformed")
            built[parent].add_module(name, module)
        built[prefix] = module
        _apply_node(module, node, rerun, has_inputs)
    if "" not in built:
        raise ReplayError("a recorded module is malformed")
    return built[""]


def _blank(cls_path: list) -> torch.nn.Module:
    """An empty ``torch.nn`` class instance, else a :class:`StandIn` named like the learner's."""
    module_name, qualname = (str(x) for x in (cls_path + ["", ""])[:2])
    cls = getattr(torch.nn, qualname, None) if module_name.startswith("torch.nn.modules.") else None
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        cls = type(qualname[:80] or "Module", (StandIn,), {"__module__": "learner"})
    module = cls.__new__(cls)
    torch.nn.Module.__init__(module)
    return module


def _apply_node(module: torch.nn.Module, node: Any, rerun: Rerun, has_inputs: bool) -> None:
    if not isinstance(node, dict):
        raise ReplayError("a recorded module is malformed")
    for name, value in (node.get("plain") or {}).items():
        if not isinstance(name, str) or name.startswith("_"):
            raise ReplayError("a recorded module is malformed")
        if name == "training":
            object.__setattr__(module, name, bool(decode_value(value)))
        else:
            setattr(module, name, decode_value(value))
    current = dict(own_tensors(module))
    for name, image in (node.get("tensors") or {}).items():
        if not isinstance(image, dict) or not isinstance(name, str) or name.startswith("_"):
            raise ReplayError("a recorded module is malformed")
        _apply_tensor(module, name, image, current.get(name), rerun, has_inputs)


def _apply_tensor(module, name: str, image: dict, current, rerun: Rerun, has_inputs: bool) -> None:
    kind = image.get("kind")
    if image.get("none") is True:
        module._parameters.pop(name, None) if kind != "param" else module._buffers.pop(name, None)
        (module._parameters if kind == "param" else module._buffers)[name] = None
        return
    t = rerun.tensor(image, has_inputs, what="a tensor on your module")
    grad = None
    if "grad" in image:
        grad = rerun.tensor(image["grad"], has_inputs=True, what="a gradient on your module")
    if current is not t:
        t = t.detach()
        if kind == "param":
            t = torch.nn.Parameter(t, requires_grad=bool(image.get("requires_grad")))
        for store in (module._parameters, module._buffers, module.__dict__):
            store.pop(name, None)
        {"param": module._parameters, "buffer": module._buffers}.get(kind, module.__dict__)[
            name
        ] = t
    elif t.is_leaf:
        t.requires_grad_(bool(image.get("requires_grad")))
    if isinstance(t, torch.nn.Parameter) and grad is not None:
        t.grad = grad.detach().to(t.dtype).reshape(t.shape)


def _apply_state(module: torch.nn.Module, tree: Any, rerun: Rerun, has_inputs: bool) -> None:
    """Give a trusted module the state the learner's call left on it."""
    if not isinstance(tree, dict):
        raise ReplayError("the kernel's record lacks the state your code left on a module")
    subs = dict(module.named_modules(remove_duplicate=False))
    if set(tree) != set(subs):
        raise ReplayError("your code changed a module's submodules")
    for prefix, node in tree.items():
        _apply_node(subs[prefix], node, rerun, has_inputs)


__all__ = ["KernelGone", "Learner", "Session", "StandIn", "active", "intercept", "ref_number"]
