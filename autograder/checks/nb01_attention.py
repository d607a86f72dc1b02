"""Checks for notebook 01: ``softmax`` and ``scaled_dot_product_attention``.

Shape legend: ``B`` batch, ``T`` query length, ``S`` key/value length, ``d_k`` query/key width,
``d_v`` value width, ``...`` any number of leading dimensions (batch, heads).

PyTorch is the oracle: ``torch.softmax`` and ``F.scaled_dot_product_attention``. The attention
weights come from the oracle too: attending with the identity matrix as values returns the weights.
Known-wrong answers (no scaling, inverted mask, ...) are the oracle called with the wrong arguments.
Every call of the learner's attention must run none of PyTorch's attention operators
(:mod:`.measure`): SDPA on views of the inputs is not attention written by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F

from autograder.torch_helpers import record_torch_calls

from ._core import (
    SOFTMAX_OVER_QUERIES,
    TOLERANCE,
    call,
    calls_packaged_mha,
    check_mask_use,
    close,
    describe,
    expect_dtype,
    expect_pair,
    expect_shape,
    expect_tensor,
    expect_unmodified,
    fail,
    find_calls,
    first_match,
    fmt_shape,
    has_nan_or_inf,
    make_generator,
    mixed_mask,
    randint,
    randn,
    rows_sum_to_one,
)
from .measure import measure

#: Learner-importable names that would compute this notebook's graded answers. In the grading
#: sandbox of any notebook whose test cells use these checks, they keep their names but raise.
ANSWERS_IN_TOOLS: dict[str, str] = {
    "autograder.tools.nb06_gpu_timing.naive_attention": (
        "the shapes and matches-torch cells: out, and weights from identity values"
    ),
    "autograder.tools.nb03_masks.sdpa_weights": (
        "the mask cell: PyTorch's masked weights, out = weights @ v"
    ),
}

SOFTMAX = "softmax"
SDPA = "scaled_dot_product_attention"
_SOFTMAX_BUILTINS = (
    "softmax",
    "log_softmax",
    "softmin",
    "_softmax",
    "_log_softmax",
    "_safe_softmax",
    "special_softmax",
    "special_log_softmax",
)
_TRANSPOSE_HINT = (
    "transpose only the last two dimensions of k with k.transpose(-2, -1) (not .T or "
    "transpose(1, 2)) so any number of leading dimensions works"
)


# ----------------------------------------------------------------------------- softmax


def _call_softmax(softmax: Callable, x: torch.Tensor, dim: int | None) -> torch.Tensor:
    __tracebackhide__ = True
    kwargs = {} if dim is None else {"dim": dim}
    out = expect_tensor(call(softmax, SOFTMAX, (x,), kwargs), SOFTMAX)
    expect_shape(out, x.shape, "The output of `softmax`", describe((x,), kwargs))
    return out


def _softmax_cases(gen: torch.Generator, thorough: bool) -> Iterator[tuple[tuple[int, ...], int]]:
    """``(shape, dim)`` pairs: fixed adversarial ones, then random ones."""
    yield from [((4, 7), -1), ((6, 6), 0), ((2, 3, 5), 1), ((3, 4, 5), -2), ((2, 5, 3), 0)]
    for _ in range(8 if thorough else 2):
        shape = tuple(randint(gen, 1, 12 if thorough else 6) for _ in range(randint(gen, 1, 4)))
        yield shape, randint(gen, -len(shape), len(shape) - 1)


def _softmax_mistake(out: torch.Tensor, x: torch.Tensor, dim: int) -> str:
    """One sentence explaining how ``out`` differs from ``torch.softmax(x, dim)``."""
    where = f"`softmax(x, dim={dim})` on shape {fmt_shape(x.shape)}"
    dim = dim % x.ndim
    for other in range(x.ndim):
        if other != dim and close(out, torch.softmax(x, other)):
            if other == x.ndim - 1:
                return f"{where} normalised over the last dimension: your code ignores `dim`."
            return f"{where} normalised along dim {other}: use `dim` in every reduction."
    if abs(float(out.sum()) - 1) < 1e-4:
        return f"{where} divided by the sum of the whole tensor: sum along `dim` with keepdim=True."
    if not rows_sum_to_one(out, dim):
        return (
            f"{where} does not sum to 1 along `dim`: reduce along `dim` with keepdim=True so the "
            "division broadcasts along the right axis."
        )
    return f"{where} sums to 1 but its values are not exp(x) / sum(exp(x)): check the formula."


def _ordinary_mistake(out: torch.Tensor, x: torch.Tensor, dim: int) -> str | None:
    """The diagnosis when ``out`` is not ``torch.softmax(x, dim)`` for ordinary values ``x``."""
    if has_nan_or_inf(out):
        return f"`softmax` returned NaN or inf for ordinary inputs of shape {fmt_shape(x.shape)}."
    return None if close(out, torch.softmax(x, dim)) else _softmax_mistake(out, x, dim)


def check_softmax_values(softmax: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``softmax(x, dim)`` equals ``torch.softmax`` for several shapes and any ``dim``."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for shape, dim in _softmax_cases(gen, thorough):
        x = 2 * randn(gen, *shape)
        mistake = _ordinary_mistake(_call_softmax(softmax, x, dim), x, dim)
        if mistake:
            fail(mistake)
    x = randn(gen, 3, 5)  # (3, 5)
    if not close(_call_softmax(softmax, x, None), torch.softmax(x, -1)):
        fail("`softmax(x)` called without `dim` should normalise the last dimension (dim=-1).")


def _stable_cases(gen: torch.Generator) -> Iterator[tuple[torch.Tensor, int, str]]:
    """``(x, dim, advice)``: inputs whose exp over- or underflows, with what to do about it."""
    big = 1e4 + randn(gen, 3, 6, dtype=torch.float32)  # (3, 6)
    overflow = "exp overflows, so subtract each row's maximum (amax over `dim`, keepdim=True)"
    yield big, -1, f"inputs like 1e4 give inf / inf: {overflow}"
    yield -big, -1, "inputs like -1e4 underflow to 0 / 0: subtract each row's maximum first"
    mixed = torch.cat([big, -big, 30 * randn(gen, 2, 6, dtype=torch.float32)])  # (8, 6)
    own_max = "subtract each row's own maximum (amax over `dim`), not the whole tensor's"
    yield mixed, -1, f"a row of -1e4 next to a row of 1e4 gives NaN: {own_max}"
    yield mixed.T.contiguous(), 0, f"with dim=0, columns of -1e4 and 1e4 give NaN: {own_max}"
    for dtype in (torch.float16, torch.bfloat16):
        half = (3 * randn(gen, 4, 5) + 100).to(dtype)  # (4, 5)
        yield half, -1, f"{dtype} overflows already at exp(12): {overflow}"


def check_softmax_stable(softmax: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """No NaN or inf for inputs like ±1e4 in float32, or large values in float16/bfloat16.

    A softmax that is already wrong on ordinary inputs of a case's shape gets the diagnosis of
    :func:`check_softmax_values` (say, the wrong ``dim``), never advice about stability that
    would contradict it.
    """
    __tracebackhide__ = True
    gen = make_generator(seed)
    cases = list(_stable_cases(gen))
    if thorough:
        wide = 1e4 * randn(gen, 16, 64, dtype=torch.float32)  # (16, 64)
        cases.append((wide, -1, "values spread over ±1e4 give NaN: subtract each row's maximum"))
    for x, dim, advice in cases:
        ordinary = 2 * randn(gen, *x.shape)  # same shape, values where any formula works
        mistake = _ordinary_mistake(_call_softmax(softmax, ordinary, dim), ordinary, dim)
        if mistake:
            fail(mistake)
        out = _call_softmax(softmax, x, dim)
        expect_dtype(out, x.dtype, "The output of `softmax`")
        if has_nan_or_inf(out):
            fail(f"`softmax` returned NaN or inf on shape {fmt_shape(x.shape)}: {advice}.")
        # rtol 1e-2 whatever the dtype: at scores of ±1e4 the output's rounding is relative
        atol = TOLERANCE[x.dtype][0]
        if not close(out, torch.softmax(x.double(), dim).to(x.dtype), atol=atol, rtol=1e-2):
            fail(
                f"`softmax` is wrong for large {str(x.dtype).removeprefix('torch.')} inputs of "
                f"shape {fmt_shape(x.shape)}: use exp(x - max) / sum(exp(x - max)) along `dim`."
            )


def check_softmax_no_builtin(softmax: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``softmax`` calls none of torch.softmax, Tensor.softmax, F.softmax, F.log_softmax."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    shapes = [(4, 5), (2, 3, 6)] + ([(8, 16, 32)] if thorough else [])
    for shape in shapes:
        for dim in (-1, 0):
            x = randn(gen, *shape, dtype=torch.float32)
            with record_torch_calls() as names:
                out = call(softmax, SOFTMAX, (x,), {"dim": dim})
            found = find_calls(names, _SOFTMAX_BUILTINS)
            if found:
                fail(
                    f"`softmax` calls the built-in `{found[0]}`: the exercise is to write it "
                    "yourself from torch.exp, a maximum and a sum."
                )
            if not (isinstance(out, torch.Tensor) and close(out, torch.softmax(x, dim))):
                fail("`softmax` is not right yet: make it match torch.softmax first (test above).")


def check_softmax_properties(softmax: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Input left unmodified, dtype kept, shift invariance, any number of leading dimensions."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for dtype in (torch.float32, torch.float64):
        for dim in (-1, 0):
            x = randn(gen, 3, 5, dtype=dtype)  # (3, 5)
            before = x.clone()
            out = _call_softmax(softmax, x, dim)
            expect_unmodified([before], [x], SOFTMAX)
            expect_dtype(out, dtype, "The output of `softmax`")
    x = randn(gen, 4, 6)  # (4, 6)
    shifted = x + 100 * randn(gen, 4, 1)  # (4, 6): one constant per row
    if not close(_call_softmax(softmax, shifted, -1), _call_softmax(softmax, x, -1)):
        fail(
            "`softmax(x + c)` differs from `softmax(x)` for a constant c per row: softmax only "
            "depends on differences within a row, so subtract the row maximum instead of clamping "
            "or rescaling."
        )
    shapes = [((7,), 0), ((2, 3, 4, 5), -1), ((2, 3, 4, 5), 2), ((2, 1, 3, 1, 4), -1)]
    if thorough:
        shapes += [((3, 4, 5, 6, 7), 1), ((2, 2, 2, 2, 2, 9), -3)]
    for shape, dim in shapes:
        x = randn(gen, *shape)
        if not close(_call_softmax(softmax, x, dim), torch.softmax(x, dim)):
            fail(
                f"`softmax` is wrong for a {len(shape)}-D input of shape {fmt_shape(shape)} with "
                f"dim={dim}: reduce only along `dim` (keepdim=True) so any number of dimensions "
                "works."
            )


# ------------------------------------------------------------ scaled dot-product attention


def _oracle(q, k, v, mask=None, scale=None) -> tuple[torch.Tensor, torch.Tensor]:
    """PyTorch's ``(out, weights)``; attending with identity values returns the weights."""
    eye = torch.eye(k.shape[-2], dtype=q.dtype)  # (S, S)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)  # (..., T, d_v)
    weights = F.scaled_dot_product_attention(q, k, eye, attn_mask=mask, scale=scale)  # (..., T, S)
    return out, weights


