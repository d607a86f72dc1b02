"""Learner implementations of notebook 08's sliding window and rolling cache: correct ones, as
Mistral's and Hugging Face's code writes them, and the classic mistakes.

Shape legend: ``B`` batch, ``T`` new positions, ``S`` keys, ``W`` window (ring slots), ``nh``
query heads, ``nkv`` key/value heads, ``hs`` head size.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from autograder.checks import nb08_rolling as rolling
from autograder.checks import nb08_window as window

from . import Mistake, correct, stub

# ------------------------------------------------------------------ sliding_window_mask


def mask_positions(T, window, S=None, device=None):
    S = T if S is None else S
    query = torch.arange(S - T, S, device=device)[:, None]  # (T, 1)
    key = torch.arange(S, device=device)[None, :]  # (1, S)
    return (key <= query) & (key > query - window)  # (T, S)


def mask_two_trils(T, window, S=None, device=None):
    S = T if S is None else S
    ones = torch.ones(T, S, dtype=torch.bool, device=device)
    return ones.tril(S - T) & ~ones.tril(S - T - window)  # (T, S)


def mask_band(T, window, S=None, device=None):  # a band: tril then triu
    S = T if S is None else S
    ones = torch.ones(T, S, dtype=torch.bool, device=device)
    return ones.tril(S - T).triu(S - T - window + 1)  # (T, S)


def mask_hf_overlay(T, window, S=None, device=None):
    """Hugging Face's masking_utils: ``sliding_window_overlay`` (kv_idx > q_idx - window) and-ed
    with ``causal_mask_function`` (kv_idx <= q_idx), evaluated on index grids."""
    S = T if S is None else S
    q_idx = torch.arange(S - T, S, device=device).view(-1, 1)  # (T, 1)
    kv_idx = torch.arange(S, device=device).view(1, -1)  # (1, S)
    return torch.logical_and(kv_idx > q_idx - window, kv_idx <= q_idx)  # (T, S)


def _mask_with(low, high=lambda w: 0, top_left=False):
    def sliding_window_mask(T, window, S=None, device=None):
        S = T if S is None else S
        query = torch.arange(0 if top_left else S - T, (0 if top_left else S - T) + T)[:, None]
        key = torch.arange(S)[None, :]
        return (key <= query + high(window)) & (key >= query - low(window))

    return sliding_window_mask


CORRECT_MASK = {
    "positions": mask_positions,
    "two_trils": mask_two_trils,
    "band": mask_band,
    "hf_overlay": mask_hf_overlay,
}
MASK = window.check_sliding_window_mask_values
MASK_MISTAKES = [
    Mistake("mask: window + 1 keys", _mask_with(lambda w: w), MASK, "one too many"),
    Mistake("mask: window - 1 keys", _mask_with(lambda w: w - 2), MASK, "only"),
    Mistake("mask: causal only", _mask_with(lambda w: 10**6), MASK, "plain causal mask"),
    Mistake(
        "mask: two-sided window", _mask_with(lambda w: w - 1, lambda w: w - 1), MASK, "future keys"
    ),
    Mistake("mask: top-left", _mask_with(lambda w: w - 1, top_left=True), MASK, "aligned top-left"),
    Mistake(
        "mask: inverted",
        lambda T, window, S=None, device=None: ~mask_positions(T, window, S, device),
        MASK,
        "is inverted",
    ),
]

# ------------------------------------------------------------------ rolling_cache_update


def update_index(buffer, new, start):
    W, T = buffer.shape[2], new.shape[2]
    past = min(start, W - 1)
    slots = torch.arange(start - past, start) % W  # (past,)
    recent = torch.cat([buffer[:, :, slots], new], dim=2)  # (B, nkv, past + T, hs)
    buffer = buffer.clone()
    buffer[:, :, torch.arange(start, start + T) % W] = new
    return buffer, recent


def unrotate(cache, seqlen):
    """Mistral's reference ``unrotate``: the ring ``(B, nkv, W, hs)`` in position order."""
    position = seqlen % cache.shape[2]
    if seqlen < cache.shape[2]:
        return cache[:, :, :seqlen]
    if position == 0:
        return cache
    return torch.cat([cache[:, :, position:], cache[:, :, :position]], dim=2)


def update_mistral(buffer, new, start):
    """Mistral's RotatingBufferCache: unrotate, then index_copy at positions % W."""
    W, T = buffer.shape[2], new.shape[2]
    old = unrotate(buffer, start)[:, :, -(W - 1) :] if W > 1 else buffer[:, :, :0]
    recent = torch.cat([old, new], dim=2)  # (B, nkv, n, hs)
    cache_positions = torch.arange(start, start + T) % W
    return buffer.index_copy(2, cache_positions, new), recent


