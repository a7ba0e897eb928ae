"""The faux provider: one test per checklist item 78-95 of the spec (section 6.F)."""

from __future__ import annotations

import asyncio
import json
import math

import pytest

from pi_notebook.ai.abort import AbortController
from pi_notebook.ai.providers.faux import (
    faux_assistant_message, faux_text, faux_thinking, faux_tool_call, register_faux_provider,
    serialize_context,
)
from pi_notebook.ai.stream import complete, stream
from pi_notebook.ai.types import (
    AssistantMessage, Context, ImageContent, TextContent, ThinkingContent, Tool, ToolCall,
    ToolResultMessage, UserMessage,
)


@pytest.fixture
def faux():
    handles = []

    def make(**kwargs):
        handle = register_faux_provider(**kwargs)
        handles.append(handle)
        return handle

    yield make
    for handle in handles:
        handle.unregister()


def _ctx(text: str = "hello", **kwargs) -> Context:
    return Context(messages=[UserMessage(content=text)], **kwargs)


async def _events(model, context, **options):
    s = stream(model, context, options)
    events = [e async for e in s]
    return events, await s.result()


async def test_item_78_complete_returns_scripted_content_with_estimated_usage(faux):
    h = faux()
    h.set_responses([faux_assistant_message("hi there")])
    msg = await complete(h.get_model(), _ctx())
    assert [b.model_dump() for b in msg.content] == [{"type": "text", "text": "hi there"}]
    assert msg.stop_reason == "stop"
    assert msg.usage.input > 0 and msg.usage.output > 0
    assert msg.usage.total_tokens == msg.usage.input + msg.usage.output
    assert h.state.call_count == 1


async def test_item_79_helper_blocks_round_trip_and_stop_reason(faux):
    h = faux()
    h.set_responses([faux_assistant_message(
        [faux_thinking("think"), faux_tool_call("echo", {"text": "hi"}), faux_text("done")],
        stop_reason="toolUse",
    )])
    msg = await complete(h.get_model(), _ctx())
    assert msg.stop_reason == "toolUse"
    thinking, call, text = msg.content
    assert isinstance(thinking, ThinkingContent) and thinking.thinking == "think"
    assert isinstance(call, ToolCall) and call.name == "echo" and call.arguments == {"text": "hi"}
    assert isinstance(call.id, str) and call.id.startswith("tool:")
    assert isinstance(text, TextContent) and text.text == "done"
    assert faux_tool_call("x", {}, id="given").id == "given"


async def test_item_80_multiple_models_and_factories_receive_the_requested_model(faux):
    h = faux(models=[{"id": "fast", "reasoning": False}, {"id": "deep", "reasoning": True}])
    assert [m.id for m in h.models] == ["fast", "deep"]
    assert h.get_model() is h.models[0]
    assert h.get_model("fast").reasoning is False
    assert h.get_model("deep").reasoning is True
    assert h.get_model("missing") is None
    seen = []

    def factory(context, options, state, model):
        seen.append(model)
        return faux_assistant_message(f"from {model.id}")

    h.set_responses([factory, factory])
    first = await complete(h.get_model("deep"), _ctx())
    second = await complete(h.get_model("fast"), _ctx())
    assert [m.id for m in seen] == ["deep", "fast"]
    assert first.content[0].text == "from deep" and first.model == "deep"
    assert second.model == "fast"


async def test_item_81_api_provider_and_model_are_rewritten(faux):
    h = faux(provider="scripted", models=[{"id": "m1"}])
    scripted = faux_assistant_message("x")
    assert (scripted.api, scripted.provider, scripted.model) == ("faux", "faux", "faux-1")
    h.set_responses([scripted])
    msg = await complete(h.get_model(), _ctx())
    assert (msg.api, msg.provider, msg.model) == (h.api, "scripted", "m1")
    assert h.api.startswith("faux:")
    # the scripted message itself is cloned, not mutated
    assert scripted.api == "faux" and msg is not scripted


async def test_item_82_queue_exhausted_gives_error_message(faux):
    h = faux()
    h.set_responses([faux_assistant_message("one"), faux_assistant_message("two")])
    first = await complete(h.get_model(), _ctx())
    second = await complete(h.get_model(), _ctx())
    third = await complete(h.get_model(), _ctx())
    assert [first.content[0].text, second.content[0].text] == ["one", "two"]
    assert third.stop_reason == "error"
    assert third.error_message == "No more faux responses queued"
    assert third.usage.input > 0  # usage is estimated even for the error
    assert h.get_pending_response_count() == 0
    assert h.state.call_count == 3


async def test_item_83_set_responses_replaces_and_append_responses_appends(faux):
    h = faux()
    h.set_responses([faux_assistant_message("a"), faux_assistant_message("b")])
    assert h.get_pending_response_count() == 2
    h.set_responses([faux_assistant_message("c")])
    assert h.get_pending_response_count() == 1
    h.append_responses([faux_assistant_message("d"), faux_assistant_message("e")])
    assert h.get_pending_response_count() == 3
    texts = [(await complete(h.get_model(), _ctx())).content[0].text for _ in range(3)]
    assert texts == ["c", "d", "e"]
    assert h.get_pending_response_count() == 0


