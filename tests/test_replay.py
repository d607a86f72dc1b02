"""One check, run twice: a check replayed from a kernel's recording reaches the kernel's verdict.

For every correct implementation in ``tests/mistakes`` the replayed checks verify; for every
catalogued mistake they refute with a one-line diagnosis; forged, malformed or foreign recordings
are refused, never trusted and never raised.
"""

from __future__ import annotations

import json

import pytest
import torch
from mistakes import attention, gpu, gqa, heads, masking, multihead, parallel

from autograder.checks import replay

CORRECT = [
    *((attention.checks.check_softmax_values, n, f) for n, f in attention.CORRECT_SOFTMAX.items()),
    *(
        (attention.checks.check_softmax_no_builtin, n, f)
        for n, f in attention.CORRECT_SOFTMAX.items()
    ),
    *((attention.checks.check_sdpa_mask, n, f) for n, f in attention.CORRECT_SDPA.items()),
    *((multihead.checks.check_merge_heads, n, f) for n, f in multihead.CORRECT_MERGE.items()),
    *((multihead.checks.check_mha_edge_cases, n, f) for n, f in multihead.CORRECT_MHA.items()),
    *((masking.checks.check_causal_mask_values, n, f) for n, f in masking.CORRECT_CAUSAL.items()),
    *((masking.checks.check_padding_mask_values, n, f) for n, f in masking.CORRECT_PADDING.items()),
    *((masking.checks.check_to_nn_mha_masks, n, f) for n, f in masking.CORRECT_NN_MASKS.items()),
    *((gqa.checks.check_repeat_kv, n, f) for n, f in gqa.CORRECT_REPEAT.items()),
    *((gqa.checks.check_gqa_decoding, n, f) for n, f in gqa.CORRECT_GQA.items()),
    *((gqa.checks.check_mha_to_gqa, n, f) for n, f in gqa.CORRECT_CONVERT.items()),
    *(
        (parallel.checks.check_mha_sequential_loops, n, f)
        for n, f in parallel.CORRECT_SEQUENTIAL.items()
    ),
    *(
        (parallel.checks.check_mha_parallel_batches, n, f)
        for n, f in parallel.CORRECT_PARALLEL.items()
    ),
    *((parallel.checks.check_attention_flops, n, f) for n, f in parallel.CORRECT_FLOPS.items()),
    *((gpu.checks.check_get_device, n, f) for n, f in gpu.CORRECT_GET_DEVICE.items()),
    *((gpu.checks.check_tiled_memory, n, f) for n, f in gpu.CORRECT_TILED.items()),
    *((heads.ck.check_head_entropy_zero_weights, n, f) for n, f in heads.CORRECT_ENTROPY.items()),
    *(
        (heads.ck.check_head_importance_leaves_model_unchanged, n, f)
        for n, f in heads.CORRECT_IMPORTANCE.items()
    ),
]
MISTAKES = [
    m
    for catalogue in (
        attention.MISTAKES,
        multihead.MISTAKES,
        masking.MISTAKES,
        gqa.MISTAKES,
        parallel.MISTAKES,
        gpu.MISTAKES_GET_DEVICE + gpu.MISTAKES_TILED + gpu.MISTAKES_TILED_THOROUGH,
        heads.MISTAKES,
    )
    for m in catalogue
    if callable(m.impl)
    and getattr(m.check, "__name__", "").startswith("check_")
    and m.check.__name__ != "check_same_flops"
]


def _run_twice(check, impl, thorough=True) -> tuple[list, replay.Verdict]:
    source = f"{check.__name__}(fn, seed=1, thorough={thorough})"
    recording = replay.record_cell(source, {"fn": impl})
    kernel = json.loads(recording)["statements"][0]["kernel_outcome"]
    return kernel, replay.replay_cell(source, recording)


@pytest.mark.parametrize(
    ("check", "name", "impl"),
    CORRECT,
    ids=lambda v: getattr(v, "__name__", v) if callable(v) else v,
)
def test_correct_implementations_verify(check, name, impl):
    kernel, verdict = _run_twice(check, impl)
    assert kernel == ["passed", ""], kernel
    assert verdict.status == "verified", verdict


