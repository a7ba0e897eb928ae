"""anthropic-messages against a real local HTTP server (tests/helpers/sse_server.py).

Streams are written in the Messages API's SSE format (``event:`` + ``data:``) and cut into
small chunks so that boundaries fall inside events, JSON and UTF-8 sequences.
"""

from __future__ import annotations

import asyncio
import functools
import json

import pytest
from helpers.messages import assistant
from helpers.retry_wait import abort_in_retry_wait
from helpers.sse_server import HANG, RESET, Reply, ScriptedServer, chunked, sse_event

from pi_notebook.ai.abort import AbortController
from pi_notebook.ai.providers import anthropic
from pi_notebook.ai.providers.anthropic import (
    build_params, convert_messages, stream_anthropic_messages, stream_simple_anthropic_messages,
)
from pi_notebook.ai.types import (
    AssistantMessage, Context, ImageContent, Model, ModelCost, TextContent, ThinkingContent,
    Tool, ToolCall, ToolResultMessage, UserMessage,
)

KEY = "sk-ant-test-SECRET-0123456789"


def make_model(base_url: str, **kw) -> Model:
    fields = dict(id="claude-sonnet-4-5", name="Claude Sonnet 4.5", api="anthropic-messages",
                  provider="anthropic", base_url=base_url, reasoning=True, input=["text", "image"],
                  cost=ModelCost(input=3, output=15, cache_read=0.3, cache_write=3.75),
                  context_window=200_000, max_tokens=64_000)
    fields.update(kw)
    return Model(**fields)


def ctx(text: str = "Hi", **kw) -> Context:
    return Context(system_prompt=kw.pop("system_prompt", "Be brief."),
                   messages=[UserMessage(content=text)], **kw)


def ev(name: str, data: dict) -> str:
    return sse_event(data, event=name)


def message_start(input_tokens=10, cache_read=5, cache_write=0, extra_usage=None, model="claude-sonnet-4-5-20250929"):
    usage = {"input_tokens": input_tokens, "output_tokens": 1,
             "cache_read_input_tokens": cache_read, "cache_creation_input_tokens": cache_write}
    usage.update(extra_usage or {})
    return ev("message_start", {"type": "message_start", "message": {
        "id": "msg_01", "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "usage": usage}})


def block_start(index: int, block: dict) -> str:
    return ev("content_block_start", {"type": "content_block_start", "index": index,
                                      "content_block": block})


def delta(index: int, d: dict) -> str:
    return ev("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})


def block_stop(index: int) -> str:
    return ev("content_block_stop", {"type": "content_block_stop", "index": index})


def message_delta(stop_reason: str | None, usage: dict | None = None, **extra) -> str:
    data: dict = {"type": "message_delta", "delta": {"stop_reason": stop_reason, **extra}}
    if usage is not None:
        data["usage"] = usage
    return ev("message_delta", data)


MESSAGE_STOP = ev("message_stop", {"type": "message_stop"})


def text_stream(parts: list[str], stop="end_turn", output_tokens=7) -> str:
    body = message_start() + ev("ping", {"type": "ping"}) + block_start(0, {"type": "text", "text": ""})
    body += "".join(delta(0, {"type": "text_delta", "text": p}) for p in parts)
    body += block_stop(0) + message_delta(stop, {"output_tokens": output_tokens}) + MESSAGE_STOP
    return body


async def collect(stream):
    events = [e async for e in stream]
    return events, await stream.result()


@pytest.fixture
def server():
    with ScriptedServer() as s:
        yield s


# --- streaming ---------------------------------------------------------------------------

async def test_text_stream_events_usage_and_request(server):
    server.push(Reply(chunks=chunked(text_stream(["Hel", "lo, ", "wörld ✓"]), 7)))
    model = make_model(server.url)
    events, msg = await collect(stream_anthropic_messages(model, ctx(), {"api_key": KEY}))

    types = [e.type for e in events]
    assert types == ["start", "text_start", "text_delta", "text_delta", "text_delta", "text_end", "done"]
    assert all(e.partial is events[0].partial for e in events[:-1])  # one live object
    assert msg.content[0].text == "Hello, wörld ✓"
    assert events[-2].content == "Hello, wörld ✓"
    assert msg.stop_reason == "stop" and msg.raw_stop_reason == "end_turn"
    assert msg.response_id == "msg_01"
    assert msg.model == "claude-sonnet-4-5-20250929"  # 0.85.1: server model wins
    u = msg.usage
    assert (u.input, u.output, u.cache_read, u.cache_write) == (10, 7, 5, 0)
    assert u.total_tokens == u.input + u.output + u.cache_read + u.cache_write
    assert u.cost.input == pytest.approx(10 * 3 / 1e6)
    assert u.cost.total == pytest.approx(u.cost.input + u.cost.output + u.cost.cache_read)
    assert msg.error_message is None

    request = server.requests[0]
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    body = request.json
    assert body["model"] == "claude-sonnet-4-5" and body["stream"] is True
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "Hi", "cache_control": {"type": "ephemeral"}}]}]
    assert body["max_tokens"] == 64_000


