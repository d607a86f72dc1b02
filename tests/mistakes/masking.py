"""Learner implementations of notebook 03: correct ones and a catalogue of classic mistakes.

Shape legend: ``B`` batch, ``T`` query length, ``S`` key/value length. Masks: True = may attend,
except the pair of ``to_nn_mha_masks`` (``nn.MultiheadAttention``'s meaning, True = blocked).
"""

from __future__ import annotations

import torch
from torch.nn.attention.bias import causal_lower_right

from autograder.checks import nb03_masking as checks
from autograder.checks import nb03_nn_masks as nn_masks

from . import Mistake, correct, stub, tried

# -------------------------------------------------------------------------- causal_mask


def causal_tril(T, S=None, device=None):
    S = T if S is None else S
    return torch.ones(T, S, dtype=torch.bool, device=device).tril(diagonal=S - T)


def causal_arange(T, S=None, device=None):
    S = T if S is None else S
    keys = torch.arange(S, device=device)  # (S,)
    queries = torch.arange(S - T, S, device=device)  # (T,): absolute positions of the queries
    return keys[None, :] <= queries[:, None]  # (T, S)


def causal_not_triu(T, S=None, device=None):
    S = T if S is None else S
    return ~torch.ones(T, S, dtype=torch.bool, device=device).triu(diagonal=S - T + 1)


def causal_last_rows(T, S=None, device=None):
    S = T if S is None else S
    return torch.ones(S, S, dtype=torch.bool, device=device).tril()[S - T :]


def causal_loops(T, S=None, device=None):
    S = T if S is None else S
    rows = [[s <= S - T + t for s in range(S)] for t in range(T)]
    return torch.tensor(rows, dtype=torch.bool).to(device)


def hf_make_causal_mask(tgt_len, past_key_values_length, dtype, device=None):
    """Hugging Face's _make_causal_mask: a (T, T) float mask, 0 on and below the diagonal and
    the dtype's min above, after ``past_key_values_length`` columns of zeros (the cache)."""
    mask = torch.full((tgt_len, tgt_len), torch.finfo(dtype).min, dtype=dtype, device=device)
    mask_cond = torch.arange(mask.size(-1), device=device)
    mask.masked_fill_(mask_cond < (mask_cond + 1).view(mask.size(-1), 1), 0)
    if past_key_values_length > 0:
        past = torch.zeros(tgt_len, past_key_values_length, dtype=dtype, device=device)
        mask = torch.cat([past, mask], dim=-1)
    return mask  # (T, past + T)


def causal_hf(T, S=None, device=None):
    """Hugging Face's float causal mask with the cache as S - T past positions; True where 0."""
    S = T if S is None else S
    return hf_make_causal_mask(T, S - T, torch.float32, device) == 0  # (T, S)


CORRECT_CAUSAL = {
    "tril_offset": causal_tril,
    "arange_compare": causal_arange,
    "not_triu": causal_not_triu,
    "last_rows_of_full": causal_last_rows,
    "python_loops_then_to": causal_loops,
    "Hugging Face _make_causal_mask": causal_hf,
}


def _with_default(fn):
    def causal(T, S=None, device=None):
        return fn(T, T if S is None else S, device)

    return causal


causal_strict = _with_default(
    lambda T, S, d: torch.ones(T, S, dtype=torch.bool, device=d).tril(S - T - 1)
)
causal_top_left = _with_default(lambda T, S, d: torch.ones(T, S, dtype=torch.bool, device=d).tril())
causal_inverted = _with_default(
    lambda T, S, d: torch.ones(T, S, dtype=torch.bool, device=d).triu(S - T + 1)
)
causal_float = _with_default(lambda T, S, d: torch.ones(T, S, device=d).tril(S - T))
causal_upper = _with_default(
    lambda T, S, d: torch.ones(T, S, dtype=torch.bool, device=d).triu(S - T)
)
causal_one_future = _with_default(
    lambda T, S, d: torch.ones(T, S, dtype=torch.bool, device=d).tril(S - T + 1)
)
causal_wrong_sign = _with_default(
    lambda T, S, d: torch.ones(T, S, dtype=torch.bool, device=d).tril(T - S)
)
causal_transposed = _with_default(
    lambda T, S, d: torch.ones(S, T, dtype=torch.bool, device=d).tril(S - T)
)
causal_ignores_device = _with_default(
    lambda T, S, d: torch.ones(T, S, dtype=torch.bool).tril(S - T)
)
causal_cpu_arange = _with_default(
    lambda T, S, d: torch.arange(S)[None, :] <= torch.arange(T, device=d)[:, None] + (S - T)
)


