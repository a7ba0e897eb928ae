"""Hostile model and tool output never reaches the frontend as live HTML, in the
live view or in the saved Markdown transcript; the transcript reads well."""

from __future__ import annotations

import base64

from markdown_it import MarkdownIt

from pi_notebook.agent.types import (AgentEndEvent, AgentStartEvent, AgentToolResult, MessageStartEvent,
                                     ToolExecutionEndEvent, ToolExecutionStartEvent,
                                     ToolExecutionUpdateEvent)
from pi_notebook.ai.types import TextContent, TextDeltaEvent, ToolCall, UserMessage
from pi_notebook.widgets.text import render_event_text
from pi_notebook.widgets.transcript_md import TRANSCRIPT_STYLE

from widget_helpers import AssistantStream, CommLog, html_problems, transcript_text

HOSTILE = (
    "Here is **bold**.\n\n<img src=x onerror=alert(1)>\n\n<script>alert(2)</script>\n\n"
    "[click](javascript:alert(3)) and <a href=\"javascript:alert(4)\">raw</a> "
    "[ent](&#106;avascript:alert(5)) ![leak](https://attacker.example/x.png?k=1)\n\n"
    "```python\nprint('</code></pre><img src=x onerror=alert(6)>')\n```\n"
)
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x01" * 12).decode()
_PERMISSIVE = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def _hostile_run(view) -> None:
    view.handle_event(AgentStartEvent())
    view.add_user_message("<img src=x onerror=alert('user')> plot df", "prompt")
    view.handle_event(MessageStartEvent(message=UserMessage(content="<img src=x onerror=alert('user')> plot df")))
    stream = AssistantStream(view).start()
    stream.thinking("<script>alert('thinking')</script>")
    stream.text(HOSTILE, pieces=17)
    index = stream.tool_call_start("t1", "<img src=x onerror=alert('name')>")
    stream.tool_call_delta(index, {"code": "print('<script>alert(7)</script>')"})
    stream.tool_call_end(index)
    stream.end(stop_reason="toolUse")
    args = {"code": "print('<script>alert(7)</script>')"}
    name = "<img src=x onerror=alert('name')>"
    view.handle_event(ToolExecutionStartEvent(tool_call_id="t1", tool_name=name, args=args))
    for details in (
        {"kind": "stream", "name": "stdout", "text": "<script>alert(8)</script>\n"},
        {"kind": "stream", "name": "stderr", "text": "<img src=x onerror=alert(9)>\n"},
        {"kind": "display", "data": {"text/html": "<img src=x onerror=alert(10)>",
                                      "text/plain": "<b>plain</b>"}},
        {"kind": "display", "data": {"image/svg+xml": "<svg onload=alert(11)></svg>"}},
        {"kind": "display", "data": {"image/png": "not base64 \" onerror=alert(12) x=\""}},
        {"kind": "display", "data": {"image/png": PNG}},
        {"kind": "display", "data": {"application/javascript": "alert(13)"}},
    ):
        view.handle_event(ToolExecutionUpdateEvent(tool_call_id="t1", tool_name=name, args=args,
                                                   partial_result=AgentToolResult(details=details)))
    view.handle_event(ToolExecutionEndEvent(
        tool_call_id="t1", tool_name=name,
        result=AgentToolResult(content=[TextContent(text="<iframe src=javascript:alert(14)>")]),
        is_error=True))
    view.show_notice("<img src=x onerror=alert('notice')>", "warning")
    view.show_queued("steer", "<script>alert('queued')</script>", "q1")
    final = AssistantStream(view).start()
    final.text(HOSTILE)
    message = final.end()
    view.handle_event(AgentEndEvent(messages=[message]))
    view.finish("done")


async def test_nothing_sent_to_the_frontend_can_run_script(view, comms: CommLog):
    view.set_model_label("<img src=x onerror=alert('model')>")
    _hostile_run(view)
    values = comms.all_html_values()
    assert values
    for value in values:
        if value.startswith("<style>"):
            continue  # our own stylesheet (trusted), checked separately
        assert html_problems(value) == [], value
        assert "<script" not in value.lower() and "<iframe" not in value.lower()
        assert "<svg" not in value.lower()
    everything = "\n".join(values)
    assert f"data:image/png;base64,{PNG}" in everything   # a valid PNG display is shown
    assert "&lt;b&gt;plain&lt;/b&gt;" in everything        # text/plain instead of text/html
    assert "alert(10)" not in everything and "alert(11)" not in everything and "alert(13)" not in everything


async def test_stylesheet_is_sent_once_and_is_only_css(view, comms: CommLog):
    _hostile_run(view)
    styles = [v for v in comms.all_html_values() if v.startswith("<style>")]
    assert len(styles) == 1
    assert styles[0].count("<") == 2  # <style> ... </style>, nothing else


