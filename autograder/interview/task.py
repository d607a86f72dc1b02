"""What a mock-interview problem is made of, and how an answer to one is graded.

A :class:`Problem` has several :class:`Variant` contracts (shapes, layouts, what is returned,
which convention a mask or a weight follows) and one follow-up :class:`Task` that extends it.
A task is graded by the course's own checks: each grader wraps the learner's function in an
adapter that turns the variant's contract into the interface the check expects, so a wrong
answer gets the check's own one-sentence diagnosis. The adapter asserts the variant's contract
first (what is returned, in which layout), with a sentence of its own: an answer written for the
course's notebook, pasted here, fails where the contracts differ.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from autograder.checks import CheckFailure

Grader = Callable[[Any], None]


@dataclass(frozen=True)
class Task:
    """One function (or class) to write: ``name``, its first line, its contract in Markdown and
    the graders that judge it. ``course_names`` are the names the course's checks give the
    function they call; a diagnosis names the learner's ``name`` instead. ``rewrites`` are
    ``(words, sentence)`` pairs: a diagnosis holding ``words`` speaks of the course's own
    convention, which this variant changes, and ``sentence`` says it in the variant's terms;
    ``replacements`` are ``(pattern, replacement)`` pairs that :func:`re.sub` applies inside any
    diagnosis (a dimension the variant moves, the check's arguments as the variant's, say)."""

    name: str
    signature: str
    contract: str
    graders: tuple[Grader, ...]
    course_names: tuple[str, ...] = ()
    rewrites: tuple[tuple[str, str], ...] = ()
    replacements: tuple[tuple[str, str | Callable[[re.Match], str]], ...] = ()


@dataclass(frozen=True)
class Variant:
    id: str
    task: Task


@dataclass(frozen=True)
class Problem:
    """A coding problem drawn from the course: ``taught`` says where, ``brief`` what is asked
    whatever the variant; ``spoken`` names questions of the interview notebook's bank (the
    coach's follow-ups, answered with a letter or a number); ``written`` and ``numeric`` name
    the interviewer's (:mod:`.written`, answered in words; :mod:`.numeric`, estimates)."""

    id: str
    title: str
    taught: str
    brief: str
    variants: tuple[Variant, ...]
    extension: Task
    spoken: tuple[str, ...]
    written: tuple[str, ...] = ()
    numeric: tuple[str, ...] = ()
    box_minutes: int = 20
    tags: tuple[str, ...] = field(default=())

    def variant(self, variant_id: str) -> Variant:
        return next(v for v in self.variants if v.id == variant_id)


def layout_moved(task: Task) -> Task:
    """``task`` for a variant that hands the learner the check's tensors in another layout: a
    diagnosis's input shapes are the check's, and say so."""
    note = (r" inputs \(", " inputs (shapes before this variant's layout) (")
    return replace(task, replacements=(*task.replacements, note))


def case_name(check: Callable) -> str:
    """What a check tests, in words: its name without ``check_``."""
    return check.__name__.removeprefix("check_").replace("_", " ")


def course_check(check: Callable[..., None], adapt: Callable[[Any], Any], *extra) -> Grader:
    """A grader running ``check`` on the adapted answer: its visible cases (seed 0), then its
    hidden ones (seed 1, ``thorough``), as a notebook's two test cells do. A failure carries
    ``visible``, which of the two failed (the interviewer says only that)."""

    def grade(answer) -> None:
        __tracebackhide__ = True
        for visible, kwargs in ((True, {"seed": 0}), (False, {"seed": 1, "thorough": True})):
            try:
                check(adapt(answer), *extra, **kwargs)
            except Exception as failure:  # a check's own code broken by the answer, too
                failure.visible = visible
                raise

    grade.case = case_name(check)
    return grade


