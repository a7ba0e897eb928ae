"""What a user reads in JupyterLab, at 1400 and 800 px (the file browser open), light and dark:

1. a finished transcript is a document: no inner scroll box, its first line (the question) at
   its top, the whole run below it at full height;
2. code waiting for approval wraps inside its box: no line is cut at the right edge;
3. in a narrow notebook the header rows wrap instead of clipping (Abort, the pill, the policy),
   and an MCP tool's read-only / destructive annotations are styled badges in both themes; a
   card waiting below the fold is announced by a line held at the bottom of the screen.

One page, three cases in order; a screenshot per width and theme in ``tests/browser/artifacts/``.
"""

from __future__ import annotations

from typing import Any

import pytest
from harness import ARTIFACTS, HEIGHT, Notebook, lab_server, launch, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

SETUP = """\
%load_ext pi_notebook
from pi_notebook.ai.providers.faux import (register_faux_provider, faux_assistant_message,
    faux_text, faux_tool_call)
faux = register_faux_provider(tokens_per_second=400)
"""
LONG = "".join(f"Paragraph {i}: the answer goes on, line after line, for a long while.\n\n" for i in range(60))
# one line of ~1,300 px in a code font: wider than the card at every width
WIDE = ("result = df.groupby(['region', 'month'])['revenue'].agg(['sum', 'mean', 'max'])"
        ".reset_index().sort_values('sum', ascending=False).head(25)  # WIDE_LINE_END\n")
# an MCP approval built on the real view: a destructive and a read-only tool, long names
BADGES = """\
import asyncio
from pi_notebook.agent.types import AgentStartEvent, ToolExecutionStartEvent
from pi_notebook.tools.trust.approval import ApprovalRequest
from pi_notebook.widgets.view import AgentView
mcp_view = AgentView("warehouse/model-with-a-long-name", asyncio.get_event_loop(), lambda: None)
mcp_view.set_policy("ask")
display(mcp_view)
mcp_view.handle_event(AgentStartEvent())
pending = []
for cid, tool, hints in (("d1", "drop_table", {"destructive": True}), ("r1", "list_tables", {"read_only": True})):
    args = {"table": "orders_2025_archive"}
    mcp_view.handle_event(ToolExecutionStartEvent(tool_call_id=cid, tool_name=f"warehouse__{tool}", args=args))
    mcp = {"server": "warehouse", "tool": tool, **hints, "always": None if "destructive" in hints else "tool"}
    pending.append(asyncio.ensure_future(mcp_view.request_approval(ApprovalRequest(
        tool_call_id=cid, tool_name=f"warehouse__{tool}", args=args, extra={"mcp": mcp}))))
"""
CELLS = [
    SETUP,
    f"faux.set_responses([faux_assistant_message({LONG!r})])",
    "%%agent -m faux/faux-1\nWhat is the first line of this answer?",
    f"faux.set_responses([faux_assistant_message([faux_tool_call('python', {{'code': {WIDE!r}}})],\n"
    "                                            stop_reason='toolUse'),\n"
    "                     faux_assistant_message('Skipped.')])",
    "%%agent -m faux/faux-1 --approve ask\nSummarise the revenue by region and month.",
    BADGES,
]
DOC_CELL, WIDE_CELL, BADGE_CELL = 2, 4, 5


