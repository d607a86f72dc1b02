"""``grade``'s worker pool (``classroom.pool``): which assignment a worker takes, and that a worker
imports only the grader's code."""

from collections import deque

from autograder.classroom.pool import Pool, next_job

# ----------------------------------------------------------------------------- the pool


def test_a_worker_keeps_to_its_assignment_and_takes_the_largest_free_one():
    """Each switch of assignment restarts a worker's forkserver in a fresh sandbox: two workers
    over three assignments switch twice in all, not at every assignment boundary."""
    jobs = [
        {"id": f"{a}{i}", "assignment": a}
        for a, n in (("01", 3), ("02", 4), ("03", 1))
        for i in range(n)
    ]
    pending = deque(jobs)
    assert next_job(pending, "02", {"01"})["id"] == "020"  # its own, before the queue's head
    assert next_job(pending, "01", {"02"})["id"] == "010"
    assert next_job(pending, "04", {"01", "02"})["id"] == "030"  # the one no other worker holds
    assert next_job(pending, "03", {"01", "02"})["id"] == "021"  # the largest left, though held
    workers, order = {"a": "01", "b": "02"}, []
    while pending:
        for name in workers:
            if pending:
                job = next_job(pending, workers[name], {v for k, v in workers.items() if k != name})
                workers[name] = job["assignment"]
                order.append((name, job["id"]))
    assert [i for _, i in order] == ["011", "022", "012", "023"]
    assert sorted(j["id"] for j in jobs) == sorted(
        ["020", "010", "030", "021", *(i for _, i in order)]
    )


def test_a_worker_started_inside_a_learners_folder_imports_only_the_graders_code(
    tmp_path, monkeypatch
):
    """``grade`` run with the shell inside a submissions folder: a learner's own ``autograder``
    package there must not stand in for the grader's in the workers (they start with ``-P``)."""
    marker = tmp_path / "imported"
    planted = tmp_path / "learner" / "autograder"
    planted.mkdir(parents=True)
    (planted / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('planted')\n")
    monkeypatch.chdir(planted.parent)
    pool = Pool(1, tmp_path / "no-such-config.json", tmp_path, hard_limit_s=lambda job: 60)
    worker = pool._spawn(0)
    try:
        worker.process.wait(timeout=120)  # it stops at once: its configuration does not exist
    finally:
        pool.close()
    assert not marker.exists(), "the worker imported the learner's autograder package"
    assert "no-such-config.json" in (tmp_path / "worker-0.log").read_text()
