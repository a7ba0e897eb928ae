"""Shared pieces of the browser tests: a JupyterLab server, headless Chromium, cells, themes.

One JupyterLab server per test module (``lab_server``), started on a free port in a temporary
root with its own config and runtime directories; notebooks are written into that root. The
browser is the system Chromium (Playwright only drives it; it never downloads one). JupyterLab
is started with ``expose_app_in_browser`` so a test can run Lab commands
(``window.jupyterapp.commands``) instead of hunting for menu items.

``shoot`` takes a screenshot of one element at each width and theme of the matrix (1400 and
800 px, JupyterLab Light and Dark), calling a check at each one, so that what the test asserts
from the DOM is asserted at every size and theme the screenshots show.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("PI_NOTEBOOK_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).parent / "artifacts"
TOKEN = "pi-notebook-browser-test"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
WIDTHS = (1400, 800)
THEMES = ("light", "dark")
HEIGHT = 900
_THEME_NAMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}
# The news toast would sit over the notebook in screenshots.
# The page of the latest Notebook: conftest.py screenshots it when a test fails.
LAST_PAGE: Any = None
_PAGE_CONFIG = {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_notebook(path: Path, cells: list[str]) -> None:
    nb = {"nbformat": 4, "nbformat_minor": 5,
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "cells": [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": None,
                     "outputs": [], "source": src} for i, src in enumerate(cells)]}
    path.write_text(json.dumps(nb))


@dataclass
class Lab:
    base: str
    root: Path
    app: str = "jupyterlab"  # or "notebook" (Jupyter Notebook 7, the same page harness)


_EXPOSE = {"jupyterlab": "--LabApp.expose_app_in_browser=True",
           "notebook": "--JupyterNotebookApp.expose_app_in_browser=True"}


@contextlib.contextmanager
def lab_server(root: Path, env_extra: dict[str, str] | None = None, app: str = "jupyterlab") -> Iterator[Lab]:
    """A JupyterLab (or, ``app="notebook"``, Notebook 7) server serving ``root``; a server
    that exits early fails at once, with its log."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM} (apt-get install chromium)")
    (root / "cfg" / "labconfig").mkdir(parents=True, exist_ok=True)
    (root / "cfg" / "labconfig" / "page_config.json").write_text(json.dumps(_PAGE_CONFIG))
    port = free_port()
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(root / "cfg"), JUPYTER_RUNTIME_DIR=str(root / "rt"))
    env.pop("PI_NOTEBOOK_WAIT", None)
    env.update(env_extra or {})
    log_path = root / "lab.log"
    with open(log_path, "w") as log:  # the server keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [sys.executable, "-m", app, "--no-browser", "--ip=127.0.0.1", f"--port={port}",
             f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={root}",
             _EXPOSE[app], "--allow-root"],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=1)
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"JupyterLab exited with code {proc.returncode} before answering:\n"
                                + log_path.read_text()[-2000:])
                if time.monotonic() > deadline:
                    pytest.fail(f"{app} did not start in 60 s:\n" + log_path.read_text()[-2000:])
                time.sleep(0.3)
        yield Lab(base, root, app)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def launch(pw: Any) -> Any:
    return pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