def _qkv(gen, lead, T, S, d_k, d_v, dtype=torch.float64):
    """Random ``q (*lead, T, d_k)``, ``k (*lead, S, d_k)``, ``v (*lead, S, d_v)``."""
    return (
        randn(gen, *lead, T, d_k, dtype=dtype),
        randn(gen, *lead, S, d_k, dtype=dtype),
        randn(gen, *lead, S, d_v, dtype=dtype),
    )


def _call_sdpa(fn, q, k, v, mask=None, hint=""):
    """Run the learner's attention and check the shapes of ``(out, weights)``."""
    __tracebackhide__ = True
    kwargs = {} if mask is None else {"mask": mask}
    inputs = describe((q, k, v), kwargs)
    with measure() as ran, record_torch_calls() as names:
        result = call(fn, SDPA, (q, k, v), kwargs, hint)
    builtin = ran.sdpa or ("multi_head_attention_forward" if calls_packaged_mha(names) else None)
    if builtin:
        fail(
            f"`{SDPA}` runs PyTorch's built-in attention (`{builtin}`): compute the scores, the "
            "softmax and the weighted sum yourself."
        )
    out, weights = expect_pair(result, SDPA, "out", "weights")
    *lead, T, d_k = q.shape
    S, d_v = v.shape[-2:]
    expect_shape(weights, (*lead, T, S), "`weights`", inputs)
    why = "its last dimension is d_k: multiply the weights by v, not by k" if d_k != d_v else ""
    expect_shape(out, (*lead, T, d_v), "`out`", inputs, why if out.shape[-1] == d_k else "")
    return out, weights


