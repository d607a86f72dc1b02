"""Per-head statistics of attention weights, head removal and pruning curves.

Shape legend: ``B`` batch, ``nh`` heads, ``T`` queries, ``S`` keys (``S = T`` in self-attention),
``n_layers`` blocks. Statistics take weights ``(..., nh, T, S)`` and return ``(..., nh)``.

The explorer and the training script use these; the notebook passes the learner's own
``head_entropy`` and ``previous_token_score`` to the explorer instead of the built-in ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from autograder.tools import toy_data


def entropy(weights: torch.Tensor) -> torch.Tensor:
    """Mean over queries of each row's entropy in nats (0·log 0 = 0): ``(..., nh)``."""
    return torch.special.entr(weights).sum(-1).mean(-1)  # (..., nh, T, S) -> (..., nh)


def previous_token(weights: torch.Tensor) -> torch.Tensor:
    """Mean over queries 1..T-1 of the weight on the key just before the query: ``(..., nh)``."""
    below = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1)  # (..., nh, T-1)
    return below.mean(-1)  # (..., nh)


def first_token(weights: torch.Tensor) -> torch.Tensor:
    """Mean over queries 1..T-1 of the weight on key 0 (``<s>``): the attention sink."""
    return weights[..., 1:, 0].mean(-1)  # (..., nh, T-1) -> (..., nh)


def self_weight(weights: torch.Tensor) -> torch.Tensor:
    """Mean over queries 1..T-1 of the weight a query puts on itself."""
    return torch.diagonal(weights, dim1=-2, dim2=-1)[..., 1:].mean(-1)  # (..., nh)


def topic_weight(weights: torch.Tensor) -> torch.Tensor:
    """Mean over queries 2..T-1 of the weight on key 1 (the topic token in the toy data)."""
    return weights[..., 2:, 1].mean(-1)  # (..., nh, T-2) -> (..., nh)


def induction(weights: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Weight on keys that *follow* an earlier copy of the query's token.

    ``weights`` ``(B, nh, T, T)``, ``tokens`` ``(B, T)``. Averaged over the queries that have such a
    key (0 when none has): an induction head attends to "what came after me last time".
    """
    same = tokens[:, :, None] == tokens[:, None, :-1]  # (B, T, T-1): token[q] == token[k-1]
    follows = torch.zeros(weights.shape[0], *weights.shape[-2:], dtype=torch.bool)  # (B, T, T)
    follows[:, :, 1:] = same
    follows &= torch.ones_like(follows[0]).tril(-1)  # keys strictly before the query
    has = follows.any(-1)  # (B, T)
    mass = (weights * follows[:, None]).sum(-1)  # (B, nh, T)
    count = has.sum().clamp(min=1)
    return (mass * has[:, None]).sum((0, 2)) / count  # (nh,)


STATISTICS: dict[str, str] = {
    "entropy": "mean entropy of a query's weights, nats (0 = one key, log T = uniform)",
    "previous": "weight on the previous token",
    "first": "weight on the first token <s> (attention sink)",
    "self": "weight on the query's own position",
    "topic": "weight on position 1 (the topic)",
    "induction": "weight on the token after an earlier copy of the current one",
}


@torch.no_grad()
def head_table(
    weights: Sequence[torch.Tensor],
    tokens: torch.Tensor,
    entropy_fn: Callable = entropy,
    previous_fn: Callable = previous_token,
) -> dict[str, torch.Tensor]:
    """Every statistic of :data:`STATISTICS` per head, averaged over the batch: ``(n_layers, nh)``.

    ``weights`` holds one ``(B, nh, T, T)`` tensor per layer (what the model returns).
    """
    table = {}
    for name, fn in (
        ("entropy", entropy_fn),
        ("previous", previous_fn),
        ("first", first_token),
        ("self", self_weight),
        ("topic", topic_weight),
    ):
        table[name] = torch.stack([fn(w).mean(0) for w in weights])  # (n_layers, nh)
    table["induction"] = torch.stack([induction(w, tokens) for w in weights])
    return {k: v.float() for k, v in table.items()}


LABEL_RULES = (("previous", 0.5), ("induction", 0.5), ("topic", 0.3), ("first", 0.3), ("self", 0.3))


def describe_head(table: dict[str, torch.Tensor], layer: int, head: int) -> str:
    """The statistics above a threshold, strongest first, e.g. ``"previous 0.93"``; else "mixed"."""
    found = sorted(
        (
            (float(table[name][layer, head]), name)
            for name, low in LABEL_RULES
            if float(table[name][layer, head]) >= low
        ),
        reverse=True,
    )
    return ", ".join(f"{name} {value:.2f}" for value, name in found) or "mixed"


# ---------------------------------------------------------------------------- removing heads


@torch.no_grad()
def ablation_importance(model, batch: toy_data.Batch) -> torch.Tensor:
    """Loss increase when each head alone is removed (Michel et al., 2019): ``(n_layers, nh)``."""
    was_training = model.training
    model.eval()
    try:
        base = model.loss(batch)
        out = torch.zeros(model.n_layers, model.num_heads)
        for layer in range(model.n_layers):
            for head in range(model.num_heads):
                mask = torch.ones(model.n_layers, model.num_heads)
                mask[layer, head] = 0.0
                out[layer, head] = model.loss(batch, mask) - base
    finally:
        model.train(was_training)
    return out


@torch.no_grad()
def accuracy_and_loss(model, batch: toy_data.Batch, head_mask=None) -> tuple[float, float]:
    """Accuracy on the predictable positions and mean loss, from one forward pass."""
    logits, _ = model(batch.inputs, head_mask)  # (B, T, V)
    right = logits.argmax(-1) == batch.targets  # (B, T)
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch.targets.flatten())
    return float(right[batch.scored].float().mean()), float(loss)


@torch.no_grad()
def pruning_curve(model, batch: toy_data.Batch, order: Sequence[int]) -> dict[str, list[float]]:
    """Accuracy and loss after removing 0, 1, ..., all heads in ``order`` (flat indices).

    Flat index ``i`` is layer ``i // nh``, head ``i % nh``.
    """
    mask = torch.ones(model.n_layers, model.num_heads)
    points = [accuracy_and_loss(model, batch, mask)]
    for i in order:
        mask.view(-1)[int(i)] = 0.0
        points.append(accuracy_and_loss(model, batch, mask))
    return {"accuracy": [a for a, _ in points], "loss": [loss for _, loss in points]}


def pruning_study(
    model, batch: toy_data.Batch, importance: torch.Tensor, n_random: int = 10, seed: int = 0
) -> dict:
    """Pruning curves: least important head first, most important first, and random orders."""
    flat = importance.flatten()
    n = flat.numel()
    gen = torch.Generator().manual_seed(seed)
    randoms = [
        pruning_curve(model, batch, torch.randperm(n, generator=gen).tolist())
        for _ in range(n_random)
    ]
    return {
        "removed": list(range(n + 1)),
        "least_important_first": pruning_curve(model, batch, flat.argsort().tolist()),
        "most_important_first": pruning_curve(model, batch, flat.argsort(descending=True).tolist()),
        "random_accuracy": [c["accuracy"] for c in randoms],
        "random_loss": [c["loss"] for c in randoms],
    }
