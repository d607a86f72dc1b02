"""Checks for notebook 07: ``head_entropy``, ``previous_token_score`` and ``head_importance``.

Shape legend: ``B`` batch, ``nh`` heads, ``T`` queries, ``S`` keys, ``n_layers`` blocks, ``...`` any
number of leading dimensions.

PyTorch is the oracle: ``torch.special.entr`` (−p·ln p, with 0 at p = 0) for the entropy,
``torch.diagonal(..., offset=-1)`` for the previous-token score. Head importance is recomputed by a
different route than the learner's: on a deep copy of the model, the columns of ``out_proj.weight``
that belong to the head are zeroed, and ``F.cross_entropy`` scores the logits. Known-wrong answers
are the same oracles applied to the wrong axis, offset or mask.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F

from autograder.tools import toy_data
from autograder.tools.tiny_model import ModelConfig, TinyTransformer, load_checkpoint
from autograder.torch_helpers import one_thread

from . import operators
from ._core import (
    CheckFailure,
    call,
    close,
    expect_dtype,
    expect_tensor,
    expect_unmodified,
    fail,
    first_match,
    fmt_shape,
    has_nan_or_inf,
    make_generator,
    randint,
    randn,
)

#: The ATen operators learner code may run under these checks:
#: the learner's functions run the tiny transformer.
OPERATORS = operators.DEFAULT | operators.SDPA | operators.MODEL

#: Learner-importable names that would compute this notebook's graded answers. In the grading
#: sandbox of any notebook whose test cells use these checks, they keep their names but raise.
ANSWERS_IN_TOOLS: dict[str, str] = {
    "autograder.tools.nb07_head_stats.entropy": "head_entropy: both cells",
    "autograder.tools.nb07_head_stats.previous_token": "previous_token_score: both cells",
    "autograder.tools.nb07_head_stats.ablation_importance": "head_importance: both cells",
    "autograder.tools.nb07_head_stats.pruning_curve": (
        "head_importance of one head: loss[1] - loss[0] with the order [h]"
    ),
    "autograder.tools.nb07_head_stats.pruning_study": (
        "head_importance of one head, from the first step of an order"
    ),
}

ENTROPY = "head_entropy"
PREVIOUS = "previous_token_score"
IMPORTANCE = "head_importance"


# ----------------------------------------------------------------------------- attention weights


def _weights(gen, *shape, causal=False, sharpness=2.0, dtype=torch.float64) -> torch.Tensor:
    """Random attention weights ``shape = (..., T, S)``: rows sum to 1, causal rows keep k <= q."""
    scores = sharpness * randn(gen, *shape, dtype=dtype)
    if causal:
        T, S = shape[-2:]
        allowed = torch.ones(T, S, dtype=torch.bool).tril(S - T)  # (T, S)
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1)  # (..., T, S)


def _shape_cases(gen, thorough: bool, square: bool) -> Iterator[tuple[int, ...]]:
    """Shapes ``(..., nh, T, S)``: fixed ones (no batch, batch, two leading dims), then random."""
    fixed = [(4, 5, 7), (2, 3, 6, 9), (2, 2, 3, 4, 5), (1, 1, 4, 3)]
    for shape in fixed:
        yield (*shape[:-1], shape[-2]) if square else shape
    for _ in range(6 if thorough else 1):
        lead = tuple(randint(gen, 1, 3) for _ in range(randint(gen, 0, 2)))
        nh, T = randint(gen, 1, 6), randint(gen, 2, 12)
        yield (*lead, nh, T, T if square else randint(gen, 2, 12))


def _call_stat(fn, name: str, w: torch.Tensor) -> torch.Tensor:
    """Call a per-head statistic and check it returns ``(..., nh)``."""
    __tracebackhide__ = True
    out = expect_tensor(call(fn, name, (w,)), name)
    *lead, nh, T, S = w.shape
    want = (*lead, nh)
    if tuple(out.shape) == want:
        return out
    if tuple(out.shape) == (*lead, nh, T):
        why = "one value per query: also take the mean over the queries"
    elif tuple(out.shape) == (*lead, nh, S) and S != T:
        why = "one value per key: reduce the keys first (dim=-1), then average the queries"
    elif tuple(out.shape) == (*lead, T) and nh != T:
        why = (
            "the mean is over the heads (dim=-2) instead of the queries: average dim=-1 after "
            "reducing the keys"
        )
    elif tuple(out.shape) == tuple(lead) or out.ndim == 0:
        why = "the heads were averaged away: keep one value per head, reduce only the last two dims"
    else:
        why = "reduce the keys (dim=-1) and then the queries (dim=-1 of what is left)"
    fail(
        f"`{name}` returned shape {fmt_shape(out.shape)} for weights of shape {fmt_shape(w.shape)} "
        f"but should return {fmt_shape(want)}, one value per head: {why}."
    )


# ----------------------------------------------------------------------------------- entropy


def _entropy(w: torch.Tensor) -> torch.Tensor:
    return torch.special.entr(w).sum(-1).mean(-1)  # (..., nh, T, S) -> (..., nh)


def _entropy_variants(w: torch.Tensor) -> dict[str, torch.Tensor]:
    good = _entropy(w)
    T, S = w.shape[-2:]
    variants = {
        f"`{ENTROPY}` uses log base 2 (bits): the contract is nats, so use the natural log "
        "torch.log.": good / math.log(2),
        f"`{ENTROPY}` uses log base 10: the contract is nats, so use the natural log "
        "torch.log.": good / math.log(10),
        f"`{ENTROPY}` is negative: entropy is −Σ p·log p, so keep the minus sign.": -good,
        f"`{ENTROPY}` is the entropy of the average row: compute each query's entropy first, "
        "then average over queries.": torch.special.entr(w.mean(-2)).sum(-1),
        f"`{ENTROPY}` sums over the query axis: sum −p·log p over the keys (dim=-1), then "
        "average over the queries.": torch.special.entr(w).sum(-2).mean(-1),
    }
    if T > 1:
        variants[f"`{ENTROPY}` sums the queries' entropies: take their mean instead."] = good * T
    if S > 1:
        variants[
            f"`{ENTROPY}` averages −p·log p over the keys: sum over the keys (dim=-1), then "
            "average over the queries."
        ] = good / S
    return variants


def check_head_entropy_values(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``head_entropy`` equals the mean over queries of each row's entropy in nats, per head."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for shape in _shape_cases(gen, thorough, square=False):
        w = _weights(gen, *shape, sharpness=1.0 + 2.0 * float(torch.rand(1, generator=gen)))
        out = _call_stat(fn, ENTROPY, w)
        expected = _entropy(w)
        if has_nan_or_inf(out):
            fail(
                f"`{ENTROPY}` returned NaN or inf for ordinary weights of shape "
                f"{fmt_shape(w.shape)}: check the log of the weights."
            )
        if not close(out, expected):
            fail(
                first_match(out, _entropy_variants(w))
                or f"`{ENTROPY}` differs from the mean over queries of −Σ_k p·ln p for weights "
                f"of shape {fmt_shape(w.shape)}: sum over keys, then average over queries (an "
                "epsilon or clamp above ~1e-12 inside the log also shifts the result)."
            )


def check_head_entropy_zero_weights(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Zero weights count as 0·log 0 = 0: one-hot rows, causal weights and all-zero rows, no NaN."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    nan = (
        f"`{ENTROPY}` returned NaN where some weights are exactly 0: 0 * log(0) is 0 * -inf = NaN "
        "in floating point, so use torch.special.entr, torch.xlogy(p, p), or torch.where to "
        "count those terms as 0."
    )
    eye = torch.eye(5, dtype=torch.float64).expand(2, 3, 5, 5)  # (B, nh, T, S): one-hot rows
    cases = [("one-hot rows", eye, torch.zeros(2, 3, dtype=torch.float64))]
    causal = _weights(gen, 2, 4, 6, 6, causal=True)  # (B, nh, T, T)
    cases.append(("causal weights", causal, _entropy(causal)))
    empty = _weights(gen, 2, 3, 5, 7, causal=True)
    empty[:, :, 1] = 0.0  # a query that may attend to nothing gets all-zero weights
    cases.append(("a query row of zeros", empty, _entropy(empty)))
    uniform = torch.full((3, 4, 8), 1 / 8, dtype=torch.float64)  # (nh, T, S)
    cases.append(("uniform rows", uniform, torch.full((3,), math.log(8), dtype=torch.float64)))
    if thorough:
        for _ in range(4):
            w = _weights(
                gen, randint(gen, 1, 3), randint(gen, 1, 4), 9, 9, causal=True, sharpness=8.0
            )
            cases.append(("sharp causal weights", w, _entropy(w)))
    for what, w, expected in cases:
        before = w.clone()
        out = _call_stat(fn, ENTROPY, w)
        expect_unmodified([before], [w], ENTROPY)
        if torch.isnan(out).any():
            fail(nan)
        if not close(out, expected):
            fail(
                first_match(out, _entropy_variants(w))
                or f"`{ENTROPY}` is wrong for {what} of shape {fmt_shape(w.shape)} (expected "
                f"{expected.flatten()[0].item():.4f} for the first head): a zero weight adds "
                "nothing, and a large clamp or epsilon inside the log changes the result."
            )
    for dtype in (torch.float32, torch.float64):
        w = _weights(gen, 2, 3, 4, 4, causal=True, dtype=dtype)
        expect_dtype(_call_stat(fn, ENTROPY, w), dtype, f"The output of `{ENTROPY}`")


# ----------------------------------------------------------------------- previous-token score


def _previous(w: torch.Tensor) -> torch.Tensor:
    return torch.diagonal(w, offset=-1, dim1=-2, dim2=-1).mean(-1)  # (..., nh, T-1) -> (..., nh)


def _previous_variants(w: torch.Tensor) -> dict[str, torch.Tensor]:
    T = w.shape[-1]
    sub = torch.diagonal(w, offset=-1, dim1=-2, dim2=-1)  # (..., nh, T-1)
    rolled = sub.sum(-1) + w[..., 0, T - 1]  # query 0 "reads" key T-1 when indices wrap around
    return {
        f"`{PREVIOUS}` reads the main diagonal (each query's weight on itself): the previous "
        "token of query t is key t−1, torch.diagonal(w, offset=-1, dim1=-2, dim2=-1).": (
            torch.diagonal(w, dim1=-2, dim2=-1).mean(-1)
        ),
        f"`{PREVIOUS}` reads the weight on the next token (key t+1, above the diagonal): use "
        "offset=-1, below the diagonal.": torch.diagonal(w, offset=1, dim1=-2, dim2=-1).mean(-1),
        f"`{PREVIOUS}` divides by T instead of T−1: query 0 has no previous token, so average "
        "over queries 1…T−1 only.": sub.sum(-1) / T,
        f"`{PREVIOUS}` wraps around (query 0 reads key T−1, e.g. via torch.roll or index -1): "
        "query 0 has no previous token, so leave it out.": rolled / T,
        f"`{PREVIOUS}` sums over the queries: take the mean over queries 1…T−1.": sub.sum(-1),
        f"`{PREVIOUS}` averages a whole column (every query's weight on one key), not the "
        "diagonal below the main one.": w[..., :, :-1].mean(-2).mean(-1),
    }


def check_previous_token_score_values(
    fn: Callable, *, seed: int = 0, thorough: bool = False
) -> None:
    """``previous_token_score`` equals the mean over queries 1..T-1 of ``w[..., t, t-1]``."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for i, shape in enumerate(_shape_cases(gen, thorough, square=True)):
        w = _weights(gen, *shape, causal=i % 2 == 1)  # non-causal first: catches t+1
        before = w.clone()
        out = _call_stat(fn, PREVIOUS, w)
        expect_unmodified([before], [w], PREVIOUS)
        if not close(out, _previous(w)):
            fail(
                first_match(out, _previous_variants(w))
                or f"`{PREVIOUS}` differs from the mean over queries 1…T−1 of w[..., t, t−1] "
                f"for weights of shape {fmt_shape(w.shape)}: take the diagonal below the main "
                "one (offset=-1) of the last two dimensions."
            )
    for dtype in (torch.float32, torch.float64):
        w = _weights(gen, 2, 3, 4, 4, causal=True, dtype=dtype)
        expect_dtype(_call_stat(fn, PREVIOUS, w), dtype, f"The output of `{PREVIOUS}`")


