"""Grading a whole class: the commands an instructor runs, on top of the grading engine.

``python -m autograder grade SUBMISSIONS --out DIR`` (:mod:`.grade`) and
``python -m autograder merge DB... --out DB`` (:mod:`.commands`). The instructor guide is
``GUIDE.md`` in this folder.

Modules: ``grade`` (the class folder, its manifest and gradebook, resuming), ``submissions``
(one job per learner and assignment folder), ``pool`` (the
worker processes, restarted when one dies), ``summary`` (what the instructor reads at the end),
``identical`` (copied work), ``learner_ids`` (folder names that cannot be learners), ``commands``
(the command lines). Grading one submission, the sandbox and the verifier are the engine's:
:mod:`autograder.grader`.
"""
