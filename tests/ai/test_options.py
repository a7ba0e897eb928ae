"""Simple options, context estimate, max-tokens clamp, thinking budgets (spec 5.4; items 111, 118, 125)."""

from __future__ import annotations

import pytest
from helpers.messages import assistant, model

from pi_notebook.ai.models import get_model
from pi_notebook.ai.options import (DEFAULT_THINKING_BUDGETS, ContextEstimate, adjust_max_tokens_for_thinking,
                                    build_base_options, clamp_max_tokens_to_context, context_safety_tokens,
                                    clamp_thinking_budget_to_answer_room, estimate_context_tokens,
                                    estimate_message_tokens, resolve_cache_retention, thinking_budget_for_level)
from pi_notebook.ai.types import (AssistantMessage, Context, ImageContent, Model, TextContent, ThinkingContent,
                                  StopReason, Tool, ToolCall, ToolResultMessage, Usage, UserMessage)


def _model(window: int = 10_000, max_tokens: int = 100_000, **kw) -> Model:
    return model(context_window=window, max_tokens=max_tokens, **kw)


def _assistant(text: str, total: int, ts: int, stop: StopReason = "stop") -> AssistantMessage:
    return assistant(text, usage=Usage(input=total, total_tokens=total), stop=stop, timestamp=ts)


def test_default_and_explicit_max_tokens_are_clamped_to_the_context():  # item 111
    # pi's margin (4096) holds for windows of 32,768 tokens and more
    context = Context(messages=[UserMessage(content="x" * 8000, timestamp=1)])
    model = _model(window=40_000)
    assert build_base_options(model, context, {})["max_tokens"] == 33_904
    assert build_base_options(model, context, {"max_tokens": 50_000})["max_tokens"] == 33_904
    assert build_base_options(model, context, {"max_tokens": 1000})["max_tokens"] == 1000
    assert clamp_max_tokens_to_context(model, context, 100_000) == 33_904


def test_a_small_window_keeps_a_margin_its_own_size():
    # an 8k window with 5k of history: pi's fixed 4096 left a 2,048-token answer 1 token
    model = _model(window=8192, max_tokens=2048)
    context = Context(messages=[UserMessage(content="x" * 20_000, timestamp=1)])
    assert context_safety_tokens(8192) == 1024
    assert clamp_max_tokens_to_context(model, context, 2048) == 2048  # 8192 - 5000 - 1024 = 2168 of room
    assert context_safety_tokens(4096) == 512 and context_safety_tokens(200_000) == 4096


def test_images_count_only_for_models_that_take_them():
    figure = ToolResultMessage(tool_call_id="1", tool_name="python", content=[
        TextContent(text="ok"), ImageContent(data="x", mime_type="image/png")], timestamp=2)
    context = Context(messages=[UserMessage(content="x" * 16_000, timestamp=1), figure])
    text_only = _model(window=8192, max_tokens=2048, input=["text"])
    seeing = _model(window=8192, max_tokens=2048, input=["text", "image"])
    assert clamp_max_tokens_to_context(text_only, context, 2048) == 2048
    assert clamp_max_tokens_to_context(seeing, context, 2048) < 2048
    assert estimate_message_tokens(figure, images=False) < 20 < estimate_message_tokens(figure)


def test_clamp_never_goes_below_one_and_ignores_missing_window():
    context = Context(messages=[UserMessage(content="x" * 100_000, timestamp=1)])
    assert clamp_max_tokens_to_context(_model(window=10_000), context, 5000) == 1
    assert clamp_max_tokens_to_context(_model(window=0), context, 5000) == 5000
    assert clamp_max_tokens_to_context(_model(window=0), context, 0) == 1


