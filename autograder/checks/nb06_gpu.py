"""Checks for notebook 06: ``get_device``, ``tiled_attention`` and ``triton_attention``.

Shape legend: ``B`` batch, ``nh`` heads, ``T`` query length, ``S`` key/value length,
``hs`` head size; q is ``(B, nh, T, hs)``, k and v ``(B, nh, S, hs)``.

The oracle is ``F.scaled_dot_product_attention`` in float64 on the CPU. Causal attention is
aligned **bottom-right**, as in notebook 03 and FlashAttention 2: the T queries are the last T of
the S positions, so query ``i`` may attend to key ``j`` iff ``j <= i + S - T``. SDPA's
``is_causal`` aligns top-left, so the oracle gets that mask explicitly; a query with no allowed
key (S < T) must give an all-zero output.

Known-wrong answers and the diagnosis live in :mod:`._online_softmax`: closed forms of the
classic online-softmax bugs, built from full score matrices on the checker's side. When none
matches, the learner's function is called again on easier inputs (one key block, whole blocks
only) to say which part of the loop is at fault. Every call is measured on the operators that
ran (:mod:`.measure`: in the grader, the kernel's record as recomputed there): PyTorch's
attention refuses any cell, and the memory rule counts every tensor alive at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import torch

from autograder.tools import triton_support
from autograder.torch_helpers import one_thread

from ._core import (
    CheckFailure,
    call,
    describe,
    expect_shape,
    expect_tensor,
    expect_unmodified,
    fail,
    few_blocks,
    make_generator,
    not_written,
    randint,
)
from ._online_softmax import close, diagnose, oracle, tolerance
from .measure import Created, Measured, measure

#: Checks the grader cannot verify outside the kernel: their cells wait for a person.
UNVERIFIABLE = {
    "check_triton_values": "a Triton kernel writes its output without an operator PyTorch sees",
    "check_triton_causal": "a Triton kernel writes its output without an operator PyTorch sees",
}

#: Learner-importable names that would compute this notebook's graded answers. In the grading
#: sandbox of any notebook whose test cells use these checks, they keep their names but raise.
ANSWERS_IN_TOOLS: dict[str, str] = {
    "autograder.tools.nb06_gpu_timing.naive_attention": (
        "tiled_attention's values, causal and no-SDPA cells; both triton_attention cells"
    ),
    "autograder.tools.nb06_gpu_timing.sdpa": (
        "the non-causal values cells of tiled_attention and triton_attention"
    ),
}

TILED = "tiled_attention"
TRITON = "triton_attention"


# ----------------------------------------------------------------------------- get_device


def check_get_device(get_device: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``get_device()`` returns a ``torch.device``: cuda if available, else mps, else cpu."""
    __tracebackhide__ = True
    for cuda, mps, want in ((True, True, "cuda"), (False, True, "mps"), (False, False, "cpu")):
        current = torch.device(want) if want != "cpu" else None
        machine = {
            "torch.cuda.is_available": cuda,
            "torch.cuda.device_count": int(cuda),
            "torch.backends.mps.is_available": mps,
            "torch.accelerator.is_available": cuda or mps,
            "torch.accelerator.current_accelerator": current,
        }
        got = call(get_device, "get_device", patches=machine)
        if isinstance(got, str):
            fail(f"`get_device` returned the string {got!r}: return torch.device({got!r}).")
        if not isinstance(got, torch.device):
            fail(f"`get_device` should return a torch.device, got {type(got).__name__}.")
        if got.type == want:
            continue
        where = {"cuda": "a CUDA GPU", "mps": "only Apple's MPS", "cpu": "no accelerator"}[want]
        advice = {
            ("cuda", "cpu"): "test torch.cuda.is_available() and return torch.device('cuda') "
            "when it is True",
            ("cuda", "mps"): "test torch.cuda.is_available() first, MPS only when there is no CUDA",
            ("mps", "cpu"): "test torch.backends.mps.is_available() before falling back to cpu",
            ("mps", "cuda"): "only pick cuda when torch.cuda.is_available() is True",
            ("cpu", "cuda"): "only pick cuda when torch.cuda.is_available() is True",
            ("cpu", "mps"): "only pick mps when torch.backends.mps.is_available() is True",
        }.get((want, got.type), f"return torch.device({want!r}) in that case")
        fail(f"With {where}, `get_device()` returned {got.type}: {advice}.")