def causal_pytorch_bias(T, S=None, device=None):
    return causal_lower_right(T, T if S is None else S)


def causal_ignores_s(T, S=None, device=None):
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


# ------------------------------------------------------------------------- padding_mask


def padding_arange(lengths, max_len):
    return torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]


def padding_greater(lengths, max_len):
    return lengths.unsqueeze(-1) > torch.arange(max_len, device=lengths.device)


def padding_loop(lengths, max_len):
    mask = torch.zeros(len(lengths), max_len, dtype=torch.bool, device=lengths.device)
    for row, n in enumerate(lengths.tolist()):
        mask[row, :n] = True
    return mask


def padding_stack(lengths, max_len):
    positions = torch.arange(max_len, device=lengths.device)
    return torch.stack([positions < n for n in lengths])


CORRECT_PADDING = {
    "arange_less": padding_arange,
    "greater_unsqueeze": padding_greater,
    "python_loop": padding_loop,
    "stack_rows": padding_stack,
}


def padding_le(lengths, max_len):
    return torch.arange(max_len, device=lengths.device)[None, :] <= lengths[:, None]


def padding_minus_one(lengths, max_len):
    return torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None] - 1


def padding_inverted(lengths, max_len):
    return torch.arange(max_len, device=lengths.device)[None, :] >= lengths[:, None]


def padding_float(lengths, max_len):
    return padding_arange(lengths, max_len).float()


def padding_left(lengths, max_len):
    return torch.arange(max_len, device=lengths.device)[None, :] >= max_len - lengths[:, None]


def padding_transposed(lengths, max_len):
    return padding_arange(lengths, max_len).T


def padding_to_longest(lengths, max_len):
    return padding_arange(lengths, int(lengths.max()))


def padding_cpu_arange(lengths, max_len):
    return torch.arange(max_len)[None, :] < lengths[:, None]


def padding_in_place(lengths, max_len):
    lengths.unsqueeze_(1)
    return torch.arange(max_len, device=lengths.device)[None, :] < lengths


# ----------------------------------------------------------------------- attention_mask


def attention_and(lengths, max_len, causal=True):
    keys = padding_arange(lengths, max_len)[:, None, None, :]  # (B, 1, 1, T)
    if not causal:
        return keys.expand(-1, -1, max_len, -1)  # (B, 1, T, T)
    return keys & causal_tril(max_len, device=lengths.device)  # (B, 1, T, T)


def attention_where(lengths, max_len, causal=True):
    B = lengths.shape[0]
    allowed = padding_greater(lengths, max_len).view(B, 1, 1, max_len).repeat(1, 1, max_len, 1)
    if causal:
        allowed = torch.where(causal_arange(max_len, device=lengths.device), allowed, False)
    return allowed


def attention_logical(lengths, max_len, causal=True):
    future = ~causal_tril(max_len, device=lengths.device) if causal else None
    padded = ~padding_arange(lengths, max_len)[:, None, None, :]
    blocked = padded if future is None else torch.logical_or(padded, future)
    return torch.logical_not(blocked).expand(-1, -1, max_len, -1)


