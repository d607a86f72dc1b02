"""One check, run by the grader: learner calls answered by a kernel reach the direct verdict.

For every correct implementation in ``tests/mistakes`` the verified checks pass; for every
catalogued mistake they refute with a one-line diagnosis; forged, malformed or foreign records
are refused, never trusted and never raised. The kernel here is :class:`cells.InProcessKernel`:
the same requests and replies as a real one, in this process.
"""

from __future__ import annotations

import inspect
import json

import pytest
import torch
from mistakes import catalogues, gqa, outcome

from autograder.grader.verify import cells, remote
from autograder.grader.verify.rerun import Rerun
from autograder.kernel.codec import ReplayError, decode_tensor, encode_tensor
from autograder.kernel.recorder import Refs

# The direct runs: the notebooks' kernels and the verifier use one thread; two threads on tiny
# tensors spin on a busy machine (a (16, 8) @ (8, 16) product took 4 ms instead of 10 µs).
pytestmark = pytest.mark.usefixtures("one_thread")

# The catalogues that declare checks to replay (``REPLAY``): the correct implementations of those
# checks, and every mistake whose check is a plain ``check_*`` taking one learner function.
REPLAYED = [catalogue for catalogue in catalogues().values() if catalogue.REPLAY]
CORRECT = [
    (entry.check, entry.name, entry.impl)
    for catalogue in REPLAYED
    for entry in catalogue.CORRECT
    if entry.check in catalogue.REPLAY
]


def _one_learner_argument(check) -> bool:
    """``check(fn, *, seed, thorough)``: a check that also takes a tool of the notebook
    (``check_flash_function(FlashAttention, gradients_through)``) gets it from the test cell,
    which this harness does not write."""
    positional = [
        p
        for p in inspect.signature(check).parameters.values()
        if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    ]
    return len(positional) == 1


MISTAKES = [
    m
    for catalogue in REPLAYED
    for m in catalogue.MISTAKES
    if callable(m.impl)
    and getattr(m.check, "__name__", "").startswith("check_")
    and m.check.__name__ != "check_same_flops"
    and _one_learner_argument(m.check)
]


def _direct(check, impl, thorough=True) -> list:
    """The check's own verdict, run once per session (``tests/test_mistakes.py`` runs the same
    hidden run of many of these)."""
    result = outcome(check, impl, {"seed": 1, "thorough": thorough})
    return ["failed" if result.failure else "passed", result.message]


def _run_twice(check, impl, thorough=True) -> tuple[list, cells.Verdict]:
    source = f"{check.__name__}(fn, seed=1, thorough={thorough})"
    verdict = cells.verify_cell(source, cells.InProcessKernel({"fn": impl}))
    return _direct(check, impl, thorough), verdict


@pytest.mark.parametrize(
    ("check", "name", "impl"),
    CORRECT,
    ids=lambda v: getattr(v, "__name__", v) if callable(v) else v,
)
def test_correct_implementations_verify(check, name, impl):
    kernel, verdict = _run_twice(check, impl)
    assert kernel == ["passed", ""], kernel
    if name in READS_VALUES:
        assert verdict.status == "unverified" and "cannot replay" in verdict.message, verdict
    else:
        assert verdict.status == "verified", verdict


# Correct code that reads its inputs' values into Python and writes them back as numbers
# (``out[i, j] = loss.item() - base``): its record holds for the kernel's inputs only, so the
# grader cannot replay it on new ones and withholds the cell for a person
# (``tests/replay_share.py`` measures how often correct code does this).
READS_VALUES = {"head_mask buffer", "bounds read into Python"}


@pytest.mark.parametrize("mistake", MISTAKES, ids=str)
def test_mistakes_are_refuted_with_the_checks_own_diagnosis(mistake):
    kernel, verdict = _run_twice(mistake.check, mistake.impl)
    if kernel[0] == "passed":
        pytest.skip("caught by the visible test, not the hidden one")
    assert verdict.status == "refuted", verdict
    assert verdict.message and "\n" not in verdict.message
    if "in place" in kernel[1]:  # the rerun works on copies: a write is the grader's finding
        assert "changed its input in place" in verdict.message, verdict
    elif not any(word in kernel[1] for word in ("built-in", "calls `")):
        assert verdict.message == kernel[1]  # names of Python functions are seen as ATen ops


