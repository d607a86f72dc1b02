"""Checks for notebook 08, section 4: ``MultiHeadLatentAttention`` and its absorbed twin
``AbsorbedLatentAttention``.

Shape legend: ``B`` batch, ``T`` new positions, ``P`` cached positions, ``S`` = P + T, ``C`` =
d_model, ``nh`` heads, ``hd`` = head_dim, ``dr`` = d_rope, ``dc`` = d_latent.

The oracle (:mod:`._latent`) is DeepSeek's computation in float64 with
``F.scaled_dot_product_attention``, fed the learner's own weights; the cache must hold only the
normalised latent ``(B, S, dc)`` and the rotated RoPE key ``(B, S, dr)``. Decoding in pieces must
equal the full causal pass. The absorbed module must give the same outputs and cache from the
same weights, and decoding one token must never build a tensor as large as the up-projected keys
(or values) of the whole cache, nor do the arithmetic of making them, by any operators (what
the step ran, :mod:`.measure`: in the grader, the kernel's record as recomputed there):
that is what absorbing W_UK and W_UV buys.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import nn

from autograder.torch_helpers import one_thread

from . import _latent, operators
from ._core import (
    RUN_AGAIN,
    NotWrittenYet,
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
from ._decoding import chunkings, decode
from ._rope import COMPLEX, restarted, rotate
from .measure import measure

#: What learner code may run: notebook 04's operators with rotary embeddings (PyTorch's
#: attention, complex rotations); ``nn.RMSNorm`` runs as element-wise operators on the CPU.
OPERATORS = operators.DEFAULT | operators.SDPA | COMPLEX

#: Learner-importable names that would compute these answers: none.
ANSWERS_IN_TOOLS: dict[str, str] = {}

MLA = _latent.MLA_NAME
ABSORBED = "AbsorbedLatentAttention"
STUB_MLA = (
    f"`{ABSORBED}` builds on your `{MLA}`, not written yet: finish that exercise first, "
    f"{RUN_AGAIN}."
)


def _build(cls, config, gen, name: str = MLA, dtype=torch.float32) -> nn.Module:
    """The learner's module for ``config = (C, nh, dc, hd, dr)`` with seeded weights, in
    ``dtype``, eval mode."""
    __tracebackhide__ = True
    try:
        module = call(cls, name, config)
    except AssertionError as failure:  # the absorbed class inherits the MLA's __init__
        if name == ABSORBED and isinstance(failure, NotWrittenYet):
            fail(STUB_MLA)
        raise
    _latent.expect_structure(module, config, name, MLA)
    module.to(dtype).eval()
    _latent.INITIAL[module] = {
        layer: getattr(module, layer).weight.detach().clone() for layer in ("wq", "wkv_b", "wo")
    }
    with torch.no_grad():
        for layer in _latent.LAYERS:
            weight = getattr(module, layer).weight
            weight.copy_(randn(gen, *weight.shape) / weight.shape[1] ** 0.5)
        module.kv_norm.weight.copy_(0.5 + torch.rand(config[2], generator=gen))
    return module


def _configs(gen, thorough: bool) -> list[tuple[int, int, int, int, int]]:
    """``(C, nh, dc, hd, dr)``: the latent narrower and wider than a head, one head, and random
    ones; head_dim never equals d_latent or d_latent + d_rope, so every scale is told apart."""
    configs = [(32, 4, 12, 8, 4), (24, 2, 10, 6, 2), (16, 1, 6, 4, 2)]
    for _ in range(1 if thorough else 0):
        nh, hd, dr = randint(gen, 1, 4), randint(gen, 2, 6), 2 * randint(gen, 1, 3)
        configs.append((randint(gen, 4, 9) * 4, nh, hd + dr + randint(gen, 1, 6), hd, dr))
    return configs


def _forward(module, x, past=None, name: str = MLA):
    """Run the learner's forward; check the shapes of ``(out, (c_kv, k_rope))``."""
    __tracebackhide__ = True
    _, hd, dr, dc = _latent.dims(module)
    nh = module.num_heads
    kwargs = {} if past is None else {"past_kv": past}
    hint = "the cache is (c_kv (B, S, d_latent), k_rope (B, S, d_rope)): append along dim 1"
    with torch.no_grad():
        result = call(module, f"{name}.forward", (x,), kwargs, hint)
    if not isinstance(result, tuple | list) or len(result) != 2:
        fail(f"`{name}.forward` should return `(out, (c_kv, k_rope))`.")
    out = expect_tensor(result[0], f"{name}.forward", "a tensor `out` as the first item")
    cache = result[1]
    if not isinstance(cache, tuple | list) or len(cache) != 2:
        fail(f"`{name}.forward` should return the cache `(c_kv, k_rope)` as its second item.")
    c = expect_tensor(cache[0], f"{name}.forward", "the cached latent `c_kv`")
    k_rope = expect_tensor(cache[1], f"{name}.forward", "the cached RoPE key `k_rope`")
    B, T, C = x.shape
    S = T + (0 if past is None else past[0].shape[1])
    inputs = describe((x,), kwargs)
    expect_shape(out, (B, T, C), "`out`", inputs)
    expect_dtype(out, x.dtype, "`out`")
    up = {(B, S, nh * 2 * hd), (B, nh, S, hd), (B, nh, S, hd + dr), (B, S, nh, hd + dr)}
    wide = c.shape[-1] in (nh * hd, nh * 2 * hd, nh * (hd + dr))
    if tuple(c.shape) != (B, S, dc) and (tuple(c.shape) in up or wide):
        fail(
            f"Your cache holds keys or values after the up-projection ({tuple(c.shape)}): "
            f"cache only the normalised latent c_kv, (B, S, d_latent) = {(B, S, dc)}, and "
            "k_rope; up-projecting is what makes a cache num_heads times larger."
        )
    expect_shape(c, (B, S, dc), "The cached latent `c_kv`", inputs)
    hint = ""
    if tuple(k_rope.shape) in ((B, nh, S, dr), (B, S, nh, dr), (B, S, 1, dr), (B, 1, S, dr)):
        hint = "k_rope is one key shared by every head: cache it once per position"
    expect_shape(k_rope, (B, S, dr), "The cached RoPE key `k_rope`", inputs, hint)
    return out, c, k_rope


