"""Checks for notebook 04: ``repeat_kv``, ``GroupedQueryAttention``'s cache and decoding,
``gqa_param_count``, ``kv_cache_bytes`` and ``mha_to_gqa``.

Shape legend: ``B`` batch, ``T`` new positions, ``P`` cached positions, ``S`` = P + T, ``C`` =
d_model, ``nh`` query heads, ``nkv`` key/value heads, ``hs`` = C // nh, ``n_rep`` = nh // nkv.

PyTorch is the oracle: ``torch.repeat_interleave``; ``F.scaled_dot_product_attention(...,
enable_gqa=True)`` fed with the learner's own projection weights (:mod:`._gqa`); ``nn.Linear``
layers on the meta device for parameter counts; cache tensors on the meta device for byte counts.
Known-wrong answers are the same oracle fed the wrong way (tiled heads, a top-left causal mask,
strided groups...). The module's structure and full pass are checked in
:mod:`.nb04_gqa_attention`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch
from torch import nn

from autograder.tools.modules import TorchMultiHeadAttention
from autograder.tools.nb04_gqa import cache_nbytes, meta_cache
from autograder.torch_helpers import one_thread, record_torch_calls

from . import _gqa, operators
from ._core import (
    RUN_AGAIN,
    by_arithmetic,
    call,
    call_integer,
    close,
    describe,
    expect_dtype,
    expect_shape,
    expect_tensor,
    expect_unmodified,
    fail,
    first_match,
    make_generator,
    randint,
    randn,
    wide_draws,
)
from ._decoding import chunkings, decode
from ._gqa import FORWARD, GQA, PROJECTIONS, TILED

#: The ATen operators learner code may run under these checks:
#: GQA is often written on PyTorch's attention (enable_gqa=True).
OPERATORS = operators.DEFAULT | operators.SDPA

#: Learner-importable names that would compute this notebook's graded answers. In the grading
#: sandbox of any notebook whose test cells use these checks, they keep their names but raise.
ANSWERS_IN_TOOLS: dict[str, str] = {
    "autograder.tools.nb04_gqa.TorchGroupedQueryAttention": (
        "GroupedQueryAttention: the cache and decoding cells"
    ),
    "autograder.tools.nb04_gqa.TinyDecoder": (
        "hands out TorchGroupedQueryAttention (its default attention class)"
    ),
    "autograder.tools.nb04_gqa.meta_cache": "kv_cache_bytes, as cache_nbytes(meta_cache(...))",
}

REPEAT = "repeat_kv"
COUNT = "gqa_param_count"
BYTES = "kv_cache_bytes"
CONVERT = "mha_to_gqa"
_APPEND = (
    "append the new keys to the past along the positions, torch.cat([past_k, k], dim=2), and "
    "keep num_kv_heads heads in the cache (repeat_kv comes after)"
)


# ----------------------------------------------------------------------------- repeat_kv


@one_thread
def check_repeat_kv(repeat_kv: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Equals ``repeat_interleave`` on dim 1: query head h reads kv head h // n_rep."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    cases = [(2, 2, 5, 3, 3), (1, 3, 4, 2, 2), (2, 1, 3, 4, 4), (2, 4, 3, 2, 1)]
    cases += [tuple(randint(gen, 1, 4) for _ in range(5)) for _ in range(6 if thorough else 1)]
    for dtype, (B, nkv, S, hs, n_rep) in zip(
        [torch.float32, torch.float64, torch.bfloat16] + [torch.float32] * len(cases),
        cases,
        strict=False,
    ):
        x = randn(gen, B, nkv, S, hs, dtype=dtype)  # (B, nkv, S, hs)
        before = x.clone()
        out = expect_tensor(call(repeat_kv, REPEAT, (x, n_rep)), REPEAT)
        expect_unmodified([before], [x], REPEAT)
        inputs = describe((x, n_rep))
        hint = ""
        if out.shape == (B, nkv, n_rep, S, hs):
            hint = "merge the nkv and n_rep dimensions into one head dimension with .reshape"
        elif out.shape in ((B, nkv, S * n_rep, hs), (B, nkv, S, hs * n_rep)):
            hint = "repeat along the head dimension (dim=1), not along positions or features"
        expect_shape(out, (B, nkv * n_rep, S, hs), f"The output of `{REPEAT}`", inputs, hint)
        expect_dtype(out, dtype, f"The output of `{REPEAT}`")
        if close(out, x.repeat_interleave(n_rep, dim=1), 0, 0):  # a copy: exactly equal
            continue
        if close(out, x.repeat(1, n_rep, 1, 1), 0, 0):
            fail(f"In the output of your `{REPEAT}`, {TILED}.")
        fail(
            f"`{REPEAT}` on {inputs} does not copy kv head h // n_rep into output head h: "
            "use torch.repeat_interleave(x, n_rep, dim=1)."
        )


# ---------------------------------------------------------------------------- the module


@one_thread
def check_gqa_kv_cache(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """The returned cache holds nkv heads, past positions first, then the new ones (dim 2)."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for i, (C, nh, nkv, bias) in enumerate(_gqa.configs(gen, thorough)):
        module = _gqa.build(cls, C, nh, nkv, bias, gen)
        B, T, P = (2, 3, 3) if i == 0 else (2, randint(gen, 1, 4), randint(gen, 1, 5))
        x = randn(gen, B, T, C, dtype=torch.float32)  # (B, T, C)
        _, k, v = _gqa.forward(module, x)
        _, k_new, v_new = _gqa.heads(module, x)  # (B, nkv, T, hs)
        if close(k, v_new) and close(v, k_new) and not close(k, k_new):
            fail("Your cache returns (v, k): return the keys first, `(out, (k, v))`.")
        if not (close(k, k_new) and close(v, v_new)):
            fail(
                "Your cached k and v should be k_proj(x) and v_proj(x) split into kv heads, "
                f"(B, num_kv_heads, T, hs), for d_model={C}, num_heads={nh}, num_kv_heads={nkv}."
            )
        hs = C // nh
        past = (
            randn(gen, B, nkv, P, hs, dtype=torch.float32),  # (B, nkv, P, hs)
            randn(gen, B, nkv, P, hs, dtype=torch.float32),  # (B, nkv, P, hs)
        )
        before = [t.clone() for t in past]
        _, k, v = _gqa.forward(module, x, past, hint=_APPEND)
        expect_unmodified(before, list(past), FORWARD)
        if close(k, torch.cat([k_new, past[0]], 2)) and close(v, torch.cat([v_new, past[1]], 2)):
            fail(
                "Your cache puts the new positions before the past ones: "
                "torch.cat([past_k, k], dim=2) keeps positions in order."
            )
        if not (
            close(k, torch.cat([past[0], k_new], 2)) and close(v, torch.cat([past[1], v_new], 2))
        ):
            fail(
                "With past_kv, the returned k and v should be the past keys and values followed "
                "by the new ones: torch.cat([past_k, k], dim=2) and the same for v."
            )


