"""A notebook executed headless (nbclient), exported with ``jupyter nbconvert --to html`` and
opened in Chromium: what a reader of the saved notebook sees.

The ``%%agent`` cell runs with ``--approve auto`` on a faux model that runs code printing a
DataFrame and then answers with hostile HTML. In the exported page the agent's code and its text
output are monospaced blocks (so the DataFrame's columns line up), no widget error text shows,
and nothing from the model becomes live HTML. Screenshots: ``artifacts/nbconvert-*.png``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from harness import ARTIFACTS, launch
from nbclient import NotebookClient

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
CODE = ("import pandas as pd\n"
        "df = pd.DataFrame({'name': ['a', 'bbbbbbbb', 'cc'], 'value': [1, 22222, 333]})\n"
        "print(df)\n")
ANSWER = ("The table is above.\n\n"
          "<script>window.__pwned = 'script'</script>\n\n"
          "<img src=x onerror=\"window.__pwned = 'img'\">\n\n"
          "<b onmouseover=\"window.__pwned = 'b'\">bold?</b> and [a link](javascript:window.__pwned='a')\n")
RAISES = "print('printed first')\nratio = 1 / 0\n"
SETUP = f"""\
%load_ext pi_notebook
from pi_notebook.ai.providers.faux import register_faux_provider, faux_assistant_message, faux_tool_call
faux = register_faux_provider()
faux.set_responses([
    faux_assistant_message([faux_tool_call('python', {{'code': {CODE!r}}})], stop_reason='toolUse'),
    faux_assistant_message([faux_tool_call('python', {{'code': {RAISES!r}}})], stop_reason='toolUse'),
    faux_assistant_message({ANSWER!r}),
])
"""

_FONTS = """(root) => [...root.querySelectorAll('pre')].map((p) => ({
  text: p.innerText, font: getComputedStyle(p).fontFamily, space: getComputedStyle(p).whiteSpace,
  border: getComputedStyle(p).borderTopWidth, bg: getComputedStyle(p).backgroundColor,
  output: !!p.closest('.pi-outbox') }))"""


def test_exported_transcript_is_static_and_monospaced(tmp_path):
    from playwright.sync_api import sync_playwright

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(SETUP),
                nbformat.v4.new_code_cell("%%agent -m faux/faux-1 --approve auto\nShow me a table.")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    env_before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(REPO)  # the kernel imports this checkout's pi_notebook
    try:
        NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}},
                       store_widget_state=True).execute()
    finally:
        if env_before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = env_before
    path = tmp_path / "agent.ipynb"
    nbformat.write(nb, path)
    done = subprocess.run([sys.executable, "-m", "nbconvert", "--to", "html", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    html_path = tmp_path / "agent.html"

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_page(viewport={"width": 1000, "height": 900})
        page.goto(html_path.as_uri())
        out = page.locator(".jp-Cell").nth(1).locator(".jp-OutputArea")
        out.locator(".pi-transcript").wait_for(timeout=10_000)
        text = out.inner_text()
        pres = out.evaluate(_FONTS)
        code = [p for p in pres if "pd.DataFrame" in p["text"]]
        table = [p for p in pres if "bbbbbbbb" in p["text"] and "22222" in p["text"] and "DataFrame" not in p["text"]]
        assert code and table, pres
        for block in code + table:
            assert "mono" in block["font"].lower(), block  # fenced: monospaced
            assert block["space"].startswith("pre"), block  # line breaks and spaces kept
        # the code has a box of its own; its output sits in the output box below it
        assert code[0]["border"] == "1px" and code[0]["bg"] not in ("rgba(0, 0, 0, 0)", "transparent"), code
        assert table[0]["output"] and not code[0]["output"], (code, table)
        # code that printed and then raised: the print and the trimmed traceback
        assert "printed first" in text and "ZeroDivisionError" in text and "ratio = 1 / 0" in text
        rows = [line for line in table[0]["text"].splitlines() if line.strip()]
        assert len({len(r) for r in rows}) == 1, rows  # the DataFrame's columns line up
        for broken in ("Error displaying widget", "model not found", "Loading widget"):
            assert broken not in text
        assert "The table is above." in text
        page.mouse.move(0, 0)
        for b in out.locator("b").all():
            b.hover()
        assert page.evaluate("() => window.__pwned") is None
        assert out.locator("script").count() == 0 and out.locator("img[onerror]").count() == 0
        protocols = out.evaluate("(e) => [...e.querySelectorAll('a')].map((a) => a.protocol)")
        assert "javascript:" not in protocols, protocols
        for width in (1000, 800):
            page.set_viewport_size({"width": width, "height": 900})
            page.locator(".jp-Cell").nth(1).screenshot(path=str(ARTIFACTS / f"nbconvert-{width}.png"))
        browser.close()