def _expect_cache(module, x_seen, c, k_rope, k_positions=None) -> None:
    """The cache after seeing ``x_seen (B, S, C)``: kv_norm(latent), k_rope rotated in place."""
    __tracebackhide__ = True
    normed, k_raw = _latent.latent(module, x_seen)  # (B, S, dc), (B, S, dr)
    if not close(c, normed):
        if close(c, _latent.latent(module, x_seen, norm=False)[0]):
            fail(
                "Your cached latent is taken before kv_norm: cache kv_norm(c), the latent that "
                "W_UK and W_UV read, so that no later step normalises the past again."
            )
        fail(
            "Your cached c_kv should be kv_norm of the first d_latent features of wkv_a(x), past "
            "positions first: the latent itself, before any up-projection."
        )
    positions = torch.arange(x_seen.shape[1]) if k_positions is None else k_positions
    if close(k_rope, rotate(k_raw, positions)):
        return
    if close(k_rope, k_raw):
        fail(
            "Your cached k_rope is not rotated: rotate the new RoPE keys at their positions "
            "before caching them, as notebook 04 cached rotated keys."
        )
    fail(
        "Your cached k_rope should be the last d_rope features of wkv_a(x), each rotated once at "
        "its own position 0 … S-1."
    )


def _decodings(S: int) -> list[list[int]]:
    """A prompt then single tokens, and uneven chunks."""
    return chunkings(S, ("prompt", "uneven"))


def _decoding_mistake(module, seen, start, out, chunks, name) -> str:
    """Why the output for positions ``start:`` of ``seen`` is wrong."""
    variants = _latent.full_pass_variants(module, seen, start, name)
    if start == 0:
        return first_match(out, variants) or (
            f"Your `{name}` without a cache differs from multi-head latent attention with your "
            "weights: scores (q_nope · k_nope + q_rope · k_rope) / √(head_dim + d_rope), causal, "
            "then the values' heads merged by wo."
        )
    T = seen.shape[1] - start
    where = f"Decoding with {start} cached position{'s' * (start != 1)} and {T} new"
    counted = restarted(chunks)  # (S,)
    variants = {
        f"{where}, your new tokens are rotated as if they were at positions 0 … T-1: they sit "
        "at P … P+T-1, with P = past_kv[0].shape[1].": _latent.oracle(
            module, seen, start, k_positions=counted, q_positions=counted[start:]
        ),
        f"{where}, your queries attend only to the new positions: attend to the cached latent "
        "and RoPE keys too, concatenated with the new ones along dim 1.": _latent.oracle(
            module, seen, start, past=False
        ),
        f"{where}, your causal mask is aligned top-left: the new queries are the last T of the S "
        "positions, so use torch.ones(T, S).tril(S - T).": _latent.oracle(
            module, seen, start, mask="top-left"
        ),
        **variants,
    }
    return first_match(out, variants) or (
        f"{where}, your `{name}` differs from one full causal pass: the new queries sit at "
        "P … P+T-1 and attend to every cached position and to the new ones up to their own."
    )


