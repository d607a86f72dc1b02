"""Checks for notebook 02, sections 9-11: cross-attention, attention dropout, the transformer block.

Shape legend: ``B`` batch, ``T`` query (decoder) length, ``S`` key/value (encoder) length,
``C`` = d_model, ``nh`` heads, ``hs`` = C // nh, ``d`` = q/k width of one head.

Oracles are PyTorch's own modules and functions: ``nn.MultiheadAttention`` with a
``key_padding_mask`` for cross-attention, ``F.dropout`` under the same seed for dropout, and
``nn.TransformerEncoderLayer(norm_first=True)`` for the block and its parameter count. Dropout
draws from PyTorch's global generator, which each check seeds: during classroom verification the
grader recomputes the learner's operators on its own generator, seeded the same way, so the
verdict does not depend on the kernel's random state.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import skip_init

from autograder.torch_helpers import record_torch_calls

from . import _core
from . import nb02_multihead as mha
from ._core import (
    RUN_AGAIN,
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
    randint,
    randn,
    rows_sum_to_one,
)
from .replay import operators

#: The block runs layer norm and GELU (and the learner may add dropout): notebook 07's set.
OPERATORS = operators.DEFAULT | operators.MODEL

#: A ready-made pre-LN block, in the grading sandbox of notebook 02 it keeps its name but raises.
ANSWERS_IN_TOOLS: dict[str, str] = {
    "autograder.tools.tiny_model.Block": "Block: a pre-LayerNorm block around any attention class",
}

CROSS = "cross_attend"
DROP = "attention_with_dropout"
BLOCK = "Block"
_UNFINISHED = (
    "Your Block reached an unfinished exercise (raise NotImplementedError()): finish "
    f"MultiHeadAttention, {RUN_AGAIN}."
)
COUNT = "block_param_count"

# ---------------------------------------------------------------------------- cross-attention


def _padding(lengths: torch.Tensor, S: int) -> torch.Tensor:
    """``(B,) -> (B, S)``: True for the real (not padded) encoder positions."""
    return torch.arange(S) < lengths[:, None]  # (B, S)


def _cross_reference(weights, nh, dec, enc, blocked_keys=None, blocked=None):
    """nn.MultiheadAttention: ``blocked_keys`` is its key_padding_mask (B, S), True = ignore;
    ``blocked`` an attn_mask (B, nh, T, S), True = blocked."""
    twin = mha.torch_twin(weights, nh)
    (B, T), S = dec.shape[:2], enc.shape[1]
    if blocked is not None:
        blocked = blocked.expand(B, nh, T, S).reshape(B * nh, T, S)  # torch's mask layout
    with torch.no_grad():
        return twin(
            dec,
            enc,
            enc,
            key_padding_mask=blocked_keys,
            attn_mask=blocked,
            average_attn_weights=False,
        )


def _cross_mistake(weights, nh, dec, enc, lengths, out, attn) -> str:
    """One sentence naming the probable mistake in ``cross_attend``'s result."""
    B, S = enc.shape[0], enc.shape[1]
    keep = _padding(lengths, S)  # (B, S)
    padded = ~keep[:, None, None, :]  # (B, 1, 1, S)
    if (attn.sum(-1) == 0).any():
        return (
            "Some decoder queries got no weight at all: the padding is on the encoder's keys "
            "(the last axis, S), so build the mask from arange(S) < encoder_lengths[:, None] "
            "and never mask decoder positions."
        )
    if (attn * padded).abs().sum() == 0:
        return ""
    candidates = {
        "Your cross-attention ignores the encoder padding: pass mask=... with True for the real "
        "encoder positions, shaped (B, 1, 1, S) so it broadcasts over heads and queries.": (
            _cross_reference(weights, nh, dec, enc)[0]
        ),
        "Your mask lets the padded encoder positions through and blocks the real ones: "
        "nn.MultiheadAttention's key_padding_mask means True = ignore, but MultiHeadAttention's "
        "mask means True = may attend.": _cross_reference(weights, nh, dec, enc, keep)[0],
        "Your mask is off by one: encoder position s is real iff s < encoder_lengths[b], "
        "not <=.": _cross_reference(weights, nh, dec, enc, ~_padding(lengths + 1, S))[0],
    }
    if B == nh:
        lined_up = ~keep[None, :, None, :]  # (1, nh=B, 1, S): sequence h's padding on head h
        why = (
            "Your (B, 1, S) padding mask lines the batch up with the heads (it broadcasts as "
            "(1, B, 1, S) against (B, nh, T, S)): shape it (B, 1, 1, S)."
        )
        candidates[why] = _cross_reference(weights, nh, dec, enc, blocked=lined_up)[0]
    return first_match(out, candidates) or (
        "Padded encoder positions still get weight: the mask must be False exactly where "
        "s >= encoder_lengths[b], shaped (B, 1, 1, S)."
    )


