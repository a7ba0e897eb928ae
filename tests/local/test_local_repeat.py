"""local_repeat: a reply that has fallen into a loop is found by its text and cut.

The end-to-end case (a real HTTP stream from a fake llama-server, the request stopped early)
is in test_shared_server.py; here the detector itself and the event rewrite."""

from __future__ import annotations

import pytest

from pi_notebook.ai.abort import AbortController
from pi_notebook.local.repeat import MIN_SPAN, cut_loops, loop_start
from pi_notebook.ai.types import (
    AssistantMessage,
    DoneEvent,
    StartEvent,
    TextContent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    Usage,
)

ROW = "| Stool| Stool| 93.0 |\n"


@pytest.mark.parametrize("text, kept", [
    ("The pivot table is:\n\n" + ROW * 12, "The pivot table is:\n\n" + ROW),
    # a sentence repeated without line breaks
    ("Answer: " + "The total is 42. " * 20, "Answer: The total is 42. "),
    # a two-line block: found as that block, not as one line
    ("x\n" + "a = 1\nb = 2\n" * 30, "x\na = 1\nb = 2\n"),
    # the tail stops mid-copy: still the loop (the block is a rotation)
    ("Top: " + "Widget, Gizmo, " * 20 + "Wid", "Top: Widget, Gizmo, Wid"),
])
def test_a_loop_is_found_and_one_copy_kept(text, kept):
    found = loop_start(text)
    assert found is not None
    end, copies = found
    assert text[:end] == kept
    assert copies >= 10


@pytest.mark.parametrize("text", [
    "",
    "The total revenue of the south region is 1343.1.",
    # a table with different rows, however alike
    "| city | n |\n|---|---|\n" + "".join(f"| Bath | {n} |\n" for n in range(60)),
    # layout, not a loop: a ruler, blank lines, spaces
    "Results\n" + "-" * 400 + "\n",
    "a\n" + "\n" * 300 + "b",
    "x" + " " * 500,
    # short data that repeats: fewer characters than MIN_SPAN
    "values: " + "0\n" * 30,
    # nine copies of a long block: fewer than MIN_REPEATS
    "start " + ("This sentence is long enough to cover the span on its own. " * 9),
])
def test_text_without_a_loop_is_left_alone(text):
    assert loop_start(text) is None


def test_the_span_bound_is_what_separates_data_from_a_loop():
    assert loop_start("v: " + "0\n" * (MIN_SPAN // 2 - 1)) is None
    assert loop_start("v: " + "0\n" * (MIN_SPAN // 2 + 1)) is not None


async def _events(chunks: list[str]):
    message = AssistantMessage(content=[], api="openai-completions", provider="local", model="m",
                               usage=Usage(), stop_reason="stop")
    yield StartEvent(partial=message)
    message.content.append(TextContent(text=""))
    yield TextStartEvent(content_index=0, partial=message)
    for chunk in chunks:
        message.content[0].text += chunk
        yield TextDeltaEvent(content_index=0, delta=chunk, partial=message)
    yield TextEndEvent(content_index=0, content=message.content[0].text, partial=message)
    yield DoneEvent(reason="stop", message=message)


async def test_the_stream_ends_at_the_loop_with_length_and_a_note():
    inner = AbortController()
    events = [e async for e in cut_loops(_events(["Here:\n", *[ROW] * 200]), inner)]
    assert inner.signal.aborted
    assert [e.type for e in events[-2:]] == ["text_end", "done"]
    end, done = events[-2], events[-1]
    assert end.content == "Here:\n" + ROW.rstrip()
    assert done.reason == "length" and done.message.stop_reason == "length"
    assert done.message.content[0].text == end.content
    assert "repeating the same text" in (done.message.error_message or "")
    deltas = [e for e in events if e.type == "text_delta"]
    assert len(deltas) < 30  # stopped near MIN_SPAN, not at the 200th copy
    # the final message is a copy: the aborted request writing on its own does not change it
    first_partial = deltas[0].partial
    first_partial.stop_reason = "aborted"
    assert done.message.stop_reason == "length"


async def test_a_stream_without_a_loop_passes_through_unchanged():
    inner = AbortController()
    chunks = ["The", " total", " is", " 1343.1", "."]
    events = [e async for e in cut_loops(_events(chunks), inner)]
    assert not inner.signal.aborted
    assert [e.type for e in events] == ["start", "text_start", *["text_delta"] * 5, "text_end", "done"]
    assert events[-1].message.content[0].text == "The total is 1343.1."
