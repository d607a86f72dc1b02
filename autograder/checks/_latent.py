"""The oracle of multi-head latent attention (notebook 08, section 4) and its known-wrong twins.

Shape legend: ``B`` batch, ``T`` new positions, ``S`` positions attended to, ``C`` = d_model,
``nh`` heads, ``hd`` = head_dim (the no-RoPE part of a query or key, and a value's width),
``dr`` = d_rope (the decoupled RoPE part), ``dc`` = d_latent (the cached latent).

The layout is DeepSeek's (``inference/model.py``, ``q_lora_rank = 0``): ``wq`` gives each head
``[q_nope | q_rope]``; ``wkv_a`` gives ``[c | k_rope]``, the latent and one RoPE key shared by
every head; ``kv_norm`` is an RMSNorm of the latent; ``wkv_b`` gives each head ``[k_nope | v]``
from the normalised latent; ``wo`` merges the heads. Scores are
``(q_nope · k_nope + q_rope · k_rope) / √(hd + dr)``, causal, bottom-right. RoPE pairs feature
``i`` with ``i + dr/2``, as everywhere in this course (notebook 04's ``rotate``).

:func:`oracle` computes it in float64 with ``F.scaled_dot_product_attention`` from the module's
own weights; its keyword arguments feed it the wrong way (blocked layouts, RoPE left out or
spread over whole heads, another scale...), to name a learner's mistake;
:func:`expect_structure` holds the module to the layout first.
"""

from __future__ import annotations

import math
import weakref

import torch
import torch.nn.functional as F
from torch import nn

from ._core import fail
from ._rope import rotate

LAYERS = ("wq", "wkv_a", "wkv_b", "wo")
MLA_NAME = "MultiHeadLatentAttention"

#: The weights each learner module was built with, before the check drew its own: a module that
#: copies or merges them in ``__init__`` keeps computing with these.
INITIAL: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _widths(C: int, nh: int, dc: int, hd: int, dr: int) -> dict[str, tuple[int, int]]:
    """``(in_features, out_features)`` of each projection."""
    return {
        "wq": (C, nh * (hd + dr)),
        "wkv_a": (C, dc + dr),
        "wkv_b": (dc, nh * 2 * hd),
        "wo": (nh * hd, C),
    }


_WHY = {
    "wq": "each head's query is [q_nope | q_rope], head_dim + d_rope features",
    "wkv_a": "it gives the latent and the shared RoPE key side by side, d_latent + d_rope "
    "features (the decoupled key does not come from the latent)",
    "wkv_b": "it up-projects the latent into each head's [k_nope | v], 2 * head_dim features "
    "per head (the RoPE key is not up-projected)",
    "wo": "it merges num_heads values of head_dim features",
}


def expect_structure(module, config, name: str, cls_name: str) -> None:
    """Fail unless ``module`` has the attributes and projections of the contract."""
    __tracebackhide__ = True
    C, nh, dc, hd, dr = config
    if not isinstance(module, nn.Module):
        fail(f"`{name}` should give an nn.Module (`class {cls_name}(nn.Module)`).")
    for attr, value in (("num_heads", nh), ("d_latent", dc), ("head_dim", hd), ("d_rope", dr)):
        if getattr(module, attr, None) != value:
            fail(f"`{name}` should store `self.{attr} = {attr}` (expected {value}).")
    for layer, (n_in, n_out) in _widths(*config).items():
        found = getattr(module, layer, None)
        if not isinstance(found, nn.Linear):
            fail(f"`{name}` needs an attribute `{layer}` that is an nn.Linear.")
        if (found.in_features, found.out_features) != (n_in, n_out):
            fail(
                f"`{layer}` is nn.Linear({found.in_features}, {found.out_features}) but should "
                f"be nn.Linear({n_in}, {n_out}, bias=False): {_WHY[layer]}."
            )
        if found.bias is not None:
            fail(f"`{layer}` has a bias: DeepSeek's projections have none (bias=False).")
    weight = getattr(getattr(module, "kv_norm", None), "weight", None)
    if not isinstance(weight, torch.Tensor) or tuple(weight.shape) != (dc,):
        fail(f"`{name}` needs `self.kv_norm = nn.RMSNorm(d_latent)`, the latent's own norm.")


def dims(module) -> tuple[int, int, int, int]:
    """``(nh, hd, dr, dc)`` of a module that passed the structure checks."""
    return module.num_heads, module.head_dim, module.d_rope, module.d_latent


def norm_eps(module) -> float:
    """The epsilon of ``module.kv_norm`` (``nn.RMSNorm``'s ``eps``, Hugging Face's
    ``variance_epsilon``); None means float32's machine epsilon, as ``nn.RMSNorm`` uses."""
    norm = module.kv_norm
    eps = getattr(norm, "eps", getattr(norm, "variance_epsilon", None))
    return torch.finfo(torch.float32).eps if eps is None else float(eps)


