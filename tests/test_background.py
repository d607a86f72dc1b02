"""The suite's background jobs (``tests/background.py``): a job a test has reaped is seen as
ended by the scheduler, never as an error that stops the scheduler's thread."""

import os
import sys

import background


def test_a_job_reaped_by_a_test_counts_as_ended(tmp_path):
    """``Popen.wait()`` in a test's thread reaps the command before it records the exit status;
    the scheduler's check in between once raised ``ChildProcessError`` and its thread died (a
    fresh-clone run on this machine), leaving the queued jobs to start only when read."""
    job = background.Job([sys.executable, "-c", "pass"], tmp_path, tmp_path, dict(os.environ))
    os.waitpid(job.process.pid, 0)  # reaped, as wait() does, and its status not yet recorded
    assert job.process.returncode is None
    assert not job.running()
    assert job.seconds is not None