async def test_item_84_async_factory_receives_context_options_state_model(faux):
    h = faux()
    received = {}

    async def factory(context, options, state, model):
        received.update(context=context, options=options, count=state.call_count, model=model)
        await asyncio.sleep(0)
        return faux_assistant_message("async")

    h.set_responses([factory])
    ctx = _ctx("question")
    msg = await complete(h.get_model(), ctx, {"session_id": "s1"})
    assert msg.content[0].text == "async"
    assert received["context"] is ctx
    assert received["options"]["session_id"] == "s1"
    assert received["count"] == 1
    assert received["model"] is h.get_model()


async def test_item_85_throwing_factory_gives_exactly_one_error_event(faux):
    h = faux()

    def factory(context, options, state, model):
        raise RuntimeError("factory exploded")

    h.set_responses([factory])
    events, result = await _events(h.get_model(), _ctx())
    assert [e.type for e in events] == ["error"]
    assert events[0].reason == "error"
    assert result.stop_reason == "error"
    assert result.error_message == "factory exploded"


async def test_item_86_pending_stop_reason_never_produces_done(faux):
    h = faux()
    h.set_responses([faux_assistant_message("partial", stop_reason="pending")])
    events, result = await _events(h.get_model(), _ctx())
    types = [e.type for e in events]
    assert "done" not in types
    assert types[-1] == "error"
    assert result.stop_reason == "error"
    assert result.error_message == "Faux response ended without a stop reason"


async def test_item_87_usage_estimate_uses_exact_prompt_serialisation(faux):
    h = faux()
    h.set_responses([faux_assistant_message([faux_thinking("why"), faux_text("answer text")])])
    tool = Tool(name="calc", description="adds", parameters={"type": "object", "properties": {}})
    ctx = Context(
        system_prompt="be brief",
        messages=[
            UserMessage(content=[TextContent(text="look"),
                                 ImageContent(data="QUJD", mime_type="image/png")]),
            AssistantMessage(content=[TextContent(text="ok"),
                                      ToolCall(id="c1", name="calc", arguments={"a": 1})]),
            ToolResultMessage(tool_call_id="c1", tool_name="calc",
                              content=[TextContent(text="2")]),
            UserMessage(content="thanks"),
        ],
        tools=[tool],
    )
    expected_prompt = "\n\n".join([
        "system:be brief",
        "user:look\n[image:image/png:4]",
        'assistant:ok\ncalc:{"a":1}',
        "toolResult:calc\n2",
        "user:thanks",
        'tools:[{"name":"calc","description":"adds","parameters":{"type":"object","properties":{}}}]',
    ])
    assert serialize_context(ctx) == expected_prompt
    msg = await complete(h.get_model(), ctx)
    assert msg.usage.input == math.ceil(len(expected_prompt) / 4)
    assert msg.usage.output == math.ceil(len("why\nanswer text") / 4)
    assert msg.usage.cache_read == 0 and msg.usage.cache_write == 0
    assert msg.usage.total_tokens == msg.usage.input + msg.usage.output
    assert msg.usage.cost.total == 0


async def test_item_88_session_cache_simulation(faux):
    h = faux()
    h.set_responses([faux_assistant_message("r") for _ in range(5)])
    model = h.get_model()
    first = await complete(model, _ctx("a long enough first prompt"), {"session_id": "s1"})
    assert first.usage.cache_write > 0 and first.usage.cache_read == 0
    other = await complete(model, _ctx("a long enough first prompt"), {"session_id": "s2"})
    assert other.usage.cache_read == 0 and other.usage.cache_write > 0
    plain = await complete(model, _ctx("a long enough first prompt"))
    assert plain.usage.cache_read == 0 and plain.usage.cache_write == 0
    follow = Context(messages=[UserMessage(content="a long enough first prompt"),
                               AssistantMessage(content=[TextContent(text="r")]),
                               UserMessage(content="and more")])
    again = await complete(model, follow, {"session_id": "s1"})
    assert again.usage.cache_read > 0
    assert again.usage.total_tokens == (again.usage.input + again.usage.output
                                        + again.usage.cache_read + again.usage.cache_write)
    none = await complete(model, follow, {"session_id": "s1", "cache_retention": "none"})
    assert none.usage.cache_read == 0 and none.usage.cache_write == 0


async def test_item_89_stream_has_deltas_and_tool_call_json_reassembles(faux):
    h = faux()
    arguments = {"path": "/tmp/some/long/file/name.txt", "contents": "several words of content"}
    h.set_responses([faux_assistant_message(
        [faux_thinking("thinking about it"), faux_text("writing the file now"),
         faux_tool_call("write", arguments)], stop_reason="toolUse")])
    events, _ = await _events(h.get_model(), _ctx())
    types = [e.type for e in events]
    for needed in ("thinking_start", "thinking_delta", "text_start", "text_delta",
                   "toolcall_start", "toolcall_delta", "toolcall_end"):
        assert needed in types
    deltas = [e.delta for e in events if e.type == "toolcall_delta"]
    assert len(deltas) > 1
    assert json.loads("".join(deltas)) == arguments
    end = next(e for e in events if e.type == "toolcall_end")
    assert end.tool_call.arguments == arguments


