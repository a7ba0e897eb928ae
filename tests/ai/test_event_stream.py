import asyncio

import pytest

from pi_notebook.ai.abort import AbortController, AbortError
from pi_notebook.ai.event_stream import AssistantMessageEventStream, EventStream
from pi_notebook.ai.types import AssistantMessage, DoneEvent, ErrorEvent, StartEvent


def _stream() -> EventStream:
    return EventStream(lambda e: e == "done", lambda e: "result")


async def test_completing_event_is_delivered_and_later_pushes_ignored():
    s = _stream()
    s.push("a")
    s.push("done")
    s.push("late")
    assert [e async for e in s] == ["a", "done"]
    assert await s.result() == "result"


async def test_consumer_waits_for_events_pushed_later():
    s = _stream()

    async def produce():
        await asyncio.sleep(0.01)
        s.push("x")
        s.push("done")

    task = asyncio.create_task(produce())
    assert [e async for e in s] == ["x", "done"]
    await task


async def test_end_without_result_leaves_result_pending():
    s = _stream()
    s.end()
    assert [e async for e in s] == []
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(s.result(), 0.05)


async def test_end_with_result_resolves():
    s = _stream()
    s.end("r")
    assert await s.result() == "r"


async def test_fail_raises_from_iteration_after_queued_events():
    s = _stream()
    s.push("a")
    s.fail(RuntimeError("boom"))
    got = []
    with pytest.raises(RuntimeError, match="boom"):
        async for e in s:
            got.append(e)
    assert got == ["a"]


async def test_assistant_stream_result_is_done_message_or_error_message():
    msg = AssistantMessage()
    s = AssistantMessageEventStream()
    s.push(StartEvent(partial=msg))
    s.push(DoneEvent(reason="stop", message=msg))
    assert await s.result() is msg
    err = AssistantMessage(stop_reason="error", error_message="x")
    s2 = AssistantMessageEventStream()
    s2.push(ErrorEvent(reason="error", error=err))
    assert await s2.result() is err


def test_abort_controller_listeners_and_reason():
    c = AbortController()
    calls = []
    remove = c.signal.add_listener(lambda: calls.append(1))
    c.signal.add_listener(lambda: calls.append(2))
    remove()
    assert not c.signal.aborted
    c.signal.throw_if_aborted()
    c.abort("why")
    c.abort("again")
    assert c.signal.aborted and c.signal.reason == "why"
    assert calls == [2]
    with pytest.raises(AbortError, match="why"):
        c.signal.throw_if_aborted()
    late = []
    c.signal.add_listener(lambda: late.append(1))
    assert late == [1]
