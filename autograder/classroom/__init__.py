"""Grading a whole class: parallel, resumable, sandboxed, and hard to cheat.

``python -m autograder grade SUBMISSIONS --out DIR`` (see :mod:`.grade`) and
``python -m autograder merge DB... --out DB`` (see :mod:`.gradebook`). The instructor guide is
``GUIDE.md`` in this folder.

Modules: ``isolation`` (limits and sandbox), ``launch`` (sandboxed kernelspec), ``zygote`` and
``kernels`` (warm forked kernels), ``execute`` (nbgrader's Execute step with budgets, recording
the checks that ``autograder.checks.replay`` re-runs outside the kernel), ``scan`` (suspicious
patterns), ``structure`` (repairing submissions), ``feedback``, ``worker``, ``pool``, ``grade``,
``gradebook``, ``summary``, ``files``.
"""
