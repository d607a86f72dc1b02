"""`python -m autograder lab` and `check 01` as a learner types them (JupyterLab not started)."""

import json
import sys

import nbformat
import pytest

from autograder import lab_launcher, paths
from autograder.cli import main


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "WORK_DIR", tmp_path / "work")
    return tmp_path / "work"


@pytest.fixture
def launched(work, monkeypatch):
    """Run the launcher with JupyterLab replaced by a recorder; returns its calls."""
    calls = []

    def call(command, env, cwd):
        assert cwd == paths.WORK_DIR  # where JupyterLab's terminals open
        calls.append((command, env))
        return 0

    monkeypatch.setattr(lab_launcher.subprocess, "call", call)
    return calls


def test_jupyterlab_options_pass_through(launched, capsys):
    assert main(["lab", "--port", "8891", "--no-browser"]) == 0
    ((command, _),) = launched
    assert command[-3:] == ["--port", "8891", "--no-browser"]
    assert command[:4] == [sys.executable, "-m", "jupyter", "lab"]


def test_help_is_the_launchers_own(capsys):
    with pytest.raises(SystemExit):
        main(["lab", "--help"])
    assert "passed to jupyter lab" in capsys.readouterr().out


@pytest.mark.parametrize("root", [True, False])
def test_root_gets_allow_root_and_a_notice(launched, monkeypatch, capsys, root):
    monkeypatch.setattr(lab_launcher.os, "geteuid", lambda: 0 if root else 1000)
    main(["lab"])
    ((command, _),) = launched
    assert ("--allow-root" in command) == root
    notices = [line for line in capsys.readouterr().out.splitlines() if "root" in line]
    assert len(notices) == (1 if root else 0), notices


