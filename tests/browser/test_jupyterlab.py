"""JupyterLab + headless Chromium + Playwright: what a user sees.

Opens a notebook in a real JupyterLab, runs ``%%agent`` on a paced faux model, watches
the text stream into the AgentView, checks that hostile Markdown executes nothing,
clicks Abort and sees "aborted". Screenshots land in ``tests/browser/artifacts/``.
"""

from __future__ import annotations

import time

import pytest
from harness import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, TOKEN, free_port, lab_server, wait_prompt_done, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

# (older names, kept for test modules that import them from here: test_agent_code_browser.py
# takes ARTIFACTS, CHROMIUM, TOKEN, _run_cell, _wait_prompt_done and the lab fixture)
_free_port, _wait_prompt_done = free_port, wait_prompt_done

HOSTILE = (
    "Here is **bold** text.\n\n"
    "<img src=x onerror=\"window.__pwned = 'img'\">\n\n"
    "<script>window.__pwned = 'script'</script>\n\n"
    "[a link](javascript:window.__pwned='link')\n\n"
    "```python\nprint('highlighted')\n```\n"
)

SETUP = f"""
%load_ext pi_notebook
from pi_notebook.ai.providers.faux import register_faux_provider, faux_assistant_message
faux = register_faux_provider(tokens_per_second=60)
faux.set_responses([
    faux_assistant_message({HOSTILE!r}),
    faux_assistant_message("streaming " * 400),
])
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("lab")
    write_notebook(root / "agent.ipynb", [SETUP.strip(), "%%agent -m faux/faux-1 --no-wait\nShow me some markdown.",
                                          "%%agent -m faux/faux-1 --no-wait\nNow write a very long answer."])
    with lab_server(root) as server:
        yield server.base


def _run_cell(page, index: int) -> None:
    page.evaluate(
        """async (i) => { const app = window.jupyterapp;
             app.shell.currentWidget.content.activeCellIndex = i;
             await app.commands.execute('notebook:run-cell'); }""",
        index,
    )


def test_agent_streams_renders_safely_and_aborts(lab):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{lab}/lab/workspaces/ws-{int(time.time()*1000)}/tree/agent.ipynb?reset&token={TOKEN}")
        page.wait_for_function(
            "() => window.jupyterapp?.shell.currentWidget?.sessionContext?.session?.kernel?.status === 'idle'",
            timeout=60_000,
        )
        nb_id = page.evaluate("() => window.jupyterapp.shell.currentWidget.id")
        nb = page.locator(f"#{nb_id}")
        cells = nb.locator(".jp-Cell")

        _run_cell(page, 0)
        _wait_prompt_done(cells.nth(0))

        # 1. hostile markdown: rendered, nothing executes
        _run_cell(page, 1)
        view1 = cells.nth(1).locator(".jp-OutputArea-output")
        view1.get_by_text("bold").first.wait_for(timeout=30_000)
        page.wait_for_timeout(1500)  # let the paced stream finish
        assert page.evaluate("() => window.__pwned") is None
        assert cells.nth(1).locator(".jp-OutputArea-output script").count() == 0
        assert cells.nth(1).locator(".jp-OutputArea-output img[onerror]").count() == 0
        assert cells.nth(1).locator(".jp-OutputArea-output a[href^='javascript']").count() == 0
        page.screenshot(path=str(ARTIFACTS / "agentview-markdown.png"), full_page=True)

        # 2. a long paced answer streams; Abort stops it
        _run_cell(page, 2)
        out2 = cells.nth(2).locator(".jp-OutputArea-output")
        out2.get_by_text("streaming").first.wait_for(timeout=30_000)
        first = out2.inner_text()
        page.wait_for_timeout(700)
        assert len(out2.inner_text()) > len(first), "text did not stream"
        page.screenshot(path=str(ARTIFACTS / "agentview-streaming.png"), full_page=True)
        out2.get_by_role("button", name="Abort").click()
        out2.get_by_text("aborted").first.wait_for(timeout=10_000)
        page.screenshot(path=str(ARTIFACTS / "agentview-aborted.png"), full_page=True)
        assert page.evaluate("() => window.__pwned") is None
        browser.close()
