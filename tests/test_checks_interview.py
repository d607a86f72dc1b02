"""Notebook 10's checks accept every right answer, diagnose each known wrong one, keep no answer
in plain sight, and the buggy code shown in the notebook really fails the course's checks."""

import hashlib
import inspect
import math
import re

import jupytext
import pytest
import torch
from mistakes import interview as impl

from autograder import nbcell, paths
from autograder.checks import CheckFailure, nb10_beyond, nb10_loop
from autograder.checks import nb10_interview as checks

NOTEBOOK = "10_interview_prep"

# Published figures (notes/anchors.md, the seeds): the oracles must reproduce them.
ANCHORS = {
    "gpt3_head_size": 128,
    "params_gpt2_small": 2_360_064,
    "params_mha": 67_108_864,
    "params_gqa": 41_943_040,
    "kv_bytes_per_token": 327_680,
    "attention_matrix_bytes": 402_653_184,
    "flops": 603_979_776,
    "matmuls_loop": 5 * 12 + 1,
    "matmuls_packed": 4,
    "crossover_seq_len": 10_240,
    "prefill_intensity": 2048,
    "decode_intensity": 1,
    "window_cache_bytes": 536_870_912,  # Mistral 7B: 2 · 32 layers · 8 · 128 · W = 4096 · 2 B
    "mla_bytes_per_token": 70_272,  # DeepSeek-V3: 61 layers · (512 + 64) · 2 B
    "swiglu_params": 135_266_304,  # Llama 2 7B's MLP: 3 · 4096 · 11,008
    "block_bytes": 8_388_608,  # Llama 2 7B: 2 · 32 layers · 32 · 128 · 16 positions · 2 B
    "chunked_prefill_steps": 17,  # ceil(8,000 / (512 − 32))
}


def _failure(check, question, value) -> str:
    with pytest.raises(CheckFailure) as info:
        check(question, value)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_every_question_has_right_answers():
    assert set(impl.RIGHT_NUMBERS) == set(checks.NUMBERS) == set(ANCHORS)
    assert set(impl.RIGHT_CHOICES) == set(checks.CHOICES)


@pytest.mark.parametrize("question", sorted(ANCHORS))
def test_oracles_reproduce_the_published_numbers(question):
    assert checks.NUMBERS[question].oracle() == ANCHORS[question]


@pytest.mark.parametrize("question", sorted(checks.NUMBERS))
def test_no_diagnosis_is_attached_to_the_right_number(question):
    spec = checks.NUMBERS[question]
    right = spec.oracle()
    assert right not in dict(spec.wrong(right))
    assert not any(lo <= right <= hi for lo, hi, _ in spec.near(right))


@pytest.mark.parametrize("question", sorted(impl.RIGHT_NUMBERS))
def test_right_numbers_pass_in_any_spelling(question):
    for value in impl.RIGHT_NUMBERS[question]:
        checks.check_number(question, value)


@pytest.mark.parametrize("wrong", impl.WRONG_NUMBERS + impl.NOT_A_NUMBER, ids=str)
def test_wrong_numbers_get_their_diagnosis(wrong):
    message = _failure(checks.check_number, wrong.question, wrong.value)
    assert wrong.diagnosis in message, message
    assert f"answer_{wrong.question}" in message


@pytest.mark.parametrize("wrong", impl.WRONG_NUMBERS, ids=str)
def test_a_diagnosis_never_shows_the_right_number(wrong):
    message = _failure(checks.check_number, wrong.question, wrong.value)
    diagnosis = message.split(" is not ", 1)[1]  # what follows the learner's own value
    right = ANCHORS[wrong.question]
    for shown in {f"{right:,}", str(right)}:
        assert not re.search(rf"(?<![\d,.]){re.escape(shown)}(?![\d,.])", diagnosis), message


@pytest.mark.parametrize("question", sorted(impl.RIGHT_CHOICES))
def test_right_choices_pass_in_any_spelling(question, capsys):
    for value in impl.RIGHT_CHOICES[question]:
        checks.check_choice(question, value)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("wrong", impl.WRONG_CHOICES + impl.NOT_A_CHOICE, ids=str)
def test_wrong_choices_get_their_diagnosis(wrong):
    message = _failure(checks.check_choice, wrong.question, wrong.value)
    assert wrong.diagnosis in message, message