def latent(module, x: torch.Tensor, norm: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """The latent ``(B, S, dc)`` (after ``kv_norm`` unless ``norm=False``) and the unrotated
    RoPE key ``(B, S, dr)`` of ``x (B, S, C)``, in float64."""
    _, _, dr, dc = dims(module)
    kv = x.double() @ module.wkv_a.weight.double().T  # (B, S, dc + dr)
    c, k_rope = kv.split([dc, dr], dim=-1)  # (B, S, dc), (B, S, dr)
    if norm:
        c = F.rms_norm(c, (dc,), module.kv_norm.weight.double(), norm_eps(module))
    return c, k_rope


def _split(t: torch.Tensor, nh: int, widths: list[int], blocked: bool) -> list[torch.Tensor]:
    """``t (B, L, nh * sum(widths))`` into per-head parts ``(B, nh, L, width)``: each head's
    parts side by side (DeepSeek's layout), or ``blocked``: every head's first part, then every
    head's second part."""
    B, L, _ = t.shape
    if blocked:
        parts = t.split([nh * w for w in widths], dim=-1)
        return [p.view(B, L, nh, w).transpose(1, 2) for p, w in zip(parts, widths, strict=True)]
    heads = t.view(B, L, nh, sum(widths))  # (B, L, nh, sum(widths))
    return [p.transpose(1, 2) for p in heads.split(widths, dim=-1)]  # (B, nh, L, width) each


def oracle(
    module,
    x: torch.Tensor,
    start: int = 0,
    *,
    rope: str = "decoupled",
    scale: float | None = None,
    norm: bool = True,
    q_blocked: bool = False,
    kv_blocked: bool = False,
    swap: bool = False,
    mask: str = "bottom-right",
    past: bool = True,
    k_positions: torch.Tensor | None = None,
    q_positions: torch.Tensor | None = None,
    weights: dict[str, torch.Tensor] | None = None,
) -> torch.Tensor:
    """Multi-head latent attention's output ``(B, T, C)`` for positions ``start:`` of ``x (B, S,
    C)``, keys at ``0 … S-1``, in float64.

    ``rope``: ``"decoupled"`` (right), ``"none"`` (no RoPE part in the scores), ``"unrotated"``
    (the RoPE parts used but never turned), ``"keys unrotated"``, ``"whole heads"`` (each
    head's full ``[nope | rope]`` query and key turned together), or ``"latent"`` (the latent
    turned too, before the up-projection). ``swap`` takes the values from
    each head's first ``hd`` rows of ``wkv_b`` and the keys from the last; ``mask`` is
    ``"bottom-right"``, ``"top-left"`` or ``"none"``; ``past=False`` drops the earlier keys;
    ``weights`` stands in for ``wq``, ``wkv_b`` or ``wo``'s weight (a stale or misread copy).
    """
    nh, hd, dr, _ = dims(module)
    B, S, _ = x.shape

    def weight(layer: str) -> torch.Tensor:
        return (weights or {}).get(layer, getattr(module, layer).weight).double()

    q = x[:, start:].double() @ weight("wq").T  # (B, T, nh * (hd + dr))
    q_nope, q_rope = _split(q, nh, [hd, dr], q_blocked)  # (B, nh, T, hd), (B, nh, T, dr)
    c, k_rope = latent(module, x, norm)  # (B, S, dc), (B, S, dr)
    k_positions = torch.arange(S) if k_positions is None else k_positions  # (S,)
    q_positions = torch.arange(start, S) if q_positions is None else q_positions  # (T,)
    if rope == "latent":
        c = rotate(c, k_positions)
    kv = c @ weight("wkv_b").T  # (B, S, nh * 2hd)
    k_nope, v = _split(kv, nh, [hd, hd], kv_blocked)  # (B, nh, S, hd) each
    if swap:
        k_nope, v = v, k_nope
    if rope in ("decoupled", "keys unrotated", "latent"):
        q_rope = rotate(q_rope, q_positions)
    if rope in ("decoupled", "latent"):
        k_rope = rotate(k_rope, k_positions)
    k_rope = k_rope[:, None].expand(B, nh, S, dr)  # (B, nh, S, dr): one key for every head
    q, k = torch.cat([q_nope, q_rope], -1), torch.cat([k_nope, k_rope], -1)  # (B, nh, ., hd+dr)
    if rope == "whole heads":
        q, k = rotate(q, q_positions), rotate(k, k_positions)
    if rope == "none":
        q, k = q_nope, k_nope
    if not past:
        k, v = k[:, :, start:], v[:, :, start:]  # (B, nh, T, .)
    T, S = q.shape[2], k.shape[2]
    allowed = None
    if mask != "none":
        offset = S - T if mask == "bottom-right" else 0
        allowed = torch.ones(T, S, dtype=torch.bool).tril(offset)  # (T, S)
    scale = 1 / math.sqrt(hd + dr) if scale is None else scale
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=scale)  # (B,nh,T,hd)
    return out.transpose(1, 2).reshape(B, T, nh * hd) @ weight("wo").T  # (B, T, C)


