"""openai-responses against a real local HTTP server (tests/helpers/sse_server.py)."""

from __future__ import annotations

import functools
import json

import pytest
from helpers.messages import assistant
from helpers.retry_wait import abort_in_retry_wait
from helpers.sse_server import HANG, RESET, Reply, ScriptedServer, chunked, sse_event

from pi_notebook.ai.abort import AbortController
from pi_notebook.ai.providers import openai_responses
from pi_notebook.ai.providers.openai_responses import (
    ENDED_EARLY, build_params, convert_input, normalize_tool_call_id, stream_openai_responses,
    stream_simple_openai_responses,
)
from pi_notebook.ai.types import (
    Context, ImageContent, Model, ModelCost, TextContent, ThinkingContent, Tool,
    ToolCall, ToolResultMessage, UserMessage,
)

KEY = "sk-proj-test-SECRET-abcdef0123"


def make_model(base_url: str, **kw) -> Model:
    fields = dict(id="gpt-5", name="GPT-5", api="openai-responses", provider="openai",
                  base_url=base_url + "/v1", reasoning=True, input=["text", "image"],
                  cost=ModelCost(input=1.25, output=10, cache_read=0.125, cache_write=0),
                  context_window=400_000, max_tokens=128_000)
    fields.update(kw)
    return Model(**fields)


def ctx(text="Hi", **kw) -> Context:
    return Context(system_prompt=kw.pop("system_prompt", "Be brief."),
                   messages=[UserMessage(content=text)], **kw)


def ev(data: dict) -> str:
    return sse_event(data, event=data["type"])


USAGE = {"input_tokens": 120, "input_tokens_details": {"cached_tokens": 20}, "output_tokens": 30,
         "output_tokens_details": {"reasoning_tokens": 12}, "total_tokens": 150}


def terminal(status="completed", incomplete_reason=None, usage=USAGE, kind=None, **extra) -> str:
    response = {"id": "resp_1", "status": status, "usage": usage, **extra}
    if incomplete_reason:
        response["incomplete_details"] = {"reason": incomplete_reason}
    kind = kind or {"completed": "response.completed", "incomplete": "response.incomplete",
                    "failed": "response.failed"}.get(status, "response.completed")
    return ev({"type": kind, "response": response})


CREATED = ev({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}})


def message_item(parts: list[str], out=0, item_id="msg_1", phase=None) -> str:
    added = {"type": "message", "id": item_id, "role": "assistant", "content": [], "status": "in_progress"}
    if phase:
        added["phase"] = phase
    body = ev({"type": "response.output_item.added", "output_index": out, "item": added})
    for p in parts:
        body += ev({"type": "response.output_text.delta", "output_index": out, "content_index": 0,
                    "item_id": item_id, "delta": p})
    done = dict(added, status="completed",
                content=[{"type": "output_text", "text": "".join(parts), "annotations": []}])
    body += ev({"type": "response.output_item.done", "output_index": out, "item": done})
    return body


def text_stream(parts, **kw) -> str:
    return CREATED + message_item(parts) + terminal(**kw)


async def collect(stream):
    events = [e async for e in stream]
    return events, await stream.result()


@pytest.fixture
def server():
    with ScriptedServer() as s:
        yield s