# ----------------------------------------------------------------------------- shared


def _qkv(gen, B, nh, T, S, hs, dtype=torch.float32, scale=1.0):
    q = (scale * torch.randn(B, nh, T, hs, generator=gen, dtype=torch.float64)).to(dtype)
    k = torch.randn(B, nh, S, hs, generator=gen, dtype=torch.float64).to(dtype)
    v = torch.randn(B, nh, S, hs, generator=gen, dtype=torch.float64).to(dtype)
    return q, k, v


def _inputs(q, k, v, causal, block=None) -> str:
    kwargs = {"causal": causal} if block is None else {"block_size": block, "causal": causal}
    return describe((q, k, v), kwargs)


def _expect_output(out, name, q, v, inputs) -> torch.Tensor:
    __tracebackhide__ = True
    out = expect_tensor(out, name)
    expect_shape(out, (*q.shape[:-1], v.shape[-1]), f"The output of `{name}`", inputs)
    if out.dtype != q.dtype:
        fail(
            f"The output of `{name}` is {out.dtype} for {q.dtype} inputs: accumulate in float32 "
            "if you like, but return the input dtype (out.to(q.dtype))."
        )
    return out


def _alignment_retry(call_fn, q, k, v, tol):
    """``(diagnosis, retry)``: causal right when S = T and unmasked right at this S ≠ T.

    Both at once leave only the offset of the mask between queries and keys to blame. The
    square problem keeps the last ``min(T, S)`` queries and keys, whose causal mask is the plain
    lower triangle.
    """
    T, S = q.shape[-2], k.shape[-2]
    n = min(T, S)
    qs, ks, vs = q[..., T - n :, :], k[..., S - n :, :], v[..., S - n :, :]

    def retry() -> bool:
        square = close(call_fn(qs, ks, vs, True), oracle(qs, ks, vs, True), tol)
        return square and close(call_fn(q, k, v, False), oracle(q, k, v, False), tol)

    why = (
        f"Your causal output is right when S = T, and the unmasked one is right for T={T}, "
        f"S={S}, but causal with S ≠ T is wrong: the mask is misaligned; the T queries are the "
        "last T of the S positions, so query i may attend key j iff j <= i + S − T (S − T = "
        f"{S - T} here)."
    )
    return why, retry


# ----------------------------------------------------------------------------- tiled_attention


def _measured_tiled(fn, q, k, v, block, causal) -> tuple[torch.Tensor, Measured]:
    """The learner's output and what the call ran; PyTorch's attention refused in every cell."""
    __tracebackhide__ = True
    kwargs = {"block_size": block, "causal": causal}
    with measure() as ran:
        out = call(fn, TILED, (q, k, v), kwargs)
    if ran.sdpa:
        fail(
            f"`{TILED}` calls `{ran.sdpa}`, PyTorch's own attention: build each block's scores "
            "with q @ kᵀ and combine the blocks with your own running max, sum and output."
        )
    return _expect_output(out, TILED, q, v, _inputs(q, k, v, causal)), ran


def _call_tiled(fn, q, k, v, block, causal) -> torch.Tensor:
    __tracebackhide__ = True
    return _measured_tiled(fn, q, k, v, block, causal)[0]


