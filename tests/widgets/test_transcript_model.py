"""The transcript model and the static transcript, driven with plain events (no widgets)."""

from __future__ import annotations

from pathlib import Path

from markdown_it import MarkdownIt

from pi_notebook.agent.types import (
    AgentEndEvent,
    AgentStartEvent,
    AgentToolResult,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
)
from pi_notebook.ai.types import (
    AssistantMessage,
    Cost,
    TextContent,
    TextDeltaEvent,
    TextStartEvent,
    ThinkingContent,
    ThinkingDeltaEvent,
    ThinkingStartEvent,
    Usage,
    UserMessage,
)
from pi_notebook.tools.output.updates import DisplayOutput, ErrorOutput, PythonCallDetails, StreamOutput
from pi_notebook.widgets._util import find_invisible, reveal_invisible
from pi_notebook.widgets.items import TextItem, ThinkingItem, UserItem
from pi_notebook.widgets.toolcall import fold_traceback
from pi_notebook.widgets.transcript import Transcript
from pi_notebook.widgets.transcript_md import seal, transcript_markdown

from widget_helpers import transcript_text

TRACEBACK = (Path(__file__).parent / "data" / "pandas_keyerror_traceback.txt").read_text()
GFM = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _transcript() -> tuple[Transcript, Clock]:
    clock = Clock()
    return Transcript("faux/m", clock=clock), clock


def _assistant_text(t: Transcript, text: str, *, end: bool = True, usage: Usage | None = None) -> AssistantMessage:
    partial = AssistantMessage(api="faux", provider="faux", model="m")
    t.apply(MessageStartEvent(message=partial))
    partial.content.append(TextContent(text=""))
    t.apply(MessageUpdateEvent(message=partial, assistant_message_event=TextStartEvent(content_index=0,
                                                                                      partial=partial)))
    partial.content[0].text = text
    t.apply(MessageUpdateEvent(message=partial, assistant_message_event=TextDeltaEvent(
        content_index=0, delta=text, partial=partial)))
    if end:
        partial.usage = usage or Usage(input=10, output=5, total_tokens=15, cost=Cost(total=0.01))
        t.apply(MessageEndEvent(message=partial))
    return partial


def _python_call(t: Transcript, clock: Clock, call_id: str, code: str, updates: list, details: PythonCallDetails,
                 *, model_text: str = "[value]\n42\n[elapsed 0.40 s]", is_error: bool = False) -> None:
    args = {"code": code}
    t.apply(ToolExecutionStartEvent(tool_call_id=call_id, tool_name="python", args=args))
    for update in updates:
        t.apply(ToolExecutionUpdateEvent(tool_call_id=call_id, tool_name="python", args=args,
                                         partial_result=AgentToolResult(details=update.model_dump())))
    clock.now += 30  # a long wait that is not execution
    result = AgentToolResult(content=[TextContent(text=model_text)], details=details.model_dump())
    t.apply(ToolExecutionEndEvent(tool_call_id=call_id, tool_name="python", result=result, is_error=is_error))


# --- events -> items, status, usage -----------------------------------------------------------

def test_events_become_items_status_and_usage():
    t, clock = _transcript()
    t.announce("hi")
    t.apply(AgentStartEvent())
    assert t.status == "thinking"
    t.apply(MessageStartEvent(message=UserMessage(content="hi")))
    _assistant_text(t, "Hello **there**", end=False)
    assert t.status == "writing"
    assert t.usage_now() == (0, 0, 0.0)
    partial = t.items[-1]
    assert isinstance(partial, TextItem) and not partial.frozen
    _assistant_text(t, "second", usage=Usage(input=100, output=20, total_tokens=120, cost=Cost(total=0.5)))
    clock.now += 2
    t.apply(AgentEndEvent(messages=[]))
    assert t.status == "done" and t.elapsed == 2
    kinds = [type(i).__name__ for i in t.items]
    assert kinds == ["UserItem", "TextItem", "TextItem"]
    assert all(i.frozen for i in t.items)  # the unfinished stream was frozen at the end
    assert t.usage_now() == (100, 20, 0.5)
    assert t.context_used == 120


