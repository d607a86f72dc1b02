"""Notebook 06's checks pass every correct implementation and diagnose every classic mistake."""

import nbformat
import pytest
import torch
from mistakes import gpu_backward, gpu_function, stub

from autograder import build, nbcell, paths
from autograder.checks import nb06_backward
from autograder.checks import nb06_gpu as checks
from autograder.checks.measure import measure
from autograder.grader.verify import cells
from autograder.tools import triton_support
from autograder.tools.nb06_gpu import gradients_through

# Correct implementations, catalogued mistakes and stubs (Triton's too): tests/test_mistakes.py.

# Tiny tensors: on two threads of a busy machine each small product spins for milliseconds.
pytestmark = pytest.mark.usefixtures("one_thread")


# ----------------------------------------------------------------------------- Triton

TRITON_CHECKS = [checks.check_triton_values, checks.check_triton_causal]


@pytest.mark.parametrize("where", ["solution", "release"])
def test_triton_cells_are_optional_self_checks_without_points(where):
    """Learners without Triton, or who skip the optional section, lose no points: the two Triton
    checks are locked cells that are not graded, and Run All goes on past them."""
    path = paths.solution_notebook if where == "solution" else paths.release_notebook
    nb = nbformat.read(path("06_gpu_attention"), as_version=4)
    triton_cells = [c for c in nb.cells if "check_triton_" in c.source and c.cell_type == "code"]
    triton_cells = [c for c in triton_cells if nbcell.grade_id(c) != "setup"]
    assert [nbcell.grade_id(c) for c in triton_cells] == [
        "selfcheck_triton_attention_matches_sdpa",
        "selfcheck_triton_attention_causal",
    ]
    for cell in triton_cells:
        assert nbcell.is_self_check(cell) and not nbcell.is_test(cell)
        assert nbcell.points(cell) == 0 and "no points" in cell.source
        assert build.RUN_ALL_GOES_ON in cell.metadata.get("tags", [])
    assert not any("triton" in (nbcell.grade_id(c) or "") for c in nb.cells if nbcell.is_test(c))


def test_triton_checks_skip_cleanly_without_triton(monkeypatch, capsys):
    monkeypatch.setattr(triton_support, "AVAILABLE", False)
    for check in TRITON_CHECKS:
        check(stub)  # would fail if it ran
    assert capsys.readouterr().out.count(triton_support.SKIP_MESSAGE) == 2


def test_missing_triton_stand_in_defines_kernels_and_refuses_to_launch():
    triton, tl = triton_support._Missing("triton"), triton_support._Missing("triton.language")

    @triton.jit
    def kernel(X, N: tl.constexpr):
        tl.store(X, tl.load(X))

    with pytest.raises(triton_support.TritonUnavailable, match="not available"):
        kernel[(1,)](torch.zeros(1), N=1)
    with pytest.raises(triton_support.TritonUnavailable):
        triton.cdiv(3, 2)
    assert "not installed" in repr(kernel)


@pytest.mark.parametrize(
    ("hs", "block", "dtype", "message"),
    [
        (8, 32, torch.float32, "at least 16"),
        (48, 32, torch.float32, "powers of two"),
        (16, 8, torch.float32, "BLOCK_M=8"),
        (16, 32, torch.float64, "float64 is not supported"),
    ],
)
def test_kernel_inputs_are_validated(hs, block, dtype, message):
    q = torch.zeros(1, 1, 4, hs, dtype=dtype)
    config = {"BLOCK_M": block, "BLOCK_N": 32, "num_warps": 4, "num_stages": 1}
    with pytest.raises(ValueError, match=message):
        triton_support.check_inputs(q, q, q, config)


@pytest.mark.skipif(triton_support.MODE != "interpreter", reason="interpreter only")
def test_bfloat16_is_refused_in_the_interpreter():
    q = torch.zeros(1, 1, 4, 16, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="11584"):
        triton_support.check_inputs(q, q, q, triton_support.launch_config(q))


