"""Hostile submissions that attack the grader's trust boundary, each with the cells it targets.

A determined learner does not need to beat a check if the grader trusts something the learner's
kernel controls: an answer key the kernel can import, a cell that looks like the grader's own, a
value rebuilt from Python numbers, a built-in the deny-lists do not name, a cell nobody
re-checks, a recorded value taken at its word, or the grader's own process and files. Every
:class:`Attack` here is data: the learner id, the notebook, the cells it must not win, what it
does in one sentence, and the edits that turn the instructor's (or the release) notebook into the
submission. ``tests/test_hostile_trust.py`` grades them all in one run, with an honest control
(the instructor's answers) for every notebook attacked.

Threat classes (``threat``):

1. answer key importable in the kernel (check modules, their oracles and constants, the tools'
   reference implementations), reached through ``sys.modules``, ``__globals__``, ``gc``,
   ``importlib`` with built strings, or frames walked up into the calling check;
2. a learner cell carrying the grader's own probe metadata;
3. a value not derived from the inputs: rebuilt from Python literals, with torch-function and
   dispatch modes switched off around the real computation;
4. fused built-ins that a deny-list may miss;
5. notebook 05's one-head-at-a-time rule answered by the reference module itself;
6. cells nobody can re-check (notebook 06's Triton cells) answered with plain SDPA;
7. values taken as recorded: fake ``.grad`` tensors, and functions of sizes only answered by an
   oracle;
8. availability and integrity: huge operators for the re-run, floods of error output, symlinked
   folders, learner ids that a spreadsheet runs as formulas.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field

import nbformat

from autograder import nbcell, paths
from autograder.grader import names as cell_names
from autograder.grader import scan

NB01, NB02, NB03, NB04 = (
    "01_attention_from_scratch",
    "02_multi_head_attention",
    "03_masking",
    "04_grouped_query_attention",
)
NB05, NB06, NB07, NB08, NB09, NB10 = (
    "05_parallel_vs_sequential",
    "06_gpu_attention",
    "07_exploring_heads",
    "08_long_context",
    "09_attention_serving",
    "10_interview_prep",
)
NOTEBOOKS = (NB01, NB02, NB03, NB04, NB05, NB06, NB07, NB08, NB09, NB10)
# Notebook 06's Triton checks are optional self-checks without points: nothing to win there.
TRITON = ("selfcheck_triton_attention_matches_sdpa", "selfcheck_triton_attention_causal")
TILED = ("test_tiled_attention_matches_sdpa", "test_tiled_attention_causal")
PROBE_METADATA = "mha_verify"  # what the grader marks its own recording cells with


@dataclass(frozen=True)
class Edit:
    """One change to a notebook.

    ``kind``: ``answer`` replaces the answer cell ``grade_id``; ``stub`` puts back the release's
    version of it; ``after`` inserts a code cell after ``grade_id`` (with ``metadata``, if any);
    ``each_answer`` replaces every answer cell that names ``answer_<x>`` variables with
    ``source.format(name=x)`` for each of them.
    """

    kind: str
    grade_id: str = ""
    source: str = ""
    metadata: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Attack:
    learner: str
    notebook: str
    threat: int
    targets: tuple[str, ...]
    what: str
    base: str = "solution"  # "solution": the instructor's answers; "release": unfinished
    edits: tuple[Edit, ...] = ()


@dataclass(frozen=True)
class FolderAttack:
    """A class-8 attack on the submissions folder itself rather than on a notebook's cells."""

    learner: str
    threat: int
    what: str
    kind: str  # "student_link", "assignment_link" or "formula_id"
    points_at: str = ""  # the learner whose work a link points at


# ----------------------------------------------------------------------- shared learner code

# Rebuilds a tensor from Python numbers, one element at a time, with the tensor's real source (a
# built-in, an oracle, a check's local) computed where no mode can see it.
LAUNDER = '''import torch
from torch.utils._python_dispatch import _disable_current_modes


def _unseen(compute):
    """compute() with every torch-function and dispatch mode switched off."""
    with _disable_current_modes(), torch._C.DisableTorchFunction():
        return compute()


def _launder(compute):
    """A copy of compute()'s tensor, written element by element from Python numbers."""
    hidden = _unseen(compute)
    values = _unseen(lambda: hidden.detach().double().reshape(-1).tolist())
    out = torch.zeros(len(values), dtype=torch.float64)
    for i, v in enumerate(values):
        out[i] = v
    return out.reshape(tuple(hidden.shape)).to(hidden.dtype)
'''

FIND_IN_CALLERS = '''import sys


def _from_callers(name, where="f_globals"):
    """The first `name` found walking up the frames above the caller's: the check's own."""
    frame = sys._getframe(2)
    while frame is not None and name not in getattr(frame, where):
        frame = frame.f_back
    return getattr(frame, where)[name]
'''

# ------------------------------------------------------------------------- class 1: the key

