"""What a user sees in the live view: approval layout, hidden characters, figures, math while
streaming, thinking preview, policy, closing every widget, the saved-notebook fallback."""

from __future__ import annotations

import asyncio
import threading

import ipywidgets as W
from ipywidgets.widgets.widget import _instances as live_widgets
from test_transcript_model import TRACEBACK
from test_view_buttons import _show_approval
from helpers.widgets import shown_text
from widget_helpers import AssistantStream, CommLog, html_problems

from pi_notebook.agent.types import (
    AgentEndEvent,
    AgentStartEvent,
    AgentToolResult,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
)
from pi_notebook.ai.types import TextContent
from pi_notebook.tools.output.updates import DisplayOutput, ErrorOutput, PythonCallDetails, StreamOutput
from pi_notebook.widgets.blocks import ThinkingBlock
from pi_notebook.widgets.text_view import TextView
from pi_notebook.widgets.theme import stylesheet
from pi_notebook.widgets.view import FALLBACK_TEXT, AgentView

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def _all_html(comms: CommLog, widget: W.Widget) -> str:
    return shown_text(widget, comms.last_value)


def _python_call(view: AgentView, call_id: str, updates: list, details: PythonCallDetails, *,
                 model_text: str = "[value]\n42\n[elapsed 0.40 s]", is_error: bool = False) -> None:
    args = {"code": details.code}
    view.handle_event(ToolExecutionStartEvent(tool_call_id=call_id, tool_name="python", args=args))
    for update in updates:
        view.handle_event(ToolExecutionUpdateEvent(tool_call_id=call_id, tool_name="python", args=args,
                                                   partial_result=AgentToolResult(details=update)))
    result = AgentToolResult(content=[TextContent(text=model_text)], details=details)
    view.handle_event(ToolExecutionEndEvent(tool_call_id=call_id, tool_name="python", result=result,
                                            is_error=is_error))


# --- approval panel ----------------------------------------------------------------------------

async def test_approval_panel_is_text_above_a_row_of_buttons(view, comms: CommLog):
    task, card = await _show_approval(view)
    panel = card._approval
    assert isinstance(panel, W.VBox) and "pi-approval" in panel._dom_classes
    text, row = panel.children
    assert isinstance(text, W.HTML) and "Run this code?" in text.value
    assert isinstance(row, W.HBox) and "pi-approval-buttons" in row._dom_classes
    assert [b.description for b in row.children] == ["Run", "Skip", "Always for this run"]
    css = stylesheet()
    assert ".pi-approval-buttons { flex-wrap: wrap" in css
    view.cancel_approvals()
    assert await task == "skip"


async def test_answered_approval_buttons_are_disabled(view, comms: CommLog):
    task, card = await _show_approval(view)
    card.approval_buttons["run"].click()
    assert await task == "run"
    view.flush()
    assert all(b.disabled for b in card.approval_buttons.values())


async def test_approval_shows_invisible_characters_and_warns(view, comms: CommLog):
    code = "role = 'user' \u202e# nimda\u2066 \u200b"
    task, card = await _show_approval(view, code=code)
    html = _all_html(comms, card.widget)
    assert "\u202e" not in html and "\u2066" not in html and "\u200b" not in html
    assert '<span class="pi-invisible">⟨U+202E⟩</span>' in html
    assert "invisible or text-direction characters" in html and "U+202E, U+2066, U+200B" in html
    view.cancel_approvals()
    await task


# --- tool cards ----------------------------------------------------------------------------------

