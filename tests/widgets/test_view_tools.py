"""Tool cards: streamed arguments, streamed output and displays, result, status."""

from __future__ import annotations

import asyncio
import base64

from pi_notebook.agent.types import (AgentStartEvent, AgentToolResult, ToolExecutionEndEvent,
                                     ToolExecutionStartEvent, ToolExecutionUpdateEvent)
from pi_notebook.ai.types import ImageContent, TextContent
from pi_notebook.widgets.toolcall import MAX_OUTPUT_CHARS
from pi_notebook.widgets.toolcard import ToolCard

from helpers.widgets import shown_text
from widget_helpers import AssistantStream, CommLog, html_problems

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()


def _card_html(comms: CommLog, card: ToolCard) -> str:
    """Everything currently shown in the card, as last sent to the frontend."""
    return shown_text(card.widget, comms.last_value)


async def test_python_code_argument_streams_as_highlighted_code(view, comms: CommLog):
    view.handle_event(AgentStartEvent())
    stream = AssistantStream(view).start()
    index = stream.tool_call_start("call-1", "python")
    stream.tool_call_delta(index, {"code": "import pandas as pd\ndf = pd.read"})
    await asyncio.sleep(0.08)
    card = view.tool_card("call-1")
    assert card is not None
    html = _card_html(comms, card)
    assert '<pre class="pi-hl">' in html and '<span class="kn">import</span>' in html
    assert "preparing" in html
    assert view.status == "writing"

    stream.tool_call_delta(index, {"code": "import pandas as pd\ndf = pd.read_csv('x.csv')\ndf.head()"})
    stream.tool_call_end(index)
    await asyncio.sleep(0.08)
    html = _card_html(comms, card)
    assert "read_csv" in html and "head" in html


async def test_tool_execution_streams_output_displays_and_result(view, comms: CommLog):
    view.handle_event(AgentStartEvent())
    stream = AssistantStream(view).start()
    index = stream.tool_call_start("c1", "python")
    stream.tool_call_delta(index, {"code": "print('hi')"})
    call = stream.tool_call_end(index)
    stream.end(stop_reason="toolUse")
    args = call.arguments
    view.handle_event(ToolExecutionStartEvent(tool_call_id="c1", tool_name="python", args=args))
    assert view.status == "running tool"
    card = view.tool_card("c1")
    assert card.status == "running"

    def update(details):
        view.handle_event(ToolExecutionUpdateEvent(tool_call_id="c1", tool_name="python", args=args,
                                                   partial_result=AgentToolResult(details=details)))
    update({"kind": "stream", "name": "stdout", "text": "line 1\n"})
    update({"kind": "stream", "name": "stdout", "text": "line <2>\n"})
    update({"kind": "stream", "name": "stderr", "text": "\x1b[31mwarning\x1b[0m\n"})
    update({"kind": "display", "data": {"image/png": PNG, "text/plain": "<Figure>"}, "metadata": {}})
    update({"kind": "display", "data": {"text/html": "<b onmouseover=alert(1)>table</b>",
                                         "application/javascript": "alert(1)",
                                         "text/plain": "   a  b\n0  1  2"}, "metadata": {}})
    update({"kind": "display", "data": {"text/html": "<script>alert(1)</script>"}, "metadata": {}})
    await asyncio.sleep(0.08)
    html = _card_html(comms, card)
    assert '<pre class="pi-out">line 1\nline &lt;2&gt;\n</pre>' in html
    assert '<pre class="pi-out pi-stderr">warning\n</pre>' in html  # ANSI stripped
    assert f'<img class="pi-out-img" src="data:image/png;base64,{PNG}">' in html
    assert "   a  b\n0  1  2" in html
    assert "<b" not in html and "<script" not in html and "alert(1)" not in html
    assert html_problems(html) == []

    view.handle_event(ToolExecutionEndEvent(
        tool_call_id="c1", tool_name="python",
        result=AgentToolResult(content=[TextContent(text="stdout:\nline 1\n"),
                                        ImageContent(data=PNG, mime_type="image/png")]),
        is_error=False))
    await asyncio.sleep(0.08)
    assert card.status == "done" and card.frozen and card.duration is not None
    html = _card_html(comms, card)
    assert "done" in html
    # the streamed output is on screen, so the model's copy is collapsed
    titles = [w.titles for w in _walk(card.widget) if hasattr(w, "titles")]
    assert ("Result sent to the model",) in titles
    assert view.status == "thinking"


def _walk(widget):
    yield widget
    for child in getattr(widget, "children", ()) or ():
        yield from _walk(child)


async def test_error_result_is_shown_and_card_marked(view, comms: CommLog):
    view.handle_event(ToolExecutionStartEvent(tool_call_id="e1", tool_name="python", args={"code": "1/0"}))
    view.handle_event(ToolExecutionEndEvent(
        tool_call_id="e1", tool_name="python",
        result=AgentToolResult(content=[TextContent(text="ZeroDivisionError: division by zero")]),
        is_error=True))
    view.flush()
    card = view.tool_card("e1")
    assert card.status == "error"
    assert "pi-tool-error" in card.widget._dom_classes
    html = _card_html(comms, card)
    assert '<pre class="pi-out pi-err">ZeroDivisionError: division by zero</pre>' in html


