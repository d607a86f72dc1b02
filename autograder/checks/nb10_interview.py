"""Checks for notebook 10: the numbers and multiple-choice answers of the interview quiz.

Shape legend: ``B`` batch, ``T`` sequence length, ``C`` = d_model, ``nh`` query heads, ``nkv``
key/value heads, ``hs`` = C // nh (head size), ``L`` layers.

No answer is written down here: the questions live with their oracles, a module per part of the
notebook (§1 :mod:`.nb10_numbers`, §2 :mod:`.nb10_claims`, §5.1–5.7 :mod:`.nb10_loop`, §5.9–5.10
:mod:`.nb10_beyond`, §5.11 :mod:`.nb10_serving`), and are merged in here, where the two checks
compare an answer with them.
A number is recomputed by PyTorch and a known-wrong number comes with its diagnosis; a
multiple-choice answer is measured where it can be and compared by salted hash elsewhere, and
every option carries a note that explains it. Answers are variables named
``answer_<question>``; a test cell calls
``check_number("gpt3_head_size", answer_gpt3_head_size)`` or ``check_choice("gqa", answer_gqa)``.
This module is the one notebook 10 imports, so it declares the answers every part's oracles could
find in the learner's tools (``ANSWERS_IN_TOOLS``).
"""

from __future__ import annotations

import hashlib
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from autograder.torch_helpers import one_thread

from ._core import fail, not_written
from .nb10_beyond import BEYOND_CHOICES, BEYOND_NUMBERS
from .nb10_claims import SECTION_2_CHOICES
from .nb10_loop import LOOP_CHOICES, LOOP_NUMBERS
from .nb10_numbers import SECTION_1_NUMBERS
from .nb10_serving import SERVING_CHOICES, SERVING_NUMBERS

#: Learner-importable names that would compute this notebook's graded answers. In the grading
#: sandbox of any notebook whose test cells use these checks, they keep their names but raise.
ANSWERS_IN_TOOLS: dict[str, str] = {
    "autograder.tools.nb10_deck.DECK": (
        "every number and choice, on the card backs (matmuls_loop via 5·nh + 1)"
    ),
    "autograder.tools.nb10_flashcards.deck_markdown": "prints DECK",
    "autograder.tools.nb10_flashcards.Schedule": "holds DECK (its default deck)",
    "autograder.tools.nb10_flashcards.flashcard_widget": "holds DECK (its default deck)",
    "autograder.tools.modules.TorchMultiHeadAttention": (
        "params_gpt2_small, params_mha and flops, measured on the meta device"
    ),
    "autograder.tools.nb04_gqa.TorchGroupedQueryAttention": (
        "params_gqa, counted on the meta device"
    ),
    "autograder.tools.nb04_gqa.meta_cache": (
        "kv_bytes_per_token, as cache_nbytes(meta_cache(80, 8, 128, 1)), and "
        "window_cache_bytes, as cache_nbytes(meta_cache(32, 8, 128, 4096))"
    ),
    "autograder.tools.nb06_gpu.attention_flops": (
        "part of flops: the 4·B·T²·C of the attention products"
    ),
    "autograder.tools.nb05_parallel_heads.loop_heads": "matmuls_loop, counted with count_ops",
    "autograder.tools.nb05_parallel_heads.IMPLEMENTATIONS": "holds loop_heads",
    "autograder.tools.timing.count_ops": (
        "matmuls_loop and matmuls_packed, counted on loop_heads or nn.MultiheadAttention"
    ),
    "autograder.tools.timing.OpCounter": "the counter behind count_ops",
}

SALT = "mha-course/08-interview-prep"


# ------------------------------------------------------------------------- numeric answers


def _merged(pairs: list[tuple[float, str]]) -> dict[float, str]:
    """Known-wrong values -> diagnosis; two mistakes giving the same value share one message."""
    merged: dict[float, str] = {}
    for value, why in pairs:
        merged[value] = f"{merged[value]}; or else {why}" if value in merged else why
    return merged


@dataclass(frozen=True)
class _Number:
    """A numeric question: its oracle, known-wrong values with diagnoses, a general hint."""

    what: str
    oracle: Callable[[], int]
    wrong: Callable[[int], list[tuple[float, str]]]
    hint: str
    near: Callable[[int], list[tuple[float, float, str]]] = field(default=lambda right: [])


NUMBERS: dict[str, _Number] = {
    question: _Number(*spec)
    for part in (SECTION_1_NUMBERS, LOOP_NUMBERS, BEYOND_NUMBERS, SERVING_NUMBERS)
    for question, spec in part.items()
}