async def test_text_stream_usage_and_request(server):
    server.push(Reply(chunks=chunked(text_stream(["Hel", "lo ", "wörld ✓"]), 7)))
    events, msg = await collect(stream_openai_responses(make_model(server.url), ctx(),
                                                        {"api_key": KEY, "session_id": "s1"}))
    assert [e.type for e in events] == ["start", "text_start", "text_delta", "text_delta", "text_delta",
                                        "text_end", "done"]
    assert all(e.partial is events[0].partial for e in events[:-1])
    assert msg.content[0].text == "Hello wörld ✓"
    assert json.loads(msg.content[0].text_signature) == {"v": 1, "id": "msg_1"}
    assert msg.stop_reason == "stop" and msg.raw_stop_reason == "completed"
    assert msg.response_id == "resp_1"
    u = msg.usage
    assert (u.input, u.output, u.cache_read, u.cache_write, u.reasoning) == (100, 30, 20, 0, 12)
    assert u.total_tokens == 150
    assert u.cost.input == pytest.approx(100 * 1.25 / 1e6)
    assert u.cost.total == pytest.approx(u.cost.input + u.cost.output + u.cost.cache_read)

    request = server.requests[0]
    assert request.path == "/v1/responses"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    body = request.json
    assert body["model"] == "gpt-5" and body["stream"] is True and body["store"] is False
    assert body["input"][0] == {"role": "developer", "content": "Be brief."}
    assert body["input"][1] == {"role": "user", "content": [{"type": "input_text", "text": "Hi"}]}
    assert body["prompt_cache_key"] == "s1"
    assert body["reasoning"] == {"effort": "none"}  # reasoning model, thinking off


async def test_reasoning_items_and_summary_parts(server):
    item = {"type": "reasoning", "id": "rs_1", "summary": []}
    done_item = {"type": "reasoning", "id": "rs_1", "encrypted_content": "ENC",
                 "summary": [{"type": "summary_text", "text": "Plan A"},
                             {"type": "summary_text", "text": "Plan B"}]}
    body = CREATED + ev({"type": "response.output_item.added", "output_index": 0, "item": item})
    body += ev({"type": "response.reasoning_summary_text.delta", "output_index": 0, "delta": "Plan "})
    body += ev({"type": "response.reasoning_summary_text.delta", "output_index": 0, "delta": "A"})
    body += ev({"type": "response.reasoning_summary_part.done", "output_index": 0})
    body += ev({"type": "response.reasoning_summary_text.delta", "output_index": 0, "delta": "Plan B"})
    body += ev({"type": "response.output_item.done", "output_index": 0, "item": done_item})
    body += message_item(["Done"], out=1, phase="final_answer") + terminal()
    server.push(Reply(chunks=chunked(body, 13)))
    events, msg = await collect(stream_openai_responses(make_model(server.url), ctx(),
                                                        {"api_key": KEY, "reasoning_effort": "high"}))
    types = [e.type for e in events]
    assert types[:6] == ["start", "thinking_start", "thinking_delta", "thinking_delta", "thinking_delta",
                         "thinking_delta"]
    assert [e.delta for e in events if e.type == "thinking_delta"] == ["Plan ", "A", "\n\n", "Plan B"]
    thinking, text = msg.content
    assert thinking.thinking == "Plan A\n\nPlan B"
    assert json.loads(thinking.thinking_signature) == done_item
    assert json.loads(text.text_signature) == {"v": 1, "id": "msg_1", "phase": "final_answer"}
    body = server.requests[0].json
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}
    assert body["include"] == ["reasoning.encrypted_content"]


async def test_encrypted_reasoning_is_back_filled_from_the_final_response(server):
    item = {"type": "reasoning", "id": "rs_9", "summary": []}
    body = CREATED + ev({"type": "response.output_item.added", "output_index": 0, "item": item})
    body += ev({"type": "response.output_item.done", "output_index": 0, "item": item})
    body += terminal(output=[{"type": "reasoning", "id": "rs_9", "summary": [], "encrypted_content": "LATE"}])
    server.push(Reply(chunks=[body]))
    _, msg = await collect(stream_openai_responses(make_model(server.url), ctx(), {"api_key": KEY}))
    assert json.loads(msg.content[0].thinking_signature)["encrypted_content"] == "LATE"


