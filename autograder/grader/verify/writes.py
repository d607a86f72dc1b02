"""A check's tensors stay the check's: learner code runs on copies, and a write into one is refused.

A check computes its expected value from the tensors it passed, after the call. Were the rerun to
replay an in-place operator on those very tensors, a wrong function that zeroes ``q``, ``k`` and
``v`` (and fills the mask with True) would make the check expect the answer for zeros. So each
tensor a call receives directly (an argument, or inside a list or dict of arguments) is rebound
to a copy before the rerun (:func:`copies`), and any recorded operator that writes into a copy,
or into a view of one, refuses the call (:func:`refuse_writes`): changing a caller's tensor is a
mistake of its own, never a way to change the expected value.

A module's own tensors are not copied: a module updates its state (a KV cache, running
statistics) by design, and the grader believes those writes as the recomputed operators they are.
"""

from __future__ import annotations

from typing import Any

import torch

from autograder.kernel.codec import ReplayError, module_tensors


class InputWritten(ReplayError):
    """Learner code wrote into a tensor the check gave it: a finding, with its own sentence."""


def copies(given: list, modules: list) -> dict[str, torch.Tensor]:
    """A copy of every tensor a call receives directly, by path (``args.0``), module state left
    out; the rerun binds the copies in place of the check's tensors."""
    owned = {id(t) for _, m in modules for _, t in module_tensors(m)}
    found = {}
    for path, t in given:
        if id(t) in owned or path == "self":
            continue
        with torch.set_grad_enabled(t.requires_grad):
            found[path] = t.clone()  # a copy in the check's graph: gradients still reach `t`
    return found


def storages(copied: dict[str, torch.Tensor]) -> dict[int, str]:
    """Each copy's memory, by address, to the path it came from."""
    return {t.untyped_storage().data_ptr(): path for path, t in copied.items() if t.numel()}


def refuse_writes(op, args: list, kwargs: dict, protected: dict[int, str]) -> None:
    """Raise :class:`InputWritten` if ``op`` writes into memory of ``protected`` (an input)."""
    if not protected or not op._schema.is_mutable:
        return
    values = dict(zip((a.name for a in op._schema.arguments), args, strict=False)) | kwargs
    for argument in op._schema.arguments:
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        for t in _tensors(values.get(argument.name)):
            path = protected.get(t.untyped_storage().data_ptr()) if t.numel() else None
            if path is not None:
                raise InputWritten(_sentence(path, op))


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [v for v in value if isinstance(v, torch.Tensor)]
    return []


def _sentence(path: str, op) -> str:
    where = path.split(".")
    if where[0] == "args" and len(where) > 1 and where[1].isdigit():
        what = f"argument {int(where[1]) + 1}"
    elif where[0] == "kwargs" and len(where) > 1:
        what = f"`{where[1]}`"
    else:
        what = "an input"
    name = op._schema.name.removeprefix("aten::")
    return (
        f"your code changed its input in place ({what}, with {name}): compute into a new tensor "
        "instead; a function must leave the tensors it is given as they were."
    )
