"""The mock interview (``python -m autograder interview``, ``autograder/interview/``): every
variant's right answer passes its graders, the course's own answers fail where a variant's
contract differs, two attempts at a problem get different variants, and one attempt runs end to
end in a real kernel: a wrong answer's diagnosis, a pass that stops the clock, the follow-ups,
the scorecard, the spacing and ``progress``.
"""

from __future__ import annotations

import math
import re

import nbformat
import pytest
import torch
from interview_answers import ANSWERS, SCALED_CELL, UNSCALED_CELL, WRONG, window_mask
from mistakes import attention, cross, dropout, gqa, interview, masking, rope

from autograder.checks.nb10_interview import CHOICES, check_choice
from autograder.interview import bank, notebook, scorecard
from autograder.interview.task import grade

TASKS = [
    (problem.id, variant.id, variant.task)
    for problem in bank.PROBLEMS.values()
    for variant in problem.variants
] + [(problem.id, "extension", problem.extension) for problem in bank.PROBLEMS.values()]


def test_the_bank_draws_from_the_whole_course():
    assert len(bank.PROBLEMS) >= 10
    taught = {n for p in bank.PROBLEMS.values() for n in re.findall(r"notebook (\d+)", p.taught)}
    assert {"01", "02", "03", "04", "06", "08", "10"} <= taught
    assert all(len(p.variants) >= 2 for p in bank.PROBLEMS.values())
    for problem in bank.PROBLEMS.values():
        for question in problem.spoken:  # every follow-up is a question of notebook 10's bank
            assert question in CHOICES or question == "crossover_seq_len", question
            assert bank.question_text(question), question


@pytest.mark.parametrize("problem, variant, task", TASKS, ids=lambda x: x if type(x) is str else "")
def test_a_right_answer_passes_every_grader(problem, variant, task, one_thread):
    assert grade(task, ANSWERS[(problem, variant)]) is None


@pytest.mark.parametrize(
    "problem, variant, answer, words", WRONG, ids=lambda x: x if type(x) is str else ""
)
def test_a_wrong_answer_gets_the_checks_diagnosis(problem, variant, answer, words, one_thread):
    assert words in grade(bank.PROBLEMS[problem].variant(variant).task, answer)


# The course's own answers, pasted into a variant whose contract differs.
PASTED = {
    "attention": attention.sdpa_matmul,  # notebook 01: (q, k, v, mask) -> (out, weights)
    "causal_mask": masking.causal_tril,  # notebook 03: True = may attend, S given
    "causal_mha": interview.gqa_live_sdpa,  # notebook 10's live round: packed w_kv, nkv
    "cross_attention": cross.cross_arange,  # notebook 02: (mha, decoder_x, encoder_out, lengths)
    "attention_dropout": dropout.dropout_functional,  # notebook 02: p to drop, (out, weights)
    "repeat_kv": gqa.repeat_interleave,  # notebook 04: (B, nkv, S, hs), n_rep
    "rope": rope.rope_hf_llama,  # notebook 04: split halves, (..., T, hs)
    "sliding_window": window_mask,  # notebook 08: True = may attend, S given
}


@pytest.mark.parametrize("problem", sorted(PASTED))
def test_the_course_answer_fails_a_variant_whose_contract_differs(problem, one_thread):
    for variant in bank.PROBLEMS[problem].variants:
        diagnosis = grade(variant.task, PASTED[problem])
        assert diagnosis, f"{problem}/{variant.id} passes the course's answer"
        assert "\n" not in diagnosis.strip()
    gqa_extension = bank.PROBLEMS["causal_mha"].extension  # separate w_k and w_v, not w_kv
    assert grade(gqa_extension, interview.gqa_live_sdpa)


def test_a_variant_speaks_its_own_convention(one_thread):
    """A diagnosis about the course's convention is said in the variant's terms."""
    blocked = bank.PROBLEMS["attention"].variant("blocked").task

    def reads_true_as_allowed(q, k, v, blocked=None):
        return attention.sdpa_matmul(q, k, v, blocked)[0]

    assert "True means the query may not attend" in grade(blocked, reads_true_as_allowed)
    halves = bank.PROBLEMS["rope"].variant("interleaved").task
    assert "neighbouring features" in grade(halves, rope.rope_hf_llama)


def _bias_attention(use_bias: str):
    """A bias-variant `attention` whose scores meet `bias` as ``use_bias`` says."""
    namespace = {"torch": torch, "math": math}
    exec(
        "def attention(q, k, v, bias=None):\n"
        "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
        f"    scores = scores if bias is None else {use_bias}\n"
        "    weights = torch.softmax(scores, -1).nan_to_num(0.0)\n"
        "    return weights @ v, weights\n",
        namespace,
    )
    return namespace["attention"]