async def test_parallel_function_calls_with_split_arguments(server):
    args = [json.dumps({"path": f"/f{i}.py", "pattern": "déf \"x\"", "n": [i, i + 1]}) for i in range(3)]
    body = CREATED
    for i in range(3):
        body += ev({"type": "response.output_item.added", "output_index": i, "item": {
            "type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}", "name": "grep", "arguments": ""}})
    frags = [[a[j:j + 4] for j in range(0, len(a), 4)] for a in args]
    for j in range(max(len(f) for f in frags)):
        for i in range(3):
            if j < len(frags[i]):
                body += ev({"type": "response.function_call_arguments.delta", "output_index": i,
                            "item_id": f"fc_{i}", "delta": frags[i][j]})
    for i in range(3):
        body += ev({"type": "response.function_call_arguments.done", "output_index": i, "arguments": args[i]})
        body += ev({"type": "response.output_item.done", "output_index": i, "item": {
            "type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}", "name": "grep",
            "arguments": args[i], "status": "completed"}})
    body += terminal()
    server.push(Reply(chunks=chunked(body, 6)))
    events, msg = await collect(stream_openai_responses(make_model(server.url),
                                                        ctx(tools=[Tool(name="grep", description="g")]),
                                                        {"api_key": KEY}))
    for e in events:
        if e.type == "toolcall_delta":
            assert isinstance(e.partial.content[e.content_index].arguments, dict)
    for i in range(3):
        joined = "".join(e.delta for e in events if e.type == "toolcall_delta" and e.content_index == i)
        assert joined == args[i]
        assert msg.content[i].id == f"call_{i}|fc_{i}"
        assert msg.content[i].arguments == json.loads(args[i])
    assert msg.stop_reason == "toolUse"
    tools = server.requests[0].json["tools"]
    assert tools == [{"type": "function", "name": "grep", "description": "g",
                      "parameters": {"type": "object", "properties": {}}, "strict": False}]


