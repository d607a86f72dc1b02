"""The trusted end of a learner call: send it to the kernel, rebuild what comes back.

The checks' ``_core.call`` hands every call of learner code to its hook, which :func:`active`
sets to :func:`intercept`. Outside a verification the call simply runs. During one
(:func:`active`), the callee is a stand-in (:class:`Learner` for a global, :class:`StandIn` for a
module the learner's code made): the call, its arguments and the state of every module the
statement has seen travel to the kernel as a pickle; the kernel's JSON record comes back,
:class:`.rerun.Rerun` recomputes it and :mod:`.rebuild` turns it into the call's result and the
state it left on modules.

Gradients: a backward pass the check starts (``loss.backward``) runs here, on the recomputed
graph, so the gradients it leaves are the grader's own.

A session keeps each call's record with the call's *outline* (its arguments with every tensor
reduced to shape and dtype). A session made with ``replaying`` (the check's second run on
other inputs, :mod:`.fresh`) sends nothing: each call takes the next recorded one, whose
outline must be the same, and recomputes it on the tensors at hand.
"""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from autograder.checks import calls_through, operators, run_here
from autograder.kernel.codec import (
    ReplayError,
    call_inputs,
    module_tensors,
    read_reply,
    watched_inputs,
)
from autograder.torch_helpers import note_claimed_calls

from . import rebuild, writes
from .pickles import Learner, Outliner, dumps
from .rebuild import StandIn
from .rerun import CannotReplay, Rerun, quiet, ref_number

MAX_REPLY_BYTES = 64 * 1024**2


class KernelGone(ReplayError):
    """The kernel did not answer (it died, or ran out of time)."""


@dataclass
class Session:
    """One statement's verification: its kernel, its rerun and the modules it has seen."""

    kernel: Callable[[bytes], str] | None
    allowed: frozenset[str] = operators.DEFAULT
    rerun: Rerun = field(default_factory=Rerun)
    modules: dict = field(default_factory=dict)  # mid -> trusted module, in the order seen
    sent: dict = field(default_factory=dict)  # mid -> {path: (tensor, version)} the kernel has
    depth: int = 0
    calls: list = field(default_factory=list)  # (outline, record) of each call, in order
    replaying: list | None = None  # another session's calls, answered in order without a kernel
    numbers_only: bool = True  # every call so far: a learner global given only Python numbers

    def __post_init__(self):
        self.rerun.allowed = self.allowed

    def mid_of(self, module: torch.nn.Module) -> str | None:
        return next((mid for mid, m in self.modules.items() if m is module), None)

    def replayed(self, outline: bytes) -> Any:
        """The record of the next recorded call, which must have been called the same way."""
        if not self.replaying:
            raise CannotReplay("the check calls your code more often on other inputs")
        recorded, record = self.replaying.pop(0)
        if recorded != outline:
            raise CannotReplay("the check calls your code differently on other inputs")
        return record

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
    return read_reply(text)


_SESSION: Session | None = None


@contextlib.contextmanager
def active(session: Session) -> Iterator[Session]:
    """Calls of learner code go to ``session``'s kernel (through the checks' hook) inside."""
    global _SESSION
    outer, _SESSION = _SESSION, session
    try:
        with calls_through(intercept):
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
        return run_here(fn, args, kwargs, invoke, patches or {})
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


def _numbers(value: Any) -> bool:
    """Whether ``value`` holds only Python numbers (and what names no data: ``None``, a device,
    a dtype, a string), in tuples, lists and dicts."""
    if isinstance(value, tuple | list):
        return all(_numbers(v) for v in value)
    if isinstance(value, dict):
        return all(_numbers(v) for v in value.values())
    return value is None or isinstance(value, bool | int | float | str | torch.device | torch.dtype)


def _outline(session: Session, fn, args, kwargs, patches: dict) -> bytes:
    """What a replay of this call must share with its recording: everything but tensor values."""
    modes = {mid: _modes(m) for mid, m in session.modules.items()}
    shapes = [(p, tuple(t.shape), t.dtype) for p, t in watched_inputs(session.modules)]
    body = [_target(session, fn), list(args), dict(kwargs), torch.is_grad_enabled(), patches]
    return dumps(session, [body, modes, shapes], pickler=Outliner)


