"""Checks for notebook 02, section 10: attention dropout, by hand and through SDPA in a module.

Shape legend: ``T`` query length, ``S`` key/value length, ``d`` = q/k width, ``d_v`` = v width;
any leading dimensions (batch, heads) in front.

The oracle is ``F.dropout`` on the softmax weights under the same seed. Dropout draws from
PyTorch's global generator, which each check seeds: during classroom verification the grader
recomputes the learner's operators on its own generator, seeded the same way, so the verdict does
not depend on the kernel's random state.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from . import operators
from ._core import (
    SOFTMAX_OVER_QUERIES,
    call,
    close,
    describe,
    expect_dtype,
    expect_pair,
    expect_shape,
    expect_tensor,
    fail,
    first_match,
    make_generator,
    randn,
    rows_sum_to_one,
)

#: F.dropout runs aten::native_dropout, one of the model operators; SDPAAttention runs SDPA.
OPERATORS = operators.DEFAULT | operators.MODEL | operators.SDPA

#: No tool computes these answers (TorchMultiHeadAttention is withheld by nb02_multihead).
ANSWERS_IN_TOOLS: dict[str, str] = {}

DROP = "attention_with_dropout"
SDPA_MODULE = "SDPAAttention"
_NOT_RESCALED = (
    "Your kept weights are not rescaled: divide them by 1 - p, as F.dropout does, so that each "
    "weight keeps its expected value."
)
_BY_ONE_OVER_P = (
    "You rescaled the kept weights by 1/p: divide by 1 - p, the probability of keeping."
)
_BEFORE_SOFTMAX = (
    "You applied dropout to the scores before the softmax: dropout belongs on the weights, after "
    "the softmax and before multiplying by v."
)
_RENORMALISED = (
    "You renormalised the dropped rows to sum to 1: dropout only rescales by 1/(1 - p), so a "
    "row's sum varies around 1."
)
_ON_OUTPUT = (
    "You dropped entries of the output: dropout goes on the attention weights, before they "
    "multiply v."
)


def _seeded(seed: int, fn: Callable, *args, **kwargs):
    """``fn(*args, **kwargs)`` with the global generator seeded, and then put back as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return fn(*args, **kwargs)


def _attention(q, k):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T, S)
    return scores, torch.softmax(scores, dim=-1)  # (..., T, S)


def _run_dropout(fn, q, k, v, p, training, seed):
    """The learner's ``(out, weights)`` under ``seed``; ``training=None`` is not passed."""
    __tracebackhide__ = True
    args, kwargs = (q, k, v, p), ({} if training is None else {"training": training})
    out, weights = expect_pair(_seeded(seed, call, fn, DROP, args, kwargs), DROP, "out", "weights")
    inputs = describe(args, kwargs)
    expect_shape(out, v.shape[:-2] + (q.shape[-2], v.shape[-1]), "`out`", inputs)
    expect_shape(weights, q.shape[:-1] + (k.shape[-2],), "`weights`", inputs)
    expect_dtype(out, q.dtype, "`out`")
    expect_dtype(weights, q.dtype, "`weights`")
    return out, weights


def _dropout_mistake(q, k, v, p, seed, out, weights) -> str:
    """One sentence naming the probable mistake of a training-mode call."""
    scores, w = _attention(q, k)
    dropped = _seeded(seed, F.dropout, w, p)  # (..., T, S)
    if close(weights, w) and close(out, w @ v):
        return (
            "Your weights are unchanged in training mode: apply dropout (probability p) to the "
            "weights after the softmax, for example F.dropout(weights, p, training)."
        )
    if close(weights, dropped):
        return "Your weights are right but `out` is not: multiply the dropped weights by v."
    if close(out, dropped @ v):
        return "Your `out` is right: return as `weights` the dropped weights that multiply v."
    unscaled = torch.softmax(scores * math.sqrt(q.shape[-1]), dim=-1)  # (..., T, S)
    by_sqrt_s = scores * math.sqrt(q.shape[-1] / k.shape[-2])  # (..., T, S)
    same_mask = {
        _BEFORE_SOFTMAX: torch.softmax(_seeded(seed, F.dropout, scores, p), dim=-1),
        _NOT_RESCALED: dropped * (1 - p),
        _BY_ONE_OVER_P: dropped * (1 - p) / p,
        "You dropped with probability 1 - p: p is the probability of dropping a weight, as in "
        "F.dropout.": _seeded(seed, F.dropout, w, 1 - p),
        _RENORMALISED: dropped / dropped.sum(-1, keepdim=True),
        "Your scores are not scaled: divide q kᵀ by √d (d = q.shape[-1]) before the softmax; the "
        "dropout after it is right.": _seeded(seed, F.dropout, unscaled, p),
        SOFTMAX_OVER_QUERIES: _seeded(seed, F.dropout, torch.softmax(scores, dim=-2), p),
        "You divided the scores by √S, the number of keys: divide by √d, d = q.shape[-1], the "
        "width of a query.": _seeded(seed, F.dropout, torch.softmax(by_sqrt_s, dim=-1), p),
        "You applied dropout twice: once on the weights is all; two draws drop about "
        "1 - (1 - p)² of them.": _seeded(seed, lambda: F.dropout(F.dropout(w, p), p)),
    }
    why = first_match(weights, same_mask)
    if why:
        return why
    if close(weights, w):
        on_v = {
            _ON_OUTPUT: _seeded(seed, F.dropout, w @ v, p),
            "You dropped entries of v: dropout goes on the attention weights, after the softmax, "
            "and v stays whole.": w @ _seeded(seed, F.dropout, v, p),
        }
        why = first_match(out, on_v)
        if why:
            return why
    return _by_properties(w, p, out, weights, v)


