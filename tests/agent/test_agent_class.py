"""The stateful Agent: spec checklist 6.B (items 25-46) and 6.E items 74-77, plus the
Python-specific run-slot mechanics and the notebook additions (queue snapshots,
``remove_queued``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agent_helpers import (
    MODEL, MockStream, assistant, call, make_tool, message_text, roles, text, user,
)

from pi_notebook.agent import AbortSignal, Agent, AgentStartEvent, AgentToolResult
from pi_notebook.agent.agent import RunHandle
from pi_notebook.agent import loop as loop_module
from pi_notebook.ai.types import ImageContent, Model, TextContent, UserMessage


def make_agent(stream: Any, **kw: Any) -> Agent:
    initial = kw.pop("initial_state", {})
    initial.setdefault("model", MODEL)
    return Agent(initial_state=initial, stream_fn=stream, **kw)


def gated_stream(gate: asyncio.Event, *answers: Any) -> MockStream:
    """A stream whose answers wait for ``gate`` (to hold a run open)."""
    async def step(context, options, answer=None):
        await gate.wait()
        return answer

    return MockStream(*[(lambda c, o, a=a: step(c, o, a)) for a in answers])


@pytest.fixture
def restore_default_stream_fn():
    saved = loop_module._default_stream_fn
    yield
    loop_module._default_stream_fn = saved


async def test_item_25_agent_without_stream_fn_uses_default(restore_default_stream_fn):
    stream = MockStream(assistant("hi"))
    loop_module.set_default_stream_fn(stream)
    agent = Agent(initial_state={"model": MODEL})
    assert agent.stream_function is stream
    await agent.prompt("hello")
    assert stream.call_count == 1
    loop_module.set_default_stream_fn(None)
    with pytest.raises(RuntimeError, match="No default stream function configured"):
        Agent()


def test_item_26_default_state():
    agent = Agent(stream_fn=MockStream())
    state = agent.state
    assert state.system_prompt == ""
    assert isinstance(state.model, Model) and state.model.id == "unknown"
    assert state.thinking_level == "off"
    assert state.tools == [] and state.messages == []
    assert state.is_streaming is False and state.streaming_message is None
    assert state.pending_tool_calls == set() and state.error_message is None
    assert agent.signal is None


def test_item_27_initial_state():
    model = MODEL.model_copy()
    agent = Agent(stream_fn=MockStream(), initial_state={
        "system_prompt": "be brief", "model": model, "thinking_level": "high"})
    assert agent.state.system_prompt == "be brief"
    assert agent.state.model is model
    assert agent.state.thinking_level == "high"


async def test_item_28_subscribe_and_unsubscribe():
    seen: list[str] = []
    agent = make_agent(MockStream(assistant("a"), assistant("b")))
    unsubscribe = agent.subscribe(lambda event, signal: seen.append(event.type))
    assert seen == []
    agent.state.system_prompt = "changed"
    assert seen == []
    await agent.prompt("one")
    assert seen and seen[-1] == "agent_end"
    count = len(seen)
    unsubscribe()
    await agent.prompt("two")
    assert len(seen) == count


async def test_item_29_throwing_stream_fn_gives_failure_turn():
    def exploding(model, context, options):
        raise RuntimeError("provider exploded")

    agent = make_agent(exploding)
    seen: list[str] = []
    agent.subscribe(lambda event, signal: seen.append(event.type))
    result = await agent.prompt("hello")
    assert result is None
    assert seen == ["agent_start", "turn_start", "message_start", "message_end", "message_start",
                    "message_end", "turn_end", "agent_end"]
    last = agent.state.messages[-1]
    assert last.role == "assistant" and last.stop_reason == "error"
    assert last.error_message == "provider exploded"
    assert agent.state.error_message == "provider exploded"
    assert last.content == [TextContent(text="")] and last.api == MODEL.api
    assert agent.state.is_streaming is False


async def test_item_30_prompt_waits_for_async_agent_end_listener():
    agent = make_agent(MockStream(assistant("a")))
    reached, release = asyncio.Event(), asyncio.Event()
    finished: list[bool] = []

    async def listener(event, signal):
        if event.type == "agent_end":
            reached.set()
            await release.wait()
            finished.append(True)

    agent.subscribe(listener)
    task = asyncio.ensure_future(agent.prompt("hi"))
    await reached.wait()
    await asyncio.sleep(0.01)
    assert not task.done() and agent.state.is_streaming is True
    release.set()
    await task
    assert finished == [True] and agent.state.is_streaming is False


async def test_item_31_wait_for_idle_waits_for_listener():
    agent = make_agent(MockStream(assistant("a")))
    reached, release = asyncio.Event(), asyncio.Event()

    async def listener(event, signal):
        if event.type == "message_end" and event.message.role == "assistant":
            reached.set()
            await release.wait()

    agent.subscribe(listener)
    agent.prompt("hi")
    idle = asyncio.ensure_future(agent.wait_for_idle())
    await reached.wait()
    await asyncio.sleep(0.01)
    assert not idle.done() and agent.state.is_streaming is True
    release.set()
    await idle
    assert agent.state.is_streaming is False
    await agent.wait_for_idle()  # idle: returns at once


async def test_item_32_listeners_get_the_run_signal():
    agent = make_agent(MockStream(assistant("a")))
    seen: list[tuple[str, bool]] = []

    def listener(event, signal):
        assert isinstance(signal, AbortSignal)
        seen.append((event.type, signal.aborted))
        if event.type == "turn_start":
            agent.abort()

    agent.subscribe(listener)
    await agent.prompt("hi")
    assert seen[0] == ("agent_start", False)
    assert seen[-1] == ("agent_end", True)
    assert agent.state.messages[-1].stop_reason == "aborted"


async def test_item_33_late_on_update_is_ignored():
    errors: list[Any] = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: errors.append(ctx))
    late_done = asyncio.Event()

    async def execute(tool_call_id, params, signal, on_update):
        on_update(AgentToolResult(content=[text("in flight")], details={}))

        def late() -> None:
            on_update(AgentToolResult(content=[text("late")], details={}))
            late_done.set()

        asyncio.get_running_loop().call_later(0.01, late)
        return AgentToolResult(content=[text("done")], details={}, terminate=True)

    stream = MockStream(assistant([call("t1", "echo", {"value": "a"})]))
    agent = make_agent(stream, initial_state={"tools": [make_tool(execute=execute)]})
    seen: list[Any] = []
    agent.subscribe(lambda event, signal: seen.append(event))
    await agent.prompt("go")
    await late_done.wait()
    await asyncio.sleep(0)
    updates = [e for e in seen if e.type == "tool_execution_update"]
    assert len(updates) == 1 and updates[0].partial_result.content[0].text == "in flight"
    assert stream.call_count == 1
    assert errors == []


async def test_item_34_parallel_late_update_while_other_tool_runs_emits_nothing():
    async def fast(tool_call_id, params, signal, on_update):
        asyncio.get_running_loop().call_soon(
            on_update, AgentToolResult(content=[text("late")], details={}))
        return AgentToolResult(content=[text("fast")], details={})

    async def slow(tool_call_id, params, signal, on_update):
        await asyncio.sleep(0.03)
        return AgentToolResult(content=[text("slow")], details={})

    stream = MockStream(assistant([call("t1", "fast", {"value": "a"}),
                                   call("t2", "slow", {"value": "b"})]), assistant("done"))
    agent = make_agent(stream, initial_state={
        "tools": [make_tool("fast", fast), make_tool("slow", slow)]})
    seen: list[str] = []
    agent.subscribe(lambda event, signal: seen.append(event.type))
    await agent.prompt("go")
    assert seen.count("tool_execution_update") == 0
    assert seen.count("tool_execution_end") == 2


def test_item_35_state_mutators():
    agent = Agent(stream_fn=MockStream())
    state = agent.state
    state.system_prompt = "p"
    state.model = MODEL
    state.thinking_level = "low"
    assert (state.system_prompt, state.model, state.thinking_level) == ("p", MODEL, "low")
    tools = [make_tool()]
    state.tools = tools
    assert state.tools == tools and state.tools is not tools
    messages = [user("a")]
    state.messages = messages
    assert state.messages == messages and state.messages is not messages
    extra = user("b")
    state.messages.append(extra)
    assert state.messages[-1] is extra and len(state.messages) == 2
    state.messages = []
    assert state.messages == []
    with pytest.raises(AttributeError):
        state.is_streaming = True  # type: ignore[misc]


def test_item_36_steer_queues_without_touching_messages():
    agent = Agent(stream_fn=MockStream())
    message = user("steer")
    assert agent.steer(message) is message
    assert agent.state.messages == [] and agent.has_queued_messages()
    assert agent.steering_queue == (message,)


def test_item_37_follow_up_queues_without_touching_messages():
    agent = Agent(stream_fn=MockStream())
    message = user("later")
    agent.follow_up(message)
    assert agent.state.messages == [] and agent.has_queued_messages()
    assert agent.follow_up_queue == (message,)


def test_item_38_abort_while_idle_does_not_throw():
    Agent(stream_fn=MockStream()).abort()


async def test_item_39_reset_during_run_throws():
    gate = asyncio.Event()
    agent = make_agent(gated_stream(gate, assistant("a")))
    handle = agent.prompt("hello")
    await asyncio.sleep(0.01)
    with pytest.raises(RuntimeError, match=r"^Agent is already processing\. Wait for completion "
                                            r"before resetting\.$"):
        agent.reset()
    assert agent.state.is_streaming is True and roles(agent.state.messages) == ["user"]
    gate.set()
    await handle
    assert roles(agent.state.messages) == ["user", "assistant"]
    assert agent.state.is_streaming is False


async def test_item_40_prompt_during_run_raises():
    gate = asyncio.Event()
    agent = make_agent(gated_stream(gate, assistant("a")))
    handle = agent.prompt("first")
    with pytest.raises(RuntimeError) as info:
        await agent.prompt("second")  # right away: the slot is already claimed
    assert str(info.value) == ("Agent is already processing a prompt. Use steer() or follow_up() "
                               "to queue messages, or wait for completion.")
    gate.set()
    await handle


async def test_item_41_continue_during_run_raises():
    gate = asyncio.Event()
    agent = make_agent(gated_stream(gate, assistant("a")))
    handle = agent.prompt("first")
    with pytest.raises(RuntimeError, match=r"^Agent is already processing\. Wait for completion "
                                            r"before continuing\.$"):
        await agent.continue_()
    gate.set()
    await handle


async def test_item_42_continue_from_assistant_runs_queued_follow_up():
    stream = MockStream(assistant("first"), assistant("second"))
    agent = make_agent(stream)
    await agent.prompt("hello")
    agent.follow_up("follow-up text")
    assert await agent.continue_() is None
    assert any(m.role == "user" and message_text(m) == "follow-up text"
               for m in agent.state.messages)
    assert agent.state.messages[-1].role == "assistant"


async def test_item_43_continue_with_two_steering_messages_one_at_a_time():
    stream = MockStream(assistant("a1"), assistant("a2"), assistant("a3"))
    agent = make_agent(stream)
    await agent.prompt("start")
    calls_before = stream.call_count
    agent.steer("steer one")
    agent.steer("steer two")
    await agent.continue_()
    assert roles(agent.state.messages)[-4:] == ["user", "assistant", "user", "assistant"]
    assert [message_text(m) for m in agent.state.messages[-4::2]] == ["steer one", "steer two"]
    assert stream.call_count - calls_before == 2


async def test_item_44_legacy_prepare_next_turn_receives_signal():
    seen: list[Any] = []
    stream = MockStream(assistant([call("t1", "echo", {"value": "a"})]), assistant("done"))
    agent = make_agent(stream, initial_state={"tools": [make_tool()]},
                       prepare_next_turn=lambda signal: seen.append(signal))
    await agent.prompt("go")
    assert len(seen) == 1 and isinstance(seen[0], AbortSignal)
    assert stream.call_count == 2


async def test_item_45_should_stop_after_turn_receives_context_and_signal():
    seen: list[Any] = []

    def should_stop(context, signal):
        seen.append((roles(context.context.messages), isinstance(signal, AbortSignal)))
        return True

    stream = MockStream(assistant([call("t1", "echo", {"value": "a"})]), assistant("never"))
    agent = make_agent(stream, initial_state={"tools": [make_tool()]},
                       should_stop_after_turn=should_stop)
    await agent.prompt("go")
    assert seen == [(["user", "assistant", "toolResult"], True)]
    assert stream.call_count == 1


async def test_item_46_session_id_is_forwarded_and_mutable():
    stream = MockStream(assistant("a"), assistant("b"))
    agent = make_agent(stream, session_id="s-1")
    await agent.prompt("one")
    agent.session_id = "s-2"
    await agent.prompt("two")
    assert [c["options"]["session_id"] for c in stream.calls] == ["s-1", "s-2"]
    # the Agent passes no api_key/temperature/max_tokens (spec 4.5)
    assert stream.calls[0]["options"]["api_key"] is None
    assert "temperature" not in stream.calls[0]["options"]
    assert stream.calls[0]["options"]["transport"] == "auto"


# --- 6.E (74-77) ----------------------------------------------------------------------------

async def test_item_74_continue_with_steering_skips_initial_poll():
    stream = MockStream(assistant("a1"), assistant("a2"), assistant("a3"))
    agent = make_agent(stream)
    await agent.prompt("start")
    agent.steer("one")
    agent.steer("two")
    await agent.continue_()
    first = stream.calls[1]["messages"]
    assert message_text(first[-1]) == "one"
    assert all(message_text(m) != "two" for m in first)  # S0 returned [] for this run
    assert message_text(stream.calls[2]["messages"][-1]) == "two"


async def test_item_75_reset_keeps_prompt_model_thinking_and_tools():
    tools = [make_tool()]
    agent = make_agent(MockStream(assistant("a")), initial_state={
        "system_prompt": "sp", "thinking_level": "low", "tools": tools})
    await agent.prompt("hi")
    agent.steer("queued")
    agent.follow_up("queued too")
    agent.state.error_message = "old"
    agent.reset()
    state = agent.state
    assert state.messages == [] and not agent.has_queued_messages()
    assert state.error_message is None and state.streaming_message is None
    assert (state.system_prompt, state.model, state.thinking_level) == ("sp", MODEL, "low")
    assert state.tools == tools


async def test_item_76_pending_tool_calls_is_a_fresh_set_per_change():
    seen: list[tuple[str, Any, frozenset[str]]] = []

    async def slow(tool_call_id, params, signal, on_update):
        await asyncio.sleep(0.01)
        return AgentToolResult(content=[text("x")], details={})

    stream = MockStream(assistant([call("t1", "echo", {"value": "a"}),
                                   call("t2", "echo", {"value": "b"})]), assistant("done"))
    agent = make_agent(stream, initial_state={"tools": [make_tool(execute=slow)]})
    initial = agent.state.pending_tool_calls

    def listener(event, signal):
        if event.type.startswith("tool_execution"):
            pending = agent.state.pending_tool_calls
            seen.append((event.type, pending, frozenset(pending)))

    agent.subscribe(listener)
    await agent.prompt("go")
    assert [s[2] for s in seen] == [frozenset({"t1"}), frozenset({"t1", "t2"}),
                                    frozenset({"t2"}), frozenset()]
    objects = [initial] + [s[1] for s in seen]
    assert len({id(o) for o in objects}) == len(objects)
    final = agent.state.pending_tool_calls
    assert final == set() and all(final is not o for o in objects)


async def test_item_77_listener_outside_active_run_throws():
    agent = Agent(stream_fn=MockStream())
    agent.subscribe(lambda event, signal: None)
    with pytest.raises(RuntimeError, match=r"^Agent listener invoked outside active run$"):
        await agent._emit(AgentStartEvent())


# --- Python mechanics and notebook additions -------------------------------------------------

async def test_prompt_returns_a_handle_usable_with_create_task():
    agent = make_agent(MockStream(assistant("a")))
    handle = agent.prompt("hi")
    assert isinstance(handle, RunHandle) and agent.state.is_streaming is True
    task = asyncio.get_running_loop().create_task(handle)
    await task
    assert roles(agent.state.messages) == ["user", "assistant"]


async def test_run_starts_even_if_the_handle_is_never_awaited():
    agent = make_agent(MockStream(assistant("a")))
    agent.prompt("hi")
    await agent.wait_for_idle()
    assert roles(agent.state.messages) == ["user", "assistant"]


def test_prompt_with_asyncio_run_without_a_running_loop():
    agent = make_agent(MockStream(assistant("a")))
    asyncio.run(agent.prompt("hi"))
    assert roles(agent.state.messages) == ["user", "assistant"]
    assert agent.state.is_streaming is False


async def test_prompt_text_with_images_and_message_inputs():
    stream = MockStream(assistant("a"), assistant("b"), assistant("c"))
    agent = make_agent(stream)
    image = ImageContent(data="AAAA", mime_type="image/png")
    await agent.prompt("look", images=[image])
    first = agent.state.messages[0]
    assert isinstance(first.content, list)
    assert first.content == [TextContent(text="look"), image]
    message = UserMessage(content="as message")
    await agent.prompt(message)
    assert agent.state.messages[2] is message
    batch = [user("x"), user("y")]
    await agent.prompt(batch)
    assert agent.state.messages[4:6] == batch
    with pytest.raises(TypeError, match="images"):
        agent.prompt(message, images=[image])
    with pytest.raises(TypeError, match="role"):
        agent.prompt(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="role"):
        agent.steer(None)  # type: ignore[arg-type]
    assert agent.state.is_streaming is False


async def test_steer_and_follow_up_accept_strings():
    agent = Agent(stream_fn=MockStream())
    queued = agent.steer("use a log scale")
    assert isinstance(queued, UserMessage)
    assert queued.content == [TextContent(text="use a log scale")]
    assert message_text(agent.follow_up("now fit a model")) == "now fit a model"


async def test_queue_snapshots_and_remove_queued():
    agent = Agent(stream_fn=MockStream())
    a, b = agent.steer("a"), agent.steer("b")
    c = agent.follow_up("c")
    snapshot = agent.steering_queue
    assert snapshot == (a, b) and isinstance(snapshot, tuple)
    assert agent.remove_queued(a) is True
    assert agent.steering_queue == (b,) and snapshot == (a, b)
    assert agent.remove_queued(a) is False
    assert agent.remove_queued(c) is True and agent.follow_up_queue == ()
    agent.clear_steering_queue()
    assert not agent.has_queued_messages()
    agent.steer("x")
    agent.follow_up("y")
    agent.clear_follow_up_queue()
    assert agent.steering_queue and not agent.follow_up_queue
    agent.clear_all_queues()
    assert not agent.has_queued_messages()


async def test_queue_mode_all_delivers_everything_in_one_turn():
    stream = MockStream(assistant([call("t1", "echo", {"value": "a"})]), assistant("b"))
    agent = make_agent(stream, initial_state={"tools": [make_tool()]}, steering_mode="all")
    assert agent.steering_mode == "all"
    agent.steer("s1")
    agent.steer("s2")
    await agent.prompt("go")
    texts = [message_text(m) for m in stream.calls[0]["messages"]]
    assert texts == ["go", "s1", "s2"]
    with pytest.raises(ValueError):
        agent.follow_up_mode = "sometimes"  # type: ignore[assignment]


async def test_listener_with_only_the_event_and_async_listener_order():
    order: list[str] = []
    agent = make_agent(MockStream(assistant("a")))

    async def second(event, signal):
        await asyncio.sleep(0)
        order.append(f"2:{event.type}")

    agent.subscribe(lambda event: order.append(f"1:{event.type}"))
    agent.subscribe(second)
    await agent.prompt("hi")
    assert order[:4] == ["1:agent_start", "2:agent_start", "1:turn_start", "2:turn_start"]


async def test_throwing_listener_becomes_a_failure_turn():
    agent = make_agent(MockStream(assistant("a")))
    thrown = []

    def listener(event, signal):
        if event.type == "turn_start" and not thrown:
            thrown.append(True)
            raise ValueError("listener broke")

    agent.subscribe(listener)
    await agent.prompt("hi")
    assert agent.state.error_message == "listener broke"
    assert agent.state.messages[-1].stop_reason == "error"
    assert agent.state.is_streaming is False


async def test_continue_preconditions():
    agent = make_agent(MockStream(assistant("a")))
    with pytest.raises(ValueError, match=r"^No messages to continue from$"):
        agent.continue_()
    agent.state.messages = [assistant("only")]
    with pytest.raises(ValueError, match=r"^Cannot continue from message role: assistant$"):
        agent.continue_()
    assert agent.state.is_streaming is False and agent.signal is None


async def test_thinking_level_maps_to_reasoning():
    stream = MockStream(assistant("a"), assistant("b"))
    agent = make_agent(stream, initial_state={"thinking_level": "medium"})
    await agent.prompt("x")
    agent.state.thinking_level = "off"
    await agent.prompt("y")
    assert stream.calls[0]["options"]["reasoning"] == "medium"
    assert "reasoning" not in stream.calls[1]["options"]


def test_public_names_are_exactly_the_architecture_contract():
    import pi_notebook.agent as agent_package

    events = {"AgentEvent", "AgentStartEvent", "AgentEndEvent", "TurnStartEvent", "TurnEndEvent",
              "MessageStartEvent", "MessageUpdateEvent", "MessageEndEvent",
              "ToolExecutionStartEvent", "ToolExecutionUpdateEvent", "ToolExecutionEndEvent"}
    contract = {"Agent", "AgentState", "AgentContext", "AgentTool", "AgentToolResult",
                "AgentLoopConfig", "BeforeToolCallResult", "AfterToolCallResult",
                "AgentLoopTurnUpdate", "AbortController", "AbortSignal", "run_agent_loop",
                "run_agent_loop_continue", "agent_loop", "agent_loop_continue", "tool"}
    assert set(agent_package.__all__) == contract | events
    for name in agent_package.__all__:
        assert getattr(agent_package, name) is not None
    from pi_notebook.ai import abort
    assert agent_package.AbortController is abort.AbortController


async def test_context_snapshot_is_taken_when_prompt_is_called():
    stream = MockStream(assistant("a"))
    agent = make_agent(stream, initial_state={"system_prompt": "before"})
    handle = agent.prompt("hi")
    agent.state.system_prompt = "after"  # too late for this run, as in pi
    agent.state.messages.append(user("late"))
    await handle
    assert stream.calls[0]["system_prompt"] == "before"
    assert [message_text(m) for m in stream.calls[0]["messages"]] == ["hi"]
