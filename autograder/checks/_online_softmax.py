"""Tiled (online-softmax) attention: the oracle, the classic wrong answers, the diagnosis.

Shape legend: ``B`` batch, ``nh`` heads, ``T`` query length, ``S`` key/value length,
``hs`` head size, ``nb`` number of key blocks.

Causal attention is aligned bottom-right: query ``i`` may attend to key ``j`` iff
``j <= i + S - T``; a query with no allowed key gets zeros.

Each wrong answer is a closed form of what a buggy loop computes, derived once by hand. Writing
``m_b`` for the running max after key block ``b`` and ``s_j`` for a score in block ``b(j)``, a
loop that *forgets to rescale* weighs key ``j`` by ``exp(s_j - m_b(j))``; one that
*normalises each block* adds up per-block softmaxes. They are built from full score matrices,
which only the checker may afford. (An inverted rescaling factor, ``exp(m_new - m_old)``, is not
listed: it overflows to NaN on the first block, which the checks diagnose before these.)

:func:`diagnose` turns a wrong output into one sentence: NaN first, then an output that misses
only by more rounding than its dtype allows, then rows that should be zero, then the closed
forms, then retries of the learner's function on easier inputs, then all-zero rows.
Tolerances compare against float64 (:func:`tolerance`) at the precision the exercise allows:
float32 2e-5 (also for float64 inputs, since accumulating in float32 and casting back is
allowed), float32 through TF32 on a GPU 3e-3, float16 5e-3, bfloat16 3e-2, each both absolute
and relative. An error above the tolerance but within :func:`rounding_band` (1e-2 for float32
and float64 inputs) is a precision problem, not a wrong update rule, and is diagnosed as one.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._core import CheckFailure, describe, has_nan_or_inf

LOG2E = 1.0 / math.log(2.0)
# float64 inputs may be accumulated in float32 (the exercise allows it): float32's tolerance
_TOL = {torch.float64: 2e-5, torch.float32: 2e-5, torch.float16: 5e-3, torch.bfloat16: 3e-2}
_TOL_GPU = {torch.float32: 3e-3}  # tl.dot on float32 runs in TF32 on a GPU
# Beyond the tolerance but within this, an output is a correct loop run at too low a precision
# (for float32 inputs, float16 accumulators land near 1e-3, bfloat16 ones near 1e-2): every
# wrong update rule the catalogue knows misses by far more.
_ROUNDING = {torch.float64: 1e-2, torch.float32: 1e-2, torch.float16: 5e-2, torch.bfloat16: 1e-1}
_ROUNDING_GPU = {torch.float32: 3e-2}


def allowed_keys(T: int, S: int, causal: bool, shift: int = 0) -> torch.Tensor | None:
    """``(T, S)`` bool, True where query i may attend key j: ``j <= i + S - T + shift``."""
    if not causal:
        return None
    return torch.ones(T, S, dtype=torch.bool).tril(S - T + shift)


def _f64(*ts: torch.Tensor) -> list[torch.Tensor]:
    return [t.detach().to("cpu", torch.float64) for t in ts]


def _attend(q, k, v, allowed, scale=None) -> torch.Tensor:
    """SDPA with a boolean mask; rows with no allowed key give zeros."""
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=scale)
    if allowed is not None:
        out = out.masked_fill(~allowed.any(-1, keepdim=True), 0.0)  # (T, 1) broadcasts
    return torch.nan_to_num(out)


def oracle(q, k, v, causal: bool) -> torch.Tensor:
    """The right answer, float64 on the CPU: ``(B, nh, T, hs)``."""
    q, k, v = _f64(q, k, v)
    return _attend(q, k, v, allowed_keys(q.shape[-2], k.shape[-2], causal))


def _scores(q, k, allowed) -> torch.Tensor:
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, nh, T, S)
    return s if allowed is None else s.masked_fill(~allowed, float("-inf"))


def _per_block(s: torch.Tensor, block: int, reduce) -> torch.Tensor:
    """Apply ``reduce`` to each key block of ``s``; broadcast the result back over its keys."""
    S = s.shape[-1]
    nb = math.ceil(S / block)
    padded = F.pad(s, (0, nb * block - S), value=float("-inf"))  # (B, nh, T, nb*block)
    per = reduce(padded.unflatten(-1, (nb, block)))  # (B, nh, T, nb)
    return per, per.repeat_interleave(block, -1)[..., :S]  # (B, nh, T, nb), (B, nh, T, S)


def _weigh(s, shift, v, normalise=True) -> torch.Tensor:
    """Weights exp(s - shift) (0 where s is -inf) applied to v, divided by their sum or not."""
    w = torch.where(torch.isinf(s), 0.0, torch.exp(s - shift))  # (B, nh, T, S)
    out = w @ v  # (B, nh, T, S) @ (B, nh, S, hs) -> (B, nh, T, hs)
    if not normalise:
        return out
    total = w.sum(-1, keepdim=True)  # (B, nh, T, 1)
    return torch.where(total > 0, out / total.clamp_min(1e-300), 0.0)


def variants(q, k, v, causal: bool, block: int, triton: bool = False) -> dict[str, torch.Tensor]:
    """Diagnosis -> what a classic wrong implementation returns on these inputs (float64)."""
    q, k, v = _f64(q, k, v)
    T, S = q.shape[-2], k.shape[-2]
    allowed = allowed_keys(T, S, causal)
    s = _scores(q, k, allowed)
    block_max, _ = _per_block(s, block, lambda b: b.amax(-1))  # (B, nh, T, nb)
    running = block_max.cummax(-1).values  # (B, nh, T, nb): m after each block
    running_col = running.repeat_interleave(block, -1)[..., :S]  # (B, nh, T, S)
    row_max = s.amax(-1, keepdim=True)  # (B, nh, T, 1)
    _, block_lse = _per_block(s, block, lambda b: torch.logsumexp(b, -1))  # (B, nh, T, S)
    n_blocks = math.ceil(S / block)
    l_, m_, exp = ("l_i", "m_i", "exp2") if triton else ("l", "m_old", "exp")
    rescale = f"{exp}({m_} − m_new)"
    out = {}
    if n_blocks > 1:
        out[
            "Your output matches a loop that does not rescale when the running max grows: "
            f"multiply both {l_} and acc by {rescale} before adding the new block's "
            "terms."
        ] = _weigh(s, running_col, v)
        per_block = _weigh(s, block_lse, v, normalise=False)
        out[
            "Your output matches the sum of per-block softmax outputs: do not divide each "
            f"block by its own sum; keep acc and {l_} unnormalised and divide once at the "
            "end."
        ] = per_block
        out[
            "Your output matches the mean of per-block softmax outputs: blocks carry different "
            "total weights, so merge them through the running max and sum instead."
        ] = per_block / n_blocks
        w = torch.where(torch.isinf(s), 0.0, torch.exp(s - row_max))  # (B, nh, T, S)
        last = torch.arange(S) >= (n_blocks - 1) * block  # (S,): keys of the last block
        total = w.sum(-1, keepdim=True)  # (B, nh, T, 1)
        out[
            "Your output matches the last block's values only: accumulate with "
            f"acc = acc·{rescale} + p @ v instead of overwriting acc."
        ] = torch.where(total > 0, (w * last) @ v / total.clamp_min(1e-300), 0.0)
    out[
        f"Your output matches {exp}(s − m) @ v without the division: divide acc by the running "
        f"sum {l_} once, after the last block."
    ] = _weigh(s, row_max, v, normalise=False)
    out[
        "Your output matches attention without the 1/√hs scaling: multiply the scores by "
        "1/√hs (hs = q.shape[-1])."
    ] = _attend(q, k, v, allowed, scale=1.0)
    out["Your output matches scores divided by hs: scale by 1/√hs instead."] = _attend(
        q, k, v, allowed, scale=1.0 / q.shape[-1]
    )
    if triton:
        out[
            "Your weights are too sharp by a factor log2(e): qk_scale already holds log2(e)/√hs, "
            "so use tl.math.exp2 for both p and alpha, never tl.exp."
        ] = _attend(q, k, v, allowed, scale=LOG2E / math.sqrt(q.shape[-1]))
        out[
            "Your output matches scores that were never multiplied by qk_scale: multiply q·kᵀ "
            "by qk_scale before the max and exp2."
        ] = _attend(q, k, v, allowed, scale=math.log(2))
    if causal:
        out.update(_causal_variants(q, k, v, block))
    return out


def _causal_variants(q, k, v, block: int) -> dict[str, torch.Tensor]:
    T, S = q.shape[-2], k.shape[-2]
    pos_in_block = torch.arange(S) % block  # (S,): key index relative to its block's start
    local = pos_in_block[None, :] <= torch.arange(T)[:, None] + S - T  # (T, S)
    out = {
        "Your causal mask excludes the diagonal: query i may attend key j when j <= i + S − T "
        "(itself included), so use <=, not <.": _attend(q, k, v, allowed_keys(T, S, True, -1)),
        "Your causal mask lets each query see one future key: allow j <= i + S − T, not "
        "j <= i + S − T + 1.": _attend(q, k, v, allowed_keys(T, S, True, 1)),
        "`causal=True` is ignored: mask the keys with j > i + S − T in every block.": _attend(
            q, k, v, None
        ),
        "Your causal mask compares the query with key positions inside the block: add the "
        "block's start to the key index (j = start + arange(block)).": _attend(q, k, v, local),
    }
    if S != T:
        out[
            "Your causal mask is aligned top-left (j <= i, like SDPA's is_causal): here the T "
            "queries are the last T of S positions, so allow j <= i + S − T."
        ] = _attend(q, k, v, torch.ones(T, S, dtype=torch.bool).tril())
    return out


# ----------------------------------------------------------------------------- diagnosis


def tolerance(dtype: torch.dtype, on_gpu: bool = False) -> float:
    """Absolute and relative tolerance against the float64 oracle for outputs of ``dtype``."""
    return (_TOL_GPU if on_gpu else {}).get(dtype, _TOL[dtype])


def rounding_band(dtype: torch.dtype, on_gpu: bool = False) -> float:
    """How far past :func:`tolerance` an output of ``dtype`` may miss from rounding alone."""
    return (_ROUNDING_GPU if on_gpu else {}).get(dtype, _ROUNDING[dtype])


def close(out: torch.Tensor, expected: torch.Tensor, tol: float) -> bool:
    """Same shape as the float64 ``expected`` and within ``tol``, on whatever device."""
    out = out.detach().to("cpu", torch.float64)
    return out.shape == expected.shape and torch.allclose(out, expected, atol=tol, rtol=tol)


def _empty_rows(q, k, causal) -> torch.Tensor:
    """``(T,)`` bool: the queries that may attend to no key."""
    allowed = allowed_keys(q.shape[-2], k.shape[-2], causal)
    return ~allowed.any(-1) if allowed is not None else torch.zeros(q.shape[-2], dtype=torch.bool)


def _nan_message(out, q, k, causal, inputs, triton) -> str | None:
    """Why ``out`` holds NaN or inf, if it does."""
    if not has_nan_or_inf(out):
        return None
    empty = _empty_rows(q, k, causal)  # (T,)
    finite = torch.isfinite(out.detach().cpu()).all(-1)  # (B, nh, T)
    bad = ~finite.all(0).all(0)  # (T,): queries with a NaN or inf in some batch or head
    l_, m_, exp = ("l_i", "m_i", "exp2") if triton else ("l", "m", "exp")
    if empty.any() and torch.equal(bad, empty):
        return (
            f"Your output is NaN for the queries that may attend to no key (causal with S < T, "
            f"inputs {inputs}): while {m_} is still -inf, {exp}(s − {m_}) is NaN, so subtract 0 "
            f"instead of {m_} in that case and divide by {l_} only where {l_} > 0 (those rows "
            "must be all zeros)."
        )
    return (
        f"Your output holds NaN or inf (inputs {inputs}): subtract the running maximum, updated "
        f"every block with m_new = maximum({m_}, block max), before {exp}, and rescale by "
        f"{exp}({m_} − m_new), which is ≤ 1 (and 0 for the first block, while {m_} is -inf)."
    )


def _rounding_message(out, q, k, v, causal, tol, band, inputs, triton) -> str | None:
    """Why ``out`` misses by more than ``tol`` but less than ``band``: precision, not a rule."""
    expected = oracle(q, k, v, causal)
    if not close(out, expected, band):
        return None
    error = (out.detach().to("cpu", torch.float64) - expected).abs().max().item()
    state = "m_i, l_i and acc" if triton else "m, l and acc"
    return (
        f"Your output is off by {error:.1e} for inputs {inputs}, more than the {tol:g} that "
        f"{str(q.dtype).removeprefix('torch.')} inputs allow but too little for a wrong update "
        f"rule: the loop looks right but loses precision somewhere; compute the scores and keep "
        f"{state} in float32 or wider (never float16 or bfloat16), and cast to the input dtype "
        "only at the end."
    )


def diagnose(out, q, k, v, causal, block, retries, tol, triton=False, on_gpu=False) -> str:
    """One sentence naming the probable mistake behind a wrong ``out``.

    ``retries`` are ``(diagnosis, retry)`` pairs: ``retry()`` calls the learner's function again
    on easier inputs and returns True when it is right there, which locates the mistake.
    ``triton`` words the advice with the kernel's names (``l_i``, ``m_i``, ``exp2``).
    No rule is blamed for an output within :func:`rounding_band` of the right one (``on_gpu``:
    the band of a kernel that ran on a GPU).
    """
    inputs = describe((q, k, v), {"causal": causal})
    nan = _nan_message(out, q, k, causal, inputs, triton)
    if nan:
        return nan
    band = rounding_band(q.dtype, on_gpu)
    rounding = _rounding_message(out, q, k, v, causal, tol, band, inputs, triton)
    if rounding:
        return rounding
    empty = _empty_rows(q, k, causal)  # (T,)
    bad = ~torch.isclose(
        out.detach().cpu().double(), oracle(q, k, v, causal), atol=tol, rtol=tol
    ).all(-1)  # (B, nh, T): queries whose output is wrong
    if empty.any() and not (bad & ~empty).any():
        l_ = "l_i" if triton else "l"
        return (
            f"Your output is right except for the queries that may attend to no key (causal with "
            f"S < T, inputs {inputs}): their output must be all zeros; a finite fill value such "
            f"as -1e30 gives them weight anyway, so mask with -inf and divide only where {l_} > 0."
        )
    for why, wrong in variants(q, k, v, causal, block, triton).items():
        if close(out, wrong, max(tol, 1e-4)):
            return why
    for why, retry in retries:
        try:
            good = retry()
        except CheckFailure:
            good = False
        if good:
            return why
    zero_rows = (out.detach().cpu() == 0).all(-1) & (oracle(q, k, v, causal) != 0).any(-1)
    if zero_rows.any():
        l_, exp = ("l_i", "exp2(m_i − m_new)") if triton else ("l", "exp(m_old − m_new)")
        return (
            f"Some rows of your output are all zeros although their queries have keys: {l_} "
            f"ended as 0 or NaN, which the final {l_} > 0 guard turned into 0; rescale {l_} and "
            f"acc by {exp}, which is ≤ 1 (0 on the first block), and add every block's sum."
        )
    if triton:
        rules = (
            "m_new = max(m_i, row max of qk), l_i = l_i·exp2(m_i − m_new) + "
            "Σ exp2(qk − m_new), acc = acc·exp2(m_i − m_new) + exp2(qk − m_new) @ v, "
            "out = acc / l_i"
        )
    else:
        rules = (
            "m_new = max(m, block max), l = l·exp(m − m_new) + Σ exp(s − m_new), "
            "acc = acc·exp(m − m_new) + exp(s − m_new) @ v, out = acc / l"
        )
    return (
        f"Your output differs from F.scaled_dot_product_attention for inputs {inputs}: compare "
        f"your loop with the update rules {rules}."
    )