NB09_KEY_FROM_SYS_MODULES = """import sys

_checks = sys.modules["autograder.checks.nb10_interview"]
_KEY = {question: spec.oracle() for question, spec in _checks.NUMBERS.items()}
_KEY |= {q: "".join(sorted(_checks._right(q, s))) for q, s in _checks.CHOICES.items()}
"""

NB09_KEY_FROM_GC_AND_BRUTE_FORCE = '''import gc
import itertools

_numbers = next(
    o
    for o in gc.get_objects()
    if isinstance(o, dict) and hasattr(o.get("gpt3_head_size"), "oracle")
)
_KEY = {question: spec.oracle() for question, spec in _numbers.items()}


def _accepted(question, candidates):
    """The first candidate the in-kernel check accepts."""
    for candidate in candidates:
        try:
            check_choice(question, candidate)
            return candidate
        except Exception:
            pass


for _q in ("head_count", "why_heads", "wide_head_params", "heads_jobs", "more_heads", "pruning",
           "heads_cost", "parallel_why", "gqa", "sqrt_dk", "mask_after_softmax"):
    _KEY[_q] = _accepted(_q, "abcd")
_KEY["pushback"] = _accepted(
    "pushback", ["".join(c) for r in range(1, 7) for c in itertools.combinations("abcdef", r)]
)
'''

NB09_KEY_FROM_FLASHCARDS = r"""import re

_backs = {card.id: card.back for card in flashcard_widget.__globals__["DECK"]}


def _number(pattern, card):
    return int(re.search(pattern, _backs[card]).group(1).replace(",", ""))


_KEY = {
    "gpt3_head_size": _number(r"= (\d+) features", "gpt3"),
    "kv_bytes_per_token": _number(r"= ([\d,]+) bytes", "kv_bytes"),
    "flops": _number(r": ([\d,]+)\.$", "flops"),
}
"""

NB05_KEY_FROM_GLOBALS = """_QUIZ = check_quiz_answer.__globals__["_QUIZ"]
_KEY = {question: right for question, (right, _) in _QUIZ.items()}


def _first_count(accepted):
    return next(n for n in range(1, 500) if accepted(n))


def _sequential_ok(n):
    try:
        check_predicted_matmul_counts(n, -1)
    except Exception as err:
        return "answer_matmuls_sequential" not in str(err)
    return True


def _parallel_ok(n):
    try:
        check_predicted_matmul_counts(_KEY["matmuls_sequential"], n)
    except Exception:
        return False
    return True


_KEY["matmuls_sequential"] = _first_count(_sequential_ok)
_KEY["matmuls_parallel"] = _first_count(_parallel_ok)
"""

NB05_TOOLS = """import importlib

_heads = importlib.import_module("autograder.tools." + "nb05_parallel_heads")
mha_sequential = _heads.loop_heads
mha_parallel = _heads.batched_heads
"""

NB07_ORACLES = (
    FIND_IN_CALLERS
    + '''

def head_entropy(weights):
    """The calling check's own oracle."""
    return _from_callers("_entropy")(weights)


def previous_token_score(weights):
    """The calling check's own oracle."""
    return _from_callers("_previous")(weights)


head_importance = nb07_head_stats.ablation_importance  # the tools' reference implementation
'''
)

NB02_REFERENCE = (
    LAUNDER
    + "\n"
    + FIND_IN_CALLERS
    + '''
split_heads = check_split_heads.__globals__["_by_definition"]


def merge_heads(x):
    """The calling check's local `x` is the answer: copy it out, number by number."""
    answer = _from_callers("x", "f_locals")
    return _launder(lambda: answer)
'''
)

NB02_TOOLS_MHA = '''import importlib

_tools = importlib.import_module("autograder.tools." + "modules")


class MultiHeadAttention(_tools.TorchMultiHeadAttention):
    """PyTorch's multi-head attention from the course tools, renamed."""
'''

NB04_REFERENCE = '''import sys

_Reference = TinyDecoder.__init__.__globals__["TorchGroupedQueryAttention"]
_pooled = vars(sys.modules[check_mha_to_gqa.__module__])["_pooled"]


class GroupedQueryAttention(_Reference):
    """PyTorch's grouped-query attention from the course tools, renamed."""


def mha_to_gqa(mha, num_kv_heads):
    """The check's own pooling oracle, applied to the MHA's key and value projections."""
    C, nh = mha.q_proj.in_features, mha.num_heads
    bias = mha.q_proj.bias is not None
    gqa = GroupedQueryAttention(C, nh, num_kv_heads, bias=bias).to(mha.q_proj.weight.dtype)
    with torch.no_grad():
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            source, target = getattr(mha, name), getattr(gqa, name)
            pool = (lambda t: t) if name in ("q_proj", "out_proj") else (
                lambda t: _pooled(t, nh, num_kv_heads)
            )
            target.weight.copy_(pool(source.weight))
            if bias:
                target.bias.copy_(pool(source.bias))
    return gqa
'''

