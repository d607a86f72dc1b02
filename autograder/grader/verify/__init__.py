"""One check, with the learner's code run in the kernel and every tensor recomputed here.

In classroom grading the learner's kernel holds no check, oracle or answer (see
:mod:`autograder.kernel`). After a test cell passed in the kernel, the trusted grader runs that
cell's checks in its own process (:mod:`.cells`). Each time a check calls learner code
(``_core.call``, the one seam), :mod:`.remote` sends the call to the kernel, which runs it under a
dispatch mode and replies with a record: the ATen operators it ran and what it returned. The
grader believes none of it: :mod:`.rerun` recomputes every operator on the grader's own tensors,
refusing operators the check does not allow (:mod:`.operators`), literals that could carry an
answer, results that do not come from the inputs, and more work than a check needs. Rules about
*how* a result is computed run inside the check's own dispatch modes here, so they measure the
recomputed operators.

Import the sub-modules directly (``from autograder.grader.verify import cells``): this package
imports nothing, so that ``_core`` can import :mod:`.remote` without a cycle.
"""