async def test_card_shows_typed_outputs_not_the_model_copy(view, comms: CommLog):
    view.handle_event(AgentStartEvent())
    updates = [StreamOutput(text="hello\n"), DisplayOutput(data={"image/png": PNG, "text/plain": "<Figure>"})]
    details = PythonCallDetails(code="print('hello')", elapsed_s=0.25, outputs=updates)
    _python_call(view, "c1", updates, details,
                 model_text="hello\n[value]\n<Figure>\n[elapsed 0.25 s]\nDo not retry the same call.")
    view.flush()
    card = view.tool_card("c1")
    html = _all_html(comms, card.widget)
    assert "hello" in html and f"data:image/png;base64,{PNG}" in html
    assert "[value]" not in html and "[elapsed" not in html and "Do not retry" not in html
    assert ">0.2s<" in html or ">0.3s<" in html  # the execution time from the details
    assert not html_problems(html)


async def test_figure_keeps_its_natural_size(view, comms: CommLog):
    css = stylesheet()
    assert ".pi-out-img { max-width: 100%; height: auto;" in css
    outbox_rule = next(r for r in css.split("\n") if r.startswith(".pi-agent .pi-outbox {"))
    assert "max-height" not in outbox_rule and "height:" not in outbox_rule


async def test_aborted_call_says_aborted_and_shows_stdout_once(view, comms: CommLog):
    view.handle_event(AgentStartEvent())
    tick = StreamOutput(text="tick-1\n")
    details = PythonCallDetails(code="loop()", elapsed_s=2.0, aborted=True, outputs=[tick])
    _python_call(view, "c1", [tick], details, is_error=True,
                 model_text="tick-1\n[aborted by the user]\nDo not retry the same call.")
    view.flush()
    card = view.tool_card("c1")
    assert card.status == "aborted"
    html = _all_html(comms, card.widget)
    assert html.count("tick-1") == 1 and "aborted" in html


async def test_traceback_shows_the_users_frame_first(view, comms: CommLog):
    view.handle_event(AgentStartEvent())
    error = ErrorOutput(ename="KeyError", evalue="'b'", traceback=TRACEBACK.split("\n"))
    details = PythonCallDetails(code="df['b']", elapsed_s=0.1, outputs=[error])
    _python_call(view, "c1", [error], details, is_error=True)
    view.flush()
    html = _all_html(comms, view.tool_card("c1").widget)
    first, _, folded = html.partition('<details class="pi-tb-full">')
    assert "df[&#x27;b&#x27;]" in first and "KeyError: &#x27;b&#x27;" in first
    assert "Could not get source" not in first
    assert "Could not get source" in folded


# --- streaming ---------------------------------------------------------------------------------

async def test_math_renders_while_the_text_streams(view, comms: CommLog):
    view.handle_event(AgentStartEvent())
    stream = AssistantStream(view).start()
    index = stream.text_start()
    stream.text_delta(index, "The area is $\\pi r^2$ and")
    view.flush()
    block = view.blocks[-1]
    live = comms.last_value(block.chunks.widgets[-1])
    assert "<math" in live and "<msup>" in live and "pi-cursor" in live
    stream.text_delta(index, " $\\href{javascript:alert(1)}{x}$ and $\\frac{$")
    view.flush()
    live = comms.last_value(block.chunks.widgets[-1])
    assert "href" not in live and "javascript" not in live
    assert '<code class="pi-math-error">' in live


async def test_thinking_has_a_live_preview_then_collapses(view, comms: CommLog):
    view.handle_event(AgentStartEvent())
    stream = AssistantStream(view).start()
    stream.partial.content.append(__import__("pi_notebook.ai.types", fromlist=["ThinkingContent"])
                                  .ThinkingContent(thinking=""))
    from pi_notebook.ai.types import ThinkingDeltaEvent, ThinkingEndEvent, ThinkingStartEvent
    stream._update(ThinkingStartEvent(content_index=0, partial=stream.partial))
    for n in range(5):
        stream._update(ThinkingDeltaEvent(content_index=0, delta=f"step {n} <x>\n", partial=stream.partial))
    view.flush()
    block = view.blocks[-1]
    assert isinstance(block, ThinkingBlock)
    preview = block.widget.children[-1]
    assert "pi-thinking-preview" in preview.value and "step 4 &lt;x&gt;" in preview.value
    assert "step 1" not in preview.value  # only the last lines
    assert block._accordion.selected_index is None  # the full text stays collapsed
    stream._update(ThinkingEndEvent(content_index=0, content="done", partial=stream.partial))
    view.flush()
    assert block.widget.children == (block._accordion,)