async def test_transcript_is_safe_and_complete(view, comms: CommLog):
    _hostile_run(view)
    md = view.to_markdown()
    html = _PERMISSIVE.render(md)
    # our one constant stylesheet (the frame, the code boxes) is the only <style>
    assert md.count("<style") == 1 and md.rstrip().endswith(TRANSCRIPT_STYLE)
    assert TRANSCRIPT_STYLE.count("<") == 2  # <style> ... </style>, nothing else
    assert html_problems(html.replace(TRANSCRIPT_STYLE, "")) == [], html
    assert "<script" not in html.lower() and "<iframe" not in html.lower()
    # content is all there, readable
    text = transcript_text(md)
    assert text.split("\n")[0].startswith("pi agent · ")
    assert " · done · " in text.split("\n")[0]
    assert "You: <img src=x onerror=alert('user')> plot df" in text
    assert "Here is **bold**." in md
    assert "```python\nprint('</code></pre><img src=x onerror=alert(6)>')\n```" in md  # code verbatim
    assert "```text\n<script>alert(8)</script>\n```" in md  # tool output in a fence
    assert '<details class="pi-thinking"><summary>Thinking</summary>' in md
    assert f"![output](data:image/png;base64,{PNG})" in md
    assert "· error ·" in text  # the tool card's status
    # the same link rendering as the live view: a refused link is its text, a remote
    # image a link "[image: …]" (no stray "!")
    assert "click and" in text and "[image: leak]" in text and "!" not in text.split("[image: leak]")[0][-2:]


async def test_transcript_of_a_plain_run(view, comms: CommLog):
    view.handle_event(AgentStartEvent())
    view.add_user_message("What is 2+2?")
    stream = AssistantStream(view).start()
    index = stream.tool_call_start("c1", "python")
    stream.tool_call_delta(index, {"code": "print(2 + 2)"})
    stream.tool_call_end(index)
    stream.end(stop_reason="toolUse")
    view.handle_event(ToolExecutionStartEvent(tool_call_id="c1", tool_name="python", args={"code": "print(2 + 2)"}))
    view.handle_event(ToolExecutionUpdateEvent(
        tool_call_id="c1", tool_name="python", args={"code": "print(2 + 2)"},
        partial_result=AgentToolResult(details={"kind": "stream", "name": "stdout", "text": "4\n"})))
    view.handle_event(ToolExecutionEndEvent(tool_call_id="c1", tool_name="python",
                                            result=AgentToolResult(content=[TextContent(text="4")]),
                                            is_error=False))
    final = AssistantStream(view).start()
    final.text("It is **4**.")
    view.handle_event(AgentEndEvent(messages=[final.end()]))
    view.set_context_usage(6_400, 128_000)
    view.finish()
    md = view.to_markdown()
    lines = transcript_text(md).split("\n")
    assert lines[0].startswith("pi agent · faux/test-model · done · ")
    assert "240 tokens in / 60 out" in lines[0] and "$0.0042" in lines[0] and "context 5%" in lines[0]
    assert lines[1] == "You: What is 2+2?"
    assert lines[2].startswith("⚙ python · done · ")
    assert lines[3:] == ["print(2 + 2)", "4", "It is 4."]
    blocks = md.split("\n\n")
    assert blocks[2] == '<div class="pi-tool">' and blocks[4] == "```python\nprint(2 + 2)\n```"
    assert blocks[5:8] == ['<div class="pi-outbox">', "```text\n4\n```", "</div>"]  # the output in its box
    assert "It is **4**." in blocks
    assert md.endswith(TRANSCRIPT_STYLE + "\n")


async def test_transcript_elides_the_middle_of_huge_output(view, comms: CommLog):
    args = {"code": "for i in range(100000): print(i)"}
    view.handle_event(ToolExecutionStartEvent(tool_call_id="big", tool_name="python", args=args))
    lines = "".join(f"{i}\n" for i in range(20000))
    view.handle_event(ToolExecutionUpdateEvent(
        tool_call_id="big", tool_name="python", args=args,
        partial_result=AgentToolResult(details={"kind": "stream", "name": "stdout", "text": lines})))
    view.handle_event(ToolExecutionEndEvent(tool_call_id="big", tool_name="python",
                                            result=AgentToolResult(content=[]), is_error=False))
    view.finish()
    md = view.to_markdown()
    assert "```text\n0\n1\n2\n" in md and "19999\n```" in md
    assert "characters not shown] …" in md
    assert len(md.replace(TRANSCRIPT_STYLE, "")) < 12_000


def test_plain_text_fallback_is_short_and_readable():
    """A frontend without widgets (or a notebook saved mid-run) shows repr(view)."""
    import asyncio

    from pi_notebook.widgets.view import AgentView

    view = AgentView("faux/faux-1", asyncio.new_event_loop(), on_abort=lambda: None)
    text = repr(view)
    assert text.startswith("pi_notebook agent view (live only while its kernel runs): faux/faux-1 (")
    assert "<style" not in text and "children" not in text