def _mark(t: torch.Tensor) -> tuple:
    """Changes when ``t``'s values may have: an in-place write, or new memory (``.data =``)."""
    return (t._version, t.dtype, t.untyped_storage().data_ptr(), t.storage_offset(), t.stride())


def _state(module: torch.nn.Module, sent: dict) -> dict:
    """What the kernel's copy of a module must match before a call: its modes and plain
    attributes, and the tensors that changed here since ``sent`` (updated)."""
    training, plain = _modes(module)
    tensors = {}
    for path, t in module_tensors(module):
        last, mark = sent.get(path), _mark(t)
        if last is None or last[0] is not t or last[1] != mark:
            tensors[path] = t.detach().clone()
            sent[path] = (t, mark)  # held: its id cannot pass to another tensor
    return {"tensors": tensors, "training": training, "plain": plain}


def _modes(module: torch.nn.Module) -> tuple[dict, dict]:
    """Each submodule's mode and plain attributes, by prefix."""
    plain, training = {}, {}
    for prefix, m in module.named_modules(remove_duplicate=False):
        training[prefix] = m.training
        plain[prefix] = {
            k: v
            for k, v in vars(m).items()
            if not k.startswith("_") and k != "training" and isinstance(v, bool | int | float | str)
        }
    return training, plain


def _register(session: Session, modules: list, send: bool) -> dict:
    """Give each module the call brings a session id; with ``send``, its pickle by id."""
    new = {}
    for _, module in modules:
        if session.mid_of(module) is None:
            if isinstance(module, StandIn):
                raise ReplayError("a rebuilt module reached the kernel without its id")
            mid = f"t{len(session.modules) + 1}"
            new[mid] = dumps(session, module, top=module) if send else b""
            session.modules[mid] = module
    return new


def _request(session: Session, fn, args, kwargs, modules: list, patches: dict) -> dict:
    new = _register(session, modules, send=True)
    states = {
        mid: _state(m, session.sent.setdefault(mid, {}))
        for mid, m in session.modules.items()
        if mid not in new
    }
    body = {"target": _target(session, fn), "args": list(args), "kwargs": dict(kwargs)}
    body["grad"] = torch.is_grad_enabled()
    body["patches"] = dict(patches)
    payload = {"new": new, "states": states, "watch": list(session.modules)}
    payload["body"] = dumps(session, body)
    return {"op": "call", "payload": pickle.dumps(payload)}


def _remote(session: Session, fn, args, kwargs, patches: dict) -> tuple:
    with quiet():
        given, modules = call_inputs(fn, args, kwargs)
        session.numbers_only &= isinstance(fn, Learner) and _numbers((args, kwargs))
        outline = _outline(session, fn, args, kwargs, patches)
        if session.replaying is None:
            request = _request(session, fn, args, kwargs, modules, patches)
        else:
            _register(session, modules, send=False)
        watched = list(session.modules)
        inputs = dict(given + watched_inputs(session.modules))
        copied = writes.copies(given, modules)  # the check's own tensors are never written
        inputs.update(copied)
    drawn = torch.get_rng_state()  # the recompute's random operators draw from here, as the call
    if session.replaying is None:
        record = session.ask(request).get("record")
        session.calls.append((outline, record))
    else:
        record = session.replayed(outline)
    if not isinstance(record, dict):
        raise ReplayError("the kernel's reply is malformed")
    rerun = session.rerun
    has_inputs = bool(given)
    rerun.bind_inputs(record.get("inputs"), inputs)
    operators.judge_claims(session.allowed, record.get("functions") or [])
    rerun.protected = writes.storages(copied)
    torch.set_rng_state(drawn)  # an in-process kernel shares this generator and drew from it
    rerun.run(record.get("ops"), has_inputs, sees_tensors=bool(inputs))
    note_claimed_calls(record.get("functions") or [])
    with quiet():
        result = rebuild.outcome(session.modules, rerun, record.get("outcome"), has_inputs)
        after = record.get("after")
        if not isinstance(after, dict) or set(after) != set(watched):
            raise ReplayError("the kernel's record lacks the state your code left on a module")
        for mid in watched:
            rebuild.apply_state(session.modules[mid], after[mid], rerun, has_inputs)
    torch.set_grad_enabled(record.get("grad_enabled") is not False)
    return result


__all__ = [
    "KernelGone",
    "Learner",
    "Session",
    "StandIn",
    "active",
    "intercept",
    "ref_number",
]