def test_estimate_counts_chars_images_thinking_tool_calls_and_prefix():
    assert estimate_message_tokens(UserMessage(content="abcde")) == 2
    assert estimate_message_tokens(UserMessage(content=[ImageContent(data="x", mime_type="image/png")])) == 1200
    assistant = AssistantMessage(content=[ThinkingContent(thinking="abcd"),
                                          ToolCall(id="1", name="ls", arguments={"a": 1})])
    assert estimate_message_tokens(assistant) == 4  # ceil((4 + len("ls") + len('{"a":1}')) / 4) = ceil(13 / 4)
    tool = Tool(name="t", description="d", parameters={"type": "object"})
    context = Context(system_prompt="s" * 40, messages=[UserMessage(content="x" * 40, timestamp=1)], tools=[tool])
    est = estimate_context_tokens(context)
    tools_json = '[{"name":"t","description":"d","parameters":{"type":"object"}}]'
    assert est == ContextEstimate(10 + 10 + -(-len(tools_json) // 4), 0, est.tokens, None)


def test_last_applicable_usage_rule():  # item 125
    messages = [
        UserMessage(content="hi", timestamp=1),
        _assistant("a", 1000, 2),
        UserMessage(content="summary inserted later", timestamp=5),  # newer than the response after it? no
        _assistant("b", 2000, 6),
        UserMessage(content="abcd", timestamp=7),
    ]
    assert estimate_context_tokens(messages) == ContextEstimate(2001, 2000, 1, 3)
    assert estimate_context_tokens(Context(messages=messages, system_prompt="ignored with usage")).tokens == 2001


def test_usage_ignored_when_a_newer_message_was_inserted_before_it():
    summary = UserMessage(content="x" * 400, timestamp=50)  # e.g. a compaction summary, newest timestamp
    stale = _assistant("b", 5000, 20)
    est = estimate_context_tokens([summary, stale, UserMessage(content="abcd", timestamp=60)])
    assert est.last_usage_index is None and est.usage_tokens == 0
    assert est.tokens == 100 + 1 + 1
    # a newer response makes usage applicable again
    fresh = _assistant("c", 7000, 70)
    est2 = estimate_context_tokens([summary, stale, UserMessage(content="abcd", timestamp=60), fresh,
                                    UserMessage(content="12345678", timestamp=80)])
    assert est2 == ContextEstimate(7002, 7000, 2, 3)


def test_error_aborted_and_zero_usage_are_not_applicable():
    messages = [UserMessage(content="abcd", timestamp=1), _assistant("a", 100, 2),
                _assistant("b", 900, 3, stop="error"), _assistant("c", 900, 4, stop="aborted"),
                AssistantMessage(content=[TextContent(text="d")], timestamp=5)]
    est = estimate_context_tokens(messages)
    assert est.last_usage_index == 1 and est.usage_tokens == 100
    usage_sum = AssistantMessage(usage=Usage(input=10, output=5, cache_read=3, cache_write=2), timestamp=9)
    assert estimate_context_tokens([usage_sum]).usage_tokens == 20  # total 0: sum of parts


def test_dict_messages_in_pi_json_are_estimated_too():
    messages = [{"role": "user", "content": "abcd", "timestamp": 1},
                {"role": "assistant", "content": [{"type": "text", "text": "x"}], "stopReason": "stop",
                 "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 300},
                 "timestamp": 2},
                {"role": "toolResult", "toolCallId": "1", "toolName": "t", "addedToolNames": ["late"],
                 "content": [{"type": "text", "text": "12345678"}], "isError": False, "timestamp": 3}]
    tools = [{"name": "late", "description": "", "parameters": {}}, {"name": "other", "description": "", "parameters": {}}]
    est = estimate_context_tokens({"messages": messages, "tools": tools})
    late_json = '[{"name":"late","description":"","parameters":{}}]'
    assert est == ContextEstimate(300 + 2 + -(-len(late_json) // 4), 300, 2 + -(-len(late_json) // 4), 1)


def test_build_base_options_merges_sampling_params_and_prefers_explicit_key():
    model = _model(window=0, max_tokens=4096, sampling_params={"top_p": 0.9, "top_k": 40})
    opts = build_base_options(model, Context(), {"sampling_params": {"top_k": 5}, "api_key": "opt-key",
                                                 "temperature": 0.2, "session_id": "s", "max_retries": 2})
    assert opts["sampling_params"] == {"top_p": 0.9, "top_k": 5}
    assert opts["api_key"] == "opt-key" and opts["max_tokens"] == 4096 and opts["temperature"] == 0.2
    assert opts["session_id"] == "s" and opts["max_retries"] == 2
    assert build_base_options(model, Context(), {"api_key": "opt"}, api_key="resolved")["api_key"] == "resolved"
    assert build_base_options(_model(window=0), Context(), {})["sampling_params"] is None


def test_thinking_budgets():
    assert DEFAULT_THINKING_BUDGETS == {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}
    assert thinking_budget_for_level("medium") == 8192
    assert thinking_budget_for_level("xhigh") == thinking_budget_for_level("max") == 16384
    assert thinking_budget_for_level("high", {"high": 30_000}) == 30_000
    assert thinking_budget_for_level("low", {"low": None}) == 2048
    assert clamp_thinking_budget_to_answer_room(16384, 10_000) == 8976
    assert clamp_thinking_budget_to_answer_room(500, 10_000) == 500
    assert clamp_thinking_budget_to_answer_room(16384, 800) == 0


def test_adjust_max_tokens_for_thinking():
    assert adjust_max_tokens_for_thinking(4000, 64_000, "medium") == (12_192, 8192)
    assert adjust_max_tokens_for_thinking(60_000, 64_000, "high") == (64_000, 16384)
    assert adjust_max_tokens_for_thinking(None, 64_000, "high") == (64_000, 16384)
    # the model cap is below the budget: leave 1024 tokens for the answer
    adjusted = adjust_max_tokens_for_thinking(1000, 8000, "high")
    assert adjusted.max_tokens == 8000 and adjusted.thinking_budget == 8000 - 1024
    assert adjust_max_tokens_for_thinking(None, 4096, "max", {"high": 4096}).thinking_budget == 3072


def test_resolve_cache_retention(monkeypatch):
    monkeypatch.delenv("PI_CACHE_RETENTION", raising=False)
    assert resolve_cache_retention({}) == "short"
    assert resolve_cache_retention(None) == "short"
    assert resolve_cache_retention({"cache_retention": "none"}) == "none"
    monkeypatch.setenv("PI_CACHE_RETENTION", "long")
    assert resolve_cache_retention({}) == "long"
    assert resolve_cache_retention({"cache_retention": "short"}) == "short"
    monkeypatch.delenv("PI_CACHE_RETENTION")
    assert resolve_cache_retention({"env": {"PI_CACHE_RETENTION": "long"}}) == "long"


@pytest.mark.parametrize("ref", ["openai/gpt-4.1", "ollama/any"])
def test_catalogue_models_leave_room_for_a_normal_prompt(ref):
    model = get_model(ref)
    context = Context(messages=[UserMessage(content="hello " * 1000, timestamp=1)])
    assert build_base_options(model, context, {})["max_tokens"] == model.max_tokens


def test_one_estimate_for_compaction_the_clamp_and_the_faux_usage():
    """Compaction, the providers' max-tokens clamp and the faux usage count the same way."""
    from pi_notebook.ai.options import estimate_text_tokens, text_length
    from pi_notebook.session.compaction import estimate_tokens

    assert text_length("a🌍é") == 4  # UTF-16 code units, as pi counts: the globe is two
    assert estimate_text_tokens("🌍🌍🌍") == 2 and estimate_text_tokens("abcde") == 2
    messages = [
        UserMessage(content="héllo 🌍🌍", timestamp=1),  # 10 units
        AssistantMessage(content=[TextContent(text="ok"),
                                  ToolCall(id="1", name="python", arguments={"code": "ü = 1"})],
                         timestamp=2),  # 2 + 6 + len('{"code":"ü = 1"}') = 24 units
        ToolResultMessage(tool_call_id="1", tool_name="python", timestamp=3,
                          content=[TextContent(text="x" * 7), ImageContent(data="i", mime_type="image/png")]),
        {"role": "user", "content": [{"type": "text", "text": "dict 🌍"}], "timestamp": 4},  # 7 units
    ]
    per_message = [3, 6, 1202, 2]  # ceil(units / 4); the image counts as 4800 characters
    assert [estimate_message_tokens(m) for m in messages] == per_message
    assert estimate_tokens(messages) == estimate_context_tokens(messages).tokens == sum(per_message)