def test_deliveries_bind_by_token_never_by_text():
    t, _ = _transcript()
    t.show_queued("steer", "same", "t1")
    t.show_queued("steer", "same", "t2")
    t.deliver_queued("t2", "same", "steer")
    assert [q.token for q in t.queued] == ["t1"]
    message = UserMessage(content="same")
    t.apply(MessageStartEvent(message=message))
    t.apply(MessageStartEvent(message=message))  # the same message again: ignored
    users = [i for i in t.items if isinstance(i, UserItem)]
    assert len(users) == 1 and users[0].source is message


def test_thinking_preview_shows_the_last_lines_while_streaming():
    t, _ = _transcript()
    partial = AssistantMessage(api="faux", provider="faux", model="m")
    t.apply(MessageStartEvent(message=partial))
    partial.content.append(ThinkingContent(thinking=""))
    t.apply(MessageUpdateEvent(message=partial, assistant_message_event=ThinkingStartEvent(
        content_index=0, partial=partial)))
    for n in range(6):
        t.apply(MessageUpdateEvent(message=partial, assistant_message_event=ThinkingDeltaEvent(
            content_index=0, delta=f"line {n}\n", partial=partial)))
    item = t.items[-1]
    assert isinstance(item, ThinkingItem) and item.title == "Thinking…"
    assert item.preview(3) == "line 3\nline 4\nline 5"


# --- python tool calls: typed outputs ----------------------------------------------------------

def test_python_call_shows_typed_outputs_and_execution_time_only():
    t, clock = _transcript()
    details = PythonCallDetails(code="print('hi')", elapsed_s=0.4,
                                outputs=[StreamOutput(text="hi\n")])
    _python_call(t, clock, "c1", "print('hi')", [StreamOutput(text="hi\n")], details)
    item = t.tools["c1"]
    assert item.status == "done"
    assert item.duration == 0.4  # not the 30 s between start and end
    assert [o.stream.text for o in item.outputs if o.stream] == ["hi\n"]
    assert item.result_text == ""  # the model's copy is not the user's output
    md = transcript_markdown(t)
    assert "```text\nhi\n```" in md
    assert "[value]" not in md and "[elapsed" not in md


def test_aborted_call_says_aborted_and_shows_stdout_once():
    t, clock = _transcript()
    details = PythonCallDetails(code="loop()", elapsed_s=1.5, aborted=True,
                                outputs=[StreamOutput(text="tick\n")])
    _python_call(t, clock, "c1", "loop()", [StreamOutput(text="tick\n")], details, is_error=True,
                 model_text="tick\n[aborted]\nDo not retry the same call; ask the user how to proceed.")
    item = t.tools["c1"]
    assert item.status == "aborted"
    md = transcript_markdown(t)
    assert md.count("tick") == 1
    assert "Do not retry" not in md
    assert "⚙ python · aborted · 1.5s" in transcript_text(md)


def test_outputs_come_from_the_final_details_when_no_live_update_arrived():
    t, clock = _transcript()
    png = "iVBORw0KGgo="
    details = PythonCallDetails(code="x", elapsed_s=0.1, outputs=[
        StreamOutput(text="a\n"), DisplayOutput(data={"image/png": png, "text/plain": "<Figure>"}),
        StreamOutput(name="stderr", text="warn\n")])
    _python_call(t, clock, "c1", "x", [], details)
    item = t.tools["c1"]
    assert [(o.kind, o.name) for o in item.outputs] == [("stream", "stdout"), ("display", "stdout"),
                                                        ("stream", "stderr")]
    md = transcript_markdown(t)
    assert md.index("a\n") < md.index(f"data:image/png;base64,{png}") < md.index("warn")


def test_error_output_folds_library_frames():
    t, clock = _transcript()
    error = ErrorOutput(ename="KeyError", evalue="'b'", traceback=TRACEBACK.split("\n"))
    details = PythonCallDetails(code="df['b']", elapsed_s=0.1, outputs=[error])
    _python_call(t, clock, "c1", "df['b']", [error], details, is_error=True)
    md = transcript_markdown(t)
    summary = md.split("<details>")[0]
    assert "----> 3 df['b']" in summary and "KeyError: 'b'" in summary
    assert "Could not get source" not in summary and ".pxi" not in summary
    assert "Could not get source" in md  # the full traceback is kept, folded


