"""Re-checking, outside the learner's kernel, what each passed test cell claims.

Learner code runs before the tests, in the same kernel: it can patch ``torch.allclose``, the
checks, or the test cells themselves. So after a test cell runs, the grader runs one more cell
that calls the learner's function on fixed inputs and sends the raw outputs back
(:func:`dump`); the trusted grader process regenerates the same inputs, computes PyTorch's
answer itself and compares (:func:`verify`). Patching anything in the kernel then gains nothing:
the only way to send correct outputs is to compute them.

A claim that is about *how* the result is computed ("no built-in softmax") cannot be re-checked
from values; it is re-checked statically on the answer cell's source (:func:`verify_static`).

This module holds the machinery; the claims of notebook ``NN`` live in ``claims_NN.py``, each
exposing ``claims() -> {test grade id: Claim}``.

Shape legend: ``T`` queries, ``S`` keys, ``d_k`` / ``d_v`` widths, ``...`` leading dimensions.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import json
import numbers
from collections.abc import Callable
from dataclasses import dataclass

import torch

MIME = "application/vnd.mha-verify+json"
ATOL, RTOL = 1e-4, 1e-3
MAX_ELEMENTS = 200_000


@dataclass(frozen=True)
class Claim:
    """What one test cell establishes about one graded function."""

    function: str  # the global of the learner's notebook that the claim is about
    cases: Callable[[], list[tuple]] | None = None  # fixed inputs: argument tuples, or `call`'s
    verify: Callable[[list[tuple], list], str | None] | None = None  # -> why it is false
    forbidden: tuple[str, ...] = ()  # names the answer cell must not use
    call: Callable[[Callable, tuple], object] | None = None  # in the kernel; None: fn(*case)


# ----------------------------------------------------------------------------- encoding


def encode(value) -> object:
    """A JSON-able image of a function's output: tensors become shape, dtype and values."""
    if isinstance(value, torch.Tensor):
        t = value.detach().to("cpu")
        if t.numel() > MAX_ELEMENTS:
            return {"type": "tensor too large", "shape": list(t.shape)}
        data = t.to(torch.float64).reshape(-1).tolist() if t.numel() else []
        return {"shape": list(t.shape), "dtype": str(t.dtype), "data": data}
    if isinstance(value, (tuple, list)):
        return {"tuple": [encode(v) for v in value]}
    if value is None:
        return {"none": True}
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, numbers.Integral):  # numpy integers too, as the checks accept them
        return {"int": int(value)}
    if isinstance(value, numbers.Real):
        return {"float": float(value)}
    return {"type": type(value).__name__}


def decode(obj) -> object:
    """The inverse of :func:`encode`, defensive: anything malformed becomes a string.

    Tensors come back as float64, except bool tensors, which stay bool (masks must be bool).
    """
    if not isinstance(obj, dict):
        return "malformed output"
    if "tuple" in obj and isinstance(obj["tuple"], list):
        return tuple(decode(v) for v in obj["tuple"])
    if "data" in obj:
        return _decode_tensor(obj)
    if obj.get("none") is True:
        return None
    for key, kind in (("bool", bool), ("int", int), ("float", float)):
        if key in obj:
            return obj[key] if type(obj[key]) is kind else "malformed number"
    if "error" in obj:
        return f"raised {str(obj['error'])[:200]}"
    return f"returned {obj.get('type', 'something else')}"


def _decode_tensor(obj: dict) -> torch.Tensor | str:
    try:
        shape = [int(n) for n in obj["shape"]]
        t = torch.tensor([float(x) for x in obj["data"]], dtype=torch.float64).reshape(shape)
    except (TypeError, ValueError, RuntimeError, KeyError):
        return "malformed tensor"
    if obj.get("dtype") != "torch.bool":
        return t
    if not ((t == 0) | (t == 1)).all():
        return "malformed tensor"
    return t.to(torch.bool)


# ----------------------------------------------------------------------------- in the kernel


def payload(notebook_id: str, grade_id: str, fn) -> str:
    """The claim's inputs run through ``fn``, encoded: what the kernel sends back."""
    claim = CLAIMS[notebook_id][grade_id]
    with _stock_defaults():
        cases = claim.cases()
    outputs = []
    for args in cases:
        try:
            outputs.append(encode(claim.call(fn, args) if claim.call else fn(*args)))
        except Exception as err:  # the trusted side decides what a failure means
            outputs.append({"error": f"{type(err).__name__}: {err}"[:300]})
    return json.dumps({"grade_id": grade_id, "outputs": outputs})


def dump(notebook_id: str, grade_id: str, namespace: dict) -> None:
    """In the kernel: publish the learner's function's outputs on the claim's inputs."""
    from IPython.display import publish_display_data

    fn = namespace.get(CLAIMS[notebook_id][grade_id].function)
    publish_display_data({MIME: payload(notebook_id, grade_id, fn)})


@contextlib.contextmanager
def _stock_defaults():
    """PyTorch's stock default dtype and device, so that both sides draw the same cases even
    when the learner's notebook called ``torch.set_default_dtype`` or ``set_default_device``."""
    dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        with torch.device("cpu"):
            yield
    finally:
        torch.set_default_dtype(dtype)


