"""Functions of integers answered from a table, and a softmax that reads its input into Python.

Issue 42, items 3 and 4, and item 7's float lists, written as a learner who controls only the
notebook:

- *a table of the public configurations*: ``sliding_window_mask`` (08) and ``causal_mask`` (03)
  take only Python numbers, so every mask the public checks ask for can be computed offline (with
  the check's own oracle, from the learner's own copy of the package) and pasted in: 08's as a
  table of bool lists, 03's spelled as integer lists made ``bool``. Any other configuration gets a
  wrong mask (all True). No operator of the record depends on a tensor input, so nothing is
  refused as a constant, and the grader's replay on new inputs redraws no integer;
- *a table spelled as short float lists*: ``apply_rope`` (04) given its angles, for the positions
  the public checks draw, from a table computed offline with the check's own oracle; each
  table is flattened and pasted as float lists no longer than the largest size of ``x`` (a
  rotary layer's ``inv_freq`` is such a list), stacked back into ``(T, hs/2)``. Positions are
  integer inputs, which the grader's replay on new inputs keeps; any other position is not
  rotated at all;
- *a Python read of the input's values*: a softmax that reads ``x.tolist()`` and is wrong when a
  value exceeds 1e6, a size no check draws. ``.tolist()`` runs no ATen operator, so the record
  shows none of it.

Beside them, honest learners (:data:`HONEST`, issue 42 item 7): correct code that the grader
once refused, written as real code writes it: index and position tensors made from Python ints
that depend on the sizes only (``repeat_kv``'s index, RoPE's exponents, a ring buffer's slots,
StreamingLLM's keep-list), RoPE's frequencies from a Python list of floats, and tiled attention
padding K and V with ``F.pad``. Each keeps every
automatic cell, full marks and ``verified``.

``tests/test_hostile_integers.py`` verifies each attack's targets in-process (fast), with the
instructor's test cells, hidden checks included; the class run (:mod:`hostile.class_run`) grades
:func:`submissions` (attacks and honest learners) as real submissions.
"""

from __future__ import annotations

import functools
import inspect
import re

from mistakes import gpu, gqa, long_context, rope, sinks

from autograder.checks import _masks, _rope, nb03_masking, nb04_rope, nb08_window

from .trust import NB01, NB03, NB04, NB06, NB08, Attack, Edit

# (seed, thorough) of the instructor's test cells for these checks, visible and hidden
PUBLIC_RUNS = ({"seed": 0}, {"seed": 1, "thorough": True})


def _configurations(check, oracle) -> dict:
    """Every call the public test cells make of the checked function, with the oracle's answer."""
    table = {}

    def spy(T, *args, **kwargs):
        mask = oracle(T, *args, **kwargs)
        if not mask.is_meta:  # the device probe asks for a mask on the meta device: no values
            table[(T, *args, *sorted(kwargs.items()))] = mask.cpu().int().tolist()
        return mask

    for run in PUBLIC_RUNS:
        check(spy, **run)
    return table


def _window(T, window, S=None, device=None):
    return _masks.window_mask(T, T if S is None else S, window).to(device or "cpu")


def _causal(T, S=None, device=None):
    return _masks.causal(T, T if S is None else S).to(device or "cpu")


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


