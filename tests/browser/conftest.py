"""On a failed browser test, save what the page showed (``artifacts/FAILED-<test>.png``)."""

from __future__ import annotations

import contextlib

import harness
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    page = harness.LAST_PAGE
    if report.when == "call" and report.failed and page is not None:
        harness.ARTIFACTS.mkdir(exist_ok=True)
        with contextlib.suppress(Exception):
            page.screenshot(path=str(harness.ARTIFACTS / f"FAILED-{item.name}.png"))