def _sdpa_cases(gen, thorough, fixed):
    """The ``fixed`` ``(lead, T, S, d_k, d_v)`` cases, then random ones."""
    yield from fixed
    for _ in range(6 if thorough else 1):
        lead = tuple(randint(gen, 1, 3) for _ in range(randint(gen, 0, 3)))
        size = 24 if thorough else 8
        yield lead, *(randint(gen, 1, size) for _ in range(4))


def check_sdpa_shapes(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Shapes for T ≠ S, d_k ≠ d_v, batch 1, extra leading dimensions and none at all."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    fixed = [
        ((2,), 5, 7, 8, 4),
        ((1,), 3, 6, 4, 10),
        ((2,), 1, 4, 8, 8),
        ((2, 3), 4, 6, 8, 5),
        ((), 5, 3, 6, 2),
        ((2, 2, 3), 2, 5, 3, 4),
    ]
    for lead, T, S, d_k, d_v in _sdpa_cases(gen, thorough, fixed):
        q, k, v = _qkv(gen, lead, T, S, d_k, d_v, torch.float32)
        out, weights = _call_sdpa(fn, q, k, v, hint=_TRANSPOSE_HINT)
        expect_dtype(out, torch.float32, "`out`")
        expect_dtype(weights, torch.float32, "`weights`")