@functools.cache
def rope_angle_table() -> str:
    table = {}

    def spy(x, positions, base=_rope.BASE):
        hs, size = x.shape[-1], max(x.shape)
        angles = [p * base ** (-2 * i / hs) for p in positions.tolist() for i in range(hs // 2)]
        chunks = [angles[at : at + size] for at in range(0, len(angles), size)]
        table[(hs, tuple(positions.tolist()), float(base))] = chunks
        return _rope.rotate(x, positions, base)

    for run in PUBLIC_RUNS:
        nb04_rope.check_apply_rope_values(spy, **run)
        nb04_rope.check_apply_rope_relative(spy, **run)
    return f'''_ANGLES = {table!r}


def apply_rope(x, positions, base=10000.0):
    """Angles of the public positions pasted as float lists of at most a size; else unturned."""
    hs = x.shape[-1]
    chunks = _ANGLES.get((hs, tuple(positions.tolist()), float(base)))
    if chunks is None:
        return x.clone()
    angle = torch.cat([torch.tensor(c) for c in chunks]).reshape(-1, hs // 2)  # (T, hs/2)
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., : hs // 2].float(), x[..., hs // 2 :].float()  # (..., T, hs/2) each
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)
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
            (Edit("after", "sliding_window_mask", "import torch\n\n" + window_table()),),
        ),
        Attack(
            "i3_nb03_causal_ints",
            NB03,
            3,
            ("test_causal_mask_values", "test_causal_mask_no_leak"),
            "causal_mask spelled as integer lists for the public sizes, all True elsewhere",
            "solution",
            (Edit("after", "causal_mask", "import torch\n\n" + causal_table()),),
        ),
        Attack(
            "i7_nb04_rope_angle_lists",
            NB04,
            7,
            ("test_apply_rope_values", "test_apply_rope_relative"),
            "apply_rope's angles for the public positions pasted as float lists of at most a size",
            "solution",
            (Edit("after", "apply_rope", "import torch\n\n" + rope_angle_table()),),
        ),
        Attack(
            "i4_nb01_tolist_branch",
            NB01,
            4,
            ("test_softmax_matches_torch", "test_softmax_stable", "test_softmax_no_builtin"),
            "a softmax that branches on x.tolist() and is wrong above 1e6",
            "solution",
            (Edit("after", "softmax", SOFTMAX_READS_TOLIST),),
        ),
    )


def _as_cell(fn, name: str, imports: str = "", **renamed: str) -> str:
    """A catalogue's correct implementation (``tests/mistakes``, where it is also verified on
    its own) as a learner's cell: ``fn`` renamed ``name``, the helpers it calls renamed as the
    notebook names them."""
    source = inspect.getsource(fn).replace(f"def {fn.__name__}(", f"def {name}(", 1)
    for old, new in renamed.items():
        source = re.sub(rf"\b{old}\(", f"{new}(", source)
    return imports + source


REPEAT_KV_INDEX_LIST = _as_cell(gqa.repeat_index_list, "repeat_kv")
ROPE_EXPONENTS_LIST = _as_cell(rope.rope_exponents_list, "apply_rope")
ROPE_FLOAT_LIST = _as_cell(rope.rope_float_list, "apply_rope")
TILED_PADDED = _as_cell(
    gpu.tiled_padded, "tiled_attention", "import math\n\nimport torch.nn.functional as F\n\n\n"
)
RING_SLOTS_LIST = _as_cell(long_context.update_slot_list, "rolling_cache_update")
SINK_KEEP_LIST = _as_cell(sinks.sink_keep_list, "sink_attention", rope="apply_rope")


def _honest(learner: str, notebook: str, what: str, answers: dict[str, str]) -> Attack:
    edits = tuple(Edit("after", grade_id, source) for grade_id, source in answers.items())
    return Attack(learner, notebook, 0, (), what, "solution", edits)


HONEST = (
    _honest(
        "honest_nb04_int_lists",
        NB04,
        "repeat_kv's index from a Python list of ints, RoPE's frequencies from one of floats",
        {"repeat_kv": REPEAT_KV_INDEX_LIST, "apply_rope": ROPE_FLOAT_LIST},
    ),
    _honest(
        "honest_nb06_f_pad",
        NB06,
        "tiled attention with K and V padded to whole blocks by F.pad",
        {"tiled_attention": TILED_PADDED},
    ),
    _honest(
        "honest_nb08_int_lists",
        NB08,
        "the ring buffer's slots and StreamingLLM's keep-list as Python lists made tensors",
        # apply_rope lives in a cell the trimmed submission leaves out: the one of 04 above
        {
            "rolling_cache_update": RING_SLOTS_LIST + ROPE_EXPONENTS_LIST,
            "sink_attention": SINK_KEEP_LIST,
        },
    ),
)


def submissions() -> tuple[Attack, ...]:
    """What the class run grades from this module: the attacks and the honest learners."""
    return (*attacks(), *HONEST)