async def test_long_answers_scroll_in_a_box_that_follows_the_newest_text(view, comms: CommLog):
    css = stylesheet()
    rule = next(r for r in css.split("\n") if r.startswith(".pi-agent .pi-scroll {"))
    assert "column-reverse" in rule and "max-height" in rule
    assert any("pi-scroll" in c._dom_classes for c in view.children)


async def test_wide_tables_scroll_and_markdown_uses_lab_classes(view, comms: CommLog):
    stream = AssistantStream(view).start()
    stream.text("| " + " | ".join(f"c{i}" for i in range(40)) + " |\n|" + "---|" * 40)
    view.flush()
    html = comms.last_value(view.blocks[-1].chunks.widgets[-1])
    assert '<div class="pi-md jp-RenderedHTMLCommon jp-RenderedMarkdown"><table>' in html
    assert ".pi-agent .pi-md table { display: block; max-width: 100%; overflow-x: auto;" in stylesheet()


# --- header, close, fallback ----------------------------------------------------------------------

async def test_a_declined_call_shows_no_model_advice_and_no_duration(view, comms: CommLog):
    task, card = await _show_approval(view, "d1", "print(1)")
    card.approval_buttons["skip"].click()
    assert await task == "skip"
    advice = "The user declined to run this code. Do not retry the same call."
    view.handle_event(ToolExecutionEndEvent(
        tool_call_id="d1", tool_name="python", is_error=True,
        result=AgentToolResult(content=[TextContent(text=advice)])))
    view.flush()
    assert card.status == "skipped" and card.duration is None  # the wait was not execution
    assert "Do not retry" not in _all_html(comms, card.widget)
    md = view.to_markdown()
    assert "skipped" in md and "Do not retry" not in md


def test_a_dead_kernels_view_hides_its_live_controls():
    css = stylesheet()
    dead = css[css.index(".pi-agent.jupyter-widgets-disconnected :is("):]
    rule = dead[:dead.index("}")]
    for selector in (".pi-abort", ".pi-approval", ".pi-remove", ".pi-dot", ".pi-cursor"):
        assert selector in rule.split("{")[0]
    assert "display: none" in rule
    assert ".pi-agent .jupyter-widgets-disconnected::before { content: none" in css  # no icon per widget


async def test_header_shows_the_policy_in_force(view, comms: CommLog):
    view.set_policy("auto")
    view.flush()
    assert "approval: auto" in comms.last_value(view._header)
    assert "approval: auto" in view.to_markdown().split("\n")[1]  # the header line


async def test_close_leaves_no_widget_of_the_view_alive(comms: CommLog):
    before = set(live_widgets)
    view = AgentView("faux/m", asyncio.get_running_loop(), on_abort=lambda: None)
    view.handle_event(AgentStartEvent())
    stream = AssistantStream(view).start()
    stream.thinking("hmm " * 10)
    stream.text("x" * 7000 + "\n\n" + "y" * 7000, pieces=40)  # frozen chunks
    view.flush()
    task, card = await _show_approval(view, "z1", "1")
    card.approval_buttons["skip"].click()
    await task
    view.show_queued("steer", "later", "q")
    view.set_policy("ask")
    view.flush()
    view.finish()
    assert len(set(live_widgets) - before) > 20
    view.close()
    alive = set(live_widgets) - before
    assert alive == set(), f"{len(alive)} widget models of the view are still alive"
    assert all(b.disabled for b in card.approval_buttons.values())