def _decoding_mistake(module, x_seen, start, out) -> str:
    """Why the output for positions ``start:`` of ``x_seen`` is wrong, decoding with a cache."""
    T = x_seen.shape[1] - start
    where = (
        f"Decoding with {start} cached position{'s' * (start != 1)} and {T} new one{'s' * (T > 1)}"
    )
    variants = {}
    if 1 < module.num_kv_heads < module.num_heads:
        variants[f"Your output matches attention in which {TILED}."] = _gqa.oracle(
            module, x_seen, start, tiled=True
        )
    if T > 1:
        variants[
            f"{where}, your new queries attend to all of them, later ones included: the new "
            "tokens still need a causal mask among themselves, aligned bottom-right."
        ] = _gqa.oracle(module, x_seen, start, mask="none")
    variants[
        f"{where}, your queries see only the first positions: the causal mask is aligned "
        "top-left (tril(T, S), or is_causal=True in F.scaled_dot_product_attention), but the "
        f"new queries are the last T of the S positions, so use torch.ones(T, S).tril(S - T)."
    ] = _gqa.oracle(module, x_seen, start, mask="top-left")
    variants[
        f"{where}, your queries attend only to the new keys: attend to the whole cache (past "
        "keys and values concatenated with the new ones)."
    ] = _gqa.oracle(module, x_seen, start, past=False)
    return first_match(out, variants) or (
        f"{where} differs from one full causal pass: the new queries are the last T of "
        "the S cached positions and must see every earlier position and none later."
    )


