"""JupyterLab + headless Chromium: ``%agent code`` puts the agent's code into a new cell below.

The agent (a scripted faux model) runs three ``python`` calls, the middle one fails; then a
cell with ``%agent code`` runs, and JupyterLab inserts the ``set_next_input`` payload as a
new cell right below it: the two calls that ran to the end, in order, the failed one left
out; the ``%agent code`` cell says so in its own output. Screenshot: ``tests/browser/artifacts/agent-code-new-cell.png``.
"""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
from test_jupyterlab import ARTIFACTS, CHROMIUM, TOKEN, _run_cell, _wait_prompt_done
from test_jupyterlab import lab  # noqa: F401  (the JupyterLab server fixture)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

SETUP = """
%load_ext pi_notebook
%config AgentMagics.approval = 'auto'
from pi_notebook.ai.providers.faux import register_faux_provider, faux_assistant_message, faux_tool_call
faux = register_faux_provider(tokens_per_second=None)
def call(code):
    return faux_assistant_message([faux_tool_call('python', {'code': code})], stop_reason='toolUse')
faux.set_responses([
    call('answer_base = 6 * 7'),
    call('answer_base / undefined_divisor'),
    call('answer = answer_base + 1\\nprint(answer)'),
    faux_assistant_message('The answer is 43.'),
])
"""


def _notebook() -> dict:
    cells = [SETUP.strip(), "%%agent -m faux/faux-1 --wait\nCompute the answer.", "%agent code"]
    nb = {
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "cells": [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": None,
                   "outputs": [], "source": src} for i, src in enumerate(cells)],
    }
    return nb


def _upload(base: str, name: str) -> None:
    """Put this module's notebook into the server's root through the contents API."""
    body = json.dumps({"type": "notebook", "format": "json", "content": _notebook()}).encode()
    request = urllib.request.Request(f"{base}/api/contents/{name}?token={TOKEN}", data=body,
                                     method="PUT", headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=30).close()


def _source(page, index: int) -> str:
    return page.evaluate("(i) => window.jupyterapp.shell.currentWidget.content.model.cells.get(i)"
                         ".sharedModel.getSource()", index)


def test_agent_code_creates_the_new_cell_below(lab):  # noqa: F811
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    _upload(lab, "code.ipynb")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"],
        )
        page = browser.new_page(viewport={"width": 1300, "height": 1100})
        page.goto(f"{lab}/lab/workspaces/ws-{int(time.time()*1000)}/tree/code.ipynb?reset&token={TOKEN}")
        page.wait_for_function(
            "() => window.jupyterapp?.shell.currentWidget?.sessionContext?.session?.kernel?.status === 'idle'",
            timeout=60_000,
        )
        nb_id = page.evaluate("() => window.jupyterapp.shell.currentWidget.id")
        cells = page.locator(f"#{nb_id} .jp-Cell")
        count = lambda: page.evaluate("() => window.jupyterapp.shell.currentWidget.content.model.cells.length")  # noqa: E731
        assert count() == 3

        _run_cell(page, 0)
        _wait_prompt_done(cells.nth(0))
        _run_cell(page, 1)  # --wait: the prompt leaves [*] when the run has ended
        _wait_prompt_done(cells.nth(1))
        cells.nth(1).get_by_text("The answer is 43.").first.wait_for(timeout=30_000)
        _run_cell(page, 2)
        _wait_prompt_done(cells.nth(2))
        page.wait_for_function(
            "() => window.jupyterapp.shell.currentWidget.content.model.cells.length === 4", timeout=15_000)
        assert _source(page, 2) == "%agent code"  # the new cell is below, the cell itself kept
        said = cells.nth(2).locator(".jp-OutputArea").inner_text().strip()
        assert said.startswith("The code of the latest run (") and said.endswith("is in a new cell below."), said
        code = _source(page, 3)
        assert "answer_base = 6 * 7" in code and "answer = answer_base + 1\nprint(answer)" in code
        assert code.index("answer_base = 6 * 7") < code.index("answer = answer_base + 1")
        assert "undefined_divisor" not in code and "Left out: 1 failed attempt" in code
        cells.nth(3).scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "agent-code-new-cell.png"), full_page=True)
        browser.close()
