"""The set-up a fresh machine relies on: pins, environment.yml, the two commands, CI."""

import re

import yaml

from conftest import REPO


def _pins(lines) -> dict[str, str]:
    pins = {}
    for line in lines:
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            requirement, _, marker = line.partition(";")
            name, sep, version = requirement.partition("==")
            assert sep, f"not pinned exactly: {line!r}"
            pins[name.strip().lower()] = (version.strip(), marker.strip())
    return pins


def requirements() -> dict[str, str]:
    return _pins((REPO / "requirements.txt").read_text().splitlines())


def test_torch_is_pinned_exactly():
    """Any torch spec but an exact pin pulls a multi-GB CUDA build."""
    assert requirements()["torch"] == ("2.13.0", "")


def test_environment_yml_matches_requirements():
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    conda_pins = _pins(entry for entry in pip_section if not entry.startswith("-e"))
    assert conda_pins == requirements()
    assert "-e ." in pip_section, "environment.yml must install the course package itself"


def test_readme_commands_are_the_ones_ci_runs():
    readme = (REPO / "README.md").read_text()
    assert "make lab" in readme and "make test" in readme
    assert re.search(r"^exec make test$", (REPO / ".ci/run").read_text(), re.MULTILINE)
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^lab: \$\(STAMP\)$", makefile, re.MULTILINE)
    assert re.search(r"^test: \$\(STAMP\)", makefile, re.MULTILINE)
