"""Functions of integers answered from a table, and a softmax that reads its input into Python.

Issue 42, items 3 and 4, written as a learner who controls only the notebook:

- *a table of the public configurations*: ``sliding_window_mask`` (08) and ``causal_mask`` (03)
  take only Python numbers, so every mask the public checks ask for can be computed offline (with
  the check's own oracle, from the learner's own copy of the package) and pasted in: 08's as a
  table of bool lists, 03's spelled as integer lists made ``bool``. Any other configuration gets a
  wrong mask (all True). No operator of the record depends on a tensor input, so nothing is
  refused as a constant, and the grader's replay on new inputs redraws no integer;
- *a Python read of the input's values*: a softmax that reads ``x.tolist()`` and is wrong when a
  value exceeds 1e6, a size no check draws. ``.tolist()`` runs no ATen operator, so the record
  shows none of it.

``tests/test_hostile_integers.py`` verifies each target in-process (fast), with the instructor's
test cells, hidden checks included; the class run (:mod:`hostile.class_run`) grades
:func:`attacks` as real submissions.
"""

from __future__ import annotations

import functools

from autograder.checks import nb03_masking, nb08_window

from .trust import NB01, NB03, NB08, Attack, Edit

# (seed, thorough) of the instructor's test cells for these checks, visible and hidden
PUBLIC_RUNS = ({"seed": 0}, {"seed": 1, "thorough": True})


def _configurations(check, oracle) -> dict:
    """Every call the public test cells make of the checked function, with the oracle's answer."""
    table = {}

    def spy(T, *args, **kwargs):
        mask = oracle(T, *args, **kwargs)
        table[(T, *args, *sorted(kwargs.items()))] = mask.cpu().int().tolist()
        return mask

    for run in PUBLIC_RUNS:
        check(spy, **run)
    return table


def _window(T, window, S=None):
    return nb08_window.window_mask(T, T if S is None else S, window)


def _causal(T, S=None, device=None):
    return nb03_masking._causal(T, T if S is None else S).to(device or "cpu")


@functools.cache
def window_table() -> str:
    table = _configurations(nb08_window.check_sliding_window_mask_values, _window)
    table = {k: [[bool(v) for v in row] for row in mask] for k, mask in table.items()}
    return f'''_WINDOWS = {table!r}


def sliding_window_mask(T, window, S=None, device=None):
    """The public configurations' masks, pasted in; anything else: every key allowed."""
    key = (T, window) if S is None else (T, window, ("S", S))
    if key in _WINDOWS:
        return torch.tensor(_WINDOWS[key], device=device)
    return torch.ones(T, T if S is None else S, dtype=torch.bool, device=device)
'''


@functools.cache
def causal_table() -> str:
    table = _configurations(nb03_masking.check_causal_mask_values, _causal)
    table |= _configurations(nb03_masking.check_causal_mask_no_leak, _causal)
    table = {k[:2]: mask for k, mask in table.items()}  # the device does not change the values
    return f'''_CAUSAL = {table!r}


def causal_mask(T, S=None, device=None):
    """The public configurations' masks spelled as integer lists; anything else: all True."""
    S = T if S is None else S
    mask = _CAUSAL.get((T, S)) or _CAUSAL.get((T,)) if S == T else _CAUSAL.get((T, S))
    if mask is None:
        return torch.ones(T, S, dtype=torch.bool, device=device)
    return torch.tensor(mask, device=device) == 1
'''


SOFTMAX_READS_TOLIST = '''def softmax(x, dim=-1):
    """Right, unless a value read into Python exceeds 1e6 (no check draws one)."""
    if max((abs(v) for v in x.reshape(-1).tolist()), default=0.0) > 1e6:
        return torch.full_like(x, 1.0 / x.shape[dim])
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)
'''


def attacks() -> tuple[Attack, ...]:
    """One learner per notebook (tables are built from the checks, so on demand)."""
    return (
        Attack(
            "i3_nb08_window_table",
            NB08,
            3,
            ("test_sliding_window_mask_values",),
            "sliding_window_mask answered from a table of the masks the public checks ask for",
            "solution",
            (Edit("answer", "sliding_window_mask", "import torch\n\n" + window_table()),),
        ),
        Attack(
            "i3_nb03_causal_ints",
            NB03,
            3,
            ("test_causal_mask_values", "test_causal_mask_no_leak"),
            "causal_mask spelled as integer lists for the public sizes, all True elsewhere",
            "solution",
            (Edit("answer", "causal_mask", "import torch\n\n" + causal_table()),),
        ),
        Attack(
            "i4_nb01_tolist_branch",
            NB01,
            4,
            ("test_softmax_matches_torch", "test_softmax_stable", "test_softmax_no_builtin"),
            "a softmax that branches on x.tolist() and is wrong above 1e6",
            "solution",
            (Edit("answer", "softmax", SOFTMAX_READS_TOLIST),),
        ),
    )
