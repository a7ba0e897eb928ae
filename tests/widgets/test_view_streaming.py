"""Coalesced flushing: bounded update rate, exact final text, frozen blocks never re-sent."""

from __future__ import annotations

import asyncio
import time

from pi_notebook.agent.types import AgentEndEvent, AgentStartEvent
from pi_notebook.widgets.blocks import MarkdownBlock, _render_md
from pi_notebook.widgets.markdown import render_markdown

from widget_helpers import AssistantStream, CommLog, user_turn


def _text_block(view) -> MarkdownBlock:
    blocks = [b for b in view.blocks if isinstance(b, MarkdownBlock)]
    assert blocks
    return blocks[-1]


async def _stream_deltas(stream: AssistantStream, index: int, deltas: list[str], per_sleep: int = 10,
                         sleep: float = 0.01) -> float:
    """Feed deltas at about per_sleep/sleep deltas per second; returns the elapsed time."""
    t0 = time.monotonic()
    for i, delta in enumerate(deltas):
        stream.text_delta(index, delta)
        if i % per_sleep == per_sleep - 1:
            await asyncio.sleep(sleep)
    return time.monotonic() - t0


async def test_1000_deltas_per_second_are_coalesced_and_final_text_is_exact(view, comms: CommLog):
    view.handle_event(AgentStartEvent())
    user_turn(view, "write a lot")
    stream = AssistantStream(view).start()
    index = stream.text_start()
    # ~2,000 deltas over ~2 s; a paragraph break every 60 tokens lets the block freeze
    # its head into chunk widgets, so flushes re-send only the tail.
    deltas = [f"tok{i} " + ("\n\n" if i % 60 == 59 else "") for i in range(2000)]
    elapsed = await _stream_deltas(stream, index, deltas)
    stream.text_end(index)
    stream.end()
    view.handle_event(AgentEndEvent(messages=[stream.partial]))
    view.finish("done")

    block = _text_block(view)
    expected = "".join(deltas)
    assert block.text == expected
    widgets = block.chunks.widgets
    pieces = block.chunks.pieces
    assert len(widgets) >= 2, "long text should have been split into frozen chunks"
    assert "".join(pieces) == expected
    for widget, piece in zip(widgets, pieces):
        # What the frontend last received for each widget is the final rendering.
        assert comms.last_value(widget) == _render_md(piece, False)
        assert render_markdown(piece) in comms.last_value(widget)

    updates = sum(len(comms.updates(w, "value")) for w in widgets)
    # At most one flush per 50 ms (20/s) plus the final flush: well under 25/s.
    assert updates <= 25 * elapsed + 2, (updates, elapsed)
    assert updates >= 5, "the text should have been streamed, not sent once at the end"
    # the whole view: one flush per 50 ms, never one per delta
    assert view.flush_count <= 25 * elapsed + 5
    # every state update of every widget of the view (header, chunks, layout, ...):
    # still within 25/s, plus a handful for the end of the run
    total_updates = sum(1 for _c, t, d in comms.messages if t == "comm_msg" and d.get("method") == "update")
    assert total_updates <= 25 * elapsed + 6, (total_updates, elapsed)


async def test_frozen_chunks_and_finished_blocks_are_not_resent(view, comms: CommLog):
    view.handle_event(AgentStartEvent())
    stream = AssistantStream(view).start()
    first = stream.text("First answer with **bold**.", pieces=5)
    await asyncio.sleep(0.08)
    first_block = _text_block(view)
    assert first_block.frozen
    first_widgets = first_block.chunks.widgets
    mark = comms.mark()

    second = stream.text_start()
    deltas = [f"word{i} " + ("\n\n" if i % 50 == 49 else "") for i in range(2500)]
    await _stream_deltas(stream, second, deltas, per_sleep=50)
    second_block = _text_block(view)
    frozen_chunks = second_block.chunks.widgets[:-1]
    assert frozen_chunks, "the long block should have frozen chunks by now"
    mark_chunks = comms.mark()
    await _stream_deltas(stream, second, ["tail "] * 50, per_sleep=10)
    stream.text_end(second)
    stream.end()
    view.finish("done")

    later = comms.since(mark)
    for widget in first_widgets:
        assert not [m for m in later if m[0] == widget.model_id], "a finished block was re-sent"
    for widget in frozen_chunks:
        sent = [m for m in comms.since(mark_chunks) if m[0] == widget.model_id]
        assert not sent, "a frozen chunk was re-sent"
    assert second_block.text == "".join(deltas) + "tail " * 50
    assert first != second


async def test_single_event_is_flushed_promptly_without_a_final_flush(view, comms: CommLog):
    stream = AssistantStream(view).start()
    index = stream.text_start()
    stream.text_delta(index, "Hello")
    await asyncio.sleep(0.08)  # no finish(): the scheduler alone must deliver it
    widget = _text_block(view).chunks.widgets[-1]
    assert "Hello" in comms.last_value(widget)
    assert 'class="pi-cursor"' in comms.last_value(widget)  # still streaming
    stream.text_end(index)
    await asyncio.sleep(0.08)
    assert "pi-cursor" not in comms.last_value(widget)


async def test_handle_event_does_not_touch_widgets_before_the_flush(view, comms: CommLog):
    mark = comms.mark()
    stream = AssistantStream(view).start()
    index = stream.text_start()
    for i in range(100):
        stream.text_delta(index, f"t{i} ")
    assert comms.since(mark) == [], "events must only change Python-side state"
    view.flush()
    assert comms.since(mark), "the flush sends the changes"


async def test_non_streamed_message_is_rendered_from_message_end(view, comms: CommLog):
    from pi_notebook.agent.types import MessageEndEvent, MessageStartEvent
    from pi_notebook.ai.types import AssistantMessage, TextContent, ThinkingContent

    message = AssistantMessage(content=[ThinkingContent(thinking="hmm"), TextContent(text="All *done*.")])
    view.handle_event(MessageStartEvent(message=message))
    view.handle_event(MessageEndEvent(message=message))
    view.finish("done")
    text = _text_block(view)
    assert text.text == "All *done*."
    assert "<em>done</em>" in comms.last_value(text.chunks.widgets[-1])


async def test_aborted_stream_freezes_partial_text_and_shows_notice(view, comms: CommLog):
    view.handle_event(AgentStartEvent())
    stream = AssistantStream(view).start()
    index = stream.text_start()
    stream.text_delta(index, "partial ans")
    message = stream.end(stop_reason="aborted")
    view.handle_event(AgentEndEvent(messages=[message]))
    assert view.status == "aborted"
    block = _text_block(view)
    assert block.frozen and block.text == "partial ans"
    assert "pi-cursor" not in comms.last_value(block.chunks.widgets[-1])
    assert any("Aborted." in v for v in comms.all_html_values())
