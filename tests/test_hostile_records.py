""" "How" rules hold on the replayed record (issue 42, 2): the attacks of :mod:`hostile.records`.

Each attack runs in-process first (its notebook's cells in one namespace, each target test cell,
hidden checks included, verified by the grader's own checks), then as a submission in the class
run. The variants an allow-list scan would withhold (TorchScript, autograd's engine called by its
private name) are verified here on their records, whatever the scan says.
"""

from __future__ import annotations

import math

import pytest
import torch
from hostile import won_in_class_run, won_in_process
from hostile.records import ATTACKS
from test_hostile_loopholes import verdicts

from autograder.checks import nb06_backward, nb06_gpu, registry
from autograder.grader.verify import cells, remote


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.learner)
def test_a_how_rule_holds_on_the_record(attack):
    found = verdicts(attack)
    won = won_in_process(found)
    assert not won, f"{attack.what}: {won}"
    for verdict in found.values():
        assert verdict.message and "\n" not in verdict.message, verdict


@torch.jit.script
def _scripted_chunk(q, k, v, mask: torch.Tensor | None):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _scripted_sdpa_on_query_chunks(q, k, v, block_size=64, causal=False):
    """SDPA compiled by TorchScript (no torch function is called), a few queries at a time."""
    B, nh, T, hs = q.shape
    q3, k3, v3 = (t.reshape(B * nh, t.shape[-2], hs) for t in (q, k, v))
    S, chunk = k.shape[-2], max(1, T // (2 * B * nh))
    rows = []
    for start in range(0, T, chunk):
        stop = min(start + chunk, T)
        rows_seen = torch.arange(start, stop)[:, None] + S - T  # (c, 1): last key each sees
        mask = torch.arange(S)[None, :] <= rows_seen if causal else None  # (c, S)
        rows.append(_scripted_chunk(q3[:, start:stop], k3, v3, mask))
    return torch.cat(rows, dim=1).reshape(B, nh, T, hs)


def _engine_backward(q, k, v, o, lse, do, block_size=64, causal=False):
    """Autograd through plain attention, its backward run by autograd's engine by that private
    name: no torch function named grad, backward or vjp is called."""
    q_, k_, v_ = (t.detach().requires_grad_() for t in (q, k, v))
    T, S = q.shape[-2], k.shape[-2]
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, nh, T, S)
    if causal:
        s = s.masked_fill(~torch.ones(T, S, dtype=torch.bool).tril(S - T), float("-inf"))
    out = torch.softmax(s, dim=-1) @ v_
    torch.autograd.graph._engine_run_backward((out,), (do,), False, False, (), True, True)
    return q_.grad, k_.grad, v_.grad


RECORDED = [
    (nb06_gpu.check_tiled_values, _scripted_sdpa_on_query_chunks),
    (nb06_gpu.check_tiled_memory, _scripted_sdpa_on_query_chunks),
    (nb06_backward.check_backward_values, _engine_backward),
    (nb06_backward.check_backward_by_hand, _engine_backward),
]


@pytest.mark.parametrize(("check", "impl"), RECORDED, ids=lambda v: getattr(v, "__name__", v))
def test_hidden_mechanisms_are_refused_on_their_record(check, impl):
    """The rule sees the record's operators: SDPA's ``_safe_softmax`` under TorchScript, the
    engine's backward operators however the engine was reached."""
    kernel = cells.InProcessKernel({"fn": impl})
    allowed = registry.allowed_operators(check.__name__)
    verdict = cells.verify_check(check, [remote.Learner("fn")], {"seed": 1}, kernel, allowed)
    assert verdict.status == "refuted", verdict
    assert verdict.message and "\n" not in verdict.message, verdict


@pytest.mark.slow
def test_graded_attacks_win_no_target_cell(class_run):
    """The same attacks handed in: every target scores 0 (or waits for a person)."""
    won = won_in_class_run(class_run, ATTACKS)
    assert not won, won