def _pattern(T: int, key_of: Callable[[int], int], nh: int = 2) -> torch.Tensor:
    """One-hot causal weights ``(1, nh, T, T)``: query t attends only to key ``key_of(t)``."""
    w = torch.zeros(1, nh, T, T, dtype=torch.float64)
    for t in range(T):
        w[..., t, key_of(t)] = 1.0
    return w


def check_previous_token_score_patterns(
    fn: Callable, *, seed: int = 0, thorough: bool = False
) -> None:
    """A perfect previous-token head scores exactly 1; a self or first-token head scores less."""
    __tracebackhide__ = True
    sizes = [5, 8, 2] + ([3, 16, 33] if thorough else [])  # T=2 last: variants coincide
    for T in sizes:
        patterns = [
            (
                "a perfect previous-token head (query 0 can only attend to itself)",
                _pattern(T, lambda t: max(t - 1, 0)),
                1.0,
            ),
            ("a head where every query attends to itself", _pattern(T, lambda t: t), 0.0),
            (
                "a head where every query attends to the first token",
                _pattern(T, lambda t: 0),
                1.0 / (T - 1),
            ),
        ]
        for what, w, value in patterns:
            out = _call_stat(fn, PREVIOUS, w)
            expected = torch.full(w.shape[:-2], value, dtype=w.dtype)
            if not close(out, expected):
                got = out.flatten()[0].item()
                fail(
                    first_match(out, _previous_variants(w))
                    or f"`{PREVIOUS}` gives {got:.4f} for {what} with T={T}, but it should be "
                    f"{value:.4f}: average w[t, t−1] over queries t = 1…T−1."
                )


