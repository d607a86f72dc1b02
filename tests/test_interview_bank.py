"""The mock interview's bank after issue 46: at least 20 problems covering the course and the
serving loop; the course's own answers, pasted, fail every variant of the new problems (their
contracts differ from the notebooks'); a classic mistake in an extension is named; each planted
bug of the debug round fails its test, and the diagnosis is one sentence.
"""

from __future__ import annotations

import pytest
from interview_answers_more import WRONG_EXTENSIONS, packed_module
from interview_answers_serving import WRONG_EXTENSIONS as SERVING_WRONG_EXTENSIONS
from mistakes import alibi, gpu_backward, llama, mla, paged, rope_scaling, sinks, speculative

from autograder.interview import bank, problems_debug
from autograder.interview.task import grade

PASTED = {  # the course's own answer to the exercise each new problem varies
    "rmsnorm_swiglu": llama.RMSNormMeta,  # notebook 02 §12: a class, weight as is
    "rope_scaling": rope_scaling.params_hf,  # notebook 08 §5: positional, a tuple back
    "alibi": alibi.bias_distance,  # notebook 08 §6: (slopes, T, S), (nh, T, S)
    "sink_cache": sinks.sink_streaming_llm,  # notebook 08 §3: (B, heads, S, hs), two caches
    "mla": mla.MLAManual,  # notebook 08 §4: the cache a tuple (c_kv, k_rope)
    "tiled_backward": gpu_backward.backward_key_blocks,  # notebook 06 §6: o and natural lse
    "paged_attention": paged.attention_gather,  # the served notebook §1: (num_blocks, bs, nkv, hs)
    "speculative_decoding": speculative.sample_vllm,  # its §6: a batch, (n_accepted, next_token)
}


def test_the_bank_covers_the_course_and_the_serving_loop():
    assert len(bank.PROBLEMS) >= 20
    assert {
        "mla",
        "rmsnorm_swiglu",
        "tiled_backward",
        "rope_scaling",
        "alibi",
        "sink_cache",
        "sampling",
        "left_padding",
        "debug_module",
    } <= set(bank.PROBLEMS)


@pytest.mark.parametrize("problem", sorted(PASTED))
def test_the_course_answer_fails_every_variant_of_a_new_problem(problem, one_thread):
    for variant in bank.PROBLEMS[problem].variants:
        diagnosis = grade(variant.task, PASTED[problem])
        assert diagnosis, f"{problem}/{variant.id} passes the course's answer"
        assert "\n" not in diagnosis.strip()


@pytest.mark.parametrize("variant", sorted(problems_debug.PLANTED))
def test_each_planted_bug_fails_its_test(variant, one_thread):
    task = bank.PROBLEMS["debug_module"].variant(variant).task
    assert problems_debug.planted(variant) in task.contract
    diagnosis = grade(task, packed_module(problems_debug.planted(variant)))
    symptom = {"merge": "with four it does not", "diagonal": "NaN", "softmax_dim": "future"}
    assert symptom[variant] in diagnosis and "\n" not in diagnosis.strip(), diagnosis


@pytest.mark.parametrize(
    "problem, answer, words",
    WRONG_EXTENSIONS + SERVING_WRONG_EXTENSIONS,
    ids=lambda x: x if type(x) is str else "",
)
def test_a_wrong_extension_gets_its_diagnosis(problem, answer, words, one_thread):
    assert words in grade(bank.PROBLEMS[problem].extension, answer)