def _check_weights(weights, expected, q, k, v) -> None:
    """Fail with the probable mistake when unmasked ``weights`` differ from ``expected``."""
    __tracebackhide__ = True
    d_k, d_v = q.shape[-1], v.shape[-1]
    inputs = describe((q, k, v))
    if has_nan_or_inf(weights):
        fail(f"Your weights contain NaN or inf for inputs {inputs}: check the softmax.")
    if not rows_sum_to_one(weights):
        if rows_sum_to_one(weights, -2):
            fail(SOFTMAX_OVER_QUERIES)
        sums = weights.sum(-1)
        if torch.allclose(sums, torch.full_like(sums, d_k**-0.5), atol=1e-4):
            fail("Your weights' rows sum to 1/√d_k: divide the scores by √d_k before the softmax.")
        fail(f"Your weights' rows do not sum to 1 for inputs {inputs}: softmax the scores on -1.")
    if close(weights, expected):
        return
    variants = {
        "Your weights match softmax(q @ kᵀ) without scaling: divide the scores by √d_k "
        "(d_k = q.shape[-1]) before the softmax.": _oracle(q, k, v, scale=1.0)[1],
        "Your weights match scores divided by d_k: divide by √d_k (math.sqrt(d_k)) "
        "instead.": _oracle(q, k, v, scale=1 / d_k)[1],
    }
    if d_v != d_k:
        why = "Your weights match scores divided by √d_v: scale by the key width d_k = q.shape[-1]."
        variants[why] = _oracle(q, k, v, scale=d_v**-0.5)[1]
    if q.shape == k.shape:
        why = "Your weights match softmax(q @ qᵀ / √d_k): the scores need k, not q, on the right."
        variants[why] = _oracle(q, q, v)[1]
    fail(
        first_match(weights, variants)
        or f"Your weights differ from softmax(q @ kᵀ / √d_k) for inputs {inputs}: check the scores "
        "q @ k.transpose(-2, -1) and the scaling by √d_k."
    )


