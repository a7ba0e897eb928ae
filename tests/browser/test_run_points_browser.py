"""What a new user can see go wrong in JupyterLab, checked in the page.

One notebook page, the cases in order (a restart is last):

1. agent code that prints and then raises: the trimmed traceback is in the live card and in
   the static transcript;
2. the end of a run does not jump: the transcript keeps the live view's box, header line,
   "You" row and height limit; at 800 px a wide table scrolls in its own box, not the
   transcript sideways;
3. static code blocks have a box, and the output its own box below it;
6. links: one rendering live and static (a refused link is its text, a remote image a link
   "[image: …]", no stray "!");
4. a queued cell's button says "Remove"; its time in the queue is not run time; a removed
   cell shows no time;
5. thinking: expanded, the preview of its last lines goes; once the answer streams, one
   cursor;
7. after a kernel restart the page logs no "Comm not found", and live pills say "not live".

Screenshots (1400 and 800 px, light and dark) land in ``tests/browser/artifacts/``.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from harness import Notebook, box, lab_server, launch, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

SETUP = """\
%load_ext pi_notebook
from pi_notebook.ai.providers.faux import (register_faux_provider, faux_assistant_message,
    faux_text, faux_thinking, faux_tool_call)
faux = register_faux_provider(tokens_per_second=60)
def call(code):
    return faux_tool_call('python', {'code': code})