async def test_arguments_done_emits_missing_suffix(server):
    body = CREATED + ev({"type": "response.output_item.added", "output_index": 0, "item": {
        "type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f", "arguments": ""}})
    body += ev({"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '{"a": '})
    body += ev({"type": "response.function_call_arguments.done", "output_index": 0, "arguments": '{"a": 5}'})
    body += ev({"type": "response.output_item.done", "output_index": 0, "item": {
        "type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f", "arguments": '{"a": 5}'}})
    body += terminal()
    server.push(Reply(chunks=[body]))
    events, msg = await collect(stream_openai_responses(make_model(server.url), ctx(), {"api_key": KEY}))
    assert [e.delta for e in events if e.type == "toolcall_delta"] == ['{"a": ', "5}"]
    assert msg.content[0].arguments == {"a": 5}


@pytest.mark.parametrize("status, reason, stop, raw, error", [
    ("completed", None, "stop", "completed", None),
    ("incomplete", "max_output_tokens", "length", "incomplete.max_output_tokens", None),
    ("incomplete", "content_filter", "error", "incomplete.content_filter", "Response incomplete: content_filter"),
    ("incomplete", "brand_new", "error", "incomplete.brand_new", "Response incomplete: brand_new"),
    ("incomplete", None, "error", "incomplete", "Response incomplete without a provider reason"),
    ("in_progress", None, "stop", "in_progress", None),
    ("cancelled", None, "error", "cancelled", "Unknown error (no error details in response)"),
])
async def test_terminal_statuses(server, status, reason, stop, raw, error):
    server.push(Reply(chunks=chunked(text_stream(["x"], status=status, incomplete_reason=reason,
                                                 kind="response.incomplete" if status == "incomplete"
                                                 else "response.completed"), 9)))
    events, msg = await collect(stream_openai_responses(make_model(server.url), ctx(), {"api_key": KEY}))
    assert msg.stop_reason == stop
    assert msg.raw_stop_reason == raw
    assert msg.error_message == error
    assert events[-1].type == ("error" if error else "done")
    assert msg.content[0].text == "x"


async def test_commentary_phase_keeps_pending_until_terminal(server):
    stops = []
    server.push(Reply(chunks=[CREATED + message_item(["note"], phase="commentary"), HANG]))
    controller = AbortController()
    stream = stream_openai_responses(make_model(server.url), ctx(), {"api_key": KEY, "signal": controller.signal})
    async for e in stream:
        if e.type == "text_end":
            stops.append(e.partial.stop_reason)
            controller.abort()
    assert stops == ["pending"]
    server.push(Reply(chunks=[CREATED + message_item(["final"], phase="final_answer"), HANG]))
    controller = AbortController()
    stream = stream_openai_responses(make_model(server.url), ctx(), {"api_key": KEY, "signal": controller.signal})
    async for e in stream:
        if e.type == "text_end":
            stops.append(e.partial.stop_reason)
            controller.abort()
    assert stops == ["pending", "stop"]


async def test_failed_response_and_error_event(server):
    failed = CREATED + message_item(["part"]) + terminal(
        status="failed", error={"code": "server_error", "message": "The server had an error"})
    server.push(Reply(chunks=[failed]))
    events, msg = await collect(stream_openai_responses(make_model(server.url), ctx(), {"api_key": KEY}))
    assert events[-1].type == "error"
    assert msg.error_message == "server_error: The server had an error"
    assert msg.raw_stop_reason == "failed"
    assert msg.content[0].text == "part"

    server.push(Reply(chunks=[CREATED + terminal(status="failed", kind="response.failed", usage=None)]))
    _, msg = await collect(stream_openai_responses(make_model(server.url), ctx(), {"api_key": KEY}))
    assert msg.error_message == "Unknown error (no error details in response)"

    server.push(Reply(chunks=[CREATED + ev({"type": "error", "code": "rate_limit_exceeded",
                                            "message": "Slow down", "param": None})]))
    _, msg = await collect(stream_openai_responses(make_model(server.url), ctx(), {"api_key": KEY}))
    assert msg.error_message == "Error Code rate_limit_exceeded: Slow down"


async def test_stream_ending_before_terminal_event(server):
    server.push(Reply(chunks=[CREATED + message_item(["cut"])]))
    events, msg = await collect(stream_openai_responses(make_model(server.url), ctx(), {"api_key": KEY}))
    assert events[-1].type == "error"
    assert msg.error_message == ENDED_EARLY == "OpenAI Responses stream ended before a terminal response event"
    assert msg.content[0].text == "cut"


async def test_service_tier_multiplies_cost(server):
    server.push(Reply(chunks=[text_stream(["x"], service_tier="flex")]),
                Reply(chunks=[text_stream(["x"], service_tier="priority")]))
    _, flex = await collect(stream_openai_responses(make_model(server.url), ctx(), {"api_key": KEY}))
    _, prio = await collect(stream_openai_responses(make_model(server.url), ctx(),
                                                    {"api_key": KEY, "service_tier": "priority"}))
    base = (100 * 1.25 + 30 * 10 + 20 * 0.125) / 1e6
    assert flex.usage.cost.total == pytest.approx(base * 0.5)
    assert prio.usage.cost.total == pytest.approx(base * 2)
    assert server.requests[1].json["service_tier"] == "priority"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 429, 500, 503])
async def test_http_errors(server, status):
    server.push(Reply.json(status, {"error": {"message": f"Incorrect API key provided: {KEY}",
                                              "type": "invalid_request_error", "code": "invalid_api_key"}}))
    events, msg = await collect(stream_openai_responses(make_model(server.url), ctx(), {"api_key": KEY}))
    assert [e.type for e in events] == ["error"]
    assert msg.stop_reason == "error"
    assert str(status) in msg.error_message
    assert "Incorrect API key provided" in msg.error_message
    assert KEY not in msg.error_message
    assert len(server.requests) == 1


async def test_retry_after_500_when_enabled(server):
    server.push(Reply.json(500, {"error": {"message": "oops"}}, headers={"retry-after-ms": "5"}),
                Reply(chunks=[text_stream(["ok"])]))
    _, msg = await collect(stream_openai_responses(make_model(server.url), ctx(),
                                                   {"api_key": KEY, "max_retries": 1}))
    assert msg.stop_reason == "stop" and len(server.requests) == 2