def _by_properties(w, p, out, weights, v) -> str:
    """A mask drawn another way than F.dropout: judge what each weight became."""
    kept = weights != 0
    if close(weights, w):
        return _ON_OUTPUT
    if not close(out, weights @ v):
        return "Your `out` is not your returned weights times v: return the weights you used."
    if rows_sum_to_one(weights):
        return _RENORMALISED if (~kept).any() else _BEFORE_SOFTMAX
    share = 1 - kept.double().mean().item()  # the fraction dropped
    spread = 6 * math.sqrt(p * (1 - p) / w.numel())  # six standard deviations
    if abs(share - p) > spread and abs(share - (1 - p)) <= spread:
        return (
            "You dropped a fraction 1 - p of the weights: p is the probability of dropping a "
            "weight, as in F.dropout."
        )
    if kept.any() and close(weights[kept], w[kept] / (1 - p)) and abs(share - p) <= spread:
        return ""
    for why, factor in {_NOT_RESCALED: 1.0, _BY_ONE_OVER_P: 1 / p}.items():
        if kept.any() and close(weights[kept], w[kept] * factor):
            return why
    return (
        "Your weights are not the softmax weights with each one either dropped (0) or divided by "
        "1 - p: use F.dropout(weights, p, training) after the softmax."
    )


def _dropout_cases(gen, thorough):
    """``(q, k, v, p)``: heads and batch in front, T != S, d_v != d."""
    shapes = [(2, 4, 16, 16, 8, 6), (3, 2, 12, 20, 4, 4)]  # (B, nh, T, S, d, d_v)
    if thorough:
        shapes += [(1, 8, 32, 24, 16, 8), (4, 1, 9, 40, 5, 3)]
    for i, (B, nh, T, S, d, dv) in enumerate(shapes):
        q, k, v = randn(gen, B, nh, T, d), randn(gen, B, nh, S, d), randn(gen, B, nh, S, dv)
        yield q, k, v, (0.25, 0.5, 0.1, 0.4)[i]


