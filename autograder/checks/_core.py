"""Shared machinery of the checks: calling learner code safely, comparing, explaining.

Shape legend (used by every checks module): ``B`` batch, ``T`` query length, ``S`` key/value length,
``C`` = d_model, ``nh`` heads, ``hs`` = C // nh (head size), ``d_k`` / ``d_v`` key / value width.

Every failure is a :class:`CheckFailure` whose message is one sentence a beginner can act on; it is
shown to learners, so it never prints hidden inputs, only their shapes.
"""

from __future__ import annotations

import contextlib
import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NoReturn

import torch

from autograder.kernel.recorder import invoke
from autograder.torch_helpers import operator_packet

#: ``(atol, rtol)`` of a result against the float64 oracle, by the dtype it was computed in.
#: float64 gets float32's: a learner may compute in float32 (the default dtype) and cast back.
#: Half precision keeps 11 (float16) or 8 (bfloat16) significant bits: its entries are what a
#: correct computation that accumulates in float32 reaches. A check that needs another margin
#: says why where it passes its own.
TOLERANCE = {
    torch.float64: (1e-5, 1e-4),
    torch.float32: (1e-5, 1e-4),
    torch.float16: (2e-3, 1e-2),
    torch.bfloat16: (2e-2, 1e-2),
}
ATOL, RTOL = TOLERANCE[torch.float32]
#: Recognising a result rebuilt by another route than the learner's code took: a known-wrong
#: variant (:func:`first_match`), or an oracle that computes the answer another way. Looser
#: than :data:`TOLERANCE`, and still far tighter than any two variants differ.
LOOSE = (1e-4, 1e-3)

# Substrings of PyTorch error messages -> what the learner should look at.
_ERROR_HINTS = {
    "Dimension out of range": "index dimensions from the end (-1, -2) so any number of leading "
    "dimensions works",
    "view size is not compatible": "after a transpose the tensor is not contiguous, so use "
    ".reshape(...) or .contiguous().view(...)",
    "must match the size of tensor": "two tensors do not broadcast, so check which dimensions you "
    "transpose and that reductions use keepdim=True",
    "cannot be multiplied": "the matmul shapes do not fit, so check which dimensions you transpose",
    "expected scalar type": "mixing dtypes, so create new tensors with dtype=x.dtype",
    "found dtype": "mixing dtypes, so create new tensors with dtype=x.dtype",
    "before Module.__init__() call": "call super().__init__() first in __init__",
}


class CheckFailure(AssertionError):
    """A check found a mistake; the message is one learner-facing sentence."""

    def _render_traceback_(self) -> list[str]:
        """What IPython shows: the sentence, without the checks' frames (see ``_notebook``)."""
        from autograder.checks._notebook import render

        return render(self)


# Ends a message that blames an earlier, unfinished exercise: the test cell's output keeps saying
# so after that exercise is done, until the cell runs again.
RUN_AGAIN = "then run this test cell again (its message stays until you do)"


class NotWrittenYet(CheckFailure):
    """The exercise a check reached is still its stub (or its answer still unset).

    ``check`` groups these cells on one line ("exercise not written yet") by this exception's
    name in the cell's error, not by reading the sentence.
    """


def fail(message: str) -> NoReturn:
    """Raise :class:`CheckFailure` without the internal frames that led here."""
    __tracebackhide__ = True
    raise CheckFailure(message)


def not_written(message: str) -> NoReturn:
    """Raise :class:`NotWrittenYet`: ``message`` says which exercise to write first."""
    __tracebackhide__ = True
    raise NotWrittenYet(message)


def make_generator(seed: int) -> torch.Generator:
    """A CPU generator seeded with ``seed`` so every check is deterministic."""
    return torch.Generator().manual_seed(seed)