def test_fold_traceback_keeps_the_users_frame_and_the_exception():
    summary, folded = fold_traceback(TRACEBACK)
    assert folded
    lines = summary.split("\n")
    assert len(lines) < 12
    assert "File <agent-3>:3" in summary and lines[-1] == "KeyError: 'b'"
    assert "site-packages" not in summary
    short = "Traceback (most recent call last):\n  File \"<agent-1>\", line 1\n    1/0\nZeroDivisionError: x"
    assert fold_traceback(short) == (short, False)


# --- code shown as it will run ------------------------------------------------------------------

def test_reveal_invisible_writes_out_bidi_and_zero_width_characters():
    code = "access = 'user\u202e \u2066# admin\u2069 \u2066'\u200b\ufeff"
    assert find_invisible(code) == ["\u202e", "\u2066", "\u2069", "\u200b", "\ufeff"]
    shown = reveal_invisible(code)
    assert "⟨U+202E⟩" in shown and "⟨U+2066⟩" in shown and "⟨U+FEFF⟩" in shown
    assert not find_invisible(shown)
    for c in "\u202a\u202b\u202c\u202d\u2067\u2068\u200c\u200d\u200e\u200f\u2060":
        assert reveal_invisible(c) == f"⟨U+{ord(c):04X}⟩"
    assert reveal_invisible("plain é ü") == "plain é ü"


# --- the static transcript -----------------------------------------------------------------------

def _top_level_paragraphs(md: str) -> list[str]:
    tokens = GFM.parse(md)
    return [tokens[i + 1].content for i, tok in enumerate(tokens)
            if tok.type == "paragraph_open" and tok.level == 0]


def test_an_unclosed_fence_cannot_swallow_the_rest():
    t, _ = _transcript()
    _assistant_text(t, "Here is the config:\n\n```json\n{\"a\": 1,")
    t.notice("after the reply")
    md = transcript_markdown(t)
    tokens = GFM.parse(md)
    assert not any("after the reply" in tok.content for tok in tokens if tok.type in ("fence", "code_block"))
    assert any(tok.type == "html_block" and "after the reply" in tok.content for tok in tokens)
    assert '{"a": 1,' in [tok.content.strip() for tok in tokens if tok.type == "fence"]


def test_seal_closes_fences_and_quarantines_open_html():
    assert seal("a\n~~~~py\nx = 1") == "a\n~~~~py\nx = 1\n~~~~"
    assert seal("text") == "text"
    sealed = seal("<pre>unclosed")
    tokens = GFM.parse(sealed + "\n\nnext")
    assert tokens[-2].content == "next"


def test_lone_surrogates_never_stop_the_transcript():
    t, _ = _transcript()
    t.announce("bad \ud800 text")
    _assistant_text(t, "reply \udfff here")
    md = transcript_markdown(t)
    md.encode("utf-8")  # does not raise
    assert "\ufffd" in md


def test_thinking_wraps_at_word_boundaries_in_the_transcript():
    t, _ = _transcript()
    partial = AssistantMessage(api="faux", provider="faux", model="m",
                               content=[ThinkingContent(thinking="grouping the rows <first>\n\nthen $x$")])
    t.apply(MessageStartEvent(message=partial))
    t.apply(MessageEndEvent(message=partial))
    md = transcript_markdown(t)
    assert "<pre>" not in md
    assert "<p>grouping the rows &lt;first&gt;</p>" in md and "<p>then &#36;x&#36;</p>" in md


def test_agent_output_is_fenced_with_a_fence_longer_than_any_inside():
    t, clock = _transcript()
    text = "col1  col2\n```\n````\n"
    details = PythonCallDetails(code="print(df)", elapsed_s=0.1, outputs=[StreamOutput(text=text)])
    _python_call(t, clock, "c1", "print(df)", [StreamOutput(text=text)], details)
    md = transcript_markdown(t)
    assert "`````text\ncol1  col2\n```\n````\n`````" in md
    assert "```python\nprint(df)\n```" in md