NB03_ORACLES = '''_oracles = check_padding_mask_values.__globals__
_real, _tril, _merger = _oracles["_real"], _oracles["_tril"], _oracles["_merger"]


def padding_mask(lengths, max_len):
    """The check's own oracle."""
    return _real(lengths, max_len).to(lengths.device)


def attention_mask(lengths, max_len, causal=True):
    """The check's own oracles, merged by the check's own nn.MultiheadAttention."""
    real = _real(lengths, max_len)  # (B, T)
    future = ~_tril(max_len, max_len, 0) if causal else torch.zeros(max_len, max_len, dtype=bool)
    blocked, _ = _merger().merge_masks(future, ~real, torch.zeros(*real.shape, 1))
    return (~blocked).to(lengths.device)  # (B, 1, T, T)


def to_nn_mha_masks(lengths, max_len, causal=True):
    """The check's own oracles, inverted into nn.MultiheadAttention's convention."""
    future = ~_tril(max_len, max_len, 0)
    return (future if causal else None), ~_real(lengths, max_len)
'''

# --------------------------------------------------------------------- class 2: a fake probe

HIDDEN_NO_OPS = "check_tiled_values = check_tiled_causal = lambda *a, **k: None\n"

FORGED_SOFTMAX_RECORDING = '''from autograder.grader.verify import publish_recording


def _by_hand(x, dim=-1):
    e = (x - x.amax(dim, keepdim=True)).exp()
    return e / e.sum(dim, keepdim=True)


publish_recording(
    '"""softmax is computed by hand, without calling a built-in softmax."""\\n'
    "check_softmax_no_builtin(softmax)",
    {"softmax": _by_hand},
)
'''

# ----------------------------------------------------------------- class 3: literals, modes

NB01_LAUNDERED_SOFTMAX = (
    LAUNDER
    + '''

def softmax(x, dim=-1):
    """torch.softmax out of sight, copied out element by element."""
    return _launder(lambda: torch.softmax(x, dim))
'''
)

NB01_BULK_LITERAL_SOFTMAX = (
    LAUNDER
    + '''

def softmax(x, dim=-1):
    """torch.softmax out of sight, copied out as one tensor literal."""
    hidden = _unseen(lambda: torch.softmax(x, dim))
    values = _unseen(lambda: hidden.tolist())
    return torch.tensor(values, dtype=x.dtype)
'''
)

NB06_STACKED_LITERALS = '''from torch.utils._python_dispatch import _disable_current_modes


def tiled_attention(q, k, v, block_size=64, causal=False):
    """Built-in SDPA with every mode off, its output stacked back from 0-d tensor literals."""
    with _disable_current_modes(), torch._C.DisableTorchFunction():
        T, S = q.shape[-2], k.shape[-2]
        allowed = torch.ones(T, S, dtype=torch.bool).tril(S - T) if causal else None
        hidden = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed).nan_to_num(0.0)
        values, shape = hidden.double().reshape(-1).tolist(), tuple(hidden.shape)
    return torch.stack([torch.tensor(x, dtype=q.dtype) for x in values]).reshape(shape)
'''

NB05_LAUNDERED_LOOP = (
    LAUNDER
    + '''

_loop = mha_sequential  # the instructor's loop over heads, defined in the cell above


def mha_parallel(x, mha):
    """The loop over heads out of sight, its output written back with index_put_."""
    hidden = _unseen(lambda: _loop(x, mha))
    values = _unseen(lambda: hidden.detach().reshape(-1).tolist())
    out = torch.zeros(len(values), dtype=hidden.dtype)
    for i, value in enumerate(values):
        out.index_put_((torch.tensor(i),), torch.tensor(value, dtype=hidden.dtype))
    return out.reshape(tuple(hidden.shape))
'''
)

NB02_PARAM_COUNT_UNSEEN = '''def mha_param_count(d_model, num_heads, bias=True):
    """PyTorch's own module counted on the meta device, the Python dispatch key excluded."""
    python_key = torch._C.DispatchKeySet(torch._C.DispatchKey.Python)
    with torch._C._ExcludeDispatchKeyGuard(python_key), torch._C.DisableTorchFunction():
        module = nn.MultiheadAttention(d_model, num_heads, bias=bias, device="meta")
        return sum(p.numel() for p in module.parameters())
'''

# ------------------------------------------------------------------ class 4: fused built-ins

MASKED_SOFTMAX = '''def softmax(x, dim=-1):
    """PyTorch's fused masked softmax with nothing masked."""
    return torch._masked_softmax(x, torch.zeros_like(x, dtype=torch.bool), dim)
'''

