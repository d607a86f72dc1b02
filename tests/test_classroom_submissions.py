"""Which submissions a class folder holds (``classroom.submissions``): shards partition the class,
links are refused, never followed."""

from notebook_cells import NB

from autograder.classroom.submissions import discover, shard_of


def test_discover_and_shards_partition_the_class(tmp_path):
    for student in ("ann", "bo", "cy", "di", "ed"):
        (tmp_path / student / NB).mkdir(parents=True)
    (tmp_path / "ann" / "99_unknown").mkdir()
    (tmp_path / "notes.txt").write_text("x")
    jobs, ignored = discover(tmp_path, [NB])
    assert [j.student for j in jobs] == ["ann", "bo", "cy", "di", "ed"]
    assert sorted(ignored) == [
        "ann/99_unknown: not an assignment of the course",
        "notes.txt: not a student folder",
    ]
    shards = [{j.student for j in discover(tmp_path, [NB], (k, 3))[0]} for k in range(3)]
    assert set().union(*shards) == {j.student for j in jobs}
    assert sum(len(s) for s in shards) == len(jobs)
    assert all(shard_of(s, 3) == k for k, shard in enumerate(shards) for s in shard)


def test_links_under_the_submissions_root_are_refused_never_followed(tmp_path):
    """A linked learner folder, assignment folder or notebook is an error naming the link; the
    learners it points at are graded as usual."""
    for student in ("alice", "eve"):
        (tmp_path / student / NB).mkdir(parents=True)
        (tmp_path / student / NB / f"{NB}.ipynb").write_text("{}")
    (tmp_path / "bob").symlink_to("alice")
    (tmp_path / "carol").mkdir()
    (tmp_path / "carol" / NB).symlink_to(tmp_path / "alice" / NB)
    (tmp_path / "dave" / NB).mkdir(parents=True)
    (tmp_path / "dave" / NB / f"{NB}.ipynb").symlink_to(tmp_path / "eve" / NB / f"{NB}.ipynb")
    jobs = {j.student: j for j in discover(tmp_path, [NB])[0]}
    assert sorted(jobs) == ["alice", "bob", "carol", "dave", "eve"]
    assert not jobs["alice"].refused and not jobs["eve"].refused
    assert jobs["bob"].refused.startswith("bob is a symbolic link (to alice)")
    assert jobs["carol"].refused.startswith(f"carol/{NB} is a symbolic link")
    assert jobs["dave"].refused.startswith(f"dave/{NB}/{NB}.ipynb is a symbolic link")
    assert jobs["bob"].assignment == NB and jobs["bob"].folder == str(tmp_path / "bob")
    assert jobs["carol"].folder == str(tmp_path / "carol" / NB)  # not resolved to alice's