async def test_thinking_signature_and_redacted_thinking(server):
    body = (message_start()
            + block_start(0, {"type": "thinking", "thinking": "Let", "signature": ""})
            + delta(0, {"type": "thinking_delta", "thinking": " me think"})
            + delta(0, {"type": "signature_delta", "signature": "c2ln"})
            + delta(0, {"type": "signature_delta", "signature": "bmF0dXJl"})
            + block_stop(0)
            + block_start(1, {"type": "redacted_thinking", "data": "ENCRYPTED=="})
            + block_stop(1)
            + block_start(2, {"type": "text", "text": "Answer"})
            + delta(2, {"type": "text_delta", "text": "!"})
            + block_stop(2)
            + message_delta("end_turn", {"output_tokens": 30, "output_tokens_details": {"thinking_tokens": 20}})
            + MESSAGE_STOP)
    server.push(Reply(chunks=chunked(body, 11)))
    events, msg = await collect(stream_anthropic_messages(make_model(server.url), ctx(), {"api_key": KEY}))
    types = [e.type for e in events]
    assert types == ["start", "thinking_start", "thinking_delta", "thinking_end",
                     "thinking_start", "thinking_end", "text_start", "text_delta", "text_end", "done"]
    thinking, redacted, text = msg.content
    assert thinking.thinking == "Let me think"  # initial value from content_block_start kept
    assert thinking.thinking_signature == "c2lnbmF0dXJl"
    assert redacted.redacted is True and redacted.thinking == "[Reasoning redacted]"
    assert redacted.thinking_signature == "ENCRYPTED=="
    assert text.text == "Answer!"
    assert msg.usage.reasoning == 20