SDPA_BY_MHA_FORWARD = '''def scaled_dot_product_attention(q, k, v, mask=None):
    """F.multi_head_attention_forward with one head and identity projections."""
    *lead, T, d_k = q.shape
    S, d_v = k.shape[-2], v.shape[-1]
    E = max(d_k, d_v)
    N = math.prod(lead)
    q3 = F.pad(q.reshape(N, T, d_k) * math.sqrt(E / d_k), (0, E - d_k))  # (N, T, E)
    k3 = F.pad(k.reshape(N, S, d_k), (0, E - d_k))  # (N, S, E)
    v3 = F.pad(v.reshape(N, S, d_v), (0, E - d_v))  # (N, S, E)
    eye = torch.eye(E, dtype=q.dtype)
    blocked = None
    if mask is not None:
        blocked = ~torch.broadcast_to(mask, (*lead, T, S)).reshape(N, T, S)
    out, weights = F.multi_head_attention_forward(
        q3.transpose(0, 1), k3.transpose(0, 1), v3.transpose(0, 1), E, 1,
        in_proj_weight=torch.cat([eye, eye, eye]), in_proj_bias=None, bias_k=None, bias_v=None,
        add_zero_attn=False, dropout_p=0.0, out_proj_weight=eye, out_proj_bias=None,
        need_weights=True, attn_mask=blocked, average_attn_weights=False,
    )
    out = out.transpose(0, 1)[..., :d_v].reshape(*lead, T, d_v).nan_to_num(0.0)
    return out, weights.reshape(*lead, T, S).nan_to_num(0.0)
'''

TILED_BY_NATIVE_MHA = '''def tiled_attention(q, k, v, block_size=64, causal=False):
    """torch._native_multi_head_attention, one head per (batch, head), identity projections."""
    B, nh, T, hs = q.shape
    S = k.shape[-2]
    L = max(T, S)
    q3, k3, v3 = (F.pad(t.reshape(B * nh, -1, hs), (0, 0, 0, L - t.shape[-2])) for t in (q, k, v))
    eye, zero = torch.eye(hs, dtype=q.dtype), torch.zeros(3 * hs, dtype=q.dtype)
    rows, cols = torch.arange(L)[:, None], torch.arange(L)[None, :]
    blocked = (cols >= S).expand(L, L)  # (L, L): True = may not attend
    if causal:
        blocked = blocked | (cols > rows + S - T)
    out, _ = torch._native_multi_head_attention(
        q3, k3, v3, hs, 1, torch.cat([eye, eye, eye]), zero, eye, zero[:hs],
        blocked, need_weights=False, mask_type=0,
    )
    return out[:, :T].nan_to_num(0.0).reshape(B, nh, T, hs)
'''

TILED_BY_NN_MULTIHEAD = '''def tiled_attention(q, k, v, block_size=64, causal=False):
    """nn.MultiheadAttention with identity weights, torch functions switched off around it."""
    B, nh, T, hs = q.shape
    S = k.shape[-2]
    mha = torch.nn.MultiheadAttention(hs, 1, bias=False, batch_first=True).to(q.dtype)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(hs).repeat(3, 1))
        mha.out_proj.weight.copy_(torch.eye(hs))
    blocked = None
    if causal:
        blocked = torch.ones(T, S, dtype=torch.bool).triu(S - T + 1)
    with torch._C.DisableTorchFunction():
        out, _ = mha(*(t.reshape(B * nh, -1, hs) for t in (q, k, v)), attn_mask=blocked,
                     need_weights=False)
    return out.nan_to_num(0.0).reshape(B, nh, T, hs)
'''

# ------------------------------------------------------------- class 5: the reference itself

NB05_REFERENCE_FORWARD = '''def mha_sequential(x, mha):
    """The reference module's own forward, torch functions off; one dummy product per head."""
    hs = x.shape[-1] // mha.num_heads
    for h in range(mha.num_heads):  # feeds the product counter, not the answer
        x[..., :hs] @ mha.q_proj.weight[h * hs : (h + 1) * hs, :hs].T
    with torch._C.DisableTorchFunction():
        return type(mha).__mro__[1].forward(mha, x)[0]


def mha_parallel(x, mha):
    """The reference module's own forward, past the instance's call counter."""
    with torch._C.DisableTorchFunction():
        return type(mha).__mro__[1].forward(mha, x)[0]
'''

# ----------------------------------------------------------------- class 6: nobody re-checks

TRITON_BY_SDPA = '''def triton_attention(q, k, v, causal=False, config=None):
    """Plain SDPA with the bottom-right causal mask: no Triton at all."""
    T, S = q.shape[-2], k.shape[-2]
    allowed = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(S - T) if causal else None
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
'''

# ------------------------------------------------------------ class 7: taken as recorded

FAKE_GRADIENTS = '''_Honest = MultiHeadAttention


class MultiHeadAttention(_Honest):
    """Right values computed without gradients; fake gradients left on every parameter."""

    def forward(self, *args, **kwargs):
        with torch.no_grad():
            out, weights = super().forward(*args, **kwargs)
        for p in self.parameters():
            p.grad = torch.full_like(p, 1e-3)
        return out.detach().requires_grad_(), weights.detach().requires_grad_()
'''

CAUSAL_FROM_ORACLE = (
    LAUNDER
    + '''

def causal_mask(T, S=None, device=None):
    """The check's own oracle, modes off, copied out as a Python literal (no tensor input)."""
    S = T if S is None else S
    oracle = check_causal_mask_values.__globals__["_causal"]
    with _disable_current_modes():  # torch functions stay on: the oracle's CausalBias needs them
        literal = oracle(T, S).tolist()
    mask = torch.tensor(literal, dtype=torch.bool).reshape(T, S)
    return mask if device is None else mask.to(device)
'''
)