async def test_connection_reset_keeps_partial(server):
    body = CREATED + ev({"type": "response.output_item.added", "output_index": 0,
                         "item": {"type": "message", "id": "m", "role": "assistant", "content": []}})
    body += ev({"type": "response.output_text.delta", "output_index": 0, "delta": "half"})
    server.push(Reply(chunks=[body, RESET]))
    events, msg = await collect(stream_openai_responses(make_model(server.url), ctx(), {"api_key": KEY}))
    assert events[0].type == "start" and events[-1].type == "error"
    assert msg.stop_reason == "error" and msg.content[0].text == "half"


async def test_non_json_data(server):
    server.push(Reply(chunks=[CREATED + "garbage line\n\ndata: {oops\n\n"]))
    _, msg = await collect(stream_openai_responses(make_model(server.url), ctx(), {"api_key": KEY}))
    assert msg.stop_reason == "error" and "invalid JSON" in msg.error_message


async def test_abort_before_and_during(server):
    controller = AbortController()
    controller.abort()
    events, msg = await collect(stream_openai_responses(make_model(server.url), ctx(),
                                                        {"api_key": KEY, "signal": controller.signal}))
    assert [e.type for e in events] == ["error"] and msg.stop_reason == "aborted" and msg.content == []
    assert server.requests == []

    body = CREATED + ev({"type": "response.output_item.added", "output_index": 0,
                         "item": {"type": "message", "id": "m", "role": "assistant", "content": []}})
    body += ev({"type": "response.output_text.delta", "output_index": 0, "delta": "keep me"})
    server.push(Reply(chunks=[body, HANG]))
    controller = AbortController()
    stream = stream_openai_responses(make_model(server.url), ctx(), {"api_key": KEY, "signal": controller.signal})
    async for e in stream:
        if e.type == "text_delta":
            controller.abort()
    msg = await stream.result()
    assert msg.stop_reason == "aborted" and msg.error_message == "Request was aborted"
    assert msg.content[0].text == "keep me"
    assert msg.usage.input == 0  # usage only arrives with the terminal event (item 134)


async def test_missing_key(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    events, msg = await collect(stream_openai_responses(make_model(server.url), ctx(), {}))
    assert [e.type for e in events] == ["error"] and "OPENAI_API_KEY" in msg.error_message
    _, msg = await collect(stream_simple_openai_responses(make_model(server.url), ctx(), {}))
    assert "OPENAI_API_KEY" in msg.error_message
    assert server.requests == []


async def test_stream_simple_reasoning_levels(server):
    model = make_model(server.url, thinking_level_map={"off": "none", "minimal": None, "low": "low",
                                                       "medium": "medium", "high": "high", "xhigh": "xhigh"})
    server.push(*[Reply(chunks=[text_stream(["ok"])]) for _ in range(3)])
    await collect(stream_simple_openai_responses(model, ctx(), {"api_key": KEY, "reasoning": "minimal"}))
    assert server.requests[0].json["reasoning"] == {"effort": "low", "summary": "auto"}  # clamped up
    await collect(stream_simple_openai_responses(model, ctx(), {"api_key": KEY, "reasoning": "xhigh"}))
    assert server.requests[1].json["reasoning"]["effort"] == "xhigh"
    plain = make_model(server.url, id="gpt-4o-mini", reasoning=False)
    await collect(stream_simple_openai_responses(plain, ctx(), {"api_key": KEY, "reasoning": "high"}))
    body = server.requests[2].json
    assert "reasoning" not in body and "include" not in body
    assert body["input"][0]["role"] == "system"
    assert body["max_output_tokens"] >= 16


# --- input conversion (pure) -------------------------------------------------------------

_assistant = functools.partial(assistant, api="openai-responses", provider="openai", model="gpt-5")


def test_convert_input_replays_reasoning_text_and_calls():
    model = make_model("http://x")
    reasoning_item = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "E"}
    img = ImageContent(data="aGk=", mime_type="image/png")
    messages = [
        UserMessage(content=[TextContent(text="see"), img]),
        _assistant([ThinkingContent(thinking="t", thinking_signature=json.dumps(reasoning_item)),
                    TextContent(text="a", text_signature=json.dumps({"v": 1, "id": "msg_a", "phase": "commentary"})),
                    TextContent(text="b", text_signature="msg_legacy"),
                    TextContent(text="c"),
                    ToolCall(id="call_1|fc_1", name="f", arguments={"x": 1}),
                    ToolCall(id="call_2|other", name="f", arguments={})], stop="toolUse"),
        ToolResultMessage(tool_call_id="call_1|fc_1", tool_name="f", content=[TextContent(text="r1")]),
        ToolResultMessage(tool_call_id="call_2|other", tool_name="f", content=[]),
    ]
    items = convert_input(model, Context(messages=messages))
    assert items[0] == {"role": "user", "content": [
        {"type": "input_text", "text": "see"},
        {"type": "input_image", "detail": "auto", "image_url": "data:image/png;base64,aGk="}]}
    assert items[1] == reasoning_item
    assert items[2]["id"] == "msg_a" and items[2]["phase"] == "commentary"
    assert items[2]["content"] == [{"type": "output_text", "text": "a", "annotations": []}]
    assert items[3]["id"] == "msg_legacy" and "phase" not in items[3]
    assert items[4]["id"] == "msg_pi_1_2"
    assert items[5] == {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f",
                        "arguments": '{"x": 1}'}
    assert "id" not in items[6]  # not an fc_ item id
    assert items[7] == {"type": "function_call_output", "call_id": "call_1", "output": "r1"}
    assert items[8] == {"type": "function_call_output", "call_id": "call_2", "output": "(no tool output)"}