# ---------------------------------------------------------------------------- head importance


def _loss(model: TinyTransformer, batch: toy_data.Batch) -> torch.Tensor:
    logits, _ = model(batch.inputs)  # (B, T, V)
    return F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten())


@torch.no_grad()
def _masked_losses(model: TinyTransformer, batch, masks: dict) -> dict:
    """Loss of an eval-mode copy of ``model`` for each ``(n_layers, nh)`` 0/1 mask in ``masks``.

    Heads are removed by zeroing their columns of ``out_proj.weight`` in the copy: a different
    route from the model's own ``head_mask`` argument.
    """
    ref = copy.deepcopy(model).eval()
    ref.head_mask.fill_(1.0)
    hs = ref.config.d_model // ref.num_heads
    originals = [block.attn.out_proj.weight.clone() for block in ref.blocks]
    losses = {}
    for key, mask in masks.items():
        for block, w, keep in zip(ref.blocks, originals, mask, strict=True):
            block.attn.out_proj.weight.copy_(w * keep.to(w.dtype).repeat_interleave(hs))
        losses[key] = _loss(ref, batch)
    return losses


def _one_off_masks(L: int, nh: int) -> dict:
    masks = {"base": torch.ones(L, nh)}
    for layer in range(L):
        for head in range(nh):
            mask = torch.ones(L, nh)
            mask[layer, head] = 0.0
            masks[("off", layer, head)] = mask
    return masks


