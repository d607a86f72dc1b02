"""Checks for notebook 05, the quiz: predicted matmul counts and the multiple-choice answers.

The answers are constants the learner sets; each wrong one is named with why it is wrong. Nothing
runs PyTorch here: the counts are the ones the notebook's diagram and FlopCounterMode agree on.
"""

from __future__ import annotations

import numbers

from ._core import fail, not_written

#: Learner-importable names that would compute these answers. In the grading sandbox of any
#: notebook whose test cells use these checks, they keep their names but raise.
ANSWERS_IN_TOOLS: dict[str, str] = {
    "autograder.tools.nb10_deck.DECK": (
        "quiz q1 and q3 in words, and the 5·nh + 1 and 6 of the matmul predictions"
    ),
    "autograder.tools.nb10_flashcards.deck_markdown": "prints DECK",
    "autograder.tools.nb10_flashcards.Schedule": "holds DECK (its default deck)",
    "autograder.tools.nb10_flashcards.flashcard_widget": "holds DECK (its default deck)",
}

_SEQUENTIAL_16 = {
    81: "",
    80: "count the output projection too: it runs once, after the loop",
    96: "the output projection runs once, not once per head",
    97: "the output projection runs once, not once per head",
    65: "each head needs two attention products, q @ kᵀ and weights @ v",
    49: "each head also needs its two attention products, q @ kᵀ and weights @ v",
    33: "each head also needs its own three projections, q, k and v",
}


_PARALLEL_6 = {
    6: "",
    4: "the batched version also has two attention products, q @ kᵀ and weights @ v",
    5: "count q @ kᵀ and weights @ v as two products (one fused SDPA call would replace both)",
    81: "the batched version has no loop: its count does not depend on nh",
    96: "the batched version has no loop: its count does not depend on nh",
}


def _as_int(value, name) -> int:
    __tracebackhide__ = True
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or value != int(value):
        fail(f"Set `{name}` to a whole number (got {value!r}).")
    return int(value)


def check_predicted_matmul_counts(
    sequential, parallel, *, seed: int = 0, thorough: bool = False
) -> None:
    """The predicted matmul counts at nh = 16: 5·nh + 1 for the loop, 6 for the batched form."""
    __tracebackhide__ = True
    for value, name, key, right in (
        (sequential, "answer_matmuls_sequential", _SEQUENTIAL_16, 81),
        (parallel, "answer_matmuls_parallel", _PARALLEL_6, 6),
    ):
        got = _as_int(value, name)
        if got != right:
            why = key.get(got, "count one per projection call and one per @, as in the diagram")
            fail(f"`{name}` = {got} is not the count at nh = 16: {why}.")


_QUIZ = {
    "q1": (
        "c",
        {
            "a": "nh full-size passes would cost nh times more, but the heads split C: each works "
            "on hs = C / nh features",
            "b": "no square root appears: the projections do not depend on nh and the attention "
            "products sum to the same 4·B·T²·C",
            "d": "splitting C into nh heads re-arranges the same products; it removes none of them",
        },
    ),
    "q2": (
        "b",
        {
            "a": "FlopCounterMode measured the same FLOPs for both versions",
            "c": "the Python loop costs the same wherever the tensors live; what differs is how "
            "much parallel hardware one small head-sized product leaves idle",
            "d": "both versions read exactly the same weights, with no copy",
        },
    ),
    "q3": (
        "a",
        {
            "b": "softmax is not linear, and linearity is not what lets heads run side by side",
            "c": "each head computes its own attention weights from its own slices",
            "d": "the output projection mixes all heads, after the concatenation",
        },
    ),
    "q4": (
        "d",
        {
            "a": "one cold run per version measures a single moment of a shared machine",
            "b": "synchronising matters on a GPU, but this was a CPU; the missing warm-up and "
            "repeats are the problem",
            "c": "averaging two cold runs keeps both problems: no warm-up and no repeats",
        },
    ),
}


def check_quiz_answer(question: str, answer, *, seed: int = 0, thorough: bool = False) -> None:
    """``answer`` (one letter) is the right choice for quiz ``question`` (``"q1"``, ...)."""
    __tracebackhide__ = True
    right, wrong = _QUIZ[question]
    name = f"answer_{question}"
    letter = answer.strip(" ().").lower() if isinstance(answer, str) else None
    if letter not in ("a", "b", "c", "d"):
        unset = not_written if answer is None else fail
        unset(f'Set `{name}` to one letter as a string, for example "a" (got {answer!r}).')
    if letter != right:
        fail(f"`{name}` = {letter!r} is not the best choice: {wrong[letter]}.")