@one_thread
def check_gqa_decoding(cls: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Feeding the sequence in pieces with the cache equals one full causal forward pass."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for C, nh, nkv, bias in _gqa.configs(gen, thorough):
        module = _gqa.build(cls, C, nh, nkv, bias, gen)
        S = 7 + (randint(gen, 0, 5) if thorough else 0)
        x = randn(gen, 2, S, C, dtype=torch.float32)  # (B, S, C)
        forward = functools.partial(_gqa.forward, module, hint=_APPEND)
        for chunks in chunkings(S):
            for piece, out, _ in decode(x, chunks, forward):
                seen = x[:, : piece.stop]  # (B, S so far, C)
                if not close(out, _gqa.oracle(module, seen, piece.start)):
                    fail(_decoding_mistake(module, seen, piece.start, out))


# ------------------------------------------------------------------------------ counting


def _real_count(C: int, nh: int, nkv: int, bias: bool) -> int:
    """Parameters of the four nn.Linear layers of the contract, built on the meta device."""
    kv = nkv * (C // nh)
    widths = (C, kv, kv, C)
    return sum(
        p.numel()
        for width in widths
        for p in nn.Linear(C, width, bias=bias, device="meta").parameters()
    )


def _count_mistake(C: int, nh: int, nkv: int, bias: bool, got: int) -> str:
    where = f"`{COUNT}({C}, {nh}, {nkv}, bias={bias})` returned {got:,}"
    kv = nkv * (C // nh)
    guesses = {
        4 * C * C + 4 * C * bias: "as for multi-head attention: k_proj and v_proj are narrower, "
        f"d_model × (num_kv_heads * hs) = {C} × {kv}",
        2 * C * C + 2 * C * nkv * C + 4 * C * bias: "with k_proj and v_proj of width "
        "num_kv_heads * d_model: each kv head is hs = d_model // num_heads wide",
        2 * C * C + 2 * C * kv + 4 * C * bias: "with d_model biases for k_proj and v_proj: their "
        f"biases have num_kv_heads * hs = {kv} entries",
        2 * C * C + 2 * C * kv: "without the biases of bias=True",
        2 * C * C + 2 * C * kv + (2 * C + 2 * kv): "with biases although bias=False",
        C * C
        + 2 * C * kv
        + (C + 2 * kv) * bias: "without out_proj, a fourth d_model × d_model layer",
    }
    why = guesses.get(got, "which is wrong: add the weights and biases of the four projections")
    return f"{where}, {why}."


@one_thread
def check_gqa_param_count(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Equals the parameters of the four nn.Linear layers; Llama-sized answers by arithmetic."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    configs = [(16, 4, 2), (24, 6, 3), (16, 4, 1), (12, 4, 4), (4096, 32, 8), (4096, 32, 32)]
    configs.append((8192, 64, 8))  # Llama 2 70B
    for _ in range(4 if thorough else 0):
        nkv, n_rep, hs = randint(gen, 1, 8), randint(gen, 1, 8), randint(gen, 1, 16)
        configs.append((nkv * n_rep * hs, nkv * n_rep, nkv))
    for nkv, n_rep, hs in wide_draws(seed, thorough, 3, (1, 8), (1, 8), (1, 32)):
        configs.append((nkv * n_rep * hs, nkv * n_rep, nkv))
    with record_torch_calls() as names:
        counts = {
            (*c, b): call_integer(fn, COUNT, c, {"bias": b}) for c in configs for b in (True, False)
        }
    by_arithmetic(names, COUNT)
    for (C, nh, nkv, bias), got in counts.items():
        if got != _real_count(C, nh, nkv, bias):
            fail(_count_mistake(C, nh, nkv, bias, got))
    if call_integer(fn, COUNT, (16, 4, 2)) != counts[(16, 4, 2, False)]:
        fail(f"`{COUNT}(d_model, num_heads, num_kv_heads)` should not count biases: bias=False.")
    for C, nh, nkv in ((10, 3, 1), (16, 4, 3)):
        try:
            call(fn, COUNT, (C, nh, nkv))
        except AssertionError as failure:
            if "raised ValueError" in str(failure):
                continue
            raise
        fail(f"`{COUNT}({C}, {nh}, {nkv})` should raise a ValueError, as the module does.")


_DTYPES = {1: torch.int8, 2: torch.float16, 4: torch.float32, 8: torch.float64}


_BYTES_GUESSES = {  # what a known-wrong formula returns, as a fraction of the right answer
    "the cache holds two tensors per layer, K and V: multiply by 2": lambda a: 1 / 2,
    "multiply by batch_size: every sequence in the batch has its own cache": lambda a: 1 / a[4],
    "multiply by num_layers: every layer caches its own keys and values": lambda a: 1 / a[0],
    "that counts values, not bytes: multiply by bytes_per_value": lambda a: 1 / a[5],
    "use bytes_per_value, not 8 bytes per value": lambda a: 8 / a[5],
}


def _bytes_mistake(results: dict[tuple[int, ...], tuple[int, int]]) -> str:
    """Name the known-wrong formula that explains every answer; describe the first wrong one."""
    args, (got, expected) = next((a, r) for a, r in results.items() if r[0] != r[1])
    L, nkv, hd, S, B, nbytes = args
    where = (
        f"`{BYTES}(num_layers={L}, num_kv_heads={nkv}, head_dim={hd}, seq_len={S}, "
        f"batch_size={B}, bytes_per_value={nbytes})` returned {got:,} instead of {expected:,}"
    )
    why = next(
        (
            why
            for why, ratio in _BYTES_GUESSES.items()
            if all(g == e * ratio(a) for a, (g, e) in results.items())
        ),
        "multiply 2 (K and V) by every argument",
    )
    return f"{where}: {why}."


@one_thread
def check_kv_cache_bytes(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """Equals the bytes of the per-layer K and V tensors; Llama 2 70B holds 327,680 B/token."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    cases = [
        (80, 8, 128, 1, 1, 2),  # Llama 2 70B, one token of fp16 cache
        (32, 32, 128, 32768, 1, 2),  # 17.18 GB: C = 4096, 32 heads, 32 layers, 32k tokens
        (32, 8, 128, 32768, 1, 2),  # 4.29 GB with 8 kv heads
        (2, 4, 16, 10, 3, 4),
        (24, 1, 64, 2048, 8, 1),
        (3, 2, 8, 5, 2, 8),
    ]
    for _ in range(4 if thorough else 0):
        sizes = [randint(gen, 1, n) for n in (48, 16, 256, 4096, 16)]
        cases.append((*sizes, [1, 2, 4, 8][randint(gen, 0, 3)]))
    ranges = ((1, 128), (1, 64), (1, 512), (1, 1 << 20), (1, 64), (0, 3))  # L, nkv, hd, S, B, w
    drawn = wide_draws(seed, thorough, 3, *ranges)
    wide = [(*sizes, [1, 2, 4, 8][width]) for *sizes, width in drawn]
    for group, defaults in ((cases, 3), (wide, 0)):  # the first 3 public cases use defaults
        results = {}
        for i, args in enumerate(group):
            kwargs = dict(zip(("batch_size", "bytes_per_value"), args[4:], strict=True))
            with record_torch_calls() as seen:
                got = call_integer(fn, BYTES, args[:4], kwargs if i >= defaults else {})
            by_arithmetic(seen, BYTES)
            caches = meta_cache(*args[:5], dtype=_DTYPES[args[5]])  # per layer (B, nkv, S, hd) × 2
            results[args] = (got, cache_nbytes(caches))
        if any(got != expected for got, expected in results.values()):
            fail(_bytes_mistake(results))


# ------------------------------------------------------------------------- MHA -> GQA


def _pooled(t: torch.Tensor, nh: int, nkv: int, how: str = "mean") -> torch.Tensor:
    """Pool the head slices of a weight ``(C, C_in)`` or bias ``(C,)`` into ``nkv`` groups."""
    hs, n_rep = t.shape[0] // nh, nh // nkv
    rest = t.shape[1:]
    if how == "strided":
        return t.reshape(n_rep, nkv, hs, *rest).mean(0).reshape(nkv * hs, *rest)
    grouped = t.reshape(nkv, n_rep, hs, *rest)  # head h = g * n_rep + r
    pooled = {"mean": grouped.mean(1), "sum": grouped.sum(1), "first": grouped[:, 0]}[how]
    return pooled.reshape(nkv * hs, *rest)


class _MHA(TorchMultiHeadAttention):
    """The MHA handed to ``mha_to_gqa``; failure messages describe it by its sizes only."""

    def __repr__(self) -> str:
        C, bias = self.q_proj.in_features, self.q_proj.bias is not None
        return f"TorchMultiHeadAttention({C}, {self.num_heads}, bias={bias})"


def _seeded_mha(gen, C: int, nh: int, bias: bool) -> TorchMultiHeadAttention:
    mha = _MHA(C, nh, bias=bias)
    with torch.no_grad():
        for proj in PROJECTIONS:
            layer = getattr(mha, proj)
            layer.weight.copy_(randn(gen, C, C) / math.sqrt(C))
            if bias:
                layer.bias.copy_(randn(gen, C))
    return mha


def _pooling_mistake(got: torch.Tensor, t: torch.Tensor, nh: int, nkv: int, name: str) -> str:
    variants = {
        f"Your `{name}` averages heads g, g + num_kv_heads, g + 2·num_kv_heads, … (strided): "
        "group g must be the n_rep consecutive heads g·n_rep … (g+1)·n_rep − 1, the ones "
        "repeat_interleave later maps back to kv head g, so reshape to (num_kv_heads, n_rep, hs, "
        "…) and average dim 1.": _pooled(t, nh, nkv, "strided"),
        f"Your `{name}` sums each group of heads: take their mean.": _pooled(t, nh, nkv, "sum"),
        f"Your `{name}` keeps only the first head of each group: average all n_rep heads of the "
        "group (mean pooling, Ainslie et al., 2023).": _pooled(t, nh, nkv, "first"),
    }
    return first_match(got, variants) or (
        f"Your `{name}` is not the mean of each group of n_rep consecutive heads of the MHA's "
        f"`{name.split('.')[0]}`: reshape to (num_kv_heads, n_rep, hs, …) and average dim 1."
    )


def _check_converted(gqa, mha, nh: int, nkv: int) -> None:
    """The pooled k/v projections, and q/out copied (not shared)."""
    __tracebackhide__ = True
    for proj in PROJECTIONS:
        mine, theirs = getattr(gqa, proj), getattr(mha, proj)
        for part in ("weight", "bias"):
            got, source = getattr(mine, part), getattr(theirs, part)
            if source is None:
                continue
            if got is None:
                fail(
                    f"`{CONVERT}` drops the MHA's biases: build the GQA with bias=True and "
                    "keep them."
                )
            if got.data_ptr() == source.data_ptr():
                fail(
                    f"Your converted `{proj}.{part}` shares its tensor with the MHA, so training "
                    "one changes the other: copy it (.clone() or .copy_())."
                )
            expected = source if proj in ("q_proj", "out_proj") else _pooled(source, nh, nkv)
            if close(got, expected):
                continue
            if proj in ("q_proj", "out_proj"):
                fail(f"Your converted `{proj}.{part}` should be a copy of the MHA's, unchanged.")
            fail(_pooling_mistake(got, source, nh, nkv, f"{proj}.{part}"))


STUB_GQA = (
    f"`{CONVERT}` builds your `{GQA}`, which is not implemented yet: finish exercise 3, "
    f"{RUN_AGAIN}."
)


@one_thread
def check_mha_to_gqa(fn: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """k/v heads mean-pooled in contiguous groups, q/out copied, the MHA left untouched."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    configs = [(16, 4, 2, True), (24, 6, 3, False), (16, 4, 1, True), (16, 4, 4, False)]
    if thorough:
        configs += [(32, 8, 2, True), (32, 8, 4, False), (18, 6, 2, True)]
    hint = (
        f"`{CONVERT}` builds your {GQA}: its k_proj/v_proj must be (num_kv_heads * hs, d_model), "
        "the shape of the pooled weights"
    )
    for C, nh, nkv, bias in configs:
        mha = _seeded_mha(gen, C, nh, bias)
        before = [p.clone() for p in mha.parameters()]
        with torch.no_grad():
            gqa = call(fn, CONVERT, (mha, nkv), hint=hint, stub_inside=STUB_GQA)
        expect_unmodified(before, list(mha.parameters()), CONVERT)
        no_bias = (
            f"`{CONVERT}` drops the MHA's biases: build the GQA with bias=True and keep them."
            if bias
            else f"`{CONVERT}` adds biases the MHA does not have: build the GQA with bias=False."
        )
        _gqa.expect_structure(gqa, C, nh, nkv, bias, f"{CONVERT}(mha, {nkv})", no_bias)
        _check_converted(gqa, mha, nh, nkv)
