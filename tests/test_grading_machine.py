"""The grading machine's own defences, one fast test each (issue 27, class 6).

The attacks that need a whole ``grade`` run (links in the runtime folder, notes for the next
learner, script in outputs) are graded in the session's class run: ``test_hostile_machine.py``.
"""

from __future__ import annotations

import os
import socket
import stat

import pytest
import torch

from autograder.grader.sockets import SOCKETS, fresh_runtime, let_kernel_connect
from autograder.grader.verify import cells

SOURCE = "check_softmax_values(softmax)"


# ------------------------------------------------------------------ runtime folders and sockets


def test_each_kernel_gets_a_fresh_folder_only_the_grader_writes(tmp_path):
    (tmp_path / "kernel-old").mkdir()
    (tmp_path / "kernel-old" / "note").write_text("left by the last learner")
    uid = 61000 if os.geteuid() == 0 else None
    first = fresh_runtime(tmp_path, uid)
    mine = os.lstat(first)
    assert stat.S_IMODE(mine.st_mode) == 0o711 and mine.st_uid == os.geteuid()
    sockets = os.lstat(first / SOCKETS)
    assert stat.S_IMODE(sockets.st_mode) == 0o700
    assert sockets.st_uid == (os.geteuid() if uid is None else uid)
    assert not (tmp_path / "kernel-old").exists()
    second = fresh_runtime(tmp_path, uid)
    assert second != first and not first.exists()


def test_a_socket_swapped_for_a_link_is_refused(tmp_path):
    canary = tmp_path / "canary"
    canary.write_text("mine")
    canary.chmod(0o600)
    path = tmp_path / "verify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        let_kernel_connect(path)
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o777
        path.unlink()
        path.symlink_to(canary)
        with pytest.raises(OSError):
            let_kernel_connect(path)
    assert stat.S_IMODE(canary.stat().st_mode) == 0o600 and canary.read_text() == "mine"


# ------------------------------------------------------------------------- unreadable replies


class Garbled(cells.InProcessKernel):
    """An honest kernel whose replies to ``call`` requests are replaced by ``text``."""

    def __init__(self, namespace, text: str):
        super().__init__(namespace)
        self.text = text

    def __call__(self, request: bytes):
        reply = super().__call__(request)
        return self.text if '"record"' in reply else reply


@pytest.mark.parametrize(
    "text",
    [
        "[" * 200_000,
        '{"record": ' + "[" * 500 + "]" * 500 + "}",
        "\ufffd\x00garbage",
        "[1, 2]",
    ],
    ids=["deep-brackets", "deep-record", "garbage", "not-a-record"],
)
def test_a_reply_that_cannot_be_read_is_refuted_saying_so(text):
    kernel = Garbled({"softmax": lambda x, dim=-1: torch.softmax(x, dim)}, text)
    verdict = cells.verify_cell(SOURCE, kernel)
    assert verdict.status == "refuted", verdict
    assert verdict.message.startswith("the kernel's reply could not be read: "), verdict


# ------------------------------------------------------------------ names bound by computed keys

NB01 = "01_attention_from_scratch"
SDPA_TESTS = {
    "test_scaled_dot_product_attention_shapes",
    "test_scaled_dot_product_attention_matches_torch",
    "test_scaled_dot_product_attention_mask",
}
COMPUTED_BINDINGS = {
    "globals": "globals()['sd' + 'pa_impl'] = torch._C._nn.scaled_dot_product_attention\n",
    "vars-update": "vars().update({'sd' + 'pa_impl': torch._C._nn.scaled_dot_product_attention})\n",
    "setattr-module": (
        "import sys\n"
        "_fused = torch._C._nn.scaled_dot_product_attention\n"
        "setattr(sys.modules[__name__], 'sd' + 'pa_impl', _fused)\n"
    ),
}
USES_IT = """def scaled_dot_product_attention(q, k, v, mask=None):
    out = sdpa_impl(q, k, v, attn_mask=None if mask is None else ~mask)
    return out, torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)
"""


@pytest.fixture(scope="module")
def nb01_pair():
    import nbformat

    from autograder import paths
    from autograder.build import instructor_notebook_text

    solution = nbformat.reads(instructor_notebook_text(NB01), as_version=4)
    return solution, nbformat.read(paths.release_notebook(NB01), as_version=4)


@pytest.mark.parametrize("binder", list(COMPUTED_BINDINGS))
def test_a_cell_binding_computed_names_withholds_the_tests_that_use_them(nb01_pair, binder):
    from hostile.trust import Attack, Edit, build

    from autograder.grader.scan import withheld_tests

    solution, release = nb01_pair
    attack = Attack(
        "computed",
        NB01,
        3,
        (),
        "SDPA from torch._C bound under a name built from pieces",
        "solution",
        (
            Edit("after", "setup", COMPUTED_BINDINGS[binder]),
            Edit("answer", "scaled_dot_product_attention", USES_IT),
        ),
    )
    submitted = build(attack, solution, release)
    withheld = withheld_tests(submitted, solution, release)
    assert SDPA_TESTS <= set(withheld), withheld
    assert any("binds names it computes" in why for why in withheld.values()), withheld


def test_the_instructors_answers_withhold_nothing(nb01_pair):
    from autograder.grader.scan import withheld_tests

    solution, release = nb01_pair
    assert withheld_tests(solution, solution, release) == {}


# ------------------------------------------------------------------------------- the answer key


def test_no_module_of_a_classroom_kernel_holds_the_quiz_key(tmp_path):
    """Notebook 10's choice digests and their salt stay in the grader: a kernel cannot hash
    letters against them (the learner's public package holds them for self-study: GUIDE.md)."""
    from autograder.build import instructor_notebook_text
    from autograder.checks import nb10_interview
    from autograder.grader import kernel_package

    tree = kernel_package.build(tmp_path, instructor_notebook_text("10_interview_prep"))
    digests = {d for spec in nb10_interview.CHOICES.values() for d in spec.digests}
    assert len(digests) > 10 and nb10_interview.SALT
    for path in (p for p in tree.rglob("*") if p.is_file()):
        text = path.read_text(errors="replace")
        assert nb10_interview.SALT not in text, path
        assert not [d for d in digests if d in text], path
