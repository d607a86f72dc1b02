"""Ready-made modules for notebooks that build on earlier ones.

Shape legend: ``B`` batch, ``T`` query length, ``S`` key/value length, ``C`` = d_model,
``nh`` heads, ``hs`` = C // nh.

Later notebooks (grouped-query attention, parallel vs sequential heads, exploring heads) need a
multi-head attention module with the course's layout, whether or not the learner finished notebook
02. :class:`TorchMultiHeadAttention` wires four ``nn.Linear`` projections into PyTorch's own
``F.multi_head_attention_forward``: it is PyTorch's implementation behind the course's interface,
so a learner's ``MultiHeadAttention`` can be swapped in anywhere it is used.
"""

import torch
import torch.nn.functional as F
from torch import nn


class TorchMultiHeadAttention(nn.Module):
    """Multi-head attention with the interface of notebook 02, computed by PyTorch.

    Attributes ``num_heads``, ``q_proj``, ``k_proj``, ``v_proj``, ``out_proj`` (each
    ``nn.Linear(C, C)``); head ``h`` uses features ``h*hs:(h+1)*hs`` of each projection.
    ``forward(query, key=None, value=None, mask=None) -> (out (B, T, C), weights (B, nh, T, S))``
    with a boolean mask where True = may attend; a query with no allowed key attends to nothing.
    """

    def __init__(self, d_model: int, num_heads: int, bias: bool = True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key=None, value=None, mask=None):
        key = query if key is None else key
        value = query if value is None else value
        B, T, C = query.shape
        S = key.shape[1]
        blocked = None
        if mask is not None:  # PyTorch's bool masks mean the opposite: True = may NOT attend
            allowed = torch.broadcast_to(mask, (B, self.num_heads, T, S))
            blocked = ~allowed.reshape(B * self.num_heads, T, S)  # (B*nh, T, S)
        in_bias = None
        if self.q_proj.bias is not None:
            in_bias = torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])  # (3C,)
        out, weights = F.multi_head_attention_forward(
            query.transpose(0, 1),
            key.transpose(0, 1),
            value.transpose(0, 1),  # (T|S, B, C)
            C,
            self.num_heads,
            in_proj_weight=None,
            in_proj_bias=in_bias,
            bias_k=None,
            bias_v=None,
            add_zero_attn=False,
            dropout_p=0.0,
            out_proj_weight=self.out_proj.weight,
            out_proj_bias=self.out_proj.bias,
            training=self.training,
            need_weights=True,
            attn_mask=blocked,
            use_separate_proj_weight=True,
            q_proj_weight=self.q_proj.weight,
            k_proj_weight=self.k_proj.weight,
            v_proj_weight=self.v_proj.weight,
            average_attn_weights=False,
        )
        out = out.transpose(0, 1)  # (B, T, C)
        if mask is not None:  # PyTorch returns NaN for a query with no allowed key
            empty = ~allowed.any(dim=-1).all(dim=1)  # (B, T)
            no_attention = self.out_proj(torch.zeros_like(query))  # (B, T, C)
            out = torch.where(empty[..., None], no_attention, out)
            weights = weights.nan_to_num(0.0)
        return out, weights  # (B, T, C), (B, nh, T, S)