async def test_item_90_exact_event_order_with_token_size_one(faux):
    h = faux(token_size={"min": 1, "max": 1})
    h.set_responses([faux_assistant_message(
        [faux_thinking("hm"), faux_text("ok"), faux_tool_call("f", {})], stop_reason="toolUse")])
    events, _ = await _events(h.get_model(), _ctx())
    assert [e.type for e in events] == [
        "start", "thinking_start", "thinking_delta", "thinking_end", "text_start", "text_delta",
        "text_end", "toolcall_start", "toolcall_delta", "toolcall_end", "done",
    ]
    assert events[0].partial.stop_reason == "pending"
    assert events[-1].reason == "toolUse"
    # partials are shallow copies: the start snapshot does not grow later blocks
    assert events[0].partial.content == []
    assert [e.content_index for e in events[1:-1]] == [0, 0, 0, 1, 1, 1, 2, 2, 2]


async def test_item_91_two_tool_calls_give_two_starts_and_ends(faux):
    h = faux()
    h.set_responses([faux_assistant_message(
        [faux_tool_call("a", {"x": 1}), faux_tool_call("b", {"y": 2})], stop_reason="toolUse")])
    events, result = await _events(h.get_model(), _ctx())
    assert sum(e.type == "toolcall_start" for e in events) == 2
    ends = [e for e in events if e.type == "toolcall_end"]
    assert [e.tool_call.name for e in ends] == ["a", "b"]
    assert [e.content_index for e in ends] == [0, 1]
    assert [b.name for b in result.content] == ["a", "b"]


@pytest.mark.parametrize("reason", ["error", "aborted"])
async def test_item_92_scripted_error_and_aborted_messages_stream_then_error(faux, reason):
    h = faux(token_size=(1, 1))
    h.set_responses([faux_assistant_message("oops", stop_reason=reason,
                                            error_message=f"scripted {reason}")])
    events, result = await _events(h.get_model(), _ctx())
    assert [e.type for e in events] == ["start", "text_start", "text_delta", "text_end", "error"]
    assert events[-1].reason == reason
    assert result.stop_reason == reason
    assert result.error_message == f"scripted {reason}"
    assert result.content[0].text == "oops"


async def test_item_93_signal_aborted_before_the_call_gives_single_error(faux):
    h = faux()
    h.set_responses([faux_assistant_message("never streamed")])
    controller = AbortController()
    controller.abort()
    events, result = await _events(h.get_model(), _ctx(), signal=controller.signal)
    assert [e.type for e in events] == ["error"]
    assert events[0].reason == "aborted"
    assert result.stop_reason == "aborted"
    assert result.error_message == "Request was aborted"
    assert result.content == []


@pytest.mark.parametrize("kind", ["text", "thinking", "toolcall"])
async def test_item_94_abort_mid_block_gives_error_without_block_end(faux, kind):
    # paced so that the abort lands between the first and the second chunk
    h = faux(tokens_per_second=200, token_size=(1, 1))
    long_text = "abcd" * 20
    block = {"text": faux_text(long_text), "thinking": faux_thinking(long_text),
             "toolcall": faux_tool_call("f", {"value": long_text})}[kind]
    h.set_responses([faux_assistant_message([block])])
    controller = AbortController()
    s = stream(h.get_model(), _ctx(), {"signal": controller.signal})
    events = []
    async for event in s:
        events.append(event)
        if event.type.endswith("_delta"):
            controller.abort()
    types = [e.type for e in events]
    assert types == ["start", f"{kind}_start", f"{kind}_delta", "error"]
    assert f"{kind}_end" not in types
    result = await s.result()
    assert events[-1].reason == "aborted"
    assert result.stop_reason == "aborted"
    assert result.error_message == "Request was aborted"
    if kind == "text":
        assert result.content[0].text == "abcd"  # the partial so far
    elif kind == "thinking":
        assert result.content[0].thinking == "abcd"


async def test_item_95_unregister_removes_the_api(faux):
    h = register_faux_provider()
    h.set_responses([faux_assistant_message("x")])
    model = h.get_model()
    h.unregister()
    with pytest.raises(LookupError, match=f"No API provider registered for api: {h.api}"):
        await complete(model, _ctx())


async def test_faux_models_are_addressable_as_provider_slash_id(faux):
    from pi_notebook.ai.models import UnknownModelError, get_model

    first = faux(provider="fauxcat", models=[{"id": "cat-1"}, {"id": "cat-2"}])
    second = faux(provider="fauxcat", models=[{"id": "cat-1"}])
    assert get_model("fauxcat/cat-1").api == second.api  # the newest registration wins
    assert get_model("fauxcat", "cat-2").api == first.api
    second.unregister()
    assert get_model("fauxcat/cat-1").api == first.api
    first.unregister()
    with pytest.raises(UnknownModelError):
        get_model("fauxcat/cat-1")