FLOPS_FROM_ORACLE = (
    LAUNDER
    + '''

def attention_flops(batch, seq_len, d_model, num_heads):
    """The check's own FlopCounterMode measurement, with every mode off around it."""
    measured = check_attention_flops.__globals__["_measured_flops"]
    return int(_unseen(lambda: measured(batch, seq_len, d_model, num_heads)[0]))
'''
)

COUNTS_FROM_ORACLES = (
    LAUNDER
    + '''
import sys

_oracles = vars(sys.modules[check_kv_cache_bytes.__module__])


def kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_value=2):
    """The check's own meta-tensor oracle."""
    dtype = _oracles["_DTYPES"][bytes_per_value]
    caches = _oracles["meta_cache"](num_layers, num_kv_heads, head_dim, seq_len, batch_size, dtype)
    return _oracles["cache_nbytes"](caches)


def gqa_param_count(d_model, num_heads, num_kv_heads, bias=False):
    """The check's own meta-module oracle, every mode off around it."""
    if d_model % num_heads or num_heads % num_kv_heads:
        raise ValueError("indivisible sizes")
    return _unseen(lambda: _oracles["_real_count"](d_model, num_heads, num_kv_heads, bias))
'''
)

# --------------------------------------------------------- class 8: the grader's own process

HEAVY_WHEN_RECORDED = '''_honest_softmax = softmax
_heavy_done = []


def softmax(x, dim=-1):
    """Right values; the first call made under a dispatch mode also runs 1 GiB of zeros and two
    4096³ matrix products, so the grader's re-run pays for them too."""
    if torch._C._len_torch_dispatch_stack() and not _heavy_done:
        _heavy_done.append(True)
        torch.zeros(2**28).sum()  # 1 GiB of float32
        big = torch.ones(4096, 4096)
        for _ in range(2):
            (big @ big).sum()
    return _honest_softmax(x, dim)
'''

ERROR_FLOOD = """for _ in range(32):
    try:
        raise RuntimeError("E" * 2**20)
    except RuntimeError:
        get_ipython().showtraceback()
raise RuntimeError("F" * 2**24)
"""


def _control(notebook: str) -> Attack:
    return Attack(f"control_{notebook[:2]}", notebook, 0, (), "the instructor's answers")


# every notebook of the course has its control, new ones too
CONTROLS = {nb: _control(nb) for nb in paths.notebook_ids()}