def check_cross_attend(
    cross_attend: Callable, mha_cls: Callable, *, seed: int = 0, thorough: bool = False
) -> None:
    """Decoder queries over padded encoder keys/values equal nn.MultiheadAttention with a
    key_padding_mask, the learner's own ``MultiHeadAttention`` doing the attending."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    cases = [(2, 4, 6, 12, 3), (3, 5, 7, 12, 3), (1, 3, 2, 8, 2)]  # (B, T, S, C, nh)
    if thorough:
        cases += [(4, 6, 9, 16, 4), (2, 7, 3, 12, 6), (5, 2, 8, 10, 1)]
    first = cases[0]
    module, weights = mha._build(mha_cls, first[3], first[4], gen)
    mha._compare(
        module,
        first[4],
        weights,
        mha._cross_inputs(gen, first[3]),
        context="Fix your MultiHeadAttention first (its test cells name the mistake): ",
    )
    for i, (B, T, S, C, nh) in enumerate(cases):
        module, weights = mha._build(mha_cls, C, nh, gen)
        dec, enc = randn(gen, B, T, C), randn(gen, B, S, C)  # (B, T, C), (B, S, C)
        lengths = torch.tensor([randint(gen, 1, max(1, S - 1)) for _ in range(B)])  # (B,)
        if i == 0:
            lengths[0] = 1  # one real encoder position only
        elif B > 1:
            lengths[-1] = S  # one sequence without padding
        args = (module, dec, enc, lengths)
        hint = (
            "the padding mask must broadcast against the weights (B, nh, T, S): shape it "
            "(B, 1, 1, S), True for real encoder positions"
        )
        result = call(cross_attend, CROSS, args, hint=hint)
        out, attn = expect_pair(result, CROSS, "out", "weights")
        inputs = describe(args)
        hint = ""
        if out.shape == (B, S, C) and S != T:
            hint = "the queries come from decoder_x: call mha(decoder_x, encoder_out, encoder_out)"
        expect_shape(out, (B, T, C), "`out`", inputs, hint)
        hint = ""
        if attn.shape == (B, nh, T, T):
            hint = "attend over encoder_out: pass it as key and value, decoder_x as query"
        expect_shape(attn, (B, nh, T, S), "`weights`", inputs, hint)
        ref_out, ref_attn = _cross_reference(weights, nh, dec, enc, ~_padding(lengths, S))
        if close(out, ref_out) and close(attn, ref_attn):
            continue
        fail(
            _cross_mistake(weights, nh, dec, enc, lengths, out, attn)
            or f"`{CROSS}` differs from nn.MultiheadAttention with the same weights and "
            f"key_padding_mask for inputs {inputs}: the decoder gives the queries, the encoder "
            "the keys and values."
        )


# ------------------------------------------------------------------------- attention dropout


def _seeded(seed: int, fn: Callable, *args, **kwargs):
    """``fn(*args, **kwargs)`` with the global generator seeded, and then put back as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return fn(*args, **kwargs)


def _attention(q, k):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T, S)
    return scores, torch.softmax(scores, dim=-1)  # (..., T, S)


