"""Checks for notebook 02, section 11: the pre-LN transformer block and its parameter count.

Shape legend: ``B`` batch, ``T`` sequence length, ``C`` = d_model, ``nh`` heads.

The oracle is PyTorch's own block, ``nn.TransformerEncoderLayer(norm_first=True,
activation="gelu", dim_feedforward=4C, dropout=0, batch_first=True)``, holding the learner's
weights; its parameter count is the count's oracle. GPT-2's tanh approximation of GELU is accepted
too (the same layer with ``F.gelu(x, approximate="tanh")``). The learner's module is read by role
(``ln1``, ``attn``'s four projections, ``ln2``, the MLP's two ``nn.Linear``); a role that is missing
or lacks a weight or bias is one sentence, never a crash of the check.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import skip_init

from autograder.torch_helpers import record_torch_calls

from . import _core, operators
from . import _multihead as mha
from ._core import (
    RUN_AGAIN,
    CheckFailure,
    call,
    close,
    describe,
    expect_dtype,
    expect_shape,
    expect_tensor,
    fail,
    first_match,
    make_generator,
    randint,
    randn,
)

#: The block runs layer norm and GELU (and the learner may add dropout): notebook 07's set.
OPERATORS = operators.DEFAULT | operators.MODEL

#: A ready-made pre-LN block, in the grading sandbox of notebook 02 it keeps its name but raises.
ANSWERS_IN_TOOLS: dict[str, str] = {
    "autograder.tools.tiny_model.Block": "Block: a pre-LayerNorm block around any attention class",
}

BLOCK = "Block"
COUNT = "block_param_count"
_UNFINISHED = (
    "Your Block reached an unfinished exercise (raise NotImplementedError()): finish "
    f"MultiHeadAttention, {RUN_AGAIN}."
)
_TUPLE = (
    "`self.attn` returns (output, weights), a tuple: take the output before adding it to x, "
    "x = x + self.attn(self.ln1(x), mask=mask)[0]."
)
_TANH_GELU = functools.partial(F.gelu, approximate="tanh")
_ROLES = {
    "ln1": "`ln1`",
    "ln2": "`ln2`",
    "up": "the MLP's first nn.Linear (d_model -> 4 * d_model)",
    "down": "the MLP's second nn.Linear (4 * d_model -> d_model)",
} | {f"attn.{n}": f"`attn.{n}`" for n in mha.PROJECTIONS}

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


def _layers(block, C) -> dict[str, nn.Module]:
    """The block's layers by role; one sentence for the first one missing or incomplete."""
    __tracebackhide__ = True
    layers = {}
    for name in ("ln1", "ln2"):
        ln = getattr(block, name, None)
        if not isinstance(ln, nn.LayerNorm):
            fail(f"`{BLOCK}` needs an attribute `{name}` that is nn.LayerNorm(d_model).")
        if ln.weight is None:
            fail(
                f"`{name}` has no learnable scale and shift (elementwise_affine=False): use "
                "nn.LayerNorm(d_model), which learns both, as PyTorch's and GPT-2's blocks do."
            )
        if tuple(ln.weight.shape) != (C,):  # a rebuilt module keeps no normalized_shape
            fail(f"`{BLOCK}` needs an attribute `{name}` that is nn.LayerNorm(d_model).")
        layers[name] = ln
    attn = getattr(block, "attn", None)
    for name in mha.PROJECTIONS:
        layer = getattr(attn, name, None) if isinstance(attn, nn.Module) else None
        if not isinstance(layer, nn.Linear) or (layer.in_features, layer.out_features) != (C, C):
            fail(
                f"`{BLOCK}` needs an attribute `attn` that is your MultiHeadAttention(d_model, "
                f"num_heads), with `{name}` an nn.Linear(d_model, d_model)."
            )
        layers[f"attn.{name}"] = layer
    layers["up"], layers["down"] = _mlp_layers(block, C)
    for role, layer in layers.items():
        if layer.bias is None:
            fail(
                f"{_ROLES[role]} has no bias: PyTorch's block, like GPT-2's, has one in every "
                "nn.Linear and LayerNorm, so keep the default bias=True."
            )
    return layers


