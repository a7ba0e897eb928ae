"""JupyterLab + headless Chromium: waiting for agent runs as a user sees it.

- the first ``%%agent`` in auto mode returns as soon as JupyterLab shows its view (no
  environment variable says "interactive": the view's rendering does);
- a plain cell run behind the agent says that it waits, and ``%agent status`` /
  ``%agent reset`` typed while it waits take effect at once;
- Stop while a plain cell waits shows one line, no traceback;
- after the kernel shuts down mid-run, the old view offers no live Abort button.
Screenshots land in ``tests/browser/artifacts/``.
"""

from __future__ import annotations

import json
import os
import time

import pytest
from harness import ARTIFACTS, Notebook, lab_server, launch, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

SETUP = """\
%load_ext pi_notebook
from pi_notebook.ai.providers.faux import register_faux_provider, faux_assistant_message
faux = register_faux_provider(tokens_per_second=30)
faux.set_responses([faux_assistant_message('streaming ' * 1200), faux_assistant_message('again ' * 1200),
                    faux_assistant_message('third ' * 400)])
print('ipykernel', __import__('ipykernel').__version__)
"""
CELLS = [SETUP, "%%agent -m faux/faux-1\nTalk for a long while.",
         "waited = len(__import__('pi_notebook').get_agent().state.messages)\nprint('after the run', waited)",
         "%agent status", "%agent reset"]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("lab")
    write_notebook(root / "waiting.ipynb", CELLS)
    env: dict[str, str] = {}
    kernel_python = os.environ.get("PI_NOTEBOOK_KERNEL_PYTHON")
    if kernel_python:  # e.g. a venv with ipykernel 6.29, as for the kernel tests
        spec = root / "share" / "kernels" / "python3"
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [kernel_python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (ipykernel)", "language": "python"}))
        env["JUPYTER_PATH"] = str(root / "share")
    with lab_server(root, env) as server:
        yield server


def test_waiting_in_jupyterlab(lab):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = launch(pw)
        nb = Notebook(browser, lab, "waiting.ipynb", width=1400)
        page, cells = nb.page, nb.cells
        nb.run(0)
        print(nb.output(0).inner_text())  # which ipykernel

        # 1. the first %%agent (auto mode, JPY_SESSION_NAME set by the server) returns once shown
        started = time.monotonic()
        nb.start(1)
        cells.nth(1).get_by_text("streaming").first.wait_for(timeout=30_000)
        nb.wait_done(1, timeout_ms=10_000)
        returned_after = time.monotonic() - started
        assert returned_after < 8, f"%%agent held the notebook for {returned_after:.1f} s"
        assert cells.nth(1).get_by_role("button", name="Abort").count() == 1

        # 2. a plain cell waits and says so; status and reset typed meanwhile run at once
        nb.start(2)
        cells.nth(2).get_by_text("waiting for the agent run above").wait_for(timeout=10_000)
        nb.start(3)
        cells.nth(3).get_by_text("run: active").wait_for(timeout=5_000)

        def still_waiting(width: int, theme: str) -> None:
            assert nb.running(2), "the plain cell should still be waiting"
            assert nb.output(2).inner_text().strip().startswith("waiting for the agent run above")
            assert not nb.running(3), "%agent status waited behind the plain cell"

        nb.shoot("waiting-control-cells", nb.root, still_waiting)
        nb.start(4)
        cells.nth(4).get_by_text("Aborting the run").wait_for(timeout=5_000)  # not held back
        nb.output(2).get_by_text("after the run 0").wait_for(timeout=10_000)
        nb.wait_done(2, timeout_ms=10_000)
        assert "waiting for the agent run" not in cells.nth(2).inner_text()  # the line went away
        # (0 messages: the reset took effect when the aborted run ended, before the cell went on)
        page.screenshot(path=str(ARTIFACTS / "waiting-after-reset.png"))

        # 3. Stop while a plain cell waits: one line, no traceback
        nb.start(1)
        cells.nth(1).get_by_text("again").first.wait_for(timeout=30_000)
        nb.wait_done(1, timeout_ms=10_000)
        nb.start(2)
        cells.nth(2).get_by_text("waiting for the agent run above").wait_for(timeout=10_000)
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:interrupt-kernel')")
        cells.nth(2).get_by_text("Interrupted:").wait_for(timeout=10_000)
        nb.wait_done(2, timeout_ms=10_000)

        def one_line(width: int, theme: str) -> None:
            text = nb.output(2).inner_text()
            lines = [line for line in text.splitlines() if line.strip()]
            assert len(lines) == 1 and lines[0].startswith("Interrupted:"), lines
            assert "run was aborted" in text
            for internal in ("CancelledError", "Traceback", "pi_notebook.magics", "KeyboardInterrupt"):
                assert internal not in text, text

        nb.shoot("waiting-stopped", nb.cell(2), one_line)

        # 4. the kernel shut down while a run streams: the dead kernel's view offers no buttons
        nb.start(1)
        cells.nth(1).get_by_text("third").first.wait_for(timeout=30_000)
        nb.wait_done(1, timeout_ms=10_000)
        abort = cells.nth(1).get_by_role("button", name="Abort")
        assert abort.count() == 1
        # (without the kernel's close-at-shutdown hook the button stayed, not even marked
        # disconnected; a restart instead gets JupyterLab's own "disconnected" marking, and
        # the kernel's closes arrive after JupyterLab dropped the comms: test_view_browser.py)
        page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.shutdown()")
        abort.wait_for(state="detached", timeout=15_000)
        page.screenshot(path=str(ARTIFACTS / "waiting-kernel-shut-down.png"))
        assert nb.errors == [], nb.errors
        browser.close()
