"""openai-completions against a real local HTTP server (spec 5.6, checklist 102-119, 132-138)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers.retry_wait import abort_in_retry_wait
from helpers.sse_server import DELAY, HANG, RESET, Reply, chunked, scripted_server, sse_body  # noqa: F401

from pi_notebook.ai.abort import AbortController
from pi_notebook.ai.providers import _common, openai_completions as oc
from pi_notebook.ai.providers.openai_completions import (
    detect_compat, stream_openai_completions, stream_simple_openai_completions,
)
from pi_notebook.ai.stream import get_api_provider, stream as registry_stream
from pi_notebook.ai.types import (
    AssistantMessage, Context, ImageContent, Model, ModelCost, TextContent, ThinkingContent,
    Tool, ToolCall, ToolResultMessage, Usage, UserMessage,
)

KEY = "sk-test-FAKE-KEY-0123456789abcdef"
FIXTURES = Path("/work/shared/fixtures/openai-compatible")
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


# --- helpers ------------------------------------------------------------------------------

def make_model(server, **overrides: Any) -> Model:
    fields: dict[str, Any] = dict(
        id="test-model", name="Test", api="openai-completions", provider="openai",
        base_url=server.url + "/v1", reasoning=False, input=["text", "image"],
        cost=ModelCost(input=1.0, output=2.0, cache_read=0.5, cache_write=1.5),
        context_window=128000, max_tokens=4096,
    )
    fields.update(overrides)
    return Model(**fields)


def ctx(text: str = "Hi", **kw: Any) -> Context:
    return Context(messages=[UserMessage(content=text, timestamp=1)], **kw)


def chunk(delta: dict | None = None, finish: str | None = None, *, id: str = "chatcmpl-1",
          model: str = "test-model", usage: dict | None = None, choices: bool = True, **extra: Any) -> dict:
    data: dict[str, Any] = {"id": id, "object": "chat.completion.chunk", "model": model}
    if choices:
        data["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    else:
        data["choices"] = []
    if usage is not None:
        data["usage"] = usage
    data.update(extra)
    return data


def text_stream(*parts: str, finish: str = "stop", usage: dict | None = None) -> list[dict]:
    payloads = [chunk({"role": "assistant", "content": None})]
    payloads += [chunk({"content": p}) for p in parts]
    payloads.append(chunk({}, finish))
    if usage is not None:
        payloads.append(chunk(choices=False, usage=usage))
    return payloads


def serve(server, payloads: list[Any], size: int = 7, done: bool = True, **reply: Any) -> None:
    server.push(Reply(chunks=chunked(sse_body(payloads, done=done), size), **reply))


async def run(fn, model: Model, context: Context, options: dict | None = None):
    opts = {"api_key": KEY}
    opts.update(options or {})
    s = fn(model, context, opts)
    events = []
    async for event in s:
        events.append(event)
    return events, await s.result()


async def run_stream(model, context, options=None):
    return await run(stream_openai_completions, model, context, options)


async def run_simple(model, context, options=None):
    return await run(stream_simple_openai_completions, model, context, options)


def types_of(events) -> list[str]:
    return [e.type for e in events]


def assert_key_absent(events, message: AssistantMessage) -> None:
    assert KEY not in json.dumps(message.model_dump())
    for event in events:
        assert KEY not in event.model_dump_json()


# --- text, request shape ------------------------------------------------------------------

async def test_text_stream_events_usage_and_request(scripted_server):
    usage = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
    serve(scripted_server, text_stream("Hel", "lo wor", "ld!", usage=usage), size=5)
    model = make_model(scripted_server)
    events, message = await run_stream(model, ctx(system_prompt="Be brief."))

    assert types_of(events) == ["start", "text_start", "text_delta", "text_delta", "text_delta",
                                "text_end", "done"]
    assert [e.delta for e in events if e.type == "text_delta"] == ["Hel", "lo wor", "ld!"]
    assert events[-2].content == "Hello world!"
    assert message.model_dump()["content"] == [{"type": "text", "text": "Hello world!"}]
    assert message.stop_reason == "stop" and message.raw_stop_reason == "stop"
    assert message.response_id == "chatcmpl-1" and message.response_model is None
    assert message.error_message is None
    assert (message.usage.input, message.usage.output, message.usage.total_tokens) == (12, 3, 15)
    assert message.usage.cost.total == pytest.approx((12 * 1.0 + 3 * 2.0) / 1e6)
    # rule 8: every event carries the same live partial, which is the final message
    assert all(e.partial is message for e in events if hasattr(e, "partial"))
    assert events[0].partial is message and events[-1].message is message

    request = scripted_server.requests[0]
    assert request.method == "POST" and request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["user-agent"].startswith("pi (")
    body = request.json
    assert body["model"] == "test-model" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["store"] is False
    assert body["messages"] == [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "Hi"}]
    assert "tools" not in body and "max_completion_tokens" not in body


async def test_registry_dispatches_to_this_adapter(scripted_server):
    assert get_api_provider("openai-completions") is not None
    serve(scripted_server, text_stream("ok"))
    model = make_model(scripted_server)
    s = registry_stream(model, ctx(), {"api_key": KEY})
    message = await s.result()
    assert message.stop_reason == "stop" and message.content[0].text == "ok"


async def test_per_delta_text_is_appended_not_copied(scripted_server):
    # many tiny deltas arrive intact and in order (the in-place append must not drop any)
    parts = [f"{i}," for i in range(500)]
    serve(scripted_server, text_stream(*parts), size=4096)
    events, message = await run_stream(make_model(scripted_server), ctx())
    assert message.content[0].text == "".join(parts)
    assert sum(1 for e in events if e.type == "text_delta") == 500


async def test_empty_content_strings_and_role_chunks_create_no_blocks(scripted_server):
    serve(scripted_server, [chunk({"role": "assistant", "content": ""}), chunk({"content": ""}),
                            chunk({}, "stop")])
    events, message = await run_stream(make_model(scripted_server), ctx())
    assert types_of(events) == ["start", "done"]
    assert message.content == [] and message.stop_reason == "stop"


# --- thinking -----------------------------------------------------------------------------

@pytest.mark.parametrize("field", ["reasoning_content", "reasoning", "reasoning_text"])
async def test_thinking_field_becomes_single_block_with_signature(scripted_server, field):
    payloads = [chunk({field: "Let me "}), chunk({field: "think."}), chunk({"content": "Answer"}),
                chunk({}, "stop")]
    serve(scripted_server, payloads)
    events, message = await run_stream(make_model(scripted_server, reasoning=True), ctx())
    assert types_of(events) == ["start", "thinking_start", "thinking_delta", "thinking_delta",
                                "text_start", "text_delta", "thinking_end", "text_end", "done"]
    thinking = message.content[0]
    assert isinstance(thinking, ThinkingContent)
    assert thinking.thinking == "Let me think." and thinking.thinking_signature == field
    assert events[6].content == "Let me think."


async def test_only_the_first_reasoning_field_is_used(scripted_server):
    payloads = [chunk({"reasoning_content": "A", "reasoning": "A"}), chunk({"reasoning": "B"}),
                chunk({}, "stop")]
    serve(scripted_server, payloads)
    _, message = await run_stream(make_model(scripted_server, reasoning=True), ctx())
    assert len(message.content) == 1
    assert message.content[0].thinking == "AB"
    assert message.content[0].thinking_signature == "reasoning_content"


async def test_openrouter_reasoning_details_become_the_signature(scripted_server):
    payloads = [
        chunk({"reasoning": "x", "reasoning_details": [{"type": "reasoning.text", "text": "x", "index": 0}]}),
        chunk({"reasoning": "y", "reasoning_details": [{"type": "reasoning.text", "text": "y", "index": 0,
                                                        "signature": "sig"}, "junk"]}),
        chunk({"content": "done"}), chunk({}, "stop"),
    ]
    serve(scripted_server, payloads)
    _, message = await run_stream(make_model(scripted_server, provider="openrouter", reasoning=True), ctx())
    thinking = message.content[0]
    assert thinking.thinking == "xy"
    assert json.loads(thinking.thinking_signature) == [
        {"type": "reasoning.text", "text": "xy", "index": 0, "signature": "sig"}]


# --- tool calls (107, 108, 106) -------------------------------------------------------------

def tool_delta(index=None, id=None, name=None, args=None, **extra) -> dict:
    call: dict[str, Any] = {"type": "function", "function": {}}
    if index is not None:
        call["index"] = index
    if id is not None:
        call["id"] = id
    if name is not None:
        call["function"]["name"] = name
    if args is not None:
        call["function"]["arguments"] = args
    call.update(extra)
    return call


async def test_mixed_content_reasoning_and_four_parallel_tool_calls(scripted_server):
    payloads = [
        chunk({"content": "I will ", "reasoning_content": "plan",
               "tool_calls": [tool_delta(0, "call_read", "read", '{"pa'),
                              tool_delta(1, "call_grep", "grep", '{"pat')]}),
        chunk({"content": "use ", "tool_calls": [tool_delta(0, args='th": "a.py"}'),
                                                 tool_delta(None, "call_list", "list", '{"dir":')]}),
        chunk({"reasoning_content": " more", "tool_calls": [
            tool_delta(1, args='tern": "x"}'), tool_delta(None, "call_write", "write", '{"path": "b",'),
            tool_delta(None, "call_list", args=' "."}')]}),
        chunk({"content": "tools.", "tool_calls": [tool_delta(None, "call_write", args=' "text": "hi"}')]}),
        chunk({}, "tool_calls"),
        chunk(choices=False, usage={"prompt_tokens": 5, "completion_tokens": 9}),
    ]
    serve(scripted_server, payloads, size=3)
    model = make_model(scripted_server, reasoning=True)
    s = stream_openai_completions(model, ctx(), {"api_key": KEY})
    events, arg_snapshots = [], []
    async for event in s:
        events.append(event)
        if event.type == "toolcall_delta":
            args = event.partial.content[event.content_index].arguments
            assert isinstance(args, dict)  # rule 9: never None
            arg_snapshots.append(dict(args))
    message = await s.result()

    assert sum(e.type == "text_delta" for e in events) == 3
    assert sum(e.type == "thinking_delta" for e in events) == 2
    assert sum(e.type == "toolcall_start" for e in events) == 4
    assert sum(e.type == "toolcall_delta" for e in events) == 8
    kinds = [(b.type, getattr(b, "name", None)) for b in message.content]
    assert kinds == [("text", None), ("thinking", None), ("toolCall", "read"), ("toolCall", "grep"),
                     ("toolCall", "list"), ("toolCall", "write")]
    assert message.content[0].text == "I will use tools."
    assert message.content[1].thinking == "plan more"
    assert message.content[1].thinking_signature == "reasoning_content"
    calls = message.content[2:]
    assert [c.id for c in calls] == ["call_read", "call_grep", "call_list", "call_write"]
    assert [c.arguments for c in calls] == [{"path": "a.py"}, {"pattern": "x"}, {"dir": "."},
                                            {"path": "b", "text": "hi"}]
    assert message.stop_reason == "toolUse" and message.raw_stop_reason == "tool_calls"
    # every *_end event comes after every delta, in content order
    ends = [i for i, e in enumerate(events) if e.type.endswith("_end")]
    deltas = [i for i, e in enumerate(events) if e.type.endswith("_delta")]
    assert min(ends) > max(deltas)
    assert [events[i].content_index for i in ends] == [0, 1, 2, 3, 4, 5]
    # each call's events are in order: start before its deltas before its end
    for index in range(2, 6):
        mine = [e.type for e in events if getattr(e, "content_index", None) == index]
        assert mine[0] == "toolcall_start" and mine[-1] == "toolcall_end"
        assert set(mine[1:-1]) == {"toolcall_delta"}
    end = [e for e in events if e.type == "toolcall_end"][0]
    assert end.tool_call is message.content[2]


async def test_arguments_are_reparsed_as_fragments_arrive(scripted_server):
    fragments = ['{"path": "no', 'tes.md", "te', 'xt": "hel', 'lo"}']
    payloads = [chunk({"tool_calls": [tool_delta(0, "c1", "write", fragments[0])]})]
    payloads += [chunk({"tool_calls": [tool_delta(0, args=f)]}) for f in fragments[1:]]
    payloads.append(chunk({}, "tool_calls"))
    pieces = []
    for payload in payloads:  # one network read per payload: the reader waits between them
        pieces += [sse_body([payload], done=False), (DELAY, 0.03)]
    scripted_server.push(Reply(chunks=pieces + [b"data: [DONE]\n\n"]))
    s = stream_openai_completions(make_model(scripted_server), ctx(), {"api_key": KEY})
    snapshots = []
    async for event in s:
        if event.type == "toolcall_delta":
            snapshots.append(dict(event.partial.content[0].arguments))
    assert snapshots == [{"path": "no"}, {"path": "notes.md"}, {"path": "notes.md", "text": "hel"},
                         {"path": "notes.md", "text": "hello"}]
    assert (await s.result()).content[0].arguments == {"path": "notes.md", "text": "hello"}


async def test_tool_call_id_change_mid_stream_keeps_first_id(scripted_server):
    payloads = [
        chunk({"tool_calls": [tool_delta(0, "call_first", "read", '{"path"')]}),
        chunk({"tool_calls": [tool_delta(0, "call_second", None, ': "README')]}),
        chunk({"tool_calls": [tool_delta(0, "call_third", None, '.md"}')]}),
        chunk({}, "tool_calls"),
    ]
    serve(scripted_server, payloads)
    events, message = await run_stream(make_model(scripted_server), ctx())
    tool_events = [e for e in events if e.type.startswith("toolcall")]
    assert [e.content_index for e in tool_events] == [0, 0, 0, 0, 0]
    assert len(message.content) == 1
    call = message.content[0]
    assert call.id == "call_first" and call.name == "read" and call.arguments == {"path": "README.md"}
    dumped = call.model_dump()
    assert set(dumped) == {"type", "id", "name", "arguments"}  # no scratch fields left behind


async def test_empty_custom_next_to_function_is_ignored(scripted_server):
    payloads = [chunk({"tool_calls": [tool_delta(0, "call_1", "echo", '{"text": "hi"}', custom={})]}),
                chunk({}, "tool_calls")]
    serve(scripted_server, payloads)
    _, message = await run_stream(make_model(scripted_server), ctx())
    assert message.content[0].name == "echo" and message.content[0].arguments == {"text": "hi"}


async def test_late_id_and_name_are_filled_in(scripted_server):
    payloads = [chunk({"tool_calls": [tool_delta(0, None, None, '{"a":')]}),
                chunk({"tool_calls": [tool_delta(0, "late_id", "add", " 1}")]}),
                chunk({}, "tool_calls")]
    serve(scripted_server, payloads)
    _, message = await run_stream(make_model(scripted_server), ctx())
    call = message.content[0]
    assert (call.id, call.name, call.arguments) == ("late_id", "add", {"a": 1})


async def test_invalid_tool_call_json_gives_best_effort_arguments(scripted_server):
    payloads = [chunk({"tool_calls": [tool_delta(0, "c1", "f", '{"a": 1, "b": ')]}),
                chunk({"tool_calls": [tool_delta(0, args="nonsense}}")]}),
                chunk({}, "tool_calls")]
    serve(scripted_server, payloads)
    events, message = await run_stream(make_model(scripted_server), ctx())
    assert message.stop_reason == "toolUse"
    assert isinstance(message.content[0].arguments, dict)
    assert all(isinstance(e.partial.content[0].arguments, dict)
               for e in events if e.type.startswith("toolcall"))


# --- usage (110, 134, 135) ------------------------------------------------------------------

async def test_usage_with_cache_and_reasoning_tokens(scripted_server):
    usage = {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150,
             "prompt_tokens_details": {"cached_tokens": 20, "cache_write_tokens": 10},
             "completion_tokens_details": {"reasoning_tokens": 30}}
    serve(scripted_server, text_stream("x", usage=usage))
    _, message = await run_stream(make_model(scripted_server), ctx())
    u = message.usage
    assert (u.input, u.output, u.cache_read, u.cache_write, u.reasoning) == (70, 50, 20, 10, 30)
    assert u.total_tokens == u.input + u.output + u.cache_read + u.cache_write == 150
    assert u.cost.input == pytest.approx(70 / 1e6) and u.cost.output == pytest.approx(100 / 1e6)
    assert u.cost.cache_read == pytest.approx(10 / 1e6) and u.cost.cache_write == pytest.approx(15 / 1e6)
    assert u.cost.total == pytest.approx(u.cost.input + u.cost.output + u.cost.cache_read + u.cost.cache_write)


async def test_choice_usage_fallback_and_deepseek_cache_hits(scripted_server):
    payloads = [chunk({"content": "x"}),
                {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop",
                                         "usage": {"prompt_tokens": 40, "completion_tokens": 2,
                                                   "prompt_cache_hit_tokens": 30}}]}]
    serve(scripted_server, payloads)
    _, message = await run_stream(make_model(scripted_server), ctx())
    assert (message.usage.input, message.usage.cache_read, message.usage.output) == (10, 30, 2)
    assert message.usage.total_tokens == 42


# --- finish reasons (103, 105, 117) ----------------------------------------------------------

@pytest.mark.parametrize("finish,stop,error", [
    ("stop", "stop", None), ("end", "stop", None), ("length", "length", None),
    ("tool_calls", "toolUse", None), ("function_call", "toolUse", None),
    ("content_filter", "error", "Provider finish_reason: content_filter"),
    ("network_error", "error", "Provider finish_reason: network_error"),
    ("something_new", "error", "Provider finish_reason: something_new"),
])
async def test_finish_reason_mapping(scripted_server, finish, stop, error):
    serve(scripted_server, text_stream("partial", finish=finish))
    events, message = await run_stream(make_model(scripted_server), ctx())
    assert message.stop_reason == stop and message.raw_stop_reason == finish
    assert message.error_message == error
    assert events[-1].type == ("error" if error else "done")
    assert message.content[0].text == "partial"  # content kept on error stops too
    if error:
        assert events[-1].reason == "error" and "text_end" in types_of(events)


async def test_stream_without_finish_reason(scripted_server):
    payloads = [chunk({"content": "a"}), chunk({"content": "b"})]
    serve(scripted_server, payloads)
    events, message = await run_stream(make_model(scripted_server), ctx())
    assert message.stop_reason == "error" and message.error_message == "Stream ended without finish_reason"
    assert message.content[0].text == "ab"
    serve(scripted_server, payloads)
    _, message = await run_stream(make_model(scripted_server, compat={"supportsFinishReason": False}), ctx())
    assert message.stop_reason == "stop" and message.error_message is None
    serve(scripted_server, [chunk({"tool_calls": [tool_delta(0, "c", "f", "{}")]})])
    _, message = await run_stream(make_model(scripted_server, compat={"supportsFinishReason": False}), ctx())
    assert message.stop_reason == "toolUse"


async def test_null_chunks_and_empty_choices_are_skipped(scripted_server):
    payloads = [None, 42, chunk(choices=False), {"id": "x", "choices": [None]}, chunk({"content": "OK"}),
                chunk({}, "stop"), chunk(choices=False, usage={"prompt_tokens": 1, "completion_tokens": 1})]
    serve(scripted_server, payloads)
    _, message = await run_stream(make_model(scripted_server), ctx())
    assert message.model_dump()["content"] == [{"type": "text", "text": "OK"}]
    assert message.response_id == "chatcmpl-1" and message.usage.total_tokens == 2


async def test_only_empty_choices_is_an_error(scripted_server):
    serve(scripted_server, [chunk(choices=False), chunk(choices=False)])
    events, message = await run_stream(make_model(scripted_server), ctx())
    assert types_of(events) == ["start", "error"]
    assert message.error_message == "Stream ended without finish_reason"


# --- responseModel (116) ------------------------------------------------------------------

@pytest.mark.parametrize("served,expected", [("openrouter/auto-picked", "openrouter/auto-picked"),
                                             ("test-model", None), ("", None)])
async def test_response_model(scripted_server, served, expected):
    payloads = [chunk({"content": "x"}, model=served), chunk({}, "stop", model=served)]
    serve(scripted_server, payloads)
    _, message = await run_stream(make_model(scripted_server), ctx())
    assert message.response_model == expected
    assert message.model == "test-model"


# --- request conversion (109, 112, 113, 115, 102) --------------------------------------------

def body_of(server, index: int = -1) -> dict:
    return server.requests[index].json


@pytest.mark.parametrize("provider,model_id,reasoning,compat,role", [
    ("openai", "o4-mini", True, None, "developer"),
    ("openai", "gpt-4o", False, None, "system"),
    ("openrouter", "openai/gpt-5", True, None, "developer"),
    ("openrouter", "anthropic/claude-sonnet-4-5", True, None, "developer"),
    ("openrouter", "deepseek/deepseek-r1", True, None, "system"),
    ("ollama", "qwen3", True, None, "system"),
    ("openai", "o4-mini", True, {"supportsDeveloperRole": False}, "system"),
])
async def test_developer_vs_system_role(scripted_server, provider, model_id, reasoning, compat, role):
    serve(scripted_server, text_stream("ok"))
    model = make_model(scripted_server, provider=provider, id=model_id, reasoning=reasoning, compat=compat)
    await run_stream(model, ctx(system_prompt="SYS"))
    first = body_of(scripted_server)["messages"][0]
    assert first["role"] == role
    assert first["content"] in ("SYS", [{"type": "text", "text": "SYS", "cache_control": {"type": "ephemeral"}}])


def tool_history() -> list:
    return [
        UserMessage(content="run it", timestamp=1),
        AssistantMessage(content=[ToolCall(id="call_1", name="shot", arguments={"n": 1}),
                                  ToolCall(id="call_2", name="shot", arguments={"n": 2})],
                         api="openai-completions", provider="openai", model="test-model",
                         stop_reason="toolUse", timestamp=2),
        ToolResultMessage(tool_call_id="call_1", tool_name="shot", timestamp=3,
                          content=[TextContent(text="first"), ImageContent(data=PNG, mime_type="image/png")]),
        ToolResultMessage(tool_call_id="call_2", tool_name="shot", timestamp=4,
                          content=[ImageContent(data=PNG, mime_type="image/png")]),
    ]


async def test_tools_omitted_without_tools_but_empty_list_with_tool_history(scripted_server):
    serve(scripted_server, text_stream("a"))
    await run_stream(make_model(scripted_server), ctx(tools=[]))
    assert "tools" not in body_of(scripted_server)
    serve(scripted_server, text_stream("b"))
    await run_stream(make_model(scripted_server), Context(messages=tool_history()))
    assert body_of(scripted_server)["tools"] == []


async def test_tool_results_with_images(scripted_server):
    serve(scripted_server, text_stream("seen"))
    await run_stream(make_model(scripted_server), Context(messages=tool_history()))
    messages = body_of(scripted_server)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "user"]
    assistant = messages[1]
    assert assistant["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "shot", "arguments": '{"n":1}'}},
        {"id": "call_2", "type": "function", "function": {"name": "shot", "arguments": '{"n":2}'}}]
    assert messages[2] == {"role": "tool", "tool_call_id": "call_1", "content": "first"}
    assert messages[3] == {"role": "tool", "tool_call_id": "call_2", "content": "(see attached image)"}
    last = messages[4]["content"]
    assert last[0] == {"type": "text", "text": "Attached image(s) from tool result:"}
    assert [p["image_url"]["url"] for p in last[1:]] == [f"data:image/png;base64,{PNG}"] * 2


async def test_empty_tool_result_and_text_only_model(scripted_server):
    history = tool_history()
    history[2] = ToolResultMessage(tool_call_id="call_1", tool_name="shot", content=[], timestamp=3)
    serve(scripted_server, text_stream("x"))
    await run_stream(make_model(scripted_server, input=["text"]), Context(messages=history))
    messages = body_of(scripted_server)["messages"]
    assert messages[2]["content"] == "(no tool output)"
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool"]
    assert "image_url" not in json.dumps(messages)


async def test_tool_result_name_and_assistant_after_tool_result(scripted_server):
    history = tool_history()[:3] + [
        ToolResultMessage(tool_call_id="call_2", tool_name="shot", content=[TextContent(text="2")], timestamp=4),
        UserMessage(content="and now?", timestamp=5)]
    compat = {"requiresToolResultName": True, "requiresAssistantAfterToolResult": True}
    serve(scripted_server, text_stream("x"))
    await run_stream(make_model(scripted_server, input=["text"], compat=compat), Context(messages=history))
    messages = body_of(scripted_server)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "assistant", "user"]
    assert messages[2]["name"] == "shot"
    assert messages[4] == {"role": "assistant", "content": "I have processed the tool results."}


def thinking_history(signature: str = "reasoning_content") -> list:
    return [UserMessage(content="q", timestamp=1),
            AssistantMessage(content=[ThinkingContent(thinking="deep thought", thinking_signature=signature),
                                      TextContent(text="answer")],
                             api="openai-completions", provider="openai", model="test-model", timestamp=2),
            UserMessage(content="more", timestamp=3)]


async def test_thinking_replayed_in_its_field_or_as_text(scripted_server):
    serve(scripted_server, text_stream("x"))
    await run_stream(make_model(scripted_server, reasoning=True), Context(messages=thinking_history("reasoning")))
    assistant = body_of(scripted_server)["messages"][1]
    assert assistant == {"role": "assistant", "content": "answer", "reasoning": "deep thought"}
    serve(scripted_server, text_stream("x"))
    await run_stream(make_model(scripted_server, reasoning=True, compat={"requiresThinkingAsText": True}),
                     Context(messages=thinking_history()))
    assistant = body_of(scripted_server)["messages"][1]
    assert assistant["content"] == [{"type": "text", "text": "deep thought"}, {"type": "text", "text": "answer"}]
    assert "reasoning_content" not in assistant


async def test_errored_assistant_messages_are_dropped_and_orphans_answered(scripted_server):
    history = [UserMessage(content="a", timestamp=1),
               AssistantMessage(content=[TextContent(text="half")], api="openai-completions", provider="openai",
                                model="test-model", stop_reason="error", error_message="boom", timestamp=2),
               AssistantMessage(content=[ToolCall(id="call_9", name="f", arguments={})], api="openai-completions",
                                provider="openai", model="test-model", stop_reason="toolUse", timestamp=3),
               UserMessage(content="b", timestamp=4)]
    serve(scripted_server, text_stream("x"))
    _, message = await run_stream(make_model(scripted_server), Context(messages=history))
    assert message.stop_reason == "stop"
    messages = body_of(scripted_server)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "user"]
    assert messages[2]["content"] == "No result provided"
    assert "half" not in json.dumps(messages)


async def test_tool_choice_and_strict(scripted_server):
    tool = Tool(name="add", description="Add", parameters={"type": "object", "properties": {"a": {"type": "number"}}})
    serve(scripted_server, text_stream("x"))
    await run_simple(make_model(scripted_server), ctx(tools=[tool]), {"tool_choice": "none"})
    body = body_of(scripted_server)
    assert body["tool_choice"] == "none"
    assert body["tools"] == [{"type": "function", "function": {
        "name": "add", "description": "Add", "parameters": tool.parameters, "strict": False}}]
    serve(scripted_server, text_stream("x"))
    await run_stream(make_model(scripted_server, compat={"supportsStrictMode": False}), ctx(tools=[tool]))
    assert "strict" not in body_of(scripted_server)["tools"][0]["function"]
    strict_tool = Tool(name="add", parameters=tool.parameters,
                       constrained_sampling={"type": "json_schema", "strict": "prefer"})
    serve(scripted_server, text_stream("x"))
    await run_stream(make_model(scripted_server), ctx(tools=[strict_tool]))
    assert body_of(scripted_server)["tools"][0]["function"]["strict"] is True


async def test_surrogates_are_removed_from_text(scripted_server):
    serve(scripted_server, text_stream("x"))
    history = [UserMessage(content="emoji 😀 and lone \ud800 surrogate", timestamp=1)]
    _, message = await run_stream(make_model(scripted_server), Context(messages=history))
    assert message.stop_reason == "stop"
    content = body_of(scripted_server)["messages"][0]["content"]
    assert "😀" in content and "\ud800" not in content


async def test_empty_inputs_never_crash(scripted_server):
    history = [UserMessage(content=[], timestamp=1), UserMessage(content="", timestamp=2),
               UserMessage(content="   ", timestamp=3),
               AssistantMessage(content=[], api="openai-completions", provider="openai", model="test-model",
                                timestamp=4),
               UserMessage(content="real", timestamp=5)]
    serve(scripted_server, text_stream("x"))
    _, message = await run_stream(make_model(scripted_server), Context(messages=history))
    assert message.stop_reason == "stop"
    roles = [m["role"] for m in body_of(scripted_server)["messages"]]
    assert "assistant" not in roles  # an empty assistant message is skipped


# --- max tokens (111), sampling params (127), reasoning (5.4), budgets (118) ----------------

async def test_max_tokens_default_explicit_and_clamped(scripted_server):
    model = make_model(scripted_server, max_tokens=3000)
    serve(scripted_server, text_stream("x"))
    await run_simple(model, ctx())
    assert body_of(scripted_server)["max_completion_tokens"] == 3000
    serve(scripted_server, text_stream("x"))
    await run_simple(model, ctx(), {"max_tokens": 1234})
    assert body_of(scripted_server)["max_completion_tokens"] == 1234
    # the window minus the estimate minus pi's 4096 (windows of 32k and more; smaller ones keep
    # an eighth: tests/ai/test_options.py)
    small = make_model(scripted_server, context_window=40_000, max_tokens=38_000)
    serve(scripted_server, text_stream("x"))
    await run_simple(small, ctx("x" * 8000))
    assert body_of(scripted_server)["max_completion_tokens"] == 33_904
    serve(scripted_server, text_stream("x"))
    await run_simple(make_model(scripted_server, provider="deepseek", max_tokens=500), ctx())
    body = body_of(scripted_server)
    assert body["max_tokens"] == 500 and "max_completion_tokens" not in body


async def test_sampling_params_merge_last(scripted_server):
    model = make_model(scripted_server, sampling_params={"top_p": 0.5, "temperature": 0.1, "seed": 1})
    serve(scripted_server, text_stream("x"))
    await run_simple(model, ctx(), {"temperature": 0.7, "sampling_params": {"seed": 7, "top_k": 3}})
    body = body_of(scripted_server)
    assert (body["top_p"], body["seed"], body["top_k"], body["temperature"]) == (0.5, 7, 3, 0.1)


@pytest.mark.parametrize("level,level_map,expected", [
    ("high", None, "high"),
    ("minimal", None, "minimal"),
    ("low", {"low": "LOW-native"}, "LOW-native"),
    (None, None, None),
    (None, {"off": "none"}, "none"),
])
async def test_reasoning_effort_for_openai_format(scripted_server, level, level_map, expected):
    model = make_model(scripted_server, reasoning=True, thinking_level_map=level_map)
    serve(scripted_server, text_stream("x"))
    await run_simple(model, ctx(), {"reasoning": level} if level else {})
    assert body_of(scripted_server).get("reasoning_effort") == expected


async def test_reasoning_ignored_for_non_reasoning_or_unsupported(scripted_server):
    serve(scripted_server, text_stream("x"))
    await run_simple(make_model(scripted_server, reasoning=False), ctx(), {"reasoning": "high"})
    assert "reasoning_effort" not in body_of(scripted_server)
    serve(scripted_server, text_stream("x"))
    await run_simple(make_model(scripted_server, provider="xai", reasoning=True), ctx(), {"reasoning": "high"})
    assert "reasoning_effort" not in body_of(scripted_server)


@pytest.mark.parametrize("provider,compat,level,key,expected", [
    ("deepseek", None, "high", "thinking", {"type": "enabled"}),
    ("deepseek", None, None, "thinking", {"type": "disabled"}),
    ("zai", None, "low", "thinking", {"type": "enabled", "clear_thinking": False}),
    ("zai", None, None, "thinking", {"type": "disabled"}),
    ("openrouter", None, "high", "reasoning", {"effort": "high"}),
    ("openrouter", None, None, "reasoning", {"effort": "none"}),
    ("vllm", {"thinkingFormat": "qwen"}, "high", "enable_thinking", True),
    ("vllm", {"thinkingFormat": "qwen"}, None, "enable_thinking", False),
    ("llamacpp", {"thinkingFormat": "chat-template"}, "medium", "chat_template_kwargs", {"enable_thinking": True}),
    ("together", None, "high", "reasoning", {"enabled": True}),
])
async def test_thinking_formats(scripted_server, provider, compat, level, key, expected):
    model = make_model(scripted_server, provider=provider, reasoning=True, compat=compat)
    serve(scripted_server, text_stream("x"))
    await run_simple(model, ctx(), {"reasoning": level} if level else {})
    assert body_of(scripted_server)[key] == expected


async def test_disabled_thinking_not_sent_when_model_cannot_turn_it_off(scripted_server):
    model = make_model(scripted_server, provider="deepseek", reasoning=True, thinking_level_map={"off": None})
    serve(scripted_server, text_stream("x"))
    await run_simple(model, ctx())
    assert "thinking" not in body_of(scripted_server)


async def test_thinking_budget_field(scripted_server):
    compat = {"thinkingBudgetField": "thinking_token_budget"}
    model = make_model(scripted_server, provider="vllm", reasoning=True, compat=compat, max_tokens=32000)
    cases = [({"reasoning": "medium"}, 8192), ({"reasoning": "xhigh"}, 16384),
             ({"reasoning": "low", "thinking_budgets": {"low": 3000}}, 3000),
             ({"reasoning": "high", "max_tokens": 4000}, 2976), ({}, None)]
    for options, expected in cases:
        serve(scripted_server, text_stream("x"))
        await run_simple(model, ctx(), options)
        assert body_of(scripted_server).get("thinking_token_budget") == expected, options
    serve(scripted_server, text_stream("x"))
    await run_simple(make_model(scripted_server, provider="vllm", reasoning=True), ctx(), {"reasoning": "high"})
    assert not any("budget" in k for k in body_of(scripted_server))


# --- prompt cache and headers (119) ---------------------------------------------------------

def test_prompt_cache_key_for_direct_openai():
    model = Model(id="gpt-5", api="openai-completions", provider="openai", base_url="https://api.openai.com/v1")
    long_id = "s" * 80
    params = oc.build_params(model, ctx(), {"session_id": long_id})
    assert params["prompt_cache_key"] == "s" * 64 and "prompt_cache_retention" not in params
    params = oc.build_params(model, ctx(), {"session_id": "abc", "cache_retention": "long"})
    assert params["prompt_cache_key"] == "abc" and params["prompt_cache_retention"] == "24h"
    params = oc.build_params(model, ctx(), {"session_id": "abc", "cache_retention": "none"})
    assert "prompt_cache_key" not in params and "prompt_cache_retention" not in params
    params = oc.build_params(model, ctx(), {"session_id": "abc", "env": {"PI_CACHE_RETENTION": "long"}})
    assert params["prompt_cache_retention"] == "24h"


async def test_prompt_cache_on_other_hosts_and_session_headers(scripted_server):
    serve(scripted_server, text_stream("x"))
    await run_stream(make_model(scripted_server), ctx(), {"session_id": "sess"})
    body = body_of(scripted_server)
    assert "prompt_cache_key" not in body  # short retention only caches on api.openai.com
    serve(scripted_server, text_stream("x"))
    await run_stream(make_model(scripted_server), ctx(), {"session_id": "sess", "cache_retention": "long"})
    assert body_of(scripted_server)["prompt_cache_key"] == "sess"
    serve(scripted_server, text_stream("x"))
    model = make_model(scripted_server, compat={"sendSessionAffinityHeaders": True},
                       headers={"X-Model": "m", "X-Both": "model"})
    await run_stream(model, ctx(), {"session_id": "sess", "headers": {"X-Both": "option", "User-Agent": None}})
    headers = scripted_server.requests[-1].headers
    assert headers["session_id"] == "sess" and headers["x-model"] == "m" and headers["x-both"] == "option"
    assert not headers.get("user-agent", "").startswith("pi (")
    serve(scripted_server, text_stream("x"))
    model = make_model(scripted_server, provider="openrouter", compat={"sendSessionAffinityHeaders": True})
    await run_stream(model, ctx(), {"session_id": "sess"})
    assert scripted_server.requests[-1].headers["x-session-id"] == "sess"


def test_openrouter_anthropic_cache_control():
    model = Model(id="anthropic/claude-sonnet-4-5", api="openai-completions", provider="openrouter",
                  base_url="https://openrouter.ai/api/v1", reasoning=True)
    tool = Tool(name="t", parameters={"type": "object", "properties": {}})
    params = oc.build_params(model, ctx(system_prompt="S", tools=[tool]), {})
    marker = {"type": "ephemeral"}
    assert params["messages"][0]["content"] == [{"type": "text", "text": "S", "cache_control": marker}]
    assert params["messages"][-1]["content"] == [{"type": "text", "text": "Hi", "cache_control": marker}]
    assert params["tools"][-1]["cache_control"] == marker


def test_detect_compat_table():
    def compat(provider, base_url="", model_id="m"):
        return detect_compat(Model(id=model_id, api="openai-completions", provider=provider, base_url=base_url))

    assert compat("openai")["maxTokensField"] == "max_completion_tokens"
    assert compat("openai")["supportsStore"] and compat("openai")["supportsDeveloperRole"]
    for provider in ("deepseek", "zai", "together", "chutes", "nvidia"):
        assert compat(provider)["maxTokensField"] == "max_tokens", provider
        assert not compat(provider)["supportsStore"], provider
    assert compat("deepseek")["thinkingFormat"] == "deepseek"
    assert compat("deepseek")["requiresReasoningContentOnAssistantMessages"]
    assert compat("openrouter")["thinkingFormat"] == "openrouter"
    assert compat("openrouter")["sessionAffinityFormat"] == "openrouter"
    assert not compat("xai")["supportsReasoningEffort"]
    assert not compat("x", "https://api.x.ai/v1")["supportsReasoningEffort"]
    assert not compat("together")["supportsStrictMode"] and not compat("together")["supportsLongCacheRetention"]
    assert compat("openrouter", model_id="anthropic/claude-3")["cacheControlFormat"] == "anthropic"
    assert compat("groq")["supportsReasoningEffort"] and compat("groq")["supportsStore"]
    local = compat("custom", "http://127.0.0.1:8080/v1")
    assert not local["supportsDeveloperRole"] and not local["supportsReasoningEffort"]
    assert local["maxTokensField"] == "max_tokens"


async def test_on_payload_replaces_body_and_on_response_sees_status(scripted_server):
    seen = {}

    async def on_payload(params, model):
        seen["model"] = model.id
        return {**params, "extra_field": 1}

    def on_response(info, model):
        seen["status"] = info["status"]
        seen["ctype"] = info["headers"]["content-type"]

    serve(scripted_server, text_stream("x"))
    await run_stream(make_model(scripted_server), ctx(), {"on_payload": on_payload, "on_response": on_response})
    assert body_of(scripted_server)["extra_field"] == 1
    assert seen == {"model": "test-model", "status": 200, "ctype": "text/event-stream"}


# --- errors ---------------------------------------------------------------------------------

@pytest.mark.parametrize("status", [400, 401, 403, 404, 429, 500, 503])
async def test_http_errors(scripted_server, status):
    body = {"error": {"message": f"Incorrect API key provided: {KEY}" if status == 401 else f"failure {status}",
                      "type": "invalid_request_error", "code": status}}
    scripted_server.push(Reply.json(status, body))
    events, message = await run_stream(make_model(scripted_server), ctx())
    assert types_of(events) == ["error"]  # failed before the response: no start
    assert message.stop_reason == "error" and events[0].reason == "error"
    assert message.error_message.startswith(f"{status}: {{")
    assert "error" in json.loads(message.error_message.split(": ", 1)[1])
    assert message.content == []
    assert_key_absent(events, message)
    assert len(scripted_server.requests) == 1  # no retries by default


async def test_openrouter_raw_metadata_is_appended(scripted_server):
    raw = 'upstream said: "context too long"'
    body = {"error": {"message": "Provider returned error", "code": 400, "metadata": {"raw": raw}}}
    scripted_server.push(Reply.json(400, body))
    _, message = await run_stream(make_model(scripted_server, provider="openrouter"), ctx())
    assert message.error_message.startswith("400: ")
    # escaped inside the JSON body, so pi appends the readable text on its own line
    assert message.error_message.endswith("\n" + raw)
    plain = {"error": {"message": "Provider returned error", "metadata": {"raw": "plain words"}}}
    scripted_server.push(Reply.json(400, plain))
    _, message = await run_stream(make_model(scripted_server, provider="openrouter"), ctx())
    assert message.error_message.count("plain words") == 1  # already contained: not appended


async def test_connection_refused_is_an_error_event():
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = Model(id="m", api="openai-completions", provider="openai", base_url=f"http://127.0.0.1:{port}/v1")
    events, message = await run_stream(model, ctx())
    assert types_of(events) == ["error"]
    assert f"127.0.0.1:{port}" in message.error_message
    assert_key_absent(events, message)


async def test_connection_reset_mid_stream_keeps_partial(scripted_server):
    body = sse_body([chunk({"content": "Hello"}), chunk({"content": " there"})], done=False)
    scripted_server.push(Reply(chunks=[body, RESET]))
    events, message = await run_stream(make_model(scripted_server), ctx())
    assert types_of(events)[:2] == ["start", "text_start"] and events[-1].type == "error"
    assert message.stop_reason == "error" and "lost while reading" in message.error_message
    # what happened and what to do first, in plain words; the transport's text after it
    said, _, technical = message.error_message.partition("Technical detail: ")
    assert said.startswith("The model server on this machine (127.0.0.1:") and "stopped while answering" in said
    assert "run the request again" in said and "chunked" not in said and "lost while reading" in technical
    assert message.content[0].text == "Hello there"
    assert "text_end" not in types_of(events)


async def test_error_object_in_the_middle_of_a_stream(scripted_server):
    payloads = [chunk({"content": "par"}),
                {"error": {"message": "upstream overloaded", "type": "server_error", "code": 529}}]
    serve(scripted_server, payloads, done=False)
    events, message = await run_stream(make_model(scripted_server), ctx())
    assert message.stop_reason == "error" and message.error_message == "upstream overloaded"
    assert message.content[0].text == "par"


async def test_malformed_sse_lines_are_ignored(scripted_server):
    body = (b"garbage line without colon\n: comment\nevent: weird\nretry: x\n"
            + sse_body([chunk({"content": "fine"})], done=False)
            + b"unknownfield: 1\n\n" + sse_body([chunk({}, "stop")]))
    scripted_server.push(Reply(chunks=chunked(body, 11)))
    _, message = await run_stream(make_model(scripted_server), ctx())
    assert message.stop_reason == "stop" and message.content[0].text == "fine"


async def test_non_json_data_is_a_clear_error(scripted_server):
    body = sse_body([chunk({"content": "ok so far"})], done=False) + b"data: {not json at all\n\n"
    scripted_server.push(Reply(chunks=[body]))
    _, message = await run_stream(make_model(scripted_server), ctx())
    assert message.stop_reason == "error"
    assert message.error_message.startswith("Invalid JSON in stream event")
    assert "{not json at all" in message.error_message
    assert message.content[0].text == "ok so far"


async def test_retries_only_when_requested(scripted_server):
    scripted_server.push(Reply.json(503, {"error": "busy"}, headers={"retry-after-ms": "5"}))
    _, message = await run_stream(make_model(scripted_server), ctx())
    assert message.stop_reason == "error" and message.error_message.startswith("503: ")
    scripted_server.push(Reply.json(503, {"error": "busy"}, headers={"retry-after-ms": "5"}))
    serve(scripted_server, text_stream("second time"))
    _, message = await run_stream(make_model(scripted_server), ctx(), {"max_retries": 2})
    assert message.stop_reason == "stop" and message.content[0].text == "second time"
    assert len(scripted_server.requests) == 3


async def test_retry_delay_above_cap_is_reported(scripted_server):
    scripted_server.push(Reply.json(429, {"error": {"message": "slow down"}}, headers={"retry-after": "10"}))
    _, message = await run_stream(make_model(scripted_server), ctx(),
                                  {"max_retries": 3, "max_retry_delay_ms": 1000})
    assert message.stop_reason == "error"
    assert message.error_message.startswith("Server requested 10s retry delay (max: 1s). 429: ")
    assert "slow down" in message.error_message


# --- abort (133) ----------------------------------------------------------------------------

async def test_abort_before_the_request(scripted_server):
    controller = AbortController()
    controller.abort()
    events, message = await run_stream(make_model(scripted_server), ctx(), {"signal": controller.signal})
    assert types_of(events) == ["error"] and events[0].reason == "aborted"
    assert message.stop_reason == "aborted" and message.error_message == "Request was aborted"
    assert message.content == [] and scripted_server.requests == []


async def test_abort_during_the_stream_keeps_partial(scripted_server):
    body = sse_body([chunk({"content": "Partial "}), chunk({"content": "answer"}),
                     chunk({"tool_calls": [tool_delta(0, "c1", "f", '{"a": 1')]})], done=False)
    scripted_server.push(Reply(chunks=[body, HANG]))
    controller = AbortController()
    s = stream_openai_completions(make_model(scripted_server), ctx(), {"api_key": KEY, "signal": controller.signal})
    events = []
    async for event in s:
        events.append(event)
        if event.type == "toolcall_delta":
            controller.abort()
    message = await s.result()
    assert events[-1].type == "error" and events[-1].reason == "aborted"
    assert message.stop_reason == "aborted" and message.error_message == "Request was aborted"
    assert message.content[0].text == "Partial answer"
    assert message.content[1].arguments == {"a": 1}
    assert not any(e.type.endswith("_end") for e in events)
    assert message.usage.input == 0 and message.usage.output == 0  # usage only comes at the end


async def test_abort_during_a_retry_wait(scripted_server, monkeypatch):
    scripted_server.push(Reply.json(429, {"error": "later"}, headers={"retry-after": "30"}))
    controller = AbortController()
    delays = abort_in_retry_wait(monkeypatch, controller)  # aborts once the 30 s wait has begun
    events, message = await asyncio.wait_for(
        run_stream(make_model(scripted_server), ctx(), {"signal": controller.signal, "max_retries": 3}),
        20)
    assert delays == [30_000]
    assert types_of(events) == ["error"] and message.stop_reason == "aborted"
    assert message.error_message == "Request was aborted"
    assert len(scripted_server.requests) == 1


async def test_aborted_message_can_be_sent_back(scripted_server):
    aborted = AssistantMessage(content=[TextContent(text="cut")], api="openai-completions", provider="openai",
                               model="test-model", stop_reason="aborted", error_message="Request was aborted",
                               timestamp=2)
    serve(scripted_server, text_stream("fresh"))
    history = [UserMessage(content="a", timestamp=1), aborted, UserMessage(content="again", timestamp=3)]
    _, message = await run_stream(make_model(scripted_server), Context(messages=history))
    assert message.stop_reason == "stop"
    assert [m["role"] for m in body_of(scripted_server)["messages"]] == ["user", "user"]


# --- API keys -------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [stream_openai_completions, stream_simple_openai_completions])
async def test_missing_key_is_an_error_event_naming_the_variable(scripted_server, monkeypatch, fn):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = make_model(scripted_server)
    s = fn(model, ctx(), {})
    events = [e async for e in s]
    message = await s.result()
    assert types_of(events) == ["error"] and message.stop_reason == "error"
    assert "OPENAI_API_KEY" in message.error_message
    assert scripted_server.requests == []


async def test_key_from_environment_and_explicit_authorization_header(scripted_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    serve(scripted_server, text_stream("x"))
    s = stream_openai_completions(make_model(scripted_server), ctx(), {})
    assert (await s.result()).stop_reason == "stop"
    assert scripted_server.requests[-1].headers["authorization"] == f"Bearer {KEY}"
    monkeypatch.delenv("OPENAI_API_KEY")
    serve(scripted_server, text_stream("x"))
    s = stream_simple_openai_completions(make_model(scripted_server), ctx(),
                                         {"headers": {"Authorization": "Bearer gateway"}})
    assert (await s.result()).stop_reason == "stop"
    assert scripted_server.requests[-1].headers["authorization"] == "Bearer gateway"


async def test_local_provider_needs_no_key(scripted_server, monkeypatch):
    serve(scripted_server, text_stream("local"))
    model = make_model(scripted_server, provider="llamacpp")
    s = stream_simple_openai_completions(model, ctx(), {})
    message = await s.result()
    assert message.stop_reason == "stop" and message.content[0].text == "local"
    assert "authorization" not in scripted_server.requests[-1].headers


# --- captured streams from real servers -----------------------------------------------------

def reference_replay(path: Path) -> dict[str, Any]:
    """A naive, independent reading of a captured stream to compare the adapter against."""
    text, names, args, ids, finish, error = "", {}, {}, {}, None, None
    for line in path.read_text().splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        data = json.loads(line[6:])
        if "error" in data:
            error = data["error"]["message"]
            break
        for choice in data.get("choices") or []:
            delta = choice.get("delta") or {}
            text += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                i = call["index"]
                ids.setdefault(i, call.get("id"))
                fn = call.get("function") or {}
                if fn.get("name") and i not in names:
                    names[i] = fn["name"]
                args[i] = args.get(i, "") + (fn.get("arguments") or "")
            finish = choice.get("finish_reason") or finish
    return {"text": text, "names": names, "args": args, "ids": ids, "finish": finish, "error": error}


STOP = {"stop": "stop", "length": "length", "tool_calls": "toolUse"}


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.sse")), ids=lambda p: p.name)
@pytest.mark.parametrize("size", [1, 13, 4096])
async def test_replay_captured_streams(scripted_server, path, size):
    ref = reference_replay(path)
    scripted_server.push(Reply(chunks=chunked(path.read_bytes(), size)))
    model = make_model(scripted_server, id="qwen2.5-coder-0.5b", provider="llamacpp")
    events, message = await run_stream(model, ctx())
    texts = [b.text for b in message.content if b.type == "text"]
    assert "".join(texts) == ref["text"]
    assert len(texts) <= 1
    calls = [b for b in message.content if b.type == "toolCall"]
    assert [c.name for c in calls] == [ref["names"][i] for i in sorted(ref["names"])]
    assert [c.arguments for c in calls] == [json.loads(ref["args"][i]) for i in sorted(ref["args"])]
    assert [c.id for c in calls] == [ref["ids"][i] for i in sorted(ref["ids"])]
    if ref["error"]:
        assert message.stop_reason == "error" and message.error_message == ref["error"]
    elif ref["finish"] is None:
        assert message.error_message == "Stream ended without finish_reason"
    else:
        assert message.stop_reason == STOP[ref["finish"]] and message.raw_stop_reason == ref["finish"]
        assert events[-1].type == "done"


async def test_replay_llama_server_tool_call_details(scripted_server):
    path = FIXTURES / "llama-server_tool_call_stream.sse"
    scripted_server.push(Reply(chunks=chunked(path.read_bytes(), 17)))
    events, message = await run_stream(make_model(scripted_server, id="qwen2.5-coder-0.5b", provider="llamacpp"),
                                       ctx())
    assert message.content == [ToolCall(id="ffDZ1BWO4VvAolKqZqyMj0Ykweo9MPkr", name="add", arguments={"a": 3, "b": 4})]
    assert message.stop_reason == "toolUse"
    assert message.usage.model_dump(exclude={"cost"}) == {
        "input": 179, "output": 22, "cacheRead": 18, "cacheWrite": 0, "reasoning": 0, "totalTokens": 219}
    assert message.response_id == "chatcmpl-xBDL94PFojz9fzj4JSM7k3h4KLFtLxkr"
    assert message.response_model is None
    assert sum(e.type == "toolcall_delta" for e in events) == 11


async def test_replay_llama_cpp_python_repeated_name_and_id(scripted_server):
    path = FIXTURES / "llama-cpp-python-server_tool_forced_stream__name_repeated.sse"
    scripted_server.push(Reply(chunks=chunked(path.read_bytes(), 64)))
    _, message = await run_stream(make_model(scripted_server, id="qwen2.5-coder-0.5b", provider="llamacpp"), ctx())
    assert len(message.content) == 1
    call = message.content[0]
    assert call.name == "add"  # not "addaddadd..."
    assert call.id == "call__0_add_cmpl-73aa75fa-2181-405a-901d-242c1f4c046b"
    assert call.arguments == {"a": 3, "b": 4}


async def test_replay_mid_stream_server_error(scripted_server):
    path = FIXTURES / "llama-server_stream_error_hallucinated_tool.sse"
    scripted_server.push(Reply(chunks=[path.read_bytes()]))
    events, message = await run_stream(make_model(scripted_server, provider="llamacpp"), ctx())
    assert types_of(events) == ["start", "error"]
    assert message.error_message == ("The model produced output that does not match the expected "
                                     "peg-native format")


async def test_replay_tinyq4_without_finish_reason(scripted_server):
    path = FIXTURES / "tinyq4_chat_stream.sse"
    scripted_server.push(Reply(chunks=[path.read_bytes()]))
    model = make_model(scripted_server, provider="llamacpp", compat={"supportsFinishReason": False})
    _, message = await run_stream(model, ctx())
    assert message.stop_reason == "stop" and message.content[0].text.startswith("The")
    assert message.response_id is None


async def test_replay_http_500_json(scripted_server):
    path = FIXTURES / "llama-cpp-python-server_http500_assistant_content_null.json"
    scripted_server.push(Reply(status=500, chunks=[path.read_bytes()], content_type="application/json"))
    _, message = await run_stream(make_model(scripted_server, provider="llamacpp"), ctx())
    assert message.stop_reason == "error" and message.error_message.startswith("500: {\"error\"")
    assert "validation errors" in message.error_message


def test_assistant_tool_call_content_is_empty_string_not_null():
    model = Model(id="m", api="openai-completions", provider="llamacpp", base_url="http://127.0.0.1:1/v1")
    history = tool_history()[:2]
    messages = oc.convert_messages(model, Context(messages=history), oc.get_compat(model))
    assert messages[1]["content"] == ""  # llama-cpp-python rejects null (HTTP 500 fixture)
    assert re.fullmatch(r"call_\d", messages[1]["tool_calls"][0]["id"])


# --- transport behaviour through the adapter --------------------------------------------------

async def test_connections_are_reused_between_streams(scripted_server):
    for text in ("one", "two", "three"):
        serve(scripted_server, text_stream(text), size=64)
    for text in ("one", "two", "three"):
        _, message = await run_stream(make_model(scripted_server), ctx())
        assert message.content[0].text == text
    assert scripted_server.connections == 1


async def test_server_that_stays_open_after_done_still_completes(scripted_server):
    body = sse_body([chunk({"content": "finished"}), chunk({}, "stop")], done=True)
    scripted_server.push(Reply(chunks=[body, HANG]))
    events, message = await run_stream(make_model(scripted_server), ctx())
    assert message.stop_reason == "stop" and message.content[0].text == "finished"
    assert events[-1].type == "done"


async def test_push_many_keeps_event_stream_rules():
    from pi_notebook.ai.event_stream import AssistantMessageEventStream
    from pi_notebook.ai.types import DoneEvent, StartEvent, TextStartEvent

    s = AssistantMessageEventStream()
    final = AssistantMessage(api="a", provider="p", model="m")
    s.push_many([StartEvent(partial=final), TextStartEvent(content_index=0, partial=final),
                 DoneEvent(reason="stop", message=final), TextStartEvent(content_index=1, partial=final)])
    s.push_many([TextStartEvent(content_index=2, partial=final)])  # after done: ignored
    assert [e.type for e in [e async for e in s]] == ["start", "text_start", "done"]
    assert await s.result() is final


async def test_fast_built_delta_events_behave_like_validated_ones(scripted_server):
    from pi_notebook.ai.types import TextDeltaEvent, ThinkingDeltaEvent, ToolCallDeltaEvent

    payloads = [chunk({"content": "a"}), chunk({"content": "b"}), chunk({"reasoning_content": "r"}),
                chunk({"tool_calls": [tool_delta(0, "c", "f", "{}")]}), chunk({}, "tool_calls")]
    serve(scripted_server, payloads)
    events, message = await run_stream(make_model(scripted_server, reasoning=True), ctx())
    deltas = [e for e in events if e.type.endswith("_delta")]
    assert {type(e) for e in deltas} == {TextDeltaEvent, ThinkingDeltaEvent, ToolCallDeltaEvent}
    for event in deltas:
        twin = type(event)(content_index=event.content_index, delta=event.delta, partial=message)
        assert event == twin
        assert event.model_dump() == twin.model_dump()
        assert event.model_fields_set == twin.model_fields_set
        copy = event.model_copy(update={"delta": "changed"})
        assert copy.delta == "changed" and event.delta != "changed"


def test_thinking_only_assistant_message_is_skipped():
    model = Model(id="m", api="openai-completions", provider="openai", base_url="http://127.0.0.1:1/v1",
                  reasoning=True)
    history = [UserMessage(content="q", timestamp=1),
               AssistantMessage(content=[ThinkingContent(thinking="hmm", thinking_signature="reasoning")],
                                api="openai-completions", provider="openai", model="m", timestamp=2),
               UserMessage(content="again", timestamp=3)]
    messages = oc.convert_messages(model, Context(messages=history), oc.get_compat(model))
    assert [m["role"] for m in messages] == ["user", "user"]
    as_text = oc.convert_messages(model, Context(messages=history),
                                  {**oc.get_compat(model), "requiresThinkingAsText": True})
    assert as_text[1] == {"role": "assistant", "content": [{"type": "text", "text": "hmm"}]}


async def test_abort_at_any_moment_always_ends_with_one_terminal_event(scripted_server):
    import random
    import threading

    rng = random.Random(7)
    body = sse_body([chunk({"content": "a"}), chunk({"content": "b"}), chunk({}, "stop")])
    pieces = chunked(body, 40)
    for attempt in range(25):
        chunks = []
        for piece in pieces:
            chunks += [piece, (DELAY, 0.004)]
        scripted_server.push(Reply(chunks=chunks))
        controller = AbortController()
        delay = rng.uniform(0, 0.03)
        if attempt % 2:
            threading.Timer(delay, controller.abort).start()
        else:
            asyncio.get_running_loop().call_later(delay, controller.abort)
        s = stream_openai_completions(make_model(scripted_server), ctx(),
                                      {"api_key": KEY, "signal": controller.signal})
        events = [e async for e in s]
        message = await s.result()
        terminal = [e for e in events if e.type in ("done", "error")]
        assert len(terminal) == 1 and events[-1] is terminal[0], attempt
        assert message.stop_reason in ("stop", "aborted"), (attempt, message.error_message)
        if message.stop_reason == "aborted":
            assert message.error_message == "Request was aborted"
        await asyncio.sleep(0.035)  # let a late timer fire before the next attempt
    assert getattr(asyncio.current_task(), "cancelling", lambda: 0)() == 0


async def test_idle_timeout_keeps_partial(scripted_server):
    scripted_server.push(Reply(chunks=[sse_body([chunk({"content": "slow"})], done=False), HANG]))
    events, message = await run_stream(make_model(scripted_server), ctx(), {"timeout_ms": 200})
    assert message.stop_reason == "error" and "timed out" in message.error_message
    assert message.content[0].text == "slow"


async def test_cancelled_task_still_ends_the_stream(scripted_server):
    scripted_server.push(Reply(chunks=[sse_body([chunk({"content": "x"})], done=False), HANG]))
    s = stream_openai_completions(make_model(scripted_server), ctx(), {"api_key": KEY})
    events = []
    async for event in s:
        events.append(event)
        if event.type == "text_delta":
            for task in list(_common._tasks):
                task.cancel()
    message = await s.result()
    assert events[-1].type == "error" and message.stop_reason == "aborted"
    assert message.content[0].text == "x"


# --- refusals (recorded from the live OpenAI API) -------------------------------------------

RECORDED = Path(__file__).parents[1] / "data" / "recorded-wire" / "openai-completions"


def _recorded_refusal(name: str) -> tuple[bytes, str]:
    """The recorded body and the refusal text it carries, read from its ``data:`` lines."""
    body = (RECORDED / f"{name}.sse").read_bytes()
    refusal = ""
    for line in body.decode().splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[len("data: "):])["choices"]:
                refusal += choice["delta"].get("refusal") or ""
    return body, refusal


@pytest.mark.parametrize("name", ["sdk_refusal", "sdk_refusal_logprobs"])
@pytest.mark.parametrize("size", [1, 13, 4096])
async def test_recorded_refusal_is_the_answer_text(scripted_server, name, size):
    body, refusal = _recorded_refusal(name)
    assert refusal.startswith("I'm") and len(refusal) > 20  # the fixture is what we think it is
    scripted_server.push(Reply(chunks=chunked(body, size)))
    model = make_model(scripted_server, id="gpt-4o-2024-08-06")
    events, message = await run_stream(model, ctx("Which is the best city?"))
    assert message.stop_reason == "stop" and message.error_message is None
    assert message.content == [TextContent(text=refusal)]
    kinds = types_of(events)
    assert kinds[:2] == ["start", "text_start"] and kinds[-2:] == ["text_end", "done"]
    assert "".join(e.delta for e in events if e.type == "text_delta") == refusal
    assert message.response_id.startswith("chatcmpl-") and message.usage.input > 0
    # the model sees its refusal on the next turn
    history = Context(messages=[UserMessage(content="q", timestamp=1), message,
                                UserMessage(content="again", timestamp=3)])
    sent = oc.convert_messages(model, history, oc.get_compat(model))
    assert sent[1] == {"role": "assistant", "content": refusal}


async def test_refusal_after_content_continues_the_same_text_block(scripted_server):
    serve(scripted_server, [chunk({"role": "assistant", "content": "Sure"}),
                            chunk({"refusal": "... actually, no."}), chunk({}, "stop")])
    events, message = await run_stream(make_model(scripted_server), ctx())
    assert message.content == [TextContent(text="Sure... actually, no.")]
    assert types_of(events).count("text_start") == 1


def _recorded_choice_texts(name: str) -> dict[int, str]:
    texts: dict[int, str] = {}
    for line in (RECORDED / f"{name}.sse").read_text().splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[len("data: "):])["choices"]:
                texts[choice["index"]] = texts.get(choice["index"], "") + (choice["delta"].get("content") or "")
    return texts


@pytest.mark.parametrize("size", [1, 97, 1 << 16])
async def test_recorded_n3_stream_answers_with_choice_0_only(scripted_server, size):
    texts = _recorded_choice_texts("sdk_three_choices_n3")
    assert len(texts) == 3 and len(set(texts.values())) == 3  # three different answers
    scripted_server.push(Reply(chunks=chunked((RECORDED / "sdk_three_choices_n3.sse").read_bytes(), size)))
    events, message = await run_stream(make_model(scripted_server), ctx())
    assert message.stop_reason == "stop"
    assert message.content == [TextContent(text=texts[0])]
    assert "".join(e.delta for e in events if e.type == "text_delta") == texts[0]


async def test_recorded_in_stream_error_keeps_the_usage_it_reports(scripted_server):
    body = (RECORDED / "pyd_openrouter_in_stream_error.sse").read_bytes()
    last = [json.loads(line[len(b"data: "):]) for line in body.splitlines() if line.startswith(b"data: {")][-1]
    assert last["error"]["message"] and last["usage"]["prompt_tokens"] > 0  # the chunk we replay
    scripted_server.push(Reply(chunks=chunked(body, 64)))
    _, message = await run_stream(make_model(scripted_server, provider="openrouter"), ctx())
    assert message.stop_reason == "error" and last["error"]["message"] in message.error_message
    assert message.usage.input == last["usage"]["prompt_tokens"]
    assert message.usage.output == last["usage"]["completion_tokens"]
    assert message.usage.total_tokens == last["usage"]["total_tokens"]
