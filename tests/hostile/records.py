""" "How" rules read off the replayed record: attacks that satisfy a rule's letter (issue 42, 2).

Every rule about *how* a result is computed (no PyTorch attention, no autograd, a memory bound,
an absorbed decode step) must hold for the operators the grader recomputed, whatever the learner
code is called or how it splits the work. Each submission here is plain PyTorch, with no import
the allow-list scan could withhold, so the rules have to hold on their own:

- notebook 01: ``F.scaled_dot_product_attention`` on 3-D views of the inputs (PyTorch's math
  attention, whose record holds ``_safe_softmax`` and no SDPA operator), the weights from
  identity values;
- notebook 06, learner ``r_nb06_chunks``: tiled attention as that same SDPA, one block of
  queries at a time against all keys (no key tiling, no online softmax); the tiled backward as
  autograd (``torch.autograd.grad``) through attention written out per block of queries;
- notebook 06, learner ``r_nb06_kept``: attention by hand that scores one block of queries at a
  time but keeps every block's scores alive until the end (the whole score matrix, in pieces
  each under the size rule); the backward likewise keeps every block's P alive;
- notebook 08: an "absorbed" MLA that absorbs nothing: it up-projects the whole cache, one latent
  feature at a time with multiply and add (no matrix product for a FLOP counter to see, no
  single tensor as large as the up-projected keys).

``tests/test_hostile_records.py`` verifies each target cell in-process and reads the class run
(:mod:`hostile.class_run`); the TorchScript and autograd-engine variants, which the scan would
withhold, are tested on their records there.
"""

from __future__ import annotations

from .trust import NB01, NB06, NB08, Attack, Edit

SDPA_ON_VIEWS = '''def scaled_dot_product_attention(q, k, v, mask=None):
    """PyTorch's own attention on 3-D views; the weights are attention over identity values."""
    lead, (T, S) = q.shape[:-2], (q.shape[-2], k.shape[-2])
    if mask is not None:
        lead = torch.broadcast_shapes(lead, mask.shape[:-2])
        mask = mask.expand(*lead, T, S).reshape(-1, T, S)
    q3 = q.expand(*lead, T, q.shape[-1]).reshape(-1, T, q.shape[-1])
    k3 = k.expand(*lead, S, k.shape[-1]).reshape(-1, S, k.shape[-1])
    v3 = v.expand(*lead, S, v.shape[-1]).reshape(-1, S, v.shape[-1])
    eye = torch.eye(S, dtype=q.dtype).expand(q3.shape[0], S, S)
    attend = torch.nn.functional.scaled_dot_product_attention
    out = attend(q3, k3, v3, attn_mask=mask)
    weights = attend(q3, k3, eye, attn_mask=mask)
    return out.reshape(*lead, T, v.shape[-1]), weights.reshape(*lead, T, S)
'''

_CAUSAL_ROWS = '''

def _allowed(start, stop, T, S, causal):
    """(stop - start, S) bool: which keys the queries start..stop may attend (bottom-right)."""
    if not causal:
        return None
    rows = torch.arange(start, stop)[:, None] + S - T  # (c, 1)
    return torch.arange(S)[None, :] <= rows  # (c, S)
'''

SDPA_ON_QUERY_CHUNKS = (
    _CAUSAL_ROWS
    + '''

def tiled_attention(q, k, v, block_size=64, causal=False):
    """PyTorch's attention on 3-D views, a few queries at a time against all keys: each
    chunk's scores stay under one head's (T, S)."""
    B, nh, T, hs = q.shape
    S = k.shape[-2]
    chunk = max(1, T // (2 * B * nh))
    q3, k3, v3 = q.reshape(B * nh, T, hs), k.reshape(B * nh, S, hs), v.reshape(B * nh, S, -1)
    rows = []
    for start in range(0, T, chunk):
        stop = min(start + chunk, T)
        mask = _allowed(start, stop, T, S, causal)
        rows.append(
            torch.nn.functional.scaled_dot_product_attention(
                q3[:, start:stop], k3, v3, attn_mask=mask
            )
        )
    return torch.cat(rows, dim=1).reshape(B, nh, T, -1)
'''
)