def _importance(model, batch) -> torch.Tensor:
    """The oracle: loss(head removed) − loss(all heads), ``(n_layers, nh)``."""
    L, nh = model.n_layers, model.num_heads
    losses = _masked_losses(model, batch, _one_off_masks(L, nh))
    off = torch.stack([losses[("off", la, h)] for la in range(L) for h in range(nh)])
    return off.view(L, nh) - losses["base"]


def _importance_variants(model, batch) -> dict[str, torch.Tensor]:
    """Known-wrong importances, each with its diagnosis."""
    L, nh = model.n_layers, model.num_heads
    ones = torch.ones(L, nh)
    masks = {**_one_off_masks(L, nh), "none": torch.zeros(L, nh)}
    for layer in range(L):
        for head in range(nh):
            only_on = torch.zeros(L, nh)
            only_on[layer, head] = 1.0
            cumulative = ones.clone()
            cumulative.view(-1)[: layer * nh + head + 1] = 0.0
            layer_off, column_off = ones.clone(), ones.clone()
            layer_off[layer], column_off[:, head] = 0.0, 0.0
            masks.update(
                {
                    ("only", layer, head): only_on,
                    ("cumulative", layer, head): cumulative,
                    ("layer", layer, head): layer_off,
                    ("column", layer, head): column_off,
                }
            )
    losses = _masked_losses(model, batch, masks)
    base = losses["base"]

    def grid(kind: str) -> torch.Tensor:
        values = [losses[(kind, la, h)] for la in range(L) for h in range(nh)]
        return torch.stack(values).view(L, nh)

    good = grid("off") - base
    gate = torch.ones(L, nh, dtype=base.dtype, requires_grad=True)
    ref = copy.deepcopy(model).eval()
    with torch.enable_grad():
        (grad,) = torch.autograd.grad(ref.loss(batch, gate), gate)
    variants = {
        f"`{IMPORTANCE}` is a gradient estimate (|∂loss/∂mask|, the first-order proxy): the "
        "contract asks for the exact loss increase, so remove each head and measure the "
        "loss.": grad.abs(),
        f"`{IMPORTANCE}` is a gradient estimate (−∂loss/∂mask): the contract asks for the exact "
        "loss increase, so remove each head and measure the loss.": -grad,
        f"`{IMPORTANCE}` has the wrong sign: importance is the loss *increase*, "
        "loss(head removed) − loss(all heads).": -good,
        f"`{IMPORTANCE}` returns the loss with the head removed: subtract the loss of the "
        "unchanged model, measured once before the loop.": good + base,
        f"`{IMPORTANCE}` divides the losses: importance is the difference "
        "loss(head removed) − loss(all heads).": grid("off") / base,
        f"`{IMPORTANCE}` measures the model with every head removed: set only "
        "mask[layer, head] = 0 and keep the other heads at 1.": (losses["none"] - base).expand(
            L, nh
        ),
        f"`{IMPORTANCE}` keeps only one head and removes all the others: start from a mask of "
        "ones and set only mask[layer, head] = 0.": grid("only") - base,
        f"`{IMPORTANCE}` never resets the mask, so earlier heads stay removed: make a fresh mask "
        "of ones for every (layer, head).": grid("cumulative") - base,
        f"`{IMPORTANCE}` removes a whole layer: zero only mask[layer, head], not "
        "mask[layer].": grid("layer") - base,
        f"`{IMPORTANCE}` removes the head in every layer: zero only mask[layer, head], not "
        "mask[:, head].": grid("column") - base,
    }
    return variants


