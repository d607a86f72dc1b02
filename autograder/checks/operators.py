"""Which ATen operators a learner's code may run, per check: an allow-list, not a deny-list.

:data:`BY_HAND` holds what a solution written by hand needs: element-wise arithmetic (every
operator PyTorch tags *pointwise*), views and copies, reductions, matrix products, comparisons,
indexing, masks and factories. Fused operators (built-in softmax, attention kernels, native
multi-head attention, masked softmax, layer norms, ...) are in none of the groups, so a check
sees them only where a notebook adds them on purpose: :data:`SOFTMAX` (with the losses built
on it) everywhere, since notebook 01's own rules name it; :data:`SDPA` where PyTorch's attention
is allowed (every operator it runs that a by-hand solution never does, ``_safe_softmax``
included: the rules that forbid PyTorch's attention read this list, :mod:`.measure`);
:data:`MODEL` where learner code runs the tiny transformer. A check module sets what its checks
allow in ``OPERATORS``; :data:`DEFAULT` otherwise.

A check judges operators, not overloads: ``aten::_softmax`` is one name whichever overload ran.
That holds for the torch functions the kernel says learner code called too (:func:`judge_claims`):
``torch.ops.aten._scaled_dot_product_attention_math.default(...)`` decomposes into allowed
operators before any dispatch mode sees it, but the call itself names the operator, and the
check's list judges it.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from autograder.kernel.codec import ReplayError
from autograder.kernel.recorder import MAX_FUNCTIONS
from autograder.torch_helpers import operator_packet

_VIEWS = """alias as_strided clone contiguous detach expand expand_as flatten lift_fresh
movedim narrow permute reshape select slice split split_with_sizes squeeze t transpose unbind
unflatten unsqueeze view view_as _unsafe_view _reshape_alias unfold chunk tensor_split diagonal
repeat repeat_interleave tile roll flip cat stack concat concatenate _to_copy to copy copy_
_copy_from _copy_from_and_resize resize_ empty_like zeros_like ones_like full_like rand_like
randn_like new_empty new_zeros new_ones new_full new_empty_strided masked_fill masked_fill_
where index index_select gather scatter scatter_add index_put index_put_ index_add index_copy
masked_scatter masked_select nonzero take take_along_dim fill fill_ zero_ tril triu tril_
triu_ set_ _local_scalar_dense item lift _has_compatible_shallow_copy_type numpy_T mT mH
adjoint embedding embedding_dense_backward one_hot floor_divide remainder fmod searchsorted
bucketize unique_consecutive _unique2 bincount histc meshgrid broadcast_to atleast_2d unsqueeze_
squeeze_ transpose_ t_ as_strided_ detach_ index_fill index_fill_ scatter_ scatter_add_
gather_backward masked_scatter_ index_add_ index_copy_ put_ clamp_ copysign is_nonzero equal
is_same_size allclose isclose diag_embed diag polar complex view_as_complex view_as_real real
imag constant_pad_nd pad"""
_REDUCTIONS = """sum mean amax amin max min argmax argmin prod cumsum cumprod logsumexp var std
var_mean std_mean norm linalg_vector_norm all any count_nonzero sort argsort topk kthvalue
median nansum nanmean aminmax sum_to_size"""
_PRODUCTS = """mm bmm addmm baddbmm addbmm matmul dot vdot mv addmv outer ger einsum linear
tensordot _unsafe_view"""
_FACTORIES = """zeros ones full empty empty_strided arange linspace eye scalar_tensor rand randn
randint randperm normal normal_ uniform_ bernoulli bernoulli_ _to_dense tensor"""
_GRADIENTS = """threshold_backward sigmoid_backward tanh_backward _softmax_backward_data
_log_softmax_backward_data"""
# They pick a dtype and compute nothing: float32 accumulators that keep float64 as float64 (what
# gradcheck needs) are written with them.
_DTYPES = """promote_types result_type can_cast"""
_LOSSES = """nll_loss_forward nll_loss_backward nll_loss nll_loss2d_forward mse_loss
cross_entropy_loss mse_loss_backward binary_cross_entropy"""


def _names(text: str) -> frozenset[str]:
    return frozenset(f"aten::{n}" for n in text.split())


def _pointwise() -> frozenset[str]:
    names = set()
    for name in dir(torch.ops.aten):
        packet = getattr(torch.ops.aten, name, None)
        if not isinstance(packet, torch._ops.OpOverloadPacket):
            continue
        for overload in packet.overloads():
            if torch.Tag.pointwise in getattr(packet, overload).tags:
                names.add(f"aten::{name}")
                break
    return frozenset(names)


BY_HAND = _pointwise() | _names(
    " ".join((_VIEWS, _REDUCTIONS, _PRODUCTS, _FACTORIES, _GRADIENTS, _DTYPES))
)
SOFTMAX = _names("_softmax _log_softmax softmax log_softmax " + _LOSSES)
# ``_safe_softmax`` is the softmax of SDPA's math backend (rows with no allowed key give zeros),
# reached from nothing a learner writes by hand: where SDPA is not allowed, neither is it.
SDPA = _names(
    """scaled_dot_product_attention _scaled_dot_product_attention_math _safe_softmax
    _scaled_dot_product_flash_attention _scaled_dot_product_flash_attention_for_cpu
    _scaled_dot_product_efficient_attention _scaled_dot_product_cudnn_attention
    _scaled_dot_product_fused_attention_overrideable _fused_sdp_choice
    _scaled_dot_product_flash_attention_for_cpu_backward
    _scaled_dot_product_flash_attention_backward _scaled_dot_product_efficient_attention_backward
    _scaled_dot_product_cudnn_attention_backward _flash_attention_forward
    _efficient_attention_forward _flash_attention_backward _efficient_attention_backward"""
)
DEFAULT = BY_HAND | SOFTMAX
# What the tiny transformer of notebook 07 runs besides attention.
MODEL = _names(
    """native_layer_norm native_layer_norm_backward layer_norm native_dropout
    native_dropout_backward dropout gelu gelu_backward"""
)

# Fused kernels no check allows: named here only so that the refusal can say what they are.
FUSED = _names(
    """_masked_softmax _native_multi_head_attention _transformer_encoder_layer_fwd
    native_layer_norm layer_norm native_dropout _triton_multi_head_attention"""
)


def refuse_unless_allowed(allowed: frozenset[str], name: str) -> None:
    """Raise :class:`ReplayError` naming the operator ``name`` unless ``allowed`` lets it run."""
    if not allows(allowed, name):
        what = "a fused built-in" if name in FUSED | SDPA else "an operator"
        raise ReplayError(
            f"your code ran {what} this exercise does not allow ({name.removeprefix('aten::')})"
        )


def judge_claims(allowed: frozenset[str], functions: Iterable) -> None:
    """Refuse a call whose kernel reports calling an operator ``allowed`` does not hold, by any
    of its overloads (``torch._ops.aten._softmax.default``): see the module docstring."""
    for name in list(functions)[:MAX_FUNCTIONS]:
        packet = operator_packet(str(name)[:120])
        if packet is not None:
            refuse_unless_allowed(allowed, packet)


def allows(allowed: frozenset[str], name: str) -> bool:
    """Whether ``name`` may run: listed, or the backward pass of an operator that is.

    Backward operators (``select_backward``, ``native_layer_norm_backward``...) run when learner
    code calls ``.backward()``; each is allowed where its forward operator is.
    """
    if name in allowed:
        return True
    for suffix in ("_backward_data", "_backward"):
        if name.endswith(suffix):
            forward = name.removesuffix(suffix)
            return forward in allowed or forward.removeprefix("aten::") in _GRADIENT_ONLY
    return False


_GRADIENT_ONLY = {
    "select",
    "slice",
    "index_select",
    "diagonal",
    "as_strided",
    "unfold",
    "embedding_dense",
}