def test_foreign_tool_call_ids_are_normalised():
    model = make_model("http://x")
    foreign = _assistant([ToolCall(id="toolu_01/ä|weird item", name="f", arguments={})],
                         model="claude", provider="anthropic", api="anthropic-messages", stop="toolUse")
    messages = [UserMessage(content="q"), foreign,
                ToolResultMessage(tool_call_id="toolu_01/ä|weird item", tool_name="f",
                                  content=[TextContent(text="ok")])]
    items = convert_input(model, Context(messages=messages))
    call, output = items[1], items[2]
    assert call["call_id"] == "toolu_01"  # sanitised, trailing underscores removed
    assert call["id"].startswith("fc_")
    assert output["call_id"] == call["call_id"]

    assert normalize_tool_call_id("call_1|fc_abc", model, foreign).startswith("call_1|fc_")
    same = _assistant([], model="gpt-4.1")
    assert normalize_tool_call_id("call_1|msg_x", model, same) == "call_1|fc_msg_x"
    other = make_model("http://x", provider="openrouter")
    assert normalize_tool_call_id("call 1|it:em", other, foreign) == "call_1|it_em"


def test_other_model_same_provider_drops_item_id():
    model = make_model("http://x")
    older = _assistant([ToolCall(id="call_1|fc_1", name="f", arguments={})], model="gpt-4.1", stop="toolUse")
    items = convert_input(model, Context(messages=[UserMessage(content="q"), older,
                                                   ToolResultMessage(tool_call_id="call_1|fc_1", tool_name="f",
                                                                     content=[TextContent(text="x")])]))
    assert "id" not in items[1]


def test_tool_result_images_and_params():
    model = make_model("http://x")
    img = ImageContent(data="aGk=", mime_type="image/png")
    messages = [UserMessage(content="q"),
                _assistant([ToolCall(id="c|fc_1", name="f", arguments={})], stop="toolUse"),
                ToolResultMessage(tool_call_id="c|fc_1", tool_name="f", content=[img])]
    items = convert_input(model, Context(messages=messages))
    assert items[-1]["output"] == [{"type": "input_image", "detail": "auto",
                                    "image_url": "data:image/png;base64,aGk="}]
    text_only = make_model("http://x", input=["text"])
    items = convert_input(text_only, Context(messages=messages))
    assert items[-1]["output"] == "(tool image omitted: model does not support images)"

    params = build_params(model, ctx(), {"max_tokens": 5, "temperature": 0.3, "cache_retention": "long",
                                         "session_id": "abc", "sampling_params": {"temperature": 0.9, "top_p": 0.5}})
    assert params["max_output_tokens"] == 16
    assert params["temperature"] == 0.9 and params["top_p"] == 0.5
    assert params["prompt_cache_retention"] == "24h"
    params = build_params(model, ctx(), {"cache_retention": "none", "session_id": "abc"})
    assert "prompt_cache_key" not in params


