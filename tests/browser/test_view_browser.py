"""The AgentView in a real JupyterLab, as a user sees it, at 1400 and 800 px, light and dark.

Each case drives a scripted faux model, asserts what the DOM can tell (element boxes, MathML,
scroll positions, visibility after a restart) at every width and theme, and saves one
screenshot per width and theme in ``tests/browser/artifacts/`` (looked at by a person):

1. math streams as MathML (``$…$`` and ``$$…$$``), live and in the final transcript;
2. the approval panel wraps as text at 800 px, invisible characters in the code revealed;
3. a default-size matplotlib figure (6.4x4.8 in) in a tool card is shown whole;
4. a long answer scrolls in the view's own box, which keeps the newest text in view, and keeps
   still what the user reads once they scroll up;
5. a reply the provider cut (a loop) says why in the final transcript;
6. after a kernel restart mid-approval the dead view offers no live button.

The tests share one notebook page, in order (the restart is last).
"""

from __future__ import annotations

from typing import Any

import pytest
from harness import ARTIFACTS, HEIGHT, Notebook, box, lab_server, launch, write_notebook

from pi_notebook.local.repeat import LOOP_NOTE as LOOP_NOTE_TEMPLATE

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

SETUP = """\
%load_ext pi_notebook
from pi_notebook.ai.providers.faux import (register_faux_provider, faux_assistant_message,
    faux_text, faux_tool_call)
faux = register_faux_provider(tokens_per_second=40)
"""
MATH = ("Euler's identity $e^{i\\pi} + 1 = 0$ links five constants, and the area under "
        "$y = x^2$ on the unit interval is\n\n$$\\int_0^1 x^2\\,dx = \\frac{1}{3}$$\n\n"
        + "".join(f"Sentence {i} keeps the stream going for a while. " for i in range(60)))
SNEAKY = "total = 0\nfor value in range(10):\n    total += value\nprint('sum\u200b', total)  # \u202eok\n"
FIGURE = ("import matplotlib.pyplot as plt\nfig = plt.figure()\nplt.plot([1, 3, 2, 4])\n"
          "plt.title('a default-size figure')\nplt.show()\n")
LOOPED = "| city | Stool |\n|---|---|\n| Bath | 93.0 |\n"
LOOP_NOTE = LOOP_NOTE_TEMPLATE.format(copies=14)
LONG = "".join(f"Paragraph {i}: the answer goes on, line after line, for a long while.\n\n" for i in range(70))


def _call(code: str) -> str:
    return f"faux_tool_call('python', {{'code': {code!r}}})"


CELLS = [
    SETUP,
    # 1 math
    f"faux.set_responses([faux_assistant_message({MATH!r})])",
    "%%agent -m faux/faux-1\nShow me some math.",
    # 2 approval
    f"faux.set_responses([faux_assistant_message([{_call(SNEAKY)}], stop_reason='toolUse'),\n"
    "                     faux_assistant_message('Skipped, fine.')])",
    "%%agent -m faux/faux-1 --approve ask\nAdd up some numbers.",
    # 3 figure: a second call waits for approval, so the live card stays on screen
    f"faux.set_responses([faux_assistant_message([{_call(FIGURE)}], stop_reason='toolUse'),\n"
    f"                     faux_assistant_message([{_call('print(1)')}], stop_reason='toolUse'),\n"
    "                     faux_assistant_message('That was the figure.')])",
    "%%agent -m faux/faux-1 --approve ask\nPlot something.",
    # 4 long answer, ending in a call that waits for approval (the view stays live)
    f"faux.set_responses([faux_assistant_message([faux_text({LONG!r}), {_call('print(2)')}],\n"
    "                                            stop_reason='toolUse'),\n"
    "                     faux_assistant_message('Done.')])",
    "%%agent -m faux/faux-1 --approve ask\nWrite a long answer.",
    # 5 a reply the provider cut (a loop, local/repeat.py), its reason in the notice
    f"faux.set_responses([faux_assistant_message({LOOPED!r}, stop_reason='length',\n"
    f"                                           error_message={LOOP_NOTE!r})])",
    "%%agent -m faux/faux-1\nTabulate the orders.",
    # 6 restart while an approval waits
    f"faux.set_responses([faux_assistant_message([{_call('print(3)')}], stop_reason='toolUse')])",
    "%%agent -m faux/faux-1 --approve ask\nRun one more thing.",
]
MATH_CELL, APPROVAL_CELL, FIGURE_CELL, LONG_CELL, CUT_CELL, RESTART_CELL = 2, 4, 6, 8, 10, 12