def _check_model(gen: torch.Generator, config: ModelConfig) -> TinyTransformer:
    """A randomly initialised model in float64, drawn from ``gen``, in eval mode."""
    with torch.random.fork_rng():
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
        model = TinyTransformer(config)
        with torch.no_grad():  # larger weights than at initialisation: heads matter unequally
            for block in model.blocks:
                for proj in (block.attn.q_proj, block.attn.k_proj, block.attn.out_proj):
                    proj.weight.mul_(3.0)
    return model.double().eval()


def _importance_cases(gen, thorough: bool) -> Iterator[tuple[TinyTransformer, toy_data.Batch]]:
    """The committed trained model, then random models of several sizes."""
    with torch.random.fork_rng():  # building modules draws from the global generator
        trained = load_checkpoint()
    yield trained, toy_data.make_batch(48, gen)
    sizes = [(1, 1, 8), (1, 4, 16), (3, 2, 16)] + ([(2, 8, 32), (4, 1, 8)] if thorough else [])
    for n_layers, nh, d_model in sizes:
        config = ModelConfig(
            d_model=d_model,
            num_heads=nh,
            n_layers=n_layers,
            d_mlp=2 * d_model if n_layers == 3 else 0,
        )
        yield _check_model(gen, config), toy_data.make_batch(16, gen, seq_len=24)


def _call_importance(fn, model, batch) -> torch.Tensor:
    __tracebackhide__ = True
    inputs = (
        f"a model with n_layers={model.n_layers}, nh={model.num_heads} and a batch of "
        f"{batch.inputs.shape[0]} sequences"
    )
    out = expect_tensor(call(fn, IMPORTANCE, (model, batch)), IMPORTANCE, "a tensor (n_layers, nh)")
    L, nh = model.n_layers, model.num_heads
    if tuple(out.shape) == (L, nh):
        return out
    if tuple(out.shape) == (nh, L):
        why = "it looks transposed: row = layer, column = head"
    elif out.numel() == L * nh:
        why = "reshape it to (n_layers, nh): row = layer, column = head"
    else:
        why = "one value per (layer, head)"
    fail(
        f"`{IMPORTANCE}` returned shape {fmt_shape(out.shape)} for {inputs}, but should return "
        f"({L}, {nh}): {why}."
    )


