"""google-generative-ai against a real local HTTP server (tests/helpers/sse_server.py)."""

from __future__ import annotations

import functools
import json

import pytest
from helpers.messages import assistant
from helpers.retry_wait import abort_in_retry_wait
from helpers.sse_server import HANG, RESET, Reply, ScriptedServer, chunked, sse_body

from pi_notebook.ai.abort import AbortController
from pi_notebook.ai.providers import google
from pi_notebook.ai.providers.google import (
    build_params, convert_contents, is_valid_signature, stream_google_generative_ai,
    stream_simple_google_generative_ai, thinking_config_for_level,
)
from pi_notebook.ai.types import (
    Context, ImageContent, Model, ModelCost, TextContent, ThinkingContent, Tool,
    ToolCall, ToolResultMessage, UserMessage,
)

KEY = "AIzaTEST-SECRET-0123456789abcdef"
SIG = "c2lnbmF0dXJlMQ=="  # valid base64
SIG2 = "c2lnbmF0dXJlMg=="


def make_model(base_url: str, **kw) -> Model:
    fields = dict(id="gemini-2.5-flash", name="Gemini 2.5 Flash", api="google-generative-ai",
                  provider="google", base_url=base_url + "/v1beta", reasoning=True,
                  input=["text", "image"], cost=ModelCost(input=0.3, output=2.5, cache_read=0.075),
                  context_window=1_048_576, max_tokens=65_536)
    fields.update(kw)
    return Model(**fields)


def ctx(text="Hi", **kw) -> Context:
    return Context(system_prompt=kw.pop("system_prompt", "Be brief."),
                   messages=[UserMessage(content=text)], **kw)


