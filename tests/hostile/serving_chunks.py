"""Attacks on notebook 09's sections 4 and 5 (chunked prefill, split-KV decoding), one learner.

Written as a learner who wants the points without the work, each on a cell of its own:

- ``prefill_chunk`` reads the check's own answer, one causal pass over the whole prompt, out of
  the calling frame (``sys._getframe``), and cuts the chunk's rows from it;
- ``attend_chunk`` takes ``o`` from ``F.scaled_dot_product_attention``, which the section forbids
  (it has no ``lse``), and only the lse by hand;
- ``merge_splits`` answers from a table of the public checks' inputs and answers, computed
  offline with the course's own package and keyed by the inputs' shape and sum; anything else gets
  the plain average;
- ``split_kv_decode`` splits nothing: SDPA over the whole cache.

``tests/test_hostile_serving_chunks.py`` verifies each target in-process; the class run
(:mod:`hostile.class_run`) grades the same submission.
"""

from __future__ import annotations

import functools

from autograder.checks import nb09_split_kv

from .trust import NB09, Attack, Edit

PUBLIC_RUNS = ({"seed": 0}, {"seed": 1, "thorough": True})

ORACLE_FROM_FRAMES = '''import sys


def prefill_chunk(q, k, v):
    """The rows of the check's own one-shot pass, found in a calling frame."""
    frame = sys._getframe(1)
    while frame is not None and "whole" not in frame.f_locals:
        frame = frame.f_back
    T, S = q.shape[-2], k.shape[-2]
    return frame.f_locals["whole"][:, S - T : S].to(q.dtype)
'''

SDPA_FOR_O = '''def attend_chunk(q, k, v):
    """o from PyTorch's attention, lse by hand."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return F.scaled_dot_product_attention(q, k, v), torch.logsumexp(scores, -1)
'''

NO_SPLITS = '''def split_kv_decode(q, k, v, num_splits):
    """One piece: PyTorch's attention over the whole cache."""
    return F.scaled_dot_product_attention(q, k, v)
'''


@functools.cache
def merge_table() -> str:
    """``merge_splits`` answering the public checks' inputs from a table of their answers."""
    table = {}

    def spy(outputs, lses):
        o, lse = nb09_split_kv.merged(outputs, lses)
        key = (tuple(outputs.shape), round(float(outputs.sum()), 3))
        table[key] = (o.float().tolist(), lse.float().tolist())
        return o.float(), lse.float()

    for run in PUBLIC_RUNS:
        nb09_split_kv.check_merge_splits(spy, **run)
    spelled = repr(table).replace("-inf", 'float("-inf")')  # an empty split's lse
    return f'''_ANSWERS = {spelled}


def merge_splits(outputs, lses):
    """The public answers, pasted in; anything else: the plain average."""
    key = (tuple(outputs.shape), round(float(outputs.sum()), 3))
    if key in _ANSWERS:
        o, lse = _ANSWERS[key]
        return torch.tensor(o), torch.tensor(lse)
    return outputs.mean(0), lses.amax(0)
'''


def attacks() -> tuple[Attack, ...]:
    return (
        Attack(
            "s_nb09_chunks",
            NB09,
            2,
            (
                "test_prefill_chunk",
                "test_attend_chunk",
                "test_merge_splits",
                "test_split_kv_decode",
            ),
            "prefill_chunk from the check's frame, attend_chunk and split_kv_decode through "
            "SDPA, merge_splits from a table of the public answers",
            edits=(
                Edit("answer", "prefill_chunk", ORACLE_FROM_FRAMES),
                Edit("answer", "attend_chunk", SDPA_FOR_O),
                Edit("answer", "merge_splits", merge_table()),
                Edit("answer", "split_kv_decode", NO_SPLITS),
            ),
        ),
    )