BACKWARD_BY_AUTOGRAD = '''

def tiled_attention_backward(q, k, v, o, lse, do, block_size=64, causal=False):
    """Autograd through attention written out for a few queries at a time."""
    B, nh, T, hs = q.shape
    S = k.shape[-2]
    q_, k_, v_ = (t.detach().float().requires_grad_() for t in (q, k, v))
    chunk = max(1, T // (2 * B * nh))
    rows = []
    for start in range(0, T, chunk):
        stop = min(start + chunk, T)
        s = q_[..., start:stop, :] @ k_.transpose(-2, -1) / math.sqrt(hs)  # (B, nh, c, S)
        allowed = _allowed(start, stop, T, S, causal)
        if allowed is not None:
            s = s.masked_fill(~allowed, float("-inf"))
        rows.append(torch.softmax(s, dim=-1) @ v_)  # (B, nh, c, hs)
    out = torch.cat(rows, dim=-2)
    grads = torch.autograd.grad(out, (q_, k_, v_), do.float())
    return tuple(g.to(q.dtype) for g in grads)
'''

SCORES_KEPT_ALIVE = (
    _CAUSAL_ROWS
    + '''

def _kept_weights(q, k, T, S, causal):
    """Every block of queries' softmax weights against all keys, all kept: (B, nh, c, S) each."""
    B, nh, _, hs = q.shape
    chunk = max(1, T // (2 * B * nh))
    blocks = []
    for start in range(0, T, chunk):
        stop = min(start + chunk, T)
        s = q[..., start:stop, :] @ k.transpose(-2, -1) / math.sqrt(hs)  # (B, nh, c, S)
        allowed = _allowed(start, stop, T, S, causal)
        if allowed is not None:
            s = s.masked_fill(~allowed, float("-inf"))
        blocks.append(s)
    top = [s.amax(-1, keepdim=True).clamp_min(-1e30) for s in blocks]  # (B, nh, c, 1)
    exps = [torch.exp(s - m) for s, m in zip(blocks, top)]  # every block alive at once
    sums = [e.sum(-1, keepdim=True) for e in exps]
    return [torch.where(z > 0, e / z.clamp_min(1e-30), 0.0) for e, z in zip(exps, sums)]


def tiled_attention(q, k, v, block_size=64, causal=False):
    """Attention by hand, block of queries by block, every block's scores kept alive."""
    T, S = q.shape[-2], k.shape[-2]
    return torch.cat([p @ v for p in _kept_weights(q, k, T, S, causal)], dim=-2)


def tiled_attention_backward(q, k, v, o, lse, do, block_size=64, causal=False):
    """The backward by hand from every block's P, all kept alive."""
    T, S, hs = q.shape[-2], k.shape[-2], q.shape[-1]
    ps = _kept_weights(q, k, T, S, causal)
    sizes = [p.shape[-2] for p in ps]
    dos, os_ = do.split(sizes, dim=-2), o.split(sizes, dim=-2)
    dv = sum(p.transpose(-2, -1) @ g for p, g in zip(ps, dos))
    dss = [
        p * (g @ v.transpose(-2, -1) - (g * out).sum(-1, keepdim=True))
        for p, g, out in zip(ps, dos, os_)
    ]
    dq = torch.cat([ds @ k for ds in dss], dim=-2) / math.sqrt(hs)
    qs = q.split(sizes, dim=-2)
    dk = sum(ds.transpose(-2, -1) @ qb for ds, qb in zip(dss, qs)) / math.sqrt(hs)
    return dq, dk, dv
'''
)

