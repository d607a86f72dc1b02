"""Verify one test cell: its checks run here, the learner's code runs in the kernel.

A test cell is a docstring and ``check_*(name, ..., key=constant)`` statements
(:func:`parse_test_cell`). For each statement, :func:`verify_cell` starts a statement in the
kernel, fetches the plain values the statement names (quiz answers are values), stands in for the
learner's functions and classes, and runs the check with :mod:`.remote` in charge of every call of
learner code. The check's own verdict is the cell's: a :class:`CheckFailure` refutes it with the
check's sentence, a record the grader cannot recompute refutes it with the reason. A check that
passed runs again on inputs the kernel never saw, its calls answered by replaying their records
(:mod:`.fresh`): it must pass there too, and a record that cannot be replayed (its operators
depend on its inputs' values) leaves the cell unverified, for a person. A check whose calls
pass only Python numbers runs again on configurations drawn from a secret instead, its calls
answered by the kernel.

Checks that cannot be verified this way (their result is written behind PyTorch's back) are named
by their module's ``UNVERIFIABLE``; a check module may also set the operators its checks allow
(``OPERATORS``, see :mod:`.operators`).
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes

from autograder.checks import operators
from autograder.checks.registry import allowed_operators, find_check, unverifiable
from autograder.grader.results import CheckStatus
from autograder.kernel import server
from autograder.kernel.codec import ReplayError, UnreadableReply, decode_value

from . import fresh, remote
from .rerun import CannotReplay, Rerun
from .writes import InputWritten


@dataclass(frozen=True)
class CheckCall:
    """One statement of a test cell: ``check_name(arg, ..., key=constant)``."""

    check: str
    args: tuple  # ("name", learner global) or ("const", value)
    kwargs: tuple  # (key, value) pairs of constants


def parse_test_cell(source: str) -> list[CheckCall]:
    """The check calls of a test cell; anything else in it raises ``ValueError``."""
    calls = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        call = node.value if isinstance(node, ast.Expr) else None
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id.startswith("check_")
        ):
            raise ValueError(f"line {node.lineno} is not a call of a check_* function")
        args = tuple(_argument(a) for a in call.args)
        kwargs = tuple((k.arg, ast.literal_eval(k.value)) for k in call.keywords if k.arg)
        calls.append(CheckCall(call.func.id, args, kwargs))
    return calls


def _argument(node: ast.expr) -> tuple:
    if isinstance(node, ast.Name):
        return ("name", node.id)
    return ("const", ast.literal_eval(node))


@contextlib.contextmanager
def stock_state() -> Iterator[None]:
    """The starting point the kernel's ``begin`` gives too: stock defaults, seed 0, one thread."""
    dtype, threads = torch.get_default_dtype(), torch.get_num_threads()
    rng = torch.get_rng_state()
    torch.set_default_dtype(torch.float32)
    torch.set_num_threads(1)  # reductions split the same way on both sides: bit-equal results
    torch.manual_seed(0)
    # the device context is a torch-function mode that every operator of the rerun passes
    # through (a tenth of a verification's time): entered only where the default has changed
    on_cpu = torch.get_default_device().type == "cpu"
    device = contextlib.nullcontext() if on_cpu else torch.device("cpu")
    try:
        with device, torch.enable_grad():
            yield
    finally:
        torch.set_default_dtype(dtype)
        torch.set_num_threads(threads)
        torch.set_rng_state(rng)


@dataclass
class Verdict:
    """What verifying one test cell established."""

    status: CheckStatus  # verified, refuted or unverified (withheld is the worker's word)
    message: str = ""


class InProcessKernel:
    """A kernel in this process, for tests: the same requests, the same replies, no IPython."""

    def __init__(self, namespace: dict):
        self.namespace = namespace

    def __call__(self, request: bytes) -> str:
        with _disable_current_modes(), _no_function_modes():  # a kernel has none of the grader's
            return server.reply(request, self.namespace)