def test_each_variant_hears_its_own_arguments(one_thread):
    """Issue 46: a `bias` variant heard of `mask`, a `past_len` variant of the check's
    `causal_mask(T, S)`."""
    bias = bank.PROBLEMS["attention"].variant("bias").task
    for use_bias in (
        "scores.masked_fill(bias == 0, float('-inf'))",  # read the wrong way round
        "scores * bias.exp()",  # multiplied, not added
        "scores + bias.reshape(scores.shape)",  # does not broadcast
    ):
        diagnosis = grade(bias, _bias_attention(use_bias))
        assert "`bias`" in diagnosis and "mask" not in diagnosis, diagnosis
    past_len = bank.PROBLEMS["causal_mask"].variant("past_len").task

    def top_left(T, past_len=0, device=None):
        return torch.ones(T, past_len + T, dtype=torch.bool, device=device).tril()

    def ignores_past_len(T, past_len=0, device=None):
        return torch.ones(T, T, dtype=torch.bool, device=device).tril()

    assert "`causal_mask(2, 4)` is aligned top-left" in grade(past_len, top_left)
    assert "ignores past_len" in grade(past_len, ignores_past_len)
    for wrong in (top_left, ignores_past_len):
        assert not re.search(r"causal_mask\(2, 6\)|\bS\b", grade(past_len, wrong))


def test_the_rope_extension_names_the_layout_each_call_asks_for(one_thread):
    """Issue 46: an extension that ignores `interleaved` was steered to split halves even when
    the call asked for neighbouring pairs."""
    extension = bank.PROBLEMS["rope"].extension

    def halves_only(x, positions, base=10000.0, interleaved=False):
        return rope.rope_hf_llama(x, positions, base)

    def pairs_only(x, positions, base=10000.0, interleaved=False):
        h = x.shape[-1] // 2
        out = rope.rope_hf_llama(torch.cat((x[..., 0::2], x[..., 1::2]), -1), positions, base)
        return torch.stack((out[..., :h], out[..., h:]), -1).flatten(-2)  # back to pairs

    said = grade(extension, halves_only)
    assert "`interleaved=True`" in said and "neighbouring features" in said, said
    said = grade(extension, pairs_only)
    assert "`interleaved=False`" in said and "i + hs/2" in said, said
    assert all("this course" not in grade(extension, f) for f in (halves_only, pairs_only))


def test_a_spoken_answer_is_told_of_the_interviews_call(tmp_path):
    """Issue 46: a wrong spoken answer named notebook 10's `answer_sqrt_dk`."""
    from autograder.checks import CheckFailure
    from autograder.interview.session import Interview

    record = scorecard.new_attempt(tmp_path, "attention", "bias", ["sqrt_dk", "complexity"])
    session = Interview(record["id"], tmp_path)
    wrong = next(
        letter for letter in CHOICES["sqrt_dk"].notes if letter != _right_letter("sqrt_dk")
    )
    for question, value in (("sqrt_dk", wrong), ("sqrt_dk", "z"), ("complexity", None)):
        with pytest.raises(CheckFailure) as failure:
            session.answer(question, value)
        assert "answer_" not in str(failure.value), failure.value
    assert 'interview.answer("complexity", "<letter>")' in str(failure.value)


def test_a_spoken_follow_up_stands_on_its_own():
    """Issue 46: a follow-up spoke of "section 3.3's cache", a section of notebook 10 that the
    candidate does not have in front of them."""
    for question in {q for problem in bank.PROBLEMS.values() for q in problem.spoken}:
        assert not re.search(r"\bsection \d", bank.question_text(question), re.I), question


def test_one_command_gives_a_new_problem(tmp_path, capsys):
    from autograder.cli import main

    assert main(["interview", "--folder", str(tmp_path)]) == 0
    assert "Mock interview:" in capsys.readouterr().out
    (written,) = (tmp_path / "interview").glob("*.ipynb")
    nbformat.validate(nbformat.read(written, as_version=4))
    assert written.stem == scorecard.load(tmp_path / "interview")["attempts"][0]["id"]
    assert main(["interview", "no_such_problem", "--folder", str(tmp_path)]) == 2


def test_two_attempts_at_a_problem_get_different_variants(tmp_path):
    for seed in range(6):
        work = tmp_path / str(seed)
        work.mkdir()
        _, first = notebook.write("causal_mha", work, seed)
        _, second = notebook.write("causal_mha", work, seed)
        assert first["variant"] != second["variant"]
        assert (first["id"], second["id"]) == ("causal_mha-1", "causal_mha-2")


def _right_letter(question: str) -> str:
    for letter in CHOICES[question].notes:
        try:
            check_choice(question, letter)
            return letter
        except AssertionError:
            continue
    raise AssertionError(question)


def _outputs_text(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        parts += out.get("traceback", []) + [out.get("text", "")]
        parts.append(out.get("data", {}).get("text/markdown", ""))
    return re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(parts))


SCOPE = """print(*sorted(
    name for name in globals()
    if not name.startswith("_") and name not in ("In", "Out", "get_ipython", "exit", "quit", "open")
))"""
EXTENSION = """
def causal_mask(T, S=None, device=None):
    S = T if S is None else S
    return torch.ones(T, S, dtype=torch.bool, device=device).tril(S - T)
"""


