"""What agent code does to the user's variables, as a user sees it in JupyterLab: the approval
card says what the code assigns, deletes and changes; after the call the card lists the
changes; the Undo button under the finished run puts them back and says so where it was
clicked; after a kernel restart a button left live is hidden and a line says why.
Screenshots at 1400 and 800 px, light and dark (``artifacts/undo-*.png``)."""

from __future__ import annotations

import pytest
from harness import Notebook, lab_server, launch, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

SETUP = """\
%load_ext pi_notebook
from pi_notebook.ai.providers.faux import register_faux_provider, faux_assistant_message, faux_tool_call
faux = register_faux_provider(tokens_per_second=None)
import pandas as pd
df = pd.DataFrame({'a': [1, 2, 3], 'b': [1.0, 2.0, 3.0]})
monthly = [100, 200]
old = 'keep'
"""
CODE = """monthly = [m * 2 for m in monthly]
del old
df['c'] = df['a'] * 2
df.pop('b')
notes = 'made by the agent'
"""
SCRIPT = (f"faux.set_responses([faux_assistant_message([faux_tool_call('python', {{'code': {CODE!r}}})], "
          "stop_reason='toolUse'), faux_assistant_message('Tidied: df has a column c, monthly doubled.')])")
CHECK = "print(monthly, 'old' in dir(), list(df.columns), 'notes' in dir())"
AGAIN = ("faux.set_responses([faux_assistant_message([faux_tool_call('python', {'code': 'monthly.append(1)'})], "
         "stop_reason='toolUse'), faux_assistant_message('Appended.')])")
CELLS = [SETUP, SCRIPT, "%%agent -m faux/faux-1 --approve ask\nTidy the data.", CHECK, AGAIN,
         "%%agent -m faux/faux-1 --approve auto\nAppend one."]


def _fits(locator) -> None:  # type: ignore[no-untyped-def]
    """No text of ``locator`` runs out of it to the right (cut or hidden)."""
    overflow = locator.evaluate("""(el) => { const r = el.getBoundingClientRect();
        return [...el.querySelectorAll('li, .pi-undo-line, button')].filter(
            (e) => e.getBoundingClientRect().right > r.right + 1).map((e) => e.textContent); }""")
    assert overflow == [], overflow


def test_the_card_says_what_changes_and_the_undo_button_puts_it_back(tmp_path):
    from playwright.sync_api import sync_playwright

    write_notebook(tmp_path / "undo.ipynb", CELLS)
    with lab_server(tmp_path) as lab, sync_playwright() as pw:
        browser = launch(pw)
        try:
            nb = Notebook(browser, lab, "undo.ipynb")
            nb.run(0)
            nb.run(1)
            nb.start(2)
            view = nb.output(2).locator(".pi-agent").first
            panel = view.locator(".pi-approval")
            panel.wait_for(timeout=60_000)
            card = view.locator(".pi-tool").first
            before = card.locator(".pi-ns").first
            text = before.inner_text()
            assert "assigns monthly, which you created" in text
            assert "deletes old, which you created" in text
            assert "changes df['c'] = … in df, which you created; calls df.pop(…)" in text
            assert "creates notes" in text
            nb.shoot("undo-approval", card, lambda w, t: _fits(card))

            panel.locator(".pi-approval-buttons button").first.click()
            nb.wait_done(2)
            transcript = nb.output(2).locator(".pi-transcript")
            transcript.wait_for(timeout=30_000)
            changed = transcript.inner_text()
            assert "Variables changed:" in changed
            assert "df changed in place: DataFrame 3×2, columns added 'c'; columns removed 'b'" in changed
            assert "monthly rebound: list of 2 → list of 2 (another value)" in changed
            assert "old deleted" in changed and "notes created" in changed
            bar = nb.output(2).locator(".pi-undo")
            button = bar.locator("button.pi-undo-button")
            button.wait_for(timeout=30_000)
            assert button.is_enabled() and "monthly" in bar.inner_text()
            nb.shoot("undo-finished", nb.output(2), lambda w, t: _fits(bar))

            button.click()
            done = nb.output(2).locator(".pi-undo-done")
            done.wait_for(timeout=30_000)
            message = done.inner_text()
            assert "restored df, monthly, old" in message and "removed notes (created by the run)" in message
            assert nb.output(2).locator("button.pi-undo-button").count() == 0  # no dead button left
            nb.shoot("undo-done", done, widths=(1400,), themes=("light",))
            nb.run(3)
            assert "[100, 200] True ['a', 'b'] False" in nb.output(3).inner_text()

            # a live button whose kernel restarts: hidden, one line says why
            nb.run(4)
            nb.run(5)
            bar = nb.output(5).locator(".pi-undo")
            bar.locator("button.pi-undo-button").wait_for(timeout=30_000)
            nb.page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart()")
            nb.output(5).locator(".pi-undo.jupyter-widgets-disconnected").wait_for(state="attached", timeout=30_000)
            nb.wait_kernel_idle()

            def dead(width: int, theme: str) -> None:
                assert not bar.locator("button.pi-undo-button").is_visible()
                note = bar.evaluate("(e) => getComputedStyle(e, '::before').content")
                assert "its kernel is gone" in note, note

            nb.shoot("undo-restarted", bar, dead, widths=(1400,), themes=("light",))
            assert nb.errors_but_restart() == [], nb.errors  # the test restarted the kernel
        finally:
            browser.close()
