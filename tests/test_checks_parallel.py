"""The notebook-05 checks pass every correct implementation and name each classic mistake."""

import pytest
from mistakes import parallel as impl

from autograder.checks import CheckFailure
from autograder.checks import nb05_quiz as quiz
from autograder.tools.modules import TorchMultiHeadAttention
from autograder.tools.timing import count_ops

# Correct implementations and catalogued mistakes: tests/test_mistakes.py.

pytestmark = pytest.mark.usefixtures("one_thread")


def test_quiz_accepts_the_right_letter_in_any_spelling():
    for question, letter in impl.QUIZ_RIGHT.items():
        for spelling in (letter, letter.upper(), f"({letter})", f" {letter} "):
            quiz.check_quiz_answer(question, spelling)


@pytest.mark.parametrize("question", impl.QUIZ_RIGHT)
def test_quiz_explains_every_wrong_letter(question):
    for letter in "abcd":
        if letter == impl.QUIZ_RIGHT[question]:
            continue
        with pytest.raises(CheckFailure, match="is not the best choice: .+"):
            quiz.check_quiz_answer(question, letter)


@pytest.mark.parametrize("answer", [None, "", "e", "ab", 2])
def test_quiz_rejects_a_malformed_answer(answer):
    with pytest.raises(CheckFailure, match="one letter"):
        quiz.check_quiz_answer("q1", answer)


def test_predicted_counts():
    quiz.check_predicted_matmul_counts(81, 6)
    quiz.check_predicted_matmul_counts(81.0, 6)
    for seq, par, why in [
        (80, 6, "runs once, after the loop"),
        (96, 6, "not once per head"),
        (81, 5, "two products"),
        (81, 96, "no loop"),
        (None, 6, "whole number"),
        (81, 4.5, "whole number"),
        (17, 6, "count one per projection"),
    ]:
        with pytest.raises(CheckFailure, match=why):
            quiz.check_predicted_matmul_counts(seq, par)


@pytest.mark.parametrize("grad_mode", ["no_grad", "inference_mode", "enable_grad"])
def test_op_counts_match_the_notebook_claims(grad_mode):
    """5·nh + 1 matrix products in the loop, 6 batched, 4 + 1 fused call with SDPA."""
    for nh in (1, 4, 16):
        mha = TorchMultiHeadAttention(32, nh)
        x = mha.q_proj.weight.new_ones(2, 5, 32)
        assert count_ops(impl.seq_linear, x, mha, grad_mode=grad_mode).big_ops == 5 * nh + 1
        assert count_ops(impl.par_math, x, mha, grad_mode=grad_mode).matmuls == 6
        fused = count_ops(impl.par_sdpa, x, mha, grad_mode=grad_mode)
        assert (fused.matmuls, fused.sdpa_calls) == (4, 1)


def test_largest_tensor_tracks_the_attention_matrix():
    """Naive attention creates (B, nh, T, T); the fused kernel never does (for notebook 06)."""
    mha = TorchMultiHeadAttention(16, 2)
    x = mha.q_proj.weight.new_ones(1, 64, 16)
    assert count_ops(impl.par_math, x, mha).largest_numel == 2 * 64 * 64
    assert count_ops(impl.par_sdpa, x, mha).largest_numel < 64 * 64