def full_pass_variants(module, x, start: int, name: str) -> dict[str, torch.Tensor]:
    """Known-wrong outputs for positions ``start:`` of ``x``, each with its diagnosis."""
    nh, hd, dr, dc = dims(module)

    def wrong(**how) -> torch.Tensor:
        return oracle(module, x, start, **how)

    no_rope = (
        f"Your `{name}` leaves the decoupled RoPE part out of the scores: add q_rope · k_rope "
        "(concatenate [q_nope, q_rope] and [k_nope, k_rope] per head), else attention cannot "
        "tell positions apart"
    )
    blocked = (
        "DeepSeek's layout gives each head [k_nope | v] side by side, so view it as "
        "(B, S, num_heads, 2 * head_dim) before splitting"
    )
    if name != MLA_NAME:
        blocked = (
            "DeepSeek's layout keeps each head's W_UK and W_UV side by side in wkv_b's rows, so "
            "view the weight as (num_heads, 2 * head_dim, d_latent): W_UK is [:, :head_dim], "
            "W_UV [:, head_dim:]"
        )
    variants = {
        f"{no_rope}.": wrong(rope="none", scale=1 / math.sqrt(hd)),
        f"{no_rope} (the scale 1/√(head_dim + d_rope) stays).": wrong(rope="none"),
        f"Your `{name}` rotates every feature of each head's query and key, k_nope included: "
        "outputs still depend on positions, but a rotation that depends on the key's position "
        "then sits between the query and W_UK, so W_UK can no longer be absorbed; rotate only "
        "the d_rope features of q_rope and the shared k_rope.": wrong(rope="whole heads"),
        f"Your `{name}` uses q_rope and k_rope without rotating them: apply_rope to both at "
        "their positions (P … P+T-1).": wrong(rope="unrotated"),
        f"Your `{name}` rotates q_rope but not the shared key k_rope: rotate k_rope at its "
        "positions before caching it.": wrong(rope="keys unrotated"),
        f"Your `{name}` scales the scores by 1/√head_dim: a query is head_dim + d_rope wide "
        "([q_nope, q_rope]), so scale by 1/√(head_dim + d_rope).": wrong(scale=1 / math.sqrt(hd)),
        f"Your `{name}` scales the scores by 1/√(d_latent + d_rope), the width of the absorbed "
        "query: the scores are the same numbers as the naive q · k, so keep "
        "1/√(head_dim + d_rope).": wrong(scale=1 / math.sqrt(dc + dr)),
        f"Your `{name}` takes each head's values from the first head_dim rows of its block of "
        "wkv_b and its keys from the last: per head, wkv_b gives [k_nope | v], so W_UK comes "
        "first and W_UV second (absorb W_UK into the query, W_UV into the output).": wrong(
            swap=True
        ),
        f"Your `{name}` splits wkv_b into all heads' keys then all heads' values: "
        f"{blocked}.": wrong(kv_blocked=True),
        f"Your `{name}` splits wq's output into all heads' q_nope then all heads' q_rope: each "
        "head gets [q_nope | q_rope] side by side, so view it as (B, T, num_heads, head_dim + "
        "d_rope) before splitting.": wrong(q_blocked=True),
        f"Your `{name}` skips kv_norm: normalise the latent, c_kv = kv_norm(c), before the "
        "up-projection and before caching it.": wrong(norm=False),
        f"Your `{name}` attends to every position, later ones included: apply the causal "
        "mask, aligned bottom-right.": wrong(mask="none"),
    }
    if dc % 2 == 0:  # RoPE turns pairs of features
        variants[
            f"Your `{name}` rotates the latent before the up-projection: keys and values made "
            "from it then change with the key's position, so W_UK can no longer be absorbed into "
            "the query; rotate only q_rope and the shared k_rope."
        ] = wrong(rope="latent")
    w = module.wkv_b.weight
    misread = w.reshape(nh, dc, 2 * hd).transpose(1, 2).reshape(w.shape)  # per head, transposed
    variants[
        f"Your `{name}` reads wkv_b's weight as (num_heads, d_latent, 2 * head_dim): nn.Linear "
        "stores it as (out_features, in_features), so view it as (num_heads, 2 * head_dim, "
        "d_latent), W_UK = [:, :head_dim] and W_UV = [:, head_dim:]."
    ] = wrong(weights={"wkv_b": misread})
    initial = INITIAL.get(module)
    if initial is not None:
        stale = (
            f"Your `{name}` computes with the weights it was built with: matrices copied or "
            "merged in __init__ miss every later change (a loaded state dict, training), so "
            "read self.wkv_b.weight (and wq, wo) in forward"
        )
        variants[f"{stale}."] = wrong(weights={"wkv_b": initial["wkv_b"]})
        variants[f"{stale} (all three are stale here)."] = wrong(weights=initial)
    if nh == 1:  # blocked and side-by-side layouts are the same for one head
        variants = {why: t for why, t in variants.items() if "side by side" not in why}
    return variants