def _run_dropout(fn, q, k, v, p, training, seed):
    __tracebackhide__ = True
    args, kwargs = (q, k, v, p), {"training": training}
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
    same_mask = {
        "You applied dropout to the scores before the softmax: dropout belongs on the weights, "
        "after the softmax and before multiplying by v.": torch.softmax(
            _seeded(seed, F.dropout, scores, p), dim=-1
        ),
        "Your kept weights are not rescaled: divide them by 1 - p, as F.dropout does, so that "
        "each weight keeps its expected value.": dropped * (1 - p),
        "You rescaled the kept weights by 1/p: divide by 1 - p, the probability of keeping.": (
            dropped * (1 - p) / p
        ),
        "You dropped with probability 1 - p: p is the probability of dropping a weight, as in "
        "F.dropout.": _seeded(seed, F.dropout, w, 1 - p),
        "You renormalised the dropped rows to sum to 1: dropout only rescales by 1/(1 - p), so a "
        "row's sum varies around 1.": dropped / dropped.sum(-1, keepdim=True),
    }
    why = first_match(weights, same_mask)
    if why:
        return why
    if close(weights, w) and close(out, _seeded(seed, F.dropout, w @ v, p)):
        return (
            "You dropped entries of the output: dropout goes on the attention weights, before "
            "they multiply v."
        )
    return _by_properties(w, p, out, weights, v)


def _by_properties(w, p, out, weights, v) -> str:
    """A mask drawn another way than F.dropout: judge what each weight became."""
    kept = weights != 0
    if close(weights, w):
        return (
            "You dropped entries of the output: dropout goes on the attention weights, before "
            "they multiply v."
        )
    if not close(out, weights @ v):
        return "Your `out` is not your returned weights times v: return the weights you used."
    if rows_sum_to_one(weights):
        return (
            "You renormalised the dropped rows to sum to 1: dropout only rescales by 1/(1 - p), "
            "so a row's sum varies around 1."
            if (~kept).any()
            else "You applied dropout to the scores before the softmax: dropout belongs on the "
            "weights, after the softmax and before multiplying by v."
        )
    share = 1 - kept.double().mean().item()  # the fraction dropped
    spread = 6 * math.sqrt(p * (1 - p) / w.numel())  # six standard deviations
    if abs(share - p) > spread and abs(share - (1 - p)) <= spread:
        return (
            "You dropped a fraction 1 - p of the weights: p is the probability of dropping a "
            "weight, as in F.dropout."
        )
    if kept.any() and close(weights[kept], w[kept] / (1 - p)) and abs(share - p) <= spread:
        return ""
    rescaled = {
        "Your kept weights are not rescaled: divide them by 1 - p, as F.dropout does, so that "
        "each weight keeps its expected value.": 1.0,
        "You rescaled the kept weights by 1/p: divide by 1 - p, the probability of keeping.": (
            1 / p
        ),
    }
    for why, factor in rescaled.items():
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
    different seed draws a different mask; p = 0 changes nothing."""
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
    q, k, v, _ = next(_dropout_cases(gen, False))
    out, weights = _run_dropout(fn, q, k, v, 0.0, True, seed)
    _, w = _attention(q, k)
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
                "default is True), so eval mode returns the softmax weights unchanged."
            )
        unscaled = torch.softmax(scores * math.sqrt(q.shape[-1]), dim=-1)
        if close(weights, unscaled):
            fail("Your scores are not scaled: divide q kᵀ by √d, d = q.shape[-1].")
        fail(
            "With training=False your result is not softmax(q kᵀ / √d) v: check the scores, the "
            "softmax over the last axis and the product with v."
        )


# ------------------------------------------------------------------------ transformer block


def _torch_block(C, nh, d_mlp, bias=True, meta=False, **options) -> nn.TransformerEncoderLayer:
    """PyTorch's own pre-LN block: LayerNorm, attention, residual, LayerNorm, MLP, residual.

    Built on the meta device (shapes only) or with ``skip_init``: the global RNG stays untouched.
    """
    options = {"activation": "gelu", "norm_first": True, "dropout": 0.0} | options
    options |= {"bias": bias, "batch_first": True}
    if meta:
        return nn.TransformerEncoderLayer(C, nh, d_mlp, device="meta", **options)
    return skip_init(nn.TransformerEncoderLayer, C, nh, d_mlp, **options)


def _mlp_layers(block, C) -> tuple[nn.Linear, nn.Linear]:
    """The MLP's two nn.Linear: ``C -> 4C`` and ``4C -> C``."""
    __tracebackhide__ = True
    mlp = getattr(block, "mlp", None)
    if not isinstance(mlp, nn.Module):
        fail(
            f"`{BLOCK}` needs an attribute `mlp`: nn.Sequential(nn.Linear(d_model, 4 * d_model), "
            "nn.GELU(), nn.Linear(4 * d_model, d_model))."
        )
    linears = [m for m in mlp.modules() if isinstance(m, nn.Linear)]
    shapes = sorted((m.in_features, m.out_features) for m in linears)
    if shapes != sorted([(C, 4 * C), (4 * C, C)]):
        fail(
            f"`mlp` holds nn.Linear layers of (in, out) sizes {shapes} for d_model={C}: it needs "
            f"exactly two, nn.Linear({C}, {4 * C}) and nn.Linear({4 * C}, {C}) (a 4x wider hidden "
            "layer)."
        )
    up = next(m for m in linears if m.out_features == 4 * C)
    return up, next(m for m in linears if m is not up)