def attention_hf_4d(lengths, max_len, causal=True):
    """Hugging Face's AttentionMaskConverter.to_4d: the 2-D padding mask (1 = real token)
    expanded to (B, 1, T, S) and inverted into the dtype's min where padded (_expand_mask),
    then laid over the causal float mask with masked_fill; True where the result is 0."""
    dtype, device = torch.float32, lengths.device
    bsz = lengths.shape[0]
    attention_mask_2d = (torch.arange(max_len, device=device)[None, :] < lengths[:, None]).long()
    expanded = attention_mask_2d[:, None, None, :].expand(bsz, 1, max_len, max_len).to(dtype)
    inverted = 1.0 - expanded  # (B, 1, T, S): 1.0 where padded
    expanded_attn_mask = inverted.masked_fill(inverted.to(torch.bool), torch.finfo(dtype).min)
    if causal:
        causal_4d_mask = hf_make_causal_mask(max_len, 0, dtype, device)[None, None]  # (1, 1, T, S)
        min_value = torch.finfo(dtype).min
        expanded_attn_mask = causal_4d_mask.masked_fill(expanded_attn_mask.bool(), min_value)
    return expanded_attn_mask == 0  # (B, 1, T, S)


CORRECT_ATTENTION = {
    "and_broadcast": attention_and,
    "where_repeat": attention_where,
    "de_morgan": attention_logical,
    "Hugging Face to_4d": attention_hf_4d,
}


def _attention(keys_fn, future_fn):
    """An attention mask from ``keys_fn(lengths, T) -> (B, 1, ?, ?)`` and a causal part."""

    def attention_mask(lengths, max_len, causal=True):
        keys = keys_fn(lengths, max_len)
        if not causal:
            return keys.expand(-1, -1, max_len, max_len)
        return keys & future_fn(max_len, lengths.device)

    return attention_mask


def _keys(lengths, T):
    return padding_arange(lengths, T)[:, None, None, :]


def _queries(lengths, T):
    return padding_arange(lengths, T)[:, None, :, None]


def _tril(T, device):
    return causal_tril(T, device=device)


attention_queries = _attention(_queries, _tril)
attention_both = _attention(lambda lengths, T: _queries(lengths, T) & _keys(lengths, T), _tril)


def attention_or(lengths, max_len, causal=True):
    keys = _keys(lengths, max_len)
    if not causal:
        return keys.expand(-1, -1, max_len, -1)
    return keys | causal_tril(max_len, device=lengths.device)


def attention_no_head_dim(lengths, max_len, causal=True):
    return attention_and(lengths, max_len, causal)[:, 0]


def attention_inverted(lengths, max_len, causal=True):
    return ~attention_and(lengths, max_len, causal)


def attention_ignores_causal(lengths, max_len, causal=True):
    return attention_and(lengths, max_len, causal=False)


def attention_always_causal(lengths, max_len, causal=True):
    return attention_and(lengths, max_len, causal=True)


def attention_float(lengths, max_len, causal=True):
    return attention_and(lengths, max_len, causal).float()


def attention_le(lengths, max_len, causal=True):
    keys = padding_le(lengths, max_len)[:, None, None, :]
    if not causal:
        return keys.expand(-1, -1, max_len, -1)
    return keys & causal_tril(max_len, device=lengths.device)


attention_strict = _attention(_keys, lambda T, d: causal_strict(T, device=d))


def attention_cpu_arange(lengths, max_len, causal=True):
    keys = padding_cpu_arange(lengths, max_len)[:, None, None, :]
    return keys & causal_tril(max_len) if causal else keys.expand(-1, -1, max_len, -1)


def attention_unexpanded(lengths, max_len, causal=True):
    keys = _keys(lengths, max_len)
    return keys & causal_tril(max_len, device=lengths.device) if causal else keys


# ---------------------------------------------------------------------- to_nn_mha_masks


def nn_masks_bool(lengths, max_len, causal=True):
    future = ~causal_tril(max_len, device=lengths.device) if causal else None
    return future, ~padding_arange(lengths, max_len)


def nn_masks_float(lengths, max_len, causal=True):
    future = torch.full((max_len, max_len), float("-inf")).triu(1) if causal else None
    return future, padding_arange(lengths, max_len).logical_not()


def nn_masks_all_false(lengths, max_len, causal=True):
    future = torch.ones(max_len, max_len, dtype=torch.bool).triu(1 if causal else max_len)
    return future, padding_arange(lengths, max_len) == 0