def test_register():
    from pi_notebook.ai.stream import get_api_provider
    openai_responses.register()
    assert get_api_provider("openai-responses") is not None


async def test_second_turn_replays_reasoning_text_and_call(server):
    """Item 132: the streamed answer is sent back exactly as the Responses API needs it."""
    reasoning = {"type": "reasoning", "id": "rs_7", "summary": [{"type": "summary_text", "text": "Plan"}],
                 "encrypted_content": "ENC"}
    body = CREATED + ev({"type": "response.output_item.added", "output_index": 0,
                         "item": {"type": "reasoning", "id": "rs_7", "summary": []}})
    body += ev({"type": "response.output_item.done", "output_index": 0, "item": reasoning})
    body += message_item(["Checking."], out=1, item_id="msg_7", phase="commentary")
    body += ev({"type": "response.output_item.added", "output_index": 2, "item": {
        "type": "function_call", "id": "fc_7", "call_id": "call_7", "name": "read", "arguments": ""}})
    body += ev({"type": "response.function_call_arguments.delta", "output_index": 2, "delta": '{"p": 1}'})
    body += ev({"type": "response.output_item.done", "output_index": 2, "item": {
        "type": "function_call", "id": "fc_7", "call_id": "call_7", "name": "read", "arguments": '{"p": 1}'}})
    body += terminal()
    server.push(Reply(chunks=chunked(body, 19)), Reply(chunks=[text_stream(["Done."])]))
    model = make_model(server.url)
    context = ctx(tools=[Tool(name="read")])
    _, first = await collect(stream_openai_responses(model, context, {"api_key": KEY}))
    assert first.stop_reason == "toolUse"
    context.messages += [first, ToolResultMessage(tool_call_id=first.content[2].id, tool_name="read",
                                                  content=[TextContent(text="data")])]
    _, second = await collect(stream_openai_responses(model, context, {"api_key": KEY}))
    assert second.stop_reason == "stop"
    sent = server.requests[1].json["input"]
    assert sent[2] == reasoning
    assert sent[3]["id"] == "msg_7" and sent[3]["phase"] == "commentary"
    assert sent[4] == {"type": "function_call", "id": "fc_7", "call_id": "call_7", "name": "read",
                       "arguments": '{"p": 1}'}
    assert sent[5] == {"type": "function_call_output", "call_id": "call_7", "output": "data"}


async def test_abort_during_retry_wait(server, monkeypatch):
    import asyncio
    server.push(Reply.json(429, {"error": {"message": "slow down"}}, headers={"retry-after": "30"}))
    controller = AbortController()
    delays = abort_in_retry_wait(monkeypatch, controller)  # aborts once the 30 s wait has begun
    stream = stream_openai_responses(make_model(server.url), ctx(),
                                     {"api_key": KEY, "signal": controller.signal, "max_retries": 3})
    events, msg = await asyncio.wait_for(collect(stream), 20)
    assert delays == [30_000]
    assert [e.type for e in events] == ["error"] and msg.stop_reason == "aborted"
    assert len(server.requests) == 1


def test_pydantic_tool_parameters_become_json_schema():
    from types import SimpleNamespace

    from pydantic import BaseModel

    class Args(BaseModel):
        query: str

    tool = SimpleNamespace(name="search", description="", parameters=Args, constrained_sampling=None)
    sent = build_params(make_model("http://x"), ctx(tools=[tool]), {})["tools"][0]
    assert sent["parameters"]["properties"]["query"]["type"] == "string"
    assert sent["parameters"]["required"] == ["query"]