async def test_generic_tool_partial_results_replace_progress(view, comms: CommLog):
    args = {"name": "df"}
    view.handle_event(ToolExecutionStartEvent(tool_call_id="g1", tool_name="inspect_variable", args=args))
    for text in ("10%", "60%"):
        view.handle_event(ToolExecutionUpdateEvent(
            tool_call_id="g1", tool_name="inspect_variable", args=args,
            partial_result=AgentToolResult(content=[TextContent(text=text)])))
    view.flush()
    card = view.tool_card("g1")
    html = _card_html(comms, card)
    assert "60%" in html and "10%" not in html
    assert '<span class="s2">"df"</span>' in html  # the arguments, as highlighted JSON


async def test_huge_output_is_capped_in_the_view(view, comms: CommLog):
    args = {"code": "for i in range(10**6): print(i)"}
    view.handle_event(ToolExecutionStartEvent(tool_call_id="h1", tool_name="python", args=args))
    chunk = "x" * 9999 + "\n"
    for _ in range(30):
        view.handle_event(ToolExecutionUpdateEvent(
            tool_call_id="h1", tool_name="python", args=args,
            partial_result=AgentToolResult(details={"kind": "stream", "name": "stdout", "text": chunk})))
        view.flush()
    card = view.tool_card("h1")
    assert card.shown_chars == MAX_OUTPUT_CHARS
    assert card.dropped_chars == 30 * len(chunk) - MAX_OUTPUT_CHARS
    assert "more characters of output not shown" in _card_html(comms, card)
    # the live tail stays small: output is frozen into chunks as it grows
    live = card._streams[0].widgets[-1]
    assert len(comms.last_value(live)) < 20_000


async def test_unfinished_tool_card_is_marked_aborted_at_finish(view, comms: CommLog):
    view.handle_event(ToolExecutionStartEvent(tool_call_id="a1", tool_name="python",
                                              args={"code": "while True: pass"}))
    view.finish("aborted")
    card = view.tool_card("a1")
    assert card.status == "aborted" and card.frozen
    assert "aborted" in _card_html(comms, card)
    assert view.abort_button.layout.display == "none"


async def test_status_transitions_through_a_run(view, comms: CommLog):
    from pi_notebook.agent.types import AgentEndEvent, TurnStartEvent

    seen = [view.status]
    view.handle_event(AgentStartEvent())
    seen.append(view.status)
    view.handle_event(TurnStartEvent())
    stream = AssistantStream(view).start()
    stream.thinking("let me think")
    seen.append(view.status)
    index = stream.text_start()
    stream.text_delta(index, "Running it.")
    seen.append(view.status)
    stream.text_end(index)
    tc = stream.tool_call_start("s1", "python")
    stream.tool_call_delta(tc, {"code": "x = 1"})
    stream.tool_call_end(tc)
    stream.end(stop_reason="toolUse")
    view.handle_event(ToolExecutionStartEvent(tool_call_id="s1", tool_name="python", args={"code": "x = 1"}))
    seen.append(view.status)
    view.handle_event(ToolExecutionEndEvent(tool_call_id="s1", tool_name="python",
                                            result=AgentToolResult(content=[]), is_error=False))
    seen.append(view.status)
    final = AssistantStream(view).start()
    final.text("Done.")
    message = final.end()
    view.handle_event(AgentEndEvent(messages=[stream.partial, message]))
    seen.append(view.status)
    assert seen == ["idle", "thinking", "thinking", "writing", "running tool", "thinking", "done"]
    header = comms.last_value(view._header)
    assert "done" in header and "faux/test-model" in header
    assert "↑240 ↓60" in header and "$0.0042" in header


async def test_error_run_shows_error_status_and_message(view, comms: CommLog):
    from pi_notebook.agent.types import AgentEndEvent

    view.handle_event(AgentStartEvent())
    stream = AssistantStream(view).start()
    message = stream.end(stop_reason="error", error_message="401 <b>Unauthorized</b>: set OPENAI_API_KEY")
    view.handle_event(AgentEndEvent(messages=[message]))
    assert view.status == "error"
    values = comms.all_html_values()
    assert any("401 &lt;b&gt;Unauthorized&lt;/b&gt;: set OPENAI_API_KEY" in v for v in values)
    assert "error" in comms.last_value(view._header)