def worded(grader: Grader, rewrites: tuple[tuple[str, str], ...]) -> Grader:
    """``grader`` whose diagnoses holding a rewrite's words are said as its sentence: for a task
    whose graders call the answer under different contracts (a flag off, then on), where one
    sentence for the whole task would speak of the wrong one."""

    def grade(answer) -> None:
        __tracebackhide__ = True
        try:
            grader(answer)
        except CheckFailure as failure:
            sentence = next((new for old, new in rewrites if old in str(failure)), None)
            if sentence is None:
                raise
            said = CheckFailure(sentence)
            said.visible = getattr(failure, "visible", True)
            raise said from None

    grade.case = getattr(grader, "case", "")
    return grade


@dataclass(frozen=True)
class Outcome:
    """A failed run: the diagnosis, and the case it failed in the interviewer's words (``visible
    case 2 of 3 (decoding)``, or ``a hidden case``)."""

    diagnosis: str
    case: str


def _said(task: Task, message: str) -> str:
    message = next((new for old, new in task.rewrites if old in message), message)
    for pattern, new in task.replacements:
        message = re.sub(pattern, new, message)
    for course_name in task.course_names:
        message = message.replace(f"`{course_name}`", f"`{task.name}`")
    return message


def outcome(task: Task, answer) -> Outcome | None:
    """How ``task``'s graders judge ``answer``: the first failure, or None when every one
    passes. The check's names for the function become the learner's own."""
    cases = len(task.graders)
    for number, grader in enumerate(task.graders, 1):
        case = f"visible case {number} of {cases}"
        if getattr(grader, "case", ""):
            case += f" ({grader.case})"
        try:
            grader(answer)
        except CheckFailure as failure:
            hidden = not getattr(failure, "visible", True)
            return Outcome(_said(task, str(failure)), "a hidden case" if hidden else case)
        except Exception as error:  # what the answer returned broke a check's own code
            first = (str(error).splitlines() or [""])[0][:160]
            hidden = not getattr(error, "visible", True)
            return Outcome(
                f"The tests could not use what `{task.name}` returned ({type(error).__name__}: "
                f"{first}): compare its return value with the contract.",
                "a hidden case" if hidden else case,
            )
    return None


def grade(task: Task, answer) -> str | None:
    """The first diagnosis of ``task``'s graders on ``answer``, or None when every one passes."""
    failed = outcome(task, answer)
    return failed.diagnosis if failed else None


def fail(message: str):
    __tracebackhide__ = True
    raise CheckFailure(message)


def one_tensor(value, name: str, what: str) -> torch.Tensor:
    """``value`` when it is a tensor; else the sentence that the contract returns one."""
    __tracebackhide__ = True
    if isinstance(value, tuple | list):
        fail(
            f"`{name}` returns a {type(value).__name__} of {len(value)}: in this variant it "
            f"returns {what} alone (the course's version returned more; read the contract)."
        )
    if not isinstance(value, torch.Tensor):
        fail(f"`{name}` should return {what}, a tensor, but it returned {type(value).__name__}.")
    return value


def tensors(value, name: str, what: Sequence[str]) -> tuple[torch.Tensor, ...]:
    """``value`` as a tuple of ``len(what)`` tensors; else the sentence that says what is
    returned."""
    __tracebackhide__ = True
    listed = ", ".join(what)
    if not isinstance(value, tuple | list) or len(value) != len(what):
        kind = type(value).__name__
        got = f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"
        if isinstance(value, tuple | list):
            got += f" of {len(value)}"
        fail(f"`{name}` should return the tuple ({listed}), but it returned {got}.")
    for item, label in zip(value, what, strict=True):
        if not isinstance(item, torch.Tensor):
            fail(f"`{name}` should return ({listed}); its `{label}` is {type(item).__name__}.")
    return tuple(value)


def shaped(t: torch.Tensor, shape: Sequence[int], name: str, what: str, layout: str) -> None:
    """Fail unless ``t`` has ``shape``; ``layout`` is the variant's word for it."""
    __tracebackhide__ = True
    if tuple(t.shape) != tuple(shape):
        fail(
            f"`{name}` returned {what} of shape {tuple(t.shape)} where this variant's layout "
            f"{layout} gives {tuple(shape)}."
        )
