"""The Python a learner's code may use, so that the grader scores only what it can judge.

Why an allow-list: four rounds of deny-lists (dunders, frames, code from strings, PyTorch's mode
switches, named modules) each met a fresh adversary with a mechanism none of them named:
TorchScript, the autograd engine's private entry point, a worker thread, the meta device,
``pkgutil.resolve_name`` of split strings, numpy. The exercises need far less than Python
offers, so this module names what they need and everything else is *outside*: the grader does
not score a test that reaches such code (:func:`autograder.grader.scan.withheld_tests`), a
person does.

Allowed in code the learner writes:

- imports of :data:`MODULES` (PyTorch's modelling namespaces, ``math``, numpy, the standard
  library's plain helpers), the imports the release notebook's given cells make, and, in a
  notebook that teaches a tool, that tool (:data:`TAUGHT`); ``sys`` for the few attributes of
  :data:`PARTLY` (its output streams and version), never as a whole;
- names the learner's cells or the release notebook's cells bind (the course's given helpers),
  and the built-ins of :data:`BUILTINS`;
- public attributes; on a module, only those that do not lead into a module outside the list or
  to one of :data:`HANDS_OFF`. Private (``_x``) and dunder attributes are outside, except
  ``__init__`` and ``__name__``, and ``self._x`` in a method of the learner's own class;
- ordinary Python syntax: functions, classes (with the special methods of :data:`DUNDER_DEFS`),
  comprehensions, generators, ``with``, ``try``; ``getattr`` and ``setattr`` of a public
  attribute name written out (``setattr`` not on a module).

Outside, each named in one line: any other import (a learner's own ``.py`` file included);
``torch.jit``, ``torch._C``, ``torch.ops``, ``torch.autograd.graph``, ``torch.utils``,
``torch.library``, ``torch.compile`` and every other PyTorch namespace not listed; ``threading``,
``concurrent``, ``multiprocessing``, ``ctypes``, ``pkgutil``, ``importlib``; numpy on tensors
(numpy in a cell that names PyTorch, ``.numpy()``, ``torch.from_numpy``, or numpy whose cell
shares names with other learner code: scan.withheld_tests); ``getattr``, ``setattr`` (otherwise),
``delattr``, ``eval``, ``exec``, ``compile``, ``globals``, ``vars``, ``locals``,
``__import__``, ``open``; frames, code objects and autograd nodes read as attributes; dunder
names in strings; coroutines, metaclasses and ``import *``. :data:`NAMED_ONLY` says which of
them reach only what the code names.

This module is the list; :mod:`.reading` reads a cell's code against it.
"""

from __future__ import annotations

import builtins
import re
from dataclasses import dataclass, field
from typing import NamedTuple

MODULES = {
    # PyTorch's modelling namespaces: tensors, layers, functions, devices
    "torch",
    "torch.nn",
    "torch.nn.functional",
    "torch.nn.init",
    "torch.nn.attention",  # sdpa_kernel, given in notebooks 05 and 06
    "torch.nn.attention.bias",  # causal_lower_right, notebook 03's mask for a cache
    "torch.autograd",  # grad, Function: judged by the replay's rules, not by name
    "torch.accelerator",  # the device-agnostic torch.cuda (PyTorch 2.6): 06's get_device
    "torch.cuda",
    "torch.mps",
    "torch.backends",
    "torch.backends.cuda",
    "torch.backends.mps",
    "torch.backends.cudnn",
    "torch.linalg",
    "torch.special",
    "torch.fft",
    "torch.testing",
    "torch.optim",  # training the small models of the demos
    # the standard library a learner needs: numbers, types, containers, timing, output
    "math",
    "typing",
    "dataclasses",
    "functools",
    "itertools",
    "collections",
    "collections.abc",
    "numbers",
    "enum",
    "abc",
    "warnings",
    "time",
    "json",
    "re",
    # showing results: given in every notebook
    "matplotlib.pyplot",
    "IPython.display",
    # arrays for plots and arithmetic; numpy on tensors is outside (see numpy_on_tensors)
    "numpy",
}
# Modules allowed for a few attributes only, never as a whole: printing to stderr is ordinary
# (``print(..., file=sys.stderr)``), and ``sys.exit`` only raises SystemExit (flagged for a
# person by the scan), but ``sys`` also holds the interpreter's modules and hooks.
PARTLY = {
    "sys": frozenset(
        ("stderr", "stdout", "exit", "version", "version_info", "platform", "maxsize", "float_info")
    ),
}

