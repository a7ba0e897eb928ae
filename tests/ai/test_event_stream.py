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


async def test_take_queued_hands_over_what_iteration_would_yield_next():
    s: EventStream[int, int] = EventStream(lambda e: e == 99, lambda e: e)
    assert list(s.take_queued()) == []
    s.push(1)
    s.push_many([2, 3])
    assert list(s.take_queued()) == [1, 2, 3]
    assert list(s.take_queued()) == []  # taken means gone
    s.push(4)
    s.push(99)  # completes the stream
    s.push(5)   # after completion: ignored
    iterator = s.__aiter__()
    assert await iterator.__anext__() == 4  # iteration and take_queued share one queue
    assert list(s.take_queued()) == [99]
    with pytest.raises(StopAsyncIteration):
        await iterator.__anext__()
    assert await s.result() == 99


async def test_take_queued_then_iteration_raises_a_failed_streams_error():
    s: EventStream[int, int] = EventStream(lambda e: False, lambda e: e)
    s.push(1)
    s.fail(RuntimeError("gone"))
    assert list(s.take_queued()) == [1]
    with pytest.raises(RuntimeError, match="gone"):
        async for _ in s:
            pass


async def test_take_queued_leaves_a_subclass_with_its_own_iteration_to_iterate():
    class Doubling(EventStream[int, int]):
        async def _iterate(self):  # type: ignore[override]
            async for event in super()._iterate():
                yield event
                yield event

    s = Doubling(lambda e: e == 9, lambda e: e)
    s.push(1)
    s.push(9)
    assert list(s.take_queued()) == []
    assert [e async for e in s] == [1, 1, 9, 9]
