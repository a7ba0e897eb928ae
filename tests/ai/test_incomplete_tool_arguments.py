"""Tool calls whose JSON arguments were cut or repaired are marked, and the loop never runs them.

Three classes, on every adapter whose wire streams argument JSON (Gemini sends arguments as
whole JSON objects, so it has nothing to cut):

* the stream ended inside the arguments (the call's block/item never closed);
* the final text needed repair to parse (an invalid escape, a raw control character);
* the finish reason says tool use but the arguments' JSON is cut.

The marker is private: pi's JSON of the message does not change.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.sse_server import Reply, ScriptedServer, sse_body, sse_event

from pi_notebook.agent import AgentContext, AgentLoopConfig, AgentTool, AgentToolResult, run_agent_loop
from pi_notebook.ai._json import parse_final_arguments
from pi_notebook.ai.providers.anthropic import (
    stream_anthropic_messages,
    stream_simple_anthropic_messages,
)
from pi_notebook.ai.providers.openai_completions import stream_openai_completions
from pi_notebook.ai.providers.openai_responses import stream_openai_responses
from pi_notebook.ai.types import (
    Context,
    Model,
    ModelCost,
    TextContent,
    ToolCall,
    UserMessage,
    arguments_incomplete,
    mark_arguments_incomplete,
)

CUT = '{"value": "ab'
REPAIRED = '{"value": "a\\qb"}'  # an invalid escape: json.loads fails, repair makes it parse
WHOLE = '{"value": "ab"}'


def model(api: str, base_url: str) -> Model:
    provider = "anthropic" if api == "anthropic-messages" else "openai"
    return Model(id="m-1", name="m", api=api, provider=provider, base_url=base_url, reasoning=False,
                 input=["text"], cost=ModelCost(), context_window=100_000, max_tokens=4096)


def context() -> Context:
    return Context(messages=[UserMessage(content="hi")])


# --- wire builders ---------------------------------------------------------------------------

def anthropic_call(raw: str, *, stop: str | None = "tool_use", close_block: bool = True) -> str:
    def ev(data: dict) -> str:
        return sse_event(data, event=data["type"])
    body = ev({"type": "message_start", "message": {"id": "msg_1", "model": "m-1", "content": [],
                                                    "usage": {"input_tokens": 5, "output_tokens": 1}}})
    body += ev({"type": "content_block_start", "index": 0,
                "content_block": {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {}}})
    body += ev({"type": "content_block_delta", "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": raw}})
    if close_block:
        body += ev({"type": "content_block_stop", "index": 0})
    if stop is not None:
        body += ev({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 9}})
        body += ev({"type": "message_stop"})
    return body


def responses_call(raw: str, *, done: bool = True) -> str:
    def ev(data: dict) -> str:
        return sse_event(data, event=data["type"])
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "echo", "arguments": ""}
    body = ev({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}})
    body += ev({"type": "response.output_item.added", "output_index": 0, "item": item})
    body += ev({"type": "response.function_call_arguments.delta", "output_index": 0, "item_id": "fc_1",
                "delta": raw})
    if done:
        body += ev({"type": "response.output_item.done", "output_index": 0,
                    "item": dict(item, arguments=raw, status="completed")})
    body += ev({"type": "response.completed", "response": {
        "id": "resp_1", "status": "completed", "usage": {"input_tokens": 5, "output_tokens": 9}}})
    return body


def completions_call(raw: str, *, finish: str | None = "tool_calls") -> bytes:
    chunks: list[Any] = [
        {"id": "c1", "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [
            {"index": 0, "id": "call_1", "type": "function", "function": {"name": "echo", "arguments": ""}}]}}]},
        {"id": "c1", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": raw}}]}}]},
    ]
    if finish is not None:
        chunks.append({"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    return sse_body(chunks, done=finish is not None)


async def run_adapter(api: str, body: str | bytes):
    fn = {"anthropic-messages": stream_anthropic_messages, "openai-responses": stream_openai_responses,
          "openai-completions": stream_openai_completions}[api]
    with ScriptedServer() as server:
        server.push(Reply(chunks=[body]))
        stream = fn(model(api, server.url), context(), {"api_key": "k"})
        return await stream.result()


def only_call(message) -> ToolCall:
    calls = [b for b in message.content if b.type == "toolCall"]
    assert len(calls) == 1
    return calls[0]


# --- the final parse ---------------------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [
    ("", ({}, True)), ("  ", ({}, True)), (WHOLE, ({"value": "ab"}, True)),
    (CUT, ({"value": "ab"}, False)), (REPAIRED, ({"value": "a\\qb"}, False)),
    ('{"a": 1} trailing', ({"a": 1}, False)), ("[1, 2]", ({}, False)),
    ('{"s": "line\nbreak"}', ({"s": "line\nbreak"}, False)),  # a raw control character
])
def test_parse_final_arguments_reports_whether_the_json_was_whole(text, expected):
    assert parse_final_arguments(text) == expected


def test_nan_is_not_json():
    assert parse_final_arguments('{"a": NaN}')[1] is False


def test_the_marker_does_not_change_pis_json():
    call = ToolCall(id="t", name="echo", arguments={"value": 1})
    before = call.model_dump_json()
    mark_arguments_incomplete(call)
    assert arguments_incomplete(call)
    assert call.model_dump_json() == before
    assert arguments_incomplete(call.model_copy())
    assert not arguments_incomplete(ToolCall.model_validate_json(before))


# --- per adapter, per class ----------------------------------------------------------------------

async def test_anthropic_whole_arguments_are_not_marked():
    message = await run_adapter("anthropic-messages", anthropic_call(WHOLE))
    assert message.stop_reason == "toolUse" and not arguments_incomplete(only_call(message))


async def test_anthropic_stream_ended_inside_the_arguments():
    # the block never closed; the stop reason still came (the SDK's recorded max_tokens shape)
    message = await run_adapter("anthropic-messages", anthropic_call(CUT, close_block=False, stop="tool_use"))
    assert message.stop_reason == "toolUse"
    assert arguments_incomplete(only_call(message))
    message = await run_adapter("anthropic-messages", anthropic_call(CUT, close_block=False, stop=None))
    assert message.stop_reason == "error" and arguments_incomplete(only_call(message))


async def test_anthropic_repaired_arguments():
    message = await run_adapter("anthropic-messages", anthropic_call(REPAIRED))
    call = only_call(message)
    assert call.arguments == {"value": "a\\qb"} and arguments_incomplete(call)


async def test_anthropic_tool_use_stop_with_cut_arguments():
    message = await run_adapter("anthropic-messages", anthropic_call(CUT))
    assert message.stop_reason == "toolUse" and arguments_incomplete(only_call(message))


async def test_responses_whole_arguments_are_not_marked():
    message = await run_adapter("openai-responses", responses_call(WHOLE))
    assert message.stop_reason == "toolUse" and not arguments_incomplete(only_call(message))


async def test_responses_stream_ended_inside_the_arguments():
    message = await run_adapter("openai-responses", responses_call(CUT, done=False))
    assert arguments_incomplete(only_call(message))


async def test_responses_repaired_arguments():
    message = await run_adapter("openai-responses", responses_call(REPAIRED))
    assert arguments_incomplete(only_call(message))


async def test_responses_tool_use_stop_with_cut_arguments():
    message = await run_adapter("openai-responses", responses_call(CUT))
    assert message.stop_reason == "toolUse" and arguments_incomplete(only_call(message))


async def test_completions_whole_arguments_are_not_marked():
    message = await run_adapter("openai-completions", completions_call(WHOLE))
    assert message.stop_reason == "toolUse" and not arguments_incomplete(only_call(message))


async def test_completions_stream_ended_inside_the_arguments():
    message = await run_adapter("openai-completions", completions_call(CUT, finish=None))
    assert arguments_incomplete(only_call(message))


async def test_completions_repaired_arguments():
    message = await run_adapter("openai-completions", completions_call(REPAIRED))
    assert arguments_incomplete(only_call(message))


async def test_completions_tool_calls_finish_with_cut_arguments():
    message = await run_adapter("openai-completions", completions_call(CUT))
    assert message.stop_reason == "toolUse" and arguments_incomplete(only_call(message))


# --- the loop never runs a marked call ------------------------------------------------------------

def echo_tool(executed: list[Any]) -> AgentTool:
    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        executed.append(params)
        return AgentToolResult(content=[TextContent(text=f"echo {params}")], details={})
    return AgentTool(name="echo", label="echo", description="echo",
                     parameters={"type": "object", "properties": {"value": {"type": "string"}}},
                     execute=execute)


def answer(text: str) -> str:
    def ev(data: dict) -> str:
        return sse_event(data, event=data["type"])
    return (ev({"type": "message_start", "message": {"id": "msg_2", "model": "m-1", "content": [],
                                                     "usage": {"input_tokens": 5, "output_tokens": 1}}})
            + ev({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
            + ev({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}})
            + ev({"type": "content_block_stop", "index": 0})
            + ev({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}})
            + ev({"type": "message_stop"}))


@pytest.mark.parametrize("first", [
    pytest.param(anthropic_call(CUT), id="tool_use-stop-cut"),
    pytest.param(anthropic_call(REPAIRED), id="repaired"),
    pytest.param(anthropic_call(CUT, close_block=False), id="ended-inside"),
])
async def test_the_loop_turns_a_marked_call_into_an_error_result(first: str):
    executed: list[Any] = []
    with ScriptedServer() as server:
        server.push(Reply(chunks=[first]), Reply(chunks=[answer("ok, again")]))
        events: list[Any] = []
        config = AgentLoopConfig(model=model("anthropic-messages", server.url), api_key="k")
        messages = await run_agent_loop(
            [UserMessage(content="echo ab")],
            AgentContext(system_prompt="", messages=[], tools=[echo_tool(executed)]),
            config, events.append, None, stream_simple_anthropic_messages)
        sent_back = server.requests[1].json["messages"]
    assert executed == []
    results = [m for m in messages if m.role == "toolResult"]
    assert len(results) == 1 and results[0].is_error
    text = results[0].content[0].text
    assert "incomplete" in text and "call the tool again with complete arguments" in text
    # the model is told so on the next turn, next to its own call
    tool_result = sent_back[-1]["content"][0]
    assert tool_result["type"] == "tool_result" and tool_result["is_error"] is True
    assert "incomplete" in json.dumps(tool_result)
    assert messages[-1].role == "assistant" and messages[-1].content[0].text == "ok, again"


async def test_the_loop_still_runs_a_whole_call():
    executed: list[Any] = []
    with ScriptedServer() as server:
        server.push(Reply(chunks=[anthropic_call(WHOLE)]), Reply(chunks=[answer("done")]))
        config = AgentLoopConfig(model=model("anthropic-messages", server.url), api_key="k")
        await run_agent_loop([UserMessage(content="echo ab")],
                             AgentContext(system_prompt="", messages=[], tools=[echo_tool(executed)]),
                             config, lambda e: None, None, stream_simple_anthropic_messages)
    assert executed == [{"value": "ab"}]