@pytest.mark.parametrize("question", sorted(q for q, c in checks.CHOICES.items() if not c.multiple))
def test_every_wrong_letter_of_every_question_is_explained(question):
    right = impl.RIGHT_CHOICES[question][0]
    wrong = {w.value for w in impl.WRONG_CHOICES if w.question == question}
    assert wrong == set(checks.CHOICES[question].notes) - {right}
    for letter in wrong:
        message = _failure(checks.check_choice, question, letter)
        assert message.endswith(f"{checks.CHOICES[question].notes[letter]}.")


def test_answers_are_not_in_plain_sight():
    """Every option has a note (no letter stands out), hashed answers are salted, and the
    measured questions have exactly one true claim."""
    source = inspect.getsource(checks) + inspect.getsource(nb10_loop)
    for question, spec in checks.CHOICES.items():
        assert set(spec.notes) >= set("abcd")
        right = "".join(sorted(checks._right(question, spec)))
        assert right == "".join(sorted(impl.RIGHT_CHOICES[question][0]))
        if spec.measured is None:
            plain = hashlib.sha256(f"{question}|{right}".encode()).hexdigest()[:16]
            assert plain not in source
    beyond = nb10_beyond.BEYOND_NUMBERS
    for question, value in ANCHORS.items():
        inputs = ("gpt3_head_size", "matmuls_packed", "prefill_intensity", "decode_intensity")
        # nb10_beyond's configurations hold 61 (DeepSeek-V3's layers), only its own anchors
        where = source + inspect.getsource(nb10_beyond) if question in beyond else source
        if question not in inputs:  # 128, 4, 2048 and 1 are also inputs
            assert not {f"{value:_}", str(value)} & set(re.findall(r"\b\d[\d_]*\b", where))


def test_stubs_and_unset_answers_explain_what_to_do():
    for check, question in ((checks.check_number, "flops"), (checks.check_choice, "gqa")):
        message = _failure(check, question, None)
        assert "raise NotImplementedError()" in message and "run that cell" in message


def test_checks_are_fast_and_single_threaded():
    before = torch.get_num_threads()
    for question in checks.NUMBERS:
        checks.check_number(question, ANCHORS[question])
    assert torch.get_num_threads() == before


def _notebook_functions() -> dict:
    """Run the notebook's locked cells that define the buggy code; return it by name."""
    nb = jupytext.read(paths.source_text(NOTEBOOK))
    namespace = {"torch": torch, "math": math, "nn": torch.nn, "F": torch.nn.functional}
    for cell in nb.cells:
        if (nbcell.grade_id(cell) or "").startswith("given_buggy_"):
            exec(cell.source, namespace)  # the course's own notebook source
    return {name: fn for name, fn in namespace.items() if name.lower().startswith("buggy")}


def test_the_notebooks_buggy_code_fails_with_the_intended_diagnosis():
    functions = _notebook_functions()
    assert set(functions) == set(impl.NOTEBOOK_BUGS)
    for name, expectations in impl.NOTEBOOK_BUGS.items():
        for check, diagnosis in expectations:
            with pytest.raises(CheckFailure, match=re.escape(diagnosis)):
                check(functions[name], seed=1, thorough=True)


