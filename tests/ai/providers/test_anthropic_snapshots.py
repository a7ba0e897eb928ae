"""An alias answered under a differently spelled dated id keeps its signed thinking on the next turn.

Anthropic answers ``claude-sonnet-4-0`` as ``claude-sonnet-4-20250514`` (recorded in
``data/recorded-wire/anthropic-messages/pyd_thinking_signature_text.sse``). pi records the
answered id, so without recognising it the next request would resend the signed thinking as
plain text, which the API rejects for a tool-use continuation with thinking on. The snapshot
is recognised from the catalogue (``snapshots`` of the alias entry), never from the spelling.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.sse_server import Reply, ScriptedServer, sse_event

from pi_notebook.ai.models import get_model, get_models, is_answered_snapshot
from pi_notebook.ai.providers.anthropic import convert_messages, stream_simple_anthropic_messages
from pi_notebook.ai.types import (
    AssistantMessage,
    Context,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

RECORDED = Path(__file__).parents[1] / "data" / "recorded-wire" / "anthropic-messages"


def ev(data: dict) -> str:
    return sse_event(data, event=data["type"])


def thinking_tool_turn(answered_model: str) -> str:
    """A thinking + tool_use answer whose message_start names ``answered_model``."""
    return (ev({"type": "message_start", "message": {"id": "msg_1", "model": answered_model, "content": [],
                                                     "usage": {"input_tokens": 50, "output_tokens": 1}}})
            + ev({"type": "content_block_start", "index": 0,
                  "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
            + ev({"type": "content_block_delta", "index": 0,
                  "delta": {"type": "thinking_delta", "thinking": "I should look it up."}})
            + ev({"type": "content_block_delta", "index": 0,
                  "delta": {"type": "signature_delta", "signature": "EqQBCkYIBxgCKkD-signed"}})
            + ev({"type": "content_block_stop", "index": 0})
            + ev({"type": "content_block_start", "index": 1, "content_block": {
                "type": "tool_use", "id": "toolu_01", "name": "lookup", "input": {}}})
            + ev({"type": "content_block_delta", "index": 1,
                  "delta": {"type": "input_json_delta", "partial_json": '{"q": "paris"}'}})
            + ev({"type": "content_block_stop", "index": 1})
            + ev({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 30}})
            + ev({"type": "message_stop"}))


def text_turn() -> str:
    return (ev({"type": "message_start", "message": {"id": "msg_2", "model": "x", "content": [],
                                                     "usage": {"input_tokens": 60, "output_tokens": 1}}})
            + ev({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}})
            + ev({"type": "message_stop"}))


LOOKUP = Tool(name="lookup", description="look up", parameters={
    "type": "object", "properties": {"q": {"type": "string"}}})


async def two_turns(requested: str, answered: str) -> tuple[AssistantMessage, list[dict]]:
    """Turn 1 (thinking + tool call) answered as ``answered``; then the tool-result continuation.
    Returns turn 1's message and the messages of the continuation request."""
    with ScriptedServer() as server:
        model = get_model("anthropic", requested, base_url=server.url)
        server.push(Reply(chunks=[thinking_tool_turn(answered)]), Reply(chunks=[text_turn()]))
        context = Context(messages=[UserMessage(content="capital?")], tools=[LOOKUP])
        options = {"api_key": "k", "reasoning": "medium"}
        first = await stream_simple_anthropic_messages(model, context, options).result()
        assert first.stop_reason == "toolUse" and first.model == answered
        context.messages += [first, ToolResultMessage(tool_call_id="toolu_01", tool_name="lookup",
                                                      content=[TextContent(text="Paris")])]
        await stream_simple_anthropic_messages(model, context, options).result()
        return first, server.requests[1].json["messages"]


async def test_alias_answered_by_a_differently_spelled_snapshot_keeps_signed_thinking():
    _, sent = await two_turns("claude-sonnet-4-0", "claude-sonnet-4-20250514")
    assistant_blocks = sent[1]["content"]
    assert assistant_blocks[0] == {"type": "thinking", "thinking": "I should look it up.",
                                   "signature": "EqQBCkYIBxgCKkD-signed"}
    assert assistant_blocks[1]["type"] == "tool_use" and assistant_blocks[1]["id"] == "toolu_01"
    assert sent[2]["content"][0]["type"] == "tool_result"


