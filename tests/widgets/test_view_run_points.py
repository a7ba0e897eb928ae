"""What a user can see go wrong in the browser, as view logic checked without a browser:

- code that prints and then raises: the traceback reaches the card and the transcript;
- a queued run's time in the queue is not run time; its button says "Remove";
- thinking ends when the answer starts (its duration, its preview and cursor).
"""

from __future__ import annotations

import asyncio

from pi_notebook.agent.types import (
    AgentEndEvent,
    AgentStartEvent,
    AgentToolResult,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
)
from pi_notebook.ai.types import (
    AssistantMessage,
    TextContent,
    TextDeltaEvent,
    TextStartEvent,
    ThinkingContent,
    ThinkingDeltaEvent,
    ThinkingStartEvent,
)
from pi_notebook.tools.output.updates import ErrorOutput, PythonCallDetails, ResultOutput, StreamOutput
from pi_notebook.widgets.blocks import ThinkingBlock
from pi_notebook.widgets.items import ThinkingItem
from pi_notebook.widgets.transcript import Transcript
from pi_notebook.widgets.transcript_md import transcript_markdown

from widget_helpers import CommLog, transcript_text

TB = ["Traceback (most recent call last):", '  File "<agent-1>", line 2, in <module>',
      "    1 / 0", "ZeroDivisionError: division by zero"]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _print_then(t: Transcript, extra: list, *, is_error: bool) -> None:
    """A python call whose print arrives live; the value / exception only in the details
    (as the python tool sends them)."""
    args = {"code": "print('before')\n1 / 0"}
    t.apply(ToolExecutionStartEvent(tool_call_id="c1", tool_name="python", args=args))
    t.apply(ToolExecutionUpdateEvent(tool_call_id="c1", tool_name="python", args=args,
                                     partial_result=AgentToolResult(details=StreamOutput(text="before\n"))))
    details = PythonCallDetails(code=args["code"], elapsed_s=0.2, outputs=[StreamOutput(text="before\n"), *extra])
    t.apply(ToolExecutionEndEvent(tool_call_id="c1", tool_name="python", is_error=is_error,
                                  result=AgentToolResult(content=[TextContent(text="model copy")],
                                                         details=details.model_dump())))


def test_print_then_raise_shows_the_traceback_once():
    t = Transcript("faux/m", clock=Clock())
    _print_then(t, [ErrorOutput(ename="ZeroDivisionError", evalue="division by zero", traceback=TB)],
                is_error=True)
    item = t.tools["c1"]
    assert [o.kind for o in item.outputs] == ["stream", "error"]  # the print once, then the error
    md = transcript_markdown(t)
    assert md.count("```text\nbefore\n```") == 1
    assert "ZeroDivisionError: division by zero" in md
    assert md.index("```text\nbefore") < md.index("ZeroDivisionError")


def test_print_then_a_value_shows_the_value():
    t = Transcript("faux/m", clock=Clock())
    _print_then(t, [ResultOutput(data={"text/plain": "42"})], is_error=False)
    assert [o.kind for o in t.tools["c1"].outputs] == ["stream", "display"]
    assert "```text\n42\n```" in transcript_markdown(t)


async def test_print_then_raise_in_the_card(view, comms: CommLog):
    _print_then(view.transcript, [ErrorOutput(ename="ValueError", evalue="bad", traceback=[
        "Traceback (most recent call last):", "ValueError: bad"])], is_error=True)
    view.flush()
    card = view.tool_card("c1")
    shown = "\n".join(v for w in _walk(card.widget) for v in [comms.last_value(w)] if isinstance(v, str))
    assert "before" in shown and '<pre class="pi-out pi-err">' in shown and "ValueError: bad" in shown


# --- the queue --------------------------------------------------------------------------------

def test_time_in_the_queue_is_not_run_time():
    clock = Clock()
    t = Transcript("faux/m", clock=clock)
    t.set_status("queued")
    clock.now += 90  # waiting behind another run
    assert t.elapsed == 0 and not t.timed
    assert transcript_text(transcript_markdown(t)) == "pi agent · faux/m · queued"  # no time
    t.set_status("thinking")  # out of the queue
    clock.now += 6
    t.apply(AgentEndEvent(messages=[]))
    assert t.status == "done" and t.elapsed == 6


