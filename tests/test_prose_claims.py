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
from autograder.checks import nb08_alibi, nb08_rope_scaling
from autograder.interview.bank import PROBLEMS

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
    """09 §5.9: shifting the window every step is what Hugging Face's static sliding cache does,
    so it cannot be a wrong option of "Reading the ring"."""
    question = _paragraph(_source("09_interview_prep"), "**Reading the ring.**", until="\n# %%")
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
