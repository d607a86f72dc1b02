"""Claims in the notebooks' prose and the interview's statements that an expert reader once
found wrong (issue 47), held here: a number is recomputed from the course's own oracle, an
attribution is read where the statement prints it. Prose drifts from the code that grades it;
these tests tie the two together.
"""

from __future__ import annotations

import math
import re

import pytest
import torch

from autograder import paths
from autograder.checks import _masks, nb08_alibi, nb08_rope_scaling, nb10_interview
from autograder.interview.bank import PROBLEMS
from autograder.tools.nb10_deck import DECK

SOLUTIONS = paths.REPO_ROOT / "solutions"


def _source(notebook: str) -> str:
    return (SOLUTIONS / notebook / f"{notebook}.py").read_text()


def _paragraph(text: str, opening: str, until: str = "\n#\n") -> str:
    """The markdown of a jupytext source from ``opening`` to the paragraph's end (``until``)."""
    start = text.index(opening)
    end = text.find(until, start)
    return " ".join(line.lstrip("# ") for line in text[start:end].splitlines())


def test_the_scaling_plot_caption_states_the_dynamic_ntk_scale_it_plots():
    """08 §5: at factor 4 and four times the trained length, dynamic NTK slows the slowest pair
    by its scale, 13 times, not by the factor."""
    source = _source("08_long_context")
    caption = _paragraph(source, "What each one does to the frequencies")
    theta, _ = nb08_rope_scaling.expected("default", 128, 10000.0, 4.0, 4096, None, 32.0, 1.0)
    dynamic, _ = nb08_rope_scaling.expected("dynamic", 128, 10000.0, 4.0, 4096, 16384, 32.0, 1.0)
    slowdown = (theta[-1] / dynamic[-1]).item()
    assert round(slowdown) == 13
    assert re.search(rf"\b{round(slowdown)}\$? times", caption)
    assert "slows the slowest 4×" not in caption
    plotted = "rope_type, 128, factor=4.0, original_max_position=4096, seq_len=16384"
    assert plotted in source[source.index("What each one does to the frequencies") :]


def test_notebook_08_tells_no_rule_the_grader_does_not_apply():
    """08 Ex5 and Ex6: functions of Python numbers may build their tensor from a Python list
    (the catalogues' ``params_python`` and ``slopes_python_list`` verify under the replay)."""
    source = _source("08_long_context")
    assert "does not accept a tensor written from a list" not in source
    for exercise in ("### Exercise 5 ", "### Exercise 6 "):
        statement = _paragraph(source, exercise, until="\n# %%")
        assert "accept" in statement and "list" in statement, exercise


def test_qk_norm_sizes_follow_each_model():
    """02 §12: OLMo 2 normalises whole projections, (nh + nkv)·hs scales; Qwen 3 and Gemma 3 one
    head, 2·hs."""
    note = _paragraph(_source("02_multi_head_attention"), "**A note on QK-norm.**")
    olmo = note[note.index("OLMo 2 normalises") : note.index("Either way")]
    assert "`(nh + nkv)·hs`" in olmo
    per_head = note[note.index("Qwen 3 and Gemma 3 normalise") :].split(". ")[0]
    assert "`2·hs`" in per_head and "OLMo" not in per_head


def test_the_running_merge_state_is_flashattention_2s_and_points_to_online_softmax():
    """Interview ``online_merge``: the un-normalised (acc, m, l) state is FlashAttention-2's; the
    statement points to the section that teaches the online softmax."""
    problem = PROBLEMS["online_merge"]
    running = next(v for v in problem.variants if v.id == "running").task.contract
    assert "FlashAttention-2's running state" in running and "FlashAttention-1" not in running
    section = re.fullmatch(r"notebook 06 §(\d+)", problem.taught).group(1)
    assert re.search(rf"^# ## {section} · Online softmax", _source("06_gpu_attention"), re.M)


def test_no_ring_buffer_option_is_a_shipped_design_marked_wrong():
    """10 §5.9: shifting the window every step is what Hugging Face's static sliding cache does,
    so it cannot be a wrong option of "Reading the ring"."""
    question = _paragraph(_source("10_interview_prep"), "**Reading the ring.**", until="\n# %%")
    assert not re.search(r"\b(shift|roll)(s|ed)?\b", question, re.I)