def test_a_removed_queued_run_has_no_run_time():
    clock = Clock()
    t = Transcript("faux/m", clock=clock)
    t.set_status("queued")
    clock.now += 16
    t.finish("removed")
    assert transcript_text(transcript_markdown(t)) == "pi agent · faux/m · removed"


async def test_remove_on_a_queued_cell_shows_no_run_time(view, comms: CommLog):
    view.set_status("queued")
    view.flush()
    view.abort_button.click()  # "Remove": the view says aborting until the run layer ends it
    await asyncio.sleep(0.01)
    view.finish("removed")
    assert transcript_text(view.to_markdown()).split("\n")[0] == "pi agent · faux/test-model · removed"


async def test_a_queued_cells_button_says_remove(view, comms: CommLog):
    view.set_status("queued")
    view.flush()
    assert view.abort_button.description == "Remove"
    assert "queue" in view.abort_button.tooltip
    assert 'title="elapsed"' not in comms.last_value(view._header)
    view.set_status("thinking")
    view.flush()
    assert view.abort_button.description == "Abort"
    assert 'title="elapsed"' in comms.last_value(view._header)


# --- thinking ---------------------------------------------------------------------------------

def _think_then_answer(t: Transcript, clock: Clock) -> AssistantMessage:
    partial = AssistantMessage(api="faux", provider="faux", model="m")
    t.apply(AgentStartEvent())
    t.apply(MessageStartEvent(message=partial))
    partial.content.append(ThinkingContent(thinking=""))
    t.apply(MessageUpdateEvent(message=partial, assistant_message_event=ThinkingStartEvent(
        content_index=0, partial=partial)))
    for n in range(4):
        clock.now += 1
        t.apply(MessageUpdateEvent(message=partial, assistant_message_event=ThinkingDeltaEvent(
            content_index=0, delta=f"step {n}\n", partial=partial)))
    # the answer starts; this provider sends no thinking_end before it
    clock.now += 0.5
    partial.content.append(TextContent(text=""))
    t.apply(MessageUpdateEvent(message=partial, assistant_message_event=TextStartEvent(
        content_index=1, partial=partial)))
    clock.now += 10  # the answer streams for 10 s
    t.apply(MessageUpdateEvent(message=partial, assistant_message_event=TextDeltaEvent(
        content_index=1, delta="The answer.", partial=partial)))
    return partial


def test_thinking_ends_when_the_answer_starts():
    clock = Clock()
    t = Transcript("faux/m", clock=clock)
    _think_then_answer(t, clock)
    thinking = next(i for i in t.items if isinstance(i, ThinkingItem))
    assert thinking.frozen  # no live preview (nor its cursor) once the answer streams
    assert thinking.seconds == 4.5 and thinking.title == "Thought for 4.5s"  # not the answer's 10 s
    assert thinking.text == "step 0\nstep 1\nstep 2\nstep 3\n"


async def test_thinking_preview_goes_when_the_answer_starts(view, comms: CommLog):
    clock = Clock()
    view.transcript.clock = clock
    _think_then_answer(view.transcript, clock)
    view.flush()
    block = next(b for b in view.blocks if isinstance(b, ThinkingBlock))
    assert len(block.widget.children) == 1  # the accordion only: no preview, no second cursor
    assert "pi-cursor" not in "".join(str(comms.last_value(w)) for w in _walk(block.widget))
    assert block._accordion.titles == ("Thought for 4.5s",)
    await asyncio.sleep(0)


def _walk(widget):
    yield widget
    for child in getattr(widget, "children", ()) or ():
        yield from _walk(child)


def test_a_huge_value_is_previewed_in_the_card_not_sent_whole():
    """A 20 MB last-expression value does not go to the browser whole.
    The card shows a bounded preview and says how much is left out."""
    from pi_notebook.widgets.toolcard import MAX_RESULT_CHARS, display_html

    value = "x" * 20_000_000
    html = display_html({"text/plain": value})
    assert html is not None
    assert len(html) < MAX_RESULT_CHARS + 1_000
    assert f"{20_000_000 - MAX_RESULT_CHARS:,} more characters" in html
    small = display_html({"text/plain": "42"})
    assert small is not None and "more characters" not in small