def _tiled_retries(fn, q, k, v, block, causal, tol):
    """(diagnosis, retry) pairs: the same inputs made easier, from most to least specific."""
    T, S = q.shape[-2], k.shape[-2]

    def one_block() -> bool:
        return close(_call_tiled(fn, q, k, v, S, causal), oracle(q, k, v, causal), tol)

    def whole_blocks() -> bool:
        s = S // block * block
        ks, vs = k[..., :s, :], v[..., :s, :]
        return close(_call_tiled(fn, q, ks, vs, block, causal), oracle(q, ks, vs, causal), tol)

    def same_blocks(q, k, v, causal) -> torch.Tensor:
        return _call_tiled(fn, q, k, v, block, causal)

    retries = []
    if S % block and S > block:
        retries.append(
            (
                f"Your output is right when block_size divides S but wrong for S={S}, "
                f"block_size={block}: the last, partial block of keys is lost or mis-sliced; loop "
                "over range(0, S, block_size) and slice k[..., start:start + block_size, :].",
                whole_blocks,
            )
        )
    if causal and S != T:
        retries.append(_alignment_retry(same_blocks, q, k, v, tol))
    if block < S:
        retries.append(
            (
                "Your output is right when all keys fit in one block (block_size ≥ S) but wrong "
                "with several blocks: when the running max grows, multiply both l and acc by "
                "exp(m_old − m_new) before adding the new block, and divide by l once, after the "
                "loop.",
                one_block,
            )
        )
    return retries


def _check_tiled_case(fn, q, k, v, block, causal) -> None:
    __tracebackhide__ = True
    before = [t.clone() for t in (q, k, v)]
    out = _call_tiled(fn, q, k, v, block, causal)
    expect_unmodified(before, [q, k, v], TILED)
    tol = tolerance(q.dtype)
    if not close(out, oracle(q, k, v, causal), tol):
        retries = _tiled_retries(fn, q, k, v, block, causal, tol)
        fail(diagnose(out, q, k, v, causal, block, retries, tol))


def _tiled_cases(gen, causal: bool, thorough: bool):
    """``(B, nh, T, S, hs, block)`` cases, fixed then random (at most 8 blocks a side)."""
    if causal:
        fixed = [(1, 2, 12, 12, 8, 4), (2, 1, 10, 10, 4, 3), (1, 2, 5, 13, 8, 4)]
        fixed += [(1, 1, 7, 16, 4, 5)]
    else:
        fixed = [(2, 2, 9, 9, 8, 4), (1, 3, 6, 11, 4, 4), (2, 1, 5, 7, 8, 3), (1, 2, 1, 10, 8, 4)]
        fixed += [(1, 1, 4, 9, 8, 16), (1, 1, 3, 5, 4, 1)]
    yield from fixed
    for _ in range(4 if thorough else 1):
        T, S = randint(gen, 1, 40), randint(gen, 1, 40)
        if causal and S < T and not thorough:
            T, S = S, T
        B, nh = randint(gen, 1, 2), randint(gen, 1, 3)
        hs, block = randint(gen, 1, 16), randint(gen, 1, 12)
        yield B, nh, T, S, hs, few_blocks(block, T, S)


