"""The only grading code a classroom grading kernel can import: it records, it never judges.

In classroom grading (``python -m autograder grade``) the learner's kernel gets a reduced copy
of the package (see :mod:`autograder.grader.kernel_package`): this sub-package, the learner
tools with every name that would compute a graded answer replaced by a stub, and no-op stand-ins
for the check modules. The checks themselves, their oracles and answer constants run only in the
trusted grading process (:mod:`autograder.grader.verify`), which calls the learner's code in the
kernel through :mod:`.server`, one call at a time, and recomputes every tensor it returns.

- :mod:`.codec`: plain values and tensors to JSON and back; the walkers over a call's tensors.
- :mod:`.recorder`: runs one learner call under a dispatch mode that logs every ATen operator.
- :mod:`.server`: the kernel's end of a grader's request: decode it, run it, publish the record.

Nothing here knows an answer: a learner may import all of it and gain nothing.
"""