def check_dropout_training(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """In training mode: F.dropout on the softmax weights, before v, under the same seed; a
    different seed draws a different mask; ``training`` defaults to True; p = 0 changes nothing."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for n, (q, k, v, p) in enumerate(_dropout_cases(gen, thorough)):
        draw = 1000 * seed + n
        out, weights = _run_dropout(fn, q, k, v, p, True, draw)
        _, w = _attention(q, k)
        dropped = _seeded(draw, F.dropout, w, p)
        if not (close(weights, dropped) and close(out, dropped @ v)):
            why = _dropout_mistake(q, k, v, p, draw, out, weights)
            if why:
                fail(why)
        again = _run_dropout(fn, q, k, v, p, True, draw)[1]
        other = _run_dropout(fn, q, k, v, p, True, draw + 1)[1]
        if not close(again, weights):
            fail(
                "The same seed gave two different masks: draw the mask from PyTorch's global "
                "generator (F.dropout, torch.rand_like), so torch.manual_seed reproduces it."
            )
        if close(other, weights):
            fail(
                "Another seed gave the same mask: draw it from PyTorch's global generator "
                "(F.dropout, torch.rand_like), not a fixed pattern or a generator seeded inside."
            )
    q, k, v, p = next(_dropout_cases(gen, False))
    _, w = _attention(q, k)
    explicit = _run_dropout(fn, q, k, v, p, True, seed)[1]
    default = _run_dropout(fn, q, k, v, p, None, seed)[1]
    if not close(default, explicit):
        fail(
            f"`{DROP}(q, k, v, p)` without `training` "
            + ("drops nothing" if close(default, w) else "differs from training=True")
            + ": its default must be training=True, as in the signature you were given (and in "
            "F.dropout), so that training code which never passes it still gets dropout."
        )
    out, weights = _run_dropout(fn, q, k, v, 0.0, True, seed)
    if not (close(weights, w) and close(out, w @ v)):
        fail("With p = 0 nothing may be dropped: the result must equal attention without dropout.")


def check_dropout_eval(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """With training=False the result is plain softmax attention, whatever p."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for n, (q, k, v, p) in enumerate(_dropout_cases(gen, thorough)):
        out, weights = _run_dropout(fn, q, k, v, p, False, 1000 * seed + n)
        scores, w = _attention(q, k)
        if close(weights, w) and close(out, w @ v):
            continue
        if close(weights, w):
            again = _run_dropout(fn, q, k, v, p, False, 1000 * seed + n + 1)[0]
            if not close(again, out):
                fail(
                    "With training=False your weights are right but `out` still changes with the "
                    "seed: a dropout you call yourself, such as F.scaled_dot_product_attention's "
                    "dropout_p, knows nothing of eval mode, so pass dropout_p=p if training else "
                    "0.0."
                )
            fail("With training=False your weights are right but `out` is not weights @ v.")
        if not rows_sum_to_one(weights):
            if close(weights, w * (1 - p)):
                fail(
                    "In eval mode you scaled the weights by 1 - p: that is dropout without the "
                    "1/(1 - p) rescale in training; with it, eval mode changes nothing."
                )
            if rows_sum_to_one(weights, -2):
                fail(SOFTMAX_OVER_QUERIES)
            fail(
                "Dropout is active with training=False: pass training=training to F.dropout (its "
                "default is True; an nn.Dropout you create is in training mode), so eval mode "
                "returns the softmax weights unchanged."
            )
        unscaled = torch.softmax(scores * math.sqrt(q.shape[-1]), dim=-1)
        if close(weights, unscaled):
            fail("Your scores are not scaled: divide q kᵀ by √d, d = q.shape[-1].")
        fail(
            "With training=False your result is not softmax(q kᵀ / √d) v: check the scores, the "
            "softmax over the last axis and the product with v."
        )


# ------------------------------------------------------------- dropout through SDPA, in a module


def _run_module(module, q, k, v, seed):
    __tracebackhide__ = True
    name = f"{SDPA_MODULE}.forward"
    with torch.no_grad():
        out = expect_tensor(_seeded(seed, call, module, name, (q, k, v)), name)
    shape = v.shape[:-2] + (q.shape[-2], v.shape[-1])
    expect_shape(out, shape, f"The output of `{name}`", describe((q, k, v)))
    return out


def check_sdpa_dropout(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``cls(p)`` attends with dropout p while training, as SDPA's dropout_p (or F.dropout on the
    weights) under the same seed, and without any dropout after ``.eval()``."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for n, (q, k, v, p) in enumerate(_dropout_cases(gen, thorough)):
        with torch.random.fork_rng(devices=[]):
            module = call(cls, SDPA_MODULE, (p,))
        if not isinstance(module, torch.nn.Module):
            fail(f"`{SDPA_MODULE}` should subclass nn.Module, so that .eval() reaches it.")
        draw = 1000 * seed + n
        plain = F.scaled_dot_product_attention(q, k, v)  # (..., T, d_v)
        module.train()
        out = _run_module(module, q, k, v, draw)
        dropped = (  # SDPA's own dropout, or F.dropout on the weights written out
            _seeded(draw, F.scaled_dot_product_attention, q, k, v, dropout_p=p),
            _seeded(draw, F.dropout, _attention(q, k)[1], p) @ v,
        )
        if not any(close(out, ref) for ref in dropped):
            if close(out, plain):
                fail(
                    f"`{SDPA_MODULE}` does not drop in training mode: pass dropout_p=self.p when "
                    "self.training is True."
                )
            fail(
                f"In training mode `{SDPA_MODULE}` differs from F.scaled_dot_product_attention(q, "
                "k, v, dropout_p=p) under the same seed: pass the probability it was built with."
            )
        module.eval()
        first, second = (_run_module(module, q, k, v, d) for d in (draw, draw + 1))
        if close(first, plain) and close(second, plain):
            continue
        if not close(first, second):
            fail(
                f"`{SDPA_MODULE}` keeps dropping after .eval(): eval() switches off nn.Dropout "
                "modules, not a dropout_p passed to F.scaled_dot_product_attention as a number, so "
                "pass dropout_p=self.p if self.training else 0.0."
            )
        fail(f"After .eval() `{SDPA_MODULE}` must equal F.scaled_dot_product_attention(q, k, v).")
