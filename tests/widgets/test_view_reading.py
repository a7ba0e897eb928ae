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


# --- a run check's turn is the product's, not "You" --------------------------------------------

def _check_message():
    from pi_notebook.agent.types import CheckMessage

    return CheckMessage(content='Check: no output shows "Apple" again. Reply exactly: The code failed.',
                        shown='No output shows "Apple": the agent was asked to end with what the results show.')


def test_a_check_turn_is_labelled_as_the_products_live_and_in_the_transcript():
    from pi_notebook.agent.types import MessageStartEvent
    from pi_notebook.ai.types import UserMessage

    t = Transcript("faux/m")
    t.announce("the question")
    t.apply(AgentStartEvent())
    t.apply(MessageStartEvent(message=UserMessage(content="the question")))
    t.show_queued("steer", "use the median", "tok1")
    t.deliver_queued("tok1", "use the median", "steer")  # the user's steer waits for its message
    t.apply(MessageStartEvent(message=_check_message()))
    t.apply(MessageStartEvent(message=UserMessage(content="use the median")))
    rows = [(i.label, i.text) for i in t.items if hasattr(i, "label")]
    assert rows == [("You", "the question"),
                    ("Steer", "use the median"),  # not taken by the check's message
                    ("pi_notebook check", 'No output shows "Apple": the agent was asked to end with what the '
                                          "results show.")]
    md = transcript_markdown(t)
    assert '<span class="pi-label">pi_notebook check</span>' in md
    assert "Reply exactly" not in md and "Check:" not in md


def test_a_check_turn_in_the_terminal_view_and_the_export():
    from pi_notebook.agent.types import MessageStartEvent
    from pi_notebook.session import build_notebook

    view = TextView("faux/m")
    view.handle_event(MessageStartEvent(message=_check_message()))
    printed = view.to_markdown()
    assert "pi_notebook check: No output shows" in printed and "Reply exactly" not in printed
    cells = build_notebook([_check_message()]).cells
    assert cells[0].source.startswith("**pi_notebook check:**") and "Reply exactly" not in cells[0].source


# --- text/plain is a plain-text transcript ---------------------------------------------------

def test_the_headless_transcripts_text_plain_is_text_not_markup():
    from pi_notebook.agent.types import MessageEndEvent, MessageStartEvent
    from pi_notebook.ai.types import AssistantMessage, UserMessage
    from pi_notebook.widgets.static_view import StaticView

    view = StaticView("faux/m", None)
    view.add_user_message("which region sold more?")
    view.handle_event(AgentStartEvent())
    view.handle_event(MessageStartEvent(message=UserMessage(content="which region sold more?")))
    _call(view.transcript, "c1", failed=False)
    answer = AssistantMessage(api="faux", provider="faux", model="m",
                              content=[TextContent(text="The **north** sold more: 3 < 5 is false.")])
    view.handle_event(MessageStartEvent(message=answer))
    view.handle_event(MessageEndEvent(message=answer))
    view.handle_event(AgentEndEvent(messages=[]))
    view.finish("done")
    bundle = view.display_bundle()
    plain = bundle["text/plain"]
    assert "<div" not in plain and "<span" not in plain and "<style" not in plain
    assert plain.startswith("pi agent · faux/m · done")
    assert "You: which region sold more?" in plain
    assert "⚙ python · done" in plain and "    df.groupby('regoin').sum()" in plain
    assert "The **north** sold more: 3 < 5 is false." in plain  # the answer's own text, unescaped
    assert "<div" in bundle["text/markdown"]  # the Markdown transcript keeps its frame


# --- a card waiting below the fold is announced at the bottom of the screen ----------------------

async def test_a_waiting_approval_is_announced_by_a_sticky_line_until_answered():
    import asyncio

    from pi_notebook.tools.trust.approval import ApprovalRequest
    from pi_notebook.widgets.view import AgentView

    view = AgentView("faux/m", asyncio.get_running_loop(), lambda: None, flush_interval=0.01)
    bar = view._waiting_bar
    assert bar.layout.display == "none"
    view.handle_event(AgentStartEvent())
    view.handle_event(ToolExecutionStartEvent(tool_call_id="c1", tool_name="python", args={"code": "1"}))
    answer = asyncio.ensure_future(view.request_approval(ApprovalRequest("c1", "python", {"code": "1"}, code="1")))
    await asyncio.sleep(0.05)
    view.flush()
    assert bar.layout.display == "" and "Waiting for your approval: a call (python)" in bar.value
    view.tool_card("c1").approval_buttons["skip"].click()
    assert await asyncio.wait_for(answer, 2) == "skip"
    view.flush()
    assert bar.layout.display == "none"
    rule = _rule(stylesheet(), ".pi-agent .pi-approval-bar")
    assert "position: sticky" in rule and "bottom: 0" in rule
    view.close()
