"""Answers computed where the recorder cannot see them, handed back as constants.

The kernel's recorder is a dispatch mode, and modes belong to one thread. These submissions run
the real computation on another thread (``threading.Thread``, a ``ThreadPoolExecutor``, a
``threading.Timer``) or in a forked child process, read its values into Python there, and return
them rebuilt one element at a time from one-element constants (``torch.tensor(v)``, stacked),
plus ``0 * x.sum()`` of every input so that the result looks computed from its inputs. Where a
notebook's rule judges *how* a result is computed (notebook 05's loop and batch rules, notebook
06's memory and no-SDPA rules), the honest code also runs on zeros in the recorded thread as a
decoy whose result is added times zero.

``tests/test_hostile_threads.py`` verifies each target cell in-process (fast), and the class
run (:mod:`hostile.class_run`) grades :data:`ATTACKS` as real submissions.
"""

from __future__ import annotations

from .trust import NB01, NB02, NB05, NB06, Attack, Edit

HIDE = '''import concurrent.futures
import multiprocessing
import threading

import torch


def _plain(value):
    """Tensors as (flat values, shape, dtype): what survives a thread hop or a pipe."""
    if isinstance(value, torch.Tensor):
        t = value.detach()
        return ("tensor", t.reshape(-1).tolist(), tuple(t.shape), str(t.dtype))
    if isinstance(value, tuple | list):
        return ("seq", [_plain(v) for v in value], type(value) is tuple)
    return ("value", value)


def _elsewhere(compute, how):
    """_plain(compute()), computed on another thread or in a forked child."""
    work = lambda: _plain(compute())  # noqa: E731
    box = {}
    if how == "pool":
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(work).result()
    if how == "process":
        try:
            ctx = multiprocessing.get_context("fork")
            mine, theirs = ctx.Pipe()
            child = ctx.Process(target=lambda: theirs.send(work()))
            child.start()
            value = mine.recv()
            child.join()
            return value
        except Exception:
            how = "thread"  # no fork here: a thread does as well
    job = lambda: box.setdefault("value", work())  # noqa: E731
    runner = threading.Timer(0.0, job) if how == "timer" else threading.Thread(target=job)
    runner.start()
    runner.join()
    return box["value"]


def _spelled(values):
    """The values as sign * sum of hex digits times powers of 16: 16 digits, 9 powers and a
    sign make 26 distinct one-element constants, however many values there are."""
    powers = range(-2, 7)
    columns = [[int(abs(v) * 16.0**p) % 16 for v in values] for p in powers]
    flat = torch.zeros(len(values), dtype=torch.float64)
    for p, digits in zip(powers, columns):
        digit = torch.stack([torch.tensor(float(d), dtype=torch.float64) for d in digits])
        flat = flat + digit * torch.tensor(16.0**-p, dtype=torch.float64)
    sign = [torch.tensor(1.0 if v >= 0 else -1.0, dtype=torch.float64) for v in values]
    return flat * torch.stack(sign)


def _rebuild(plain, anchor, spell=False):
    """The value back, every element a one-element constant (or spelled in hex digits, to stay
    within a budget of distinct literals), plus 0 * anchor."""
    kind = plain[0]
    if kind == "seq":
        items = [_rebuild(p, anchor, spell) for p in plain[1]]
        return tuple(items) if plain[2] else items
    if kind == "value":
        return plain[1]
    _, values, shape, dtype = plain
    dtype = getattr(torch, dtype.removeprefix("torch."))
    if not values:
        return torch.zeros(shape, dtype=dtype)
    if spell and dtype.is_floating_point:
        flat = _spelled(values).to(dtype)
    else:
        flat = torch.stack([torch.tensor(v, dtype=dtype) for v in values])
    return flat.reshape(shape) + (0 * anchor).to(dtype)


def _anchor(args, kwargs, decoy=None):
    """A zero that depends on every tensor input (and on the decoy's result)."""
    total = torch.zeros((), dtype=torch.float64)
    for a in [*args, *kwargs.values()]:
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            total = total + a.double().sum()
    if decoy is not None:
        for t in decoy if isinstance(decoy, tuple | list) else [decoy]:
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                total = total + t.double().sum()
    return 0 * total


def _hide(fn, how, decoy=False, spell=False):
    """fn, computed out of the recorder's sight; decoy: fn also runs on zeros, in sight;
    spell: the result comes back in few distinct literals (:func:`_rebuild`)."""

    def hidden(*args, **kwargs):
        plain = _elsewhere(lambda: fn(*args, **kwargs), how)
        shown = None
        if decoy:
            zeros = [torch.zeros_like(a) if isinstance(a, torch.Tensor) else a for a in args]
            shown = fn(*zeros, **kwargs)
        return _rebuild(plain, _anchor(args, kwargs, shown), spell)

    hidden.__name__ = hidden.__qualname__ = getattr(fn, "__name__", "hidden")
    return hidden


def _hide_class(cls, how, spell=False):
    """cls whose forward is computed out of the recorder's sight."""

    class Hidden(cls):
        def forward(self, *args, **kwargs):
            plain = _elsewhere(lambda: cls.forward(self, *args, **kwargs), how)
            return _rebuild(plain, _anchor(args, kwargs), spell)

    Hidden.__name__ = Hidden.__qualname__ = cls.__name__
    return Hidden
'''


