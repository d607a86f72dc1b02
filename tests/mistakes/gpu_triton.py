"""Correct and wrong Triton attention kernels for notebook 06's ``check_triton_*``.

Shape legend: ``B`` batch, ``nh`` heads, ``T`` query length, ``S`` key/value length,
``hs`` head size. One kernel with a compile-time ``VARIANT`` switch: variant 0 is the notebook's
kernel, the others each change one thing. Importing :mod:`autograder.tools.triton_support` first
switches the interpreter on when there is no GPU, before ``@triton.jit`` runs.
"""

from __future__ import annotations

import math
from functools import partial

import torch

from autograder.checks import nb06_gpu as checks
from autograder.tools import triton_support
from autograder.tools.triton_support import tl, triton

from . import HIDDEN, MISSED, VISIBLE, Correct, Mistake, tried

VARIANTS = {
    "correct": 0,
    "always masked": 1,
    "natural exp": 2,
    "finite mask value": 3,
    "no rescale": 10,
    "no division": 11,
    "exp instead of exp2": 12,
    "no column mask": 13,
    "causal excludes diagonal": 14,
    "causal ignored": 15,
    "no qk_scale": 16,
    "no guard for empty rows": 17,
}


@triton.jit
def _kernel(
    Q,
    K,
    V,
    Out,
    T,
    S,
    qk_scale,
    HS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    EVEN_S: tl.constexpr,
    VARIANT: tl.constexpr,
):
    start_m = tl.program_id(0)
    z = tl.program_id(1).to(tl.int64)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,)
    offs_n = tl.arange(0, BLOCK_N)  # (BLOCK_N,)
    offs_d = tl.arange(0, HS)  # (HS,)
    q = tl.load(
        Q + z * T * HS + offs_m[:, None] * HS + offs_d[None, :], mask=offs_m[:, None] < T, other=0.0
    )  # (BLOCK_M, HS)
    k_ptrs = K + z * S * HS + offs_n[:, None] * HS + offs_d[None, :]  # (BLOCK_N, HS)
    v_ptrs = V + z * S * HS + offs_n[:, None] * HS + offs_d[None, :]  # (BLOCK_N, HS)
    neg = -1.0e30 if VARIANT == 3 else float("-inf")
    m_i = tl.full([BLOCK_M], neg, dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HS], dtype=tl.float32)
    end_n = S
    if CAUSAL and VARIANT != 15:
        end_n = tl.minimum(S, tl.maximum(0, (start_m + 1) * BLOCK_M + S - T))
    for start_n in range(0, end_n, BLOCK_N):
        cols = start_n + offs_n  # (BLOCK_N,)
        k = tl.load(k_ptrs, mask=cols[:, None] < S, other=0.0)  # (BLOCK_N, HS)
        v = tl.load(v_ptrs, mask=cols[:, None] < S, other=0.0)  # (BLOCK_N, HS)
        qk = tl.dot(q, tl.trans(k))  # (BLOCK_M, BLOCK_N)
        if VARIANT == 2:
            qk = qk * (qk_scale / 1.4426950408889634)  # natural-log units
        elif VARIANT != 16:
            qk = qk * qk_scale
        if CAUSAL or not EVEN_S or VARIANT == 1:
            allowed = cols[None, :] < S
            if VARIANT == 13:
                allowed = cols[None, :] >= 0
            if CAUSAL and VARIANT == 14:
                allowed = allowed & (cols[None, :] < offs_m[:, None] + S - T)
            elif CAUSAL and VARIANT != 15:
                allowed = allowed & (cols[None, :] <= offs_m[:, None] + S - T)
            qk = tl.where(allowed, qk, neg)
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
        if VARIANT == 2 or VARIANT == 12:
            alpha = tl.exp(m_i - m_ref)
            p = tl.exp(qk - m_ref[:, None])
        else:
            alpha = tl.math.exp2(m_i - m_ref)
            p = tl.math.exp2(qk - m_ref[:, None])
        if VARIANT == 10:
            alpha = alpha * 0.0 + 1.0
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
        k_ptrs += BLOCK_N * HS
        v_ptrs += BLOCK_N * HS
    if VARIANT == 11:
        out = acc
    elif VARIANT == 17:
        out = acc / l_i[:, None]
    else:
        out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    if VARIANT == 3 and CAUSAL:  # a finite mask value leaves rows with no key non-zero
        out = tl.where(offs_m[:, None] + S - T >= 0, out, 0.0)
    tl.store(
        Out + z * T * HS + offs_m[:, None] * HS + offs_d[None, :],
        out.to(Out.dtype.element_ty),
        mask=offs_m[:, None] < T,
    )


