"""Under CI every test runs: a skip there (a program the machine lacks, a test that needs
root) is reported as a failure, so a green CI run means every test ran.  Outside CI a test
whose program is missing skips with the reason (``tests.helpers.require_tool``).

Loaded by ``tests/conftest.py``; CI is the ``CI`` variable every CI service sets
(GitHub Actions, GitLab) and ``.ci/run`` sets.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail") and in_ci():
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        report.outcome = "failed"
        report.longrepr = f"skipped under CI, where every test must run: {reason}"