@one_thread
def check_tiled_values(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Non-causal ``tiled_attention`` equals SDPA: T ≠ S, ragged blocks, large scores, dtypes."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for B, nh, T, S, hs, block in _tiled_cases(gen, False, thorough):
        _check_tiled_case(fn, *_qkv(gen, B, nh, T, S, hs), block, False)
    # scores spread over hundreds: exp overflows unless the running max is subtracted
    _check_tiled_case(fn, *_qkv(gen, 1, 2, 6, 24, 8, scale=60.0), 5, False)
    q, k, v = _qkv(gen, 1, 1, 100, 100, 8)  # the default block_size (64) leaves a partial block
    with measure() as ran:
        out = _expect_output(call(fn, TILED, (q, k, v)), TILED, q, v, describe((q, k, v)))
    if ran.sdpa:
        fail(f"`{TILED}` calls `{ran.sdpa}`, PyTorch's own attention: write the loop yourself.")
    if not close(out, oracle(q, k, v, False), tolerance(q.dtype)):
        fail("`tiled_attention(q, k, v)` with the default block_size=64 and S=100 is wrong.")
    dtypes = (torch.float64, torch.float16, torch.bfloat16) if thorough else (torch.float64,)
    for dtype in dtypes:
        _check_tiled_case(fn, *_qkv(gen, 1, 2, 7, 13, 8, dtype), 4, False)


@one_thread
def check_tiled_causal(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Causal ``tiled_attention`` (bottom-right) equals SDPA with the mask j <= i + S - T.

    Visible cases have S >= T; ``thorough`` adds S < T, where the first T - S queries attend
    to nothing and must give zeros.
    """
    __tracebackhide__ = True
    gen = make_generator(seed)
    cases = list(_tiled_cases(gen, True, thorough))
    if thorough:
        cases += [(1, 2, 11, 6, 8, 4), (2, 1, 9, 4, 4, 4)]
    for B, nh, T, S, hs, block in cases:
        _check_tiled_case(fn, *_qkv(gen, B, nh, T, S, hs), block, True)


def _memory_cases(thorough: bool):
    """``(B, nh, T, S, hs, block, causal)``: one head's (T, S) scores are at least twice what a
    key-tiled loop holds at once (a few (B, nh, T, block) tiles, copies of k and v, the running
    state), and B·nh·T·S, every head's scores, at least as many."""
    yield 1, 2, 128, 512, 8, 32, False
    yield 1, 1, 128, 256, 8, 16, True
    if thorough:
        yield 2, 1, 128, 384, 8, 16, True
        yield 1, 1, 128, 400, 16, 24, False


def _memory_advice(big: Created, B, nh, T, S) -> str:
    if big.dtype == torch.bool or big.shape == (T, S):
        return (
            f"it builds a (T, S) = ({T}, {S}) mask, as big as the score matrix: compare the query "
            "positions with the current block's key positions instead, one block at a time"
        )
    if big.numel >= T * S:
        return "it materialises the full (T, S) score matrix: score one block of keys at a time"
    if big.shape[-1:] == (S,):
        return (
            "it tiles the queries but still scores every query block against all S keys: loop "
            "over blocks of keys and keep a running max, sum and output per query"
        )
    return (
        "it keeps every block's scores alive at once, the score matrix in pieces: consume each "
        "block into the running max, sum and output before scoring the next"
    )


@one_thread
def check_tiled_memory(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``tiled_attention`` never holds as many numbers as one head's (T, S) score matrix.

    Precisely: the tensors the call's operators create (views and in-place results create none),
    each alive from the operator that made it to the last one that reads it, never hold ``T * S``
    numbers at once (:mod:`.measure`), on shapes where a correct key-tiled loop holds at
    most half of that. Chunks each under the bar but alive together count together. The output
    must also be right.
    """
    __tracebackhide__ = True
    gen = make_generator(seed)
    for B, nh, T, S, hs, block, causal in _memory_cases(thorough):
        q, k, v = _qkv(gen, B, nh, T, S, hs)
        out, ran = _measured_tiled(fn, q, k, v, block, causal)
        if ran.peak >= T * S:
            fail(
                f"`{TILED}` held {ran.peak:,} numbers at once for T={T}, S={S}, "
                f"block_size={block}, as many as one head's (T, S) scores (its largest tensor: "
                f"{ran.largest.shape}): {_memory_advice(ran.largest, B, nh, T, S)}."
            )
        if not close(out, oracle(q, k, v, causal), tolerance(q.dtype)):
            fail(f"`{TILED}` is wrong for {_inputs(q, k, v, causal, block)}: fix the values first.")


@one_thread
def check_tiled_no_sdpa(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``tiled_attention`` computes attention itself: none of PyTorch's attention operators runs
    (every call of the other checks refuses them too)."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for causal in (False, True):
        q, k, v = _qkv(gen, 1, 2, 9, 9, 8)
        out = _call_tiled(fn, q, k, v, 4, causal)
        if not close(out, oracle(q, k, v, causal), tolerance(q.dtype)):
            fail(f"`{TILED}` is wrong for {_inputs(q, k, v, causal, 4)}: fix the values first.")


# ----------------------------------------------------------------------------- triton_attention


def _skip_without_triton() -> bool:
    if not triton_support.AVAILABLE:
        print(triton_support.SKIP_MESSAGE)
        return True
    return False


def _call_triton(fn, q, k, v, causal) -> torch.Tensor:
    __tracebackhide__ = True
    device = torch.device("cuda") if triton_support.MODE == "gpu" else torch.device("cpu")
    args = tuple(t.to(device) for t in (q, k, v))
    try:
        out = call(fn, TRITON, args, {"causal": causal})
    except CheckFailure as exc:
        if "NotImplementedError" in str(exc) or "NotImplementedError" in repr(exc.__cause__):
            not_written(
                f"`{TRITON}` is not implemented yet: replace `raise NotImplementedError()` in "
                "the kernel with the online-softmax update."
            )
        raise
    return _expect_output(out, TRITON, q, v, _inputs(q, k, v, causal))


def _triton_retries(fn, q, k, v, causal, block, tol):
    S = k.shape[-2]

    def first(s) -> bool:
        ks, vs = k[..., :s, :], v[..., :s, :]
        return close(_call_triton(fn, q, ks, vs, causal), oracle(q, ks, vs, causal), tol)

    retries = []
    if S % block and S > block:
        retries.append(
            (
                f"Your kernel is right when S is a multiple of BLOCK_N={block} but wrong for "
                f"S={S}: "
                "the padded key columns (cols >= S, loaded as zeros) must get a score of -inf.",
                lambda: first(S // block * block),
            )
        )
    if causal and S != q.shape[-2]:
        retries.append(_alignment_retry(partial(_call_triton, fn), q, k, v, tol))
    if S > block:
        retries.append(
            (
                f"Your kernel is right when all keys fit in one block (S ≤ BLOCK_N={block}) but "
                "wrong "
                "with several: when the running max grows, multiply l_i and acc by "
                "exp2(m_i − m_new) before adding the new block.",
                lambda: first(block),
            )
        )
    return retries


def _check_triton_case(fn, q, k, v, causal) -> None:
    __tracebackhide__ = True
    out = _call_triton(fn, q, k, v, causal)
    on_gpu = triton_support.MODE == "gpu"
    tol = tolerance(q.dtype, on_gpu=on_gpu)
    if not close(out, oracle(q, k, v, causal), tol):
        block = triton_support.launch_config(q)["BLOCK_N"]
        retries = _triton_retries(fn, q, k, v, causal, block, tol)
        fail(diagnose(out, q, k, v, causal, block, retries, tol, triton=True, on_gpu=on_gpu))


_TRITON_CASES = {
    # (B, nh, T, S, hs, dtype): tiny, since the interpreter costs milliseconds per block step
    False: [(1, 2, 40, 40, 16, torch.float32), (1, 1, 24, 50, 32, torch.float16)],
    True: [(1, 2, 40, 40, 16, torch.float32), (1, 1, 20, 45, 16, torch.float16)],
}
_TRITON_THOROUGH = {
    False: [(2, 1, 33, 64, 64, torch.float32), (1, 1, 64, 17, 16, torch.float16)],
    True: [(1, 1, 64, 64, 32, torch.float16), (1, 1, 45, 20, 16, torch.float32)],
}


def _check_triton(fn, causal, seed, thorough) -> None:
    __tracebackhide__ = True
    if _skip_without_triton():
        return
    gen = make_generator(seed)
    cases: Sequence = _TRITON_CASES[causal] + (_TRITON_THOROUGH[causal] if thorough else [])
    for B, nh, T, S, hs, dtype in cases:
        _check_triton_case(fn, *_qkv(gen, B, nh, T, S, hs, dtype), causal)


def check_triton_values(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``triton_attention`` equals SDPA in float32 and float16, ragged T and S, S ≠ T.

    Prints a message and passes where Triton cannot be imported (macOS, Windows).
    """
    __tracebackhide__ = True
    _check_triton(fn, False, seed, thorough)


def check_triton_causal(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Causal ``triton_attention`` (bottom-right) equals SDPA with the mask j <= i + S - T."""
    __tracebackhide__ = True
    _check_triton(fn, True, seed, thorough)
