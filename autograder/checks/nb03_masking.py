"""Checks for notebook 03: causal_mask, padding_mask, attention_mask.

Shape legend: ``B`` batch, ``T`` query length, ``S`` key/value length, ``C`` = d_model, ``nh``
heads, ``hs`` = C // nh.

Masks mean True = may attend (the convention of ``F.scaled_dot_product_attention``), except the
pair returned by ``to_nn_mha_masks``, which uses ``nn.MultiheadAttention``'s (True = blocked).

PyTorch is the oracle: the lower-right causal bias of ``torch.nn.attention.bias`` and
``is_causal=True`` read off SDPA's own weights, ``pad_sequence`` for which positions are real,
``nn.MultiheadAttention.merge_masks`` for combining a causal mask with key padding, and SDPA,
``nn.MultiheadAttention`` and ``TorchMultiHeadAttention`` for the property checks. Known-wrong
masks (diagonal excluded, top-left, inverted, ...) are built next to the oracle to name a mistake.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from autograder.kernel.codec import Opaque
from autograder.tools.modules import TorchMultiHeadAttention

from . import _masks as masks
from ._core import (
    call,
    describe,
    expect_unmodified,
    fail,
    fmt_shape,
    make_generator,
    randint,
    randn,
)
from ._masks import attend

#: Learner-importable names that would compute this notebook's graded answers. In the grading
#: sandbox of any notebook whose test cells use these checks, they keep their names but raise.
ANSWERS_IN_TOOLS: dict[str, str] = {
    "autograder.tools.nb03_masks.top_left_causal": (
        "causal_mask, as top_leftcausal(S, S)[S - T:]; the causal half of attention_mask"
    ),
}

CAUSAL = "causal_mask"
PADDING = "padding_mask"
ATTENTION = "attention_mask"


# ------------------------------------------------------------------------ shared helpers


def _expect_device(out, name: str, where: str) -> None:
    __tracebackhide__ = True
    if out is not None and isinstance(out, torch.Tensor) and out.device != masks.META:
        fail(f"`{name}` returned a tensor on {out.device} for {where}: {_DEVICE_HINT[name]}.")


_DEVICE_HINT = {
    CAUSAL: "create the mask on `device` (e.g. torch.ones(T, S, dtype=torch.bool, device=device))",
    PADDING: "create helper tensors on lengths.device (torch.arange(max_len, device=...))",
    ATTENTION: "create helper tensors on lengths.device (torch.arange(max_len, device=...))",
}


# -------------------------------------------------------------------------- causal_mask


def _causal_variants(T: int, S: int) -> dict[str, torch.Tensor]:
    at = f"`{CAUSAL}({T}, {S})`"
    variants = [
        (
            "is inverted: True must mean the query may attend (its past and itself), the "
            "opposite of nn.MultiheadAttention's attn_mask, so keep the lower triangle, not its "
            "complement.",
            ~masks.causal(T, S),
        ),
        (
            "excludes the diagonal: a query may always attend to its own position, so the "
            "diagonal must be True (tril with diagonal=S - T, or <= rather than <).",
            masks.tril(T, S, S - T - 1),
        ),
        (
            "lets each query see one future key: the diagonal offset is one too large (query i "
            "may attend keys 0 … S - T + i).",
            masks.tril(T, S, S - T + 1),
        ),
        (
            "keeps the upper triangle, so queries see the future instead of the past: use tril "
            "(keys at or before the query), not triu.",
            ~masks.tril(T, S, S - T - 1),
        ),
        (
            "is aligned top-left like is_causal=True: when S > T the queries are the last T "
            "positions, so query i may attend keys 0 … S - T + i (tril with diagonal=S - T).",
            masks.top_left(T, S),
        ),
        (
            "shifts the diagonal the wrong way: query i sits at position S - T + i, so the "
            "offset is S - T, not T - S.",
            masks.tril(T, S, T - S),
        ),
        ("allows every key: keys after each query's position must be False.", masks.tril(T, S, S)),
    ]
    return {f"{at} {why}": mask for why, mask in variants}


def _causal_shape_hints(T: int, S: int) -> dict[tuple[int, ...], str]:
    return {
        (T, T): "it ignores S; the mask has one row per query (T) and one column per key (S)",
        (S, T): "rows are queries (T) and columns are keys (S), so it is transposed",
        (S, S): "only the last T rows of the full (S, S) mask are needed",
        (1, T, S): "return a plain (T, S) mask; broadcasting adds batch and head dimensions",
        (1, 1, T, S): "return a plain (T, S) mask; broadcasting adds batch and head dimensions",
    }


def _callcausal(fn: Callable, T: int, S: int | None, **kwargs) -> torch.Tensor:
    __tracebackhide__ = True
    args = (T,) if S is None else (T, S)
    out = call(fn, CAUSAL, args, kwargs)
    name = out.name if isinstance(out, Opaque) else type(out).__name__
    if name == "CausalBias":  # PyTorch's (torch.nn.attention.bias), by name: see _causal
        fail(
            f"`{CAUSAL}` returned PyTorch's CausalBias object, not a mask: the exercise is to "
            "build the (T, S) bool tensor yourself (True = may attend)."
        )
    S = T if S is None else S
    return masks.expect_mask(out, CAUSAL, (T, S), describe(args), _causal_shape_hints(T, S))


def check_causal_mask_values(causal_mask: Callable, *, seed: int = 0, thorough: bool = False):
    """``causal_mask(T, S)`` equals PyTorch's bottom-right causal mask; S defaults to T; device."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    cases = [(5, None), (4, 4), (2, 6), (1, 5), (3, 7), (1, None)]
    for _ in range(8 if thorough else 0):
        T = randint(gen, 1, 16)
        cases.append((T, T + randint(gen, 0, 16)))
    for T, S in cases:
        out = _callcausal(causal_mask, T, S)
        if S is None and not torch.equal(out, _callcausal(causal_mask, T, T)):
            fail(f"`{CAUSAL}({T})` should equal `{CAUSAL}({T}, {T})`: S defaults to T.")
        S = T if S is None else S
        generic = (
            f"`{CAUSAL}({T}, {S})` is not the causal mask: entry [i, j] must be True exactly "
            "when key j is at or before query i's position S - T + i."
        )
        masks.diagnose(out, masks.causal(T, S), functools.partial(_causal_variants, T, S), generic)
    for device in (masks.META, "meta"):
        out = masks.call_on_meta(
            causal_mask, CAUSAL, (3, 5), {"device": device}, _DEVICE_HINT[CAUSAL]
        )
        _expect_device(out, CAUSAL, f"device={device!r}")


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal to rounding: both sides are float64 SDPA on the same numbers (not TOLERANCE, which
    would let one leaked key's tiny weight pass)."""
    return torch.allclose(a, b, atol=1e-9, rtol=1e-7, equal_nan=True)


def _check_no_leak(mask: torch.Tensor, q, k, v, gen) -> None:
    """Changing tokens p.. never changes outputs before p; every output reads its whole past."""
    __tracebackhide__ = True
    T = q.shape[-2]
    out = attend(q, k, v, mask)  # (B, nh, T, hs)
    for p in range(1, T):
        changed = [t.clone() for t in (q, k, v)]
        for t in changed:
            t[..., p:, :] = randn(gen, *t[..., p:, :].shape)  # new tokens from position p on
        if not _same(attend(*changed, mask)[..., :p, :], out[..., :p, :]):
            fail(
                f"Changing token {p} and later ones changed an earlier output (T={T}): your mask "
                "lets a query see future keys, so make entries above the diagonal False."
            )
    for p in range(T):
        k2, v2 = k.clone(), v.clone()
        k2[..., p, :] = randn(gen, *k2[..., p, :].shape)  # only token p changes
        v2[..., p, :] = randn(gen, *v2[..., p, :].shape)
        diff = (attend(q, k2, v2, mask)[..., p:, :] - out[..., p:, :]).abs()  # (B, nh, T - p, hs)
        unchanged = diff.amax((0, 1, 3)) == 0  # (T - p,): rows that did not notice token p
        if unchanged.any():
            i = p + int(unchanged.nonzero()[0])
            what = "its own key" if i == p else f"key {p}, which lies in its past"
            fail(
                f"Query {i} ignores {what} (T={T}): your mask hides part of the past, so every "
                "entry on and below the diagonal must be True."
            )


def check_causal_mask_no_leak(causal_mask: Callable, *, seed: int = 0, thorough: bool = False):
    """With SDPA and your mask, no output depends on a later token; cached decoding = full pass."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    sizes = [5, 1, 8] + ([randint(gen, 2, 24) for _ in range(3)] if thorough else [])
    for T in sizes:
        mask = _callcausal(causal_mask, T, None)
        _check_no_leak(mask, *(randn(gen, 2, 2, T, 4) for _ in range(3)), gen)
    cached = [(2, 6), (1, 5), (4, 7)] + ([(randint(gen, 1, 8), 9), (3, 20)] if thorough else [])
    for T, S in cached:
        mask = _callcausal(causal_mask, T, S)
        q, k, v = (randn(gen, 2, 3, S, 8) for _ in range(3))  # (B, nh, S, hs): the full sequence
        full = attend(q, k, v, is_causal=True)[..., -T:, :]  # (B, nh, T, hs): last T rows
        new = attend(q[..., -T:, :], k, v, mask)  # (B, nh, T, hs): T new queries, S cached keys
        if _same(new, full):
            continue
        if _same(new, attend(q[..., -T:, :], k, v, is_causal=True)):
            fail(
                f"Decoding the last {T} of {S} tokens with `{CAUSAL}({T}, {S})` gives what "
                "is_causal=True gives, not the full pass: align the mask bottom-right (query i "
                "is at position S - T + i)."
            )
        fail(
            f"Decoding the last {T} of {S} tokens against the cached keys with `{CAUSAL}({T}, "
            f"{S})` differs from the last {T} rows of a full causal pass: query i is at "
            "position S - T + i and may attend keys 0 … S - T + i."
        )


# ------------------------------------------------------------------------- padding_mask


def _lengths_cases(gen, thorough: bool) -> list[tuple[torch.Tensor, int]]:
    cases = [
        (torch.tensor([3, 1, 4]), 4),
        (torch.tensor([0, 2]), 3),
        (torch.tensor([5]), 5),
        (torch.tensor([2, 2, 2], dtype=torch.int32), 6),
    ]
    for _ in range(6 if thorough else 0):
        max_len = randint(gen, 1, 20)
        B = randint(gen, 1, 6)
        cases.append((torch.randint(0, max_len + 1, (B,), generator=gen), max_len))
    return cases


def _padding_variants(lengths: torch.Tensor, max_len: int) -> dict[str, torch.Tensor]:
    real = masks.real(lengths, max_len)  # (B, max_len)
    return {
        f"`{PADDING}` is inverted: True must mark the real tokens (positions < length) and False "
        "the padding, unlike nn.MultiheadAttention's key_padding_mask.": ~real,
        f"`{PADDING}` marks one position too many per sequence: positions 0 … length - 1 are "
        "real, so compare positions with `< lengths`, not `<=`.": masks.real(lengths + 1, max_len),
        f"`{PADDING}` marks one position too few per sequence: a sequence of length n has n real "
        "tokens, so compare with `< lengths`, not `< lengths - 1`.": masks.real(
            lengths - 1, max_len
        ),
        f"`{PADDING}` marks the last `length` positions: padding goes after the tokens here, so "
        "the real tokens are the first `length` positions.": real.flip(-1),
        f"`{PADDING}` ignores the lengths: positions at or after each length are padding "
        "(False).": torch.ones_like(real),
    }


def _call_padding(fn: Callable, lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    __tracebackhide__ = True
    before = lengths.clone()
    out = call(fn, PADDING, (lengths, max_len))
    expect_unmodified([before], [lengths], PADDING)
    B = lengths.shape[0]
    hints = {
        (max_len, B): "one row per sequence and one column per position, so it is transposed",
        (B, int(lengths.max())): "pad every row to max_len columns, not to the longest length",
        (B, 1, 1, max_len): "return a plain (B, max_len) mask; attention_mask adds dimensions",
    }
    return masks.expect_mask(out, PADDING, (B, max_len), describe((lengths, max_len)), hints)


def check_padding_mask_values(padding_mask: Callable, *, seed: int = 0, thorough: bool = False):
    """``padding_mask(lengths, max_len)`` is True exactly at positions < length; device kept."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for lengths, max_len in _lengths_cases(gen, thorough):
        out = _call_padding(padding_mask, lengths, max_len)
        generic = (
            f"`{PADDING}` is wrong for lengths of shape {fmt_shape(lengths.shape)}: entry [b, t] "
            "must be True exactly when t < lengths[b]."
        )
        variants = functools.partial(_padding_variants, lengths, max_len)
        masks.diagnose(out, masks.real(lengths, max_len), variants, generic)
    out = masks.call_on_meta(
        padding_mask,
        PADDING,
        (torch.tensor([2, 3], device=masks.META), 4),
        None,
        _DEVICE_HINT[PADDING],
    )
    _expect_device(out, PADDING, "lengths on the meta device")


# ----------------------------------------------------------------------- attention_mask


def _attention_variants(lengths, max_len, causal) -> dict[str, torch.Tensor]:
    real = masks.real(lengths, max_len)  # (B, T)
    keys, queries = real[:, None, None, :], real[:, None, :, None]  # (B, 1, 1, T), (B, 1, T, 1)
    future = (
        masks.causal(max_len, max_len) if causal else torch.ones(max_len, max_len, dtype=torch.bool)
    )
    variants = {
        f"`{ATTENTION}` also blocks every key of the padded queries, which leaves them rows with "
        "no allowed key (NaN in many implementations): mask only the keys, padded rows are "
        "don't-care.": queries & keys & future,
        f"`{ATTENTION}` pads the queries (rows) instead of the keys (columns): a real query must "
        "not read padding, so index the padding mask as [:, None, None, :].": queries & future,
        f"`{ATTENTION}` is inverted: True must mean may attend (real key, not in the future).": ~(
            keys & future
        ),
        f"`{ATTENTION}` has the padding part inverted: True must mark real keys.": ~keys & future,
        f"`{ATTENTION}` marks one padding position per sequence as real: use positions < length, "
        "not <=.": masks.real(lengths + 1, max_len)[:, None, None, :] & future,
    }
    if causal:
        variants |= {
            f"`{ATTENTION}` combines padding and causal masks with OR: a key must be real AND not "
            "in the future, so use &.": keys | future,
            f"`{ATTENTION}` has the causal part inverted: keys in the past, not the future, may be "
            "attended.": keys & ~future,
            f"`{ATTENTION}` excludes the diagonal: a token may attend to itself.": keys
            & masks.tril(max_len, max_len, -1),
            f"`{ATTENTION}` ignores causal=True: also block keys in the future.": keys.expand(
                -1, -1, max_len, -1
            ),
        }
    else:
        variants[
            f"`{ATTENTION}` applies the causal mask although causal=False: then only padding is "
            "masked."
        ] = keys & masks.causal(max_len, max_len)
    return variants


def _call_attention(fn: Callable, lengths: torch.Tensor, max_len: int, causal: bool):
    __tracebackhide__ = True
    before = lengths.clone()
    out = call(fn, ATTENTION, (lengths, max_len), {"causal": causal})
    expect_unmodified([before], [lengths], ATTENTION)
    B, T = lengths.shape[0], max_len
    head = "the head dimension must be dim 1, (B, 1, T, T), to broadcast over (B, nh, T, T) scores"
    hints = {
        (B, T, T): "the head dimension is missing, so add it with unsqueeze(1); a (B, T, T) mask "
        "lines the batch up with the heads of (B, nh, T, T) scores",
        (B, T, 1, T): head,
        (1, B, T, T): head,
        (B, 1, 1, T): "expand the key padding over the T query rows, even when causal=False",
        (B, T): "that is only the padding mask; combine it with the causal mask into (B, 1, T, T)",
    }
    inputs = describe((lengths, max_len), {"causal": causal})
    return masks.expect_mask(out, ATTENTION, (B, 1, T, T), inputs, hints)


def _attention_cases(gen, thorough: bool) -> list[tuple[torch.Tensor, int, bool]]:
    cases = [(torch.tensor([2, 5]), 5, False), (torch.tensor([3, 1, 4]), 4, True)]
    cases += [(torch.tensor([0, 2, 5], dtype=torch.int32), 5, True), (torch.tensor([1]), 3, False)]
    for _ in range(4 if thorough else 0):
        max_len, B = randint(gen, 1, 12), randint(gen, 1, 5)
        cases.append((torch.randint(0, max_len + 1, (B,), generator=gen), max_len, True))
    return cases


def check_attention_mask_values(attention_mask: Callable, *, seed: int = 0, thorough: bool = False):
    """``(B, 1, T, T)`` bool: allowed iff the key is real and (if causal) not in the future."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    for lengths, max_len, causal in _attention_cases(gen, thorough):
        out = _call_attention(attention_mask, lengths, max_len, causal)
        generic = (
            f"`{ATTENTION}` is wrong for lengths {fmt_shape(lengths.shape)}, causal={causal}: "
            "entry [b, 0, i, j] must be True exactly when j < lengths[b]"
            + (" and j <= i." if causal else ".")
        )
        variants = functools.partial(_attention_variants, lengths, max_len, causal)
        masks.diagnose(out, masks.combined(masks.real(lengths, max_len), causal), variants, generic)
    out = masks.call_on_meta(
        attention_mask,
        ATTENTION,
        (torch.tensor([2, 3], device=masks.META), 4),
        {"causal": True},
        _DEVICE_HINT[ATTENTION],
    )
    _expect_device(out, ATTENTION, "lengths on the meta device")


def _seeded_mha(seed: int, C: int, nh: int) -> TorchMultiHeadAttention:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return TorchMultiHeadAttention(C, nh).double().eval()


def check_attention_mask_padding_invariance(
    attention_mask: Callable, *, seed: int = 0, thorough: bool = False
):
    """In multi-head attention, real tokens' outputs equal each sequence run alone, unpadded."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    C, nh = 8, 2
    mha = _seeded_mha(seed, C, nh)
    cases = [(torch.tensor([4, 2, 6, 1]), 6, True), (torch.tensor([3, 5]), 5, False)]
    if thorough:
        cases += [(torch.randint(1, 11, (4,), generator=gen), 10, c) for c in (True, False)]
    for lengths, T, causal in cases:
        mask = _call_attention(attention_mask, lengths, T, causal)
        real = masks.real(lengths, T)  # (B, T)
        x = randn(gen, len(lengths), T, C)  # (B, T, C)
        with torch.no_grad():
            out = mha(x, mask=mask)[0]  # (B, T, C)
            noisy = torch.where(real[..., None], x, randn(gen, *x.shape))  # new padding content
            if not _same(mha(noisy, mask=mask)[0][real], out[real]):
                fail(
                    f"Changing only the padding changed real tokens' outputs (causal={causal}): "
                    "padded positions must be blocked as keys, i.e. False in their columns."
                )
            if causal:
                later = x.clone()
                later[:, T // 2 :] = randn(gen, *later[:, T // 2 :].shape)  # (B, T - T//2, C)
                early = real[:, : T // 2]  # (B, T // 2): real queries before the change
                if not _same(mha(later, mask=mask)[0][:, : T // 2][early], out[:, : T // 2][early]):
                    fail(
                        "Changing later tokens changed earlier outputs: a real query reads "
                        "future keys, so combine the causal mask with AND."
                    )
            for b, n in enumerate(lengths.tolist()):
                alone_mask = masks.causal(n, n) if causal else None
                alone = mha(x[b : b + 1, :n], mask=alone_mask)[0]  # (1, n, C)
                if not torch.allclose(out[b, :n], alone[0], atol=1e-9):  # float64, see _same
                    fail(
                        f"A real token's output differs from running its sequence alone without "
                        f"padding (length {n} of {T}, causal={causal}): the mask blocks a real "
                        "key it may read (check the lengths and the diagonal)."
                    )