@pytest.mark.slow
def test_one_attempt_end_to_end_in_a_kernel(tmp_path, monkeypatch):
    """The notebook as written in coach mode, in one kernel: the clock, a wrong answer and its
    diagnosis, a right one (the clock stops), the code follow-up, a spoken one, the scorecard,
    progress."""
    from nbclient import NotebookClient

    from autograder.grader.kernel_channels import KernelManager

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    path, record = notebook.write("attention", tmp_path, seed=1, variant_id="bias", mode="coach")
    nb = nbformat.read(path, as_version=4)
    assert [c.cell_type for c in nb.cells] == ["markdown", "code", "code", "code"]
    assert nb.cells[2].source == ""  # one empty cell: nothing of the course in the kernel
    question = next(iter(record["spoken"]))
    nb.cells += [
        nbformat.v4.new_code_cell(EXTENSION + "interview.run_extension(globals())"),
        nbformat.v4.new_code_cell(f'interview.answer("{question}", "{_right_letter(question)}")'),
        nbformat.v4.new_code_cell("print(interview.timer.text())"),
        nbformat.v4.new_code_cell(SCOPE),
    ]
    client = NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        allow_errors=True,
        kernel_manager_class=KernelManager,
    )
    client.resources = {"metadata": {"path": str(path.parent)}}
    with client.setup_kernel():
        _, clock, answer, tests, extension, spoken, shown, scope = nb.cells
        client.execute_cell(clock, 1)
        client.execute_cell(tests, 3)  # Run All reaches the test cell before any answer
        assert "`attention` is not defined yet" in _outputs_text(tests)
        assert _outputs_text(client.execute_cell(scope, 7)).split() == ["Interview", "interview"]
        answer.source = UNSCALED_CELL
        client.execute_cell(answer, 2)
        client.execute_cell(tests, 3)
        assert "divide the scores by √d_k" in _outputs_text(tests)
        assert "first passed" not in _outputs_text(client.execute_cell(shown, 6))
        answer.source = SCALED_CELL
        client.execute_cell(answer, 2)
        client.execute_cell(tests, 3)
        passed = _outputs_text(tests)
        assert "Every test passes" in passed and "Follow-up 1" in passed
        assert "interview.answer" in passed
        client.execute_cell(extension, 4)
        assert "extension passes" in _outputs_text(extension)
        client.execute_cell(spoken, 5)
        assert "Right" in _outputs_text(spoken)
        shown.outputs = []
        assert "first passed after" in _outputs_text(client.execute_cell(shown, 6))
    done = scorecard.attempt(path.parent, record["id"])
    assert done["runs"] == 2 and done["first_pass_s"] is not None
    assert any("√d_k" in d for d in done["diagnoses"])
    assert done["extension"]["passed"] and done["spoken"][question] == {"tries": 1, "right": True}
    text = path.parent.joinpath(scorecard.SCORECARD).read_text(encoding="utf-8")
    assert "mha-course" not in text  # no salt of the answer key in work/
    lines = scorecard.summary_lines(path.parent)
    assert lines[0].startswith("attention") and "1 passed" in lines[0]


def test_spacing_brings_failed_and_slow_problems_back_sooner(tmp_path):
    now = [1_000_000.0]
    plan = scorecard.schedule(tmp_path, ["fast", "slow", "failed"], clock=lambda: now[0])
    for problem, seconds in (("fast", 300.0), ("slow", 1500.0), ("failed", None)):
        record = scorecard.new_attempt(tmp_path, problem, "v", [])

        def attempted(r, seconds=seconds):
            r["first_pass_s"] = seconds
            r["extension"]["passed"] = seconds is not None

        scorecard.update(tmp_path, record["id"], attempted)
        assert (
            scorecard.rate(tmp_path, plan, record["id"], box_minutes=20)
            == {"fast": "easy", "slow": "hard", "failed": "again"}[problem]
        )
    due = {p: plan.state[p].due for p in ("fast", "slow", "failed")}
    assert due["failed"] < due["slow"] < due["fast"]
    assert scorecard.next_problem(plan) == "failed"


def test_progress_shows_the_scorecard(tmp_path):
    from autograder.progress import progress

    folder = notebook.folder(tmp_path)
    folder.mkdir()
    record = scorecard.new_attempt(folder, "rope", "cos_sin", ["rope_cache"])
    scorecard.update(folder, record["id"], lambda r: r.update(first_pass_s=754.0, runs=3))
    shown = []
    assert progress(tmp_path, echo=shown.append)
    card = shown[shown.index("\nmock interviews (interview/scorecard.json):") + 1 :]
    assert card == [
        "  rope               1 attempt(s), 1 passed, best 12:34, 0 diagnosis(es) seen, "
        "follow-ups 0/2"
    ]
