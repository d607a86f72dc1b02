"""Rebuild what the kernel's record of a learner call says, on the grader's own tensors.

:func:`outcome` turns the record's outcome into the call's result: tensors are the ones
:class:`.rerun.Rerun` recomputed, a module the learner's code returns becomes a
:class:`StandIn` with the same submodules, attributes and (recomputed) tensors.
:func:`apply_state` gives a module the grader holds the state the call left on it.
"""

from __future__ import annotations

from typing import Any

import torch

from autograder.kernel.codec import ReplayError, decode_value, own_tensors, rebuilt_exception

from .rerun import Rerun


class StandIn(torch.nn.Module):
    """A module the learner's code made, as the grader rebuilt it; calls go to the kernel."""

    def forward(self, *args, **kwargs):
        raise ReplayError("a rebuilt module can only be called through the check")


def outcome(modules: dict, rerun: Rerun, outcome: Any, has_inputs: bool) -> tuple:
    """The recorded outcome of a call: ("ok", value), ("check_failure", message) or
    ("error", name, message, flags); a module the call made joins ``modules``."""
    if not isinstance(outcome, list) or not outcome:
        raise ReplayError("the kernel's record is malformed")
    if outcome[0] == "ok" and len(outcome) == 2:
        leaves: list = []
        value = _result(modules, rerun, outcome[1], has_inputs, leaves)
        independent = not any(derived for _, derived in leaves) and not rerun.read_inputs
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


def _result(modules: dict, rerun: Rerun, obj: Any, has_inputs: bool, leaves: list) -> Any:
    """The recorded result, rebuilt; ``leaves`` gets (tensor, depends on an input) for each."""
    if not isinstance(obj, dict) or len(obj) not in (1, 2):
        raise ReplayError("the kernel's recorded result is malformed")
    if "tensor" in obj:
        t = rerun.tensor(obj["tensor"], has_inputs, "your result")
        leaves.append((t, rerun.from_inputs(obj["tensor"])))
        return t
    if "module" in obj and isinstance(obj.get("mid"), str):
        module = _build_module(obj["module"], rerun, has_inputs)
        if obj["mid"] in modules or not obj["mid"].startswith("k"):
            raise ReplayError("the kernel's recorded result is malformed")
        modules[obj["mid"]] = module
        return module
    if "tuple" in obj or "list" in obj:
        key = "tuple" if "tuple" in obj else "list"
        if not isinstance(obj[key], list):
            raise ReplayError("the kernel's recorded result is malformed")
        items = [_result(modules, rerun, x, has_inputs, leaves) for x in obj[key]]
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


def apply_state(module: torch.nn.Module, tree: Any, rerun: Rerun, has_inputs: bool) -> None:
    """Give a trusted module the state the learner's call left on it."""
    if not isinstance(tree, dict):
        raise ReplayError("the kernel's record lacks the state your code left on a module")
    subs = dict(module.named_modules(remove_duplicate=False))
    if set(tree) != set(subs):
        raise ReplayError("your code changed a module's submodules")
    for prefix, node in tree.items():
        _apply_node(subs[prefix], node, rerun, has_inputs)
