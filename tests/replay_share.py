"""How often correct code can be replayed on inputs the kernel never saw, per catalogue.

Every ``CORRECT`` entry of ``tests/mistakes`` (the instructor's own variants and the ways real
codebases write the same thing) runs through the grader's verification, its learner code in an
in-process kernel (:func:`cells.verify_check`), with the thorough hidden run. Each outcome is
counted: ``verified`` (replayed on new inputs and right there), ``cannot replay`` (its
operators depend on its inputs' values: withheld for a person), ``refuted``, ``error``, or
``not verifiable`` (a check the grader never verifies: notebook 06's Triton self-checks). The
last line sums every catalogue: the share of correct code the grader verifies, neither withheld
nor refuted.

Run: ``.venv/bin/python tests/replay_share.py [catalogue ...]`` (from the repository root).
"""

from __future__ import annotations

import inspect
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mistakes import HIDDEN, catalogues  # noqa: E402

from autograder.checks import operators, registry  # noqa: E402
from autograder.grader.verify import cells, remote  # noqa: E402

ALLOWED = operators.DEFAULT | operators.SDPA | operators.MODEL


def _tools(check) -> dict:
    """The check's positional parameters after the learner's function whose defaults are
    functions, with them: the notebook's tools a test cell names
    (``check_flash_function(FlashAttention, gradients_through)``), globals of the learner's
    kernel like any other."""
    try:
        parameters = list(inspect.signature(check).parameters.values())[1:]
    except (TypeError, ValueError):
        return {}
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    return {p.name: p.default for p in parameters if p.kind is kind and callable(p.default)}


def outcome(entry) -> tuple[str, str]:
    """What verifying one correct implementation under its check's hidden run gives."""
    tools = _tools(entry.check)  # a notebook tool the test cell passes too (gradients_through)
    kernel = cells.InProcessKernel({"fn": entry.impl, **tools})
    run = dict(HIDDEN) if HIDDEN in entry.runs or not entry.runs else dict(entry.runs[-1])
    name = getattr(entry.check, "__name__", "")
    try:
        allowed = registry.allowed_operators(name)
        if registry.unverifiable(name):  # Triton: no record to replay, by design
            return "not verifiable", registry.unverifiable(name)
    except ValueError:  # a catalogue's wrapper around a check
        allowed = ALLOWED
    learners = [remote.Learner(n) for n in ("fn", *tools)]
    verdict = cells.verify_check(entry.check, learners, run, kernel, allowed)
    if verdict.status == "unverified" and "replay" in verdict.message:
        return "cannot replay", verdict.message
    return verdict.status, verdict.message


def main(names: list[str]) -> None:
    overall: Counter = Counter()
    for name, catalogue in sorted(catalogues().items()):
        if (names and name not in names) or getattr(catalogue, "SKIP", None):
            continue
        counts: Counter = Counter()
        for entry in catalogue.CORRECT:
            try:
                status, message = outcome(entry)
            except Exception as err:  # a check that cannot take a stand-in
                status, message = "error", f"{type(err).__name__}: {err}"
            counts[status] += 1
            if status != "verified":
                print(
                    f"  {name}: {entry.name} under {entry.check.__name__}: {status}: "
                    f"{message[:160]}"
                )
        overall += counts
        _share(name, counts)
    _share("all catalogues", overall)


def _share(name: str, counts: Counter) -> None:
    """One line: how many of ``counts`` are verified, of all but those never verifiable."""
    total = sum(n for status, n in counts.items() if status != "not verifiable")
    share = counts["verified"] / total if total else 1.0
    print(
        f"{name}: {counts['verified']}/{total} replay and verify ({share:.1%}); {dict(counts)}",
        flush=True,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