def test_the_long_context_levers_beyond_the_formulas_are_named():
    """08 §5: the base raised in training (ABF, Llama 3's 500,000), LongRoPE and Llama 4's NoPE
    layers, the levers interviews ask about besides the three formulas."""
    levers = _paragraph(_source("08_long_context"), "**Other levers, named for the interview.**")
    for name in ("`rope_theta`", "500,000", "LongRoPE", "iRoPE", "NoPE"):
        assert name in levers, name


def _mpt_slopes(n_heads: int, alibi_bias_max: int = 8) -> list[float]:
    """MPT's ``gen_slopes``: the next power of two, its odd-indexed slopes, then the even ones."""
    n = 2 ** math.ceil(math.log2(n_heads))
    m = [2 ** -(alibi_bias_max * (i + 1) / n) for i in range(n)]
    return (m[1::2] + m[0::2])[:n_heads] if n != n_heads else m


def test_alibi_production_forms_give_the_papers_attention():
    """08 §6: MPT's slopes are the paper's, in order; BLOOM's bias m·j gives the same softmax as
    −m(p − j) under the causal mask (a row shifted by one number)."""
    for n in (1, 3, 5, 8, 12, 40, 112):
        assert _mpt_slopes(n) == pytest.approx(nb08_alibi.slopes(n), rel=1e-12), n
    T, m = 6, torch.tensor(nb08_alibi.slopes(4), dtype=torch.float64)[:, None, None]
    scores = torch.randn(4, T, T, dtype=torch.float64)
    p, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    future = (j > p).expand(4, T, T)
    paper = (scores - m * (p - j)).masked_fill(future, -math.inf).softmax(-1)
    bloom = (scores + m * j).masked_fill(future, -math.inf).softmax(-1)
    torch.testing.assert_close(bloom, paper)
    forms = _paragraph(_source("08_long_context"), "**The forms real code uses.**")
    assert "$m_h \\cdot j$" in forms and "`gen_slopes`" in forms and "`alibi_slopes`" in forms


def test_hybrid_cache_example_adds_one_estimate_per_kind_of_layer():
    """08 §7: Gemma 3 27B's 62 layers, one global in six, are 52 local and 10 global; at 128k
    tokens its cache is the stated 10.4 GiB against 62 GiB with every layer global."""
    globals_ = sum(1 for layer in range(62) if (layer + 1) % 6 == 0)
    assert (62 - globals_, globals_) == (52, 10)
    per_layer = 2 * 16 * 128 * 2  # K and V, 16 heads of 128, bf16: bytes per position
    hybrid = (52 * 1024 + 10 * 131072) * per_layer / 2**30
    note = _paragraph(_source("08_long_context"), "**Hybrid caches.**")
    assert f"about {hybrid:.1f} GiB" in note and f"{62 * 131072 * per_layer // 2**30} GiB" in note


def _option(question: str, letter: str) -> str:
    """Option ``letter`` of the notebook 10 question whose markdown opens with ``question``."""
    text = _paragraph(_source("10_interview_prep"), question, until="\n# %%")
    return re.search(rf"- \({letter}\) (.*?)(?= - \(|$)", text).group(1)


def test_every_subsection_of_09_is_a_level_three_heading():
    """10 §5.9 and §5.10 lost jupytext's ``# `` and rendered one level up, beside §5 and §6."""
    source = _source("10_interview_prep")
    assert not re.search(r"^###? \d", source, re.M)
    for number in ("5.9", "5.10"):
        assert re.search(rf"^# ### {re.escape(number)} · ", source, re.M), number


def test_the_renumbering_aside_follows_the_last_rope_cache_option():
    """10 §5.6 is read aloud as a follow-up: an aside between two options splits the list."""
    text = _paragraph(_source("10_interview_prep"), "### 5.6 · RoPE and the cache", "\n# %%")
    assert text.index("- (d)") < text.index("renumber")


def test_the_window_cache_row_points_to_where_notebook_08_counts_it():
    """10 §7: the rolling cache's bytes are Exercise 8 of notebook 08 §7."""
    row = next(
        line
        for line in _source("10_interview_prep").splitlines()
        if line.startswith("# | `test_numbers_window_cache_bytes`")
    )
    assert "notebook 08 §7" in row
    assert re.search(r"^# ## 7 · What a token costs", _source("08_long_context"), re.M)


