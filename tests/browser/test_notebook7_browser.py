"""Jupyter Notebook 7 with the same browser harness: what works in Lab works here.

A run that streams, an approval (Run), Abort, a plain cell waiting behind a run, and
``%agent code`` (the new cell below, and the line that says so). Screenshots at 1400 and
800 px, light and dark: ``tests/browser/artifacts/nb7-*.png``.
"""

from __future__ import annotations

import pytest
from harness import Notebook, lab_server, launch, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

SETUP = """\
%load_ext pi_notebook
from pi_notebook.ai.providers.faux import register_faux_provider, faux_assistant_message, faux_tool_call
faux = register_faux_provider(tokens_per_second=40)
print('notebook', __import__('notebook').__version__)
"""
CODE = "total = 6 * 7\nprint('total is', total)"
CELLS = [
    SETUP,
    "faux.set_responses([faux_assistant_message([faux_tool_call('python', {'code': %r})],\n"
    "    stop_reason='toolUse'), faux_assistant_message('The total is 42.')])" % CODE,
    "%%agent -m faux/faux-1 --approve ask\nCompute the total.",
    "%agent code",
    # (the new cell goes in here, at 4)
    "faux.set_responses([faux_assistant_message('streaming ' * 1500)])",
    "%%agent -m faux/faux-1\nTalk for a long while.",
    "print('after the run', len(__import__('pi_notebook').get_agent().state.messages))",
]
LONG, WAITING = 6, 7  # once the new cell is in (at 4)


def test_notebook7_run_approval_abort_waiting_and_code(tmp_path):
    from playwright.sync_api import sync_playwright

    write_notebook(tmp_path / "nb7.ipynb", CELLS)
    with lab_server(tmp_path, app="notebook") as server, sync_playwright() as pw:
        browser = launch(pw)
        nb = Notebook(browser, server, "nb7.ipynb")
        assert "/notebooks/" in nb.page.url  # Notebook 7's own page, not Lab
        # Notebook 7.6 itself logs one page error while it boots ("Cannot read properties of
        # undefined (reading 'schema')", also for a notebook without pi_notebook): the view
        # may add none.
        nb.page.wait_for_timeout(1000)
        at_boot = list(nb.errors)
        nb.run(0)
        assert "notebook 7." in nb.output(0).inner_text()

        # a run with an approval: Run, the output, the final transcript
        nb.run(1)
        nb.start(2)
        view = nb.output(2).locator(".pi-agent:not(.pi-undo)")
        panel = view.locator(".pi-approval")
        panel.wait_for(timeout=30_000)

        def approval(width: int, theme: str) -> None:
            assert panel.locator(".pi-approval-buttons button").first.is_visible()
            text, p = panel.locator(".pi-approval-text").bounding_box(), panel.bounding_box()
            assert text and p and text["width"] > 0.6 * p["width"], (text, p)  # wraps as text

        nb.shoot("nb7-approval", view, approval)
        panel.locator(".pi-approval-buttons button").first.click()  # Run
        out = nb.output(2)
        out.locator(".pi-transcript").wait_for(timeout=30_000)
        text = out.inner_text()
        assert "total is 42" in text and "The total is 42." in text and "done" in text

        # %agent code: the code of the latest run with code in a new cell below, and said so
        nb.run(3)
        nb.page.wait_for_function(
            "() => window.jupyterapp.shell.currentWidget.content.model.cells.length === 8", timeout=15_000)
        source = nb.page.evaluate(
            "() => window.jupyterapp.shell.currentWidget.content.model.cells.get(4).sharedModel.getSource()")
        assert "total = 6 * 7" in source, source
        said = nb.output(3).inner_text().strip()
        assert said.startswith("The code of the latest run") and said.endswith("in a new cell below."), said
        nb.shoot("nb7-code", nb.cell(4), widths=(1400,), themes=("light",))
        # a long run, a plain cell waiting behind it, then Abort
        nb.run(LONG - 1)
        nb.start(LONG)
        live = nb.output(LONG).locator(".pi-agent:not(.pi-undo)")
        live.get_by_text("streaming").first.wait_for(timeout=30_000)
        nb.wait_done(LONG, timeout_ms=15_000)  # the first %%agent returns once its view shows
        nb.start(WAITING)
        nb.output(WAITING).get_by_text("waiting for the agent run above").wait_for(timeout=15_000)
        assert nb.running(WAITING)
        nb.shoot("nb7-waiting", nb.root, widths=(1400,), themes=("light",))
        live.locator("button.pi-abort").click()
        final = nb.output(LONG).locator(".pi-transcript")
        final.wait_for(timeout=30_000)
        assert "aborted" in final.locator(".pi-head").inner_text()
        nb.output(WAITING).get_by_text("after the run").wait_for(timeout=15_000)
        nb.wait_done(WAITING)
        assert "waiting for the agent run" not in nb.output(WAITING).inner_text()

        assert nb.errors == at_boot, nb.errors
        browser.close()