ABSORBS_NOTHING = '''def _rope(x, positions, base=10000.0):
    """Notebook 04's rotary embedding (the notebook's own is in a cell a learner may delete)."""
    hs = x.shape[-1]
    theta = base ** -(torch.arange(0, hs, 2, dtype=torch.float32) / hs)
    angles = positions.float()[:, None] * theta  # (T, hs/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x1, x2 = x[..., : hs // 2], x[..., hs // 2 :]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class AbsorbedLatentAttention(MultiHeadLatentAttention):
    """Up-projects the whole cache into every head's keys and values, one latent feature at a
    time, with multiply and add: no matrix product, no single tensor of the whole keys."""

    def forward(self, x, past_kv=None):
        B, T, _ = x.shape
        nh, hd, dr, dc = self.num_heads, self.head_dim, self.d_rope, self.d_latent
        P = 0 if past_kv is None else past_kv[0].shape[1]
        positions = torch.arange(P, P + T)
        q = self.wq(x).view(B, T, nh, hd + dr).transpose(1, 2)  # (B, nh, T, hd + dr)
        q_nope, q_rope = q.split([hd, dr], dim=-1)
        c_kv, k_rope = self.wkv_a(x).split([dc, dr], dim=-1)
        c_kv, k_rope = self.kv_norm(c_kv), _rope(k_rope, positions)
        if past_kv is not None:
            c_kv = torch.cat([past_kv[0], c_kv], dim=1)  # (B, S, dc)
            k_rope = torch.cat([past_kv[1], k_rope], dim=1)  # (B, S, dr)
        S = c_kv.shape[1]
        q_rope = _rope(q_rope, positions)
        w = self.wkv_b.weight.view(nh, 2 * hd, dc)
        mask = torch.ones(T, S, dtype=torch.bool).tril(S - T)
        heads = []
        for h in range(nh):
            keys = values = 0
            for i in range(dc):
                feature = c_kv[..., i : i + 1]  # (B, S, 1)
                keys = keys + feature * w[h, :hd, i]  # (B, S, hd)
                values = values + feature * w[h, hd:, i]  # (B, S, hd)
            scores = q_nope[:, h] @ keys.transpose(1, 2) + q_rope[:, h] @ k_rope.transpose(1, 2)
            scores = (scores / math.sqrt(hd + dr)).masked_fill(~mask, float("-inf"))
            heads.append(torch.softmax(scores, dim=-1) @ values)  # (B, T, hd)
        out = torch.cat(heads, dim=-1)  # (B, T, nh * hd)
        return self.wo(out), (c_kv, k_rope)
'''

TILED_CELLS = (
    "test_tiled_attention_matches_sdpa",
    "test_tiled_attention_causal",
    "test_tiled_attention_memory",
    "test_tiled_attention_no_sdpa",
)
BACKWARD_CELLS = (
    "test_tiled_attention_backward_matches_autograd",
    "test_tiled_attention_backward_causal",
    "test_tiled_attention_backward_memory",
    "test_tiled_attention_backward_by_hand",
)

ATTACKS = (
    Attack(
        "r_nb01_sdpa_views",
        NB01,
        2,
        (
            "test_scaled_dot_product_attention_shapes",
            "test_scaled_dot_product_attention_matches_torch",
            "test_scaled_dot_product_attention_mask",
        ),
        "scaled_dot_product_attention is F.scaled_dot_product_attention on 3-D views, the "
        "weights from identity values",
        edits=(Edit("answer", "scaled_dot_product_attention", SDPA_ON_VIEWS),),
    ),
    Attack(
        "r_nb06_chunks",
        NB06,
        2,
        TILED_CELLS + BACKWARD_CELLS,
        "tiled_attention is F.scaled_dot_product_attention on a few queries at a time against "
        "all keys; tiled_attention_backward is torch.autograd.grad through attention written "
        "out per block of queries",
        edits=(
            Edit("answer", "tiled_attention", SDPA_ON_QUERY_CHUNKS),
            Edit("answer", "tiled_attention_backward", BACKWARD_BY_AUTOGRAD),
        ),
    ),
    Attack(
        "r_nb06_kept",
        NB06,
        2,
        ("test_tiled_attention_memory", "test_tiled_attention_backward_memory"),
        "attention and its backward by hand, a block of queries at a time against all keys, "
        "every block's scores kept alive: the whole score matrix in pieces under the size rule",
        edits=(
            Edit("answer", "tiled_attention", SCORES_KEPT_ALIVE),
            Edit("answer", "tiled_attention_backward", ""),
        ),
    ),
    Attack(
        "r_nb08_absorbs_nothing",
        NB08,
        2,
        ("test_AbsorbedLatentAttention_memory",),
        "AbsorbedLatentAttention up-projects the whole cache into every head's keys and values, "
        "one latent feature at a time with multiply and add",
        edits=(Edit("answer", "AbsorbedLatentAttention", ABSORBS_NOTHING),),
    ),
)