CORRECT_NN_MASKS = {
    "bool_masks": nn_masks_bool,
    "float_attn_mask": nn_masks_float,
    "all_false_when_not_causal": nn_masks_all_false,
}


def nn_masks_course(lengths, max_len, causal=True):
    return causal_tril(max_len) if causal else None, padding_arange(lengths, max_len)


def nn_masks_padding_inverted(lengths, max_len, causal=True):
    return nn_masks_bool(lengths, max_len, causal)[0], padding_arange(lengths, max_len)


def nn_masks_attn_inverted(lengths, max_len, causal=True):
    return causal_tril(max_len) if causal else None, ~padding_arange(lengths, max_len)


def nn_masks_no_attn(lengths, max_len, causal=True):
    return None, ~padding_arange(lengths, max_len)


def nn_masks_diagonal(lengths, max_len, causal=True):
    future = torch.ones(max_len, max_len, dtype=torch.bool).triu() if causal else None
    return future, ~padding_arange(lengths, max_len)


def nn_masks_time_first(lengths, max_len, causal=True):
    attn, padded = nn_masks_bool(lengths, max_len, causal)
    return attn, padded.T


def nn_masks_single(lengths, max_len, causal=True):
    return ~attention_and(lengths, max_len, causal)


# ------------------------------------------------------------------------------ catalogue

_VALUES, _LEAK = checks.check_causal_mask_values, checks.check_causal_mask_no_leak
_PAD = checks.check_padding_mask_values
_ATT, _INV = checks.check_attention_mask_values, checks.check_attention_mask_padding_invariance
_NN = nn_masks.check_to_nn_mha_masks

