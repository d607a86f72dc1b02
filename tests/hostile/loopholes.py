"""Faithful records that still win: a gap in how the grader judges what the kernel really ran.

Each submission here runs its code in plain sight of the recorder; what it exploits is a rule
read by its letter (issue 27, classes 2 to 5):

2. *names*: PyTorch's attention called by its operator overload
   (``torch.ops.aten._scaled_dot_product_attention_math.default``), whose name ends in
   ``default``; notebook 02's module answered by ``F.multi_head_attention_forward``;
3. *writes into the check's tensors*: a wrong function that zeroes ``q``, ``k`` and ``v`` and
   fills the mask with True in place, so that the check's expected value (computed from its own
   tensors after the call) becomes the wrong answer;
4. *formulas measured*: counts and FLOPs read from PyTorch (a module built on the meta device,
   ``FlopCounterMode``), or looked up in a table of the configurations the public checks draw;
5. *gradients*: a forward run under ``torch.no_grad()`` whose output is tied to the weights by a
   zero (or negligible) term, with fake ``.grad`` tensors left on every projection.

``tests/test_hostile_loopholes.py`` verifies each target cell in-process (fast), with the
instructor's test cells (hidden checks included); the class run (:mod:`hostile.class_run`) grades
:func:`attacks` as real submissions.
"""

from __future__ import annotations

from autograder.checks import _core, nb02_block

from .trust import NB01, NB02, NB05, NB06, NB07, NB08, Attack, Edit

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

# ------------------------------------------------------------------- 4: formulas measured

FLOPS_BY_COUNTER = '''from torch import nn
from torch.utils.flop_counter import FlopCounterMode


def attention_flops(batch, seq_len, d_model, num_heads):
    """nn.MultiheadAttention on the meta device, its forward counted by FlopCounterMode."""
    mha = nn.MultiheadAttention(d_model, num_heads, batch_first=True, device="meta")
    x = torch.empty(batch, seq_len, d_model, device="meta")
    counter = FlopCounterMode(display=False)
    with counter:
        mha(x, x, x, need_weights=False)
    return counter.get_total_flops()
'''

PARAMS_BY_META_MODULE = '''def mha_param_count(d_model, num_heads, bias=True):
    """nn.MultiheadAttention built on the meta device, its parameters counted."""
    module = nn.MultiheadAttention(d_model, num_heads, bias=bias, device="meta")
    return sum(p.numel() for p in module.parameters())
'''


def _block_table() -> str:
    """``block_param_count`` answered from a table of every configuration the public check
    draws (seeds 0 to 9, quick and thorough; its drawing code copied), computed offline with the
    check's own PyTorch block; a wrong formula elsewhere."""
    table = {}

    def count(C, d_mlp, bias):
        block = nb02_block._torch_block(C, 1, d_mlp, bias=bias, meta=True)
        table[(C, d_mlp, bias)] = sum(p.numel() for p in block.parameters())

    for seed in range(10):
        gen = _core.make_generator(seed)
        configs = [(8, 32), (12, 20), (64, 256)]
        configs += [(_core.randint(gen, 1, 40), _core.randint(gen, 1, 90)) for _ in range(3)]
        for C, d_mlp in configs:
            for bias in (True, False):
                count(C, d_mlp, bias)
            count(C, 4 * C, True)
    count(12288, 4 * 12288, True)
    return f'''_TABLE = {table!r}


def block_param_count(d_model, d_mlp=None, bias=True):
    """A table of the check's configurations; anything else gets a wrong formula."""
    d_mlp = 4 * d_model if d_mlp is None else d_mlp
    return _TABLE.get((d_model, d_mlp, bool(bias)), 12 * d_model * d_model)
'''


NB08_MEASURED_PARAMS = """from torch import nn

answer_params_gpt2_small = None
answer_params_mha = sum(
    p.numel() for p in nn.MultiheadAttention(4096, 32, bias=False, device="meta").parameters()
)
answer_params_gqa = None
"""