def chunk(parts=None, finish=None, usage=None, response_id="resp-1") -> dict:
    candidate: dict = {"content": {"role": "model", "parts": parts or []}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    data: dict = {"candidates": [candidate], "responseId": response_id, "modelVersion": "gemini-2.5-flash"}
    if usage:
        data["usageMetadata"] = usage
    return data


USAGE = {"promptTokenCount": 100, "cachedContentTokenCount": 40, "candidatesTokenCount": 20,
         "thoughtsTokenCount": 10, "totalTokenCount": 130}


def body(chunks: list[dict]) -> bytes:
    return sse_body(chunks, done=False)


async def collect(stream):
    events = [e async for e in stream]
    return events, await stream.result()


@pytest.fixture
def server():
    with ScriptedServer() as s:
        yield s


async def test_text_stream_usage_and_request(server):
    chunks = [chunk([{"text": "Hel"}]), chunk([{"text": "lo wörld ✓"}]),
              chunk([{"text": ""}], finish="STOP", usage=USAGE)]
    server.push(Reply(chunks=chunked(body(chunks), 7)))
    events, msg = await collect(stream_google_generative_ai(make_model(server.url), ctx(), {"api_key": KEY}))
    assert [e.type for e in events] == ["start", "text_start", "text_delta", "text_delta", "text_end", "done"]
    assert all(e.partial is events[0].partial for e in events[:-1])
    assert msg.content == [TextContent(text="Hello wörld ✓")]
    assert msg.stop_reason == "stop" and msg.raw_stop_reason == "STOP"
    assert msg.response_id == "resp-1"
    u = msg.usage
    assert (u.input, u.output, u.cache_read, u.cache_write, u.reasoning) == (60, 30, 40, 0, 10)
    assert u.total_tokens == 130 == u.input + u.output + u.cache_read + u.cache_write
    assert u.cost.total == pytest.approx((60 * 0.3 + 30 * 2.5 + 40 * 0.075) / 1e6)

    request = server.requests[0]
    assert request.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert request.headers["x-goog-api-key"] == KEY
    assert KEY not in request.path
    body_json = request.json
    assert body_json["contents"] == [{"role": "user", "parts": [{"text": "Hi"}]}]
    assert body_json["systemInstruction"] == {"parts": [{"text": "Be brief."}]}


async def test_thought_flag_alone_decides_thinking_and_blocks_switch(server):
    chunks = [
        chunk([{"text": "Think", "thought": True}]),
        chunk([{"text": "ing", "thought": True, "thoughtSignature": SIG}]),
        chunk([{"text": " more", "thought": True}]),                  # keeps SIG
        chunk([{"text": "Answer", "thoughtSignature": SIG2}]),         # signature alone: still text
        chunk([{"text": " part", "thought": True}]),                   # switch back
        chunk([{"text": "!"}], finish="STOP", usage=USAGE),
    ]
    server.push(Reply(chunks=chunked(body(chunks), 9)))
    events, msg = await collect(stream_google_generative_ai(make_model(server.url), ctx(), {"api_key": KEY}))
    assert [e.type for e in events] == [
        "start", "thinking_start", "thinking_delta", "thinking_delta", "thinking_delta", "thinking_end",
        "text_start", "text_delta", "text_end", "thinking_start", "thinking_delta", "thinking_end",
        "text_start", "text_delta", "text_end", "done"]
    assert msg.content[0] == ThinkingContent(thinking="Thinking more", thinking_signature=SIG)
    assert msg.content[1] == TextContent(text="Answer", text_signature=SIG2)
    assert [b.type for b in msg.content] == ["thinking", "text", "thinking", "text"]


async def test_signature_replaced_by_new_non_empty_one(server):
    chunks = [chunk([{"text": "a", "thoughtSignature": SIG}]), chunk([{"text": "b", "thoughtSignature": ""}]),
              chunk([{"text": "c", "thoughtSignature": SIG2}], finish="STOP")]
    server.push(Reply(chunks=[body(chunks)]))
    _, msg = await collect(stream_google_generative_ai(make_model(server.url), ctx(), {"api_key": KEY}))
    assert msg.content == [TextContent(text="abc", text_signature=SIG2)]


async def test_function_calls_all_at_once_with_generated_ids(server):
    chunks = [
        chunk([{"text": "Let me check."}]),
        chunk([{"functionCall": {"name": "read", "args": {"path": "/a.txt", "n": [1, 2]}},
                "thoughtSignature": SIG},
               {"functionCall": {"name": "read", "args": {"path": "/b.txt"}, "id": "given"}},
               {"functionCall": {"name": "ls", "args": {}, "id": "given"}}]),  # duplicate id
        chunk([], finish="STOP", usage=USAGE),
    ]
    server.push(Reply(chunks=chunked(body(chunks), 6)))
    events, msg = await collect(stream_google_generative_ai(make_model(server.url),
                                                            ctx(tools=[Tool(name="read"), Tool(name="ls")]),
                                                            {"api_key": KEY}))
    assert [e.type for e in events] == [
        "start", "text_start", "text_delta", "text_end",
        "toolcall_start", "toolcall_delta", "toolcall_end",
        "toolcall_start", "toolcall_delta", "toolcall_end",
        "toolcall_start", "toolcall_delta", "toolcall_end", "done"]
    deltas = [e for e in events if e.type == "toolcall_delta"]
    assert json.loads(deltas[0].delta) == {"path": "/a.txt", "n": [1, 2]}
    first, second, third = msg.content[1:]
    assert first.id.startswith("read_") and first.arguments == {"path": "/a.txt", "n": [1, 2]}
    assert first.thought_signature == SIG
    assert second.id == "given"
    assert third.id != "given" and third.id.startswith("ls_")
    assert msg.stop_reason == "toolUse" and msg.raw_stop_reason == "STOP"
    sent = server.requests[0].json
    assert sent["tools"] == [{"functionDeclarations": [
        {"name": "read", "description": "", "parametersJsonSchema": {"type": "object", "properties": {}}},
        {"name": "ls", "description": "", "parametersJsonSchema": {"type": "object", "properties": {}}}]}]


@pytest.mark.parametrize("finish, stop", [
    ("STOP", "stop"), ("MAX_TOKENS", "length"), ("SAFETY", "error"), ("RECITATION", "error"),
    ("MALFORMED_FUNCTION_CALL", "error"), ("OTHER", "error"), ("FINISH_REASON_UNSPECIFIED", "error"),
    ("SOMETHING_NEW", "error"),
])
async def test_finish_reasons(server, finish, stop):
    server.push(Reply(chunks=[body([chunk([{"text": "x"}], finish=finish, usage=USAGE)])]))
    events, msg = await collect(stream_google_generative_ai(make_model(server.url), ctx(), {"api_key": KEY}))
    assert msg.stop_reason == stop
    assert msg.raw_stop_reason == finish  # kept on error stops too (item 123)
    assert msg.content[0].text == "x"
    if stop == "error":
        assert events[-1].type == "error"
        assert msg.error_message == f"Provider stopped with: {finish}"
    else:
        assert events[-1].type == "done"


async def test_stream_without_finish_reason(server):
    server.push(Reply(chunks=[body([chunk([{"text": "x"}])])]))
    _, msg = await collect(stream_google_generative_ai(make_model(server.url), ctx(), {"api_key": KEY}))
    assert msg.error_message == "Google stream ended without a finish reason"
    assert msg.content[0].text == "x"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 429, 500, 503])
