"""GUIDE.md §4-5 in a real browser: the formgrader on the graded folder (issue 34).

The graded folder is the exchange test's (:mod:`exchange_class`, the ``exchange_term``
fixture): no notebook is graded again for this test. As GUIDE §4 says, ``jupyter lab`` is started
in ``graded/`` (an instructor's own JupyterLab, not the learner's launcher, with temporary
settings and runtime folders, 127.0.0.1, a random token); in headless Chromium the formgrader's
gradebook lists ada's written answer as needing a manual grade; the test types points and a
comment on the submission's page, regenerates and returns feedback (§5), and ada's fetched
feedback shows both. Screenshots go to ``test-screenshots/`` like the other browser tests'.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest
from exchange_class import ASSIGNMENT, WRITTEN
from test_explorer_browser import (
    CHROMIUM_FLAGS,
    SCREENSHOTS,
    _chromium,
    _free_port,
    _missing,
    serve_lab,
)

pytestmark = pytest.mark.slow

POINTS, COMMENT = "3", "Clear on the FLOPs; say what the 81 small products cost in launches."


@contextlib.contextmanager
def instructor_lab(folder: Path, scratch: Path):
    """``cd graded && jupyter lab``: yields (base URL, token)."""
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ)
    env.update(
        {
            "JUPYTER_CONFIG_DIR": str(scratch / "config"),
            "JUPYTER_DATA_DIR": str(scratch / "data"),
            "JUPYTER_RUNTIME_DIR": str(scratch / "runtime"),
            "IPYTHONDIR": str(scratch / "ipython"),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
        }
    )
    command = [
        sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
        f"--port={port}", f"--IdentityProvider.token={token}",
        "--LabApp.extension_manager=readonly",
        f"--LabApp.user_settings_dir={scratch / 'settings'}",
        f"--LabApp.workspaces_dir={scratch / 'ws'}",
    ]  # fmt: skip
    if os.geteuid() == 0:
        command.append("--allow-root")
    with serve_lab(command, env, scratch / "server.log", port, token, cwd=folder) as base:
        yield base, token


def _shot(page, name: str) -> None:
    page.screenshot(path=str(SCREENSHOTS / f"formgrader-{name}.png"))


def _gradebook_row(page, base: str, learner: str):
    """The learner's row of the assignment's manual-grading table (names shown)."""
    page.goto(f"{base}/formgrader/gradebook/{ASSIGNMENT}/{ASSIGNMENT}")
    page.locator("#main-table tr td.score").first.wait_for()  # the table has loaded
    page.click("button:has-text('Show All Names')")  # the formgrader hides names at first
    row = page.locator("#main-table tr", has_text=learner)
    row.wait_for()
    return row


def _saved(graded: Path, learner: str) -> tuple:
    """(manual score, comment) of the learner's written answer, as the gradebook holds them."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{graded / 'gradebook.db'}") as gb:
        grade = gb.find_grade(WRITTEN, ASSIGNMENT, ASSIGNMENT, learner)
        comment = gb.find_comment(WRITTEN, ASSIGNMENT, ASSIGNMENT, learner)
        return grade.manual_score, comment.manual_comment


def _wait_until_saved(graded: Path, learner: str, page, responses: list, log: Path) -> None:
    """Wait until the gradebook holds the typed score and comment (the state that counts, not
    one network event); on a timeout, say what the gradebook, the page and the server saw."""
    deadline, seen = time.monotonic() + 60, None
    while time.monotonic() < deadline:
        seen = _saved(graded, learner)
        if seen == (float(POINTS), COMMENT):
            return
        page.wait_for_timeout(250)
    api = [r for r in responses if "/formgrader/api/" in r]
    pytest.fail(
        f"the formgrader did not save the manual grade within 60 s: the gradebook holds {seen}; "
        f"the page's formgrader requests: {api[-12:]}; server log: {log.read_text()[-3000:]}"
    )


def test_a_written_answer_is_graded_by_hand_and_its_points_reach_the_feedback(
    exchange_term, tmp_path
):
    chromium = _chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed")
    cls = exchange_term.cls
    ada = cls.ada.name
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with instructor_lab(cls.graded, tmp_path) as (base, token), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        try:
            # The token in a header: the formgrader's pages load their tables by XHR, which a
            # token in the page's URL does not authenticate.
            page = browser.new_page(
                viewport={"width": 1400, "height": 1000},
                extra_http_headers={"Authorization": f"token {token}"},
            )
            page.set_default_timeout(60_000)
            responses: list[str] = []  # every answer the page got, for a failure's message
            page.on(
                "response", lambda r: responses.append(f"{r.status} {r.request.method} {r.url}")
            )
            row = _gradebook_row(page, base, ada)
            _shot(page, "1-gradebook")
            assert row.locator("td.needs-manual-grade .glyphicon-ok").count() == 1, row.inner_text()
            bob_row = page.locator("#main-table tr", has_text=cls.bob.name)  # his late answer
            assert bob_row.locator("td.needs-manual-grade .glyphicon-ok").count() == 1

            href = row.locator("a.name-shown").get_attribute("href")  # names may be hidden
            page.goto(f"{base}{href[href.index('/formgrader/') :]}")
            score = page.locator(f"input.score#{WRITTEN}")
            score.wait_for()
            answer = score.locator("xpath=ancestor::*[contains(@class,'nbgrader_cell')][1]")
            assert "81 small ones" in answer.inner_text(), answer.inner_text()[:500]
            for box, value in (
                (score, POINTS),
                (page.locator(f"textarea#{WRITTEN}-comment"), COMMENT),
            ):
                box.click()  # as an instructor does: type, then leave the box (it saves itself)
                box.press("Control+A")
                box.press_sequentially(value)
                box.press("Tab")
            _wait_until_saved(cls.graded, ada, page, responses, tmp_path / "server.log")
            score.scroll_into_view_if_needed()
            _shot(page, "2-manual-grade")

            row = _gradebook_row(page, base, ada)
            assert row.locator("td.needs-manual-grade .glyphicon-ok").count() == 0
            _shot(page, "3-graded")
        finally:
            browser.close()

    # GUIDE §5: regenerate the feedback in graded/, release it; ada fetches it.
    subprocess.run(["chown", "-R", f"{cls.instructor.name}:", cls.graded], check=True)
    cls.return_feedback(cls.ada)
    (fetched,) = cls.feedback_html(cls.ada)  # her one submission's feedback, fetched again
    html = fetched.read_text()
    assert COMMENT in html.replace("&#39;", "'"), html[-3000:]
    written = re.search(rf'name="{WRITTEN}"[\s\S]*?Score:\s*([\d.]+)\s*/\s*([\d.]+)', html)
    assert written and float(written.group(1)) == float(POINTS), written and written.group(0)