def test_dynamic_ntk_is_said_with_the_scale_it_uses():
    """10 §5.9 and its flashcard gave static NTK's base only; dynamic NTK (the graded exercise of
    08) puts s·L_now/L − (s − 1) in place of s."""
    s, L, now, hs = 4.0, 4096, 16384, 128
    dynamic, _ = nb08_rope_scaling.expected("dynamic", hs, 10000.0, s, L, now, 32.0, 1.0)
    scale = s * now / L - (s - 1)
    ntk = 10000.0 * scale ** (hs / (hs - 2))
    theta = ntk ** -(torch.arange(0, hs, 2, dtype=torch.float64) / hs)
    torch.testing.assert_close(dynamic, theta)
    formula = "s·L_now/L − (s − 1)"
    assert formula in _option("**Stretching RoPE.**", "b")
    card = next(card for card in DECK if card.id == "rope_scaling")
    assert formula in card.back


def test_keys_cached_at_an_older_base_break_the_relative_property():
    """10 §5.9, dynamic NTK and the cache: a key rotated at the old base and a query at the new
    one score by more than their distance, so the cache would need re-rotating."""

    def rotate(x, pos, inv_freq):  # x (hs,), pairs of neighbouring features
        angle = pos * inv_freq  # (hs/2,)
        a, b = x[0::2], x[1::2]
        return torch.stack(
            (a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()), -1
        )

    hs, gen = 64, torch.Generator().manual_seed(0)
    old, _ = nb08_rope_scaling.expected("dynamic", hs, 10000.0, 4.0, 4096, 4096, 32.0, 1.0)
    new, _ = nb08_rope_scaling.expected("dynamic", hs, 10000.0, 4.0, 4096, 8192, 32.0, 1.0)
    q, k = torch.randn(2, hs, generator=gen, dtype=torch.float64)  # (hs,) each
    same = rotate(q, 6000, new).flatten() @ rotate(k, 5000, new).flatten()
    shifted = rotate(q, 1000, new).flatten() @ rotate(k, 0, new).flatten()
    mixed = rotate(q, 6000, new).flatten() @ rotate(k, 5000, old).flatten()
    torch.testing.assert_close(same, shifted)  # one base: the distance alone counts
    assert not torch.isclose(mixed, same, rtol=1e-3)
    option = _option("**Dynamic NTK and the cache.**", "d")
    assert "base they were written at" in option and "re-rotating" in option


def test_masking_after_the_softmax_lets_the_future_in():
    """10 §2.10: zeroing the future's weights after the softmax still lets the future scores
    set every row's sum, so the output and its gradients depend on the future."""
    T, gen = 5, torch.Generator().manual_seed(0)
    scores = torch.randn(T, T, generator=gen, dtype=torch.float64, requires_grad=True)
    v = torch.randn(T, 3, generator=gen, dtype=torch.float64)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    after = (scores.softmax(-1) * causal) @ v  # (T, 3)
    after[0].sum().backward()
    assert scores.grad[0, 1:].abs().min() > 0  # query 0 depends on every future score
    option = _option("### 2.10 · Masking after the softmax", "b")
    assert "future scores" in option and "reach the output" in option
    note = nb10_interview.CHOICES["mask_after_softmax"].notes["b"]
    assert "leaks into the output and its gradients" in note


def test_decoding_from_the_latent_is_near_compute_bound():
    """10 §5.9, the follow-up to 08 §4's table: absorbed MLA decoding does about 242 FLOPs per
    byte of cache, near the ~300 an H100 needs; GQA-8 does 8 and MHA 1."""
    mla = 128 * 2 * (576 + 512) / (576 * 2)
    gqa = 64 * 2 * (128 + 128) / (2 * 8 * 128 * 2)
    assert (round(mla), gqa, round(989e12 / 3.35e12, -2)) == (242, 8, 300)
    option = _option("**What decoding from the latent costs.**", "a")
    assert f"About {round(mla)} FLOPs per byte" in option and "roughly 300" in option


def test_the_sliding_window_statement_names_the_off_by_one():
    """Interview ``sliding_window``: Mistral's paper counts p − W … p, one key more than the W
    keys Hugging Face, vLLM and the course's oracle count; the statement says so."""
    allowed = _masks.window_mask(6, 6, 3)  # (T, S): True = may attend
    assert allowed.sum(-1).tolist() == [1, 2, 3, 3, 3, 3]
    contract = PROBLEMS["sliding_window"].variants[0].task.contract
    assert "p − W + 1 … p" in contract and "differ by one" in contract