async def test_http_errors(server, status):
    server.push(Reply.json(status, {"error": {"code": status, "message": "API key not valid. Please pass a valid API key.",
                                              "status": "INVALID_ARGUMENT"}}))
    events, msg = await collect(stream_google_generative_ai(make_model(server.url), ctx(), {"api_key": KEY}))
    assert [e.type for e in events] == ["error"]
    assert str(status) in msg.error_message and "API key not valid" in msg.error_message
    assert KEY not in msg.error_message
    assert len(server.requests) == 1


async def test_retry_only_when_enabled(server):
    server.push(Reply.json(503, {"error": {"message": "busy"}}), Reply(chunks=[body([chunk([{"text": "ok"}], "STOP")])]))
    _, msg = await collect(stream_google_generative_ai(make_model(server.url), ctx(),
                                                       {"api_key": KEY, "max_retries": 1, "max_retry_delay_ms": 5000}))
    assert msg.stop_reason == "stop" and len(server.requests) == 2


async def test_connection_reset_and_non_json(server):
    server.push(Reply(chunks=[body([chunk([{"text": "half"}], usage=USAGE)]), RESET]))
    events, msg = await collect(stream_google_generative_ai(make_model(server.url), ctx(), {"api_key": KEY}))
    assert events[0].type == "start" and events[-1].type == "error"
    assert msg.stop_reason == "error" and msg.content[0].text == "half"
    assert msg.usage.input == 60

    server.push(Reply(chunks=[b"no colon line\n\ndata: {broken\n\n"]))
    _, msg = await collect(stream_google_generative_ai(make_model(server.url), ctx(), {"api_key": KEY}))
    assert msg.stop_reason == "error" and "invalid JSON" in msg.error_message


async def test_abort_before_and_during(server):
    controller = AbortController()
    controller.abort()
    events, msg = await collect(stream_google_generative_ai(make_model(server.url), ctx(),
                                                            {"api_key": KEY, "signal": controller.signal}))
    assert [e.type for e in events] == ["error"] and msg.stop_reason == "aborted" and msg.content == []
    assert server.requests == []

    server.push(Reply(chunks=[body([chunk([{"text": "so far"}], usage=USAGE)]), HANG]))
    controller = AbortController()
    stream = stream_google_generative_ai(make_model(server.url), ctx(), {"api_key": KEY, "signal": controller.signal})
    async for e in stream:
        if e.type == "text_delta":
            controller.abort()
    msg = await stream.result()
    assert msg.stop_reason == "aborted" and msg.error_message == "Request was aborted"
    assert msg.content[0].text == "so far"
    assert msg.usage.input > 0 and msg.usage.output > 0 and msg.usage.cost.total > 0  # item 134