async def test_close_closes_every_widget_of_the_view(view, comms: CommLog):
    stream = AssistantStream(view).start()
    stream.thinking("hmm")
    stream.text("Hello", pieces=2)
    index = stream.tool_call_start("z1", "python")
    stream.tool_call_delta(index, {"code": "1"})
    stream.tool_call_end(index)
    stream.end(stop_reason="toolUse")
    view.show_queued("steer", "later", "q")
    view.finish()
    opened = {cid for cid, t, _d in comms.messages if t == "comm_open"}
    view.close()
    closed = {cid for cid, t, _d in comms.messages if t == "comm_close"}
    assert opened and opened <= closed


def _find(widget, kind):
    if isinstance(widget, kind):
        yield widget
    for child in getattr(widget, "children", ()) or ():
        yield from _find(child, kind)


async def test_a_cut_tool_call_is_named_as_such_not_by_its_placeholder(view, comms: CommLog):
    for call_id, name in (("cut-1", "invalid_tool_call"), ("cut-2", "")):
        view.handle_event(ToolExecutionStartEvent(tool_call_id=call_id, tool_name=name, args={}))
        view.handle_event(ToolExecutionEndEvent(
            tool_call_id=call_id, tool_name=name, is_error=True,
            result=AgentToolResult(content=[TextContent(text="Tool not found")])))
    view.flush()
    for call_id in ("cut-1", "cut-2"):
        html = _card_html(comms, view.tool_card(call_id))
        assert "⚙ cut tool call" in html and "invalid_tool_call" not in html, html
    # and in the static transcript the run leaves (Markdown for the notebook, plain text)
    view.finish("aborted")
    view.flush()
    from pi_notebook.widgets.transcript_md import transcript_markdown
    from pi_notebook.widgets.transcript_text import transcript_text

    for text in (transcript_markdown(view.transcript), transcript_text(view.transcript)):
        assert "cut tool call" in text and "invalid_tool_call" not in text, text


async def test_the_approval_question_mentions_arguments_only_when_there_are_some():
    from pi_notebook.widgets.toolcall import ToolItem
    from pi_notebook.widgets.toolcard import _approval_text

    hints = {"server": "wh", "tool": "tables"}
    bare = _approval_text(ToolItem("a", "wh__tables", {}), hints)
    assert "without arguments" in bare and "shown above" not in bare
    given = _approval_text(ToolItem("b", "wh__peek", {"key": "x"}), hints)
    assert "with the arguments shown above" in given


async def test_a_long_structured_result_is_folded_behind_a_summary(view, comms: CommLog):
    import ipywidgets as W
    import json

    rows = [{"region": f"r{i}", "revenue": i * 10.0} for i in range(12)]
    text = json.dumps({"rows": rows}, indent=2)
    assert len(text.splitlines()) > 40
    view.handle_event(ToolExecutionStartEvent(tool_call_id="m1", tool_name="wh__table", args={}))
    view.handle_event(ToolExecutionEndEvent(
        tool_call_id="m1", tool_name="wh__table", is_error=False,
        result=AgentToolResult(content=[TextContent(text=text)],
                               details={"mcp": {"server": "wh", "tool": "table", "structured": {"rows": rows}}})))
    view.flush()
    card = view.tool_card("m1")
    folded = list(_find(card.widget, W.Accordion))
    assert len(folded) == 1 and folded[0].selected_index is None
    assert folded[0].titles[0] == f"Whole result (12 rows, {len(text.splitlines())} lines)"
    preview = comms.last_value(card.widget.children[-1].children[0])
    assert "&quot;r0&quot;" in preview and "&quot;r11&quot;" not in preview and "more lines" in preview
    assert "&quot;r11&quot;" in comms.last_value(folded[0].children[0])  # the whole result, one click away
    short = AgentToolResult(content=[TextContent(text="3 rows")])
    view.handle_event(ToolExecutionStartEvent(tool_call_id="m2", tool_name="wh__table", args={}))
    view.handle_event(ToolExecutionEndEvent(tool_call_id="m2", tool_name="wh__table", is_error=False, result=short))
    view.flush()
    assert not list(_find(view.tool_card("m2").widget, W.Accordion))


def test_a_figures_words_are_read_by_the_model_only_never_rendered():
    """The figure's words (tools/output/figure_text.py) are untrusted text: the card, the
    static and plain-text transcripts and the notebook export show the image or the
    text/plain, never that type."""
    from pi_notebook.session.export import _safe_bundle
    from pi_notebook.tools.output.figure_text import FIGURE_TEXT_MIME
    from pi_notebook.widgets.toolcard import display_html
    from pi_notebook.widgets.transcript_md import display_markdown
    from pi_notebook.widgets.transcript_text import _display_text

    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()
    words = "axes 1: title: <script>alert(1)</script><img src=x onerror=alert(2)>"
    for bundle in ({"image/png": png, "text/plain": "<Figure>", FIGURE_TEXT_MIME: words},
                   {"text/plain": "<Figure>", FIGURE_TEXT_MIME: words}):
        shown = [display_html(bundle), display_markdown(bundle), _display_text(bundle), str(_safe_bundle(bundle))]
        assert not any("alert" in (s or "") for s in shown), shown
