"""How a learner call travels to the kernel: pickled, with what the kernel knows by name.

:class:`Pickler` sends a :class:`Learner` stand-in and every module the session has seen by id
(the kernel holds its own copy), the checks' own classes as their PyTorch or Python base, and a
tensor in a graph as its values. :class:`Outliner` pickles the same call with each tensor as its
shape and dtype only: the *outline* a replay of the call must share with its recording.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

import torch

from autograder.kernel.codec import ReplayError, rebuild_as, rebuild_tensor


class Learner:
    """Stands for a learner's global function or class: only the kernel can run it."""

    def __init__(self, name: str):
        self.__name__ = name

    def __call__(self, *args, **kwargs):
        raise ReplayError(f"`{self.__name__}` was called outside a recorded call")


class Pickler(pickle.Pickler):
    def __init__(self, file, session: Any, top: Any = None):
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


class Outliner(Pickler):
    """Pickles a call with each tensor as its shape, dtype and kind only."""

    def reducer_override(self, obj):
        if isinstance(obj, torch.Tensor):
            kind = (type(obj).__name__, obj.requires_grad)
            return (_outline_of_tensor, (tuple(obj.shape), str(obj.dtype), kind))
        return super().reducer_override(obj)


def _outline_of_tensor(*outline):  # never unpickled: an outline is only compared
    raise ReplayError("an outline is not a value")


def dumps(session: Any, value: Any, top: Any = None, pickler=Pickler) -> bytes:
    buffer = io.BytesIO()
    pickler(buffer, session, top).dump(value)
    return buffer.getvalue()
