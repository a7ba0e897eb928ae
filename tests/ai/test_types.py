from pi_notebook.ai.types import (AssistantMessage, TextContent, ThinkingContent, ToolCall,
                                  ToolResultMessage, Usage, UserMessage)


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
