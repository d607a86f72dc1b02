"""Grading a whole class: parallel, resumable, sandboxed, and hard to cheat.

``python -m autograder grade SUBMISSIONS --out DIR`` (see :mod:`.grade`) and
``python -m autograder merge DB... --out DB`` (see :mod:`.gradebook`). The instructor guide is
``GUIDE.md`` in this folder.

Modules: ``isolation`` (limits and sandbox), ``launch`` (sandboxed kernelspec), ``zygote`` and
``kernels`` (warm forked kernels), ``execute`` (nbgrader's Execute step with budgets; it runs each
passed test cell's checks here, the learner's code in the kernel: ``autograder.checks.replay``),
``kernel_package`` (the answer-free package a grading kernel imports), ``scan`` (suspicious
patterns), ``structure`` (repairing submissions), ``feedback``, ``worker``, ``pool``, ``grade``,
``gradebook``, ``summary``, ``files``.
"""
