"""Missing optional pieces skip their tests with one line outside CI, and fail under CI."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = (Path(__file__).parent / "conftest.py").read_text()
BROWSER_TEST = """
import pytest
pytestmark = pytest.mark.browser

def test_needs_browser():
    assert True
"""


def _run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: bool) -> pytest.RunResult:
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nmarkers =\n    browser: b\n    local_model: l\n")
    pytester.makepyfile(test_b=BROWSER_TEST)
    monkeypatch.setenv("PI_NOTEBOOK_CHROMIUM", str(pytester.path / "no-such-chromium"))
    if ci:
        monkeypatch.setenv("PI_NOTEBOOK_CI", "1")
    else:
        monkeypatch.delenv("PI_NOTEBOOK_CI", raising=False)
    return pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")


def test_missing_chromium_skips_with_one_line_outside_ci(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, ci=False)
    result.assert_outcomes(skipped=1)
    lines = [line for line in result.outlines if line.startswith("pi_notebook: skipped")]
    assert len(lines) == 1 and "no-such-chromium" in lines[0]


def test_missing_chromium_fails_under_ci(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, ci=True)
    result.assert_outcomes(errors=1)  # failed in setup: the test body never ran
    assert any("required under CI" in line for line in result.outlines)
    assert not any(line.startswith("pi_notebook: skipped") for line in result.outlines)