async def test_missing_key(server, monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    events, msg = await collect(stream_google_generative_ai(make_model(server.url), ctx(), {}))
    assert [e.type for e in events] == ["error"] and "GEMINI_API_KEY" in msg.error_message
    _, msg = await collect(stream_simple_google_generative_ai(make_model(server.url), ctx(), {}))
    assert "GEMINI_API_KEY" in msg.error_message
    assert server.requests == []


# --- contents conversion (pure) ----------------------------------------------------------

_assistant = functools.partial(assistant, api="google-generative-ai", provider="google", model="gemini-2.5-flash")


def test_signatures_only_for_same_model_and_valid_base64():
    model = make_model("http://x")
    assert is_valid_signature(SIG) and not is_valid_signature("not base64!") and not is_valid_signature("abc")
    messages = [
        UserMessage(content="q"),
        _assistant([ThinkingContent(thinking="t", thinking_signature=SIG),
                    ThinkingContent(thinking="", thinking_signature=SIG2),      # signed empty: kept
                    TextContent(text="", text_signature="bad sig"),             # unusable: dropped
                    TextContent(text="a", text_signature="bad sig"),
                    ToolCall(id="c1", name="f", arguments={"x": 1}, thought_signature=SIG)], stop="toolUse"),
        ToolResultMessage(tool_call_id="c1", tool_name="f", content=[TextContent(text="out")]),
    ]
    contents = convert_contents(model, Context(messages=messages))
    assert contents[1] == {"role": "model", "parts": [
        {"thought": True, "text": "t", "thoughtSignature": SIG},
        {"thought": True, "text": "", "thoughtSignature": SIG2},
        {"text": "a"},
        {"functionCall": {"name": "f", "args": {"x": 1}}, "thoughtSignature": SIG},
    ]}
    assert contents[2] == {"role": "user", "parts": [
        {"functionResponse": {"name": "f", "response": {"output": "out"}}}]}

    other = make_model("http://x", id="gemini-2.5-pro")
    contents = convert_contents(other, Context(messages=messages))
    parts = contents[1]["parts"]
    assert all("thoughtSignature" not in p for p in parts)
    assert {"text": "t"} in parts  # foreign thinking becomes plain text
    assert all(p.get("text") != "" for p in parts)  # signed empty parts dropped for another model


def test_tool_result_images_gemini3_nested_vs_gemini2_separate_turn():
    img = ImageContent(data="aGk=", mime_type="image/png")
    messages = [UserMessage(content="q"),
                _assistant([ToolCall(id="c1", name="shot", arguments={}),
                            ToolCall(id="c2", name="fail", arguments={})], stop="toolUse"),
                ToolResultMessage(tool_call_id="c1", tool_name="shot", content=[TextContent(text="here"), img]),
                ToolResultMessage(tool_call_id="c2", tool_name="fail", content=[TextContent(text="bad")],
                                  is_error=True)]
    g2 = convert_contents(make_model("http://x"), Context(messages=messages))
    assert g2[2] == {"role": "user", "parts": [
        {"functionResponse": {"name": "shot", "response": {"output": "here"}}},
        {"functionResponse": {"name": "fail", "response": {"error": "bad"}}}]}
    assert g2[3] == {"role": "user", "parts": [{"text": "Tool result image:"},
                                               {"inlineData": {"mimeType": "image/png", "data": "aGk="}}]}
    g3_model = make_model("http://x", id="gemini-3-pro-preview")
    g3 = convert_contents(g3_model, Context(messages=[messages[0],
                                                      _assistant(messages[1].content, model="gemini-3-pro-preview",
                                                                 stop="toolUse"),
                                                      *messages[2:]]))
    assert len(g3) == 3
    shot = g3[2]["parts"][0]["functionResponse"]
    assert shot == {"name": "shot", "response": {"output": "here"}, "id": "c1",
                    "parts": [{"inlineData": {"mimeType": "image/png", "data": "aGk="}}]}
    assert g3[1]["parts"][0]["functionCall"]["id"] == "c1"  # Gemini 3 needs call ids


def test_orphans_empty_and_surrogates():
    model = make_model("http://x")
    messages = [UserMessage(content="go"),
                _assistant([ToolCall(id="t1", name="a", arguments={})], stop="toolUse"),
                UserMessage(content="lone \ud800 emoji 😀"),
                _assistant([]), _assistant([TextContent(text="x")], stop="aborted"),
                UserMessage(content=[])]
    contents = convert_contents(model, Context(messages=messages))
    assert contents[2] == {"role": "user", "parts": [
        {"functionResponse": {"name": "a", "response": {"error": "No result provided"}}}]}
    assert contents[3] == {"role": "user", "parts": [{"text": "lone  emoji 😀"}]}
    assert len(contents) == 4


def test_thinking_config_per_model_family():
    g25 = make_model("http://x")
    assert thinking_config_for_level(g25, None) == {"enabled": False, "budget_tokens": 0}
    assert thinking_config_for_level(g25, "medium") == {"enabled": True, "budget_tokens": 8192}
    assert thinking_config_for_level(g25, "minimal", {"minimal": 99}) == {"enabled": True, "budget_tokens": 99}
    pro25 = make_model("http://x", id="gemini-2.5-pro")
    assert thinking_config_for_level(pro25, "high")["budget_tokens"] == 32768
    lite = make_model("http://x", id="gemini-2.5-flash-lite")
    assert thinking_config_for_level(lite, "minimal")["budget_tokens"] == 512
    other = make_model("http://x", id="gemini-2.0-flash-thinking")
    assert thinking_config_for_level(other, "low")["budget_tokens"] == -1

    pro3 = make_model("http://x", id="gemini-3-pro-preview")
    assert thinking_config_for_level(pro3, None) == {"enabled": False, "level": "LOW"}
    assert thinking_config_for_level(pro3, "minimal")["level"] == "LOW"
    assert thinking_config_for_level(pro3, "medium")["level"] == "HIGH"
    flash3 = make_model("http://x", id="gemini-3-flash-preview")
    assert thinking_config_for_level(flash3, None) == {"enabled": False, "level": "MINIMAL"}
    assert thinking_config_for_level(flash3, "medium")["level"] == "MEDIUM"
    latest = make_model("http://x", id="gemini-flash-latest")
    assert thinking_config_for_level(latest, "low")["level"] == "LOW"
    gemma = make_model("http://x", id="gemma-4-27b-it")
    assert thinking_config_for_level(gemma, "low")["level"] == "MINIMAL"
    assert thinking_config_for_level(gemma, "high")["level"] == "HIGH"
    mapped = make_model("http://x", id="gemini-3-flash-preview", thinking_level_map={"high": "OFF"})
    assert thinking_config_for_level(mapped, "high")["level"] == "HIGH"  # "off" becomes high
    broken = make_model("http://x", id="gemini-3-flash-preview", thinking_level_map={"high": "turbo"})
    with pytest.raises(ValueError):
        thinking_config_for_level(broken, "high")
    assert thinking_config_for_level(make_model("http://x", reasoning=False), "high") is None


async def test_stream_simple_sends_thinking_config(server):
    server.push(*[Reply(chunks=[body([chunk([{"text": "ok"}], "STOP")])]) for _ in range(2)])
    model = make_model(server.url)
    await collect(stream_simple_google_generative_ai(model, ctx(), {"api_key": KEY, "reasoning": "low",
                                                                   "temperature": 0.5}))
    gen = server.requests[0].json["generationConfig"]
    assert gen["thinkingConfig"] == {"includeThoughts": True, "thinkingBudget": 2048}
    assert gen["temperature"] == 0.5 and gen["maxOutputTokens"] > 0
    await collect(stream_simple_google_generative_ai(model, ctx(), {"api_key": KEY}))
    assert server.requests[1].json["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 0}

    broken = make_model(server.url, id="gemini-3-flash-preview", thinking_level_map={"high": "turbo"})
    events, msg = await collect(stream_simple_google_generative_ai(broken, ctx(), {"api_key": KEY,
                                                                                  "reasoning": "high"}))
    assert [e.type for e in events] == ["error"] and "turbo" in msg.error_message


def test_tool_choice_modes():
    model = make_model("http://x")
    tools = [Tool(name="f")]
    assert build_params(model, ctx(tools=tools), {"tool_choice": "any"})["toolConfig"] == \
        {"functionCallingConfig": {"mode": "ANY"}}
    assert "toolConfig" not in build_params(model, ctx(tools=tools), {})
    strict = [Tool(name="f", constrained_sampling={"type": "json_schema", "strict": "prefer"})]
    g3 = make_model("http://x", id="gemini-3-pro-preview")
    assert build_params(g3, ctx(tools=strict), {})["toolConfig"]["functionCallingConfig"]["mode"] == "VALIDATED"


def test_register():
    from pi_notebook.ai.stream import get_api_provider
    google.register()
    assert get_api_provider("google-generative-ai") is not None


async def test_second_turn_replays_signatures_and_function_response(server):
    chunks = [chunk([{"text": "Plan", "thought": True, "thoughtSignature": SIG}]),
              chunk([{"functionCall": {"name": "read", "args": {"p": "a"}}, "thoughtSignature": SIG2}]),
              chunk([], finish="STOP", usage=USAGE)]
    server.push(Reply(chunks=chunked(body(chunks), 23)),
                Reply(chunks=[body([chunk([{"text": "ok"}], finish="STOP")])]))
    model = make_model(server.url)
    context = ctx(tools=[Tool(name="read")])
    _, first = await collect(stream_google_generative_ai(model, context, {"api_key": KEY}))
    assert first.stop_reason == "toolUse"
    context.messages += [first, ToolResultMessage(tool_call_id=first.content[1].id, tool_name="read",
                                                  content=[TextContent(text="file")])]
    _, second = await collect(stream_google_generative_ai(model, context, {"api_key": KEY}))
    assert second.stop_reason == "stop"
    sent = server.requests[1].json["contents"]
    assert sent[1] == {"role": "model", "parts": [
        {"thought": True, "text": "Plan", "thoughtSignature": SIG},
        {"functionCall": {"name": "read", "args": {"p": "a"}}, "thoughtSignature": SIG2}]}
    assert sent[2] == {"role": "user", "parts": [{"functionResponse": {"name": "read",
                                                                       "response": {"output": "file"}}}]}


async def test_abort_during_retry_wait(server, monkeypatch):
    import asyncio
    server.push(Reply.json(503, {"error": {"message": "busy"}}, headers={"retry-after": "30"}))
    controller = AbortController()
    delays = abort_in_retry_wait(monkeypatch, controller)  # aborts once the 30 s wait has begun
    stream = stream_google_generative_ai(make_model(server.url), ctx(),
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
    sent = build_params(make_model("http://x"), ctx(tools=[tool]), {})["tools"][0]["functionDeclarations"][0]
    assert sent["parametersJsonSchema"]["properties"]["query"]["type"] == "string"


async def test_blocked_prompt_is_an_error_stop(server):
    server.push(Reply(chunks=[body([{"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
                                     "usageMetadata": {"promptTokenCount": 5, "totalTokenCount": 5}}])]))
    events, msg = await collect(stream_google_generative_ai(make_model(server.url), ctx(), {"api_key": KEY}))
    assert events[-1].type == "error"
    assert msg.error_message == "Provider stopped with: PROHIBITED_CONTENT"
    assert msg.usage.input == 5
