"""The learner code of :mod:`hostile.loopholes`, classes 2 and 3: names, writes into inputs."""

# ------------------------------------------------------------------------------ 2: names

SDPA_BY_OVERLOAD = '''def scaled_dot_product_attention(q, k, v, mask=None):
    """PyTorch's math attention, called by its operator overload (the name ends in `default`)."""
    attend = torch.ops.aten._scaled_dot_product_attention_math.default
    if mask is not None:  # the operator adds its mask: 0 where allowed, -inf where not
        mask = torch.zeros(mask.shape, dtype=q.dtype).masked_fill(~mask, float("-inf"))
    out, weights = attend(q, k, v, attn_mask=mask)
    return out.nan_to_num(0.0), weights.nan_to_num(0.0)
'''

TILED_BY_OVERLOAD = '''def tiled_attention(q, k, v, block_size=64, causal=False):
    """PyTorch's math attention by its operator overload, one block of queries at a time."""
    T, S = q.shape[-2], k.shape[-2]
    attend = torch.ops.aten._scaled_dot_product_attention_math.default
    rows = []
    for start in range(0, T, block_size):
        stop = min(start + block_size, T)
        mask = None
        if causal:  # the operator adds its mask: 0 where allowed, -inf where not
            allowed = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(S - T)[start:stop]
            mask = torch.zeros(allowed.shape, dtype=q.dtype).masked_fill(~allowed, float("-inf"))
        rows.append(attend(q[..., start:stop, :], k, v, attn_mask=mask)[0])
    return torch.cat(rows, dim=-2).nan_to_num(0.0)
'''

FLOODED_CLAIMS = '''_SKIP = set("""abs_ absolute_ cauchy_ dense_dim dequantize exponential_
hash_tensor histogram is_pinned log_normal_ mode nanmedian pin_memory random_ share_memory_
sparse_dim""".split())  # methods whose operators the check refuses or cannot carry


def _flood():
    """Call every no-argument method of a scalar tensor: hundreds of torch.Tensor.* names, which
    sort before torch._ops.*, so a report cut to its first names leaves the overload out."""
    for name in sorted(dir(torch.Tensor)):
        if name.startswith("_") or name in _SKIP:
            continue
        try:
            method = getattr(torch.full((), 0.5), name)
            if callable(method):
                method()
        except Exception:
            pass


def scaled_dot_product_attention(q, k, v, mask=None):
    """PyTorch's math attention by its operator overload, its name buried under a flood."""
    _flood()
    attend = torch.ops.aten._scaled_dot_product_attention_math.default
    if mask is not None:  # the operator adds its mask: 0 where allowed, -inf where not
        mask = torch.zeros(mask.shape, dtype=q.dtype).masked_fill(~mask, float("-inf"))
    out, weights = attend(q, k, v, attn_mask=mask)
    return out.nan_to_num(0.0), weights.nan_to_num(0.0)
'''

MHA_BY_FUNCTIONAL = '''class MultiHeadAttention(nn.Module):
    """Four projections, and F.multi_head_attention_forward to do the rest."""

    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.num_heads = num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key=None, value=None, mask=None):
        key = query if key is None else key
        value = query if value is None else value
        (B, T, C), S = query.shape, key.shape[1]
        blocked = None
        if mask is not None:
            blocked = ~mask.expand(B, self.num_heads, T, S).reshape(B * self.num_heads, T, S)
        biases = [p.bias for p in (self.q_proj, self.k_proj, self.v_proj)]
        out, weights = F.multi_head_attention_forward(
            query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1), C,
            self.num_heads, None, None if biases[0] is None else torch.cat(biases), None, None,
            False, 0.0, self.out_proj.weight, self.out_proj.bias, need_weights=True,
            attn_mask=blocked, average_attn_weights=False, use_separate_proj_weight=True,
            q_proj_weight=self.q_proj.weight, k_proj_weight=self.k_proj.weight,
            v_proj_weight=self.v_proj.weight,
        )
        out = out.transpose(0, 1)
        if mask is not None:  # a query with no allowed key: zero weights, out = out_proj(0)
            dead = ~mask.expand(B, self.num_heads, T, S).any(-1)  # (B, nh, T)
            weights = weights.nan_to_num(0.0).masked_fill(dead[..., None], 0.0)
            if dead.any():
                merged = torch.zeros(B, T, C, dtype=out.dtype)
                zero_out = self.out_proj(merged)
                out = torch.where(dead.all(1)[..., None], zero_out, out.nan_to_num(0.0))
        return out, weights
'''

# ------------------------------------------------------------- 3: writes into the check's tensors

ZEROED_INPUTS = '''def scaled_dot_product_attention(q, k, v, mask=None):
    """Wrong: zeroes q, k and v and allows every key, in place, then returns the answer for
    those zeroed inputs (a zero output and uniform weights)."""
    q.zero_()
    k.zero_()
    v.zero_()
    if mask is not None:
        mask.fill_(True)
    S = k.shape[-2]
    weights = torch.ones(*q.shape[:-1], S, dtype=q.dtype) / S  # (..., T, S)
    return weights @ v, weights
'''

ZEROED_TILED = '''def tiled_attention(q, k, v, block_size=64, causal=False):
    """Wrong: zeroes v in place, then returns zeros, the answer for a zero v."""
    v.zero_()
    return torch.zeros_like(q[..., :1]) * k[..., :1, :1].sum() + v[..., :1, :].sum(-2, True)
'''

ZEROED_MODULE = '''def _zero_module(x, mha):
    """Wrong: zeroes every weight and bias of the module it is given, in place, then returns the
    answer for that module (zeros, tied to x by a zero)."""
    for p in mha.parameters():
        p.data.zero_()
    return x * 0.0


def mha_sequential(x, mha):
    return _zero_module(x, mha)


def mha_parallel(x, mha):
    return _zero_module(x, mha)
'''

ZEROED_MODEL = '''def head_importance(model, batch):
    """Wrong: zeroes every attention weight of the model it is given, in place, so that no head
    matters to the check's own measurement afterwards; returns zeros."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "attn" in name:
                p.zero_()
    return torch.zeros(model.n_layers, model.num_heads) * model.loss(batch).detach()
'''