def _construct_block(cls, C, nh) -> nn.Module:
    __tracebackhide__ = True
    with torch.random.fork_rng(devices=[]):
        block = call(cls, BLOCK, (C, nh), stub_inside=_UNFINISHED)
    if not isinstance(block, nn.Module):
        fail(f"`{BLOCK}` should subclass nn.Module: write `class {BLOCK}(nn.Module)`.")
    for name in ("ln1", "ln2"):
        ln = getattr(block, name, None)
        if not isinstance(ln, nn.LayerNorm) or tuple(ln.weight.shape) != (C,):
            fail(f"`{BLOCK}` needs an attribute `{name}` that is nn.LayerNorm(d_model).")
    attn = getattr(block, "attn", None)
    if not isinstance(attn, nn.Module) or not all(
        isinstance(getattr(attn, n, None), nn.Linear) for n in mha.PROJECTIONS
    ):
        fail(f"`{BLOCK}` needs an attribute `attn` that is your MultiHeadAttention(d_model, nh).")
    _mlp_layers(block, C)
    return block


def check_block_structure(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """ln1, attn (the learner's MultiHeadAttention), ln2, a 4x MLP; as many parameters as
    nn.TransformerEncoderLayer of the same size."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    configs = [(12, 3), (8, 1)]
    configs += [(nh * randint(gen, 1, 6), nh) for nh in (2, 4)] if thorough else []
    for C, nh in configs:
        block = _construct_block(cls, C, nh)
        count = sum(p.numel() for p in block.parameters())
        real = sum(p.numel() for p in _torch_block(C, nh, 4 * C, meta=True).parameters())
        if count != real:
            fail(
                f"`{BLOCK}({C}, {nh})` holds {count:,} parameters where PyTorch's block holds "
                f"{real:,}: keep exactly ln1, attn, ln2 and the MLP's two nn.Linear (with biases)."
            )


def _set_block_weights(block, C, gen) -> dict:
    """Seeded float64 weights on the learner's block; the same tensors by role, for the oracle."""
    block.to(torch.float64).train()
    up, down = _mlp_layers(block, C)
    params = {}
    layers = {f"attn.{n}": getattr(block.attn, n) for n in mha.PROJECTIONS}
    layers |= {"ln1": block.ln1, "ln2": block.ln2, "up": up, "down": down}
    with torch.no_grad():
        for role, layer in layers.items():
            scale = 1.0 if role.startswith("ln") else 1 / math.sqrt(layer.weight.shape[-1])
            base = 1.0 if role.startswith("ln") else 0.0
            layer.weight.copy_(base + scale * randn(gen, *layer.weight.shape))
            layer.bias.copy_(randn(gen, *layer.bias.shape) / 2)
            params[role] = (layer.weight.clone(), layer.bias.clone())
    return params


def _oracle(params, C, nh, x, blocked, **options):
    """nn.TransformerEncoderLayer holding ``params``; ``blocked`` its src_mask (True = blocked)."""
    twin = _torch_block(C, nh, 4 * C, dtype=torch.float64, **options)
    twin.train()  # dropout is 0: train() only keeps PyTorch off its fused inference path
    attn = mha.torch_twin({n: params[f"attn.{n}"] for n in mha.PROJECTIONS}, nh)
    pairs = [(twin.norm1, "ln1"), (twin.norm2, "ln2"), (twin.linear1, "up"), (twin.linear2, "down")]
    with torch.no_grad():
        twin.self_attn.load_state_dict(attn.state_dict())
        for layer, role in pairs:
            layer.weight.copy_(params[role][0])
            layer.bias.copy_(params[role][1])
        return twin(x, src_mask=blocked)


def _by_hand(params, nh, x, blocked, *, attn_residual=True, mlp_residual=True, second_ln="ln2"):
    """The block written with F.layer_norm and nn.MultiheadAttention, with known mistakes."""
    C = x.shape[-1]
    attn = mha.torch_twin({n: params[f"attn.{n}"] for n in mha.PROJECTIONS}, nh)

    def ln(role, h):
        return F.layer_norm(h, (C,), *params[role])

    with torch.no_grad():
        h = ln("ln1", x)
        a = attn(h, h, h, attn_mask=blocked, need_weights=False)[0]  # (B, T, C)
        x = x + a if attn_residual else a
        h = F.linear(F.gelu(F.linear(ln(second_ln, x), *params["up"])), *params["down"])
        return x + h if mlp_residual else h


def _block_mistake(params, C, nh, x, blocked, out) -> str:
    variants = {
        "Your block normalises after each residual sum (post-LN, the 2017 layout): this block "
        "is pre-LN, x = x + attn(ln1(x)), then x = x + mlp(ln2(x)).": _oracle(
            params, C, nh, x, blocked, norm_first=False
        ),
        "Your MLP uses ReLU: this block's MLP is Linear, GELU, Linear.": _oracle(
            params, C, nh, x, blocked, activation="relu"
        ),
        "Your block ignores the mask: pass mask=mask to self.attn.": _oracle(
            params, C, nh, x, None
        ),
        "Your block has no residual connection around the attention: x = x + attn(ln1(x)).": (
            _by_hand(params, nh, x, blocked, attn_residual=False)
        ),
        "Your block has no residual connection around the MLP: x = x + mlp(ln2(x)).": _by_hand(
            params, nh, x, blocked, mlp_residual=False
        ),
        "Your block normalises with ln1 twice: the MLP reads ln2(x).": _by_hand(
            params, nh, x, blocked, second_ln="ln1"
        ),
    }
    return first_match(out, variants) or (
        f"Your block differs from nn.TransformerEncoderLayer(norm_first=True, activation='gelu') "
        f"holding the same weights for input {describe((x,))}: LayerNorm, attention, residual, "
        "LayerNorm, MLP, residual."
    )


def check_block_matches_torch(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Equal to nn.TransformerEncoderLayer(norm_first=True, activation='gelu') with the same
    weights, with a causal mask and without one."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    cases = [(12, 3, 2, 5), (8, 2, 1, 1), (16, 4, 3, 7)]  # (C, nh, B, T)
    cases += [(24, 6, 2, 11), (10, 1, 2, 4)] if thorough else []
    for C, nh, B, T in cases:
        block = _construct_block(cls, C, nh)
        params = _set_block_weights(block, C, gen)
        x = randn(gen, B, T, C)  # (B, T, C)
        causal = torch.ones(T, T, dtype=torch.bool).tril()  # (T, T): True = may attend
        for mask in (causal, None):
            kwargs = {} if mask is None else {"mask": mask}
            with torch.no_grad():
                result = call(block, f"{BLOCK}.forward", (x,), kwargs, stub_inside=_UNFINISHED)
                out = expect_tensor(result, f"{BLOCK}.forward")
            expect_shape(out, (B, T, C), "The output of `Block.forward`", describe((x,), kwargs))
            expect_dtype(out, x.dtype, "The output of `Block.forward`")
            blocked = None if mask is None else ~mask
            if not close(out, _oracle(params, C, nh, x, blocked)):
                fail(_block_mistake(params, C, nh, x, blocked, out))


# -------------------------------------------------------------------------- block parameters


def _block_count_mistake(C, d_mlp, bias, got) -> str:
    where = f"`{COUNT}({C}, d_mlp={d_mlp}, bias={bias})` returned {got:,}"
    attn, mlp, ln = 4 * C * C, 2 * C * d_mlp, 4 * C  # weights; LayerNorm: 2 x (weight + bias)
    b_attn, b_mlp = 4 * C, d_mlp + C
    if bias:
        guesses = [
            (attn + b_attn + mlp + b_mlp, "forgets the two LayerNorms (a weight and a bias each)"),
            (attn + mlp + ln, "forgets the biases of the four projections and the MLP"),
            (attn + mlp, "forgets the biases and the LayerNorms"),
            (attn + b_attn + mlp + ln, "forgets the MLP's biases (d_mlp and d_model)"),
            (attn + b_attn + mlp + b_mlp + 2 * C, "counts only a weight per LayerNorm, no bias"),
            (attn + b_attn + mlp + b_mlp + ln - C, "misses one bias of d_model"),
        ]
    else:
        guesses = [
            (attn + mlp + ln, "keeps the LayerNorms' biases although bias=False removes them"),
            (attn + mlp, "drops the LayerNorms' weights: with bias=False each keeps its scale"),
            (attn + b_attn + mlp + b_mlp + ln, "ignores bias=False"),
        ]
    guesses += [
        (attn + b_attn * bias, "counts only the attention: add the MLP and the two LayerNorms"),
        (
            attn + b_attn * bias + 8 * C * C + (5 * C if bias else 0) + (ln if bias else 2 * C),
            "ignores d_mlp: the hidden layer is d_mlp wide, 4 * d_model only by default",
        ),
    ]
    why = next((why for value, why in guesses if value == got), None)
    return (
        f"{where}, which {why}."
        if why
        else f"{where}, which is wrong: count the attention's four projections, the MLP's two "
        "nn.Linear and the two LayerNorms, weights and biases."
    )


def _block_count(fn, C, d_mlp, bias) -> int:
    __tracebackhide__ = True
    got = call(fn, COUNT, (C,), {"d_mlp": d_mlp, "bias": bias})
    if not isinstance(got, numbers.Integral) or isinstance(got, bool):
        fail(f"`{COUNT}` should return an int, got {type(got).__name__}: use // or int(...).")
    return int(got)


def check_block_param_count(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Equals sum(p.numel()) of nn.TransformerEncoderLayer(norm_first=True) of that size."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    configs = [(8, 32), (12, 20), (64, 256)]  # (C, d_mlp)
    configs += [(randint(gen, 1, 40), randint(gen, 1, 90)) for _ in range(3)] if thorough else []
    configs += _core.unseen_draws(seed, 3, (1, 256), (1, 1024))
    with record_torch_calls() as names:
        counts = {(C, m, b): _block_count(fn, C, m, b) for C, m in configs for b in (True, False)}
    _core.by_arithmetic(names, COUNT)
    for (C, d_mlp, bias), got in counts.items():
        real = _torch_block(C, 1, d_mlp, bias=bias, meta=True)
        if got != sum(p.numel() for p in real.parameters()):
            fail(_block_count_mistake(C, d_mlp, bias, got))
    C = configs[0][0]
    if call(fn, COUNT, (C,)) != counts[(C, 4 * C, True)]:
        fail(
            f"`{COUNT}(d_model)` should count a 4 * d_model hidden layer with biases: the defaults "
            "are d_mlp=None (meaning 4 * d_model) and bias=True."
        )
    C = 12288  # GPT-3's width
    if _block_count(fn, C, 4 * C, True) != 12 * C * C + 13 * C:
        fail(_block_count_mistake(C, 4 * C, True, _block_count(fn, C, 4 * C, True)))
