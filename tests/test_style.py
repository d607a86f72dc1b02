"""ruff (lint and import order, bugbear) and codespell over code, notebook sources and markdown."""

import sys
from pathlib import Path

from conftest import REPO, run

BIN = Path(sys.executable).parent


def test_ruff():
    result = run([str(BIN / "ruff"), "check", "."], cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr


def test_codespell():
    result = run([str(BIN / "codespell")], cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