def update_slot_list(buffer, new, start):
    """The ring's slots as Python lists made tensors (they depend on the positions only)."""
    W, T = buffer.shape[2], new.shape[2]
    past = [p % W for p in range(start - min(start, W - 1), start)]
    recent = torch.cat([buffer[:, :, torch.tensor(past, dtype=torch.long)], new], dim=2)
    written = buffer.clone()
    written[:, :, torch.tensor([p % W for p in range(start, start + T)])] = new
    return written, recent  # (B, nkv, W, hs), (B, nkv, past + T, hs)


def update_roll(buffer, new, start):
    """torch.roll puts the oldest position first once the ring has wrapped."""
    W, T = buffer.shape[2], new.shape[2]
    ordered = torch.roll(buffer, -(start % W), dims=2) if start >= W else buffer[:, :, :start]
    recent = torch.cat([ordered[:, :, ordered.shape[2] - min(start, W - 1) :], new], dim=2)
    written = buffer.clone()
    for t in range(T):
        written[:, :, (start + t) % W] = new[:, :, t]
    return written, recent


def update_slot_order(buffer, new, start):
    W, T = buffer.shape[2], new.shape[2]
    past = min(start, W - 1)
    slots = (torch.arange(start - past, start) % W).sort().values  # by slot, not by position
    written = buffer.clone()
    written[:, :, torch.arange(start, start + T) % W] = new
    return written, torch.cat([buffer[:, :, slots], new], dim=2)


def update_keeps_w(buffer, new, start):
    W, T = buffer.shape[2], new.shape[2]
    past = min(start, W)  # one old position too many
    slots = torch.arange(start - past, start) % W
    written = buffer.clone()
    written[:, :, torch.arange(start, start + T) % W] = new
    return written, torch.cat([buffer[:, :, slots], new], dim=2)


def update_whole_buffer(buffer, new, start):
    W = buffer.shape[2]
    written, recent = update_index(buffer, new, start)
    return written, (recent if start >= W else torch.cat([buffer, new], dim=2))


def update_in_place(buffer, new, start):
    _, recent = update_index(buffer, new, start)
    buffer[:, :, torch.arange(start, start + new.shape[2]) % buffer.shape[2]] = new
    return buffer, recent


def update_slot_off_by_one(buffer, new, start):
    written, recent = update_index(buffer, new, start)
    written = buffer.clone()
    written[:, :, torch.arange(start + 1, start + 1 + new.shape[2]) % buffer.shape[2]] = new
    return written, recent


CORRECT_UPDATE = {
    "index": update_index,
    "mistral": update_mistral,
    "roll": update_roll,
    "slot_list": update_slot_list,
}
UPDATE = window.check_rolling_cache_update
UPDATE_MISTAKES = [
    Mistake("update: slot order", update_slot_order, UPDATE, "in slot order"),
    Mistake("update: W old positions", update_keeps_w, UPDATE, "W - 1 old positions"),
    Mistake("update: whole buffer early", update_whole_buffer, UPDATE, "never written"),
    Mistake("update: in place", update_in_place, UPDATE, "changed its input in place"),
    Mistake("update: slot + 1", update_slot_off_by_one, UPDATE, "slot p % W"),
]

# ------------------------------------------------------------ sliding_window_attention


def rope(x, positions, base=10000.0):
    """The notebook's given ``apply_rope`` (split halves, float32 angles)."""
    hs = x.shape[-1]
    theta = base ** -(torch.arange(0, hs, 2, dtype=torch.float32) / hs)  # (hs/2,)
    angles = positions.float()[:, None] * theta  # (T, hs/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x1, x2 = x[..., : hs // 2], x[..., hs // 2 :]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def _step(
    *, where="absolute", update=update_index, mask=mask_positions, attend="sdpa", keep_raw=False
):
    """A ``sliding_window_attention`` built from the parts above, one knob at a time."""

    def sliding_window_attention(q, k, v, cache_k, cache_v, start):
        T, W = q.shape[2], cache_k.shape[2]
        positions = torch.arange(start, start + T)
        turned = positions % W if where == "slot" else positions
        q, k_rot = rope(q, turned), rope(k, turned)
        cache_k, keys = update(cache_k, k if keep_raw else k_rot, start)
        cache_v, values = update(cache_v, v, start)
        if keep_raw:  # rotate the raw keys again at every step, at their absolute positions
            keys = rope(keys, torch.arange(start + T - keys.shape[2], start + T))
        allowed = mask(T, W, keys.shape[2])  # (T, S)
        if attend == "sdpa":
            out = F.scaled_dot_product_attention(
                q, keys, values, attn_mask=allowed, enable_gqa=True
            )
        else:  # repeat_kv and a softmax written out, as notebook 04 first did
            n_rep = q.shape[1] // keys.shape[1]
            keys, values = keys.repeat_interleave(n_rep, 1), values.repeat_interleave(n_rep, 1)
            scores = q @ keys.transpose(-2, -1) / q.shape[-1] ** 0.5  # (B, nh, T, S)
            weights = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
            out = weights @ values  # (B, nh, T, hs)
        return out, (cache_k, cache_v)

    return sliding_window_attention