def test_importing_the_checks_does_not_import_triton():
    """Triton's standard library is decorated when ``triton.language`` is imported: before
    ``triton_support`` switches the CPU interpreter on, its ``tl.max`` would be a compiled-kernel
    function that an interpreted kernel cannot call."""
    import subprocess
    import sys

    code = "import sys, autograder.checks, autograder.checks.nb01_attention\n"
    code += "import autograder.grader.verify.cells\n"
    code += "print(sorted(m for m in sys.modules if m == 'triton'))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout


@pytest.mark.parametrize("thorough", [False, True])
def test_backward_memory_rule_leaves_room_for_every_correct_loop_order(thorough):
    """The memory check's premise: on its shapes, each correct backward of the catalogue (key
    blocks, FlashAttention-2's Algorithm 2, the Triton split) creates nothing over half of one
    head's (T, S) matrix and never holds three quarters of it at once, so the T·S bar fails only
    a loop that keeps one alive, whole or in pieces."""
    gen = torch.Generator().manual_seed(0)
    for B, nh, T, S, hs, block, causal in nb06_backward._memory_cases(thorough):
        args = nb06_backward._args(gen, B, nh, T, S, hs, causal)
        for name, impl in gpu_backward.CORRECT_BACKWARD.items():
            with measure() as ran:
                impl(*args, block_size=block, causal=causal)
            assert ran.largest.numel <= T * S // 2, (name, ran.largest.shape, T, S)
            assert ran.peak < T * S * 3 // 4, (name, ran.peak, T, S)


# ----------------------------------------------------------------------------- FlashAttention


@pytest.mark.parametrize("name", sorted(gpu_function.CORRECT_FUNCTION))
def test_flash_function_verifies_with_its_backward_recorded(name):
    """A correct Function is verified by the grader: ``gradients_through`` runs its forward and
    its backward inside one recorded call, so the learner's backward is recomputed too."""
    impl = gpu_function.CORRECT_FUNCTION[name]
    for check in ("check_flash_function", "check_flash_memory"):
        source = f"{check}(fn, through, seed=1, thorough=True)"
        kernel = cells.InProcessKernel({"fn": impl, "through": gradients_through})
        assert cells.verify_cell(source, kernel).status == "verified", (name, check)


@pytest.mark.parametrize(
    ("impl", "check", "diagnosis"),
    [
        (gpu_function.CausalForgotten, "check_flash_function", "ctx.causal"),
        (gpu_function.Float32Inside, "check_flash_function", "float32's precision"),
        (gpu_function.AutogradInside, "check_flash_memory", "every tile's weights"),
    ],
    ids=["causal forgotten", "float32 inside", "autograd inside"],
)
def test_flash_function_mistakes_are_refuted_by_the_grader(impl, check, diagnosis):
    """A wrong backward is refuted on the grader's recomputation, which a backward the check
    started after the call would never reach (it would differentiate the forward's operators)."""
    kernel = cells.InProcessKernel({"fn": impl, "through": gradients_through})
    verdict = cells.verify_cell(f"{check}(fn, through, seed=1)", kernel)
    assert verdict.status == "refuted" and diagnosis in verdict.message, verdict


def test_gradcheck_needs_float64():
    """Notebook 06's claim: gradcheck passes a correct Function in float64 and fails the same
    code in float32, whose finite differences are rounding noise; in float64 it refuses a
    Function that computes in float32 whatever its input."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 5, 4, dtype=torch.float64, generator=gen) for _ in range(3))

    def gradcheck(function, dtype):
        inputs = [t.to(dtype).requires_grad_() for t in (q, k, v)]
        return torch.autograd.gradcheck(function.apply, (*inputs, True), raise_exception=False)

    for function in gpu_function.CORRECT_FUNCTION.values():
        assert gradcheck(function, torch.float64)
        assert not gradcheck(function, torch.float32)
    assert not gradcheck(gpu_function.Float32Inside, torch.float64)