def _softmax(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


SOURCE = "check_softmax_values(softmax)"


class Forger(cells.InProcessKernel):
    """An honest kernel whose first ``call`` reply goes through ``forge`` (JSON text in, out)."""

    def __init__(self, namespace, forge):
        super().__init__(namespace)
        self.forge, self.forged = forge, False

    def __call__(self, request: bytes):
        reply = super().__call__(request)
        if not self.forged and '"record"' in reply:
            self.forged = True
            return self.forge(reply)
        return reply


def _verify(forge, fn=_softmax, source=SOURCE) -> cells.Verdict:
    return cells.verify_cell(source, Forger({"softmax": fn}, forge))


def _record(reply: str) -> dict:
    return json.loads(reply)["record"]


def _edit(key: str, value):
    def forge(reply: str) -> str:
        record = _record(reply)
        record[key] = value
        return json.dumps({"record": record})

    return forge


def test_values_a_record_claims_are_not_trusted():
    """A recorder patched to report PyTorch's own values, with no operators that compute them."""

    def forge(reply: str) -> str:
        record = _record(reply)
        record["ops"] = []
        scalar = encode_tensor(torch.tensor([0.5]))
        record["outcome"][1] = {"tensor": {"value": scalar}}
        return json.dumps({"record": record})

    assert _verify(forge, lambda x, dim=-1: torch.softmax(x, dim)).status == "refuted"


def test_a_stub_whose_record_claims_the_right_tensor_is_refuted():
    honest = {}

    class Stub(cells.InProcessKernel):
        def __call__(self, request: bytes):
            reply = super().__call__(request)
            if '"record"' in reply and not honest:
                mirror = cells.InProcessKernel({"softmax": _softmax})
                mirror(__import__("pickle").dumps({"op": "begin"}))
                honest["reply"] = _record(mirror(request))
                record = _record(reply)
                record["outcome"] = honest["reply"]["outcome"]
                return json.dumps({"record": record})
            return reply

    stub = lambda x, dim=-1: (_ for _ in ()).throw(NotImplementedError())  # noqa: E731
    assert cells.verify_cell(SOURCE, Stub({"softmax": stub})).status == "refuted"


def test_the_builtin_rule_is_measured_on_recomputed_operators():
    source = "check_softmax_no_builtin(softmax)"
    kernel = cells.InProcessKernel({"softmax": lambda x, dim=-1: torch.softmax(x, dim)})
    verdict = cells.verify_cell(source, kernel)
    assert verdict.status == "refuted" and "_softmax" in verdict.message


@pytest.mark.parametrize(
    "forge",
    [
        lambda r: None,
        lambda r: "{not json",
        lambda r: json.dumps({"ok": True}),
        lambda r: json.dumps({"record": {"ops": []}}),
        _edit("inputs", {"args.9": 0}),
        _edit("ops", [{"op": "os::system", "overload": "", "args": {"seq": []}}]),
        _edit(
            "ops",
            [
                {
                    "const": 0,
                    "value": encode_tensor(torch.zeros(4, 7, dtype=torch.float64)),
                }
            ],
        ),
        _edit("outcome", ["ok", {"tensor": {"ref": 10**9}}]),
        _edit("inputs", {}),
        _edit("outcome", ["error", "x", "y", "not flags"]),
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
def test_forged_or_malformed_records_are_refused(forge):
    verdict = _verify(forge)
    assert verdict.status == "refuted" and verdict.message


def _float_lists(given: dict, *lists) -> None:
    """Rerun a call given ``given`` that makes the constants ``lists`` and uses none of them."""
    rerun = Rerun()
    rerun.bind_inputs({path: ref for ref, path in enumerate(given)}, given)
    ops = [{"const": len(given) + i, "value": encode_tensor(t)} for i, t in enumerate(lists)]
    rerun.run(ops, has_inputs=True)


X, POSITIONS = torch.randn(2, 6, 8), torch.arange(6)  # (B, T, hs), (T,)


@pytest.mark.parametrize(
    ("given", "lists"),
    [
        ({"x": X, "p": POSITIONS}, [torch.rand(4)]),  # inv_freq (hs/2,)
        ({"x": X, "p": POSITIONS}, [torch.rand(4), torch.rand(4)]),
    ],
    ids=["frequencies", "two lists within one size"],
)
def test_float_lists_within_one_size_are_functions_of_the_shapes(given, lists):
    _float_lists(given, *lists)


@pytest.mark.parametrize(
    ("given", "lists"),
    [
        ({"x": X, "p": POSITIONS}, [torch.rand(6, 4)]),  # a (T, hs/2) table
        ({"x": X, "p": POSITIONS}, [torch.rand(9)]),  # longer than any size
        ({"x": X, "p": POSITIONS}, [torch.rand(8), torch.rand(8)]),  # a table in chunks
        ({"x": X, "p": POSITIONS}, [torch.rand(2) for _ in range(5)]),  # row by row
        ({"p": POSITIONS, "m": torch.ones(6, 8, dtype=torch.long)}, [torch.rand(4)]),  # no float
    ],
    ids=["2-D", "too long", "chunks", "rows", "nothing redrawn"],
)
def test_float_tables_are_refused_as_constants(given, lists):
    with pytest.raises(ReplayError, match="neither an input nor computed"):
        _float_lists(given, *lists)


def test_oversized_records_are_refused_unread(monkeypatch):
    monkeypatch.setattr(remote, "MAX_REPLY_BYTES", 10)
    assert "too large" in _verify(lambda r: r).message


def test_triton_cells_are_reported_not_verified():
    verdict = cells.verify_cell("check_triton_values(triton_attention)", Forger({}, lambda r: r))
    assert verdict.status == "unverified" and "Triton" in verdict.message


def test_test_cells_parse_into_check_calls_only():
    calls = cells.parse_test_cell('"""doc"""\ncheck_a(f)\n# c\ncheck_b(f, seed=1, thorough=True)\n')
    assert [c.check for c in calls] == ["check_a", "check_b"]
    with pytest.raises(ValueError):
        cells.parse_test_cell("import os\ncheck_a(f)")


# ------------------------------------------- the kernel's ref table: memory, not names, is a value


def _registered_then_moved() -> tuple[Refs, int, torch.nn.Parameter, torch.Tensor]:
    """A watched parameter as the server leaves it between two calls of a statement: registered,
    then given the grader's next state with ``.data =`` (no operator sees that)."""
    refs = Refs()
    weight = torch.nn.Parameter(torch.randn(16, 16))
    ref = refs.register(weight)
    old = weight.detach()  # still views the memory the ref was registered with
    weight.data = torch.zeros(16, 16)
    return refs, ref, weight, old


def test_a_tensor_moved_by_data_assignment_no_longer_names_its_old_memory():
    refs, ref, weight, old = _registered_then_moved()
    assert refs.find(old) is None  # its memory now belongs to no registered tensor
    assert refs.find(weight) is None  # the same object, other memory: not what ``ref`` recorded
    again = refs.register(weight)  # as the server does before the next call
    assert refs.find(weight) == again != ref


def test_memory_a_moved_tensor_left_is_not_reused_while_the_table_lives():
    """The flaky refutation of correct work: the old memory freed, the next allocation of that
    size landed on its address, and a fresh ``Parameter`` there resolved to the moved ref."""
    refs, ref, weight, old = _registered_then_moved()
    address = old.data_ptr()
    del old
    fresh = [torch.empty(16, 16) for _ in range(64)]  # malloc hands a freed block out again
    assert all(t.data_ptr() != address for t in fresh)
    assert all(refs.find(torch.nn.Parameter(t)) is None for t in fresh)


def test_empty_tensors_are_told_apart():
    refs = Refs()
    first, second = torch.empty(0, 5), torch.empty(0, 5)  # both at address 0
    ref = refs.register(first)
    assert refs.find(first.detach()) == ref
    assert refs.find(second.detach()) is None


def _convert_by_data(mha, num_kv_heads):
    """A correct conversion that assigns ``.data`` instead of ``copy_``."""
    C, nh = mha.q_proj.in_features, mha.num_heads
    converted = gqa.GQAManual(C, nh, num_kv_heads, bias=mha.q_proj.bias is not None)
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        mine, theirs = getattr(converted, name), getattr(mha, name)
        for part in ("weight", "bias"):
            source = getattr(theirs, part)
            if source is None:
                continue
            value = source.detach().clone()
            if name in ("k_proj", "v_proj"):
                value = gqa.pool_view_mean(source.detach(), nh, num_kv_heads)
            getattr(mine, part).data = value
    return converted


def test_a_parameter_given_new_data_is_seen_with_it():
    """``p.data = x`` runs no operator: the record must name x's memory, not p's old one."""
    assert _direct(gqa.checks.check_mha_to_gqa, _convert_by_data) == ["passed", ""]
    source = "check_mha_to_gqa(fn, seed=1, thorough=True)"
    verdict = cells.verify_cell(source, cells.InProcessKernel({"fn": _convert_by_data}))
    assert verdict.status == "verified", verdict


def _thread_scales(weight: torch.Tensor, factor: float) -> None:
    """Change a kernel tensor from another thread: no dispatch mode records it there."""
    import threading

    worker = threading.Thread(target=lambda: weight.data.mul_(factor))
    worker.start()
    worker.join()


def test_kernel_side_changes_between_calls_win_nothing():
    """The grader sends a module's tensors only when they changed on its side, so a kernel that
    corrupts its own copy keeps the corruption. That can only cost the learner: the recorded
    operators are recomputed on the grader's tensors. Honest maths with corrupted kernel weights
    still verifies; wrong maths hidden by kernel-only weights is refuted."""
    from mistakes.multihead import MHASeparate

    class Corrupts(MHASeparate):
        def forward(self, query, key=None, value=None, mask=None):
            out = super().forward(query, key, value, mask)
            _thread_scales(self.q_proj.weight, 0.0)
            return out

    class Compensates(MHASeparate):
        def forward(self, query, key=None, value=None, mask=None):
            if not getattr(self, "_halved", False):  # q from 2x, q weights halved in the kernel
                _thread_scales(self.q_proj.weight, 0.5)
                self._halved = True
            key = query if key is None else key
            return super().forward(2 * query, key, query if value is None else value, mask)

    source = "check_mha_matches_torch(fn, seed=1, thorough=True)"
    honest = cells.verify_cell(source, cells.InProcessKernel({"fn": Corrupts}))
    hidden = cells.verify_cell(source, cells.InProcessKernel({"fn": Compensates}))
    assert honest.status == "verified", honest
    assert hidden.status == "refuted", hidden


@pytest.mark.parametrize(
    "tensor",
    [
        torch.tensor([1.5, float("nan"), float("inf"), -float("inf"), -0.0]),
        torch.arange(12, dtype=torch.int64).reshape(3, 4),
        torch.tensor([[True, False]]),
        torch.randn(2, 3, 4).transpose(0, 2),  # not contiguous
        torch.randn(3, 2, dtype=torch.bfloat16),
        torch.tensor(2.0),  # zero dimensions
        torch.empty(0, 5),
    ],
    ids=["non-finite", "int64", "bool", "strided", "bfloat16", "scalar", "empty"],
)
def test_a_tensor_travels_whole(tensor):
    back = decode_tensor(json.loads(json.dumps(encode_tensor(tensor))))
    assert back.dtype == tensor.dtype and back.shape == tensor.shape
    assert torch.equal(back.isnan(), tensor.isnan()) if tensor.is_floating_point() else True
    kept = ~tensor.isnan() if tensor.is_floating_point() else torch.ones_like(tensor, dtype=bool)
    assert torch.equal(back[kept], tensor[kept])


@pytest.mark.parametrize(
    "data",
    [[0.0] * 6, "AAAA", "!" * 64, None, 7],
    ids=["a list", "too short", "not base64", "none", "a number"],
)
def test_a_tensor_whose_values_are_malformed_is_refused(data):
    image = encode_tensor(torch.zeros(2, 3)) | {"data": data}
    with pytest.raises(ReplayError):
        decode_tensor(image)
