import pytest

from pi_notebook.ai.types import (
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)


def test_dump_is_pi_json_camel_case_without_undefined_fields():
    m = AssistantMessage(content=[ThinkingContent(thinking="s"), TextContent(text="4")],
                         stop_reason="toolUse", timestamp=5)
    d = m.model_dump()
    assert d["stopReason"] == "toolUse"
    assert d["content"] == [{"type": "thinking", "thinking": "s"}, {"type": "text", "text": "4"}]
    assert "errorMessage" not in d and "responseId" not in d
    assert Usage(cache_write_1h=2).model_dump()["cacheWrite1h"] == 2


def test_validate_accepts_both_spellings_and_round_trips():
    raw = {"role": "toolResult", "toolCallId": "c1", "toolName": "echo",
           "content": [{"type": "text", "text": "hi"}], "isError": True, "timestamp": 1}
    m = ToolResultMessage.model_validate(raw)
    assert m.tool_call_id == "c1" and m.is_error
    assert ToolResultMessage(tool_call_id="c1", tool_name="echo", content=[TextContent(text="hi")],
                             is_error=True, timestamp=1).model_dump() == raw
    tc = ToolCall.model_validate({"type": "toolCall", "id": "x", "name": "n", "arguments": {"a": 1}})
    assert tc.arguments == {"a": 1}
    assert UserMessage(content="hi").model_dump()["role"] == "user"


def test_usage_total_tokens_is_the_reported_total_or_the_sum_of_the_parts():
    from pi_notebook.ai.types import usage_total_tokens

    assert usage_total_tokens(Usage(input=1, output=2, cache_read=3, cache_write=4)) == 10
    assert usage_total_tokens(Usage(input=1, output=2, total_tokens=99)) == 99
    assert usage_total_tokens({"input": 1, "output": 2, "cacheRead": 3, "cacheWrite": 4}) == 10
    assert usage_total_tokens({"totalTokens": 7, "input": 1}) == 7
    assert usage_total_tokens({}) == 0


def test_event_unions_are_discriminated_by_type():
    from typing import Annotated, get_args, get_origin

    from pydantic import TypeAdapter

    from pi_notebook.agent.types import AgentEvent, MessageEndEvent, TurnStartEvent
    from pi_notebook.ai.types import AssistantMessageEvent, TextDeltaEvent

    for union in (AssistantMessageEvent, AgentEvent):
        assert get_origin(union) is Annotated and get_args(union)[1].discriminator == "type"
    partial = {"role": "assistant", "content": [], "api": "a", "provider": "p", "model": "m"}
    event = TypeAdapter(AssistantMessageEvent).validate_python(
        {"type": "text_delta", "contentIndex": 0, "delta": "hi", "partial": partial})
    assert type(event) is TextDeltaEvent and event.delta == "hi"
    agent_events = TypeAdapter(list[AgentEvent]).validate_python(
        [{"type": "turn_start"}, {"type": "message_end", "message": {"role": "user"}}])
    assert [type(e) for e in agent_events] == [TurnStartEvent, MessageEndEvent]
    with pytest.raises(ValueError, match="does not match any of the expected tags"):
        TypeAdapter(AgentEvent).validate_python({"type": "no_such_event"})
    match event:  # consumers narrow with class patterns
        case TextDeltaEvent(delta=delta):
            assert delta == "hi"
        case _:
            raise AssertionError(event)