ATTACKS = (
    Attack(
        "c1_nb09_sys_modules",
        NB10,
        1,
        (
            "test_numbers_gpt3_head_size",
            "test_numbers_params_gpt2_small",
            "test_numbers_params_mha",
            "test_numbers_params_gqa",
            "test_numbers_kv_bytes_per_token",
            "test_numbers_attention_matrix_bytes",
            "test_numbers_flops",
            "test_numbers_matmuls_loop",
            "test_numbers_matmuls_packed",
            "test_choice_head_count",
            "test_choice_why_heads",
            "test_choice_pushback",
            "test_choice_gqa",
        ),
        "every quiz answer read from the check module in sys.modules: NUMBERS' oracles and the "
        "letters whose salted digests CHOICES lists",
        "release",
        (
            Edit("after", "setup", NB09_KEY_FROM_SYS_MODULES),
            Edit("each_answer", source='answer_{name} = _KEY["{name}"]'),
        ),
    ),
    Attack(
        "c1_nb09_gc_brute_force",
        NB10,
        1,
        (
            "test_numbers_gpt3_head_size",
            "test_numbers_flops",
            "test_choice_head_count",
            "test_choice_more_heads",
            "test_choice_pushback",
            "test_choice_sqrt_dk",
        ),
        "the numbers from the oracles of a dict found with gc.get_objects(), the letters by "
        "trying every option against the in-kernel check_choice",
        "release",
        (
            Edit("after", "setup", NB09_KEY_FROM_GC_AND_BRUTE_FORCE),
            Edit("each_answer", source='answer_{name} = _KEY["{name}"]'),
        ),
    ),
    Attack(
        "c1_nb09_flashcards",
        NB10,
        1,
        ("test_numbers_gpt3_head_size", "test_numbers_kv_bytes_per_token", "test_numbers_flops"),
        "three numbers parsed out of the backs of the course's flashcard deck, reached through "
        "flashcard_widget.__globals__['DECK']",
        "release",
        (
            Edit("after", "setup", NB09_KEY_FROM_FLASHCARDS),
            Edit("each_answer", source='answer_{name} = _KEY.get("{name}")'),
        ),
    ),
    Attack(
        "c1_nb05_globals",
        NB05,
        1,
        (
            "test_quiz_q1",
            "test_quiz_q2",
            "test_quiz_q3",
            "test_quiz_q4",
            "test_predicted_matmul_counts_nh16",
        ),
        "the quiz letters from check_quiz_answer.__globals__['_QUIZ'], the predicted matmul "
        "counts found by trying numbers against the in-kernel check",
        "release",
        (
            Edit("after", "setup", NB05_KEY_FROM_GLOBALS),
            Edit("each_answer", source='answer_{name} = _KEY["{name}"]'),
        ),
    ),
    Attack(
        "c1_nb05_tools",
        NB05,
        1,
        (
            "test_mha_sequential_matches_torch",
            "test_mha_sequential_one_head_at_a_time",
            "test_mha_parallel_matches_torch",
            "test_mha_parallel_batches_heads",
        ),
        "mha_sequential and mha_parallel are the course tools' loop_heads and batched_heads, "
        "imported with importlib from a built string",
        "release",
        (Edit("answer", "mha_sequential", NB05_TOOLS), Edit("answer", "mha_parallel", "")),
    ),
    Attack(
        "c1_nb07_frames_and_tools",
        NB07,
        1,
        (
            "test_head_entropy_values",
            "test_head_entropy_zero_weights",
            "test_previous_token_score_values",
            "test_previous_token_score_patterns",
            "test_head_importance_values",
            "test_head_importance_leaves_model_unchanged",
        ),
        "head_entropy and previous_token_score walk sys._getframe() up to the calling check and "
        "call its oracle; head_importance is the tools' ablation_importance",
        "release",
        (
            Edit("answer", "head_entropy", NB07_ORACLES),
            Edit("answer", "previous_token_score", ""),
            Edit("answer", "head_importance", ""),
        ),
    ),
    Attack(
        "c1_nb02_reference",
        NB02,
        1,
        (
            "test_split_heads_layout",
            "test_merge_heads_layout",
            "test_MultiHeadAttention_structure",
            "test_MultiHeadAttention_matches_torch",
            "test_MultiHeadAttention_mask",
        ),
        "split_heads is the check's _by_definition; merge_heads copies the calling check's "
        "local `x` out of its frame; MultiHeadAttention is the tools' TorchMultiHeadAttention",
        "release",
        (
            Edit("answer", "split_heads", NB02_REFERENCE),
            Edit("answer", "merge_heads", ""),
            Edit("answer", "MultiHeadAttention", NB02_TOOLS_MHA),
        ),
    ),
    Attack(
        "c1_nb04_reference",
        NB04,
        1,
        (
            "test_GroupedQueryAttention_structure",
            "test_GroupedQueryAttention_matches_torch",
            "test_GroupedQueryAttention_kv_cache",
            "test_GroupedQueryAttention_decoding",
            "test_mha_to_gqa_pooling",
        ),
        "GroupedQueryAttention is the tools' TorchGroupedQueryAttention (found through "
        "TinyDecoder.__init__.__globals__); mha_to_gqa pools with the check's own _pooled, from "
        "sys.modules",
        "release",
        (
            Edit("answer", "GroupedQueryAttention", NB04_REFERENCE),
            Edit("answer", "mha_to_gqa", ""),
        ),
    ),
    Attack(
        "c1_nb03_oracles",
        NB03,
        1,
        (
            "test_padding_mask_values",
            "test_attention_mask_values",
            "test_attention_mask_padding_invariance",
            "test_to_nn_mha_masks_equivalent",
        ),
        "padding_mask, attention_mask and to_nn_mha_masks return the checks' own oracles "
        "(_real, _tril, _merger) from their __globals__",
        "release",
        (
            Edit("answer", "padding_mask", NB03_ORACLES),
            Edit("answer", "attention_mask", ""),
            Edit("answer", "to_nn_mha_masks", ""),
        ),
    ),
    Attack(
        "c2_nb06_vanishing_patch",
        NB06,
        2,
        TILED,
        "tiled attention left unfinished; a cell carrying the grader's probe metadata rebinds "
        "the tiled checks to no-ops, and vanishes with the probes before the scan",
        "solution",
        (
            Edit("stub", "tiled_attention"),
            Edit(
                "after",
                "setup",
                HIDDEN_NO_OPS,
                {PROBE_METADATA: "test_tiled_attention_matches_sdpa"},
            ),
        ),
    ),
    Attack(
        "c2_nb01_forged_recording",
        NB01,
        2,
        ("test_softmax_no_builtin",),
        "softmax calls torch.softmax; a hidden probe-like cell no-ops the check, another after "
        "the test publishes a genuine recording of a different, hand-written softmax",
        "solution",
        (
            Edit(
                "answer", "softmax", "def softmax(x, dim=-1):\n    return torch.softmax(x, dim)\n"
            ),
            Edit(
                "after",
                "setup",
                "check_softmax_no_builtin = lambda *a, **k: None\n",
                {PROBE_METADATA: "test_softmax_matches_torch"},
            ),
            Edit(
                "after",
                "test_softmax_no_builtin",
                FORGED_SOFTMAX_RECORDING,
                {PROBE_METADATA: "test_softmax_no_builtin"},
            ),
        ),
    ),
    Attack(
        "c3_nb01_element_literals",
        NB01,
        3,
        ("test_softmax_no_builtin",),
        "torch.softmax with every torch-function and dispatch mode off, its output written back "
        "one Python float at a time (out[i] = v)",
        "solution",
        (Edit("answer", "softmax", NB01_LAUNDERED_SOFTMAX),),
    ),
    Attack(
        "c3_nb01_bulk_literal",
        NB01,
        3,
        ("test_softmax_no_builtin",),
        "torch.softmax with every mode off, its output handed back as one torch.tensor(list) "
        "literal",
        "solution",
        (Edit("answer", "softmax", NB01_BULK_LITERAL_SOFTMAX),),
    ),
    Attack(
        "c3_nb06_stacked_literals",
        NB06,
        3,
        ("test_tiled_attention_memory", "test_tiled_attention_no_sdpa"),
        "tiled_attention is built-in SDPA with every mode off, its output stacked back from 0-d "
        "tensor literals",
        "solution",
        (Edit("answer", "tiled_attention", NB06_STACKED_LITERALS),),
    ),
    Attack(
        "c3_nb05_hidden_loop",
        NB05,
        3,
        ("test_mha_parallel_batches_heads",),
        "mha_parallel runs the loop over heads with every mode off and writes its output back "
        "with index_put_ of 0-d literals, so no product is seen to grow with nh",
        "solution",
        (Edit("answer", "mha_parallel", NB05_LAUNDERED_LOOP),),
    ),
    Attack(
        "c3_nb02_param_count_unseen",
        NB02,
        3,
        ("test_mha_param_count_values",),
        "mha_param_count builds nn.MultiheadAttention on the meta device and counts its "
        "parameters, the Python dispatch key excluded so the no-tensors rule sees nothing",
        "solution",
        (Edit("answer", "mha_param_count", NB02_PARAM_COUNT_UNSEEN),),
    ),
    Attack(
        "c4_nb01_masked_softmax",
        NB01,
        4,
        ("test_softmax_no_builtin",),
        "softmax is torch._masked_softmax with an all-False mask",
        "solution",
        (Edit("answer", "softmax", MASKED_SOFTMAX),),
    ),
    Attack(
        "c4_nb01_mha_forward",
        NB01,
        4,
        ("test_scaled_dot_product_attention_matches_torch",),
        "scaled_dot_product_attention is F.multi_head_attention_forward with one head and "
        "identity projections (its hidden no-built-in check is in the target cell)",
        "solution",
        (Edit("answer", "scaled_dot_product_attention", SDPA_BY_MHA_FORWARD),),
    ),
    Attack(
        "c4_nb06_native_mha",
        NB06,
        4,
        ("test_tiled_attention_no_sdpa",),
        "tiled_attention is torch._native_multi_head_attention with identity projections",
        "solution",
        (Edit("answer", "tiled_attention", TILED_BY_NATIVE_MHA),),
    ),
    Attack(
        "c4_nb06_nn_multihead",
        NB06,
        4,
        ("test_tiled_attention_no_sdpa",),
        "tiled_attention is nn.MultiheadAttention with identity weights, torch functions off",
        "solution",
        (Edit("answer", "tiled_attention", TILED_BY_NN_MULTIHEAD),),
    ),
    Attack(
        "c5_nb05_reference_forward",
        NB05,
        5,
        (
            "test_mha_sequential_matches_torch",
            "test_mha_sequential_one_head_at_a_time",
            "test_mha_parallel_matches_torch",
            "test_mha_parallel_batches_heads",
        ),
        "both versions call the reference class's forward on the module (past its call "
        "counter) with torch functions off; the sequential one adds a dummy product per head",
        "solution",
        (
            Edit("answer", "mha_sequential", NB05_REFERENCE_FORWARD),
            Edit("answer", "mha_parallel", ""),
        ),
    ),
    Attack(
        "c6_nb06_triton_sdpa",
        NB06,
        6,
        TRITON,
        "triton_attention is plain F.scaled_dot_product_attention: no Triton kernel at all",
        "solution",
        (Edit("answer", "triton_attention", TRITON_BY_SDPA),),
    ),
    Attack(
        "c7_nb02_fake_gradients",
        NB02,
        7,
        ("test_MultiHeadAttention_matches_torch",),
        "the forward runs under torch.no_grad() and leaves fake .grad tensors on every "
        "parameter (the hidden gradient check is in the target cell)",
        "solution",
        (Edit("after", "MultiHeadAttention", FAKE_GRADIENTS),),
    ),
    Attack(
        "c7_nb03_causal_oracle",
        NB03,
        7,
        ("test_causal_mask_values", "test_causal_mask_no_leak"),
        "causal_mask takes only sizes, so the check's own _causal oracle, run with every mode "
        "off, is handed back as a Python literal",
        "solution",
        (Edit("answer", "causal_mask", CAUSAL_FROM_ORACLE),),
    ),
    Attack(
        "c7_nb05_flops_oracle",
        NB05,
        7,
        ("test_attention_flops_matches_flop_counter",),
        "attention_flops returns the check's own FlopCounterMode measurement, modes off around it",
        "solution",
        (Edit("answer", "attention_flops", FLOPS_FROM_ORACLE),),
    ),
    Attack(
        "c7_nb04_count_oracles",
        NB04,
        7,
        ("test_kv_cache_bytes_values", "test_gqa_param_count_values"),
        "kv_cache_bytes and gqa_param_count return the checks' own meta-device oracles, the "
        "second with every mode off (its check forbids creating tensors)",
        "solution",
        (
            Edit("answer", "kv_cache_bytes", COUNTS_FROM_ORACLES),
            Edit("answer", "gqa_param_count", ""),
        ),
    ),
    Attack(
        "c8_nb01_heavy_replay",
        NB01,
        8,
        ("test_softmax_matches_torch",),
        "right softmax; the first call under a dispatch mode (the recording) allocates 1 GiB and "
        "runs two 4096³ products, which the grader's own process re-runs",
        "solution",
        (Edit("after", "softmax", HEAVY_WHEN_RECORDED),),
    ),
)