"""
RAISES = "print('before the error')\n{'a': 1}['b']\n"
LINKS = ("Links: [link](javascript:alert(1)), ![remote](https://example.com/x.png) and "
         "[the docs](https://example.com/docs).")
TABLE = ("| " + " | ".join(f"column {i}" for i in range(14)) + " |\n|" + "---|" * 14 + "\n| "
         + " | ".join(f"value {i} is wide" for i in range(14)) + " |")
LONG = ("Here is the table:\n\n" + TABLE + "\n\n" + LINKS + "\n\n"
        + "".join(f"Paragraph {i}: the answer goes on, line after line.\n\n" for i in range(40)))
THINKING = "".join(f"Step {i}: I weigh the columns and what they mean.\n" for i in range(14))

CELLS = [
    SETUP,
    # 1 print, then raise; a second call holds the view live
    f"faux.set_responses([faux_assistant_message([call({RAISES!r})], stop_reason='toolUse'),\n"
    "    faux_assistant_message([call('print(2)')], stop_reason='toolUse'),\n"
    "    faux_assistant_message('It failed on the key.')])",
    "%%agent -m faux/faux-1 --approve ask\nLook up b.",
    # 2, 3, 6: a long answer with a wide table and links, then a call that waits
    f"faux.set_responses([faux_assistant_message([faux_text({LONG!r}), call('print(3)')],\n"
    "    stop_reason='toolUse'), faux_assistant_message('Done.')])",
    "%%agent -m faux/faux-1 --approve ask\nWrite a long answer with a table.",
    # 4 the queue
    "faux.set_responses([faux_assistant_message('word ' * 500), faux_assistant_message('B is short.'),\n"
    "    faux_assistant_message('C never runs.')])",
    "%%agent -m faux/faux-1\nTalk for a while.",
    "%%agent -m faux/faux-1\nThen say B.",
    "%%agent -m faux/faux-1\nThen say C.",
    # 5 thinking, then a long answer
    f"faux.set_responses([faux_assistant_message([faux_thinking({THINKING!r}),\n"
    "    faux_text('The answer streams. ' * 120)])])",
    "%%agent -m faux/faux-1\nThink first.",
    # 7 restart while a call waits
    "faux.set_responses([faux_assistant_message([call('print(4)')], stop_reason='toolUse')])",
    "%%agent -m faux/faux-1 --approve ask\nOne more.",
]
RAISE_CELL, LONG_CELL, QUEUE_A, THINK_CELL, RESTART_CELL = 2, 4, 6, 10, 12


@pytest.fixture(scope="module")
def nb(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    root = tmp_path_factory.mktemp("lab")
    write_notebook(root / "points.ipynb", CELLS)
    with lab_server(root) as lab, sync_playwright() as pw:
        browser = launch(pw)
        notebook = Notebook(browser, lab, "points.ipynb")
        notebook.console = []  # type: ignore[attr-defined]
        notebook.page.on("console", lambda m: notebook.console.append(m.text))  # type: ignore[attr-defined]
        notebook.run(0)
        yield notebook
        assert notebook.errors == [], notebook.errors
        browser.close()


def _start(nb: Notebook, index: int, script: bool = True) -> Any:
    if script:
        nb.run(index - 1)
    nb.start(index)
    view = nb.output(index).locator(".pi-agent:not(.pi-undo)")
    view.wait_for(timeout=30_000)
    return view


def _transcript(nb: Notebook, index: int) -> Any:
    out = nb.output(index)
    out.locator(".pi-agent:not(.pi-undo)").wait_for(state="detached", timeout=60_000)
    frame = out.locator(".pi-transcript")
    frame.wait_for(timeout=10_000)
    return frame


def _approval(view: Any, choice: str) -> None:
    view.locator(".pi-approval").wait_for(timeout=30_000)
    view.locator(".pi-approval-buttons button").nth({"Run": 0, "Skip": 1}[choice]).click()


# --- 1. print, then raise -----------------------------------------------------------------

def test_print_then_raise_shows_the_traceback(nb):
    view = _start(nb, RAISE_CELL)
    _approval(view, "Run")
    err = view.locator(".pi-tool").first.locator("pre.pi-err")
    err.wait_for(timeout=30_000)
    view.locator(".pi-approval").wait_for(timeout=30_000)  # the second call holds it live
    card = view.locator(".pi-tool").first

    def live(width: int, theme: str) -> None:
        assert "before the error" in card.inner_text()
        assert "KeyError: 'b'" in err.inner_text() and "{'a': 1}['b']" in err.inner_text()
        assert card.inner_text().index("before the error") < card.inner_text().index("KeyError")

    nb.shoot("raise-live", card, live, themes=("light",))
    _approval(view, "Skip")
    frame = _transcript(nb, RAISE_CELL)

    def static(width: int, theme: str) -> None:
        tool = frame.locator(".pi-tool").first
        text = tool.inner_text()
        assert "before the error" in text and "KeyError: 'b'" in text
        assert text.index("before the error") < text.index("KeyError")
        assert tool.locator(".pi-err pre").first.is_visible()
        # 3. the code in a box; the output in a box of its own below, which looks different
        b = tool.evaluate(_CODE_BOX)
        assert b["codeBorder"] == "1px" and b["codeBg"] not in ("rgba(0, 0, 0, 0)", "transparent"), b
        assert "mono" in b["codeFont"].lower(), b
        assert b["outBorder"] == "1px" and b["outBg"] != b["codeBg"], b
        assert b["outTop"] >= b["codeBottom"], b

    nb.shoot("raise-final", frame, static)


_CODE_BOX = """(tool) => { const s = (e) => getComputedStyle(e);
  const code = tool.querySelector('pre'), outbox = tool.querySelector('.pi-outbox');
  return {codeBorder: s(code).borderTopWidth, codeBg: s(code).backgroundColor, codeFont: s(code).fontFamily,
          codeBottom: code.getBoundingClientRect().bottom, outTop: outbox.getBoundingClientRect().top,
          outBorder: s(outbox).borderTopWidth, outBg: s(outbox).backgroundColor}; }"""


# --- 2, 3, 6. the end of a long run; code boxes; links ---------------------------------------

_GEOMETRY = """(root) => {
  // positions relative to the cell's output area: how far JupyterLab has scrolled the page
  // (measured in CI: everything 13 px lower once, at 800 px dark) is not a jump of the view
  const base = root.getBoundingClientRect();
  const r = (e) => { const b = e.getBoundingClientRect();
                     return {x: b.x - base.x, y: b.y - base.y, w: b.width, h: b.height}; };
  const frame = root.querySelector('.pi-agent, .pi-transcript');
  // the live scroll box, or the finished transcript's body (a document: no scroll box)
  const scroller = frame.querySelector('.pi-scroll, .pi-body');
  scroller.scrollTop = -scroller.scrollHeight;  // the top of the transcript (column-reverse)
  const head = frame.querySelector('.pi-head');
  const row = head.closest('.widget-hbox') || head;
  const links = [...frame.querySelectorAll('p')].find((p) => p.textContent.startsWith('Links:'));
  const table = frame.querySelector('table');
  const out = root.querySelector('.jp-OutputArea-output');
  const res = {frame: r(frame), head: r(row), text: r(head.querySelector('.pi-model')), scroll: r(scroller),
          scrolls: scroller.scrollHeight > scroller.clientHeight + 1,
          label: r(frame.querySelector('.pi-label')),
          links: links ? links.innerText : null,
          hrefs: [...frame.querySelectorAll('a')].map((a) => a.getAttribute('href')),
          imgs: [...frame.querySelectorAll('img')].map((i) => i.getAttribute('src')),
          table: table && {sw: table.scrollWidth, cw: table.clientWidth},
          out: {sw: out.scrollWidth, cw: out.clientWidth}, frameSw: frame.scrollWidth, frameCw: frame.clientWidth};
  scroller.scrollTop = 0;
  return res;
}"""


def test_the_end_of_a_run_keeps_its_frame(nb):
    view = _start(nb, LONG_CELL)
    view.locator(".pi-approval").wait_for(timeout=60_000)
    area = nb.output(LONG_CELL)
    area.scroll_into_view_if_needed()
    live = {w: None for w in (1400, 800)}
    for width in (800, 1400):
        nb.set_width(width)
        area.scroll_into_view_if_needed()
        live[width] = area.evaluate(_GEOMETRY)
    nb.shoot("long-live", view, widths=(1400,), themes=("light",))
    _approval(view, "Skip")
    frame = _transcript(nb, LONG_CELL)

    def check(width: int, theme: str) -> None:
        area.scroll_into_view_if_needed()
        before, after = live[width], area.evaluate(_GEOMETRY)
        # 2. no jump: the same box, header line and "You" row; the finished transcript then
        # reads as a document (full height, no inner scroll box) from the same first line
        # (the live header also holds Abort and a longer pill, "waiting for approval:
        # python": at 800 px it wraps to more lines than the final one, so there the
        # header's height differs and what is below it is compared from its bottom)
        moved = {(part, key): after[part][key] - before[part][key] for part, keys in
                 (("frame", "xyw"), ("head", "xy" if width == 800 else "xyh"), ("text", "xy"), ("scroll", "xw"))
                 for key in keys if abs(after[part][key] - before[part][key]) > 2}
        offset = {k: v["label"]["y"] - v["scroll"]["y"] for k, v in (("live", before), ("final", after))}
        assert not moved and abs(offset["live"] - offset["final"]) <= 2, (width, moved, offset, before, after)
        assert before["scrolls"] and not after["scrolls"], (before, after)
        assert after["frame"]["h"] > before["frame"]["h"] + 100, (before["frame"], after["frame"])
        # the wide table scrolls in its own box; the transcript does not scroll sideways
        if width == 800:
            assert after["table"]["sw"] > after["table"]["cw"], after["table"]
        assert after["out"]["sw"] <= after["out"]["cw"] + 1, after["out"]
        assert after["frameSw"] <= after["frameCw"] + 1, after
        # 6. links: one rendering live and static, and safe
        assert after["links"] == before["links"], (before["links"], after["links"])
        assert after["links"] == ("Links: link, [image: remote] and the docs."), after["links"]
        for hrefs in (before["hrefs"], after["hrefs"]):
            assert all(h is None or h.startswith("https://example.com/") for h in hrefs), hrefs
        assert not [s for s in after["imgs"] if not s.startswith("data:")], after["imgs"]

    nb.shoot("long-final", frame, check)


# --- 4. the queue ---------------------------------------------------------------------------

def _seconds(text: str) -> float:
    m = re.search(r"(?:(\d+)m )?(\d+(?:\.\d+)?)s\b", text)
    assert m, text
    return int(m.group(1) or 0) * 60 + float(m.group(2))


def test_a_queued_cell_counts_no_queue_time(nb):
    nb.run(QUEUE_A - 1)
    a = _start(nb, QUEUE_A, script=False)
    a.get_by_text("word word").first.wait_for(timeout=30_000)
    b = _start(nb, QUEUE_A + 1, script=False)
    c = _start(nb, QUEUE_A + 2, script=False)
    queued_at = time.monotonic()
    for view in (b, c):
        button = view.locator("button.pi-abort")
        button.get_by_text("Remove").wait_for(timeout=10_000)
        assert "queued" in view.locator(".pi-head").inner_text()
        assert not re.search(r"\d+s\b", view.locator(".pi-head").inner_text()), "a queued cell shows a run time"
    nb.shoot("queued", nb.output(QUEUE_A + 1), widths=(1400,), themes=("light",))
    c.locator("button.pi-abort").click()
    c_final = _transcript(nb, QUEUE_A + 2)
    assert "removed" in c_final.locator(".pi-head").inner_text()
    assert not re.search(r"\d+s\b", c_final.locator(".pi-head").inner_text()), c_final.inner_text()
    b_final = _transcript(nb, QUEUE_A + 1)  # B runs once A is done
    waited = time.monotonic() - queued_at
    assert "B is short." in b_final.inner_text()
    head = b_final.locator(".pi-head").inner_text()
    assert "done" in head and _seconds(head) < waited, (head, waited)
    _transcript(nb, QUEUE_A)


# --- 5. thinking ----------------------------------------------------------------------------

def test_thinking_preview_and_cursor(nb):
    view = _start(nb, THINK_CELL)
    preview = view.locator(".pi-thinking-preview")
    preview.wait_for(timeout=30_000)
    header = view.locator(".pi-thinking-box .jupyter-widget-Collapse-header").first
    header.click()  # expanded: the full text shows, the preview would repeat its lines
    view.locator(".pi-thinking-box .jupyter-widget-Collapse-open").wait_for(timeout=10_000)
    if view.locator(".pi-thinking-preview").count():  # (still thinking)
        assert not preview.is_visible(), "the preview shows under the expanded full text"
    nb.shoot("thinking-expanded", view, widths=(1400,), themes=("light",))
    header.click()
    view.get_by_text("The answer streams.").first.wait_for(timeout=30_000)

    def one_cursor(width: int, theme: str) -> None:
        if not view.count():
            return  # (the run ended meanwhile)
        cursors = [c for c in view.locator(".pi-cursor").all() if c.is_visible()]
        assert len(cursors) <= 1, f"{len(cursors)} cursors"
        assert view.locator(".pi-thinking-preview").count() == 0

    one_cursor(1400, "light")
    assert "Thought for" in view.locator(".pi-thinking-box").inner_text()
    frame = _transcript(nb, THINK_CELL)
    assert "Thought for" in frame.inner_text()


# --- 7. restart -----------------------------------------------------------------------------

def test_restart_leaves_no_console_errors_and_no_live_pill(nb):
    view = _start(nb, RESTART_CELL)
    view.locator(".pi-approval").wait_for(timeout=30_000)
    nb.console.clear()  # type: ignore[attr-defined]
    nb.page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart()")
    view.locator(".jupyter-widgets-disconnected").first.wait_for(state="attached", timeout=30_000)
    nb.wait_kernel_idle()
    nb.page.wait_for_timeout(1500)  # what the old kernel still sent has arrived

    def dead(width: int, theme: str) -> None:
        pills = view.locator(".pi-pill.pi-live").all()
        assert pills, "no pill"
        for p in pills:
            shown = p.evaluate("(e) => getComputedStyle(e, '::after').content")
            assert shown == '"not live"', shown
            assert box(p)["width"] < 120
        assert not [m for m in nb.console if "Comm not found" in m], nb.console  # type: ignore[attr-defined]

    nb.shoot("restart-pills", view, dead, themes=("light",))