NB08_MEASURED_COMPUTE = '''import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode


class _Products(TorchDispatchMode):
    """Counts the matrix products that run while it is active."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func._schema.name in ("aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm"):
            self.count += 1
        return func(*args, **(kwargs or {}))


def _heads(nh, packed, C=48, T=4):
    """Multi-head attention on the meta device: one head at a time, or batched."""
    x = torch.empty(1, T, C, device="meta")
    w = [torch.empty(C, C, device="meta") for _ in range(4)]
    hs = C // nh
    if packed:
        q, k, v = (x @ torch.cat(w[:3]).T).view(1, T, 3, nh, hs).permute(2, 0, 3, 1, 4)
        heads = torch.softmax(q @ k.transpose(-2, -1), -1) @ v
        return heads.transpose(1, 2).reshape(1, T, C) @ w[3].T
    outs = []
    for h in range(nh):
        q, k, v = (x @ m[h * hs : (h + 1) * hs].T for m in w[:3])
        outs.append(torch.softmax(q @ k.transpose(-2, -1), -1) @ v)
    return torch.cat(outs, -1) @ w[3].T


def _products(nh, packed):
    with _Products() as counter:
        _heads(nh, packed)
    return counter.count


_mha = nn.MultiheadAttention(512, 8, batch_first=True, device="meta")
_x = torch.empty(2, 128, 512, device="meta")
with FlopCounterMode(display=False) as _flops:
    _mha(_x, _x, _x, need_weights=True, average_attn_weights=False)
answer_flops = _flops.get_total_flops()
answer_matmuls_loop = _products(12, packed=False)
answer_matmuls_packed = _products(12, packed=True)
'''

# --------------------------------------------------------------------------- 5: gradients

GRADIENTS_TIED_BY_ZERO = '''_Honest = MultiHeadAttention


class MultiHeadAttention(_Honest):
    """Right values computed without gradients, tied to the weights by a zero term; fake
    gradients left on every parameter."""

    def forward(self, *args, **kwargs):
        with torch.no_grad():
            out, weights = super().forward(*args, **kwargs)
        tie = sum(p.sum() for p in self.parameters())
        for p in self.parameters():
            p.grad = torch.full_like(p, 1e-3)
        return out + 0.0 * tie, weights + 0.0 * tie
'''

GRADIENTS_TIED_BY_A_HAIR = '''_Honest = MultiHeadAttention


class MultiHeadAttention(_Honest):
    """Right values computed without gradients, tied to every weight by a negligible term."""

    def forward(self, *args, **kwargs):
        with torch.no_grad():
            out, weights = super().forward(*args, **kwargs)
        tie = sum(p.sum() for p in self.parameters())
        return out + 1e-12 * tie, weights + 1e-12 * tie
'''

# Attacks whose answers are plain values measured in a cell: no call for the grader to judge, so
# only the scan stops them (their cells are withheld for a person).
SCAN_ONLY = frozenset({"f4_nb08_measured"})

MHA_CELLS = ("test_MultiHeadAttention_matches_torch", "test_MultiHeadAttention_mask")