def randn(gen: torch.Generator, *shape: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Standard normal values of ``shape`` drawn from ``gen``."""
    return torch.randn(*shape, generator=gen, dtype=dtype)


def randint(gen: torch.Generator, low: int, high: int) -> int:
    """One integer in ``[low, high]`` drawn from ``gen``."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def few_blocks(block: int, *lengths: int, most: int = 8) -> int:
    """``block``, raised until no length splits into more than ``most`` blocks: a random tiled
    case keeps several blocks and a ragged last one, without the thousands of tiles a block of
    1 or 2 on 40 positions gives a loop over query and key blocks (each tile's operators are
    recorded and recomputed by the grader)."""
    return max(block, *(-(-n // most) for n in lengths))


def fmt_shape(shape: Sequence[int]) -> str:
    """``(2, 3)`` for a shape, ``(3,)`` for a vector, ``()`` for a scalar."""
    return str(tuple(int(n) for n in shape))


def describe(args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None) -> str:
    """Describe call arguments by shape and dtype only, never by value."""

    def one(value: Any) -> str:
        if isinstance(value, torch.Tensor):
            return f"{fmt_shape(value.shape)} {str(value.dtype).removeprefix('torch.')}"
        if type(value) in (tuple, list):
            return "(" + ", ".join(one(v) for v in value) + ")"
        if isinstance(value, torch.nn.Module):
            return f"a {type(value).__name__}"
        return repr(value)

    parts = [one(a) for a in args]
    parts += [f"{k}={one(v)}" for k, v in (kwargs or {}).items() if v is not None]
    return ", ".join(parts) or "no arguments"


def _error_hint(text: str) -> str:
    return next((hint for key, hint in _ERROR_HINTS.items() if key in text), "")


def run_here(fn: Callable, args: tuple, kwargs: dict, invoke: Callable, patches: dict) -> tuple:
    """``invoke(fn, args, kwargs)`` in this process, with ``patches`` applied: how a call of
    learner code runs everywhere but in the grader's verification."""
    from autograder.kernel.server import patched

    with patched(patches):
        return invoke(fn, args, kwargs)


_call_hook: Callable[..., tuple] = run_here


@contextlib.contextmanager
def calls_through(hook: Callable[..., tuple]) -> Iterator[None]:
    """Inside this block every call of learner code (:func:`call`) is ``hook(fn, args, kwargs,
    invoke, patches)``, returning the call's outcome. The grader's verifier
    (``autograder.grader.verify.remote``) sets it; the checks import nothing of the grader."""
    global _call_hook
    outer, _call_hook = _call_hook, hook
    try:
        yield
    finally:
        _call_hook = outer


def call(
    fn: Callable[..., Any],
    name: str,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    hint: str = "",
    stub_inside: str = "",
    patches: Mapping[str, Any] | None = None,
) -> Any:
    """Call learner code with warnings silenced; turn any exception into a :class:`CheckFailure`.

    ``hint`` (what to look at) is added to the message when the call fails on shapes (a
    ``RuntimeError`` or ``IndexError``); otherwise a hint matching PyTorch's message, if any.
    ``stub_inside`` is the message when the call reached an unfinished ``__init__`` or
    ``forward`` of another exercise (a class the function builds). ``patches`` maps dotted names
    to the values they return during the call (``{"torch.cuda.is_available": True}``), in the
    process where the learner's code runs.
    This is the one place where checks run learner code: during classroom verification the
    grader's hook (:func:`calls_through`) sends the call to the learner's kernel and recomputes
    what comes back.
    """
    __tracebackhide__ = True
    outcome = _call_hook(fn, tuple(args), dict(kwargs or {}), invoke, dict(patches or {}))
    if outcome[0] == "ok":
        return outcome[1]
    if outcome[0] == "check_failure":
        raise CheckFailure(outcome[1]) from None
    _, error_type, text, flags = outcome
    if stub_inside and flags.get("stub") and flags.get("stub_depth", 0) > 2:
        if flags.get("stub_where") in ("__init__", "forward"):
            raise CheckFailure(stub_inside) from None
    if flags.get("stub"):
        raise NotWrittenYet(
            f"`{name}` is not implemented yet: replace `raise NotImplementedError()` with your "
            "code."
        ) from None
    first_line = (text.strip().splitlines() or [""])[0][:160]
    detail = f" ({first_line})" if first_line else ""
    advice = (hint if flags.get("shape_error") else "") or _error_hint(text)
    advice = f": {advice}" if advice else ""
    raise CheckFailure(
        f"`{name}` raised {error_type}{detail} on inputs {describe(args, kwargs)}{advice}."
    ) from flags["exception"]


def call_integer(
    fn: Callable[..., Any],
    name: str,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
) -> int:
    """:func:`call` learner code that counts (parameters, bytes): fail unless it returns an int."""
    __tracebackhide__ = True
    got = call(fn, name, args, kwargs)
    if not isinstance(got, numbers.Integral) or isinstance(got, bool):
        fail(f"`{name}` should return an int, got {type(got).__name__}: use // or int(...).")
    return int(got)


def expect_tensor(value: Any, name: str, what: str = "a tensor") -> torch.Tensor:
    """Fail unless ``value`` is a tensor."""
    __tracebackhide__ = True
    if not isinstance(value, torch.Tensor):
        fail(f"`{name}` should return {what}, but it returned {type(value).__name__}.")
    return value


def expect_pair(value: Any, name: str, first: str, second: str) -> tuple[torch.Tensor, ...]:
    """Fail unless ``value`` is a pair of tensors ``(first, second)``."""
    __tracebackhide__ = True
    if not isinstance(value, tuple | list) or len(value) != 2:
        fail(f"`{name}` should return a pair `({first}, {second})`, got {type(value).__name__}.")
    a = expect_tensor(value[0], name, f"a tensor as `{first}` (first item)")
    b = expect_tensor(value[1], name, f"a tensor as `{second}` (second item)")
    return a, b


def expect_shape(
    t: torch.Tensor, shape: Sequence[int], what: str, inputs: str, hint: str = ""
) -> None:
    """Fail unless ``t`` has ``shape``; ``what`` names the tensor, ``inputs`` the call."""
    __tracebackhide__ = True
    if tuple(t.shape) != tuple(shape):
        advice = f": {hint}" if hint else ""
        fail(
            f"{what} has shape {fmt_shape(t.shape)} but should have {fmt_shape(shape)} "
            f"for inputs {inputs}{advice}."
        )


def expect_dtype(t: torch.Tensor, dtype: torch.dtype, what: str) -> None:
    """Fail unless ``t`` keeps the input ``dtype``."""
    __tracebackhide__ = True
    if t.dtype != dtype:
        fail(
            f"{what} is {t.dtype} for {dtype} inputs: keep the input dtype (do not call "
            ".float()/.double(), and create helper tensors with dtype=x.dtype)."
        )


def expect_unmodified(
    before: Sequence[torch.Tensor], after: Sequence[torch.Tensor], name: str
) -> None:
    """Fail when learner code changed one of its input tensors in place."""
    __tracebackhide__ = True
    for old, new in zip(before, after, strict=True):
        if not torch.equal(old, new):
            fail(
                f"`{name}` changed its input in place (for example `x -= ...`, `x.exp_()` or "
                "`masked_fill_`): compute into a new tensor instead."
            )


def close(actual: torch.Tensor, expected: torch.Tensor, atol=ATOL, rtol=RTOL) -> bool:
    """Same shape and equal within tolerance (NaN equals nothing)."""
    if actual.shape != expected.shape:
        return False
    return torch.allclose(actual.to(expected.dtype), expected, atol=atol, rtol=rtol)


def first_match(actual: torch.Tensor, variants: Mapping[str, torch.Tensor]) -> str | None:
    """The diagnosis of the first known-wrong variant that ``actual`` equals, if any."""
    return next((why for why, t in variants.items() if close(actual, t, *LOOSE)), None)


def rows_sum_to_one(weights: torch.Tensor, dim: int = -1) -> bool:
    """True when every slice along ``dim`` sums to 1."""
    sums = weights.sum(dim)
    return torch.allclose(sums, torch.ones_like(sums), atol=1e-4)


def has_nan_or_inf(t: torch.Tensor) -> bool:
    """True when ``t`` holds any NaN or infinity."""
    return not bool(torch.isfinite(t).all())


SOFTMAX_OVER_QUERIES = (
    "Your weights' rows do not sum to 1 along the last dimension: softmax is probably taken over "
    "the query axis (dim=-2) instead of the key axis (dim=-1)."
)


def mixed_mask(gen: torch.Generator, *shape: int) -> torch.Tensor:
    """Random bool mask in which every row (last dim, size ≥ 2) has a True and a False."""
    r = torch.rand(*shape, generator=gen)
    rank = r.argsort(-1).argsort(-1)  # position of each entry when its row is sorted
    return ((r < 0.5) | (rank == 0)) & (rank != shape[-1] - 1)


def check_mask_use(
    weights: torch.Tensor, mask: torch.Tensor, why_masked_weight: Callable[[], str | None]
) -> None:
    """Fail on the classic masking mistakes, judged from the weights ``(..., T, S)`` alone.

    ``why_masked_weight`` explains why masked keys got weight (say, an inverted mask), or
    returns None for the general advice.
    """
    __tracebackhide__ = True
    allowed = mask.expand_as(weights)  # (..., T, S)
    empty = ~allowed.any(-1)  # (..., T): queries with no allowed key
    dead = weights[empty]  # (n, S)
    if has_nan_or_inf(dead):
        fail(
            "A query row with no allowed key gave NaN: softmax over a row of -inf is 0/0, so set "
            "the weights of rows where mask.any(-1) is False to 0."
        )
    if dead.numel() and close(dead, torch.full_like(dead, 1 / weights.shape[-1])):
        fail(
            "A query row with no allowed key got uniform weights 1/S: a large finite fill value "
            "(like -1e9) makes all keys tie, so set the weights of such rows to 0."
        )
    if (dead != 0).any():
        fail("A query row with no allowed key must get all-zero weights.")
    if has_nan_or_inf(weights):
        fail(
            "Your weights contain NaN although the query has an allowed key: multiplying -inf by "
            "a 0 in the mask gives NaN, so use scores.masked_fill(~mask, float('-inf'))."
        )
    if (weights[~allowed] != 0).any():
        fail(
            why_masked_weight()
            or "Masked positions still get weight: set masked scores to float('-inf') before the "
            "softmax (filling with 0, or multiplying the scores by the mask, leaves them weight)."
        )
    if not rows_sum_to_one(weights[~empty]):
        fail(
            "Your masked weights are 0 but the rows no longer sum to 1: the mask was applied after "
            "the softmax; apply it to the scores before the softmax instead."
        )


def find_calls(names: set[str], needles: Sequence[str]) -> list[str]:
    """The recorded names that call one of ``needles``: a function by its last component (after
    the last '.' or '::'), an operator by its name whatever overload the call named
    (``torch._ops.aten._softmax.default`` calls ``_softmax``)."""
    found = (n for n in names if _called(n) in needles)
    return sorted(found, key=lambda n: ("::" in n, n))


#: What ``nn.MultiheadAttention`` runs: all of multi-head attention in one function.
PACKAGED_MHA = ("multi_head_attention_forward",)


def calls_packaged_mha(names: set[str]) -> bool:
    """Whether the recorded ``names`` (:func:`record_torch_calls`) include a call of
    ``F.multi_head_attention_forward``: exercises that build multi-head attention refuse it."""
    return bool(find_calls(names, PACKAGED_MHA))


def by_arithmetic(names: set[str], name: str) -> None:
    """Fail when a formula (a count, FLOPs, bytes) ran PyTorch: ``names`` are what
    :func:`record_torch_calls` saw during its calls. A module built on the meta device, a FLOP
    counter or a dispatch mode of one's own would measure the answer instead of deriving it."""
    __tracebackhide__ = True
    if any("::" in n for n in names):
        fail(
            f"`{name}` creates tensors (or builds a module): count with integer arithmetic so it "
            "answers instantly for any size."
        )


_WIDE = 0x57A7E  # the wide draws' generator is not the check's own


def wide_draws(seed: int, thorough: bool, count: int, *ranges: tuple[int, int]) -> list[tuple]:
    """In a thorough run, ``count`` tuples of integers (one per ``(low, high)`` range), wider than
    a check's usual sizes, from a generator of their own (the check's other draws stay as they
    were). In the grader, a check whose calls of learner code pass only Python numbers runs once
    more with a secret ``seed`` and ``thorough`` on (``autograder.grader.verify.fresh``): there
    they are configurations no learner can know in advance, so a table of the public ones'
    answers fails."""
    if not thorough:
        return []
    gen = make_generator(seed ^ _WIDE)
    return [tuple(randint(gen, low, high) for low, high in ranges) for _ in range(count)]


def _called(name: str) -> str:
    packet = operator_packet(name)
    return packet.partition("::")[2] if packet else name.replace("::", ".").rsplit(".", 1)[-1]