async def test_display_bundle_carries_a_static_fallback(view, comms: CommLog):
    view.show_notice("compacted")
    bundle = view.display_bundle()
    widget = bundle["application/vnd.jupyter.widget-view+json"]
    assert widget["model_id"] == view.model_id and widget["version_major"] == 2
    assert bundle["text/plain"].startswith(FALLBACK_TEXT)
    assert FALLBACK_TEXT in bundle["text/markdown"] and "compacted" in bundle["text/markdown"]
    assert "<script" not in bundle["text/markdown"]


# --- the text view ---------------------------------------------------------------------------------

def test_text_view_prints_typed_outputs_and_labels_deliveries(capsys):
    from pi_notebook.agent.types import MessageStartEvent
    from pi_notebook.ai.types import UserMessage

    view = TextView("faux/m")
    view.set_policy("auto")
    view.add_user_message("go")
    view.handle_event(AgentStartEvent())
    view.handle_event(MessageStartEvent(message=UserMessage(content="go")))
    view.show_queued("steer", "same", "t1")
    view.deliver_queued("t1", "same", "steer")
    view.handle_event(MessageStartEvent(message=UserMessage(content="same")))
    for update in (StreamOutput(text="out\n"), ErrorOutput(ename="KeyError", evalue="'b'",
                                                           traceback=TRACEBACK.split("\n"))):
        view.handle_event(ToolExecutionUpdateEvent(tool_call_id="c", tool_name="python", args={},
                                                   partial_result=AgentToolResult(details=update)))
    details = PythonCallDetails(code="x", elapsed_s=0.1)
    view.handle_event(ToolExecutionEndEvent(tool_call_id="c", tool_name="python", is_error=False, result=AgentToolResult(
        content=[TextContent(text="[value]\n1\n[elapsed 0.1 s]")], details=details)))
    view.handle_event(AgentEndEvent(messages=[]))
    view.finish("done")
    out = capsys.readouterr().out
    assert "[approval: auto]" in out
    assert "You: go" in out and "Steer: same" in out
    assert "out\n" in out and "KeyError: 'b'" in out and "Could not get source" not in out
    assert "[value]" not in out and "[elapsed" not in out
    assert threading.current_thread() is threading.main_thread()


async def test_plain_display_sends_the_same_bundle(view, comms: CommLog):
    from IPython.core.formatters import DisplayFormatter

    data, _meta = DisplayFormatter().format(view)
    assert data["application/vnd.jupyter.widget-view+json"]["model_id"] == view.model_id
    assert FALLBACK_TEXT in data["text/markdown"] and data["text/plain"].startswith(FALLBACK_TEXT)


async def test_a_notebook_saved_mid_run_shows_the_fallback_in_nbconvert(view, comms: CommLog):
    import nbformat
    from nbconvert import HTMLExporter

    view.add_user_message("plot <it>")
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("%%agent\nplot it")
    cell.outputs = [nbformat.v4.new_output("display_data", data=view.display_bundle())]
    nb.cells.append(cell)  # saved without widget state: the kernel is gone
    html, _ = HTMLExporter().from_notebook_node(nb)
    assert FALLBACK_TEXT in html and "plot &lt;it&gt;" in html
    assert "application/vnd.jupyter.widget-view+json" not in html


def test_text_view_says_why_a_reply_was_cut(capsys):
    from pi_notebook.agent.types import MessageEndEvent
    from pi_notebook.ai.types import AssistantMessage

    view = TextView("faux/m")
    message = AssistantMessage(api="faux", provider="faux", model="m", content=[TextContent(text="| a |")],
                               stop_reason="length", error_message="The reply was cut off: the model kept "
                                                                   "repeating the same text (11 copies).")
    view.handle_event(MessageEndEvent(message=message))
    assert "[The reply was cut off: the model kept repeating the same text (11 copies).]" in capsys.readouterr().out
    view.handle_event(MessageEndEvent(message=message.model_copy(update={"error_message": None})))
    assert "[The reply was cut off: the model hit its output token limit.]" in capsys.readouterr().out
