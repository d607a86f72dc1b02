"""A verified value is a property of the learner's function, not of one record.

After a check passes on the kernel's record, the grader runs it again on inputs the kernel never
saw (:mod:`autograder.grader.verify.fresh`), each call answered by replaying its record there.
These tests hold the three outcomes: right code verifies without a second trip to the kernel,
constants are counted and refuted, and a record whose operators depend on its inputs' values is
withheld for a person (``unverified``), never refuted or verified.
"""

from __future__ import annotations

import torch
from hostile.threads import HIDE

from autograder.checks.nb01_attention import check_softmax_values
from autograder.grader.verify import cells

SOURCE = "check_softmax_values(softmax, seed=1, thorough=True)"


def _softmax(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


def _verify(fn, source=SOURCE) -> cells.Verdict:
    return cells.verify_cell(source, cells.InProcessKernel({"softmax": fn}))


def test_right_code_verifies_and_the_new_inputs_never_reach_the_kernel():
    seen = []

    def softmax(x, dim=-1):
        seen.append(x.clone())
        return _softmax(x, dim)

    assert _verify(softmax).status == "verified"
    calls = len(seen)
    with cells.stock_state():
        check_softmax_values(softmax, seed=1, thorough=True)
    assert len(seen) == 2 * calls  # the direct run's calls: as many as the kernel answered
    assert all(torch.equal(a, b) for a, b in zip(seen[:calls], seen[calls:], strict=True))


def test_one_element_constants_count_towards_the_literal_budget():
    def softmax(x, dim=-1):
        out = _softmax(x, dim)
        for i in range(40):  # forty distinct one-element constants, each times zero
            out = out + 0 * torch.tensor(float(i) + 0.5, dtype=x.dtype)
        return out

    verdict = _verify(softmax)
    assert verdict.status == "refuted" and "literal numbers" in verdict.message, verdict


def test_the_answer_to_the_kernels_inputs_alone_is_refuted_on_new_inputs():
    """torch.softmax on another thread, spelled back in 26 distinct literals (within the
    budget): right on the inputs the kernel saw, and only there."""
    learner: dict = {}
    exec(HIDE, learner)
    hidden = learner["_hide"](lambda x, dim=-1: torch.softmax(x, dim), "thread", spell=True)
    verdict = _verify(hidden, "check_softmax_values(softmax)")
    assert verdict.status == "refuted" and verdict.message.startswith("on new inputs"), verdict


def test_a_branch_on_an_input_value_is_withheld_for_a_person():
    def softmax(x, dim=-1):
        if x.max().item() > 1e4:  # a branch on the values: another input may take the other
            x = x.double()
        return _softmax(x, dim)

    verdict = _verify(softmax)
    assert verdict.status == "unverified" and "replay" in verdict.message, verdict


def test_a_shape_that_depends_on_input_values_is_withheld_for_a_person():
    def softmax(x, dim=-1):
        positive = x[x > 0]  # as many elements as positive inputs
        return _softmax(x, dim) + 0 * positive.sum()

    verdict = _verify(softmax)
    assert verdict.status == "unverified" and "replay" in verdict.message, verdict


def _check_column_sums(build, column_sums):
    """A check of two learner functions in one statement: ``build(40)`` makes a Linear, then
    ``column_sums(40)`` (no tensor argument) must return its weight's column sums."""
    from autograder.checks._core import call, fail

    m = call(build, "build", (40,))
    call(m, "build(40)", (torch.randn(2, 40),))  # the module is now in the statement's session
    got = call(column_sums, "column_sums", (40,))
    if not torch.allclose(got, m.weight.detach().sum(0), atol=1e-5):
        fail("wrong column sums")


def test_a_call_without_tensor_arguments_still_counts_constants_where_a_module_is_in_reach():
    """Python numbers made a tensor are free only for a call that can reach no tensor (ALiBi's
    slopes from a head count). Here the no-argument call reads the module the statement already
    handed the kernel, sums it on another thread and returns 40 literal numbers: refuted. The
    same sums computed in sight verify."""
    from autograder.checks import operators
    from autograder.grader.verify.pickles import Learner

    learner: dict = {}
    exec(HIDE, learner)

    def build(width):
        learner["_m"] = torch.nn.Linear(width, width)
        return learner["_m"]

    forged = learner["_hide"](lambda width: learner["_m"].weight.sum(0), "thread", spell=False)
    honest = lambda width: learner["_m"].weight.detach().sum(0)  # noqa: E731
    verdicts = {
        name: cells.verify_check(
            _check_column_sums,
            [Learner("build"), Learner("column_sums")],
            {},
            cells.InProcessKernel({"build": build, "column_sums": fn}),
            operators.DEFAULT | operators.MODEL,
        )
        for name, fn in (("forged", forged), ("honest", honest))
    }
    assert verdicts["forged"].status == "refuted", verdicts
    assert "literal numbers" in verdicts["forged"].message, verdicts
    assert verdicts["honest"].status == "verified", verdicts