@pytest.mark.parametrize("mistake", MISTAKES, ids=str)
def test_mistakes_are_refuted_with_the_checks_own_diagnosis(mistake):
    kernel, verdict = _run_twice(mistake.check, mistake.impl)
    if kernel[0] == "passed":
        pytest.skip("caught by the visible test, not the hidden one")
    assert verdict.status == "refuted", verdict
    assert verdict.message and "\n" not in verdict.message
    if not any(word in kernel[1] for word in ("built-in", "calls `")):
        assert verdict.message == kernel[1]  # names of Python functions are seen as ATen ops


def _softmax(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


SOURCE = "check_softmax_values(softmax)"


def _recording(fn=_softmax) -> dict:
    return json.loads(replay.record_cell(SOURCE, {"softmax": fn}))


def test_values_a_recording_claims_are_not_trusted():
    """A recorder patched to report PyTorch's own values, with no operators that compute them."""
    forged = _recording(lambda x, dim=-1: torch.softmax(x, dim))
    for call in forged["statements"][0]["calls"]:
        result = call["outcome"][1]
        call["ops"] = []
        call["outcome"][1] = (
            {"value": {"shape": [1], "dtype": "torch.float32", "device": "cpu", "data": [0.5]}}
            if "tensor" in result
            else result
        )
    verdict = replay.replay_cell(SOURCE, json.dumps(forged))
    assert verdict.status == "refuted"


def test_a_stub_whose_recording_claims_the_right_tensor_is_refuted():
    honest = _recording()
    stub = _recording(lambda x, dim=-1: (_ for _ in ()).throw(NotImplementedError()))
    stub["statements"][0]["calls"][0]["outcome"] = honest["statements"][0]["calls"][0]["outcome"]
    assert replay.replay_cell(SOURCE, json.dumps(stub)).status == "refuted"


def test_the_builtin_rule_is_measured_on_recomputed_operators():
    source = "check_softmax_no_builtin(softmax)"
    recording = replay.record_cell(source, {"softmax": lambda x, dim=-1: torch.softmax(x, dim)})
    verdict = replay.replay_cell(source, recording)
    assert verdict.status == "refuted" and "_softmax" in verdict.message


@pytest.mark.parametrize(
    "forge",
    [
        lambda r: None,
        lambda r: "{not json",
        lambda r: json.dumps({"statements": []}),
        lambda r: json.dumps({"statements": [{"calls": []}]}),
        lambda r: json.dumps(_edit(r, "digest", "0" * 32)),
        lambda r: json.dumps(
            _edit(r, "ops", [{"op": "os::system", "overload": "", "args": {"seq": []}}])
        ),
        lambda r: json.dumps(
            _edit(
                r,
                "ops",
                [
                    {
                        "const": 0,
                        "value": {
                            "shape": [4, 7],
                            "dtype": "torch.float64",
                            "device": "cpu",
                            "data": [0.0] * 28,
                        },
                    }
                ],
            )
        ),
        lambda r: json.dumps(_edit(r, "outcome", ["ok", {"tensor": 10**9}])),
        lambda r: json.dumps(_edit(r, "inputs", {})),
        lambda r: json.dumps(_edit(r, "outcome", ["error", "x", "y", "not flags"])),
    ],
    ids=[
        "none",
        "not-json",
        "no-statements",
        "no-calls",
        "digest",
        "foreign-op",
        "big-constant",
        "dangling-ref",
        "inputs",
        "malformed-error",
    ],
)
def test_forged_or_malformed_recordings_are_refused(forge):
    verdict = replay.replay_cell(SOURCE, forge(_recording()))
    assert verdict.status == "refuted" and verdict.message


def _edit(recording: dict, key: str, value) -> dict:
    recording["statements"][0]["calls"][0][key] = value
    return recording


def test_oversized_recordings_are_refused_unread(monkeypatch):
    monkeypatch.setattr(replay, "MAX_RECORDING_BYTES", 10)
    assert "too large" in replay.replay_cell(SOURCE, json.dumps(_recording())).message


def test_triton_cells_are_reported_not_verified():
    verdict = replay.replay_cell("check_triton_values(triton_attention)", None)
    assert verdict.status == "unverified" and "Triton" in verdict.message


def test_test_cells_parse_into_check_calls_only():
    calls = replay.parse_test_cell(
        '"""doc"""\ncheck_a(f)\n# c\ncheck_b(f, seed=1, thorough=True)\n'
    )
    assert [c.check for c in calls] == ["check_a", "check_b"]
    with pytest.raises(ValueError):
        replay.parse_test_cell("import os\ncheck_a(f)")