MISTAKES = [
    Mistake("causal_stub", stub, _VALUES, "not implemented yet"),
    Mistake("causal_diagonal_excluded", causal_strict, _VALUES, "excludes the diagonal"),
    Mistake("causal_diagonal_excluded_leak", causal_strict, _LEAK, "ignores its own key"),
    Mistake("causal_top_left", causal_top_left, _VALUES, "aligned top-left like is_causal"),
    Mistake("causal_top_left_decoding", causal_top_left, _LEAK, "what is_causal=True gives"),
    Mistake("causal_inverted", causal_inverted, _VALUES, "is inverted"),
    Mistake("causal_inverted_leak", causal_inverted, _LEAK, "lets a query see future keys"),
    Mistake("causal_float", causal_float, _VALUES, "returned a float32 tensor"),
    Mistake("causal_float_leak", causal_float, _LEAK, "must be bool"),
    Mistake("causal_upper_triangle", causal_upper, _VALUES, "keeps the upper triangle"),
    Mistake("causal_one_future_key", causal_one_future, _VALUES, "one future key"),
    Mistake("causal_one_future_leak", causal_one_future, _LEAK, "see future keys"),
    Mistake("causal_wrong_sign", causal_wrong_sign, _VALUES, "shifts the diagonal the wrong way"),
    Mistake("causal_wrong_sign_decoding", causal_wrong_sign, _LEAK, "differs from the last"),
    Mistake("causal_transposed", causal_transposed, _VALUES, "so it is transposed"),
    Mistake("causal_ignores_s", causal_ignores_s, _VALUES, "it ignores S"),
    Mistake("causal_pytorch_bias", causal_pytorch_bias, _LEAK, "returned PyTorch's CausalBias"),
    Mistake("causal_ignores_device", causal_ignores_device, _VALUES, "on cpu for device="),
    Mistake("causal_mixes_devices", causal_cpu_arange, _VALUES, "create the mask on `device`"),
    Mistake("padding_stub", stub, _PAD, "not implemented yet"),
    Mistake("padding_le", padding_le, _PAD, "one position too many"),
    Mistake("padding_minus_one", padding_minus_one, _PAD, "one position too few"),
    Mistake("padding_inverted", padding_inverted, _PAD, "is inverted"),
    Mistake("padding_float", padding_float, _PAD, "returned a float32 tensor"),
    Mistake("padding_left", padding_left, _PAD, "marks the last `length` positions"),
    Mistake("padding_transposed", padding_transposed, _PAD, "so it is transposed"),
    Mistake("padding_to_longest", padding_to_longest, _PAD, "not to the longest length"),
    Mistake("padding_mixes_devices", padding_cpu_arange, _PAD, "lengths.device"),
    Mistake("padding_in_place", padding_in_place, _PAD, "changed its input in place"),
    Mistake("attention_stub", stub, _ATT, "not implemented yet"),
    Mistake("attention_stub_invariance", stub, _INV, "not implemented yet"),
    Mistake("attention_no_head_dim", attention_no_head_dim, _ATT, "head dimension is missing"),
    Mistake("attention_no_head_dim_inv", attention_no_head_dim, _INV, "head dimension is missing"),
    Mistake("attention_pads_queries", attention_queries, _ATT, "pads the queries (rows)"),
    Mistake("attention_pads_queries_inv", attention_queries, _INV, "Changing only the padding"),
    Mistake("attention_pads_both", attention_both, _ATT, "also blocks every key of the padded"),
    Mistake("attention_or", attention_or, _ATT, "with OR"),
    Mistake("attention_or_inv", attention_or, _INV, "reads future keys"),
    Mistake("attention_inverted", attention_inverted, _ATT, "is inverted"),
    Mistake("attention_inverted_inv", attention_inverted, _INV, "Changing only the padding"),
    Mistake("attention_ignores_causal", attention_ignores_causal, _ATT, "ignores causal=True"),
    Mistake("attention_ignores_causal_inv", attention_ignores_causal, _INV, "reads future keys"),
    Mistake("attention_always_causal", attention_always_causal, _ATT, "although causal=False"),
    Mistake("attention_always_causal_inv", attention_always_causal, _INV, "running its sequence"),
    Mistake("attention_float", attention_float, _ATT, "returned a float32 tensor"),
    Mistake("attention_le", attention_le, _ATT, "one padding position per sequence"),
    Mistake("attention_le_inv", attention_le, _INV, "Changing only the padding"),
    Mistake("attention_diagonal_excluded", attention_strict, _ATT, "excludes the diagonal"),
    Mistake("attention_diagonal_excluded_inv", attention_strict, _INV, "running its sequence"),
    Mistake("attention_mixes_devices", attention_cpu_arange, _ATT, "lengths.device"),
    Mistake("attention_unexpanded", attention_unexpanded, _ATT, "expand the key padding"),
    Mistake("nn_stub", stub, _NN, "not implemented yet"),
    Mistake("nn_course_meaning", nn_masks_course, _NN, "returned the course's meaning"),
    Mistake("nn_padding_inverted", nn_masks_padding_inverted, _NN, "True for real tokens"),
    Mistake("nn_attn_inverted", nn_masks_attn_inverted, _NN, "True for allowed pairs"),
    Mistake("nn_no_attn_mask", nn_masks_no_attn, _NN, "no attn_mask although causal=True"),
    Mistake("nn_blocks_diagonal", nn_masks_diagonal, _NN, "blocks the diagonal as well"),
    Mistake("nn_time_first_padding", nn_masks_time_first, _NN, "whatever batch_first says"),
    Mistake("nn_single_mask", nn_masks_single, _NN, "should return a pair"),
]
MISTAKES = tried(MISTAKES, runs=({"seed": 0}, {"seed": 5, "thorough": True}))

CAUSAL_CHECKS = [_VALUES, _LEAK]
ATTENTION_CHECKS = [_ATT, _INV]
CORRECT = (
    correct(CAUSAL_CHECKS, CORRECT_CAUSAL)
    + correct([_PAD], CORRECT_PADDING)
    + correct(ATTENTION_CHECKS, CORRECT_ATTENTION)
    + correct([_NN], CORRECT_NN_MASKS)
)
STUBS = [(check, stub) for check in [*CAUSAL_CHECKS, _PAD, *ATTENTION_CHECKS, _NN]]
REPLAY = [_VALUES, _PAD, _NN]
