"""The second run of a check: other inputs of the same shapes, the learner's calls replayed.

A record shows what the learner's code did with the inputs the kernel was sent. To be believed
as the learner's *function*, the same operators must also be right on inputs the kernel never
saw. So after a check passes (:mod:`.cells`), it runs a second time in the grader with
:func:`fresh_inputs`: every floating-point random draw of the check (``torch.randn``,
``torch.rand``, ``normal_``, ``uniform_``, their ``_like`` forms and ``nn.init``'s functions,
whatever generator they name) is drawn again from a generator seeded with a secret, after the
original draw advanced the check's generator as before. Integer draws (sizes, indices, masks)
stay as they were, so every call has the same shapes and dtypes. Each call of learner code is
then answered from the first run's record, in order (:class:`.remote.Session` with
``replaying``), its operators recomputed on the new tensors, and the check's own comparison
judges the result: a constant or a decoy that matched one set of inputs fails on the other.

What changes is what the check draws: the tensors it passes, and the weights of the modules it
builds (its PyTorch references, and the learner modules it copies them into). A learner
module's own initial weights come from its recorded operators, rerun on the grader's generator
as in the first run, so they stay what they were unless the check overwrites them.

A record that cannot stand for the function (operators that branch on tensor values, shapes
that depend on them, values read into Python, calls the check makes differently) raises
:class:`.rerun.CannotReplay`: the cell is withheld for a person.

A check whose every call of learner code passes only Python numbers (a mask from sizes, ALiBi's
slopes, a count, RoPE's parameters) has no tensor to redraw, and a table of the configurations
its public runs ask for would replay as well as the function. Its second run draws the
configurations instead (:func:`secret_options`): the check runs again with its ``seed`` drawn
from a secret and ``thorough`` on, so its random configurations are ones no learner can know in
advance, and each of those calls is sent to the kernel and recomputed as in the first run.
"""

from __future__ import annotations

import contextlib
import inspect
import secrets
from collections.abc import Callable, Iterator

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

_FACTORIES = (torch.randn, torch.rand, torch.normal, torch.randn_like, torch.rand_like)
_INIT = ("normal_", "uniform_", "trunc_normal_", "xavier_uniform_", "xavier_normal_")
_INIT += ("kaiming_uniform_", "kaiming_normal_", "orthogonal_")
# nn.init's functions reach a mode as themselves (a module's weights, drawn at construction)
_IN_PLACE = (torch.Tensor.normal_, torch.Tensor.uniform_, *(getattr(nn.init, n) for n in _INIT))
_DRAWS = frozenset((*_FACTORIES, *_IN_PLACE))


class _Redraw(TorchFunctionMode):
    """Floating random draws, drawn again from a generator the kernel never had."""

    def __init__(self, seed: int):
        super().__init__()
        self.generator = torch.Generator().manual_seed(seed)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)  # the check's own generator advances as in the first run
        if func not in _DRAWS:
            return out
        if func in _FACTORIES and not (isinstance(out, torch.Tensor) and out.is_floating_point()):
            return out
        return func(*args, **{**kwargs, "generator": self.generator})


@contextlib.contextmanager
def fresh_inputs() -> Iterator[None]:
    """The check's floating random inputs redrawn from a secret seed (see the docstring)."""
    with _Redraw(secrets.randbits(62)):
        yield


def secret_options(check: Callable) -> dict:
    """The options of a check's second run on configurations drawn from a secret (see the
    docstring): ``seed`` secret and ``thorough`` on, those of the two the check takes."""
    takes = inspect.signature(check).parameters
    options = {"seed": secrets.randbits(62), "thorough": True}
    return {name: value for name, value in options.items() if name in takes}
