"""The rotary position embedding (RoPE) oracle that notebooks 04, 08 and 10 grade against.

Shape legend: ``T`` positions, ``hs`` head size (even), ``hs/2`` feature pairs.

The convention is split halves (GPT-NeoX, Hugging Face's Llama ``rotate_half``): feature ``i``
and feature ``i + hs/2`` form pair ``i``, turned by ``position · base^(-2i/hs)``. PyTorch does the
turning: each pair is the complex number ``x_i + i·x_{i+hs/2}`` multiplied by ``torch.polar(1,
angle)`` in float64. It lives here, not in one notebook's check module, because the later
notebooks' modules (MLA, rolling caches, sinks, the rotary bug hunt) rotate with it too.
"""

from __future__ import annotations

import torch

BASE = 10000.0
LLAMA3_BASE = 500_000.0  # Llama 3's rope_theta: a default copied from its config
#: The convention, as failure messages name it.
HALVES = (
    "this course, like GPT-NeoX and Hugging Face's Llama, pairs feature i with feature i + hs/2 "
    "(split halves: rotate_half(x) = cat(-x2, x1))"
)

#: What a rotation may run besides a notebook's own operators: complex numbers (a rotation written
#: as ``torch.view_as_complex(...) * torch.polar(...)`` is as correct as ``rotate_half``), and
#: dtype arithmetic (``torch.promote_types`` picks the float32 the angles are computed in).
COMPLEX = frozenset(
    f"aten::{name}"
    for name in (
        "view_as_complex view_as_real polar complex real imag promote_types result_type"
    ).split()
)


def rotate(
    x: torch.Tensor,
    positions: torch.Tensor,
    base: float = BASE,
    *,
    layout: str = "halves",
    sign: float = 1.0,
    exponent: float = 2.0,
) -> torch.Tensor:
    """The oracle: ``x (..., T, hs)``, pair ``i`` turned by ``positions · base^(-exponent·i/hs)``.

    ``layout="interleaved"`` pairs features ``(2i, 2i + 1)``; ``sign=-1`` turns the other way.
    Computed with complex numbers in float64, returned in ``x.dtype``.
    """
    hs = x.shape[-1]
    half = hs // 2
    theta = base ** (-exponent * torch.arange(half, dtype=torch.float64) / hs)  # (hs/2,)
    angle = sign * positions.to(torch.float64)[:, None] * theta  # (T, hs/2)
    wide = x.to(torch.float64)
    if layout == "halves":
        re, im = wide[..., :half], wide[..., half:]  # (..., T, hs/2) each
    else:
        re, im = wide[..., 0::2], wide[..., 1::2]  # (..., T, hs/2) each
    turned = torch.complex(re, im) * torch.polar(torch.ones_like(angle), angle)  # (..., T, hs/2)
    if layout == "halves":
        out = torch.cat([turned.real, turned.imag], dim=-1)  # (..., T, hs)
    else:
        out = torch.stack([turned.real, turned.imag], dim=-1).flatten(-2)  # (..., T, hs)
    return out.to(x.dtype)


def restarted(chunks: list[int]) -> torch.Tensor:
    """The positions each key gets when every call of a decoding loop counts from 0 again:
    ``(S,)`` for chunks adding up to ``S`` (a classic mistake with a cache)."""
    return torch.cat([torch.arange(size) for size in chunks])
