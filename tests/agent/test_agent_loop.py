"""The low-level loop: spec checklist 6.A (items 1-24), 6.E items 58-73 and the
canonical event sequences of spec 3.7."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agent_helpers import (
    MODEL, MockStream, assistant, call, make_tool, message_text, model, roles, text, types, user,
)

from pi_notebook.agent import (
    AbortController, AfterToolCallResult, AgentContext, AgentLoopConfig, AgentLoopTurnUpdate,
    AgentToolResult, BeforeToolCallResult, agent_loop, agent_loop_continue, run_agent_loop,
    run_agent_loop_continue,
)
from pi_notebook.agent import loop as loop_module
from pi_notebook.ai.event_stream import AssistantMessageEventStream
from pi_notebook.ai.types import (
    DoneEvent, TextDeltaEvent, ToolResultMessage, Usage, UserMessage,
)


def cfg(**kw: Any) -> AgentLoopConfig:
    kw.setdefault("model", MODEL)
    return AgentLoopConfig(**kw)


def ctx(messages: list[Any] | None = None, tools: list[Any] | None = None,
        system_prompt: str = "sys") -> AgentContext:
    return AgentContext(system_prompt=system_prompt, messages=list(messages or []), tools=tools)


async def run(prompts: list[Any], context: AgentContext, config: AgentLoopConfig,
              stream: MockStream, signal: Any = None) -> tuple[list[Any], list[Any]]:
    events: list[Any] = []
    result = await run_agent_loop(prompts, context, config, events.append, signal, stream)
    return result, events


def ends(events: list[Any]) -> list[Any]:
    return [e for e in events if e.type == "tool_execution_end"]


def tool_results(events: list[Any]) -> list[Any]:
    return [e.message for e in events
            if e.type == "message_end" and getattr(e.message, "role", None) == "toolResult"]


@pytest.fixture
def restore_default_stream_fn():
    saved = loop_module._default_stream_fn
    yield
    loop_module._default_stream_fn = saved


# --- 6.A ------------------------------------------------------------------------------------

async def test_item_01_default_stream_fn_is_used(restore_default_stream_fn):
    stream = MockStream(assistant("hi"))
    loop_module.set_default_stream_fn(stream)
    s = agent_loop([user("hello")], ctx(), cfg())
    async for _ in s:
        pass
    assert stream.call_count == 1
    assert loop_module.get_default_stream_fn() is stream
    loop_module.set_default_stream_fn(None)
    with pytest.raises(RuntimeError, match="No default stream function configured"):
        loop_module.get_default_stream_fn()


async def test_item_02_prompt_text_answer_result_and_events():
    prompt, answer = user("hello"), assistant("hi there")
    s = agent_loop([prompt], ctx(), cfg(), stream_fn=MockStream(answer))
    events = [e async for e in s]
    result = await s.result()
    assert len(result) == 2 and result[0] is prompt and result[1] is answer
    for kind in ("agent_start", "turn_start", "message_start", "message_end", "turn_end", "agent_end"):
        assert kind in types(events)
    assert events[-1].type == "agent_end" and events[-1].messages is result


async def test_item_03_convert_to_llm_sees_custom_messages_and_filters():
    seen: list[list[Any]] = []
    notification = {"role": "notification", "text": "fyi", "timestamp": 1}

    def convert(messages: list[Any]) -> list[Any]:
        seen.append(list(messages))
        return [m for m in messages if getattr(m, "role", None) == "user"]

    stream = MockStream(assistant("ok"))
    prompt = user("hello")
    await run([prompt], ctx([notification]), cfg(convert_to_llm=convert), stream)
    assert seen[0] == [notification, prompt]
    assert stream.calls[0]["messages"] == [prompt]


async def test_item_04_transform_context_runs_before_convert_to_llm():
    history = [user(f"m{i}") for i in range(4)]
    prompt = user("m4")
    order: list[str] = []
    converted: list[list[Any]] = []

    async def transform(messages: list[Any], signal: Any) -> list[Any]:
        order.append("transform")
        return messages[-2:]

    def convert(messages: list[Any]) -> list[Any]:
        order.append("convert")
        converted.append(list(messages))
        return messages

    stream = MockStream(assistant("ok"))
    await run([prompt], ctx(history), cfg(transform_context=transform, convert_to_llm=convert), stream)
    assert order == ["transform", "convert"]
    assert converted[0] == [history[-1], prompt]
    assert stream.calls[0]["messages"] == [history[-1], prompt]


async def test_item_05_tool_call_executes_with_validated_params():
    executed: list[Any] = []
    tool = make_tool(executed=executed)
    stream = MockStream(assistant([call("tool-1", "echo", {"value": "hello"})]), assistant("done"))
    _, events = await run([user("go")], ctx(tools=[tool]), cfg(), stream)
    assert [p["value"] for p in executed] == ["hello"]
    assert "tool_execution_start" in types(events)
    (end,) = ends(events)
    assert end.is_error is False


async def test_item_06_after_tool_call_sees_and_overrides_usage():
    tool_usage = Usage(input=5, output=7, total_tokens=12)
    override = Usage(input=1, output=2, total_tokens=3)
    seen: list[Any] = []

    async def execute(tool_call_id, params, signal, on_update):
        return AgentToolResult(content=[text("r")], details={}, usage=tool_usage)

    async def after(context, signal):
        seen.append(context.result.usage)
        return AfterToolCallResult(usage=override)

    stream = MockStream(assistant([call("tool-1", "echo", {"value": "x"})]), assistant("done"))
    _, events = await run([user("go")], ctx(tools=[make_tool(execute=execute)]),
                          cfg(after_tool_call=after), stream)
    assert seen == [tool_usage]
    (result,) = tool_results(events)
    assert result.usage == override


async def test_item_07_length_stop_fails_tool_calls_without_executing():
    executed: list[Any] = []
    stream = MockStream(
        assistant([call("tool-1", "echo", {"value": "trunc"})], stop_reason="length"),
        assistant("retry answer"))
    result, events = await run([user("go")], ctx(tools=[make_tool(executed=executed)]), cfg(), stream)
    assert executed == []
    (end,) = ends(events)
    assert end.is_error is True
    assert "output token limit" in end.result.content[0].text
    assert end.result.content[0].text == (
        'Tool call "echo" was not executed: the response hit the output token limit, so its '
        "arguments may be truncated. Re-issue the tool call with complete arguments.")
    assert stream.call_count == 2
    assert result[-1].role == "assistant"


async def test_item_08_before_tool_call_mutation_reaches_execute_unvalidated():
    executed: list[Any] = []

    def before(context, signal):
        context.args["value"] = 123  # schema says string; no re-validation

    stream = MockStream(assistant([call("tool-1", "echo", {"value": "hello"})]), assistant("done"))
    first_call = stream.steps[0].content[0]
    await run([user("go")], ctx(tools=[make_tool(executed=executed)]), cfg(before_tool_call=before),
              stream)
    assert executed[0]["value"] == 123
    assert first_call.arguments == {"value": "hello"}  # the raw call is untouched


async def test_item_09_prepare_arguments_result_is_validated_and_executed():
    executed: list[Any] = []
    schema = {
        "type": "object",
        "properties": {"edits": {"type": "array", "items": {
            "type": "object",
            "properties": {"oldText": {"type": "string"}, "newText": {"type": "string"}},
            "required": ["oldText", "newText"]}}},
        "required": ["edits"],
    }

    def prepare(args: Any) -> Any:
        if "edits" in args:
            return args
        return {"edits": [{"oldText": args["oldText"], "newText": args["newText"]}]}

    tool = make_tool("edit", executed=executed, parameters=schema, prepare_arguments=prepare)
    stream = MockStream(assistant([call("tool-1", "edit", {"oldText": "a", "newText": "b"})]),
                        assistant("done"))
    _, events = await run([user("go")], ctx(tools=[tool]), cfg(), stream)
    assert executed == [{"edits": [{"oldText": "a", "newText": "b"}]}]
    assert ends(events)[0].is_error is False
    # tool_execution_start carries the raw arguments
    start = next(e for e in events if e.type == "tool_execution_start")
    assert start.args == {"oldText": "a", "newText": "b"}


async def test_item_10_parallel_end_in_completion_order_results_in_source_order():
    log: list[str] = []

    def timed(name: str, delay: float):
        async def execute(tool_call_id, params, signal, on_update):
            log.append(f"start:{tool_call_id}")
            await asyncio.sleep(delay)
            log.append(f"end:{tool_call_id}")
            return AgentToolResult(content=[text(name)], details={})
        return execute

    tools = [make_tool("slow", timed("slow", 0.05)), make_tool("fast", timed("fast", 0.0))]
    stream = MockStream(assistant([call("tool-1", "slow", {"value": "a"}),
                                   call("tool-2", "fast", {"value": "b"})]), assistant("done"))
    _, events = await run([user("go")], ctx(tools=tools), cfg(), stream)
    assert [e.tool_call_id for e in ends(events)] == ["tool-2", "tool-1"]
    assert [m.tool_call_id for m in tool_results(events)] == ["tool-1", "tool-2"]
    turn_end = next(e for e in events if e.type == "turn_end")
    assert [m.tool_call_id for m in turn_end.tool_results] == ["tool-1", "tool-2"]
    assert log.index("start:tool-2") < log.index("end:tool-1")  # the executions overlap


async def test_item_11_steering_injected_after_all_tool_calls():
    executed: list[Any] = []
    steering = user("steer now")
    queued: list[Any] = []

    async def execute(tool_call_id, params, signal, on_update):
        executed.append(tool_call_id)
        if tool_call_id == "tool-1":
            queued.append(steering)  # arrives while the batch is running
        return AgentToolResult(content=[text("ok")], details={})

    def get_steering() -> list[Any]:
        out = list(queued)
        queued.clear()
        return out

    stream = MockStream(assistant([call("tool-1", "echo", {"value": "a"}),
                                   call("tool-2", "echo", {"value": "b"})]), assistant("done"))
    _, events = await run([user("go")], ctx(tools=[make_tool(execute=execute)]),
                          cfg(tool_execution="sequential", get_steering_messages=get_steering), stream)
    assert executed == ["tool-1", "tool-2"]
    assert all(e.is_error is False for e in ends(events))
    starts = [e.message for e in events if e.type == "message_start"]
    steer_index = starts.index(steering)
    result_indexes = [i for i, m in enumerate(starts) if getattr(m, "role", None) == "toolResult"]
    assert len(result_indexes) == 2 and max(result_indexes) < steer_index
    assert steering in stream.calls[1]["messages"]


def _ordered_tools(log: list[str], modes: dict[str, str | None], delays: dict[str, float]):
    def make(name: str):
        async def execute(tool_call_id, params, signal, on_update):
            log.append(f"{name}:start")
            await asyncio.sleep(delays[name])
            log.append(f"{name}:end")
            return AgentToolResult(content=[text(name)], details={})
        return make_tool(name, execute, execution_mode=modes[name])
    return [make(n) for n in modes]


async def test_item_12_one_sequential_tool_makes_the_batch_sequential():
    log: list[str] = []
    tools = _ordered_tools(log, {"a": "sequential", "b": None}, {"a": 0.03, "b": 0.0})
    stream = MockStream(assistant([call("tool-1", "a", {"value": "1"}),
                                   call("tool-2", "b", {"value": "2"})]), assistant("done"))
    _, events = await run([user("go")], ctx(tools=tools), cfg(), stream)
    assert log == ["a:start", "a:end", "b:start", "b:end"]
    assert [m.tool_call_id for m in tool_results(events)] == ["tool-1", "tool-2"]


async def test_item_13_default_tool_waits_for_sequential_tool():
    log: list[str] = []
    tools = _ordered_tools(log, {"slow": "sequential", "fast": None}, {"slow": 0.03, "fast": 0.0})
    stream = MockStream(assistant([call("tool-1", "slow", {"value": "a"}),
                                   call("tool-2", "fast", {"value": "b"})]), assistant("done"))
    await run([user("go")], ctx(tools=tools), cfg(), stream)
    assert log[0] == "slow:start"
    assert log.index("fast:start") > log.index("slow:end")


async def test_item_14_all_parallel_tools_run_concurrently():
    log: list[str] = []
    tools = _ordered_tools(log, {"a": "parallel", "b": "parallel"}, {"a": 0.03, "b": 0.0})
    stream = MockStream(assistant([call("tool-1", "a", {"value": "1"}),
                                   call("tool-2", "b", {"value": "2"})]), assistant("done"))
    await run([user("go")], ctx(tools=tools), cfg(), stream)
    assert log.index("b:start") < log.index("a:end")


async def test_item_15_prepare_next_turn_context_is_used_for_next_call():
    def prepare(turn):
        return AgentLoopTurnUpdate(context=AgentContext(
            system_prompt="second prompt", messages=turn.context.messages, tools=turn.context.tools))

    stream = MockStream(assistant([call("tool-1", "echo", {"value": "a"})]), assistant("done"))
    await run([user("go")], ctx(tools=[make_tool()], system_prompt="first prompt"),
              cfg(prepare_next_turn=prepare), stream)
    assert stream.call_count == 2
    assert stream.calls[0]["system_prompt"] == "first prompt"
    assert stream.calls[1]["system_prompt"] == "second prompt"


async def test_item_16_should_stop_after_turn_stops_after_tool_turn():
    executed: list[Any] = []
    polls = {"steering": 0, "follow_up": 0}
    seen: list[Any] = []

    def steering() -> list[Any]:
        polls["steering"] += 1
        return []

    def follow_up() -> list[Any]:
        polls["follow_up"] += 1
        return [user("follow up")]

    def should_stop(turn) -> bool:
        seen.append(([m.tool_call_id for m in turn.tool_results], roles(turn.context.messages)))
        return True

    stream = MockStream(assistant([call("tool-1", "echo", {"value": "x"})]), assistant("never"))
    result, events = await run(
        [user("go")], ctx(tools=[make_tool(executed=executed)]),
        cfg(should_stop_after_turn=should_stop, get_steering_messages=steering,
            get_follow_up_messages=follow_up), stream)
    assert stream.call_count == 1 and len(executed) == 1
    assert polls == {"steering": 1, "follow_up": 0}
    assert seen == [(["tool-1"], ["user", "assistant", "toolResult"])]
    assert roles(result) == ["user", "assistant", "toolResult"]
    # spec 3.7 sequence 3, exactly
    assert types(events) == [
        "agent_start", "turn_start", "message_start", "message_end", "message_start",
        "message_end", "tool_execution_start", "tool_execution_end", "message_start",
        "message_end", "turn_end", "agent_end"]


async def test_item_17_all_terminating_results_stop_the_loop():
    tools = [make_tool(terminate=True)]
    stream = MockStream(assistant([call("tool-1", "echo", {"value": "x"})]), assistant("never"))
    result, events = await run([user("go")], ctx(tools=tools), cfg(), stream)
    assert stream.call_count == 1
    assert roles(result) == ["user", "assistant", "toolResult"]
    assert types(events).count("turn_end") == 1


async def test_item_18_blocked_before_tool_call_with_terminate():
    executed: list[Any] = []

    def before(context, signal):
        return BeforeToolCallResult(block=True, reason="Blocked by policy", terminate=True)

    stream = MockStream(assistant([call("tool-1", "echo", {"value": "x"})]), assistant("never"))
    result, events = await run([user("go")], ctx(tools=[make_tool(executed=executed)]),
                               cfg(before_tool_call=before), stream)
    assert executed == [] and stream.call_count == 1
    (message,) = tool_results(events)
    assert message.is_error is True
    assert message.content[0].model_dump() == {"type": "text", "text": "Blocked by policy"}


async def test_item_19_mixed_blocked_terminating_batch_continues():
    executed: list[Any] = []

    def before(context, signal):
        if context.tool_call.id == "tool-1":
            return BeforeToolCallResult(block=True, reason="no", terminate=True)
        return None

    stream = MockStream(assistant([call("tool-1", "echo", {"value": "first"}),
                                   call("tool-2", "echo", {"value": "second"})]), assistant("done"))
    await run([user("go")], ctx(tools=[make_tool(executed=executed)]), cfg(before_tool_call=before),
              stream)
    assert [p["value"] for p in executed] == ["second"]
    assert stream.call_count == 2


async def test_item_20_partially_terminating_batch_continues():
    async def execute(tool_call_id, params, signal, on_update):
        return AgentToolResult(content=[text("r")], details={}, terminate=tool_call_id == "tool-1")

    stream = MockStream(assistant([call("tool-1", "echo", {"value": "a"}),
                                   call("tool-2", "echo", {"value": "b"})]), assistant("done"))
    result, _ = await run([user("go")], ctx(tools=[make_tool(execute=execute)]), cfg(), stream)
    assert stream.call_count == 2
    assert roles(result) == ["user", "assistant", "toolResult", "toolResult", "assistant"]


async def test_item_21_after_tool_call_terminate_override_stops():
    def after(context, signal):
        return AfterToolCallResult(terminate=True)

    stream = MockStream(assistant([call("tool-1", "echo", {"value": "a"})]), assistant("never"))
    await run([user("go")], ctx(tools=[make_tool()]), cfg(after_tool_call=after), stream)
    assert stream.call_count == 1


async def test_item_22_continue_on_empty_context_raises_synchronously():
    stream = MockStream(assistant("x"))
    with pytest.raises(ValueError, match=r"^Cannot continue: no messages in context$"):
        agent_loop_continue(ctx([]), cfg(), stream_fn=stream)
    with pytest.raises(ValueError, match=r"^Cannot continue from message role: assistant$"):
        agent_loop_continue(ctx([user("a"), assistant("b")]), cfg(), stream_fn=stream)
    # the awaitable form rejects with the same errors
    with pytest.raises(ValueError, match=r"^Cannot continue: no messages in context$"):
        await run_agent_loop_continue(ctx([]), cfg(), lambda e: None, None, stream)
    assert stream.call_count == 0


async def test_item_23_continue_from_user_emits_no_user_events():
    prompt = user("hello")
    s = agent_loop_continue(ctx([prompt]), cfg(), stream_fn=MockStream(assistant("hi")))
    events = [e async for e in s]
    result = await s.result()
    assert roles(result) == ["assistant"]
    message_ends = [e for e in events if e.type == "message_end"]
    assert len(message_ends) == 1 and message_ends[0].message.role == "assistant"
    # spec 3.7 sequence 4
    assert types(events) == ["agent_start", "turn_start", "message_start", "message_end",
                             "turn_end", "agent_end"]


async def test_item_24_continue_accepts_custom_role_last_message():
    custom = {"role": "hookMessage", "text": "from a hook", "timestamp": 1}

    def convert(messages: list[Any]) -> list[Any]:
        return [UserMessage(content=m["text"]) if isinstance(m, dict) else m for m in messages]

    stream = MockStream(assistant("ok"))
    s = agent_loop_continue(ctx([custom]), cfg(convert_to_llm=convert), stream_fn=stream)
    result = [e async for e in s] and await s.result()
    assert roles(result) == ["assistant"]
    assert message_text(stream.calls[0]["messages"][0]) == "from a hook"


# --- 6.E (58-73) ----------------------------------------------------------------------------

async def test_item_58_parallel_preflight_events_come_before_any_execution():
    log: list[str] = []

    async def execute(tool_call_id, params, signal, on_update):
        log.append(f"exec:{tool_call_id}")
        return AgentToolResult(content=[text("ok")], details={})

    def emit(event: Any) -> None:
        if event.type.startswith("tool_execution"):
            log.append(f"{event.type}:{event.tool_call_id}")

    stream = MockStream(assistant([call("a", "echo", {"value": "1"}), call("b", "missing", {}),
                                   call("c", "echo", {"value": "3"})]), assistant("done"))
    await run_agent_loop([user("go")], ctx(tools=[make_tool(execute=execute)]), cfg(), emit, None,
                         stream)
    assert log[:4] == ["tool_execution_start:a", "tool_execution_start:b",
                       "tool_execution_end:b", "tool_execution_start:c"]
    assert {"exec:a", "exec:c"} <= set(log[4:])


async def test_item_59_tool_not_found_without_hooks():
    calls: list[str] = []
    stream = MockStream(assistant([call("t1", "missing", {"x": 1})]), assistant("done"))
    _, events = await run([user("go")], ctx(tools=[make_tool()]),
                          cfg(before_tool_call=lambda c, s: calls.append("before"),
                              after_tool_call=lambda c, s: calls.append("after")), stream)
    (end,) = ends(events)
    assert end.is_error and end.result.content[0].text == "Tool missing not found"
    assert calls == []


async def test_item_60_validation_failure_message():
    executed: list[Any] = []
    stream = MockStream(assistant([call("t1", "echo", {"value": {"nested": True}})]),
                        assistant("done"))
    _, events = await run([user("go")], ctx(tools=[make_tool(executed=executed)]), cfg(), stream)
    (end,) = ends(events)
    assert end.is_error
    assert end.result.content[0].text.startswith('Validation failed for tool "echo":')
    assert executed == []


async def test_item_61_throwing_tool_gives_error_result_and_after_hook_runs():
    seen: list[Any] = []

    async def execute(tool_call_id, params, signal, on_update):
        raise RuntimeError("tool exploded")

    def after(context, signal):
        seen.append((context.is_error, context.result.content[0].text))

    stream = MockStream(assistant([call("t1", "echo", {"value": "x"})]), assistant("done"))
    _, events = await run([user("go")], ctx(tools=[make_tool(execute=execute)]),
                          cfg(after_tool_call=after), stream)
    (end,) = ends(events)
    assert end.is_error and end.result.content[0].text == "tool exploded"
    assert seen == [(True, "tool exploded")]


async def test_item_62_throwing_after_tool_call_replaces_result():
    def after(context, signal):
        raise ValueError("after failed")

    stream = MockStream(assistant([call("t1", "echo", {"value": "x"})]), assistant("done"))
    _, events = await run([user("go")], ctx(tools=[make_tool()]), cfg(after_tool_call=after), stream)
    (end,) = ends(events)
    assert end.is_error and end.result.content[0].text == "after failed"
    assert tool_results(events)[0].is_error is True


async def test_item_63_after_tool_call_skipped_for_immediate_outcomes():
    after_calls: list[str] = []

    def after(context, signal):
        after_calls.append(context.tool_call.id)

    def before(context, signal):
        if context.tool_call.id == "blocked":
            return BeforeToolCallResult(block=True)
        if context.tool_call.id == "aborting":
            controller.abort()
        return None

    controller = AbortController()
    batch = [call("missing", "nope", {}), call("invalid", "echo", {}),
             call("blocked", "echo", {"value": "x"}), call("aborting", "echo", {"value": "y"})]
    stream = MockStream(assistant(batch), assistant("never"))
    _, events = await run([user("go")], ctx(tools=[make_tool()]),
                          cfg(before_tool_call=before, after_tool_call=after,
                              tool_execution="sequential"), stream, controller.signal)
    assert [e.result.content[0].text for e in ends(events)][3] == "Operation aborted"
    # truncated (length) calls skip it too
    stream2 = MockStream(assistant([call("t", "echo", {"value": "x"})], stop_reason="length"),
                         assistant("done"))
    await run([user("go")], ctx(tools=[make_tool()]), cfg(after_tool_call=after), stream2)
    assert after_calls == []


async def test_item_64_block_without_reason_text():
    stream = MockStream(assistant([call("t1", "echo", {"value": "x"})]), assistant("done"))
    _, events = await run([user("go")], ctx(tools=[make_tool()]),
                          cfg(before_tool_call=lambda c, s: {"block": True}), stream)
    assert ends(events)[0].result.content[0].text == "Tool execution was blocked"


async def test_item_65a_parallel_thunk_started_after_abort_is_aborted():
    controller = AbortController()
    executed: list[Any] = []

    def before(context, signal):
        if context.tool_call.id == "t2":
            # fires after preflight, before the execution tasks take their first step
            asyncio.get_running_loop().call_soon(controller.abort)

    stream = MockStream(assistant([call("t1", "echo", {"value": "a"}),
                                   call("t2", "echo", {"value": "b"})]), assistant("never"))
    result, events = await run([user("go")], ctx(tools=[make_tool(executed=executed)]),
                               cfg(before_tool_call=before), stream, controller.signal)
    assert executed == []
    assert [(e.tool_call_id, e.result.content[0].text) for e in ends(events)] == [
        ("t1", "Operation aborted"), ("t2", "Operation aborted")]
    assert roles(result) == ["user", "assistant", "toolResult", "toolResult", "assistant"]
    assert result[-1].stop_reason == "aborted"


async def test_item_65b_abort_during_preflight_stops_remaining_calls():
    controller = AbortController()

    def before(context, signal):
        controller.abort()

    stream = MockStream(assistant([call("t1", "echo", {"value": "a"}),
                                   call("t2", "echo", {"value": "b"})]), assistant("never"))
    result, events = await run([user("go")], ctx(tools=[make_tool()]), cfg(before_tool_call=before),
                               stream, controller.signal)
    starts = [e.tool_call_id for e in events if e.type == "tool_execution_start"]
    assert starts == ["t1"]
    assert [e.result.content[0].text for e in ends(events)] == ["Operation aborted"]
    assert roles(result) == ["user", "assistant", "toolResult", "assistant"]


async def test_item_65c_sequential_abort_leaves_remaining_calls_without_results():
    controller = AbortController()

    async def execute(tool_call_id, params, signal, on_update):
        controller.abort()
        return AgentToolResult(content=[text("partial work")], details={})

    stream = MockStream(assistant([call("t1", "echo", {"value": "a"}),
                                   call("t2", "echo", {"value": "b"})]), assistant("never"))
    result, events = await run([user("go")], ctx(tools=[make_tool(execute=execute)]),
                               cfg(tool_execution="sequential"), stream, controller.signal)
    assert [e.tool_call_id for e in events if e.type == "tool_execution_start"] == ["t1"]
    assert roles(result) == ["user", "assistant", "toolResult", "assistant"]
    assert result[-1].stop_reason == "aborted"
    assert types(events)[-2:] == ["turn_end", "agent_end"]


async def test_item_66_result_content_none_becomes_empty_and_terminate_not_persisted():
    async def execute(tool_call_id, params, signal, on_update):
        return AgentToolResult(content=None, details={"k": 1}, terminate=True)

    stream = MockStream(assistant([call("t1", "echo", {"value": "a"})]))
    _, events = await run([user("go")], ctx(tools=[make_tool(execute=execute)]), cfg(), stream)
    (message,) = tool_results(events)
    assert isinstance(message, ToolResultMessage)
    assert message.content == [] and message.details == {"k": 1}
    assert "terminate" not in message.model_dump() and not hasattr(message, "terminate")


@pytest.mark.parametrize("stop_reason", ["error", "aborted"])
async def test_item_67_error_or_aborted_turn_ends_the_loop(stop_reason):
    polls: list[str] = []
    stream = MockStream(assistant([call("t1", "echo", {"value": "a"})], stop_reason=stop_reason,
                                  error_message="boom"))
    result, events = await run(
        [user("go")], ctx(tools=[make_tool()]),
        cfg(get_steering_messages=lambda: polls.append("steer") or [],
            get_follow_up_messages=lambda: polls.append("follow") or [],
            should_stop_after_turn=lambda t: polls.append("stop") or False), stream)
    turn_end = next(e for e in events if e.type == "turn_end")
    assert turn_end.tool_results == []
    assert "tool_execution_start" not in types(events)
    assert polls == ["steer"]  # only the initial S0 poll
    assert types(events)[-2:] == ["turn_end", "agent_end"]
    assert roles(result) == ["user", "assistant"]


async def test_item_68_follow_ups_polled_only_when_loop_would_stop():
    log: list[str] = []
    follow = user("and then?")
    queue = [follow]

    def follow_ups() -> list[Any]:
        log.append("follow_up_poll")
        out = list(queue)
        queue.clear()
        return out

    def stream_step(name: str):
        def step(context, options):
            log.append(f"llm:{name}")
            return assistant([call("t1", "echo", {"value": "a"})]) if name == "1" else assistant(name)
        return step

    stream = MockStream(stream_step("1"), stream_step("2"), stream_step("3"))
    result, _ = await run([user("go")], ctx(tools=[make_tool()]),
                          cfg(get_follow_up_messages=follow_ups), stream)
    assert log == ["llm:1", "llm:2", "follow_up_poll", "llm:3", "follow_up_poll"]
    assert follow in stream.calls[2]["messages"]
    assert roles(result) == ["user", "assistant", "toolResult", "assistant", "user", "assistant"]


async def test_item_69_steering_queued_before_run_is_injected_first_turn():
    steering = user("also this")
    queue = [steering]
    prompt = user("go")

    def steer() -> list[Any]:
        out = list(queue)
        queue.clear()
        return out

    stream = MockStream(assistant("ok"))
    result, events = await run([prompt], ctx(), cfg(get_steering_messages=steer), stream)
    assert stream.calls[0]["messages"] == [prompt, steering]
    assert result == [prompt, steering, result[2]]
    assert types(events).count("turn_start") == 1


async def test_item_70_prepare_next_turn_before_each_later_turn_only():
    log: list[str] = []
    queue = [user("follow")]

    def prepare(turn):
        log.append("prepare")
        return None

    def step(name):
        def f(context, options):
            log.append(f"llm:{name}")
            return assistant([call("t1", "echo", {"value": "a"})]) if name == "1" else assistant(name)
        return f

    def follow_ups():
        out = list(queue)
        queue.clear()
        return out

    stream = MockStream(step("1"), step("2"), step("3"))
    await run([user("go")], ctx(tools=[make_tool()]),
              cfg(prepare_next_turn=prepare, get_follow_up_messages=follow_ups), stream)
    assert log == ["llm:1", "prepare", "llm:2", "prepare", "llm:3"]


async def test_item_70b_prepare_next_turn_model_and_thinking_level():
    other = model("other-provider", "other")
    keys: list[str] = []

    def prepare(turn):
        return AgentLoopTurnUpdate(model=other, thinking_level="off")

    stream = MockStream(assistant([call("t1", "echo", {"value": "a"})]), assistant("done"))
    await run([user("go")], ctx(tools=[make_tool()]),
              cfg(prepare_next_turn=prepare, reasoning="high",
                  get_api_key=lambda provider: keys.append(provider) or None), stream)
    assert stream.calls[0]["options"]["reasoning"] == "high"
    assert "reasoning" not in stream.calls[1]["options"]
    assert stream.calls[1]["model"] is other
    assert keys == ["mock", "other-provider"]


async def test_item_71_get_api_key_before_every_call_overrides_config():
    answers = iter(["key-1", None])

    async def get_api_key(provider: str):
        return next(answers)

    stream = MockStream(assistant([call("t1", "echo", {"value": "a"})]), assistant("done"))
    await run([user("go")], ctx(tools=[make_tool()]),
              cfg(get_api_key=get_api_key, api_key="config-key", session_id="s1",
                  temperature=0.5), stream)
    assert [c["options"]["api_key"] for c in stream.calls] == ["key-1", "config-key"]
    options = stream.calls[0]["options"]
    assert options["session_id"] == "s1" and options["temperature"] == 0.5
    assert options["signal"] is not None


async def test_item_72_message_update_only_after_start():
    final = assistant("final")

    def stream_fn(model, context, options):
        out = AssistantMessageEventStream()
        out.push(TextDeltaEvent(content_index=0, delta="x", partial=final))  # before start: ignored
        out.push(DoneEvent(reason="stop", message=final))
        return out

    _, events = await run([user("go")], ctx(), cfg(), stream_fn)  # type: ignore[arg-type]
    assistant_events = [e for e in events if e.type.startswith("message")][2:]
    assert types(assistant_events) == ["message_start", "message_end"]
    assert assistant_events[1].message is final

    # with a start, every delta becomes a message_update with a shallow copy
    _, events = await run([user("go")], ctx(), cfg(), MockStream(assistant("abc"), streaming=True))
    updates = [e for e in events if e.type == "message_update"]
    assert [u.assistant_message_event.type for u in updates] == [
        "text_start", "text_delta", "text_delta", "text_delta", "text_end"]
    partial = updates[0].assistant_message_event.partial
    assert updates[0].message is not partial and updates[0].message.content is partial.content


async def test_item_73_continue_mutates_caller_messages_prompt_does_not():
    messages = [user("hello")]
    await run_agent_loop_continue(AgentContext(messages=messages), cfg(), lambda e: None, None,
                                  MockStream(assistant("a")))
    assert roles(messages) == ["user", "assistant"]
    original = [user("hello")]
    context = AgentContext(messages=original)
    await run_agent_loop([user("again")], context, cfg(), lambda e: None, None,
                         MockStream(assistant("b")))
    assert roles(context.messages) == ["user"] and context.messages is original


# --- spec 3.7 canonical sequences -------------------------------------------------------------

async def test_sequence_1_prompt_text_only_streaming():
    _, events = await run([user("go")], ctx(), cfg(), MockStream(assistant("hi"), streaming=True))
    assert types(events) == [
        "agent_start", "turn_start", "message_start", "message_end", "message_start",
        "message_update", "message_update", "message_update", "message_update", "message_end",
        "turn_end", "agent_end"]


async def test_sequence_1_prompt_text_only_without_start():
    _, events = await run([user("go")], ctx(), cfg(), MockStream(assistant("hi")))
    assert types(events) == ["agent_start", "turn_start", "message_start", "message_end",
                             "message_start", "message_end", "turn_end", "agent_end"]


@pytest.mark.parametrize("mode", ["sequential", "parallel"])
async def test_sequence_2_one_tool_then_final_answer(mode):
    async def execute(tool_call_id, params, signal, on_update):
        on_update(AgentToolResult(content=[text("progress")], details={}))
        return AgentToolResult(content=[text("done")], details={})

    stream = MockStream(assistant([call("t1", "echo", {"value": "a"})]), assistant("final"))
    _, events = await run([user("go")], ctx(tools=[make_tool(execute=execute)]),
                          cfg(tool_execution=mode), stream)
    assert types(events) == [
        "agent_start", "turn_start", "message_start", "message_end", "message_start",
        "message_end", "tool_execution_start", "tool_execution_update", "tool_execution_end",
        "message_start", "message_end", "turn_end", "turn_start", "message_start", "message_end",
        "turn_end", "agent_end"]


async def test_sequence_5_steering_after_tool_turn():
    steering = user("steer")
    queue: list[Any] = []

    async def execute(tool_call_id, params, signal, on_update):
        queue.append(steering)
        return AgentToolResult(content=[text("done")], details={})

    def steer():
        out = list(queue)
        queue.clear()
        return out

    stream = MockStream(assistant([call("t1", "echo", {"value": "a"})]), assistant("final"))
    _, events = await run([user("go")], ctx(tools=[make_tool(execute=execute)]),
                          cfg(get_steering_messages=steer), stream)
    i = types(events).index("turn_end")
    assert types(events)[i:i + 5] == ["turn_end", "turn_start", "message_start", "message_end",
                                      "message_start"]
    assert events[i + 2].message is steering
    assert events[i + 4].message.role == "assistant"


# --- deliberate differences and extras ----------------------------------------------------------

async def test_agent_loop_stream_raises_when_the_loop_raises():
    def convert(messages):
        raise RuntimeError("convert failed")

    s = agent_loop([user("go")], ctx(), cfg(convert_to_llm=convert), stream_fn=MockStream())
    seen: list[str] = []
    with pytest.raises(RuntimeError, match="convert failed"):
        async for event in s:
            seen.append(event.type)
    assert seen == ["agent_start", "turn_start", "message_start", "message_end"]
    with pytest.raises(RuntimeError, match="convert failed"):
        await s.result()


async def test_tool_may_return_is_error():
    async def execute(tool_call_id, params, signal, on_update):
        return AgentToolResult(content=[text("soft failure")], is_error=True)

    stream = MockStream(assistant([call("t1", "echo", {"value": "a"})]), assistant("done"))
    _, events = await run([user("go")], ctx(tools=[make_tool(execute=execute)]), cfg(), stream)
    assert ends(events)[0].is_error is True
    assert tool_results(events)[0].is_error is True


async def test_async_emit_is_awaited_at_every_call_site():
    order: list[str] = []

    async def emit(event):
        await asyncio.sleep(0)
        order.append(event.type)

    stream = MockStream(assistant([call("t1", "echo", {"value": "a"})]), assistant("done"))
    await run_agent_loop([user("go")], ctx(tools=[make_tool()]), cfg(), emit, None, stream)
    assert order == [
        "agent_start", "turn_start", "message_start", "message_end", "message_start",
        "message_end", "tool_execution_start", "tool_execution_end", "message_start",
        "message_end", "turn_end", "turn_start", "message_start", "message_end", "turn_end",
        "agent_end"]


async def test_partial_message_is_in_live_transcript_during_streaming():
    # a continue run shares the caller's list, so the live partial is visible there
    seen: list[bool] = []
    messages = [user("go")]

    def emit(event):
        if event.type == "message_update":
            seen.append(messages[-1] is event.assistant_message_event.partial)

    await run_agent_loop_continue(AgentContext(messages=messages), cfg(), emit, None,
                                  MockStream(assistant("abc"), streaming=True))
    assert seen and all(seen)
    assert messages[-1].stop_reason == "stop" and len(messages) == 2


async def test_one_abort_signal_reaches_stream_fn_hooks_and_tools():
    controller = AbortController()
    seen: dict[str, Any] = {}

    async def transform(messages, signal):
        seen["transform_context"] = signal
        return messages

    async def execute(tool_call_id, params, signal, on_update):
        seen["execute"] = signal
        return AgentToolResult(content=[text("ok")])

    def before(context, signal):
        seen["before_tool_call"] = signal

    def after(context, signal):
        seen["after_tool_call"] = signal

    stream = MockStream(assistant([call("t1", "echo", {"value": "a"})]), assistant("done"))
    await run([user("go")], ctx(tools=[make_tool(execute=execute)]),
              cfg(transform_context=transform, before_tool_call=before, after_tool_call=after),
              stream, controller.signal)
    seen["stream_fn"] = stream.calls[0]["options"]["signal"]
    assert set(seen) == {"transform_context", "execute", "before_tool_call", "after_tool_call",
                         "stream_fn"}
    assert all(signal is controller.signal for signal in seen.values())