def _flash_hbm_numbers(T: int, hs: int, sram: int) -> int:
    """Numbers FlashAttention-2's forward moves between HBM and SRAM for one head: each tile of
    ``Br`` queries is read once and its output written once, and every tile re-reads all of k
    and v (Dao et al., Algorithm 1 with the loops swapped as in FlashAttention-2)."""
    Br = max(1, sram // (4 * hs))  # q, k, v and output tiles of hs-wide rows share the SRAM
    tiles = math.ceil(T / Br)
    return 2 * T * hs + tiles * 2 * T * hs


def test_flash_io_key_says_the_traffic_stays_quadratic_in_t():
    """Issue 29: the keyed option of §5.2 (ii) once said HBM traffic falls to about T·hs per
    head. Counted tile by tile it is Θ(T²·hs²/M): doubling T multiplies it by about 4."""
    small, large = (_flash_hbm_numbers(T, 64, 100_000) for T in (8192, 16384))
    assert 3.5 < large / small < 4.5
    standard = 4 * 16384**2  # the T × T scores and weights, each written and read back once
    assert large < standard / 5  # far smaller, all the same
    notes, _ = nb10_loop.LOOP_CHOICES["flash_io"]
    key = "".join(checks._right("flash_io", checks.CHOICES["flash_io"]))
    assert "T²·hs²/M" in notes[key] and "T·hs per head" not in notes[key]
    source = paths.source_text(NOTEBOOK).read_text()
    option = source[source.index("**(ii) Why is it faster") : source.index("choice_flash_io")]
    assert "Θ(T²·hs²/M)" in option and "order T·hs per head" not in option


def test_complexity_has_exactly_one_true_option():
    """Issue 29: with hs fixed at 64-128, nh grows with C, so 'memory O(T²·C)' was also true.
    Every option but the key must now claim a wrong order for time or memory."""
    source = paths.source_text(NOTEBOOK).read_text()
    options = source[source.index("### 5.1 · What does attention cost?") :].split(
        "choice_complexity"
    )[0]
    assert "memory O(T²·C)" not in options
    assert "(d) Time O(T·C²)" in options


# What the fix of each buggy piece of code would say: the checks must not say it on the buggy code.
CAUSES = {
    "BuggyMultiHeadAttention": ("√hs", "√d_model", "~mask", "True = blocked"),
    "BuggyPackedCausalSelfAttention": ("(B, T, 3, nh, hs)", "(B, T, nh, 3, hs)", "after the"),
    "BuggyRotaryCausalAttention": ("split", "rope(", "(B, nh, T, hs)"),
}


def test_the_buggy_code_gets_its_symptom_not_its_fix():
    """Issue 29: §3 is find-the-bug; the first failure says which property fails on which input,
    and the cause stays behind the hints."""
    functions = _notebook_functions()
    for name, expectations in impl.NOTEBOOK_BUGS.items():
        for check, _ in expectations:
            for run in ({}, {"seed": 1, "thorough": True}):
                with pytest.raises(CheckFailure) as info:
                    check(functions[name], **run)
                message = str(info.value)
                assert not [cause for cause in CAUSES[name] if cause in message], message


def _options(markdown: str) -> dict[str, str]:
    """letter -> the text of option ``- (letter) …`` in ``markdown``, hints left out."""
    text = re.sub(r"<details>.*?</details>", "", markdown, flags=re.DOTALL) + "\n"
    found = re.findall(r"^- \(([a-f])\) (.*?)(?=^- \(|^\s*$)", text, flags=re.MULTILINE | re.DOTALL)
    return {letter: " ".join(option.split()) for letter, option in found}


def _longest_is_right(questions: dict[str, str]) -> list[str]:
    """The single-answer questions (question -> its Markdown) whose right option, by the checks'
    digests or measurements, is at least as long as every other option."""
    tells = []
    for question, markdown in questions.items():
        options = _options(markdown)
        assert set(options) == set(checks.CHOICES[question].notes), question
        (right,) = checks._right(question, checks.CHOICES[question])
        if len(options[right]) >= max(map(len, options.values())):
            tells.append(question)
    return tells


def test_the_right_option_is_rarely_the_longest():
    """Issue 46: the right option was the longest in 26 of 29 questions, a tell that answers
    without reading. At most one question in three may keep it."""
    markdown, before = {}, ""
    for cell in jupytext.read(paths.source_text(NOTEBOOK)).cells:
        if cell.cell_type == "markdown":
            before = cell.source
        for name in re.findall(r"^answer_(\w+)\s*=", cell.source, flags=re.MULTILINE):
            markdown.setdefault(name, before)
    single = {q: markdown[q] for q, spec in checks.CHOICES.items() if not spec.multiple}
    tells = _longest_is_right(single)
    assert len(single) >= 29 and 3 * len(tells) <= len(single), tells


def test_no_spoken_follow_up_gives_its_answer_away_by_length():
    """The mock interview's spoken follow-ups, as the candidate reads them: at most one in three
    has its right option the longest."""
    from autograder.interview import bank

    spoken = {q for problem in bank.PROBLEMS.values() for q in problem.spoken if bank.is_choice(q)}
    tells = _longest_is_right({q: bank.question_text(q) for q in spoken})
    assert len(spoken) >= 10 and 3 * len(tells) <= len(spoken), tells