@pytest.fixture(scope="module")
def nb(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    root = tmp_path_factory.mktemp("lab")
    write_notebook(root / "view.ipynb", CELLS)
    with lab_server(root) as lab, sync_playwright() as pw:
        browser = launch(pw)
        notebook = Notebook(browser, lab, "view.ipynb")
        notebook.run(0)
        yield notebook
        assert notebook.errors == [], notebook.errors
        browser.close()


def _start_run(nb: Notebook, index: int) -> Any:
    """Run the faux-script cell before ``index``, then the ``%%agent`` cell; its live view.

    (Not ``--no-wait``: in auto mode the first ``%%agent`` learns from its own view being
    shown that a frontend can answer approvals; it returns once the view is on screen.)"""
    nb.run(index - 1)
    nb.start(index)
    view = nb.output(index).locator(".pi-agent:not(.pi-undo)")
    view.wait_for(timeout=30_000)
    return view


def _wait_transcript(nb: Notebook, index: int) -> Any:
    """The final Markdown transcript that replaces the live view."""
    out = nb.output(index)
    out.locator(".pi-agent:not(.pi-undo)").wait_for(state="detached", timeout=30_000)
    out.locator(".pi-transcript").wait_for(timeout=10_000)
    return out


_APPROVAL_BUTTONS = {"Run": 0, "Skip": 1, "Always": 2}


def _button(view: Any, name: str) -> Any:
    # (by position: the icon's glyph is part of the accessible name)
    return view.locator(".pi-approval-buttons button").nth(_APPROVAL_BUTTONS[name])


def _click(view: Any, name: str) -> None:
    _button(view, name).click()


# --- 1. math -------------------------------------------------------------------------------

def test_math_streams_as_mathml(nb):
    view = _start_run(nb, MATH_CELL)
    view.locator("math[display='block']").wait_for(timeout=20_000)
    # still streaming: the pill says so and the text is not complete yet
    assert "writing" in view.locator(".pi-head").inner_text()
    assert "Sentence 59" not in view.inner_text()
    assert view.locator("math").count() == 3
    assert "\\frac" not in view.inner_text() and "$" not in view.inner_text()
    ARTIFACTS.mkdir(exist_ok=True)
    view.screenshot(path=str(ARTIFACTS / "math-streaming-1400-light.png"))

    out = _wait_transcript(nb, MATH_CELL)

    def check(width: int, theme: str) -> None:
        text = out.inner_text()
        assert "Sentence 59" in text
        assert out.locator("math").count() >= 2, "the final transcript lost its MathML"
        assert "\\frac" not in text and "$" not in text
        fraction = box(out.locator("math[display='block']"))
        assert fraction["height"] > 20, fraction  # laid out as a formula, not a line of text

    nb.shoot("math-final", out, check)


# --- 2. approval ---------------------------------------------------------------------------

def test_approval_panel_wraps_at_800px(nb):
    view = _start_run(nb, APPROVAL_CELL)
    panel = view.locator(".pi-approval")
    panel.wait_for(timeout=20_000)

    def check(width: int, theme: str) -> None:
        text, buttons, p = box(panel.locator(".pi-approval-text")), box(panel.locator(".pi-approval-buttons")), box(panel)
        line = float(nb.page.evaluate(
            "(e) => parseFloat(getComputedStyle(e).lineHeight) || 18",
            panel.locator(".pi-approval-text").element_handle()))
        assert text["width"] > 0.6 * p["width"], (text, p)  # the text runs across the panel
        assert text["height"] <= 3 * line + 2, (text, line)  # a line or two, not a word per line
        assert buttons["y"] >= text["y"] + text["height"] - 1, "buttons overlap the text"
        run = box(_button(panel, "Run"))
        assert run["y"] >= text["y"] + text["height"] - 1
        assert run["x"] + run["width"] <= p["x"] + p["width"] + 1
        code = view.locator(".pi-tool pre.pi-hl")
        marks = code.locator(".pi-invisible")
        assert marks.count() == 2, code.inner_text()
        assert "U+200B" in code.inner_text() and "U+202E" in code.inner_text()
        assert panel.locator(".pi-invisible-warning").is_visible()

    nb.shoot("approval", view, check)
    _click(view, "Skip")
    _wait_transcript(nb, APPROVAL_CELL)


# --- 3. figure -----------------------------------------------------------------------------

_FIGURE_GEOMETRY = """(img) => {
  const r = img.getBoundingClientRect();
  const clips = [];
  for (let e = img.parentElement; e && !e.classList.contains('jp-OutputArea'); e = e.parentElement) {
    const s = getComputedStyle(e);
    if (s.overflowX !== 'visible' || s.overflowY !== 'visible')
      clips.push({cls: e.className, sw: e.scrollWidth, cw: e.clientWidth, ch: e.clientHeight,
                  left: e.getBoundingClientRect().left, right: e.getBoundingClientRect().right});
  }
  return {nw: img.naturalWidth, nh: img.naturalHeight, w: r.width, h: r.height,
          left: r.left, right: r.right, clips};
}"""


def _check_figure(img: Any) -> dict[str, Any]:
    g = img.evaluate(_FIGURE_GEOMETRY)
    assert g["nw"] >= 400 and g["nh"] >= 300, g  # a real default-size figure
    assert g["w"] <= g["nw"] + 1, g  # never enlarged
    assert abs(g["h"] / g["w"] - g["nh"] / g["nw"]) < 0.01, g  # scaled in proportion, if at all
    for clip in g["clips"]:  # no box around it cuts it off
        assert clip["sw"] <= clip["cw"] + 1, (clip, g)
        assert g["left"] >= clip["left"] - 1 and g["right"] <= clip["right"] + 1, (clip, g)
        assert g["h"] <= clip["ch"] + 1, (clip, g)
    return g


def test_default_figure_is_fully_visible(nb):
    view = _start_run(nb, FIGURE_CELL)
    _click(view.locator(".pi-approval"), "Run")
    img = view.locator(".pi-tool img")
    img.wait_for(timeout=20_000)
    view.locator(".pi-approval").wait_for(timeout=20_000)  # the second call holds the view live

    def check(width: int, theme: str) -> None:
        g = _check_figure(img)
        if width == 1400:
            assert abs(g["w"] - g["nw"]) <= 1, g  # room enough: natural size

    nb.shoot("figure-live", view.locator(".pi-tool").first, check)
    _click(view.locator(".pi-approval"), "Skip")
    out = _wait_transcript(nb, FIGURE_CELL)
    nb.shoot("figure-final", out, lambda width, theme: _check_figure(out.locator("img").first))


# --- 4. long answer ------------------------------------------------------------------------

_SCROLL = """(s) => { const inner = s.firstElementChild.getBoundingClientRect();
  const r = s.getBoundingClientRect();
  return {sh: s.scrollHeight, ch: s.clientHeight, top: s.scrollTop, gap: r.bottom - inner.bottom}; }"""

# the top of the paragraph "Paragraph 20: ..." in the viewport
_ANCHOR_TOP = """(s) => { const p = [...s.querySelectorAll('p')].find((e) => e.textContent.startsWith('Paragraph 20:'));
  if (!p) throw new Error('Paragraph 20 is not in the view'); return p.getBoundingClientRect().top; }"""


def test_long_answer_scrolls_and_follows(nb):
    view = _start_run(nb, LONG_CELL)
    scroller = view.locator(".pi-scroll")
    view.get_by_text("Paragraph 30").wait_for(timeout=30_000)
    seen = []
    for _ in range(3):  # while it streams, the newest text stays in view
        s = scroller.evaluate(_SCROLL)
        assert s["sh"] > s["ch"] + 100, s  # it overflows its own box ...
        assert s["ch"] <= 0.75 * HEIGHT + 2, s  # ... whose height is bounded
        assert abs(s["gap"]) <= 2, s  # the bottom of the text is at the bottom of the box
        seen.append(s["sh"])
        nb.page.wait_for_timeout(400)
    assert seen[-1] > seen[0], "the answer did not grow while it was checked"
    # scrolled up by the user while it streams, what the user reads stays where it is
    scroller.evaluate("(s) => { s.scrollTop = s.scrollTop - 300; }")
    nb.page.wait_for_timeout(100)
    # (measured in one script: each flush replaces the live text's DOM nodes, so a located
    # element can be gone before Playwright measures it)
    before, height = scroller.evaluate(_ANCHOR_TOP), scroller.evaluate("(s) => s.scrollHeight")
    nb.page.wait_for_timeout(800)
    assert scroller.evaluate("(s) => s.scrollHeight") > height, "the answer did not grow meanwhile"
    after = scroller.evaluate(_ANCHOR_TOP)
    assert abs(after - before) <= 3, (before, after)
    scroller.evaluate("(s) => { s.scrollTop = 0; }")  # back to the newest (0: column-reverse's end)
    view.locator(".pi-approval").wait_for(timeout=30_000)

    def check(width: int, theme: str) -> None:
        s = scroller.evaluate(_SCROLL)
        assert s["sh"] > s["ch"] + 100 and abs(s["gap"]) <= 2, s
        panel, sbox = box(view.locator(".pi-approval")), box(scroller)
        assert panel["y"] + panel["height"] <= sbox["y"] + sbox["height"] + 1  # the newest item shows

    nb.shoot("long-answer", view, check)
    _click(view.locator(".pi-approval"), "Skip")
    _wait_transcript(nb, LONG_CELL)


# --- 5. a cut reply says why ------------------------------------------------------------------

def test_a_cut_reply_says_why_in_the_transcript(nb):
    nb.run(CUT_CELL - 1)
    nb.run(CUT_CELL)
    out = _wait_transcript(nb, CUT_CELL)
    notice = out.locator(".pi-notice.pi-warning")

    def check(width: int, theme: str) -> None:
        assert notice.count() == 1
        text = notice.inner_text()
        assert "kept repeating the same text (14 copies)" in text and "output token limit" not in text
        n, o = box(notice), box(out)
        assert n["x"] + n["width"] <= o["x"] + o["width"] + 1, (n, o)  # wraps inside the output
        assert out.locator("table").count() == 1  # the one copy kept is shown as a table

    nb.shoot("cut-reply", out, check)


# --- 6. restart mid-approval ---------------------------------------------------------------

def test_restart_mid_approval_leaves_no_live_buttons(nb):
    view = _start_run(nb, RESTART_CELL)
    view.locator(".pi-approval").wait_for(timeout=20_000)
    assert _button(view, "Run").is_enabled()
    nb.page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart()")
    view.locator(".jupyter-widgets-disconnected").first.wait_for(state="attached", timeout=30_000)
    nb.wait_kernel_idle()

    def check(width: int, theme: str) -> None:
        for selector in (".pi-approval-buttons button", "button.pi-abort", ".pi-dot", ".pi-cursor"):
            live = [b for b in view.locator(selector).all() if b.is_visible() and b.is_enabled()]
            assert not live, f"{selector} still offered after the restart"
        note = view.evaluate("(e) => getComputedStyle(e, '::before').content")
        assert "not live any more" in note, note  # the view says it is dead, once
        icons = view.evaluate("""(e) => [...e.querySelectorAll('.jupyter-widgets-disconnected')]
            .filter((x) => getComputedStyle(x, '::before').content !== 'none').length""")
        assert icons == 0, f"{icons} broken-link icons inside the view"

    nb.shoot("restart-mid-approval", view, check)
