"""An outside agent's call in JupyterLab: the card in the ``%agent serve`` cell, at 1400 and
800 px, light and dark; Run answers the waiting client. The client is the SDK's, in its own
process (tests/helpers/mcp_client.py)."""

from __future__ import annotations

import re

import pytest
from harness import Notebook, box, lab_server, launch, write_notebook

from helpers.serve import calls, finish, start_client

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


def test_an_outside_call_asks_in_the_serve_cell_and_run_answers_the_client(tmp_path):
    from playwright.sync_api import sync_playwright

    serve_dir = tmp_path / "serve"
    write_notebook(tmp_path / "serve.ipynb", ["%load_ext pi_notebook\n%agent serve"])
    with lab_server(tmp_path, env_extra={"PI_NOTEBOOK_SERVE_DIR": str(serve_dir),
                                         "PI_NOTEBOOK_APPROVAL": "ask"}) as lab, sync_playwright() as pw:
        browser = launch(pw)
        try:
            nb = Notebook(browser, lab, "serve.ipynb")
            nb.run(0, timeout_ms=120_000)
            printed = nb.output(0).inner_text()
            url = re.search(r"http://127\.0\.0\.1:\d+/mcp", printed)
            assert url, printed
            token = next(serve_dir.glob("*.token")).read_text().strip()
            assert token not in printed
            client = start_client({"url": url.group(0), "token": token, "name": "claude-code", "steps": [
                ["call", "execute", {"code": "print('from outside')\n6 * 7"}]]})
            view = nb.output(0).locator(".pi-agent:not(.pi-undo)")
            panel = view.locator(".pi-approval")
            panel.wait_for(timeout=120_000)
            buttons = panel.locator(".pi-approval-buttons button")

            def check(width: int, theme: str) -> None:
                area, card = box(nb.output(0)), box(view)
                assert card["x"] + card["width"] <= area["x"] + area["width"] + 1, (width, card, area)
                for i in range(3):
                    assert buttons.nth(i).is_visible(), (width, theme, i)
                text = view.inner_text()
                assert "claude-code" in text and "6 * 7" in text, text

            nb.shoot("serve-approval", view, check)
            buttons.nth(0).click()  # Run
            execute = calls(finish(client))[0]
            assert not execute["is_error"] and "42" in execute["text"], execute
            transcript = nb.output(0).locator(".pi-transcript")
            transcript.wait_for(timeout=60_000)
            assert "from outside" in transcript.inner_text()
            assert nb.errors == [], nb.errors
        finally:
            browser.close()