def _check_out(out, expected, q, k, v, mask=None) -> None:
    """Fail with the probable mistake when ``out`` differs while the weights are right."""
    __tracebackhide__ = True
    if close(out, expected):
        return
    variants = {
        f"`out` matches weights @ {name}: multiply the weights by v, not {name}.": _oracle(
            q, k, other, mask
        )[0]
        for name, other in (("k", k), ("q", q))
        if other.shape == v.shape
    }
    fail(
        first_match(out, variants)
        or f"Your weights are right but `out` is not weights @ v for inputs {describe((q, k, v))}."
    )


def check_sdpa_values(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``out`` equals ``F.scaled_dot_product_attention``; ``weights`` equal PyTorch's own."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    fixed = [((2,), 5, 7, 16, 6), ((3,), 4, 4, 8, 8), ((2, 3), 3, 6, 12, 5), ((), 4, 5, 6, 3)]
    for lead, T, S, d_k, d_v in _sdpa_cases(gen, thorough, fixed):
        q, k, v = _qkv(gen, lead, T, S, d_k, d_v)
        out, weights = _call_sdpa(fn, q, k, v)
        ref_out, ref_weights = _oracle(q, k, v)
        _check_weights(weights, ref_weights, q, k, v)
        _check_out(out, ref_out, q, k, v)


def _check_masked(out, weights, q, k, v, mask) -> None:
    """Fail with the probable mistake when attention with a boolean mask is wrong."""
    __tracebackhide__ = True
    live = mask.any(-1).expand(weights.shape[:-1])  # (..., T): queries with an allowed key

    def inverted() -> str | None:
        if close(weights[live], _oracle(q, k, v, ~mask)[1][live]):
            return (
                "Your mask is inverted: True means the query may attend to that key, so fill "
                "the scores with -inf where the mask is False (masked_fill(~mask, ...))."
            )
        return None

    check_mask_use(weights, mask, inverted)
    if (out[~live] != 0).any():
        fail("A query row with no allowed key must get an all-zero output.")
    ref_out, ref_weights = _oracle(q, k, v, mask)
    if not close(weights, ref_weights):
        inputs = describe((q, k, v), {"mask": mask})
        fail(f"Your masked weights differ from PyTorch's for inputs {inputs}.")
    _check_out(out, ref_out, q, k, v, mask)


def check_sdpa_mask(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Masked weights are exactly 0, masks broadcast, rows with no allowed key give zeros."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    hint = "the mask must broadcast against the scores (..., T, S), so use it as given"
    cases = [
        ((2,), 5, 6, 8, 4, (5, 6)),
        ((2,), 4, 7, 6, 6, (2, 4, 7)),
        ((2, 3), 4, 5, 8, 3, (2, 1, 1, 5)),
        ((2, 3), 3, 4, 4, 5, (2, 3, 3, 4)),
    ]
    for _ in range(4 if thorough else 0):
        B, nh, T, S, d_k, d_v = (randint(gen, 1, n) for n in (3, 4, 16, 16, 16, 16))
        cases.append(((B, nh), T, S + 1, d_k, d_v, (B, 1, T, S + 1)))
    for lead, T, S, d_k, d_v, mask_shape in cases:
        q, k, v = _qkv(gen, lead, T, S, d_k, d_v)
        mask = mixed_mask(gen, *mask_shape)
        out, weights = _call_sdpa(fn, q, k, v, mask, hint)
        _check_masked(out, weights, q, k, v, mask)
    for lead, mask_shape, row in (((2,), (4, 5), (2,)), ((2, 2), (2, 1, 3, 5), (1, 0, 0))):
        q, k, v = _qkv(gen, lead, mask_shape[-2], mask_shape[-1], 6, 4)
        mask = mixed_mask(gen, *mask_shape)
        mask[row] = False  # one query may attend to nothing
        out, weights = _call_sdpa(fn, q, k, v, mask, hint)
        _check_masked(out, weights, q, k, v, mask)


def _check_permutations(fn, gen, q, k, v) -> None:
    """Permuting queries permutes the outputs; permuting keys with values changes nothing."""
    __tracebackhide__ = True
    out, weights = _call_sdpa(fn, q, k, v)
    perm = torch.randperm(q.shape[-2], generator=gen)
    p_out, p_weights = _call_sdpa(fn, q[..., perm, :], k, v)
    if not (close(p_out, out[..., perm, :]) and close(p_weights, weights[..., perm, :])):
        fail(
            "Permuting the queries should permute the rows of `out` and `weights` the same way: "
            "attention must not depend on query position (no causal mask or position term here)."
        )
    perm = torch.randperm(k.shape[-2], generator=gen)
    p_out, p_weights = _call_sdpa(fn, q, k[..., perm, :], v[..., perm, :])
    if not (close(p_out, out) and close(p_weights, weights[..., perm])):
        fail(
            "Permuting keys and values together should not change `out`: key i must stay paired "
            "with value i (no sorting, flipping or causal mask over the keys)."
        )


def _check_key_value_roles(fn, q, k, v) -> None:
    """With ``k`` and ``v`` of the same shape, each must play its own role."""
    __tracebackhide__ = True
    out, _ = _call_sdpa(fn, q, k, v)
    roles = [
        (k, k, "k as the values: multiply the weights by v"),
        (v, v, "v as the keys: the scores are q @ kᵀ, not q @ vᵀ"),
        (q, v, "q as the keys: the scores are q @ kᵀ"),
    ]
    variants = {
        f"`out` matches attention with {why}.": _oracle(q, k_, v_)[0] for k_, v_, why in roles
    }
    if not close(out, _oracle(q, k, v)[0]):
        generic = "With k ≠ v of the same shape, `out` is not softmax(q @ kᵀ / √d_k) @ v."
        fail(first_match(out, variants) or generic)


def check_sdpa_properties(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Inputs unmodified, dtype kept, permutation equivariance, k ≠ v roles."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        q, k, v = _qkv(gen, (2,), 4, 5, 8, 6, dtype)
        mask = mixed_mask(gen, 4, 5)
        before = [t.clone() for t in (q, k, v, mask)]
        out, weights = _call_sdpa(fn, q, k, v, mask)
        expect_unmodified(before, [q, k, v, mask], SDPA)
        expect_dtype(out, dtype, "`out`")
        expect_dtype(weights, dtype, "`weights`")
    sizes = [((2,), 5, 7, 8, 6)] + ([((2, 3), 16, 24, 32, 16)] if thorough else [])
    for lead, T, S, d_k, d_v in sizes:
        _check_permutations(fn, gen, *_qkv(gen, lead, T, S, d_k, d_v))
        _check_key_value_roles(fn, *_qkv(gen, lead, S, S, d_k, d_k))