def _not_set(name: str, example: str) -> None:
    __tracebackhide__ = True
    not_written(
        f"`{name}` is not set yet: replace `raise NotImplementedError()` in its answer cell with "
        f"`{name} = {example}` and run that cell."
    )


def _as_number(value, name: str) -> float:
    __tracebackhide__ = True
    if value is None or (isinstance(value, str) and not value.strip()):
        _not_set(name, "<a number>")
    if isinstance(value, str):
        fail(f"Set `{name}` to a number, not a string: remove the quotes (got {value!r}).")
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        fail(f"Set `{name}` to a number (got {type(value).__name__}).")
    return float(value)


@one_thread
def check_number(question: str, value) -> None:
    """``value`` equals the number that PyTorch computes for ``question``'s configuration."""
    __tracebackhide__ = True
    spec, name = NUMBERS[question], f"answer_{question}"
    got = _as_number(value, name)
    right = spec.oracle()
    if got == right:
        return
    shown = f"{int(got):,}" if got == int(got) else f"{got:,}"
    why = _merged(spec.wrong(right)).get(got) or next(
        (why for lo, hi, why in spec.near(right) if lo <= got <= hi), None
    )
    if why is None and got != int(got):
        why = f"the answer is a whole number, so look again at the reasoning: {spec.hint}"
    if why is None and math.isclose(got, right, rel_tol=0.01):
        why = "close, but the question asks for the exact count: do not round"
    fail(f"`{name}` = {shown} is not {spec.what}: {why or spec.hint}.")


# ------------------------------------------------------------------------- multiple choice


@dataclass(frozen=True)
class Choice:
    """A multiple-choice question: a note for every option, and how to find the right ones.

    Either ``digests`` (salted hashes of the right letters) or ``measured`` (option -> a claim
    about two measurements, with 1 head and with 12 heads at the same width) is given.
    ``multiple`` questions take every letter that applies.
    """

    notes: dict[str, str]
    digests: frozenset[str] = frozenset()
    measured: dict[str, Callable[[float, float], bool]] | None = None
    measure: Callable[[int], float] | None = None
    multiple: bool = False
    missing_hint: str = ""


CHOICES: dict[str, Choice] = {
    **{question: Choice(**spec) for question, spec in SECTION_2_CHOICES.items()},
    **{question: Choice(*spec) for question, spec in LOOP_CHOICES.items()},
    **{question: Choice(*spec) for question, spec in BEYOND_CHOICES.items()},
    **{question: Choice(*spec) for question, spec in SERVING_CHOICES.items()},
}


def _digest(question: str, letter: str) -> str:
    return hashlib.sha256(f"{SALT}|{question}|{letter}".encode()).hexdigest()[:16]


def _right(question: str, spec: Choice) -> set[str]:
    if spec.measured is None:
        return {letter for letter in spec.notes if _digest(question, letter) in spec.digests}
    one, twelve = spec.measure(1), spec.measure(12)
    return {letter for letter, claim in spec.measured.items() if claim(one, twelve)}


def _letters(value, name: str, spec: Choice) -> set[str]:
    __tracebackhide__ = True
    if value is None or (isinstance(value, str) and not value.strip()):
        _not_set(name, '"<letters>"' if spec.multiple else '"<letter>"')
    options = sorted(spec.notes)
    if isinstance(value, list | tuple | set):
        value = "".join(str(v) for v in value)
    text = (
        "".join(c for c in value.lower() if c not in " ,;()[]{}'\".")
        if isinstance(value, str)
        else ""
    )
    if not text or not set(text) <= set(options) or (not spec.multiple and len(text) != 1):
        listed = ", ".join(f'"{o}"' for o in options)
        what = "a string of every letter that applies" if spec.multiple else "one letter"
        fail(f"Set `{name}` to {what}, out of {listed} (got {value!r}).")
    return set(text)


@one_thread
def check_choice(question: str, value) -> None:
    """``value`` (a letter, or letters for a select-all question) is right for ``question``."""
    __tracebackhide__ = True
    spec, name = CHOICES[question], f"answer_{question}"
    chosen = _letters(value, name, spec)
    right = _right(question, spec)
    if chosen == right:
        if not spec.multiple:
            print(f"Right: {spec.notes[min(right)]}.")
        return
    if not spec.multiple:
        fail(f"`{name}` = {min(chosen)!r} is not the best choice: {spec.notes[min(chosen)]}.")
    extra = sorted(chosen - right)
    if extra:
        fail(f"`{name}` includes ({extra[0]}), which holds up: {spec.notes[extra[0]]}.")
    fail(
        f"`{name}` misses at least one claim that deserves push-back: re-read the options you "
        f"did not pick and ask, for each, {spec.missing_hint}."
    )