async def test_parallel_tool_calls_arguments_split_across_chunks(server):
    args_a = json.dumps({"path": "/tmp/ü.txt", "lines": [1, 2, 3], "deep": {"x": True}})
    args_b = json.dumps({"query": "needle \"quoted\""})
    body = message_start() + block_start(0, {"type": "text", "text": ""})
    body += delta(0, {"type": "text_delta", "text": "Calling tools."}) + block_stop(0)
    body += block_start(1, {"type": "tool_use", "id": "toolu_A", "name": "read", "input": {}})
    body += block_start(2, {"type": "tool_use", "id": "toolu_B", "name": "search", "input": {}})
    # interleave the two calls' fragments, 3 characters at a time
    frags_a = [args_a[i:i + 3] for i in range(0, len(args_a), 3)]
    frags_b = [args_b[i:i + 3] for i in range(0, len(args_b), 3)]
    for i in range(max(len(frags_a), len(frags_b))):
        if i < len(frags_a):
            body += delta(1, {"type": "input_json_delta", "partial_json": frags_a[i]})
        if i < len(frags_b):
            body += delta(2, {"type": "input_json_delta", "partial_json": frags_b[i]})
    body += block_stop(2) + block_stop(1)
    body += message_delta("tool_use", {"output_tokens": 50}) + MESSAGE_STOP
    server.push(Reply(chunks=chunked(body, 5)))
    tools = [Tool(name="read", description="read a file"), Tool(name="search", description="search")]
    events, msg = await collect(stream_anthropic_messages(make_model(server.url), ctx(tools=tools),
                                                          {"api_key": KEY}))
    deltas = [e for e in events if e.type == "toolcall_delta"]
    assert {e.content_index for e in deltas} == {1, 2}
    for e in deltas:  # arguments always an object, never None
        assert isinstance(e.partial.content[e.content_index].arguments, dict)
    assert "".join(e.delta for e in deltas if e.content_index == 1) == args_a
    assert "".join(e.delta for e in deltas if e.content_index == 2) == args_b
    ends = [e for e in events if e.type == "toolcall_end"]
    assert [e.content_index for e in ends] == [2, 1]
    assert msg.content[1] == ToolCall(id="toolu_A", name="read", arguments=json.loads(args_a))
    assert msg.content[2].arguments == {"query": 'needle "quoted"'}
    assert msg.stop_reason == "toolUse"
    tool_defs = server.requests[0].json["tools"]
    assert [t["name"] for t in tool_defs] == ["read", "search"]
    assert tool_defs[-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in tool_defs[0]
    assert tool_defs[0]["input_schema"]["type"] == "object"


def test_partial_arguments_parse_as_they_stream():
    """The pure mapper: after every read the live block holds the best parse so far."""
    from pi_notebook.ai.event_stream import AssistantMessageEventStream
    from pi_notebook.ai.providers.anthropic import AnthropicEventMapper

    output = AssistantMessage(stop_reason="pending")
    mapper = AnthropicEventMapper(make_model("http://x"), output, AssistantMessageEventStream())
    mapper.handle("content_block_start", {"index": 0, "content_block": {
        "type": "tool_use", "id": "t1", "name": "f", "input": {}}})
    seen = []
    for frag in ['{"a": "hel', 'lo", "b": [1,', ' 2]}']:
        mapper.handle("content_block_delta", {"index": 0, "delta": {"type": "input_json_delta",
                                                                     "partial_json": frag}})
        mapper.flush()  # one network read
        seen.append(dict(output.content[0].arguments))
    assert seen == [{"a": "hel"}, {"a": "hello", "b": [1]}, {"a": "hello", "b": [1, 2]}]


@pytest.mark.parametrize("raw, stop, error", [
    ("end_turn", "stop", None),
    ("max_tokens", "length", None),
    ("tool_use", "toolUse", None),
    ("pause_turn", "stop", None),
    ("stop_sequence", "stop", None),
    ("refusal", "error", "The model refused to complete the request"),
    ("sensitive", "error", "Provider stopped with: sensitive"),
    ("brand_new_reason", "error", "Unhandled stop reason: brand_new_reason"),
])
async def test_every_stop_reason(server, raw, stop, error):
    server.push(Reply(chunks=chunked(text_stream(["x"], stop=raw), 9)))
    events, msg = await collect(stream_anthropic_messages(make_model(server.url), ctx(), {"api_key": KEY}))
    assert msg.stop_reason == stop
    assert msg.error_message == error
    assert events[-1].type == ("error" if error else "done")
    assert msg.content[0].text == "x"
    assert msg.raw_stop_reason == raw


async def test_refusal_uses_stop_explanation(server):
    body = (message_start() + message_delta("refusal", {"output_tokens": 1},
                                            stop_details={"explanation": "Policy says no"})
            + MESSAGE_STOP)
    server.push(Reply(chunks=[body]))
    _, msg = await collect(stream_anthropic_messages(make_model(server.url), ctx(), {"api_key": KEY}))
    assert msg.stop_reason == "error" and msg.error_message == "Policy says no"


# --- item 120 ----------------------------------------------------------------------------

async def test_malformed_json_in_sse_data_is_repaired(server):
    # invalid escape \H and a raw tab inside JSON strings, as some proxies send them
    body = message_start()
    body += 'event: content_block_start\ndata: {"type":"content_block_start","index":0,' \
            '"content_block":{"type":"text","text":"Path \\Home\tok"}}\n\n'
    body += delta(0, {"type": "text_delta", "text": " more"})
    body += block_stop(0)
    body += block_start(1, {"type": "tool_use", "id": "t1", "name": "grep", "input": {}})
    body += 'event: content_block_delta\ndata: {"type":"content_block_delta","index":1,' \
            '"delta":{"type":"input_json_delta","partial_json":"{\\"p\\": \\"a\\\\Hb\\"}"}}\n\n'
    body += block_stop(1) + message_delta("tool_use", {"output_tokens": 3}) + MESSAGE_STOP
    server.push(Reply(chunks=chunked(body, 13)))
    _, msg = await collect(stream_anthropic_messages(make_model(server.url), ctx(), {"api_key": KEY}))
    assert msg.stop_reason == "toolUse", msg.error_message
    assert msg.content[0].text == "Path \\Home\tok more"
    assert msg.content[1].arguments == {"p": "a\\Hb"}


async def test_message_delta_without_usage_keeps_usage_and_events_after_stop_ignored(server):
    body = (message_start(input_tokens=42) + block_start(0, {"type": "text", "text": "ok"}) + block_stop(0)
            + message_delta("end_turn") + MESSAGE_STOP
            + ev("mystery", {"type": "mystery"})
            + ev("error", {"type": "error", "error": {"type": "overloaded_error", "message": "late"}}))
    server.push(Reply(chunks=[body]))
    _, msg = await collect(stream_anthropic_messages(make_model(server.url), ctx(), {"api_key": KEY}))
    assert msg.stop_reason == "stop"
    assert msg.usage.input == 42 and msg.usage.output == 1


async def test_error_event_in_stream(server):
    body = (message_start() + block_start(0, {"type": "text", "text": "par"})
            + ev("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))
    server.push(Reply(chunks=[body]))
    events, msg = await collect(stream_anthropic_messages(make_model(server.url), ctx(), {"api_key": KEY}))
    assert events[0].type == "start" and events[-1].type == "error"
    assert msg.stop_reason == "error"
    assert "overloaded_error" in msg.error_message and "Overloaded" in msg.error_message
    assert msg.content[0].text == "par"


# --- cost (item 121, 134) ----------------------------------------------------------------

async def test_one_hour_cache_writes_cost_twice_the_input_rate(server):
    model = make_model(server.url, cost=ModelCost(input=5, output=25, cache_read=0.5, cache_write=6.25))
    body = (message_start(input_tokens=0, cache_read=0, cache_write=1_000_000,
                          extra_usage={"cache_creation": {"ephemeral_1h_input_tokens": 400_000,
                                                          "ephemeral_5m_input_tokens": 600_000}})
            + message_delta("end_turn", {"output_tokens": 0}) + MESSAGE_STOP)
    server.push(Reply(chunks=[body]))
    _, msg = await collect(stream_anthropic_messages(model, ctx(), {"api_key": KEY}))
    assert msg.usage.cache_write_1h == 400_000
    assert msg.usage.cost.cache_write == pytest.approx(7.75)

    # without the breakdown everything is priced at the 5m rate
    server.push(Reply(chunks=[message_start(input_tokens=0, cache_read=0, cache_write=1_000_000)
                              + message_delta("end_turn", {"output_tokens": 0}) + MESSAGE_STOP]))
    _, msg = await collect(stream_anthropic_messages(model, ctx(), {"api_key": KEY}))
    assert msg.usage.cost.cache_write == pytest.approx(6.25)


# --- failures ----------------------------------------------------------------------------

@pytest.mark.parametrize("status, kind", [
    (400, "invalid_request_error"), (401, "authentication_error"), (403, "permission_error"),
    (404, "not_found_error"), (429, "rate_limit_error"), (500, "api_error"), (503, "overloaded_error"),
])
async def test_http_errors_give_a_clear_message_without_the_key(server, status, kind):
    server.push(Reply.json(status, {"type": "error", "error": {"type": kind, "message": f"boom {KEY}"}}))
    events, msg = await collect(stream_anthropic_messages(make_model(server.url), ctx(), {"api_key": KEY}))
    assert [e.type for e in events] == ["error"]  # no start: failed before the headers
    assert msg.stop_reason == "error"
    assert msg.error_message.startswith(str(status))
    assert kind in msg.error_message
    assert KEY not in msg.error_message
    assert len(server.requests) == 1  # retries are off by default


async def test_retry_on_429_when_enabled(server):
    server.push(Reply.json(429, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}},
                           headers={"retry-after-ms": "10"}),
                Reply(chunks=[text_stream(["ok"])]))
    _, msg = await collect(stream_anthropic_messages(make_model(server.url), ctx(),
                                                     {"api_key": KEY, "max_retries": 2}))
    assert msg.stop_reason == "stop" and msg.content[0].text == "ok"
    assert len(server.requests) == 2


async def test_connection_reset_mid_stream_keeps_partial(server):
    body = message_start() + block_start(0, {"type": "text", "text": ""})
    body += delta(0, {"type": "text_delta", "text": "partial answer"})
    server.push(Reply(chunks=[body, RESET]))
    events, msg = await collect(stream_anthropic_messages(make_model(server.url), ctx(), {"api_key": KEY}))
    assert events[0].type == "start" and events[-1].type == "error"
    assert msg.stop_reason == "error"
    assert msg.content[0].text == "partial answer"
    assert msg.usage.input == 10
    assert KEY not in msg.error_message


async def test_stream_ending_without_message_stop(server):
    body = message_start() + block_start(0, {"type": "text", "text": "a"}) + block_stop(0)
    server.push(Reply(chunks=[body]))
    _, msg = await collect(stream_anthropic_messages(make_model(server.url), ctx(), {"api_key": KEY}))
    assert msg.error_message == "Anthropic stream ended before message_stop"
    server.push(Reply(chunks=[":comment only\n\n"]))
    _, msg = await collect(stream_anthropic_messages(make_model(server.url), ctx(), {"api_key": KEY}))
    assert msg.error_message == "Anthropic stream ended without a stop reason"


async def test_non_json_data_and_malformed_lines(server):
    garbage = "this line has no colon\nevent\n: a comment\n\n"
    body = message_start() + garbage + block_start(0, {"type": "text", "text": "a"})
    body += "event: content_block_delta\ndata: {not json at all]]\n\n"
    server.push(Reply(chunks=[body]))
    events, msg = await collect(stream_anthropic_messages(make_model(server.url), ctx(), {"api_key": KEY}))
    assert msg.stop_reason == "error"
    assert "invalid JSON" in msg.error_message
    assert msg.content[0].text == "a"


async def test_abort_before_request_sends_nothing(server):
    controller = AbortController()
    controller.abort()
    events, msg = await collect(stream_anthropic_messages(
        make_model(server.url), ctx(), {"api_key": KEY, "signal": controller.signal}))
    assert [e.type for e in events] == ["error"]
    assert msg.stop_reason == "aborted" and msg.content == []
    assert msg.error_message == "Request was aborted"
    assert server.requests == []


async def test_abort_during_stream_keeps_partial_and_input_usage(server):
    body = message_start(input_tokens=100) + block_start(0, {"type": "text", "text": ""})
    body += delta(0, {"type": "text_delta", "text": "so far"})
    server.push(Reply(chunks=[body, HANG]))
    controller = AbortController()
    stream = stream_anthropic_messages(make_model(server.url), ctx(),
                                       {"api_key": KEY, "signal": controller.signal})
    events = []
    async for e in stream:
        events.append(e)
        if e.type == "text_delta":
            controller.abort()
    msg = await stream.result()
    assert events[-1].type == "error" and events[-1].reason == "aborted"
    assert msg.stop_reason == "aborted" and msg.content[0].text == "so far"
    assert msg.usage.input == 100 and msg.usage.output > 0  # item 134
    assert msg.usage.cost.total > 0


async def test_missing_key_names_the_variable(server, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_OAUTH_TOKEN", raising=False)
    events, msg = await collect(stream_anthropic_messages(make_model(server.url), ctx(), {}))
    assert [e.type for e in events] == ["error"]
    assert "ANTHROPIC_API_KEY" in msg.error_message
    assert server.requests == []
    _, msg = await collect(stream_simple_anthropic_messages(make_model(server.url), ctx(), {}))
    assert "ANTHROPIC_API_KEY" in msg.error_message


async def test_key_from_environment(server, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_OAUTH_TOKEN", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key-xyz")
    server.push(Reply(chunks=[text_stream(["ok"])]))
    _, msg = await collect(stream_anthropic_messages(make_model(server.url), ctx(), {}))
    assert msg.stop_reason == "stop"
    assert server.requests[0].headers["x-api-key"] == "env-key-xyz"


async def test_headers_betas_and_callbacks(server):
    server.push(Reply(chunks=[text_stream(["ok"])], headers={"x-request-id": "req_1"}))
    seen = {}

    def on_payload(params, model):
        seen["payload"] = params
        return {**params, "metadata": {"user_id": "replaced"}}

    async def on_response(info, model):
        seen["status"] = info["status"]
        seen["request_id"] = info["headers"].get("x-request-id")

    model = make_model(server.url, compat={"supportsEagerToolInputStreaming": False})
    _, msg = await collect(stream_anthropic_messages(model, ctx(tools=[Tool(name="t")]), {
        "api_key": KEY, "thinking_enabled": True, "thinking_budget_tokens": 2048, "max_tokens": 10_000,
        "headers": {"x-extra": "1"}, "on_payload": on_payload, "on_response": on_response}))
    assert msg.stop_reason == "stop"
    request = server.requests[0]
    assert request.headers["anthropic-beta"] == \
        "fine-grained-tool-streaming-2025-05-14,interleaved-thinking-2025-05-14"
    assert request.headers["x-extra"] == "1"
    assert request.json["metadata"] == {"user_id": "replaced"}
    assert request.json["thinking"] == {"type": "enabled", "budget_tokens": 2048, "display": "summarized"}
    assert "eager_input_streaming" not in request.json["tools"][0]
    assert seen["status"] == 200 and seen["request_id"] == "req_1"

    # an explicit anthropic-beta header wins; None suppresses it
    server.push(Reply(chunks=[text_stream(["ok"])]))
    await collect(stream_anthropic_messages(model, ctx(tools=[Tool(name="t")]), {
        "api_key": KEY, "headers": {"anthropic-beta": None}}))
    assert "anthropic-beta" not in server.requests[1].headers


# --- request building (pure) -------------------------------------------------------------

_assistant = functools.partial(assistant, api="anthropic-messages", provider="anthropic", model="claude-sonnet-4-5")


def test_convert_messages_tool_results_thinking_and_images():
    model = make_model("http://x")
    img = ImageContent(data="aGk=", mime_type="image/png")
    messages = [
        UserMessage(content=[TextContent(text="look"), TextContent(text="  "), img]),
        _assistant([ThinkingContent(thinking="hmm", thinking_signature="sig"),
                    ThinkingContent(thinking="[Reasoning redacted]", thinking_signature="opaque", redacted=True),
                    ThinkingContent(thinking="unsigned thought"),
                    ThinkingContent(thinking="   "),
                    TextContent(text=""),
                    TextContent(text="Sure"),
                    ToolCall(id="toolu_1", name="a", arguments={"k": 1}),
                    ToolCall(id="t2", name="b", arguments={})], stop="toolUse"),
        ToolResultMessage(tool_call_id="toolu_1", tool_name="a", content=[TextContent(text="one"),
                                                                            TextContent(text="two")]),
        ToolResultMessage(tool_call_id="t2", tool_name="b", content=[img], is_error=True),
        UserMessage(content=""),
        UserMessage(content="next"),
    ]
    out = convert_messages(messages, model)
    assert out[0] == {"role": "user", "content": [
        {"type": "text", "text": "look"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aGk="}}]}
    assert out[1]["content"] == [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "unsigned thought"},
        {"type": "text", "text": "Sure"},
        {"type": "tool_use", "id": "toolu_1", "name": "a", "input": {"k": 1}},
        {"type": "tool_use", "id": "t2", "name": "b", "input": {}},
    ]
    assert out[2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "one\ntwo", "is_error": False},
        {"type": "tool_result", "tool_use_id": "t2", "is_error": True, "content": [
            {"type": "text", "text": "(see attached image)"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aGk="}}]},
    ]}
    assert out[3] == {"role": "user", "content": [{"type": "text", "text": "next"}]}
    assert len(out) == 4  # the empty user message was skipped


def test_allow_empty_signature_compat_keeps_unsigned_thinking_as_thinking():
    model = make_model("http://x", compat={"allowEmptySignature": True})
    out = convert_messages([UserMessage(content="q"), _assistant([ThinkingContent(thinking="t")]),
                            UserMessage(content="r")], model)
    assert out[1]["content"] == [{"type": "thinking", "thinking": "t", "signature": ""}]


def test_orphaned_tool_call_and_empty_and_errored_messages():
    """Items 136/137: a call without a result gets a synthetic one; empty/error turns are dropped."""
    model = make_model("http://x")
    messages = [
        UserMessage(content="go"),
        _assistant([ToolCall(id="t1", name="a", arguments={})], stop="toolUse"),
        UserMessage(content="never mind"),
        _assistant([], stop="stop"),
        _assistant([TextContent(text="broken")], stop="error"),
        UserMessage(content=[]),
        UserMessage(content="   "),
        UserMessage(content="again"),
    ]
    out = convert_messages(messages, model)
    assert out[2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "No result provided", "is_error": True}]}
    assert [m["role"] for m in out] == ["user", "assistant", "user", "user", "user"]
    assert all(m["content"] for m in out)


def test_foreign_thinking_becomes_text_and_surrogates_are_removed():
    model = make_model("http://x")
    messages = [
        UserMessage(content="q\ud800 😀"),
        _assistant([ThinkingContent(thinking="their thoughts", thinking_signature="x"),
                    ToolCall(id="call_1|fc:2", name="a", arguments={})],
                   model="gpt-5", provider="openai", api="openai-responses", stop="toolUse"),
        ToolResultMessage(tool_call_id="call_1|fc:2", tool_name="a",
                          content=[TextContent(text="emoji 😀 lone \udc00")]),
        UserMessage(content="r"),
    ]
    out = convert_messages(messages, model)
    assert out[0]["content"][0]["text"] == "q 😀"
    assert out[1]["content"] == [{"type": "text", "text": "their thoughts"},
                                 {"type": "tool_use", "id": "call_1_fc_2", "name": "a", "input": {}}]
    assert out[2]["content"][0]["tool_use_id"] == "call_1_fc_2"
    assert out[2]["content"][0]["content"] == "emoji 😀 lone "
    dumped = json.dumps(out, ensure_ascii=False)
    dumped.encode("utf-8")  # no lone surrogates left


def test_build_params_thinking_modes_and_options():
    model = make_model("http://x")
    params = build_params(model, ctx(), {"thinking_enabled": False, "temperature": 0.2,
                                         "tool_choice": "any", "metadata": {"user_id": "u1"}})
    assert params["thinking"] == {"type": "disabled"}
    assert params["temperature"] == 0.2
    assert params["tool_choice"] == {"type": "any"}
    assert params["metadata"] == {"user_id": "u1"}

    params = build_params(model, ctx(), {"thinking_enabled": True, "thinking_budget_tokens": 8192,
                                         "max_tokens": 4000, "temperature": 0.2})
    assert params["thinking"]["budget_tokens"] == 4000 - 1024
    assert "temperature" not in params  # not allowed together with thinking

    adaptive = make_model("http://x", id="claude-opus-4-6", compat={"forceAdaptiveThinking": True})
    params = build_params(adaptive, ctx(), {"thinking_enabled": True, "effort": "medium"})
    assert params["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert params["output_config"] == {"effort": "medium"}

    params = build_params(model, ctx(), {"cache_retention": "long",
                                         "tool_choice": {"type": "tool", "name": "x"}})
    assert params["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert params["tool_choice"] == {"type": "tool", "name": "x"}
    params = build_params(model, ctx(), {"cache_retention": "none"})
    assert "cache_control" not in params["system"][0]
    assert "cache_control" not in params["messages"][-1]["content"][-1]

    no_map_off = make_model("http://x", thinking_level_map={"off": None})
    assert "thinking" not in build_params(no_map_off, ctx(), {"thinking_enabled": False})


async def test_stream_simple_maps_reasoning_levels(server):
    model = make_model(server.url, max_tokens=64_000)
    server.push(*[Reply(chunks=[text_stream(["ok"])]) for _ in range(4)])
    await collect(stream_simple_anthropic_messages(model, ctx(), {"api_key": KEY, "reasoning": "medium",
                                                                  "max_tokens": 4096}))
    body = server.requests[0].json
    assert body["thinking"]["type"] == "enabled" and body["thinking"]["budget_tokens"] == 8192
    assert body["max_tokens"] == 4096 + 8192
    assert "interleaved-thinking-2025-05-14" in server.requests[0].headers["anthropic-beta"]

    await collect(stream_simple_anthropic_messages(model, ctx(), {"api_key": KEY}))
    assert server.requests[1].json["thinking"] == {"type": "disabled"}

    adaptive = make_model(server.url, id="claude-opus-4-6", compat={"forceAdaptiveThinking": True})
    await collect(stream_simple_anthropic_messages(adaptive, ctx(), {"api_key": KEY, "reasoning": "minimal"}))
    assert server.requests[2].json["output_config"] == {"effort": "low"}
    assert server.requests[2].json["thinking"]["type"] == "adaptive"

    mapped = make_model(server.url, id="claude-opus-4-6", compat={"forceAdaptiveThinking": True},
                        thinking_level_map={"high": "max"})
    await collect(stream_simple_anthropic_messages(mapped, ctx(), {"api_key": KEY, "reasoning": "high"}))
    assert server.requests[3].json["output_config"] == {"effort": "max"}


def test_register_adds_the_api():
    from pi_notebook.ai.stream import get_api_provider
    anthropic.register()
    assert get_api_provider("anthropic-messages") is not None


async def test_dispatch_through_the_registry(server):
    from pi_notebook.ai.stream import complete
    anthropic.register()
    server.push(Reply(chunks=[text_stream(["via registry"])]))
    msg = await complete(make_model(server.url), ctx(), {"api_key": KEY})
    assert msg.content[0].text == "via registry"


async def test_second_turn_replays_thinking_signature_and_tool_call(server):
    """Item 132: the first answer goes back in the context of the next request, as the API wants it."""
    body = (message_start()
            + block_start(0, {"type": "thinking", "thinking": "", "signature": ""})
            + delta(0, {"type": "thinking_delta", "thinking": "Need the file."})
            + delta(0, {"type": "signature_delta", "signature": "SIG=="}) + block_stop(0)
            + block_start(1, {"type": "tool_use", "id": "toolu_9", "name": "read", "input": {}})
            + delta(1, {"type": "input_json_delta", "partial_json": '{"path": "a.txt"}'}) + block_stop(1)
            + message_delta("tool_use", {"output_tokens": 9}) + MESSAGE_STOP)
    server.push(Reply(chunks=chunked(body, 17)), Reply(chunks=[text_stream(["It says hi."])]))
    model = make_model(server.url)
    context = ctx(tools=[Tool(name="read")])
    _, first = await collect(stream_anthropic_messages(model, context, {"api_key": KEY}))
    assert first.stop_reason == "toolUse"
    context.messages += [first, ToolResultMessage(tool_call_id="toolu_9", tool_name="read",
                                                  content=[TextContent(text="hi")])]
    _, second = await collect(stream_anthropic_messages(model, context, {"api_key": KEY}))
    assert second.stop_reason == "stop"
    sent = server.requests[1].json["messages"]
    assert sent[1] == {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Need the file.", "signature": "SIG=="},
        {"type": "tool_use", "id": "toolu_9", "name": "read", "input": {"path": "a.txt"}}]}
    assert sent[2]["content"][0]["tool_use_id"] == "toolu_9"
    assert sent[2]["content"][-1]["cache_control"] == {"type": "ephemeral"}


async def test_abort_during_retry_wait(server, monkeypatch):
    server.push(Reply.json(529, {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}},
                           headers={"retry-after": "30"}))
    controller = AbortController()
    delays = abort_in_retry_wait(monkeypatch, controller)  # aborts once the 30 s wait has begun
    stream = stream_anthropic_messages(make_model(server.url), ctx(),
                                       {"api_key": KEY, "signal": controller.signal, "max_retries": 3})
    events, msg = await asyncio.wait_for(collect(stream), 20)
    assert delays == [30_000]
    assert [e.type for e in events] == ["error"]
    assert msg.stop_reason == "aborted" and msg.error_message == "Request was aborted"
    assert len(server.requests) == 1


def test_pydantic_tool_parameters_become_json_schema():
    from types import SimpleNamespace

    from pydantic import BaseModel

    class Inner(BaseModel):
        x: int

    class Args(BaseModel):
        path: str
        inner: Inner

    tool = SimpleNamespace(name="edit", description="Edit a file", parameters=Args, constrained_sampling=None)
    schema = build_params(make_model("http://x"), ctx(tools=[tool]), {})["tools"][0]["input_schema"]
    assert schema["type"] == "object" and set(schema["required"]) == {"path", "inner"}
    assert schema["properties"]["path"]["type"] == "string"
    assert "Inner" in schema["$defs"]


async def test_oauth_tokens_are_refused_clearly_or_skipped_for_an_api_key(server, monkeypatch):
    oauth = "sk-ant-oat01-SECRET-TOKEN-value"
    events, msg = await collect(stream_anthropic_messages(make_model(server.url), ctx(), {"api_key": oauth}))
    assert [e.type for e in events] == ["error"]
    assert "not supported" in msg.error_message and "ANTHROPIC_API_KEY" in msg.error_message
    assert oauth not in msg.error_message and server.requests == []

    monkeypatch.setenv("ANTHROPIC_OAUTH_TOKEN", oauth)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "plain-api-key")
    server.push(Reply(chunks=[text_stream(["ok"])]))
    _, msg = await collect(stream_anthropic_messages(make_model(server.url), ctx(), {}))
    assert msg.stop_reason == "stop"
    assert server.requests[0].headers["x-api-key"] == "plain-api-key"


def test_stream_without_a_running_loop_ends_with_an_error_event():
    stream = stream_anthropic_messages(make_model("http://127.0.0.1:9"), ctx(), {"api_key": KEY})
    events, msg = asyncio.run(collect(stream))
    assert [e.type for e in events] == ["error"]
    assert "running asyncio event loop" in msg.error_message
