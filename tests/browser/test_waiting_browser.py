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
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from test_jupyterlab import CHROMIUM, TOKEN, _free_port, _wait_prompt_done

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

ARTIFACTS = Path(__file__).parent / "artifacts"
SETUP = """\
%load_ext pi_notebook
from pi_notebook.ai.providers.faux import register_faux_provider, faux_assistant_message
faux = register_faux_provider(tokens_per_second=30)
faux.set_responses([faux_assistant_message('streaming ' * 400), faux_assistant_message('again ' * 400),
                    faux_assistant_message('third ' * 400)])
print('ipykernel', __import__('ipykernel').__version__)
"""
CELLS = [SETUP, "%%agent -m faux/faux-1\nTalk for a long while.",
         "waited = len(__import__('pi_notebook').get_agent().state.messages)\nprint('after the run', waited)",
         "%agent status", "%agent reset"]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM} (apt-get install chromium)")
    root = tmp_path_factory.mktemp("lab")
    nb = {"nbformat": 4, "nbformat_minor": 5,
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "cells": [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": None,
                     "outputs": [], "source": src} for i, src in enumerate(CELLS)]}
    (root / "waiting.ipynb").write_text(json.dumps(nb))
    port = _free_port()
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(root / "cfg"), JUPYTER_RUNTIME_DIR=str(root / "rt"))
    env.pop("PI_NOTEBOOK_WAIT", None)
    kernel_python = os.environ.get("PI_NOTEBOOK_KERNEL_PYTHON")
    if kernel_python:  # e.g. a venv with ipykernel 6.29, as for the kernel tests
        spec = root / "share" / "kernels" / "python3"
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [kernel_python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (ipykernel)", "language": "python"}))
        env["JUPYTER_PATH"] = str(root / "share")
    with open(root / "lab.log", "w") as log:  # the server keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
             f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={root}",
             "--LabApp.expose_app_in_browser=True", "--allow-root"],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=1)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.terminate()
                pytest.fail("JupyterLab did not start:\n" + (root / "lab.log").read_text()[-2000:])
            time.sleep(0.3)
    yield base
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


def _start_cell(page, index: int) -> None:
    """Run a cell without waiting for it (the command's promise ends with the execution)."""
    page.evaluate("""(i) => { const app = window.jupyterapp;
                     app.shell.currentWidget.content.activeCellIndex = i;
                     app.commands.execute('notebook:run-cell'); }""", index)


def _running(cell) -> bool:
    return "[*]" in cell.locator(".jp-InputArea-prompt").inner_text()


def test_waiting_in_jupyterlab(lab):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"])
        page = browser.new_page(viewport={"width": 1300, "height": 1400})
        page.goto(f"{lab}/lab/workspaces/ws-{int(time.time() * 1000)}/tree/waiting.ipynb?reset&token={TOKEN}")
        page.wait_for_function(
            "() => window.jupyterapp?.shell.currentWidget?.sessionContext?.session?.kernel?.status === 'idle'",
            timeout=60_000)
        nb = page.locator("#" + page.evaluate("() => window.jupyterapp.shell.currentWidget.id"))
        cells = nb.locator(".jp-Cell")
        _start_cell(page, 0)
        _wait_prompt_done(cells.nth(0))
        print(cells.nth(0).locator(".jp-OutputArea").inner_text())  # which ipykernel

        # 1. the first %%agent (auto mode, JPY_SESSION_NAME set by the server) returns once shown
        started = time.monotonic()
        _start_cell(page, 1)
        cells.nth(1).get_by_text("streaming").first.wait_for(timeout=30_000)
        _wait_prompt_done(cells.nth(1), timeout_ms=10_000)
        returned_after = time.monotonic() - started
        assert returned_after < 8, f"%%agent held the notebook for {returned_after:.1f} s"
        assert cells.nth(1).get_by_role("button", name="Abort").count() == 1

        # 2. a plain cell waits and says so; status and reset typed meanwhile run at once
        _start_cell(page, 2)
        cells.nth(2).get_by_text("waiting for the agent run above").wait_for(timeout=10_000)
        page.screenshot(path=str(ARTIFACTS / "waiting-plain-cell.png"), full_page=True)
        _start_cell(page, 3)
        cells.nth(3).get_by_text("run: active").wait_for(timeout=5_000)
        assert _running(cells.nth(2)), "the plain cell should still be waiting"
        _start_cell(page, 4)
        cells.nth(4).get_by_text("Aborting the run").wait_for(timeout=5_000)
        cells.nth(2).locator(".jp-OutputArea").get_by_text("after the run 0").wait_for(timeout=10_000)
        _wait_prompt_done(cells.nth(2), timeout_ms=10_000)
        assert "waiting for the agent run" not in cells.nth(2).inner_text()  # the line went away
        # (0 messages: the reset took effect when the aborted run ended, before the cell went on)
        page.screenshot(path=str(ARTIFACTS / "waiting-control-cells.png"), full_page=True)

        # 3. Stop while a plain cell waits: one line, no traceback
        _start_cell(page, 1)
        cells.nth(1).get_by_text("again").first.wait_for(timeout=30_000)
        _wait_prompt_done(cells.nth(1), timeout_ms=10_000)
        _start_cell(page, 2)
        cells.nth(2).get_by_text("waiting for the agent run above").wait_for(timeout=10_000)
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:interrupt-kernel')")
        cells.nth(2).get_by_text("Interrupted:").wait_for(timeout=10_000)
        text = cells.nth(2).locator(".jp-OutputArea").inner_text()
        assert "run was aborted" in text
        for internal in ("CancelledError", "Traceback", "pi_notebook.magics", "KeyboardInterrupt"):
            assert internal not in text, text
        page.screenshot(path=str(ARTIFACTS / "waiting-stopped.png"), full_page=True)

        # 4. the kernel shut down while a run streams: the dead kernel's view offers no buttons
        _wait_prompt_done(cells.nth(2), timeout_ms=10_000)
        _start_cell(page, 1)
        cells.nth(1).get_by_text("third").first.wait_for(timeout=30_000)
        _wait_prompt_done(cells.nth(1), timeout_ms=10_000)
        abort = cells.nth(1).get_by_role("button", name="Abort")
        assert abort.count() == 1
        # (without the kernel's close-at-shutdown hook the button stayed, not even marked
        # disconnected; a restart instead gets JupyterLab's own "disconnected" marking, and
        # the kernel's closes arrive after JupyterLab dropped the comms)
        page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.shutdown()")
        abort.wait_for(state="detached", timeout=15_000)
        page.screenshot(path=str(ARTIFACTS / "waiting-kernel-shut-down.png"), full_page=True)
        browser.close()