async def test_alias_plus_date_snapshot_is_still_recognised():
    _, sent = await two_turns("claude-sonnet-4-5", "claude-sonnet-4-5-20250929")
    assert sent[1]["content"][0]["type"] == "thinking"


async def test_another_model_is_not_claimed():
    # a server-side fallback to a different model: its signature is not ours to resend
    _, sent = await two_turns("claude-sonnet-4-0", "claude-opus-4-1-20250805")
    assert sent[1]["content"][0] == {"type": "text", "text": "I should look it up."}


async def test_a_date_suffix_alone_is_not_enough():
    # looks like "<alias>-<digits>" but the catalogue does not list it as this alias's snapshot
    _, sent = await two_turns("claude-opus-4-5", "claude-opus-4-5-20990101")
    assert sent[1]["content"][0]["type"] == "text"


async def test_recorded_alias_answer_replays_its_signed_thinking_on_the_next_turn():
    sidecar = json.loads((RECORDED / "pyd_thinking_signature_text.source.json").read_text())
    requested = sidecar["recorded_request_model"]
    body = (RECORDED / "pyd_thinking_signature_text.sse").read_bytes()
    with ScriptedServer() as server:
        model = get_model("anthropic", requested, base_url=server.url)
        server.push(Reply(chunks=[body]))
        first = await stream_simple_anthropic_messages(
            model, Context(messages=[UserMessage(content="How do I cross the street?")]),
            {"api_key": "k", "reasoning": "medium"}).result()
    assert (requested, first.model) == ("claude-sonnet-4-0", "claude-sonnet-4-20250514")
    thinking = first.content[0]
    assert isinstance(thinking, ThinkingContent) and thinking.thinking_signature
    sent = convert_messages([UserMessage(content="q"), first, UserMessage(content="and then?")], model)
    assert sent[1]["content"][0] == {"type": "thinking", "thinking": thinking.thinking,
                                     "signature": thinking.thinking_signature}


def test_catalogue_snapshots_match_the_catalogue_names():
    # "<Name> (latest)" is the alias of "<Name>" wherever both are listed
    models = get_models("anthropic")
    by_name = {m.name: m.id for m in models}
    checked = 0
    for alias in models:
        if alias.name.endswith(" (latest)") and alias.name[:-9] in by_name:
            assert is_answered_snapshot(alias, by_name[alias.name[:-9]]), alias.id
            checked += 1
    assert checked >= 5
    assert not is_answered_snapshot(get_model("anthropic", "claude-sonnet-4-0"), "claude-sonnet-4-0")


@pytest.mark.parametrize("requested,answered", [
    ("claude-sonnet-4-0", "claude-sonnet-4-20250514"), ("claude-opus-4-0", "claude-opus-4-20250514"),
    ("claude-3-7-sonnet-latest", "claude-3-7-sonnet-20250219"),
])
def test_snapshots_recorded_in_the_catalogue(requested, answered):
    assert is_answered_snapshot(get_model("anthropic", requested), answered)


def test_a_proxy_provider_of_the_same_api_uses_the_catalogue_too():
    model = get_model("anthropic", "claude-sonnet-4-0").model_copy(update={"provider": "my-proxy"})
    assert is_answered_snapshot(model, "claude-sonnet-4-20250514")
    assert not is_answered_snapshot(model.model_copy(update={"id": "unknown-model"}), "unknown-model-1")


def test_convert_messages_claims_only_catalogued_snapshots():
    model = get_model("anthropic", "claude-sonnet-4-0")
    turn = AssistantMessage(content=[ThinkingContent(thinking="t", thinking_signature="sig"),
                                     ToolCall(id="toolu_1", name="lookup", arguments={})],
                            api="anthropic-messages", provider="anthropic",
                            model="claude-sonnet-4-20250514", stop_reason="toolUse")
    sent = convert_messages([UserMessage(content="q"), turn], model)
    assert sent[1]["content"][0] == {"type": "thinking", "thinking": "t", "signature": "sig"}
    assert turn.model == "claude-sonnet-4-20250514"  # the caller's message is not changed