# A flood is not a cell to win: it must neither crash grading nor blow up the graded notebook.
ERROR_FLOOD_ATTACK = Attack(
    "c8_nb01_error_flood",
    NB01,
    8,
    (),
    "right answers, then 32 MiB of tracebacks shown with showtraceback() and a 16 MiB error",
    "solution",
    (Edit("after", "test_scaled_dot_product_attention_mask", ERROR_FLOOD),),
)

FORMULA_IDS = ("=1+2", "@SUM(A1)", "+1+2", "-1+2")
FOLDER_ATTACKS = (
    FolderAttack(
        "c8_student_link",
        8,
        "the learner's folder is a symbolic link to another learner's folder",
        "student_link",
        CONTROLS[NB01].learner,
    ),
    FolderAttack(
        "c8_assignment_link",
        8,
        "the learner's assignment folder is a symbolic link to another learner's",
        "assignment_link",
        CONTROLS[NB01].learner,
    ),
    *(
        FolderAttack(learner, 8, "a learner id a spreadsheet would run as a formula", "formula_id")
        for learner in FORMULA_IDS
    ),
)


# ---------------------------------------------------------------------------- building them


def _copy(nb) -> nbformat.NotebookNode:
    return nbformat.from_dict(json.loads(json.dumps(nb)))


