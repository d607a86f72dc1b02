"""The ready-made MHA used by later notebooks agrees with nn.MultiheadAttention."""

import torch
from torch import nn

from autograder.tools.modules import TorchMultiHeadAttention


def _pair(C=16, nh=4, bias=True):
    torch.manual_seed(0)
    ours = TorchMultiHeadAttention(C, nh, bias=bias).double()
    ref = nn.MultiheadAttention(C, nh, bias=bias, batch_first=True).double()
    with torch.no_grad():
        ref.in_proj_weight.copy_(
            torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight])
        )
        if bias:
            ref.in_proj_bias.copy_(
                torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias])
            )
            ref.out_proj.bias.copy_(ours.out_proj.bias)
        ref.out_proj.weight.copy_(ours.out_proj.weight)
    return ours, ref


def test_matches_torch_for_cross_attention_with_mask():
    ours, ref = _pair()
    q, k, v = (
        torch.randn(2, 5, 16).double(),
        torch.randn(2, 7, 16).double(),
        torch.randn(2, 7, 16).double(),
    )
    mask = torch.rand(5, 7) > 0.3
    mask[:, 0] = True
    out, w = ours(q, k, v, mask=mask)
    ref_out, ref_w = ref(q, k, v, attn_mask=~mask, average_attn_weights=False)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(w, ref_w)
    assert w.shape == (2, 4, 5, 7)


def test_query_without_allowed_keys_gets_zero_weights_not_nan():
    ours, _ = _pair(bias=False)
    x = torch.randn(1, 3, 16).double()
    mask = torch.ones(3, 3, dtype=torch.bool)
    mask[1] = False
    out, w = ours(x, mask=mask)
    assert not out.isnan().any() and not w.isnan().any()
    assert (w[:, :, 1] == 0).all() and (out[:, 1] == 0).all()


def test_rejects_indivisible_width():
    try:
        TorchMultiHeadAttention(10, 3)
    except ValueError as err:
        assert "divisible" in str(err)
    else:
        raise AssertionError("no ValueError")
