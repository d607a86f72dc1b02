"""The browser module, ``test_explorer_browser.py``, run in a pytest process of its own.

When this test is collected beside that module (the whole suite), the module's tests are
deselected from this session and run as the background job ``explorer_browser``
(``conftest.MODULE_JOBS``), beside this session's slow tier. This test reads the job: it fails
with the module's own report when any of its tests fails, and skips when they all skipped (no
browser outside CI). Run the module itself to debug it: ``pytest tests/test_explorer_browser.py``.
"""

import re

import pytest

pytestmark = pytest.mark.slow
SUMMARY = re.compile(r"^=+ (.*\d+ (?:passed|failed|skipped|errors?).*) in [\d.]+s", re.M)


def test_every_browser_test_passes_in_a_process_of_its_own(explorer_browser):
    report = explorer_browser.stdout + explorer_browser.stderr
    outcome = SUMMARY.findall(report)
    assert explorer_browser.returncode == 0, report[-12_000:]
    assert outcome, report[-12_000:]
    if "passed" not in outcome[-1]:
        pytest.skip(f"the browser module: {outcome[-1]}")
