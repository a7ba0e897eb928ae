"""What a person reads of a finished run: the status says what happened, the transcript is a
document, code and headers wrap (the stylesheets), text/plain is text."""

from __future__ import annotations

import re

from pi_notebook.agent.types import (
    AgentEndEvent,
    AgentStartEvent,
    AgentToolResult,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
)
from pi_notebook.ai.types import TextContent
from pi_notebook.widgets.text_view import TextView
from pi_notebook.widgets.theme import STATUS_COLOURS, stylesheet
from pi_notebook.widgets.transcript import Transcript
from pi_notebook.widgets.transcript_md import TRANSCRIPT_STYLE, transcript_markdown


def _call(t: Transcript | TextView, call_id: str, *, failed: bool) -> None:
    apply = t.apply if isinstance(t, Transcript) else t.handle_event
    args = {"code": "df.groupby('regoin').sum()"}
    apply(ToolExecutionStartEvent(tool_call_id=call_id, tool_name="python", args=args))
    text = "KeyError: 'regoin'" if failed else "[value]\n3"
    apply(ToolExecutionEndEvent(tool_call_id=call_id, tool_name="python", is_error=failed,
                                result=AgentToolResult(content=[TextContent(text=text)])))


def _run(*failed: bool) -> Transcript:
    t = Transcript("faux/m")
    t.apply(AgentStartEvent())
    for i, f in enumerate(failed):
        _call(t, f"c{i}", failed=f)
    t.apply(AgentEndEvent(messages=[]))
    t.finish("done")
    return t


# --- the status of a run whose every call failed ----------------------------------------------

def test_a_run_whose_every_call_failed_does_not_end_with_a_green_done():
    t = _run(True, True)
    label, colour, why = t.pill()
    assert label == "done · no result" and colour == "no result"
    assert why == "all 2 tool calls failed: the answer rests on no result"
    assert STATUS_COLOURS[colour] != STATUS_COLOURS["done"]  # not the green of a result
    md = transcript_markdown(t)
    bg, fg = STATUS_COLOURS["no result"]
    assert f'style="background:{bg};color:{fg}">done · no result</span>' in md
    assert 'title="all 2 tool calls failed' in md
    assert t.status == "done"  # the run's own status: a queued cell after it still starts


def test_a_run_with_one_good_call_or_none_is_plainly_done():
    for t in (_run(True, False), _run(), _run(False)):
        assert t.pill() == ("done", "done", "")
    skipped = _run()  # a declined call did not fail: nothing ran
    item = skipped.tool("s1", "python")
    item.status = "skipped"
    assert skipped.pill()[0] == "done"


def test_the_live_header_says_no_result_too():
    import asyncio

    from pi_notebook.widgets.view import AgentView

    loop = asyncio.new_event_loop()
    try:
        view = AgentView("faux/m", loop, lambda: None)
        view.handle_event(AgentStartEvent())
        _call(view.transcript, "c1", failed=True)
        view.handle_event(AgentEndEvent(messages=[]))
        view.finish("done")
        assert ">done · no result</span>" in view._header.value
        view.close()
    finally:
        loop.close()


def test_the_terminal_view_says_no_result(capsys):
    view = TextView("faux/m")
    view.handle_event(AgentStartEvent())
    _call(view, "c1", failed=True)
    view.finish("done")
    assert view.to_markdown().endswith("\n[done · no result: every tool call failed]\n")


# --- the finished transcript reads as a document --------------------------------------------

def _rule(css: str, selector: str) -> str:
    rules = [m.group(1) for m in re.finditer(r"([^{}]+)\{([^}]*)\}", css) if selector in m.group(1)]
    return " ".join(re.search(re.escape(r) + r"\{([^}]*)\}", css).group(1) for r in rules)


def test_the_finished_transcript_has_no_inner_scroll_box():
    md = transcript_markdown(_run(False))
    frame_rules = re.findall(r"\.pi-transcript [^{]*\{[^}]*\}", TRANSCRIPT_STYLE)
    for rule in frame_rules:  # no box of the frame scrolls or clips in height
        if "pi-outbox" in rule or "pre" in rule.split("{")[0] or "table" in rule.split("{")[0]:
            continue
        body = rule.split("{", 1)[1]
        assert "max-height" not in body and "column-reverse" not in body, rule
        assert "overflow-y" not in body, rule
    assert 'class="pi-scroll"' not in md  # the live view's scroll box is not carried over


# --- code and headers wrap; badges are styled -------------------------------------------------

def test_tool_code_wraps_in_the_live_card_and_the_transcript():
    css = stylesheet()
    live = _rule(css, ".pi-tool pre.pi-hl")
    assert "white-space: pre-wrap" in live and "overflow-wrap: anywhere" in live
    assert "word-break: normal" in live  # at spaces first (Lab's <pre> rule breaks anywhere)
    static = _rule(TRANSCRIPT_STYLE, ".pi-tool pre")
    assert "white-space: pre-wrap" in static and "overflow-wrap: anywhere" in static


def test_header_rows_wrap_and_badges_have_a_style():
    css = stylesheet()
    assert "flex-wrap: wrap" in _rule(css, ".pi-agent .pi-head-row")
    assert "flex-wrap: wrap" in _rule(css, ".pi-agent .pi-tool-head")
    assert "flex-wrap: wrap" in _rule(TRANSCRIPT_STYLE, ".pi-transcript .pi-tool-head")
    for badge in ("pi-badge-readonly", "pi-badge-destructive"):
        light = _rule(css, f".pi-agent .{badge}")
        dark = _rule(css, f'body[data-jp-theme-light="false"] .pi-agent .{badge}')
        assert "background" in light and "background" in dark, badge
        assert light != dark, badge