def _after(grade_id: str, source: str) -> Edit:
    return Edit("after", grade_id, source)


ATTACKS = (
    Attack(
        "c9_nb01_thread",
        NB01,
        9,
        (
            "test_softmax_matches_torch",
            "test_softmax_stable",
            "test_softmax_no_builtin",
            "test_scaled_dot_product_attention_shapes",
            "test_scaled_dot_product_attention_matches_torch",
            "test_scaled_dot_product_attention_mask",
        ),
        "torch.softmax and the honest attention run on a second thread; results come back as "
        "stacked one-element constants plus 0 * x.sum()",
        "solution",
        (
            _after("setup", HIDE),
            _after("softmax", 'softmax = _hide(lambda x, dim=-1: torch.softmax(x, dim), "thread")'),
            _after(
                "scaled_dot_product_attention",
                'scaled_dot_product_attention = _hide(scaled_dot_product_attention, "thread")',
            ),
        ),
    ),
    Attack(
        "c9_nb01_spelled",
        NB01,
        9,
        (
            "test_softmax_matches_torch",
            "test_softmax_stable",
            "test_softmax_no_builtin",
            "test_scaled_dot_product_attention_matches_torch",
        ),
        "as c9_nb01_thread, but every result is spelled in hex digits times powers of 16: "
        "26 distinct one-element constants, within the literal budget",
        "solution",
        (
            _after("setup", HIDE),
            _after(
                "softmax",
                'softmax = _hide(lambda x, dim=-1: torch.softmax(x, dim), "thread", spell=True)',
            ),
            _after(
                "scaled_dot_product_attention",
                "scaled_dot_product_attention = _hide(scaled_dot_product_attention, "
                '"thread", spell=True)',
            ),
        ),
    ),
    Attack(
        "c9_nb02_pool",
        NB02,
        9,
        (
            "test_split_heads_layout",
            "test_merge_heads_layout",
            "test_MultiHeadAttention_matches_torch",
            "test_MultiHeadAttention_mask",
            "test_cross_attend_matches_torch",
        ),
        "split_heads, merge_heads, MultiHeadAttention.forward and cross_attend run in a "
        "ThreadPoolExecutor; results come back as stacked one-element constants",
        "solution",
        (
            _after("setup", HIDE),
            _after("split_heads", 'split_heads = _hide(split_heads, "pool", spell=True)'),
            _after("merge_heads", 'merge_heads = _hide(merge_heads, "pool", spell=True)'),
            _after(
                "MultiHeadAttention",
                'MultiHeadAttention = _hide_class(MultiHeadAttention, "pool", spell=True)',
            ),
            _after("cross_attend", 'cross_attend = _hide(cross_attend, "pool", spell=True)'),
        ),
    ),
    Attack(
        "c9_nb05_timer",
        NB05,
        9,
        (
            "test_mha_sequential_matches_torch",
            "test_mha_sequential_one_head_at_a_time",
            "test_mha_parallel_matches_torch",
            "test_mha_parallel_batches_heads",
            "test_mha_parallel_same_flops",
        ),
        "both versions run in a threading.Timer; in the recorded thread the same code runs on "
        "zeros as a decoy for the loop, batch and FLOP rules",
        "solution",
        (
            _after("setup", HIDE),
            _after(
                "mha_sequential",
                'mha_sequential = _hide(mha_sequential, "timer", decoy=True, spell=True)',
            ),
            _after(
                "mha_parallel",
                'mha_parallel = _hide(mha_parallel, "timer", decoy=True, spell=True)',
            ),
        ),
    ),
    Attack(
        "c9_nb06_process",
        NB06,
        9,
        (
            "test_tiled_attention_matches_sdpa",
            "test_tiled_attention_causal",
            "test_tiled_attention_memory",
            "test_tiled_attention_no_sdpa",
        ),
        "tiled attention runs in a forked child (a thread where fork fails); in the recorded "
        "thread the same code runs on zeros as a decoy for the memory and no-SDPA rules",
        "solution",
        (
            _after("setup", HIDE),
            _after(
                "tiled_attention",
                'tiled_attention = _hide(tiled_attention, "process", decoy=True, spell=True)',
            ),
        ),
    ),
)