def triton_variant(q, k, v, causal=False, config=None, *, variant: int = 0):
    """The notebook's launcher, for one variant of the kernel."""
    config = config or triton_support.launch_config(q)
    triton_support.check_inputs(q, k, v, config)
    B, nh, T, hs = q.shape
    S = k.shape[-2]
    q3, k3, v3 = (t.reshape(B * nh, -1, hs).contiguous() for t in (q, k, v))  # (B*nh, T|S, hs)
    out = torch.empty_like(q3)  # (B*nh, T, hs)
    grid = (triton.cdiv(T, config["BLOCK_M"]), B * nh)
    _kernel[grid](
        q3,
        k3,
        v3,
        out,
        T,
        S,
        1.4426950408889634 / math.sqrt(hs),
        HS=hs,
        BLOCK_M=config["BLOCK_M"],
        BLOCK_N=config["BLOCK_N"],
        CAUSAL=causal,
        EVEN_S=S % config["BLOCK_N"] == 0,
        VARIANT=variant,
        num_warps=config["num_warps"],
        num_stages=config["num_stages"],
    )
    return out.reshape(B, nh, T, hs)  # (B, nh, T, hs)


def _variant(name: str):
    return partial(triton_variant, variant=VARIANTS[name])


def triton_stub(q, k, v, causal=False):
    """The released notebook: the kernel raises inside (here, the interpreter wraps it)."""
    raise triton.runtime.errors.InterpreterError(repr(NotImplementedError()))


CORRECT_TRITON = {
    name: _variant(name)
    for name in ("correct", "always masked", "natural exp", "finite mask value")
}

MISTAKES_TRITON = [
    Mistake("stub", triton_stub, checks.check_triton_values, "not implemented yet"),
    Mistake("no rescale", _variant("no rescale"), checks.check_triton_values, "does not rescale"),
    Mistake(
        "no division", _variant("no division"), checks.check_triton_values, "without the division"
    ),
    Mistake(
        "exp instead of exp2",
        _variant("exp instead of exp2"),
        checks.check_triton_values,
        "log2(e)",
    ),
    Mistake(
        "no column mask",
        _variant("no column mask"),
        checks.check_triton_values,
        "multiple of BLOCK_N",
    ),
    Mistake("no qk_scale", _variant("no qk_scale"), checks.check_triton_values, "qk_scale"),
    Mistake(
        "causal excludes diagonal",
        _variant("causal excludes diagonal"),
        checks.check_triton_causal,
        "excludes the diagonal",
    ),
    Mistake("causal ignored", _variant("causal ignored"), checks.check_triton_causal, "ignored"),
]

# caught only by the hidden (thorough) tests: causal with S < T
MISTAKES_TRITON_THOROUGH = [
    Mistake(
        "no guard for empty rows",
        _variant("no guard for empty rows"),
        checks.check_triton_causal,
        "attend to no key",
    ),
]

SKIP = None if triton_support.AVAILABLE else "Triton is not installed"
MISTAKES = tried(MISTAKES_TRITON, runs=(VISIBLE,))
MISTAKES += tried(MISTAKES_TRITON_THOROUGH, runs=(HIDDEN,), missed=MISSED)
# The notebook's kernel is tried with the hidden (thorough) test, the other right ones visibly.
CORRECT = [
    Correct(check, name, impl, runs=({"seed": 1, "thorough": name == "correct"},))
    for check in (checks.check_triton_values, checks.check_triton_causal)
    for name, impl in CORRECT_TRITON.items()
]
STUBS: list = []  # the released kernel is catalogued as the mistake "stub"
REPLAY: list = []  # the grader reports Triton cells as not verified
