"""Notebook 08's checks for windows, sinks, RoPE scaling and ALiBi, beyond the catalogues
(``tests/mistakes/long_context.py``, ``sinks.py``, ``rope_scaling.py``, ``alibi.py`` and
``window_bytes.py``, run by ``tests/test_mistakes.py`` and ``tests/test_replay.py``): the oracles
against cases worked by hand, and why the checks are built the way they are."""

from __future__ import annotations

import math

import torch

from autograder.checks import (
    _masks,
    nb08_alibi,
    nb08_rolling,
    nb08_rope_scaling,
    nb08_sinks,
)


def test_the_window_mask_oracle_on_a_hand_made_case():
    """W = 2: each query sees itself and the key before it; the last 2 of 4 positions query."""
    expected = torch.tensor([[False, True, True, False], [False, False, True, True]])
    assert torch.equal(_masks.window_mask(2, 4, 2), expected)


def test_reading_the_ring_in_slot_order_is_invisible_one_token_at_a_time():
    """Why the decoding check feeds chunks that start where the ring has wrapped: one query
    attends to a set of keys, whose order changes nothing, so token-by-token decoding hides the
    slot-order mistake that a chunk's mask exposes."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 9, 4, generator=gen) for _ in range(3))
    full = nb08_rolling.full_pass(q, k, v, 3)
    one_by_one, _ = nb08_rolling.simulate(q, k, v, 3, [1] * 9, slot_order=True)
    assert torch.allclose(one_by_one, full, atol=1e-5)
    chunked, _ = nb08_rolling.simulate(q, k, v, 3, [1, 3, 3, 2], slot_order=True)
    assert not torch.allclose(chunked, full, atol=1e-3)


def test_the_sink_cache_keeps_the_sinks_and_the_window():
    assert nb08_sinks.kept(6, 2, 3).tolist() == [0, 1, 4, 5, 6]
    assert nb08_sinks.kept(3, 2, 3).tolist() == [0, 1, 2, 3]


def test_alibi_slopes_of_the_paper():
    """8 heads: 1/2 … 1/256; 12 heads: those of 8, then every other one of 16 (the paper's
    example of a head count that is not a power of two)."""
    assert nb08_alibi.slopes(8) == [2.0**-i for i in range(1, 9)]
    sixteen = [2 ** (-i / 2) for i in range(1, 17)]
    assert torch.allclose(
        torch.tensor(nb08_alibi.slopes(12)), torch.tensor(nb08_alibi.slopes(8) + sixteen[0::2][:4])
    )
    assert len(nb08_alibi.slopes(112)) == 112  # BLOOM-176B


def test_rope_scaling_oracle_on_worked_numbers():
    """Dynamic NTK leaves RoPE alone up to the trained length; at twice it with factor 2 the last
    pair slows by exactly the scale, 3; YaRN keeps the fastest pair and interpolates the
    slowest, with an attention factor of 0.1 ln 4 + 1."""
    args = (128, 10000.0, 2.0, 4096)
    theta, _ = nb08_rope_scaling.expected("default", *args, None, 32.0, 1.0)
    dynamic, _ = nb08_rope_scaling.expected("dynamic", *args, 2048, 32.0, 1.0)
    assert torch.equal(dynamic, theta)
    dynamic, _ = nb08_rope_scaling.expected("dynamic", *args, 8192, 32.0, 1.0)
    assert math.isclose(dynamic[0].item(), 1.0) and math.isclose(theta[-1] / dynamic[-1], 3.0)
    yarn, attention = nb08_rope_scaling.expected("yarn", 128, 10000.0, 4.0, 4096, None, 32.0, 1.0)
    assert yarn[0] == theta[0] and math.isclose(yarn[-1], theta[-1] / 4)
    assert math.isclose(attention, 0.1 * math.log(4) + 1)


def test_llama3_oracle_on_llama_3_1():
    """Llama 3.1 (hs 128, base 500,000, factor 8, L 8192): the 29 fastest pairs turn in under
    2048 tokens and stay, the 29 slowest take over 8192 and are divided by 8, 6 are blended."""
    args = (128, 500000.0, 8.0, 8192, None, 32.0, 1.0)
    theta, _ = nb08_rope_scaling.expected("default", *args)
    scaled, attention = nb08_rope_scaling.expected("llama3", *args, 1.0, 4.0)
    ratio = scaled / theta
    assert torch.allclose(ratio[:29], torch.ones(29, dtype=torch.float64))
    assert torch.allclose(ratio[35:], torch.full((29,), 1 / 8, dtype=torch.float64))
    assert bool(((ratio[29:35] > 1 / 8) & (ratio[29:35] < 1)).all()) and attention == 1.0