def test_math_in_the_transcript_is_mathml_and_money_stays_text():
    t, _ = _transcript()
    _assistant_text(t, "Area $\\pi r^2$ costs $5 and $6.\n\n$$\n\\frac{a}{b}\n$$\n\nbad $\\frac{$ end")
    md = transcript_markdown(t)
    assert '<span class="pi-math"><math' in md and '<mfrac>' in md
    assert "\\$5 and \\$6" in md  # no TeX pass in the frontend can start at a stray "$"
    assert '<code class="pi-math-error">' in md


def test_policy_is_in_the_header():
    t, _ = _transcript()
    t.set_policy("auto")
    assert "approval: auto" in transcript_markdown(t).split("\n")[1]  # the header line




def test_the_model_and_the_static_transcript_import_no_widgets():
    import subprocess
    import sys

    # (IPython still comes in through pi_notebook/tools/__init__.py, owned by the tools layer.)
    code = ("import sys, pi_notebook.widgets.transcript_md, pi_notebook.widgets.text_view; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('ipywidgets', 'comm')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_untyped_stream_updates_of_earlier_versions_are_still_read():
    t, _ = _transcript()
    t.apply(ToolExecutionStartEvent(tool_call_id="c", tool_name="python", args={"code": "x"}))
    t.apply(ToolExecutionUpdateEvent(tool_call_id="c", tool_name="python", args={}, partial_result=AgentToolResult(
        details={"event": "stream", "name": "stderr", "text": "old\n"})))
    out = t.tools["c"].outputs
    assert [(o.kind, o.name, o.stream.text) for o in out if o.stream] == [("stream", "stderr", "old\n")]


def test_a_cut_reply_says_why_when_the_provider_gives_a_reason():
    from pi_notebook.widgets.items import NoticeItem

    for reason, expected in ((None, "the model hit its output token limit"),
                             ("The reply was cut off: the model kept repeating the same text (12 copies).",
                              "kept repeating the same text (12 copies)")):
        t, _clock = _transcript()
        partial = _assistant_text(t, "| Bath | 93.0 |", end=False)
        partial.stop_reason, partial.error_message = "length", reason
        t.apply(MessageEndEvent(message=partial))
        notices = [i for i in t.items if isinstance(i, NoticeItem)]
        assert len(notices) == 1 and expected in notices[0].text and notices[0].level == "warning"


def test_a_streamed_call_the_final_message_left_out_did_not_run():
    """The local provider leaves a call whose code looped out of the final message (it never
    finished); its card says so at the message's end instead of waiting for a run. A call the
    final message keeps, one index on behind a note, is untouched."""
    from pi_notebook.ai.types import TextContent, ToolCall, ToolCallDeltaEvent, ToolCallStartEvent
    from pi_notebook.local.repeat import CODE_LOOP_NOTE
    from pi_notebook.widgets.items import NoticeItem

    def stream_call(t: Transcript, call_id: str) -> AssistantMessage:
        partial = AssistantMessage(api="faux", provider="faux", model="m")
        t.apply(MessageStartEvent(message=partial))
        partial.content.append(ToolCall(id=call_id, name="python", arguments={"code": "x = 1\n" * 30}))
        for ame in (ToolCallStartEvent(content_index=0, partial=partial),
                    ToolCallDeltaEvent(content_index=0, delta="x", partial=partial)):
            t.apply(MessageUpdateEvent(message=partial, assistant_message_event=ame))
        return partial

    t, _clock = _transcript()
    t.apply(AgentStartEvent())
    partial = stream_call(t, "cut")
    final = partial.model_copy(update={"content": [], "stop_reason": "length",
                                       "error_message": CODE_LOOP_NOTE.format(copies=5)})
    t.apply(MessageEndEvent(message=final))
    assert t.tools["cut"].status == "skipped" and t.tools["cut"].frozen
    notices = [i for i in t.items if isinstance(i, NoticeItem)]
    assert len(notices) == 1 and "repeating the same code (5 copies)" in notices[0].text

    t, _clock = _transcript()
    t.apply(AgentStartEvent())
    partial = stream_call(t, "kept")
    final = partial.model_copy(update={"content": [TextContent(text="(note)"), *partial.content],
                                       "stop_reason": "toolUse"})
    t.apply(MessageEndEvent(message=final))
    assert t.tools["kept"].status == "preparing" and not t.tools["kept"].frozen