# What a notebook teaches, allowed in the cells that teach it: the given demo cells (any learner
# cell that is not an answer) and the answer cells named here.
TAUGHT = {
    "05_parallel_vs_sequential": ({"torch.utils.flop_counter"}, frozenset()),
    "06_gpu_attention": ({"triton", "triton.language"}, frozenset({"triton_attention"})),
}
# Answer cells whose answers are numbers derived by arithmetic (notebook 10's "numbers"
# questions, by grade-id prefix): PyTorch there measures an answer instead of deriving it (a
# module built on the meta device and counted), so it is outside, and reaches only the answers
# the cell binds.
ARITHMETIC = {"10_interview_prep": "numbers_"}
MEASURED = " (this answer is arithmetic: derive the number, do not measure it with PyTorch)"

# Public names in allowed namespaces that hand the computation to something the recorder does
# not see (a compiler, a transform, a file, numpy).
HANDS_OFF = {
    "torch.compile": "compiles code (torch.compile)",
    "torch.vmap": "transforms functions (torch.vmap)",
    "torch.cond": "traces control flow (torch.cond)",
    "torch.load": "unpickles a file, which runs its code (torch.load)",
    "torch.from_numpy": "uses numpy on tensors (torch.from_numpy)",
    "torch.from_file": "maps a file (torch.from_file)",
}
BUILTINS = {
    *("abs", "all", "any", "bool", "bytearray", "bytes", "callable", "chr", "complex", "dict"),
    *("divmod", "enumerate"),
    *("filter", "float", "format", "frozenset", "hasattr", "hash", "id", "int", "isinstance"),
    *("issubclass", "iter", "len", "list", "map", "max", "min", "next", "object", "ord", "pow"),
    *("print", "property", "range", "repr", "reversed", "round", "set", "slice", "sorted"),
    *("staticmethod", "classmethod", "str", "sum", "super", "tuple", "type", "zip"),
    *("True", "False", "None", "Ellipsis", "NotImplemented"),
}
EXCEPTIONS = {
    n
    for n, v in vars(builtins).items()
    if isinstance(v, type) and issubclass(v, Warning | Exception)
}
BY_NAME = {
    "getattr": "reads attributes by name (getattr)",
    "setattr": "sets attributes by name (setattr)",
    "delattr": "deletes attributes by name (delattr)",
    "eval": "evaluates code from a string (eval)",
    "exec": "runs code from a string (exec)",
    "compile": "compiles code from a string (compile)",
    "globals": "reads the notebook's namespace (globals)",
    "vars": "reads a namespace (vars)",
    "locals": "reads a namespace (locals)",
    "__import__": "imports by name (__import__)",
    "open": "opens files (open)",
}
DUNDER_ATTRIBUTES = {"__init__", "__name__"}  # super().__init__(), fn.__name__
DUNDER_DEFS = {
    *("__init__", "__call__", "__repr__", "__str__", "__len__", "__getitem__", "__iter__"),
    *("__next__", "__contains__", "__post_init__", "__eq__", "__hash__", "__enter__", "__exit__"),
    *("__lt__", "__le__", "__gt__", "__ge__", "__bool__"),
}
# Public attribute names of the interpreter's own objects (frames, code, closures) and of
# autograd's graph, which code of unknown type could reach; and numpy on tensors.
INTERNALS = {
    **dict.fromkeys(
        ("f_back", "f_globals", "f_locals", "f_builtins", "f_code", "tb_frame", "tb_next"),
        "walks frames",
    ),
    **dict.fromkeys(("gi_frame", "cr_frame", "ag_frame", "gi_code"), "walks frames"),
    **dict.fromkeys(("cell_contents", "co_code", "co_consts", "co_names"), "reads code objects"),
    **dict.fromkeys(("grad_fn", "next_functions"), "reaches autograd's graph"),
    "numpy": "uses numpy on tensors",
}
DUNDER = re.compile(r"__\w+__")
PUBLIC = re.compile(r"[A-Za-z]\w*")
DOTTED_PRIVATE = re.compile(r"[A-Za-z]\w*(\.\w+)*\._\w+(\.\w+)*")