def check_head_importance_values(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``head_importance`` is loss(head removed) − loss(all heads), for every layer and head."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for model, batch in _importance_cases(gen, thorough):
        before = [t.clone() for t in model.state_dict().values()]
        with one_thread():
            out = _call_importance(fn, model, batch)
            expect_unmodified(before, list(model.state_dict().values()), IMPORTANCE)
            good = _importance(model, batch)  # measured on the model as the check built it
        if has_nan_or_inf(out):
            fail(f"`{IMPORTANCE}` returned NaN or inf: compare two finite losses.")
        if close(out, good, atol=1e-4, rtol=1e-3):
            continue
        if model.num_heads == model.n_layers and close(out.T, good, atol=1e-4, rtol=1e-3):
            fail(f"`{IMPORTANCE}` is transposed: row = layer, column = head.")
        with one_thread():
            variants = _importance_variants(model, batch)
        fail(
            first_match(out, variants)
            or f"`{IMPORTANCE}` differs from loss(head removed) − loss(all heads) for a model "
            f"with n_layers={model.n_layers}, nh={model.num_heads}: remove one head at a time "
            "with model.loss(batch, head_mask=mask), where mask is all ones except "
            "mask[layer, head] = 0."
        )


def _snapshot(model: TinyTransformer) -> dict:
    return {
        "state": {k: v.clone() for k, v in model.state_dict().items()},
        "head_mask": model.head_mask.clone(),
        "training": [m.training for m in model.modules()],
        "requires_grad": [p.requires_grad for p in model.parameters()],
    }


def _check_unchanged(model: TinyTransformer, before: dict, out: torch.Tensor) -> None:
    __tracebackhide__ = True
    if not torch.is_grad_enabled():
        torch.set_grad_enabled(True)
        fail(
            f"`{IMPORTANCE}` switched gradients off for everything that follows: use "
            "`with torch.no_grad():` (it switches them back on) instead of "
            "torch.set_grad_enabled(False)."
        )
    if not torch.equal(model.head_mask, before["head_mask"]):
        fail(
            f"After `{IMPORTANCE}` some heads are still masked in model.head_mask: pass a mask "
            "with model.loss(batch, head_mask=mask) instead, or set the entry back to 1."
        )
    if [m.training for m in model.modules()] != before["training"]:
        mode = "training" if before["training"][0] else "eval"
        fail(
            f"`{IMPORTANCE}` changed the model's mode (it was in {mode} mode): remember "
            "was_training = model.training and call model.train(was_training) at the end."
        )
    if any(p.grad is not None for p in model.parameters()):
        fail(
            f"`{IMPORTANCE}` left gradients in the parameters (.grad): importance needs only "
            "forward passes, so compute the losses under torch.no_grad() and never call "
            "backward."
        )
    if [p.requires_grad for p in model.parameters()] != before["requires_grad"]:
        fail(
            f"`{IMPORTANCE}` changed requires_grad of the parameters: use torch.no_grad() instead."
        )
    for name, value in model.state_dict().items():
        if not torch.equal(value, before["state"][name]):
            fail(
                f"`{IMPORTANCE}` changed the model's weights ({name}): remove heads with a "
                "head_mask, not by editing the weights."
            )
    if out.requires_grad:
        fail(
            f"`{IMPORTANCE}` returned a tensor that tracks gradients: compute the losses under "
            "torch.no_grad() (or store loss.item())."
        )


def check_head_importance_leaves_model_unchanged(
    fn: Callable, *, seed: int = 0, thorough: bool = False
) -> None:
    """Measured in eval mode, without gradients, and the model is left exactly as it was."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    configs = [(2, 2, 16)] + ([(3, 4, 16)] if thorough else [])
    for n_layers, nh, d_model in configs:
        config = ModelConfig(
            d_model=d_model, num_heads=nh, n_layers=n_layers, d_mlp=2 * d_model, dropout=0.3
        )
        model = _check_model(gen, config)
        batch = toy_data.make_batch(16, gen, seq_len=24)
        with one_thread():
            good = _importance(model, batch)
        for training in (False, True):
            model.train(training)
            before = _snapshot(model)
            try:
                with one_thread():
                    out = _call_importance(fn, model, batch)
            except CheckFailure:
                torch.set_grad_enabled(True)
                raise
            _check_unchanged(model, before, out)
            if close(out.detach(), good, atol=1e-4, rtol=1e-3):
                continue
            if training:
                fail(
                    f"`{IMPORTANCE}` is right in eval mode but not on a model left in training "
                    "mode with dropout: dropout makes every loss random, so call model.eval() "
                    "first and model.train(was_training) at the end."
                )
            fail(
                f"`{IMPORTANCE}` gives wrong values on a model in eval mode: see "
                "test_head_importance_values."
            )