def dump_source(notebook_id: str, grade_id: str) -> str:
    return (
        "from autograder.classroom.claims import dump as _mha_dump\n"
        f"_mha_dump({notebook_id!r}, {grade_id!r}, globals())\n"
        "del _mha_dump\n"
    )


# ----------------------------------------------------------------------------- trusted side


def verify(notebook_id: str, grade_id: str, payload: str | None) -> str | None:
    """None if the dumped outputs agree with PyTorch, else why the claim does not hold."""
    claim = CLAIMS[notebook_id][grade_id]
    if payload is None:
        return f"`{claim.function}` could not be re-run on the verification inputs"
    try:
        data = json.loads(payload)
        outputs = [decode(o) for o in data["outputs"]]
    except (ValueError, KeyError, TypeError, RecursionError):
        return "the verification outputs were malformed"
    with _stock_defaults():
        cases = claim.cases()
    if data.get("grade_id") != grade_id or len(outputs) != len(cases):
        return "the verification outputs do not match the verification inputs"
    try:
        return claim.verify(cases, outputs)
    except Exception as err:  # a forged output that the comparison cannot digest
        return f"the verification outputs could not be compared ({type(err).__name__})"


def verify_static(notebook_id: str, grade_id: str, answer_source: str | None) -> str | None:
    """None unless the answer cell uses a name the claim forbids (or cannot be read)."""
    claim = CLAIMS[notebook_id][grade_id]
    if not claim.forbidden:
        return None
    if answer_source is None:
        return f"the answer cell of `{claim.function}` was not found"
    used = forbidden_names(answer_source, claim.forbidden)
    if used:
        return f"the answer cell of `{claim.function}` uses the built-in `{used[0]}`"
    return None


def forbidden_names(source: str, forbidden: tuple[str, ...]) -> list[str]:
    """Forbidden names used as attributes, imports or strings (``getattr(F, "softmax")``)."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        tree = ast.parse(TransformerManager().transform_cell(source))
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            name = node.attr
        elif isinstance(node, ast.alias):
            name = node.name.rsplit(".", 1)[-1]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            name = node.value
        else:
            continue
        if name in forbidden and name not in found:
            found.append(name)
    return found


def _mismatch(actual, expected: torch.Tensor, what: str, atol=ATOL, rtol=RTOL) -> str | None:
    """Why ``actual`` is not ``expected`` within tolerance (shapes must agree), or None."""
    if not isinstance(actual, torch.Tensor):
        return f"{what}: {actual}"
    if tuple(actual.shape) != tuple(expected.shape):
        return f"{what} has shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
    actual, expected = actual.to(torch.float64), expected.to(torch.float64)
    if not torch.allclose(actual, expected, atol=atol, rtol=rtol, equal_nan=False):
        return f"{what} differs from PyTorch's result"
    return None


# ----------------------------------------------------------------------------- shared helpers


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _pair(out, names: str = "(out, weights)") -> tuple | str:
    """``out`` if it is a pair, else why not (an error stays the error)."""
    if isinstance(out, tuple) and len(out) == 2:
        return out
    return out if isinstance(out, str) else f"did not return a pair {names}"


def _with_kwargs(fn: Callable, case: tuple) -> object:
    """Call ``fn`` on a case whose last item holds keyword arguments, as the checks call it."""
    *args, kwargs = case
    return fn(*args, **kwargs)


def _call_text(name: str, case: tuple) -> str:
    """``name(12, 3, bias=True)`` for a case of numbers ending in keyword arguments."""
    *args, kwargs = case
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    return f"`{name}({', '.join(parts)})`"


def _verify_counts(name: str, oracle: Callable[..., int | None]) -> Callable:
    """Verify integer answers against ``oracle(*args, **kwargs)``; None: must raise ValueError."""

    def verify(cases: list[tuple], outputs: list) -> str | None:
        for case, out in zip(cases, outputs, strict=True):
            *args, kwargs = case
            expected, what = oracle(*args, **kwargs), _call_text(name, case)
            if expected is None:
                if not (isinstance(out, str) and out.startswith("raised ValueError")):
                    return f"{what} should raise ValueError"
            elif isinstance(out, str):
                return f"{what}: {out}"
            elif type(out) is not int:
                return f"{what} returned {type(out).__name__}, not an int"
            elif out != expected:
                return f"{what} returned {out:,}, which differs from PyTorch's count"
        return None

    return verify


# ----------------------------------------------------------------------------- registry


class _Registry(dict):
    """Notebook id -> {test grade id -> Claim}, built on first use (imports the checks)."""

    modules = {
        "01_attention_from_scratch": "claims_01",
        "02_multi_head_attention": "claims_02",
        "03_masking": "claims_03",
        "04_grouped_query_attention": "claims_04",
        "05_parallel_vs_sequential": "claims_05",
        "06_gpu_attention": "claims_06",
        "07_exploring_heads": "claims_07",
    }

    def __missing__(self, notebook_id: str) -> dict[str, Claim]:
        module = self.modules.get(notebook_id)
        claims = importlib.import_module(f"{__package__}.{module}").claims() if module else {}
        self[notebook_id] = claims
        return claims


CLAIMS: dict[str, dict[str, Claim]] = _Registry()