class Notebook:
    """A notebook opened in a fresh JupyterLab workspace (or its Notebook 7 page), with a
    ready kernel."""

    def __init__(self, browser: Any, lab: Lab, name: str, width: int = WIDTHS[0]) -> None:
        global LAST_PAGE
        self.page = LAST_PAGE = browser.new_page(viewport={"width": width, "height": HEIGHT})
        self.errors: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.theme = "light"
        if lab.app == "notebook":  # Notebook 7: one page per notebook, no workspace to restore
            self.page.goto(f"{lab.base}/notebooks/{name}?token={TOKEN}")
        else:
            self.page.goto(f"{lab.base}/lab/workspaces/ws-{int(time.time() * 1000)}/tree/{name}"
                           f"?reset&token={TOKEN}")
        self.wait_kernel_idle()
        self.root = self.page.locator("#" + self.page.evaluate("() => window.jupyterapp.shell.currentWidget.id"))
        self.cells = self.root.locator(".jp-Cell")

    def errors_but_restart(self) -> list[str]:
        """The page's errors less the one a kernel restart causes in JupyterLab itself: the
        requests still pending on the old kernel (a view's subshell request among them) are
        cancelled and reported as "Canceled future for …"."""
        return [e for e in self.errors if not e.startswith("Error: Canceled future for")]

    def wait_kernel_idle(self, timeout_ms: int = 60_000) -> None:
        self.page.wait_for_function(
            "() => window.jupyterapp?.shell.currentWidget?.sessionContext?.session?.kernel?.status === 'idle'",
            timeout=timeout_ms)

    def cell(self, index: int) -> Any:
        return self.cells.nth(index)

    def output(self, index: int) -> Any:
        return self.cell(index).locator(".jp-OutputArea")

    def start(self, index: int) -> None:
        """Run a cell without waiting for it."""
        self.page.evaluate("""(i) => { const app = window.jupyterapp;
                              app.shell.currentWidget.content.activeCellIndex = i;
                              app.commands.execute('notebook:run-cell'); }""", index)

    def run(self, index: int, timeout_ms: int = 60_000) -> None:
        self.start(index)
        self.wait_done(index, timeout_ms)

    def running(self, index: int) -> bool:
        return "[*]" in self.cell(index).locator(".jp-InputArea-prompt").inner_text()

    def wait_done(self, index: int, timeout_ms: int = 60_000) -> None:
        # kernel.status is not a reliable "cell finished" signal (subshells flip it); the
        # prompt leaving [*] for a number is.
        wait_prompt_done(self.cell(index), timeout_ms)

    def set_theme(self, theme: str) -> None:
        if theme == self.theme:
            return
        self.page.evaluate("(t) => window.jupyterapp.commands.execute('apputils:change-theme', {theme: t})",
                           _THEME_NAMES[theme])
        light = "true" if theme == "light" else "false"
        self.page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{light}'")
        self.page.wait_for_timeout(400)  # the theme's stylesheet applies after the attribute flips
        self.theme = theme

    def set_width(self, width: int) -> None:
        if self.page.viewport_size["width"] != width:
            self.page.set_viewport_size({"width": width, "height": HEIGHT})
            self.page.wait_for_timeout(250)  # Lab relayouts on resize

    def shoot(self, name: str, target: Any, check: Callable[[int, str], None] | None = None,
              widths: tuple[int, ...] = WIDTHS, themes: tuple[str, ...] = THEMES) -> list[Path]:
        """Screenshot ``target`` at every width x theme (``check(width, theme)`` first).

        Saved as ``artifacts/<name>-<width>-<theme>.png``; the page is left light at the
        first width."""
        ARTIFACTS.mkdir(exist_ok=True)
        paths = []
        order = [(w, t) for t in themes for w in (widths if t == themes[0] else tuple(reversed(widths)))]
        for width, theme in order:
            self.set_width(width)
            self.set_theme(theme)
            target.scroll_into_view_if_needed()
            if check is not None:
                check(width, theme)
            path = ARTIFACTS / f"{name}-{width}-{theme}.png"
            self._screenshot(target, path, width)
            paths.append(path)
        self.set_theme(themes[0])
        self.set_width(widths[0])
        return paths

    def _screenshot(self, target: Any, path: Path, width: int) -> None:
        # Lab's layout is fixed to the window: an element taller than the notebook area
        # would be shot with the status bar over it, so the window grows for the shot
        # (after the checks ran at the normal height).
        b = target.bounding_box()
        tall = b is not None and b["height"] > HEIGHT - 160
        if tall:
            self.page.set_viewport_size({"width": width, "height": min(int(b["height"]) + 260, 3000)})
            self.page.wait_for_timeout(300)
            target.scroll_into_view_if_needed()
        target.screenshot(path=str(path))
        if tall:
            self.page.set_viewport_size({"width": width, "height": HEIGHT})
            self.page.wait_for_timeout(250)

    def close(self) -> None:
        self.page.close()


def wait_prompt_done(cell: Any, timeout_ms: int = 60_000) -> None:
    prompt = cell.locator(".jp-InputArea-prompt")
    deadline = time.monotonic() + timeout_ms / 1000
    while time.monotonic() < deadline:
        text = prompt.inner_text()
        if "[*]" not in text and any(ch.isdigit() for ch in text):
            return
        time.sleep(0.1)
    raise AssertionError(f"cell still running: {prompt.inner_text()!r}")


def box(locator: Any) -> dict[str, float]:
    b = locator.bounding_box()
    assert b is not None, f"{locator} is not rendered"
    return b
