"""Claims of notebook 07: ``head_entropy``, ``previous_token_score`` and ``head_importance``.

Shape legend: ``nh`` heads, ``T`` queries, ``S`` keys, ``n_layers`` blocks, ``...`` any number of
leading dimensions.

The oracles are the checks' own: ``torch.special.entr`` (0 at p = 0) for the entropy,
``torch.diagonal(..., offset=-1)`` for the previous-token score, and for head importance the loss
of an eval-mode copy of the model whose removed head has its ``out_proj`` columns zeroed (a
different route from the model's ``head_mask``). The models are rebuilt identically on both sides:
the committed checkpoint, and small ones seeded here.

Left to the checks: the output dtype, and how ``head_importance`` treats the model it is given
(mode, gradients, head mask and weights as found). Both are rules, not values.
"""

from __future__ import annotations

import torch

from autograder.checks import heads as checks
from autograder.lab import toy_data
from autograder.lab.tiny_model import ModelConfig, TinyTransformer, load_checkpoint

from .claims import Claim, _gen, _mismatch

# ----------------------------------------------------------------------- attention weights


def _weights(gen, *shape, causal=False, sharpness=2.0, dtype=torch.float64) -> torch.Tensor:
    """Attention weights ``shape = (..., T, S)``: rows sum to 1; causal rows keep j <= i + S - T."""
    scores = sharpness * torch.randn(*shape, generator=gen, dtype=dtype)  # (..., T, S)
    if causal:
        T, S = shape[-2:]
        allowed = torch.ones(T, S, dtype=torch.bool).tril(S - T)  # (T, S)
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1)  # (..., T, S)


def _one_hot(T: int, key_of, nh: int = 2) -> torch.Tensor:
    """``(1, nh, T, T)`` weights where query t attends only to key ``key_of(t)``."""
    w = torch.zeros(1, nh, T, T, dtype=torch.float64)  # (1, nh, T, T)
    for t in range(T):
        w[..., t, key_of(t)] = 1.0
    return w


# (..., nh, T, S): no batch, a batch, two leading dimensions, one head, then larger
_SHAPES = [(4, 5, 7), (2, 3, 6, 9), (2, 2, 3, 4, 5), (1, 1, 4, 3), (3, 5, 12, 10)]


def _entropy_cases() -> list[tuple]:
    gen = _gen(701)
    cases = [(_weights(gen, *shape, sharpness=1.0 + 0.5 * i),) for i, shape in enumerate(_SHAPES)]
    cases.append((_weights(gen, 2, 3, 6, 8, dtype=torch.float32),))
    return cases


def _zero_weight_cases() -> list[tuple]:
    """One-hot rows, causal weights, a query row of zeros, uniform rows, sharp causal weights."""
    gen = _gen(702)
    eye = torch.eye(5, dtype=torch.float64).expand(2, 3, 5, 5)  # (B, nh, T, S)
    empty = _weights(gen, 2, 3, 5, 7, causal=True)  # (B, nh, T, S)
    empty[:, :, 1] = 0.0  # a query that may attend to nothing
    return [
        (eye.clone(),),
        (_weights(gen, 2, 4, 6, 6, causal=True),),
        (empty,),
        (torch.full((3, 4, 8), 1 / 8, dtype=torch.float64),),  # (nh, T, S)
        (_weights(gen, 2, 3, 9, 9, causal=True, sharpness=8.0),),
        (_weights(gen, 2, 3, 4, 4, causal=True, dtype=torch.float32),),
    ]


def _previous_cases() -> list[tuple]:
    """Square weights, plain and causal in turn, then T = 2."""
    gen = _gen(703)
    square = [(*shape[:-1], shape[-2]) for shape in _SHAPES] + [(2, 3, 2, 2)]
    cases = [(_weights(gen, *shape, causal=i % 2 == 1),) for i, shape in enumerate(square)]
    cases.append((_weights(gen, 2, 3, 4, 4, causal=True, dtype=torch.float32),))
    return cases


def _pattern_cases() -> list[tuple]:
    """Perfect previous-token, self and first-token heads, as the checks build them."""
    return [
        (_one_hot(T, key_of),)
        for T in (5, 8, 2, 3, 16)
        for key_of in (lambda t: max(t - 1, 0), lambda t: t, lambda t: 0)
    ]


def _verify_stat(name: str, oracle):
    def verify(cases: list[tuple], outputs: list) -> str | None:
        for (w,), out in zip(cases, outputs, strict=True):
            what = f"`{name}` of weights {tuple(w.shape)}"
            if isinstance(out, tuple):
                return f"{what} returned a tuple, not one tensor (..., nh)"
            problem = _mismatch(out, oracle(w.to(torch.float64)), what)  # (..., nh)
            if problem:
                return problem
        return None

    return verify


# -------------------------------------------------------------------------- head importance


def _seeded_model(gen: torch.Generator, config: ModelConfig) -> TinyTransformer:
    """A float64 model in eval mode initialised from ``gen``, with the checks' enlarged weights.

    Only the CPU generator is seeded: seeding CUDA's would reach the learner's GPU random state.
    """
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
        model = TinyTransformer(config)
    with torch.no_grad():  # heads matter unequally, as in the checks' models
        for block in model.blocks:
            for proj in (block.attn.q_proj, block.attn.k_proj, block.attn.out_proj):
                proj.weight.mul_(3.0)
    return model.double().eval()


def _importance_cases() -> list[tuple]:
    """``(model, batch)``: the committed trained model, then small seeded float64 models."""
    gen = _gen(704)
    with torch.random.fork_rng(devices=[]):  # building modules draws from the global generator
        cases = [(load_checkpoint(), toy_data.make_batch(24, gen))]
    for n_layers, nh, d_model in [(1, 4, 16), (3, 2, 16)]:
        d_mlp = 2 * d_model if n_layers == 3 else 0
        config = ModelConfig(d_model=d_model, num_heads=nh, n_layers=n_layers, d_mlp=d_mlp)
        cases.append((_seeded_model(gen, config), toy_data.make_batch(8, gen, seq_len=24)))
    return cases


def _verify_importance(cases: list[tuple], outputs: list) -> str | None:
    for (model, batch), out in zip(cases, outputs, strict=True):
        L, nh = model.n_layers, model.num_heads
        what = f"`{checks.IMPORTANCE}` of a model with n_layers={L}, nh={nh}"
        if isinstance(out, tuple):
            return f"{what} returned a tuple, not one tensor (n_layers, nh)"
        problem = _mismatch(out, checks._importance(model, batch), what)  # (n_layers, nh)
        if problem:
            return problem
    return None


def claims() -> dict[str, Claim]:
    """Test grade id -> the claim its passing establishes."""
    entropy, previous = checks.ENTROPY, checks.PREVIOUS
    verify_entropy = _verify_stat(entropy, checks._entropy)
    verify_previous = _verify_stat(previous, checks._previous)
    return {
        "test_head_entropy_values": Claim(entropy, _entropy_cases, verify_entropy),
        "test_head_entropy_zero_weights": Claim(entropy, _zero_weight_cases, verify_entropy),
        "test_previous_token_score_values": Claim(previous, _previous_cases, verify_previous),
        "test_previous_token_score_patterns": Claim(previous, _pattern_cases, verify_previous),
        "test_head_importance_values": Claim(
            checks.IMPORTANCE, _importance_cases, _verify_importance
        ),
    }
