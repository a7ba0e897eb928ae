"""The per-delta fast paths build the same objects as the validated, generic ones.

``fast_shallow_copy`` must be indistinguishable from ``model_copy()`` and
``construct_unchecked`` from the validating constructor; the agent loop's inlined
``message_update`` path and what it takes from the EventStream (``take_queued``) must give the
same events, in the same order, as the generic code. (Speed itself is measured by
``bench/loop_overhead.py``, never asserted here.)
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from pydantic import ConfigDict, PrivateAttr

from pi_notebook.agent import AgentContext, AgentLoopConfig, run_agent_loop
from pi_notebook.agent.loop import _message_update, _shallow_copy
from pi_notebook.agent.types import MessageUpdateEvent
from pi_notebook.ai._fast import construct_unchecked, fast_shallow_copy
from pi_notebook.ai.event_stream import AssistantMessageEventStream, EventStream
from pi_notebook.ai.types import (
    AssistantMessage,
    Cost,
    DoneEvent,
    PiModel,
    StartEvent,
    TextContent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ToolCall,
    Usage,
    UserMessage,
)

MODEL_FIELDS = ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__")


def _message() -> AssistantMessage:
    return AssistantMessage(
        content=[TextContent(text="hello"), ToolCall(id="c1", name="ls", arguments={"path": "."})],
        api="openai-completions", provider="openai", model="m", response_id="r1",
        usage=Usage(input=3, output=5, cost=Cost(total=0.5)), stop_reason="pending")


def _assert_same_copy(fast: Any, reference: Any, original: Any) -> None:
    assert type(fast) is type(reference) is type(original)
    assert fast is not original
    assert fast == reference == original
    # field by field: the same values, shared as a shallow copy shares them
    assert fast.__dict__ == reference.__dict__
    assert fast.__dict__ is not original.__dict__
    for name, value in original.__dict__.items():
        assert getattr(fast, name) is value, name
    assert fast.model_fields_set == reference.model_fields_set == original.model_fields_set
    assert fast.__pydantic_fields_set__ is not original.__pydantic_fields_set__
    assert fast.__pydantic_extra__ == reference.__pydantic_extra__
    assert fast.__pydantic_private__ == reference.__pydantic_private__
    assert fast.model_dump() == reference.model_dump() == original.model_dump()
    assert fast.model_dump_json() == reference.model_dump_json()
    assert fast.model_dump(exclude_unset=True) == reference.model_dump(exclude_unset=True)
    assert repr(fast) == repr(reference)


def test_fast_shallow_copy_equals_model_copy_field_by_field() -> None:
    original = _message()
    fast = fast_shallow_copy(original)
    _assert_same_copy(fast, original.model_copy(), original)
    # lists are shared (pi's {...partial} is shallow): the content list is the same object
    assert fast.content is original.content
    assert fast.usage is original.usage


def test_fast_shallow_copy_is_independent_at_the_top_level() -> None:
    original = _message()
    fast = fast_shallow_copy(original)
    fast.stop_reason = "stop"
    fast.error_message = "boom"
    assert original.stop_reason == "pending" and original.error_message is None
    assert "error_message" in fast.model_fields_set
    assert "error_message" not in original.model_fields_set
    # while a mutation of a shared list is seen by both, as with model_copy()
    original.content.append(TextContent(text="more"))
    assert len(fast.content) == 3


def test_fast_shallow_copy_of_a_model_with_extra_fields_and_private_attributes() -> None:
    class Loose(PiModel):
        model_config = ConfigDict(extra="allow")
        name: str = ""
        _cache: dict[str, int] = PrivateAttr(default_factory=dict)
        _unset: int = PrivateAttr()

    original = Loose(name="a", surprise=[1, 2])
    original._cache["k"] = 1
    fast = fast_shallow_copy(original)
    reference = original.model_copy()
    _assert_same_copy(fast, reference, original)
    assert fast.__pydantic_extra__ is not original.__pydantic_extra__
    assert fast.__pydantic_extra__["surprise"] is original.__pydantic_extra__["surprise"]
    assert fast.__pydantic_private__ is not original.__pydantic_private__
    assert fast._cache is original._cache
    with pytest.raises(AttributeError):
        fast._unset  # noqa: B018 - unset private attributes stay unset, as with model_copy()


def test_fast_shallow_copy_copies_and_deep_copies_like_the_original() -> None:
    fast = fast_shallow_copy(_message())
    assert copy.deepcopy(fast) == fast
    assert fast.model_copy(update={"model": "x"}).model == "x"
    assert AssistantMessage.model_validate(fast.model_dump()) == fast


def test_construct_unchecked_equals_the_validating_constructor() -> None:
    message = _message()
    event = TextDeltaEvent(content_index=0, delta="he", partial=message)
    fast = construct_unchecked(
        MessageUpdateEvent,
        {"type": "message_update", "message": message, "assistant_message_event": event},
        {"message", "assistant_message_event"})
    reference = MessageUpdateEvent(message=message, assistant_message_event=event)
    assert type(fast) is MessageUpdateEvent
    assert fast == reference
    assert fast.__dict__ == reference.__dict__
    assert fast.message is message and fast.assistant_message_event is event
    assert fast.model_fields_set == reference.model_fields_set
    assert fast.__pydantic_extra__ is None and fast.__pydantic_private__ is None
    assert fast.model_dump() == reference.model_dump()
    assert repr(fast) == repr(reference)
    fast.message = None  # assignment works and is recorded as usual
    assert fast.message is None and "message" in fast.model_fields_set


def test_message_update_helper_and_generic_shallow_copy() -> None:
    message = _message()
    update = _message_update(message, None)
    assert update == MessageUpdateEvent(message=message, assistant_message_event=None)
    assert update.model_fields_set == {"message", "assistant_message_event"}
    # two events never share their fields-set (an assignment on one must not leak)
    assert update.__pydantic_fields_set__ is not _message_update(message, None).__pydantic_fields_set__
    as_dict = {"role": "assistant", "content": []}
    copied = _shallow_copy(as_dict)
    assert copied == as_dict and copied is not as_dict and copied["content"] is as_dict["content"]
    other = object()
    assert _shallow_copy(other) is other
    user = UserMessage(content="hi")
    _assert_same_copy(_shallow_copy(user), user.model_copy(), user)


# --- the loop's hot path --------------------------------------------------------------------

class _Subclassed(AssistantMessage):
    """Not exactly AssistantMessage: takes the generic copy path of the loop."""


def _streaming_fn(deltas: list[str], message_cls: type[AssistantMessage] = AssistantMessage,
                  stream_cls: type[EventStream[Any, Any]] = AssistantMessageEventStream,
                  pace: bool = False) -> Any:
    def stream_fn(model: Any, context: Any, options: Any) -> Any:
        stream = stream_cls()
        partial = message_cls(api="mock-api", provider="mock", model="mock", stop_reason="pending")

        async def produce() -> None:
            stream.push(StartEvent(partial=partial))
            partial.content.append(TextContent(text=""))
            stream.push(TextStartEvent(content_index=0, partial=partial))
            for i, delta in enumerate(deltas):
                partial.content[0].text += delta
                stream.push(TextDeltaEvent(content_index=0, delta=delta, partial=partial))
                if pace and i % 3 == 0:
                    await asyncio.sleep(0)  # the consumer drains an empty queue, then waits
            stream.push(TextEndEvent(content_index=0, content=partial.content[0].text, partial=partial))
            partial.stop_reason = "stop"
            stream.push(DoneEvent(reason="stop", message=partial))
            stream.end()

        stream._producer = asyncio.ensure_future(produce())  # type: ignore[attr-defined]
        return stream

    return stream_fn


async def _run(stream_fn: Any) -> tuple[list[Any], list[Any]]:
    from pi_notebook.ai.types import Model

    events: list[Any] = []
    seen: list[Any] = []  # (message, its top-level fields when emitted, the live partial)

    async def emit(event: Any) -> None:
        events.append(event)
        if event.type == "message_update":
            partial = event.assistant_message_event.partial
            assert dict(event.message.__dict__) == dict(partial.__dict__)  # copied just now
            seen.append((event.message, dict(event.message.__dict__), partial))

    model = Model(id="mock", api="mock-api", provider="mock")
    await run_agent_loop([UserMessage(content="hi")], AgentContext(), AgentLoopConfig(model=model),
                         emit, stream_fn=stream_fn)
    return events, seen


@pytest.mark.parametrize("message_cls", [AssistantMessage, _Subclassed])
@pytest.mark.parametrize("pace", [False, True])
async def test_loop_message_updates_are_shallow_copies_in_order(message_cls: Any, pace: bool) -> None:
    deltas = [f"w{i} " for i in range(40)]
    events, seen = await _run(_streaming_fn(deltas, message_cls, pace=pace))
    kinds = [e.type for e in events]
    assert kinds == (["agent_start", "turn_start", "message_start", "message_end", "message_start"]
                     + ["message_update"] * (len(deltas) + 2)
                     + ["message_end", "turn_end", "agent_end"])
    updates = [e for e in events if e.type == "message_update"]
    assert [u.assistant_message_event.type for u in updates] == (
        ["text_start"] + ["text_delta"] * len(deltas) + ["text_end"])
    assert [u.assistant_message_event.delta for u in updates[1:-1]] == deltas
    final = events[-1].messages[-1]
    for update, (message, fields, partial) in zip(updates, seen):
        assert type(update) is MessageUpdateEvent
        assert update == MessageUpdateEvent(message=message,
                                            assistant_message_event=update.assistant_message_event)
        assert update.model_fields_set == {"message", "assistant_message_event"}
        assert type(message) is message_cls
        assert message is not partial and message is not final  # a copy per update
        assert message.content is partial.content  # ... and a shallow one
        assert message.model_fields_set == partial.model_fields_set
        assert message.__pydantic_fields_set__ is not partial.__pydantic_fields_set__
        assert message.__dict__ == fields  # nothing changed the copy's top level afterwards
    assert len({id(m) for m, _, _ in seen}) == len(seen)
    if pace:  # copies made before the producer finished keep what the partial was then
        assert seen[0][0].stop_reason == "pending"
    assert final.stop_reason == "stop" and final.content[0].text == "".join(deltas)


class _Doubling(AssistantMessageEventStream):
    """An EventStream whose own iterator yields every event twice: the loop must use it."""

    async def _iterate(self):  # type: ignore[no-untyped-def, override]
        async for event in super()._iterate():
            yield event
            if event.type == "text_delta":
                yield event


async def test_loop_respects_an_event_stream_with_its_own_iterator() -> None:
    events, _ = await _run(_streaming_fn(["a", "b"], stream_cls=_Doubling))
    deltas = [e.assistant_message_event.delta for e in events
              if e.type == "message_update" and e.assistant_message_event.type == "text_delta"]
    assert deltas == ["a", "a", "b", "b"]


async def test_loop_raises_a_failed_stream_error_after_its_queued_events() -> None:
    delivered: list[str] = []

    def stream_fn(model: Any, context: Any, options: Any) -> Any:
        stream = AssistantMessageEventStream()
        partial = AssistantMessage(stop_reason="pending")
        stream.push(StartEvent(partial=partial))
        stream.push(TextStartEvent(content_index=0, partial=partial))
        stream.fail(RuntimeError("transport gone"))
        return stream

    async def emit(event: Any) -> None:
        delivered.append(event.type)

    from pi_notebook.ai.types import Model

    with pytest.raises(RuntimeError, match="transport gone"):
        await run_agent_loop([UserMessage(content="hi")], AgentContext(),
                             AgentLoopConfig(model=Model(id="m", api="a", provider="p")),
                             emit, stream_fn=stream_fn)
    assert delivered[-2:] == ["message_start", "message_update"]


# --- the combined per-delta helpers ------------------------------------------------------------

class _WithPrivate(PiModel):
    name: str = "x"
    _secret: str = PrivateAttr(default="kept")


@pytest.mark.parametrize("make", [_message, lambda: {"role": "assistant", "content": []},
                                  lambda: _WithPrivate(name="p"), lambda: "plain"])
def test_construct_with_copy_is_construct_unchecked_of_a_shallow_copy(make: Any) -> None:
    from pi_notebook.ai._fast import construct_with_copy

    original = make()
    event = TextDeltaEvent(content_index=0, delta="d", partial=_message())
    update = construct_with_copy(
        MessageUpdateEvent, {"type": "message_update", "message": original, "assistant_message_event": event},
        {"message", "assistant_message_event"}, "message")
    reference = MessageUpdateEvent(message=_shallow_copy(original), assistant_message_event=event)
    assert update == reference and update.model_fields_set == reference.model_fields_set
    assert update.assistant_message_event is event
    if isinstance(original, (PiModel, dict)):
        assert update.message is not original and update.message == original  # a copy...
        if isinstance(original, PiModel):
            _assert_same_copy(update.message, original.model_copy(), original)
    else:
        assert update.message is original  # ... of what has fields; anything else as is


def test_append_delta_grows_the_block_and_builds_the_validated_event() -> None:
    from pi_notebook.ai._fast import append_delta

    partial = AssistantMessage(content=[TextContent(text="ab")], stop_reason="pending")
    block = partial.content[0]
    event = append_delta(block, "text", "cd", TextDeltaEvent, "text_delta", 0, partial)
    assert block.text == "abcd" and block.model_fields_set == {"text"}
    twin = TextDeltaEvent(content_index=0, delta="cd", partial=partial)
    assert type(event) is TextDeltaEvent and event == twin
    assert event.model_fields_set == twin.model_fields_set and event.model_dump() == twin.model_dump()
    assert event.partial is partial