def _construct_block(cls, C, nh) -> nn.Module:
    __tracebackhide__ = True
    with torch.random.fork_rng(devices=[]):
        block = call(cls, BLOCK, (C, nh), stub_inside=_UNFINISHED)
    if not isinstance(block, nn.Module):
        fail(f"`{BLOCK}` should subclass nn.Module: write `class {BLOCK}(nn.Module)`.")
    _layers(block, C)
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
    params = {}
    with torch.no_grad():
        for role, layer in _layers(block, C).items():
            scale = 1.0 if role.startswith("ln") else 1 / math.sqrt(layer.weight.shape[-1])
            base = 1.0 if role.startswith("ln") else 0.0
            layer.weight.copy_(base + scale * randn(gen, *layer.weight.shape))
            layer.bias.copy_(randn(gen, *layer.bias.shape) / 2)
            params[role] = (layer.weight.clone(), layer.bias.clone())
    # the learner's epsilons: timm's blocks use 1e-6, PyTorch's default is 1e-5
    params["eps"] = {ln: getattr(getattr(block, ln), "eps", 1e-5) for ln in ("ln1", "ln2")}
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
        twin.norm1.eps, twin.norm2.eps = params["eps"]["ln1"], params["eps"]["ln2"]
        return twin(x, src_mask=blocked)


def _by_hand(params, nh, x, blocked, **mistake):
    """The block written with F.layer_norm and nn.MultiheadAttention, with one known mistake:
    ``attn_residual``/``mlp_residual`` False drop a residual, ``norms`` names the LayerNorm
    before each sub-layer (None: none), ``normed_skip`` adds the residual to the normalised x,
    ``parallel`` feeds both sub-layers the same x (GPT-J), ``act`` replaces GELU and
    ``act_last`` moves it after the second linear layer."""
    C = x.shape[-1]
    attn = mha.torch_twin({n: params[f"attn.{n}"] for n in mha.PROJECTIONS}, nh)
    first, second = mistake.get("norms", ("ln1", "ln2"))
    act = mistake.get("act", F.gelu)

    def ln(role, h):
        if role is None:
            return h
        return F.layer_norm(h, (C,), *params[role], eps=params["eps"][role])

    def mlp(h):
        if mistake.get("act_last"):
            return act(F.linear(F.linear(h, *params["up"]), *params["down"]))
        return F.linear(act(F.linear(h, *params["up"])), *params["down"])

    with torch.no_grad():
        h = ln(first, x)
        a = attn(h, h, h, attn_mask=blocked, need_weights=False)[0]  # (B, T, C)
        if mistake.get("parallel"):
            return x + a + mlp(ln(second, x))
        skip = h if mistake.get("normed_skip") else x
        x = skip + a if mistake.get("attn_residual", True) else a
        h = ln(second, x)
        skip = h if mistake.get("normed_skip") else x
        return skip + mlp(h) if mistake.get("mlp_residual", True) else mlp(h)


def _block_mistake(params, C, nh, x, blocked, out) -> str:
    def hand(**mistake):
        return _by_hand(params, nh, x, blocked, **mistake)

    variants = {
        "Your block normalises after each residual sum (post-LN, the 2017 layout): this block "
        "is pre-LN, x = x + attn(ln1(x)), then x = x + mlp(ln2(x)).": _oracle(
            params, C, nh, x, blocked, norm_first=False
        ),
        "Your MLP uses ReLU: this block's MLP is Linear, GELU, Linear.": _oracle(
            params, C, nh, x, blocked, activation="relu"
        ),
        "Your MLP uses SiLU (the activation inside Llama's SwiGLU): this block's MLP uses "
        "GELU.": _oracle(params, C, nh, x, blocked, activation=F.silu),
        "Your MLP has no activation between its two nn.Linear, so together they are one linear "
        "map: put nn.GELU() between them.": hand(act=lambda h: h),
        "Your MLP applies GELU after its second nn.Linear: the activation goes between the two, "
        "Linear, GELU, Linear.": hand(act_last=True),
        "Your block ignores the mask: pass mask=mask to self.attn.": _oracle(
            params, C, nh, x, None
        ),
        "Your block has no residual connection around the attention: x = x + attn(ln1(x)).": (
            hand(attn_residual=False)
        ),
        "Your block has no residual connection around the MLP: x = x + mlp(ln2(x)).": hand(
            mlp_residual=False
        ),
        "Your residuals add the normalised x: the skip path carries x itself, "
        "x = x + attn(ln1(x)), not ln1(x) + attn(ln1(x)).": hand(normed_skip=True),
        "Your block runs the attention and the MLP side by side on the same x (GPT-J's parallel "
        "block): here the MLP reads ln2 of x after the attention's residual.": hand(parallel=True),
        "Your block normalises with ln1 twice: the MLP reads ln2(x).": hand(norms=("ln1", "ln1")),
        "Your block swaps the LayerNorms: ln1 goes before the attention, ln2 before the MLP.": (
            hand(norms=("ln2", "ln1"))
        ),
        "Your attention reads x itself: it reads the normalised ln1(x), x = x + attn(ln1(x)).": (
            hand(norms=(None, "ln2"))
        ),
    }
    return first_match(out, variants) or (
        f"Your block differs from nn.TransformerEncoderLayer(norm_first=True, activation='gelu') "
        f"holding the same weights for input {describe((x,))}: LayerNorm, attention, residual, "
        "LayerNorm, MLP, residual."
    )