def _expect_matches(cls, name: str, seed: int, thorough: bool, cuts) -> None:
    """A full pass, then decoding in pieces, equal the oracle; the cache is the latent's."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    cases = [(config, torch.float32) for config in _configs(gen, thorough)]
    if thorough:  # float64 too: the output keeps the input's dtype
        cases.append((cases[0][0], torch.float64))
    for config, dtype in cases:
        module = _build(cls, config, gen, name, dtype)
        S = 7 + (randint(gen, 0, 3) if thorough else 0)
        x = randn(gen, 2, S, config[0], dtype=dtype)  # (B, S, C)
        forward = functools.partial(_forward, module, name=name)
        for chunks in cuts(S):
            for piece, out, (c, k_rope) in decode(x, chunks, forward):
                seen = x[:, : piece.stop]  # (B, S so far, C)
                if not close(out, _latent.oracle(module, seen, piece.start)):
                    fail(_decoding_mistake(module, seen, piece.start, out, piece.fed, name))
                turned = rotate(_latent.latent(module, seen)[1], restarted(piece.fed))
                if len(piece.fed) > 1 and close(k_rope, turned):
                    fail(
                        "Your cached k_rope was rotated at positions that restart at 0 in every "
                        "call: the new keys sit at P … P+T-1, P = past_kv[0].shape[1]."
                    )
                _expect_cache(module, seen, c, k_rope)


@one_thread
def check_mla_full_pass(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Without a cache: DeepSeek's layout, the decoupled RoPE key, 1/√(head_dim + d_rope),
    causal; the cache holds kv_norm(latent) and the rotated RoPE key, nothing up-projected."""
    __tracebackhide__ = True
    _expect_matches(cls, MLA, seed, thorough, lambda S: [[S]])


@one_thread
def check_mla_decoding(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Decoding in pieces with the latent cache equals one full causal pass, cache included."""
    __tracebackhide__ = True
    _expect_matches(cls, MLA, seed, thorough, _decodings)


@one_thread
def check_absorbed_mla_matches_naive(
    cls: Callable, *, seed: int = 0, thorough: bool = False
) -> None:
    """The absorbed module, with the same weights, gives the naive outputs and cache, in a full
    pass and decoding in pieces."""
    __tracebackhide__ = True
    _expect_matches(cls, ABSORBED, seed, thorough, lambda S: [[S], *_decodings(S)[:1]])


def _memory_configs(thorough: bool):
    """``(config, B, P)``: the up-projected keys of the cache, B·S·nh·hd numbers, outnumber
    whatever an absorbed step creates: a weight matrix, the latent and RoPE cache, even that
    cache copied once per head (``q @ c[:, None].mT`` broadcasts it), since d_latent + d_rope
    is at most half of head_dim here. Up-projecting the cache (2·B·S·d_latent·nh·hd FLOPs for
    the keys alone) also costs about twice an absorbed step, W_UK and W_UV merged into wq and wo
    at every call included."""
    yield (32, 4, 6, 16, 2), 2, 119
    if thorough:
        yield (48, 6, 4, 12, 2), 2, 120
        yield (40, 5, 4, 10, 2), 3, 100


@one_thread
def check_absorbed_mla_memory(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Decoding one token after P cached positions creates no tensor as large as the cache's
    up-projected keys or values (B·S·nh·head_dim numbers), and costs fewer FLOPs than making
    them, every operator counted (element-wise ones by the numbers they write, in place or not:
    :mod:`.measure`); the output is right."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for config, B, P in _memory_configs(thorough):
        module = _build(cls, config, gen, ABSORBED)
        C, nh, dc, hd, _ = config
        x = randn(gen, B, P + 1, C, dtype=torch.float32)  # (B, S, C)
        c, k_raw = _latent.latent(module, x[:, :P])  # (B, P, dc), (B, P, dr)
        past = (c.float(), rotate(k_raw, torch.arange(P)).float())
        with measure() as ran:
            out, _, _ = _forward(module, x[:, P:], past, ABSORBED)
        big, limit = ran.largest, B * (P + 1) * nh * hd
        if big.numel >= limit:
            fail(
                f"Decoding one token after {P} cached positions, your `{ABSORBED}` created a "
                f"tensor of shape {big.shape}, {big.numel:,} numbers, as many as the up-projected "
                f"keys or values of the whole cache (B·S·num_heads·head_dim = {limit:,}): "
                "absorb W_UK into the query (q_nope @ W_UK per head) and W_UV into the output "
                "(the attention's latent output @ W_UVᵀ), so attention reads the cached latent."
            )
        flops, up = int(ran.flops), 2 * B * (P + 1) * dc * nh * hd
        if flops >= up:
            fail(
                f"Decoding one token after {P} cached positions, your `{ABSORBED}` did "
                f"{flops:,} FLOPs, as many as up-projecting the cached latent into every head's "
                f"keys (2·B·S·d_latent·num_heads·head_dim = {up:,}), even if one head or one "
                "position at a time, by matrix products or by multiply and add one latent "
                "feature at a time: absorb W_UK into the query and W_UV into the output, so "
                "attention reads the cached latent."
            )
        if not close(out, _latent.oracle(module, x, P)):
            fail(
                f"Decoding one token after {P} cached positions, your `{ABSORBED}` differs from "
                "the naive computation: fix the values first (the test above names the mistake)."
            )