@pytest.fixture(scope="module")
def nb(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    root = tmp_path_factory.mktemp("lab")
    write_notebook(root / "reading.ipynb", CELLS)
    with lab_server(root) as lab, sync_playwright() as pw:
        browser = launch(pw)
        notebook = Notebook(browser, lab, "reading.ipynb")
        notebook.run(0)
        yield notebook
        assert notebook.errors == [], notebook.errors
        browser.close()


# --- 1. a finished transcript reads as a document ---------------------------------------------

_DOCUMENT = """(out) => {
  const frame = out.querySelector('.pi-transcript');
  const f = frame.getBoundingClientRect();
  const label = frame.querySelector('.pi-label').getBoundingClientRect();
  const head = frame.querySelector('.pi-head').getBoundingClientRect();
  const last = [...frame.querySelectorAll('p')].find((p) => p.textContent.startsWith('Paragraph 59:'));
  // every box between the text and the output area: none may scroll or clip it
  const clips = [];
  for (let e = last; e && e !== out; e = e.parentElement) {
    const s = getComputedStyle(e);
    if (e.scrollHeight > e.clientHeight + 1 && (s.overflowY === 'auto' || s.overflowY === 'scroll'
                                                || s.overflowY === 'hidden'))
      clips.push({cls: String(e.className), sh: e.scrollHeight, ch: e.clientHeight});
  }
  return {frameH: f.height, labelTop: label.top - head.bottom, lastBottom: last.getBoundingClientRect().bottom - f.top,
          clips};
}"""


def test_a_finished_transcript_is_a_document_from_its_first_line(nb):
    nb.run(DOC_CELL - 1)
    nb.run(DOC_CELL)
    out = nb.output(DOC_CELL)
    out.locator(".pi-agent:not(.pi-undo)").wait_for(state="detached", timeout=30_000)
    out.locator(".pi-transcript").wait_for(timeout=10_000)

    def check(width: int, theme: str) -> None:
        d = out.evaluate(_DOCUMENT)
        assert d["clips"] == [], d  # no inner scroll box: the page scrolls, not the transcript
        assert d["labelTop"] < 20, d  # the question opens it, right below the header line
        assert d["frameH"] > HEIGHT, d  # full height: 60 paragraphs, not a 675 px window
        assert d["lastBottom"] <= d["frameH"], d  # the last line inside the frame

    nb.shoot("document-final", out, check)


# --- 2. code waiting for approval wraps ---------------------------------------------------------

_CODE = """(pre) => { const r = pre.getBoundingClientRect();
  const marker = [...pre.querySelectorAll('span')].find((s) => s.textContent.includes('WIDE_LINE_END'));
  const m = marker.getBoundingClientRect();
  // a code token cut across two lines where it had no need to be ("as|cending")
  const split = [...pre.querySelectorAll('span')].filter((s) => s.getClientRects().length > 1
                                                      && !/\\s/.test(s.textContent)).map((s) => s.textContent);
  return {sw: pre.scrollWidth, cw: pre.clientWidth, h: r.height, right: r.right, markerRight: m.right, split,
          line: parseFloat(getComputedStyle(pre).lineHeight) || 18}; }"""


def test_code_waiting_for_approval_wraps_inside_its_box(nb):
    nb.run(WIDE_CELL - 1)
    nb.start(WIDE_CELL)
    view = nb.output(WIDE_CELL).locator(".pi-agent:not(.pi-undo)")
    view.locator(".pi-approval").wait_for(timeout=30_000)
    code = view.locator(".pi-tool pre.pi-hl").first

    def check(width: int, theme: str) -> None:
        c = code.evaluate(_CODE)
        assert c["sw"] <= c["cw"] + 1, c  # nothing beyond the right edge
        assert c["markerRight"] <= c["right"] + 1, c  # the line's end is in the box
        assert c["h"] >= 2 * c["line"], c  # so the line wrapped
        if width == 1400:  # room enough for every word on a line: it wraps at spaces
            assert c["split"] == [], c
        _fits(view)

    nb.shoot("approval-wide-code", view, check)
    view.locator(".pi-approval-buttons button").nth(1).click()  # Skip
    nb.output(WIDE_CELL).locator(".pi-transcript").wait_for(timeout=30_000)


# --- 3. narrow headers wrap; badges are badges --------------------------------------------------

# every header item of the view, its box against the view's box, and whether its text is cut
_FITS = """(root) => {
  const r = root.getBoundingClientRect();
  const items = root.querySelectorAll(
    '.pi-head > *, .pi-tool-head > *, button.pi-abort, .pi-approval-buttons button, .pi-approval-text');
  return [...items].filter((e) => e.offsetParent !== null).map((e) => {
    const b = e.getBoundingClientRect();
    return {text: e.innerText.slice(0, 40), left: b.left - r.left, right: r.right - b.right,
            cut: e.scrollWidth > e.clientWidth + 1};
  });
}"""


# the header line's items against the Abort button: side by side or above it, never under it
_OVERLAP = """(root) => {
  const abort = root.querySelector('button.pi-abort').getBoundingClientRect();
  return [...root.querySelectorAll('.pi-head > *')].map((e) => {
    const b = e.getBoundingClientRect();
    const x = Math.min(b.right, abort.right) - Math.max(b.left, abort.left);
    const y = Math.min(b.bottom, abort.bottom) - Math.max(b.top, abort.top);
    return {text: e.innerText.slice(0, 40), overlap: x > 1 && y > 1};
  }).filter((i) => i.overlap);
}"""


def _fits(view: Any) -> None:
    for item in view.evaluate(_FITS):
        assert item["left"] >= -1 and item["right"] >= -1, item  # inside the view, not "Abo"
        assert not item["cut"], item  # not "destr" or "approval: clic…"
    assert view.evaluate(_OVERLAP) == []  # nothing hidden under Abort


_BADGE = """(b) => { const s = getComputedStyle(b);
  const lum = (c) => { const [r, g, bl] = c.match(/\\d+(\\.\\d+)?/g).slice(0, 3).map(Number).map((v) => {
      v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * r + 0.7152 * g + 0.0722 * bl; };
  const [a, z] = [lum(s.color), lum(s.backgroundColor)].sort((x, y) => y - x);
  return {bg: s.backgroundColor, radius: parseFloat(s.borderTopLeftRadius), border: parseFloat(s.borderTopWidth),
          contrast: (a + 0.05) / (z + 0.05), text: b.innerText}; }"""


def test_narrow_headers_wrap_and_badges_are_styled(nb):
    nb.run(BADGE_CELL)
    view = nb.output(BADGE_CELL).locator(".pi-agent:not(.pi-undo)")
    view.locator(".pi-approval").first.wait_for(timeout=30_000)
    badges = view.locator(".pi-tool-head .pi-badge")
    backgrounds: dict[str, set[str]] = {}

    def check(width: int, theme: str) -> None:
        _fits(view)
        assert badges.count() == 2
        for i in range(2):
            b = badges.nth(i).evaluate(_BADGE)
            assert b["bg"] not in ("rgba(0, 0, 0, 0)", "transparent"), b  # a badge, not grey words
            assert b["radius"] > 0 and b["border"] > 0, b
            assert b["contrast"] >= 4.5, (theme, b)  # readable in this theme
            backgrounds.setdefault(b["text"], set()).add(b["bg"])
        # (measured in one script: the clock re-renders the header every second)
        rows = view.evaluate("""(root) => {
          const head = root.querySelector('.pi-head').getBoundingClientRect();
          const abort = root.querySelector('button.pi-abort').getBoundingClientRect();
          return {headBottom: head.bottom, abortTop: abort.top}; }""")
        if width == 800:  # the header is too wide for one row beside Abort: Abort wraps below it
            assert rows["abortTop"] >= rows["headBottom"] - 2, rows

    nb.shoot("narrow-badges", view, check)
    assert set(backgrounds) == {"destructive", "read-only"}
    assert not backgrounds["destructive"] & backgrounds["read-only"]  # told apart by colour
    _check_sticky_bar(nb, view)


_STICKY = """(root) => {
  // the view's top at 60% of the window, as for a cell run near the bottom of the screen
  root.scrollIntoView({block: 'start'});
  let page = root.parentElement;
  while (page && !(page.scrollHeight > page.clientHeight && /auto|scroll/.test(getComputedStyle(page).overflowY)))
    page = page.parentElement;
  page.scrollTop -= 0.6 * window.innerHeight;
  const bar = root.querySelector('.pi-approval-bar').getBoundingClientRect();
  const buttons = [...root.querySelectorAll('.pi-approval-buttons')].pop().getBoundingClientRect();
  const hit = document.elementFromPoint(bar.left + bar.width / 2, bar.top + bar.height / 2);
  return {barTop: bar.top, barBottom: bar.bottom, buttonsTop: buttons.top, height: window.innerHeight,
          onTop: !!(hit && hit.closest('.pi-approval-bar'))};
}"""


def _check_sticky_bar(nb: Any, view: Any) -> None:
    """A card below the fold: the waiting line is on screen, not covered, at its bottom."""
    nb.page.set_viewport_size({"width": 1400, "height": 420})
    nb.page.wait_for_timeout(300)
    try:
        s = view.evaluate(_STICKY)
        assert s["buttonsTop"] > s["height"], s  # the last card's buttons are below the fold ...
        assert s["barTop"] >= 0 and s["barBottom"] <= s["height"] and s["onTop"], s  # ... the line is not
        view.locator(".pi-approval-bar").screenshot(path=str(ARTIFACTS / "approval-bar-1400-light.png"))
    finally:
        nb.page.set_viewport_size({"width": 1400, "height": HEIGHT})
        nb.page.wait_for_timeout(250)
