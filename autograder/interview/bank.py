"""The problem bank, the variant draw, and the spoken follow-ups.

Spoken follow-ups are questions of the interview notebook's own bank: their text is read from
its release notebook (the Markdown above each answer cell, hints left out) and their answers are
graded by that notebook's ``check_choice`` and ``check_number``, so no answer key is written
anywhere else.
"""

from __future__ import annotations

import json
import random
import re

from autograder import nbcell, paths

from .problems_attention import ATTENTION, CAUSAL_MASK
from .problems_block import DROPOUT, PRE_LN_BLOCK
from .problems_cache import MLA, SINK_CACHE, TILED_BACKWARD
from .problems_convert import MHA_TO_GQA
from .problems_cross import CROSS_ATTENTION
from .problems_debug import DEBUG_MODULE
from .problems_decode import LEFT_PADDING, SAMPLING
from .problems_gqa import GQA_DECODE, REPEAT_KV
from .problems_kernels import ONLINE_MERGE, ROPE
from .problems_layers import CAUSAL_MHA, PACKED_PORT
from .problems_long_context import SLIDING_WINDOW
from .problems_positions import ALIBI, RMSNORM, ROPE_SCALING
from .problems_serving import PAGED_ATTENTION, SPECULATIVE
from .task import Problem

PROBLEMS: dict[str, Problem] = {
    p.id: p
    for p in (
        ATTENTION,
        CAUSAL_MASK,
        CAUSAL_MHA,
        CROSS_ATTENTION,
        DROPOUT,
        PRE_LN_BLOCK,
        REPEAT_KV,
        GQA_DECODE,
        MHA_TO_GQA,
        ROPE,
        ONLINE_MERGE,
        SLIDING_WINDOW,
        PACKED_PORT,
        RMSNORM,
        ROPE_SCALING,
        ALIBI,
        SINK_CACHE,
        MLA,
        TILED_BACKWARD,
        SAMPLING,
        LEFT_PADDING,
        DEBUG_MODULE,
        PAGED_ATTENTION,
        SPECULATIVE,
    )
}


def draw_variant(problem: Problem, seed: int, previous: str | None = None) -> str:
    """A variant of ``problem`` drawn with ``seed``, never the ``previous`` attempt's."""
    choices = [v.id for v in problem.variants if v.id != previous] or [problem.variants[0].id]
    return random.Random(f"{problem.id}:{seed}").choice(choices)


def draw_spoken(problem: Problem, seed: int, count: int = 2) -> list[str]:
    """``count`` of ``problem``'s spoken questions, drawn with ``seed``."""
    asked = list(problem.spoken)
    random.Random(f"{problem.id}:spoken:{seed}").shuffle(asked)
    return asked[: min(count, len(asked))]


def draw_follow_ups(problem: Problem, seed: int) -> tuple[list[str], list[str]]:
    """The interviewer's follow-ups of ``problem``, drawn with ``seed``: one question answered
    in words and one estimate."""
    draw = random.Random(f"{problem.id}:follow-ups:{seed}")
    return [draw.choice(problem.written)], [draw.choice(problem.numeric)]


def interview_notebook() -> str:
    """The id of the course's interview notebook (its number changes as notebooks are added)."""
    return next(i for i in paths.notebook_ids() if i.endswith("_interview_prep"))


def _markdown_before_answers() -> dict[str, str]:
    """answer variable -> the Markdown cell just above the answer cell that sets it."""
    path = paths.release_notebook(interview_notebook())
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    found, markdown = {}, ""
    for cell in cells:
        source = "".join(cell.get("source", ""))
        if cell["cell_type"] == "markdown":
            markdown = source
        elif nbcell.is_answer(cell):
            for name in re.findall(r"^(answer_\w+)\s*=", source, flags=re.MULTILINE):
                found.setdefault(name, markdown)
    return found


def question_text(question: str) -> str:
    """The bank's text of ``question``: its section's title, then the question, without hints."""
    text = _markdown_before_answers()[f"answer_{question}"]
    text = re.sub(r"<details>.*?</details>", "", text, flags=re.DOTALL)
    headings = list(re.finditer(r"^#+ (?:[\d.]+ · )?(.*)$", text, flags=re.MULTILINE))
    if not headings:
        return text.strip()
    title, rest = headings[-1].group(1).strip(), text[headings[-1].end() :].strip()
    return f"**{title}.** {rest}" if title else rest


def is_choice(question: str) -> bool:
    from autograder.checks.nb10_interview import CHOICES

    return question in CHOICES
