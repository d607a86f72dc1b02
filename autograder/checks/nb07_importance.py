"""Checks for notebook 07: ``head_importance``, the loss a head's removal costs.

Shape legend: ``B`` batch, ``T`` positions, ``V`` vocabulary, ``nh`` heads, ``n_layers`` blocks.

The oracle takes a different route than the learner's: on a deep copy of the model, the columns
of ``out_proj.weight`` that belong to the head are zeroed, and ``F.cross_entropy`` scores the
logits. Known-wrong answers are the same oracle with the wrong mask or sign, or the heads removed
in the wrong place.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F

from autograder.tools import toy_data
from autograder.tools.tiny_model import ModelConfig, TinyTransformer, load_checkpoint
from autograder.torch_helpers import one_thread

from . import operators
from ._core import (
    LOOSE,
    CheckFailure,
    call,
    close,
    expect_tensor,
    expect_unmodified,
    fail,
    first_match,
    fmt_shape,
    has_nan_or_inf,
    make_generator,
)

#: The ATen operators learner code may run under these checks:
#: the learner's functions run the tiny transformer.
OPERATORS = operators.DEFAULT | operators.SDPA | operators.MODEL

#: Learner-importable names that would compute these answers. In the grading sandbox of any
#: notebook whose test cells use these checks, they keep their names but raise.
ANSWERS_IN_TOOLS: dict[str, str] = {
    "autograder.tools.nb07_head_stats.ablation_importance": "head_importance: both cells",
    "autograder.tools.nb07_head_stats.pruning_curve": (
        "head_importance of one head: loss[1] - loss[0] with the order [h]"
    ),
    "autograder.tools.nb07_head_stats.pruning_study": (
        "head_importance of one head, from the first step of an order"
    ),
}

IMPORTANCE = "head_importance"


def _loss(model: TinyTransformer, batch: toy_data.Batch) -> torch.Tensor:
    logits, _ = model(batch.inputs)  # (B, T, V)
    return F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten())


@torch.no_grad()
def _masked_losses(
    model: TinyTransformer, batch, masks: dict, measured: dict | None = None
) -> dict:
    """Loss of an eval-mode copy of ``model`` for each ``(n_layers, nh)`` 0/1 mask in ``masks``.

    Heads are removed by zeroing their columns of ``out_proj.weight`` in the copy: a different
    route from the model's own ``head_mask`` argument. Equal masks share one forward pass (the
    diagnosis names many masks twice: a whole layer off once per head of it), and so do the
    calls given one ``measured`` (mask entries -> loss, filled in) for one model and batch: the
    diagnosis reuses the oracle's losses.
    """
    ref = copy.deepcopy(model).eval()
    ref.head_mask.fill_(1.0)
    hs = ref.config.d_model // ref.num_heads
    originals = [block.attn.out_proj.weight.clone() for block in ref.blocks]
    measured = {} if measured is None else measured
    losses = {}
    for key, mask in masks.items():
        entries = tuple(mask.flatten().tolist())
        if entries not in measured:
            for block, w, keep in zip(ref.blocks, originals, mask, strict=True):
                block.attn.out_proj.weight.copy_(w * keep.to(w.dtype).repeat_interleave(hs))
            measured[entries] = _loss(ref, batch)
        losses[key] = measured[entries]
    return losses


def _one_off_masks(L: int, nh: int) -> dict:
    masks = {"base": torch.ones(L, nh)}
    for layer in range(L):
        for head in range(nh):
            mask = torch.ones(L, nh)
            mask[layer, head] = 0.0
            masks[("off", layer, head)] = mask
    return masks


def _importance(model, batch, measured: dict | None = None) -> torch.Tensor:
    """The oracle: loss(head removed) − loss(all heads), ``(n_layers, nh)``."""
    L, nh = model.n_layers, model.num_heads
    losses = _masked_losses(model, batch, _one_off_masks(L, nh), measured)
    off = torch.stack([losses[("off", la, h)] for la in range(L) for h in range(nh)])
    return off.view(L, nh) - losses["base"]


def _importance_variants(model, batch, measured: dict) -> dict[str, torch.Tensor]:
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
    losses = _masked_losses(model, batch, masks, measured)
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
            measured: dict = {}  # the oracle's losses, reused by the diagnosis
            good = _importance(model, batch, measured)  # on the model as the check built it
        if has_nan_or_inf(out):
            fail(f"`{IMPORTANCE}` returned NaN or inf: compare two finite losses.")
        if close(out, good, *LOOSE):  # the oracle zeroes out_proj columns: another route
            continue
        if model.num_heads == model.n_layers and close(out.T, good, *LOOSE):
            fail(f"`{IMPORTANCE}` is transposed: row = layer, column = head.")
        with one_thread():
            variants = _importance_variants(model, batch, measured)
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
            if close(out.detach(), good, *LOOSE):
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