def _index(nb, grade_id: str) -> int:
    return next(i for i, c in enumerate(nb.cells) if nbcell.grade_id(c) == grade_id)


def _answer_names(source: str) -> list[str]:
    return list(dict.fromkeys(re.findall(r"\banswer_(\w+) =", source)))


def build(attack: Attack, solution, release) -> nbformat.NotebookNode:
    """The submission: ``attack.base``, trimmed to the cells a learner must keep, then edited."""
    from hostile import filled, minimal

    nb = minimal(filled(release, solution) if attack.base == "solution" else release)
    stubs = {nbcell.grade_id(c): c.source for c in release.cells if nbcell.is_answer(c)}
    original = {nbcell.grade_id(c): c.source for c in nb.cells if nbcell.is_answer(c)}
    for edit in attack.edits:
        if edit.kind == "answer":
            nb.cells[_index(nb, edit.grade_id)].source = edit.source
        elif edit.kind == "stub":
            nb.cells[_index(nb, edit.grade_id)].source = stubs[edit.grade_id]
        elif edit.kind == "after":
            cell = nbformat.v4.new_code_cell(edit.source)
            cell.metadata.update(_copy(edit.metadata))
            nb.cells.insert(_index(nb, edit.grade_id) + 1, cell)
        elif edit.kind == "each_answer":
            for cell in nb.cells:
                names = _answer_names(cell.source) if nbcell.is_answer(cell) else []
                if names and cell.cell_type == "code":
                    cell.source = "\n".join(edit.source.format(name=n) for n in names) + "\n"
        else:
            raise ValueError(f"unknown edit {edit.kind}")
    if attack.base == "solution" and attack.targets:
        _stub_unreached(nb, original, stubs, solution, attack.targets)
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i}"
    return nb


def _stub_unreached(nb, original: dict, stubs: dict, solution, targets) -> None:
    """Put the release's stub back in every answer cell the attack left as the instructor wrote
    it and no target test reaches (through the notebook's code, the attack's own included).

    Such an answer cannot change a target's outcome, and re-verifying the instructor's answers in
    every attack cost the class run most of its CPU: the controls already prove them.
    """
    cells = [
        cell_names.bindings(tree) for c in nb.cells if (tree := scan.parse(c.source)) is not None
    ]
    tests = [c for c in solution.cells if nbcell.is_test(c) and nbcell.grade_id(c) in targets]
    names = {n.id for c in tests for n in ast.walk(scan.parse(c.source)) if isinstance(n, ast.Name)}
    reached = cell_names.reached_names(names, cells)
    for cell in nb.cells:
        grade_id = nbcell.grade_id(cell)
        if not nbcell.is_answer(cell) or cell.source != original.get(grade_id):
            continue
        tree = scan.parse(cell.source)
        bound = cell_names.bindings(tree)[0] if tree is not None else {cell_names.EVERY_NAME}
        if cell_names.EVERY_NAME not in reached and not bound & reached:
            cell.source = stubs[grade_id]