@contextlib.contextmanager
def _no_function_modes() -> Iterator[None]:
    modes = [
        torch._C._pop_torch_function_stack() for _ in range(torch._C._len_torch_function_stack())
    ]
    try:
        yield
    finally:
        for mode in reversed(modes):
            torch._C._push_on_torch_function_stack(mode)


def verify_cell(source: str, kernel: Callable[[bytes], str | None]) -> Verdict:
    """Run the test cell's checks here, every call of learner code answered by ``kernel``."""
    try:
        statements = parse_test_cell(source)
        reasons = [unverifiable(s.check) for s in statements]
    except (SyntaxError, ValueError) as err:
        return Verdict(CheckStatus.UNVERIFIED, f"the test cell cannot be re-run ({err})")
    if any(reasons):
        return Verdict(CheckStatus.UNVERIFIED, next(r for r in reasons if r))

    def statement(item: CheckCall) -> None:
        remote.ask(kernel, {"op": "begin"})
        args = [_learner_value(kernel, v) if kind == "name" else v for kind, v in item.args]
        check = find_check(item.check)
        _verify_call(check, allowed_operators(item.check), args, dict(item.kwargs), kernel)

    return _judged(kernel, lambda: [statement(item) for item in statements])


def verify_check(
    check: Callable, args: list, kwargs: dict, kernel, allowed: frozenset[str] = operators.DEFAULT
) -> Verdict:
    """One call of ``check`` (learner code among ``args`` as :class:`.remote.Learner` stand-ins),
    judged as a test cell's statement is."""

    def statement() -> None:
        remote.ask(kernel, {"op": "begin"})
        _verify_call(check, allowed, args, kwargs, kernel)

    return _judged(kernel, statement)


def _judged(kernel, run: Callable[[], Any]) -> Verdict:
    """``run()``'s verdict: what each kind of failure means for the cell."""
    try:
        run()
    except AssertionError as err:  # a CheckFailure: the check's own sentence
        return Verdict(CheckStatus.REFUTED, str(err))
    except (remote.KernelGone, InputWritten, UnreadableReply) as err:
        return Verdict(CheckStatus.REFUTED, str(err))
    except CannotReplay as err:
        return Verdict(
            CheckStatus.UNVERIFIED, f"{err}: the grader cannot replay your code on new inputs"
        )
    except ReplayError as err:
        return Verdict(CheckStatus.REFUTED, f"the re-run did not match: {err}")
    finally:
        with contextlib.suppress(ReplayError):
            remote.ask(kernel, {"op": "end"})
    return Verdict(CheckStatus.VERIFIED)


def _learner_value(kernel, name: str) -> Any:
    reply = remote.ask(kernel, {"op": "value", "name": name})
    if "value" in reply:
        return decode_value(reply["value"])
    return remote.Learner(name)


def _verify_call(check: Callable, allowed: frozenset[str], args: list, kwargs: dict, kernel):
    """The check, its calls answered by the kernel; then again on new inputs (:mod:`.fresh`):
    its calls answered by replaying their records, or, where every call passed only Python
    numbers, on configurations drawn from a secret, its calls answered by the kernel."""
    session = remote.Session(kernel, allowed=allowed)
    _run_check(check, args, kwargs, session)
    options = fresh.secret_options(check)
    if session.calls and session.numbers_only and "seed" in options:
        remote.ask(kernel, {"op": "begin"})
        again, where = remote.Session(kernel, allowed), "on sizes the grader drew"
        kwargs = {**kwargs, **options}
    else:
        again = remote.Session(None, allowed, Rerun(expected=session.rerun.trace))
        again.replaying, where = list(session.calls), "on new inputs of the same shapes"
    try:
        with fresh.fresh_inputs():
            _run_check(check, args, kwargs, again)
    except AssertionError as err:
        raise AssertionError(f"{where}: {err}") from None


def _run_check(check: Callable, args: list, kwargs: dict, session: remote.Session) -> None:
    with remote.active(session), stock_state():
        try:
            check(*args, **kwargs)
        except (AssertionError, ReplayError):
            raise
        except Exception as err:  # a check crashing on a record: not verified
            raise ReplayError(
                f"the check could not digest the kernel's record ({type(err).__name__})"
            ) from None
