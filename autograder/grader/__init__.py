"""The grading engine under both ``check`` (one learner, self-study) and ``grade`` (a class).

One submission's notebook goes through nbgrader's autograde in a sandboxed kernel, and its results
are read into one model:

- nbgrader glue: ``nbgrader_settings`` (every setting, for the course, a class and one run),
  ``nbgrader_run`` (one in-process nbgrader app), ``execute`` (nbgrader's Execute step with
  budgets, output caps and the verifier's socket), ``cell_limits`` (per-cell time limits from the
  instructor's own timings), ``kernel_channels`` (a jupyter_client fix), ``lab_validate``
  (JupyterLab's Validate button);
- the sandbox: ``isolation`` (limits, user ids, bubblewrap), ``launch`` (the sandboxed
  kernelspec), ``kernels`` (warm kernels forked from ``autograder.kernel.zygote``), ``sockets``,
  ``hangs``, ``kernel_package`` (the answer-free package a grading kernel imports);
- what a submission may do: ``structure`` (repairing a submission's cells), ``scan`` and
  ``allowed`` (the allow-list: what the grader cannot judge goes to a person);
- ``verify/``: the trusted verifier, which reruns every passed test cell's checks here with the
  learner's code in the kernel and recomputes every tensor that comes back;
- results: ``results`` (one model of a graded notebook), ``messages`` (one-line diagnoses),
  ``feedback`` (the learner's feedback), ``saved_grades``, ``gradebook``, ``files`` (atomic IO);
- the two callers' steps: ``one_notebook`` (``check``) and ``worker`` with ``run_config``
  (``grade``'s worker processes).

The course (``checks``, ``tools``, ``kernel``, ``interview``) imports nothing from here; the
checks reach the verifier through the hook it sets (``autograder.checks.calls_through``).
"""