def _causal_only(T, window, S=None, device=None):
    return mask_positions(T, 10**6, S, device)


CORRECT_STEP = {
    "sdpa": _step(),
    "mistral_buffer": _step(update=update_mistral),
    "by_hand": _step(attend="manual", mask=mask_hf_overlay),
}
STEP = rolling.check_sliding_window_decoding
STEP_MISTAKES = [
    Mistake("step: positions from the slot", _step(where="slot"), STEP, "rotated at their slot"),
    Mistake("step: ring read in slot order", _step(update=update_slot_order), STEP, "slot order"),
    Mistake("step: window + 1", _step(mask=_mask_with(lambda w: w)), STEP, "W + 1 keys"),
    Mistake("step: causal only", _step(mask=_causal_only), STEP, "see every key handed"),
    Mistake("step: raw keys cached", _step(keep_raw=True), STEP, "keys unrotated"),
]

MISTAKES = MASK_MISTAKES + UPDATE_MISTAKES + STEP_MISTAKES
CORRECT = (
    correct([MASK], CORRECT_MASK)
    + correct([UPDATE], CORRECT_UPDATE)
    + correct([STEP], CORRECT_STEP)
)
STUBS = [(MASK, stub), (UPDATE, stub), (STEP, stub)]
REPLAY = [MASK, UPDATE, STEP]


# ------------------------------------------------ issue 45: the mask's device


def _mask_ignores_device(T, window, S=None, device=None):
    """Right values, made on the default device whatever ``device`` says."""
    return mask_positions(T, window, S)


MISTAKES += [Mistake("mask: ignores device", _mask_ignores_device, MASK, "device=device")]


# ------------------------------------- issue 45: the ring's order of work, masks, positions


def update_write_first(buffer, new, start):
    """Writes the new positions, then reads the old ones out of the written ring."""
    W, T = buffer.shape[2], new.shape[2]
    written = buffer.clone()
    written[:, :, torch.arange(start, start + T) % W] = new
    slots = torch.arange(start - min(start, W - 1), start) % W
    return written, torch.cat([written[:, :, slots], new], dim=2)


def update_always_full(buffer, new, start):
    """Mistral's ``unrotate`` without its ``seqlen < W`` branch: W - 1 old slots, even unwritten."""
    W, T = buffer.shape[2], new.shape[2]
    old = torch.roll(buffer, -(start % W), dims=2)[:, :, 1:]  # (B, nkv, W - 1, hs)
    written = buffer.clone()
    written[:, :, torch.arange(start, start + T) % W] = new
    return written, torch.cat([old, new], dim=2)


def _step_with(*, restart=False, rotate_values=False, attend=None, update=update_index):
    """A step with one of the knobs the catalogue's ``_step`` lacks."""

    def sliding_window_attention(q, k, v, cache_k, cache_v, start):
        T, W = q.shape[2], cache_k.shape[2]
        positions = torch.arange(T) if restart else torch.arange(start, start + T)
        q, k = rope(q, positions), rope(k, positions)
        v = rope(v, positions) if rotate_values else v
        cache_k, keys = update(cache_k, k, start)
        cache_v, values = update(cache_v, v, start)
        mask = mask_positions(T, W, keys.shape[2])
        if attend == "no mask":
            out = F.scaled_dot_product_attention(q, keys, values, enable_gqa=True)
        elif attend == "is_causal":
            out = F.scaled_dot_product_attention(q, keys, values, is_causal=True, enable_gqa=True)
        else:
            out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, enable_gqa=True)
        return out, (cache_k, cache_v)

    return sliding_window_attention


MISTAKES += [
    Mistake("update: written before read", update_write_first, UPDATE, "before you write"),
    Mistake("update: garbage before full", update_always_full, UPDATE, "never written"),
    Mistake("step: positions restart", _step_with(restart=True), STEP, "restart at 0"),
    Mistake("step: values rotated", _step_with(rotate_values=True), STEP, "values are rotated"),
    Mistake("step: no mask", _step_with(attend="no mask"), STEP, "no mask reached attention"),
    Mistake("step: is_causal", _step_with(attend="is_causal"), STEP, "is_causal=True"),
    Mistake(
        "step: ring written before read",
        _step_with(update=update_write_first),
        STEP,
        "read the old positions before you write (rolling_cache_update's own test",
    ),
    Mistake(
        "step: garbage before full",
        _step_with(update=update_always_full),
        STEP,
        "garbage",
    ),
]
