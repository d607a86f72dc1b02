"""The sandbox (``grader.isolation``, ``grader.launch``, ``kernel.zygote``, ``grader.files``): what
holds and what does not, what a kernel sees, atomic writes."""

import os

import pytest

from autograder import paths
from autograder.grader.files import folder_digest, read_json, write_atomic
from autograder.grader.isolation import Isolation, Limits, bwrap_argv, describe, kernel_env
from autograder.grader.launch import launch_argv
from autograder.kernel.zygote import _empty, import_warm

# ----------------------------------------------------------------------------- files, layout


def test_atomic_writes_and_digests(tmp_path):
    target = tmp_path / "a" / "r.json"
    write_atomic(target, '{"x": 1}')
    assert read_json(target) == {"x": 1} and not list(target.parent.glob(".*tmp"))
    (tmp_path / "a" / "bad.json").write_text("{")
    assert read_json(tmp_path / "a" / "bad.json") is None
    before = folder_digest(tmp_path / "a")
    write_atomic(target, '{"x": 2}')
    assert folder_digest(tmp_path / "a") != before


def test_zygote_cleanup_spares_the_grader_bind_mounts(tmp_path):
    runtime, inbox, work = tmp_path / "w" / "k", tmp_path / "w" / "inbox", tmp_path / "work"
    for d in (runtime, inbox, work / "s" / "a"):
        d.mkdir(parents=True)
    (runtime / "marker").touch()
    (inbox / "00000").touch()
    (work / "s" / "a" / "junk").touch()
    (tmp_path / "mpl").mkdir()
    (tmp_path / "stray").write_text("x")
    _empty(tmp_path, {"mpl"}, (runtime, inbox, work))
    _empty(work, protected=(runtime, inbox, work))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mpl", "w", "work"]
    assert (runtime / "marker").exists() and (inbox / "00000").exists()
    assert not list(work.iterdir())


def test_a_forkserver_reports_only_the_warm_modules_that_failed():
    """``from X import f`` lists ``X.f`` too: a function is no failure, a missing module is."""
    names = ["json", "json.dumps", "email.mime.text", "no_such_module_here", "json.no.such"]
    assert import_warm(names) == [
        "no_such_module_here: ModuleNotFoundError",
        "json.no.such: ModuleNotFoundError",
    ]


def test_every_warm_module_of_the_course_imports():
    """A forkserver that cannot import a warm module leaves it to each kernel's time limits."""
    from autograder.grader.kernels import warm_modules

    names = {m for nb in paths.notebook_ids() for m in warm_modules(paths.solution_notebook(nb))}
    assert import_warm(sorted(names)) == []


# ----------------------------------------------------------------------------- isolation


def test_describe_says_what_holds_and_what_does_not():
    limits = Limits()
    full = describe(
        Isolation("/usr/bin/prlimit", "/usr/bin/bwrap", "/usr/bin/setpriv", True), limits
    )
    assert "no network" in full[1] and "unprivileged uids" in full[2]
    bare = describe(Isolation(None, None, None, False), limits)
    assert bare[0].startswith("NO resource limits") and bare[1].startswith("NO sandbox")
    assert "all of this user's processes" in bare[2]


def test_sandbox_command_hides_the_course_and_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "secret")
    iso = Isolation("/usr/bin/prlimit", "/usr/bin/bwrap", "/usr/bin/setpriv", True)
    env = kernel_env(Limits(), dict(os.environ))
    argv = bwrap_argv(
        iso,
        Limits(),
        rw_dirs=[str(tmp_path / "k")],
        workdir=str(tmp_path / "w"),
        workdir_files={"data.csv": str(tmp_path / "data.csv")},
        font_cache=None,
        uid=61000,
        env=env,
    )
    text = " ".join(argv)
    assert "--unshare-net" in argv and "--unshare-pid" in argv and "--clearenv" in argv
    assert "secret" not in text and str(paths.SOLUTIONS_DIR) not in text
    assert f"--ro-bind {tmp_path / 'data.csv'} {tmp_path / 'w' / 'data.csv'}" in text
    assert "--reuid=61000" in text


def test_launcher_refuses_a_runtime_folder_it_did_not_make(tmp_path):
    (tmp_path / "kernel.json").write_text("{}")
    spec = {"isolation": Isolation(None, None, None, False).to_json(), "limits": {}, "uid": None}
    with pytest.raises(SystemExit, match="refusing"):
        launch_argv(spec, ["python", "-f", str(tmp_path / "kernel.json")], tmp_path)


def test_the_font_list_is_built_once_per_user(tmp_path, monkeypatch):
    """``grade`` and ``check`` share one font list per user: the second asks builds nothing, and
    no half-built folder is left beside it."""
    from autograder.grader import isolation

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = isolation.shared_font_cache()
    assert first is not None and first.parent == tmp_path / "mha-course"
    assert list(first.glob("fontlist*.json"))
    built = []
    monkeypatch.setattr(isolation, "prepare_font_cache", built.append)
    assert isolation.shared_font_cache() == first and not built
    assert [p.name for p in first.parent.iterdir()] == [first.name]


def test_an_unwritable_cache_leaves_the_font_list_to_the_run(tmp_path, monkeypatch):
    from autograder.grader import isolation

    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    assert isolation.shared_font_cache() is None
