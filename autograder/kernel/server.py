"""The kernel's end of a verification: the grader sends one request at a time, this answers it.

The trusted grader runs a test cell's checks in its own process; each time a check calls learner
code, it sends a request to the kernel and reads the record this replies. Requests come from the
grader, so they are pickles; replies go to the grader, so they are JSON and nothing more.
Requests:

- ``begin``: a statement starts: PyTorch's stock defaults, seed 0, one thread, a fresh ref table;
- ``value``: a learner global by value, when it is a plain value (a quiz answer, a number);
- ``call``: run a learner function, class or module (a global, or a module made earlier, by id)
  on the grader's arguments, after giving every watched module the grader's state;
- ``end``: put the kernel's defaults back.

The grader sends requests over a Unix socket in the kernel's runtime folder (:func:`serve`: one
cell serves a whole test cell). Learner code may tamper with any of this while it runs: whatever
it makes this module say, the grader recomputes.
"""

from __future__ import annotations

import contextlib
import io
import json
import pickle
from collections.abc import Iterator
from typing import Any

import torch

from .codec import call_inputs, encode_value, module_tensors, watched_inputs
from .recorder import Refs, record_call


class _Statement:
    def __init__(self):
        self.refs = Refs()
        self.objects: dict[str, Any] = {}
        self.count = 0

    def new_module(self, module: torch.nn.Module) -> str:
        for mid, known in self.objects.items():
            if known is module:
                return mid
        self.count += 1
        mid = f"k{self.count}"
        self.objects[mid] = module
        return mid


_STATE: dict[str, Any] = {"statement": _Statement(), "saved": None}


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, statement: _Statement, namespace: dict):
        super().__init__(io.BytesIO(data))
        self.statement, self.namespace = statement, namespace

    def persistent_load(self, pid):
        kind, name = pid
        if kind == "module":
            return self.statement.objects[name]
        if kind == "global":
            if name not in self.namespace:
                raise NameError(f"name '{name}' is not defined")
            return self.namespace[name]
        raise pickle.UnpicklingError(f"unknown persistent id {kind!r}")


def _set_state(module: torch.nn.Module, state: dict) -> None:
    """Give a kernel module the grader's modes, plain attributes and the tensors that changed
    there since the last call (the others are as that call left them, which the grader copied);
    every gradient is cleared."""
    subs = dict(module.named_modules(remove_duplicate=False))
    for prefix, training in state.get("training", {}).items():
        if prefix in subs:
            object.__setattr__(subs[prefix], "training", bool(training))
    for prefix, plain in state.get("plain", {}).items():
        for key, value in plain.items():
            if prefix in subs and key != "training":
                setattr(subs[prefix], key, value)
    current = dict(module_tensors(module))
    for path, value in state.get("tensors", {}).items():
        if path in current and isinstance(value, torch.Tensor):
            with torch.no_grad():
                current[path].data = value
    for tensor in current.values():
        tensor.grad = None


def _target(statement: _Statement, target: tuple, namespace: dict):
    kind = target[0]
    if kind == "global":
        if target[1] not in namespace:
            raise NameError(f"name '{target[1]}' is not defined")
        return namespace[target[1]]
    module = statement.objects[target[1]]
    return module if kind == "module" else getattr(module, target[2])


def handle(request: dict, namespace: dict) -> dict:
    """The reply to one (already unpickled) request."""
    op = request["op"]
    if op == "begin":
        _STATE["statement"] = _Statement()
        if _STATE["saved"] is None:
            _STATE["saved"] = (torch.get_default_dtype(), torch.get_num_threads())
        torch.set_default_dtype(torch.float32)
        torch.set_num_threads(1)
        torch.manual_seed(0)
        torch.set_grad_enabled(True)
        return {"ok": True}
    if op == "end":
        if _STATE["saved"] is not None:
            dtype, threads = _STATE["saved"]
            torch.set_default_dtype(dtype)
            torch.set_num_threads(threads)
            _STATE["saved"] = None
        _STATE["statement"] = _Statement()
        return {"ok": True}
    if op == "value":
        name = request["name"]
        if name not in namespace:
            return {"missing": True}
        value = namespace[name]
        if callable(value) or isinstance(value, torch.nn.Module | torch.Tensor):
            return {"callable": True}
        return {"value": encode_value(value)}
    raise ValueError(f"unknown request {op!r}")


def call(payload: bytes, namespace: dict) -> dict:
    """Run the learner call a ``call`` request describes; its record."""
    statement = _STATE["statement"]
    head = pickle.loads(payload)  # noqa: S301 (the grader wrote it)
    for mid, data in head["new"].items():
        statement.objects[mid] = _Unpickler(data, statement, namespace).load()
    for mid, state in head["states"].items():
        _set_state(statement.objects[mid], state)
    body = _Unpickler(head["body"], statement, namespace).load()
    fn = _target(statement, body["target"], namespace)
    args, kwargs = tuple(body["args"]), dict(body["kwargs"])
    torch.set_grad_enabled(bool(body["grad"]))
    watched = {mid: statement.objects[mid] for mid in head["watch"]}
    inputs = call_inputs(fn, args, kwargs)[0] + watched_inputs(watched)
    with patched(body.get("patches", {})):
        return record_call(statement.refs, fn, args, kwargs, inputs, watched, statement.new_module)


@contextlib.contextmanager
def patched(patches: dict) -> Iterator[None]:
    """The machine a check pretends to have (``torch.cuda.is_available`` -> True, say)."""
    from unittest import mock

    with contextlib.ExitStack() as stack:
        for name, value in patches.items():
            stack.enter_context(mock.patch(name, return_value=value))
        yield


def reply(request: bytes, namespace: dict) -> str:
    """The JSON reply to a request; a request this cannot serve says why."""
    try:
        decoded = pickle.loads(request)  # noqa: S301 (the grader wrote it)
        if decoded.get("op") == "call":
            return json.dumps({"record": call(decoded["payload"], namespace)})
        return json.dumps(handle(decoded, namespace))
    except Exception as err:  # a missing name, a module this kernel cannot rebuild
        return json.dumps({"server_error": f"{type(err).__name__}: {err}"[:300]})


def serve(path: str) -> None:
    """In IPython: answer the grader's requests over the Unix socket at ``path`` until it closes.

    Each message is 8 bytes of length, then the bytes. One cell serves a whole test cell's
    verification, so a request costs a socket round trip, not a cell execution.
    """
    import socket

    from IPython import get_ipython

    namespace = get_ipython().user_ns
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(path)
        while True:
            request = receive(conn)
            if not request:
                return
            send(conn, reply(request, namespace).encode())


def send(conn, data: bytes) -> None:
    conn.sendall(len(data).to_bytes(8, "big") + data)


def receive(conn, limit: int = 1 << 30, deadline: float | None = None) -> bytes:
    """One message; empty when the other end closed or ``deadline`` (``time.monotonic()``)
    passed: a sender that trickles bytes cannot hold the reader longer than that."""
    head = _exactly(conn, 8, deadline)
    if len(head) < 8:
        return b""
    size = int.from_bytes(head, "big")
    if size > limit:
        raise ValueError("message too large")
    data = _exactly(conn, size, deadline)
    return data if len(data) == size else b""


def _exactly(conn, size: int, deadline: float | None) -> bytes:
    import time

    chunks, got = [], 0
    while got < size:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            conn.settimeout(left)
        try:
            chunk = conn.recv(min(size - got, 1 << 20))
        except TimeoutError:
            break
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)