def test_course_settings_are_added_for_this_launch_only(launched, monkeypatch):
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", "/elsewhere")
    main(["lab"])
    ((_, env),) = launched
    assert env["JUPYTER_CONFIG_PATH"].split(":") == [str(lab_launcher.JUPYTER_CONFIG), "/elsewhere"]
    assert env["MHA_COURSE_BIN"] == str(paths.Path(sys.executable).parent)  # terminals' python
    config = lab_launcher.JUPYTER_CONFIG / "labconfig"
    overrides = json.loads((config / "default_setting_overrides.json").read_text())
    assert overrides["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    disabled = json.loads((config / "page_config.json").read_text())["disabledExtensions"]
    assert {"@jupyter/nbgrader:create-assignment", "@jupyter/nbgrader:formgrader"} <= set(disabled)


def test_no_empty_nbgrader_menu_and_a_short_autosave():
    config = lab_launcher.JUPYTER_CONFIG / "labconfig"
    disabled = json.loads((config / "page_config.json").read_text())["disabledExtensions"]
    assert disabled.get("@jupyter/nbgrader:menu") is True, "the menu would list only disabled tools"
    assert "@jupyter/nbgrader:validate-assignment" not in disabled, "the learner's Validate button"
    overrides = json.loads((config / "default_setting_overrides.json").read_text())
    docmanager = overrides["@jupyterlab/docmanager-extension:plugin"]
    assert docmanager.get("autosave", True) is True
    assert 0 < docmanager["autosaveInterval"] <= 10, "check grades the saved file: save often"


def test_lab_opens_on_the_start_page_not_the_launcher(launched, work):
    from jupyterlab_server.workspaces_handler import WorkspacesManager

    main(["lab"])
    ((command, _),) = launched
    workspaces = work / lab_launcher.WORKSPACES
    assert f"--LabApp.workspaces_dir={workspaces}" in command
    layout = WorkspacesManager(str(workspaces)).load("default")["data"]
    viewer = f"markdownviewer-widget:{lab_launcher.START_PAGE}"
    assert layout["layout-restorer:data"]["main"]["current"] == viewer
    assert layout[viewer]["data"] == {
        "path": lab_launcher.START_PAGE,
        "factory": "Markdown Preview",
    }
    assert not layout["layout-restorer:data"]["left"]["collapsed"], "the file browser stays open"
    mine = {"data": {"my": "layout"}, "metadata": {"id": "default"}}
    WorkspacesManager(str(workspaces)).save("default", json.dumps(mine))
    main(["lab"])
    assert WorkspacesManager(str(workspaces)).load("default")["data"] == mine["data"]


def test_work_gets_the_start_page_and_stamped_notebooks(launched, work, first_notebook):
    main(["lab"])
    ((command, _),) = launched
    assert (work / lab_launcher.START_PAGE).is_file()
    assert f"--LabApp.default_url=/lab/tree/{lab_launcher.START_PAGE}" in command
    assert f"--ServerApp.root_dir={work}" in command
    nb = nbformat.read(work / first_notebook / f"{first_notebook}.ipynb", as_version=4)
    assert nb.metadata.language_info.version == sys.version.split()[0]
    mine = work / first_notebook / f"{first_notebook}.ipynb"
    mine.write_text("my answers")
    main(["lab"])
    assert mine.read_text() == "my answers", "never overwrite the learner's work"


@pytest.mark.parametrize("given", ["01", "01_attention_from_scratch"])
def test_check_takes_a_notebook_number(work, monkeypatch, first_notebook, given):
    notebook = work / first_notebook / f"{first_notebook}.ipynb"
    notebook.parent.mkdir(parents=True)
    notebook.write_text("{}")
    for cwd in (work, notebook.parent, work.parent):
        monkeypatch.chdir(cwd)
        assert paths.notebook_argument(given).resolve() == notebook
    assert paths.notebook_argument("99") == paths.Path("99")  # left for `check` to report


def test_start_page_says_to_save_before_check():
    page = (paths.COURSE_DIR / lab_launcher.START_PAGE).read_text(encoding="utf-8")
    commands = page[page.index("## Commands") :]
    assert "check 01" in commands
    assert "Save first (Ctrl+S): `check` grades the saved file" in commands
    overrides = json.loads(
        (lab_launcher.JUPYTER_CONFIG / "labconfig" / "default_setting_overrides.json").read_text()
    )
    interval = overrides["@jupyterlab/docmanager-extension:plugin"]["autosaveInterval"]
    assert f"autosaves every {interval} seconds" in commands


def test_model_answers_are_a_read_only_copy_in_work_and_absent_without_solutions(
    launched, work, first_notebook, monkeypatch, tmp_path
):
    old = work / "model_answers"  # where earlier launches put them: moved one level down
    old.mkdir(parents=True)
    (old / f"{first_notebook}.ipynb").write_text("{}")
    (old / f"{first_notebook}.ipynb").chmod(0o444)
    main(["lab"])
    assert not old.exists()
    answers = work / "reference" / "model_answers" / f"{first_notebook}.ipynb"
    assert answers.read_bytes() == paths.solution_notebook(first_notebook).read_bytes()
    assert not answers.stat().st_mode & 0o222, "read-only"
    main(["lab"])  # refreshed, not refused
    assert (
        paths.find_learner_notebook(work, first_notebook) != answers
    )  # check grades the learner's
    classroom = tmp_path / "classroom_work"
    monkeypatch.setattr(paths, "WORK_DIR", classroom)
    monkeypatch.setattr(paths, "SOLUTIONS_DIR", tmp_path / "no_solutions")
    monkeypatch.setattr(paths, "notebook_ids", lambda: [first_notebook])
    assert lab_launcher.sync_model_answers() is False
    assert not (classroom / paths.MODEL_ANSWERS).exists()


def test_the_course_styles_are_served_to_jupyterlab():
    """The server settings load ``custom/custom.css`` (Validate's diagnoses wrap; the browser
    test measures that none is cut), from the folder the server's tornado settings name."""
    from traitlets.config import Config, PyFileConfigLoader

    loader = PyFileConfigLoader("jupyter_server_config.py", path=str(lab_launcher.JUPYTER_CONFIG))
    config: Config = loader.load_config()
    assert config.LabApp.custom_css is True
    settings = Config()
    settings.ServerApp.tornado_settings = {}
    settings.merge(config)
    (folder,) = settings.ServerApp.tornado_settings["static_custom_path"]
    css = (lab_launcher.JUPYTER_CONFIG / "custom" / "custom.css").read_text()
    assert folder == str(lab_launcher.JUPYTER_CONFIG / "custom")
    assert "#validation-message pre" in css and "pre-wrap" in css