ALONE = {"torch": "torch", "F": "torch.nn.functional", "nn": "torch.nn", "np": "numpy"}
# Outside, but reaching only the objects the code names (its functions, the values it is given):
# code using these that runs when its cell runs withholds the tests reaching what it names, not
# every test (scan.withheld_tests). Everything else outside (by-name access, private and dunder
# names, frames, the interpreter's modules, PyTorch's dispatch) could change what it cannot name.
NAMED_ONLY = {
    *("numpy", "threading", "concurrent", "queue", "random", "statistics", "timeit"),
    *("torch.jit", "torch.func", "torch.utils.flop_counter", "torch.utils.checkpoint"),
    *("torch.utils.data", *(path for path in HANDS_OFF if path != "torch.load")),
}
REACHES_ANYTHING = {"numpy.ctypeslib"}  # raw memory from an address


def named_only(path: str) -> bool:
    """Whether code using ``path`` (``threading.Thread``) reaches only what it names."""
    under = lambda prefixes: any(path == p or path.startswith(p + ".") for p in prefixes)  # noqa: E731
    private = any(part.startswith("_") for part in path.split("."))
    return under(NAMED_ONLY) and not under(REACHES_ANYTHING) and not private


class Found(NamedTuple):
    """A construct outside the list: ``why`` in one line; ``now``: it runs when its cell runs,
    not only when one of the cell's functions is called; ``anything``: it could change what
    the code does not name (not :data:`NAMED_ONLY`)."""

    why: str
    now: bool
    anything: bool


@dataclass
class Context:
    """What a cell's names may refer to.

    ``names``: names the learner's cells or the release's cells bind (None: any name, when a
    cell is judged alone); ``modules``: local name -> the module or ``module.name`` the notebook's
    imports bind it to; ``helpers``: what the release's given cells import from the course's own
    package; ``given``: every import path of the release's given cells, which a learner may
    repeat (using an outside one is still outside); ``taught``: the tools taught in this cell.
    """

    names: set[str] | None = None
    modules: dict[str, str] = field(default_factory=lambda: dict(ALONE))
    helpers: set[str] = field(default_factory=set)
    given: set[str] = field(default_factory=set)
    taught: set[str] = field(default_factory=set)
    arithmetic: bool = False  # an answer cell of :data:`ARITHMETIC`: no PyTorch

    def allowed_module(self, name: str) -> bool:
        if self.arithmetic and name.split(".")[0] == "torch":
            return False
        taught = any(name == t or name.startswith(t + ".") for t in self.taught)
        return name in MODULES or name in PARTLY or taught or name in self.helpers

    def importable(self, name: str) -> bool:
        """Whether the grader may import ``name`` to follow attributes on it."""
        return self.allowed_module(name) or any(h.startswith(name + ".") for h in self.helpers)


def arithmetic(notebook: str, grade_id: str | None, answer: bool) -> bool:
    """Whether this cell's answers are numbers to derive by arithmetic (see :data:`ARITHMETIC`)."""
    prefix = ARITHMETIC.get(notebook)
    return bool(prefix and answer and (grade_id or "").startswith(prefix))


def taught(notebook: str, grade_id: str | None, answer: bool) -> set[str]:
    """The tools notebook ``notebook`` teaches in this cell (see :data:`TAUGHT`)."""
    modules, cells = TAUGHT.get(notebook, (set(), frozenset()))
    return set(modules) if not answer or grade_id in cells else set()