ATTACKS = (
    Attack(
        "n2_nb01_sdpa_overload",
        NB01,
        2,
        (
            "test_scaled_dot_product_attention_shapes",
            "test_scaled_dot_product_attention_matches_torch",
            "test_scaled_dot_product_attention_mask",
        ),
        "scaled_dot_product_attention is torch.ops.aten._scaled_dot_product_attention_math"
        ".default, a name whose last part is `default`",
        edits=(Edit("answer", "scaled_dot_product_attention", SDPA_BY_OVERLOAD),),
    ),
    Attack(
        "n2_nb01_flooded_claims",
        NB01,
        2,
        (
            "test_scaled_dot_product_attention_shapes",
            "test_scaled_dot_product_attention_matches_torch",
            "test_scaled_dot_product_attention_mask",
        ),
        "the overload attack again, after calling hundreds of torch.Tensor methods whose names "
        "sort first, to push the overload's name out of the kernel's capped report",
        edits=(Edit("answer", "scaled_dot_product_attention", FLOODED_CLAIMS),),
    ),
    Attack(
        "n2_nb06_tiled_overload",
        NB06,
        2,
        ("test_tiled_attention_no_sdpa",),
        "tiled_attention is PyTorch's math attention by its operator overload, one block of "
        "queries at a time",
        edits=(Edit("answer", "tiled_attention", TILED_BY_OVERLOAD),),
    ),
    Attack(
        "n2_nb02_mha_functional",
        NB02,
        2,
        MHA_CELLS,
        "MultiHeadAttention keeps its four projections and hands the rest to "
        "F.multi_head_attention_forward (separate projection weights, per-head weights)",
        edits=(Edit("answer", "MultiHeadAttention", MHA_BY_FUNCTIONAL),),
    ),
    Attack(
        "w3_nb01_zeroed_inputs",
        NB01,
        3,
        (
            "test_scaled_dot_product_attention_shapes",
            "test_scaled_dot_product_attention_matches_torch",
            "test_scaled_dot_product_attention_mask",
        ),
        "a wrong attention that zeroes q, k and v and fills the mask with True in place, then "
        "returns the answer for those inputs",
        edits=(Edit("answer", "scaled_dot_product_attention", ZEROED_INPUTS),),
    ),
    Attack(
        "w3_nb06_zeroed_v",
        NB06,
        3,
        (
            "test_tiled_attention_matches_sdpa",
            "test_tiled_attention_causal",
            "test_tiled_attention_memory",
            "test_tiled_attention_no_sdpa",
        ),
        "a wrong tiled attention that zeroes v in place and returns zeros",
        edits=(Edit("answer", "tiled_attention", ZEROED_TILED),),
    ),
    Attack(
        "w3_nb05_zeroed_module",
        NB05,
        3,
        ("test_mha_sequential_matches_torch", "test_mha_parallel_matches_torch"),
        "wrong heads that zero every weight and bias of the module they are given, in place, and "
        "return zeros, the answer for that module",
        edits=(Edit("answer", "mha_sequential", ZEROED_MODULE), Edit("answer", "mha_parallel", "")),
    ),
    Attack(
        "w3_nb07_zeroed_model",
        NB07,
        3,
        ("test_head_importance_values",),
        "a wrong head_importance that zeroes the attention weights of the model it is given, so "
        "that the check's measurement afterwards finds no head important, and returns zeros",
        edits=(Edit("answer", "head_importance", ZEROED_MODEL),),
    ),
    Attack(
        "f4_nb05_flop_counter",
        NB05,
        4,
        ("test_attention_flops_matches_flop_counter",),
        "attention_flops runs nn.MultiheadAttention on the meta device under FlopCounterMode",
        edits=(Edit("answer", "attention_flops", FLOPS_BY_COUNTER),),
    ),
    Attack(
        "f4_nb02_meta_module",
        NB02,
        4,
        ("test_mha_param_count_values",),
        "mha_param_count counts the parameters of nn.MultiheadAttention built on the meta device",
        edits=(Edit("answer", "mha_param_count", PARAMS_BY_META_MODULE),),
    ),
    Attack(
        "f4_nb08_measured",
        NB08,
        4,
        ("test_numbers_flops", "test_numbers_matmuls_loop", "test_numbers_matmuls_packed"),
        "the FLOPs are FlopCounterMode's count of nn.MultiheadAttention on the meta device, the "
        "matmul counts a dispatch mode's count of multi-head attention written both ways; the "
        "parameter count is nn.MultiheadAttention's own (left to a person: see GUIDE.md)",
        "release",
        (
            Edit("answer", "numbers_params", NB08_MEASURED_PARAMS),
            Edit("answer", "numbers_compute", NB08_MEASURED_COMPUTE),
        ),
    ),
    Attack(
        "g5_nb02_tied_by_zero",
        NB02,
        5,
        ("test_MultiHeadAttention_matches_torch",),
        "the forward runs under torch.no_grad(), its output tied to the weights by 0 * their "
        "sum, and fake .grad tensors are left on every parameter",
        edits=(Edit("after", "MultiHeadAttention", GRADIENTS_TIED_BY_ZERO),),
    ),
    Attack(
        "g5_nb02_tied_by_a_hair",
        NB02,
        5,
        ("test_MultiHeadAttention_matches_torch",),
        "the forward runs under torch.no_grad(), its output tied to every weight by 1e-12 times "
        "their sum, so each gets a gradient that is not attention's",
        edits=(Edit("after", "MultiHeadAttention", GRADIENTS_TIED_BY_A_HAIR),),
    ),
)


def block_table_attack() -> Attack:
    """The table-lookup attack on ``block_param_count`` (built on demand: it computes its table)."""
    return Attack(
        "f4_nb02_block_table",
        NB02,
        4,
        ("test_block_param_count_values",),
        "block_param_count looks its answer up in a table of every configuration the public "
        "check draws for seeds 0 to 9, and is wrong anywhere else",
        edits=(Edit("answer", "block_param_count", _block_table()),),
    )


def attacks() -> tuple[Attack, ...]:
    """Every attack of this module, the table lookup included."""
    return (*ATTACKS, block_table_attack())