def _forward(block, x, kwargs) -> torch.Tensor:
    """The learner's ``Block.forward(x, **kwargs)``; its crashes named by their likely cause."""
    __tracebackhide__ = True
    name = f"{BLOCK}.forward"
    try:
        with torch.no_grad():
            result = call(block, name, (x,), kwargs, stub_inside=_UNFINISHED)
    except CheckFailure as failure:
        if "tuple" in str(failure):
            fail(_TUPLE)
        if not kwargs:
            raise
        with torch.no_grad():
            try:
                call(block, name, (x,), stub_inside=_UNFINISHED)
            except CheckFailure:
                raise failure from None
        fail(
            "Your Block fails when it is given a mask and works without one: pass the mask by "
            "name, self.attn(h, mask=mask), since the second positional argument of "
            "MultiHeadAttention.forward is `key`."
        )
    return expect_tensor(result, name)


def check_block_matches_torch(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Equal to nn.TransformerEncoderLayer(norm_first=True, activation='gelu') with the same
    weights, with a causal mask and without one; GPT-2's tanh GELU is accepted."""
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
            out = _forward(block, x, kwargs)
            expect_shape(out, (B, T, C), "The output of `Block.forward`", describe((x,), kwargs))
            expect_dtype(out, x.dtype, "The output of `Block.forward`")
            blocked = None if mask is None else ~mask
            if close(out, _oracle(params, C, nh, x, blocked)):
                continue
            if close(out, _oracle(params, C, nh, x, blocked, activation=_TANH_GELU)):
                continue
            if not close(_forward(block, x, kwargs), out):
                fail(
                    "Your block gives a different output each time in training mode: it applies "
                    "dropout with p > 0, which this block does not have (or keep p = 0)."
                )
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
            (
                attn + b_attn + mlp + b_mlp + 2 * C,
                "counts 2 * d_model for the LayerNorms: there are two, each with a weight and a "
                "bias of d_model",
            ),
            (attn + b_attn + mlp + b_mlp + ln - C, "misses one bias of d_model"),
            (attn + b_attn + mlp + b_mlp + 2 * ln, "counts four LayerNorms: a block has two"),
            (
                attn + b_attn + mlp + 2 * C + ln,
                "counts d_model biases for the MLP's hidden layer: it has d_mlp of them",
            ),
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


def _block_count(fn, C, **kwargs) -> int:
    """The learner's count, which must be an int on every call (a float count is a bug too)."""
    __tracebackhide__ = True
    got = call(fn, COUNT, (C,), kwargs)
    if type(got) is not int:
        shown = ", ".join([str(C)] + [f"{k}={v}" for k, v in kwargs.items()])
        advice = (
            "keep the ratio an int, or take int(d_model * mlp_ratio) as timm does"
            if isinstance(got, float)
            else "use integer arithmetic (//, int(...))"
        )
        fail(
            f"`{COUNT}({shown})` returned a {type(got).__name__}: a parameter count is an int, so "
            f"{advice}."
        )
    return got


def check_block_param_count(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Equals sum(p.numel()) of nn.TransformerEncoderLayer(norm_first=True) of that size; an int
    on every call, the defaults included."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    configs = [(8, 32), (12, 20), (64, 256)]  # (C, d_mlp)
    configs += [(randint(gen, 1, 40), randint(gen, 1, 90)) for _ in range(3)] if thorough else []
    configs += _core.wide_draws(seed, thorough, 3, (1, 256), (1, 1024))
    with record_torch_calls() as names:
        counts = {
            (C, m, b): _block_count(fn, C, d_mlp=m, bias=b)
            for C, m in configs
            for b in (True, False)
        }
        C = configs[0][0]
        default = _block_count(fn, C)
    _core.by_arithmetic(names, COUNT)
    for (C, d_mlp, bias), got in counts.items():
        real = _torch_block(C, 1, d_mlp, bias=bias, meta=True)
        if got != sum(p.numel() for p in real.parameters()):
            fail(_block_count_mistake(C, d_mlp, bias, got))
    if default != counts[(configs[0][0], 4 * configs[0][0], True)]:
        fail(
            f"`{COUNT}(d_model)` should count a 4 * d_model hidden layer with biases: the defaults "
            "are d_mlp=None (meaning 4 * d_model) and bias=True."
        )
    C = 12288  # GPT-3's width
    got = _block_count(fn, C, d_mlp=4 * C, bias=True)
    if got != 12 * C * C + 13 * C:
        fail(_block_count_mistake(C, 4 * C, True, got))
