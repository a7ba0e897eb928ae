"""End-to-end Agent runs through the faux provider and the compat ``stream_simple``:
spec checklist 6.C (items 47-56)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agent_helpers import message_text, roles

from pi_notebook.agent import Agent, tool
from pi_notebook.ai.providers.faux import (
    faux_assistant_message, faux_text, faux_thinking, faux_tool_call, register_faux_provider,
)
from pi_notebook.ai.stream import stream_simple
from pi_notebook.ai.types import AssistantMessage, ToolResultMessage, UserMessage


@pytest.fixture
def faux():
    handle = register_faux_provider()
    yield handle
    handle.unregister()


def make_agent(faux: Any, **kw: Any) -> Agent:
    initial = {"model": faux.get_model(), "system_prompt": "You are a test agent."}
    initial.update(kw.pop("initial_state", {}))
    return Agent(initial_state=initial, stream_fn=stream_simple, **kw)


@tool
def calculate(expression: str) -> str:
    """Evaluate a multiplication like ``123 * 456``.

    Args:
        expression: two integers separated by ``*``.
    """
    left, right = (int(part) for part in expression.split("*"))
    return f"{expression} = {left * right}"


async def test_item_47_basic_prompt(faux):
    faux.set_responses([faux_assistant_message("2 + 2 = 4")])
    agent = make_agent(faux)
    await agent.prompt("What is 2 + 2?")
    assert agent.state.is_streaming is False
    assert roles(agent.state.messages) == ["user", "assistant"]
    assert "4" in message_text(agent.state.messages[1])


async def test_item_48_tool_use_and_pending_tool_calls_in_listeners(faux):
    faux.set_responses([
        faux_assistant_message([faux_tool_call("calculate", {"expression": "123 * 456"},
                                               id="calc-1")], stop_reason="toolUse"),
        lambda context, options, state, model: faux_assistant_message(
            f"The answer is {message_text(context.messages[-1]).split('= ')[-1]}"),
    ])
    agent = make_agent(faux, initial_state={"tools": [calculate]})
    pending: list[tuple[str, list[str]]] = []

    def listener(event, signal):
        if event.type in ("tool_execution_start", "tool_execution_end"):
            pending.append((event.type, sorted(agent.state.pending_tool_calls)))

    agent.subscribe(listener)
    await agent.prompt("What is 123 * 456?")
    messages = agent.state.messages
    assert len(messages) >= 4
    result = next(m for m in messages if m.role == "toolResult")
    assert "123 * 456 = 56088" in message_text(result)
    assert "56088" in message_text(messages[-1])
    assert len(agent.state.pending_tool_calls) == 0
    assert pending == [("tool_execution_start", ["calc-1"]), ("tool_execution_end", [])]


async def test_item_49_abort_during_streaming(faux):
    paced = register_faux_provider(tokens_per_second=50)
    try:
        paced.set_responses([faux_assistant_message("word " * 200)])
        agent = make_agent(paced)
        handle = agent.prompt("Tell me a long story")
        await asyncio.sleep(0.03)
        agent.abort()
        await handle
        assert agent.state.is_streaming is False
        last = agent.state.messages[-1]
        assert last.role == "assistant" and last.stop_reason == "aborted"
        assert last.error_message is not None
        assert agent.state.error_message == last.error_message
    finally:
        paced.unregister()


async def test_item_50_streamed_event_order(faux):
    faux.set_responses([faux_assistant_message("a fairly long answer to stream in chunks")])
    agent = make_agent(faux)
    seen: list[str] = []
    agent.subscribe(lambda event, signal: seen.append(event.type))
    await agent.prompt("hi")
    for kind in ("agent_start", "turn_start", "message_start", "message_update", "message_end",
                 "turn_end", "agent_end"):
        assert kind in seen
    last_agent_end = len(seen) - 1 - seen[::-1].index("agent_end")
    assert seen.index("agent_start") < seen.index("message_start") < seen.index("message_end")
    assert seen.index("message_end") < last_agent_end
    assert len(agent.state.messages) == 2


async def test_item_51_multi_turn_context(faux):
    def remembers(context, options, state, model):
        knows = any("Alice" in message_text(m) for m in context.messages if m.role == "user")
        return faux_assistant_message("Your name is Alice" if knows else "I don't know")

    faux.set_responses([faux_assistant_message("Nice to meet you, Alice"), remembers])
    agent = make_agent(faux)
    await agent.prompt("My name is Alice")
    assert len(agent.state.messages) == 2
    await agent.prompt("What is my name?")
    assert len(agent.state.messages) == 4
    assert "Alice" in message_text(agent.state.messages[-1])


async def test_item_52_thinking_is_preserved(faux):
    faux.set_responses([faux_assistant_message([faux_thinking("step by step"), faux_text("4")])])
    agent = make_agent(faux, initial_state={"thinking_level": "low"})
    await agent.prompt("2+2?")
    final = agent.state.messages[-1]
    assert [block.model_dump() for block in final.content] == [
        {"type": "thinking", "thinking": "step by step"}, {"type": "text", "text": "4"}]


async def test_item_53_continue_without_messages(faux):
    agent = make_agent(faux)
    with pytest.raises(ValueError, match=r"^No messages to continue from$"):
        await agent.continue_()


async def test_item_54_continue_from_assistant_without_queues(faux):
    agent = make_agent(faux, initial_state={"messages": [faux_assistant_message("hello")]})
    with pytest.raises(ValueError, match=r"^Cannot continue from message role: assistant$"):
        await agent.continue_()


async def test_item_55_continue_from_user(faux):
    faux.set_responses([faux_assistant_message("HELLO WORLD")])
    agent = make_agent(faux, initial_state={"messages": [UserMessage(content="Say HELLO WORLD")]})
    await agent.continue_()
    assert roles(agent.state.messages) == ["user", "assistant"]
    assert "HELLO WORLD" in message_text(agent.state.messages[-1])
    assert agent.state.is_streaming is False


async def test_item_56_continue_from_tool_result(faux):
    faux.set_responses([faux_assistant_message("5 + 3 = 8")])
    history = [
        UserMessage(content="What is 5 + 3?"),
        AssistantMessage(content=[faux_tool_call("calculate", {"expression": "5 + 3"}, id="c1")],
                         api=faux.api, provider="faux", model="faux-1", stop_reason="toolUse"),
        ToolResultMessage(tool_call_id="c1", tool_name="calculate",
                          content=[faux_text("5 + 3 = 8")], is_error=False),
    ]
    agent = make_agent(faux, initial_state={"messages": history, "tools": [calculate]})
    await agent.continue_()
    assert len(agent.state.messages) >= 4
    assert agent.state.messages[-1].role == "assistant"
    assert "8" in message_text(agent.state.messages[-1])
