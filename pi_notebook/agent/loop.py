"""The agent loop (spec section 3): a port of pi agent-core 0.85.1 ``agent-loop.ts``.

``run_agent_loop`` / ``run_agent_loop_continue`` drive the double loop and await
``emit`` at every call site (the Agent's emit awaits its listeners, which gives
backpressure). ``agent_loop`` / ``agent_loop_continue`` wrap them in an
:class:`EventStream` with no backpressure. Unlike pi, that stream always ends: if
the loop raises, iteration (and ``result()``) raise the same error.

Abort is cooperative: the one :class:`AbortSignal` of a run reaches
``transform_context``, the stream function, the tool hooks and ``execute``; the loop
itself only checks it at the points pi checks it (spec 3.5).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import CoroutineType
from typing import Any

from pydantic import BaseModel

from ..ai._fast import construct_unchecked, construct_with_copy, fast_shallow_copy
from ..ai.abort import AbortSignal
from ..ai.event_stream import EventStream
from ..ai.types import (
    AssistantMessage,
    Context,
    TextContent,
    ToolCall,
    ToolResultMessage,
    arguments_incomplete,
    get_field,
    now_ms,
)
from ..ai.validation import validate_tool_arguments
from .types import (
    AfterToolCallContext,
    AgentContext,
    AgentEndEvent,
    AgentEvent,
    AgentLoopConfig,
    AgentLoopTurnUpdate,
    AgentMessage,
    AgentStartEvent,
    AgentTool,
    AgentToolResult,
    BeforeToolCallContext,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ShouldStopAfterTurnContext,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    TurnEndEvent,
    TurnStartEvent,
    message_role,
)

__all__ = [
    "AgentEventSink", "StreamFn", "run_agent_loop", "run_agent_loop_continue", "agent_loop",
    "agent_loop_continue", "stream_assistant_response", "set_default_stream_fn",
    "get_default_stream_fn",
]

AgentEventSink = Callable[[AgentEvent], Any]
"""``emit(event)``: sync or async; the loop awaits the result when it is awaitable."""

StreamFn = Callable[..., Any]
"""``(model, context, options) -> AssistantMessageEventStream`` (or an awaitable of one)."""

_TRUNCATED_TOOL_CALL = (
    'Tool call "{name}" was not executed: the response hit the output token limit, so its '
    "arguments may be truncated. Re-issue the tool call with complete arguments."
)


# --- default stream function (spec 2.7) ----------------------------------------------------

def _builtin_stream_fn() -> StreamFn:
    from ..ai.stream import stream_simple

    return stream_simple


_UNSET: Any = object()
_default_stream_fn: StreamFn | None = _UNSET  # resolved lazily to ai.stream.stream_simple


def set_default_stream_fn(fn: StreamFn | None) -> None:
    """Install the module-level default stream function; ``None`` removes it."""
    global _default_stream_fn
    _default_stream_fn = fn


def get_default_stream_fn() -> StreamFn:
    """The default stream function (``pi_notebook.ai.stream.stream_simple`` unless replaced)."""
    global _default_stream_fn
    if _default_stream_fn is _UNSET:
        _default_stream_fn = _builtin_stream_fn()
    if _default_stream_fn is None:
        raise RuntimeError(
            "No default stream function configured. Pass stream_fn explicitly or call "
            "set_default_stream_fn()."
        )
    return _default_stream_fn


# --- small helpers ----------------------------------------------------------------------

async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


def _error_message(error: BaseException) -> str:
    # pi: error.message, or String(error). A bare Python exception has an empty str().
    return str(error) or type(error).__name__


def _error_result(text: str) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text=text)], details={})


def _shallow_copy(message: Any) -> Any:
    """pi's ``{...partial}``: O(fields), never O(content).

    Pydantic messages get ``model_copy()``'s result through ``fast_shallow_copy`` (about a
    third of its cost; it runs once per streamed delta); dicts a ``dict`` copy; anything
    else is passed as is.
    """
    if isinstance(message, BaseModel):
        return fast_shallow_copy(message)
    if isinstance(message, dict):
        return dict(message)
    return message


def _message_update(message: Any, event: Any) -> MessageUpdateEvent:
    """A MessageUpdateEvent from already-typed values, without validation (whose ``Any``
    fields would not check anything anyway). The hot loop inlines this."""
    return construct_unchecked(
        MessageUpdateEvent,
        {"type": "message_update", "message": message, "assistant_message_event": event},
        {"message", "assistant_message_event"})


def _coerce_tool_result(value: Any) -> AgentToolResult:
    """Accept what a hand-written ``execute`` may reasonably return."""
    if isinstance(value, AgentToolResult):
        return value
    if isinstance(value, dict):
        return AgentToolResult.model_validate(value)
    if isinstance(value, str):
        return AgentToolResult(content=[TextContent(text=value)])
    raise TypeError(
        f"tool execute() must return an AgentToolResult, got {type(value).__name__}"
    )


# --- entry points (spec 3.1) ---------------------------------------------------------------

async def run_agent_loop(
    prompts: list[AgentMessage],
    context: AgentContext,
    config: AgentLoopConfig,
    emit: AgentEventSink,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
) -> list[AgentMessage]:
    """Run a prompt: emit the prompts, then loop. Returns the messages added by the run.

    The caller's ``context.messages`` list is not mutated (the loop works on a copy).
    """
    signal = signal if signal is not None else AbortSignal()
    new_messages: list[AgentMessage] = list(prompts)
    current_context = dataclasses.replace(context, messages=[*context.messages, *prompts])
    await _maybe_await(emit(AgentStartEvent()))
    await _maybe_await(emit(TurnStartEvent()))
    for prompt in prompts:
        await _maybe_await(emit(MessageStartEvent(message=prompt)))
        await _maybe_await(emit(MessageEndEvent(message=prompt)))
    await _run_loop(current_context, new_messages, config, signal, emit, stream_fn)
    return new_messages


def _check_continue(context: AgentContext) -> None:
    if not context.messages:
        raise ValueError("Cannot continue: no messages in context")
    if message_role(context.messages[-1]) == "assistant":
        raise ValueError("Cannot continue from message role: assistant")


async def run_agent_loop_continue(
    context: AgentContext,
    config: AgentLoopConfig,
    emit: AgentEventSink,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
) -> list[AgentMessage]:
    """Continue from the existing context (last message must not be ``assistant``).

    As in pi, this shares ``context.messages``: new assistant and tool-result
    messages are appended to the caller's list.
    """
    _check_continue(context)
    signal = signal if signal is not None else AbortSignal()
    new_messages: list[AgentMessage] = []
    current_context = dataclasses.replace(context)
    await _maybe_await(emit(AgentStartEvent()))
    await _maybe_await(emit(TurnStartEvent()))
    await _run_loop(current_context, new_messages, config, signal, emit, stream_fn)
    return new_messages


def _agent_event_stream() -> EventStream[AgentEvent, list[AgentMessage]]:
    return EventStream(lambda e: e.type == "agent_end", lambda e: e.messages)


def _drive(
    stream: EventStream[AgentEvent, list[AgentMessage]], run: Awaitable[list[AgentMessage]]
) -> EventStream[AgentEvent, list[AgentMessage]]:
    task = asyncio.ensure_future(run)

    def finished(t: asyncio.Future[list[AgentMessage]]) -> None:
        if t.cancelled():
            stream.fail(asyncio.CancelledError())
        elif (error := t.exception()) is not None:
            stream.fail(error)
        else:
            stream.end(t.result())

    task.add_done_callback(finished)
    stream._task = task  # type: ignore[attr-defined]  # keep a strong reference
    return stream


def agent_loop(
    prompts: list[AgentMessage],
    context: AgentContext,
    config: AgentLoopConfig,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
) -> EventStream[AgentEvent, list[AgentMessage]]:
    """Start ``run_agent_loop`` in a task and return its events as an EventStream.

    Must be called with a running event loop. The stream completes on ``agent_end``
    (result: the new messages); if the loop raises, iteration raises that error.
    """
    asyncio.get_running_loop()  # fail before creating the coroutine, not after
    stream = _agent_event_stream()
    return _drive(stream, run_agent_loop(prompts, context, config, stream.push, signal, stream_fn))


def agent_loop_continue(
    context: AgentContext,
    config: AgentLoopConfig,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
) -> EventStream[AgentEvent, list[AgentMessage]]:
    """Like :func:`agent_loop` for ``run_agent_loop_continue``; the preconditions raise here,
    synchronously, before anything is started."""
    _check_continue(context)
    asyncio.get_running_loop()
    stream = _agent_event_stream()
    return _drive(stream, run_agent_loop_continue(context, config, stream.push, signal, stream_fn))


# --- the double loop (spec 3.2) ------------------------------------------------------------

async def _poll(hook: Callable[[], Any] | None) -> list[AgentMessage]:
    if hook is None:
        return []
    return list(await _maybe_await(hook()) or [])


async def _run_loop(
    current_context: AgentContext,
    new_messages: list[AgentMessage],
    config: AgentLoopConfig,
    signal: AbortSignal,
    emit: AgentEventSink,
    stream_fn: StreamFn | None,
) -> None:
    stream_fn = stream_fn if stream_fn is not None else get_default_stream_fn()
    last_completed_turn: ShouldStopAfterTurnContext | None = None
    pending: list[AgentMessage] = await _poll(config.get_steering_messages)  # S0

    while True:  # OUTER
        has_more_tool_calls = True
        while has_more_tool_calls or pending:  # INNER
            if last_completed_turn is not None:
                if config.prepare_next_turn is not None:
                    update = await _maybe_await(config.prepare_next_turn(last_completed_turn))
                    if update is not None:
                        current_context, config = _apply_turn_update(update, current_context, config)
                if not pending:
                    pending = await _poll(config.get_steering_messages)  # S2
                await _maybe_await(emit(TurnStartEvent()))

            for message in pending:
                await _maybe_await(emit(MessageStartEvent(message=message)))
                await _maybe_await(emit(MessageEndEvent(message=message)))
                current_context.messages.append(message)
                new_messages.append(message)
            pending = []

            message = await stream_assistant_response(current_context, config, signal, emit, stream_fn)
            new_messages.append(message)

            if message.stop_reason in ("error", "aborted"):
                await _maybe_await(emit(TurnEndEvent(message=message, tool_results=[])))
                await _maybe_await(emit(AgentEndEvent(messages=new_messages)))
                return

            tool_calls = [block for block in message.content if isinstance(block, ToolCall)]
            tool_results: list[ToolResultMessage] = []
            has_more_tool_calls = False
            if tool_calls:
                if message.stop_reason == "length":
                    batch = await _fail_truncated_tool_calls(tool_calls, emit)
                else:
                    batch = await _execute_tool_calls(
                        current_context, message, tool_calls, config, signal, emit)
                tool_results = batch.messages
                has_more_tool_calls = not batch.terminate
                for result in tool_results:
                    current_context.messages.append(result)
                    new_messages.append(result)

            await _maybe_await(emit(TurnEndEvent(message=message, tool_results=tool_results)))

            last_completed_turn = ShouldStopAfterTurnContext(
                message=message, tool_results=tool_results, context=current_context,
                new_messages=new_messages)
            if config.should_stop_after_turn is not None and await _maybe_await(
                config.should_stop_after_turn(last_completed_turn)
            ):
                await _maybe_await(emit(AgentEndEvent(messages=new_messages)))
                return

            pending = await _poll(config.get_steering_messages)  # S1

        follow_ups = await _poll(config.get_follow_up_messages)
        if follow_ups:
            pending = follow_ups
            continue
        break

    await _maybe_await(emit(AgentEndEvent(messages=new_messages)))


def _apply_turn_update(
    update: AgentLoopTurnUpdate, context: AgentContext, config: AgentLoopConfig
) -> tuple[AgentContext, AgentLoopConfig]:
    if update.context is not None:
        context = update.context
    if update.thinking_level is None:
        reasoning = config.reasoning
    elif update.thinking_level == "off":
        reasoning = None
    else:
        reasoning = update.thinking_level
    model = update.model if update.model is not None else config.model
    return context, dataclasses.replace(config, model=model, reasoning=reasoning)


# --- one assistant response (spec 3.3) -----------------------------------------------------

_UPDATE_TYPES = frozenset({
    "text_start", "text_delta", "text_end", "thinking_start", "thinking_delta", "thinking_end",
    "toolcall_start", "toolcall_delta", "toolcall_end",
})


async def stream_assistant_response(
    context: AgentContext,
    config: AgentLoopConfig,
    signal: AbortSignal,
    emit: AgentEventSink,
    stream_fn: StreamFn,
) -> AssistantMessage:
    """Call the stream function once; keep the partial message in the live transcript.

    This is where AgentMessages become LLM Messages (``transform_context`` then
    ``convert_to_llm``). ``message_update`` is emitted only after a ``start`` event.
    """
    messages = context.messages
    if config.transform_context is not None:
        messages = await _maybe_await(config.transform_context(messages, signal))
    llm_messages = await _maybe_await(config.convert_to_llm(messages))
    llm_context = Context.model_construct(
        system_prompt=context.system_prompt, messages=list(llm_messages), tools=context.tools)

    api_key = None
    if config.get_api_key is not None:
        api_key = await _maybe_await(config.get_api_key(config.model.provider))
    api_key = api_key or config.api_key

    response = await _maybe_await(
        stream_fn(config.model, llm_context, config.build_stream_options(api_key, signal)))

    transcript = context.messages
    added_partial = False
    # Events already queued in one of our EventStreams are taken all at once
    # (EventStream.take_queued: exactly what iteration would yield next), without an
    # async-generator step per event. The iterator is used only to wait for more events,
    # and for the end of the stream or its error.
    events = response.__aiter__()
    take_queued = response.take_queued if isinstance(response, EventStream) else None
    next_event = events.__anext__
    while True:
        ready = take_queued() if take_queued is not None else ()
        if not ready:
            try:
                ready = (await next_event(),)
            except StopAsyncIteration:
                break
        for event in ready:
            kind = event.type
            if kind in _UPDATE_TYPES:
                if added_partial:
                    # The per-delta hot path: O(1) work besides the listeners, built by the
                    # fast paths of ai._fast (same objects as model_copy() and validation).
                    partial = event.partial
                    transcript[-1] = partial
                    update = construct_with_copy(
                        MessageUpdateEvent,
                        {"type": "message_update", "message": partial, "assistant_message_event": event},
                        {"message", "assistant_message_event"}, "message")
                    sent = emit(update)
                    if sent is not None and (type(sent) is CoroutineType or inspect.isawaitable(sent)):
                        await sent
            elif kind == "start":
                partial = event.partial
                transcript.append(partial)
                added_partial = True
                await _maybe_await(emit(MessageStartEvent(message=_shallow_copy(partial))))
            # ``done``/``error`` complete the stream, so iteration ends right after them;
            # unknown (future) event types are ignored.

    final: AssistantMessage = await response.result()
    if added_partial:
        transcript[-1] = final
    else:
        transcript.append(final)
        await _maybe_await(emit(MessageStartEvent(message=_shallow_copy(final))))
    await _maybe_await(emit(MessageEndEvent(message=final)))
    return final


# --- tool execution (spec 3.4) -------------------------------------------------------------

@dataclass
class _Batch:
    messages: list[ToolResultMessage]
    terminate: bool


@dataclass
class _Immediate:
    result: AgentToolResult
    is_error: bool = True


@dataclass
class _Prepared:
    tool_call: ToolCall
    tool: AgentTool
    args: Any


@dataclass
class _Finalized:
    tool_call: ToolCall
    result: AgentToolResult
    is_error: bool


def _batch_terminates(finalized: list[_Finalized]) -> bool:
    return bool(finalized) and all(f.result.terminate is True for f in finalized)


def _tool_result_message(f: _Finalized) -> ToolResultMessage:
    # ``terminate`` is a runtime hint and is never persisted (spec 3.4.5).
    return ToolResultMessage(
        tool_call_id=f.tool_call.id, tool_name=f.tool_call.name,
        content=list(f.result.content or []), details=f.result.details, usage=f.result.usage,
        is_error=f.is_error, timestamp=now_ms())


async def _emit_tool_result_message(emit: AgentEventSink, message: ToolResultMessage) -> None:
    await _maybe_await(emit(MessageStartEvent(message=message)))
    await _maybe_await(emit(MessageEndEvent(message=message)))


def _start_event(tool_call: ToolCall) -> ToolExecutionStartEvent:
    return ToolExecutionStartEvent(
        tool_call_id=tool_call.id, tool_name=tool_call.name, args=tool_call.arguments)


def _end_event(f: _Finalized) -> ToolExecutionEndEvent:
    return ToolExecutionEndEvent(
        tool_call_id=f.tool_call.id, tool_name=f.tool_call.name, result=f.result,
        is_error=f.is_error)


async def _fail_truncated_tool_calls(tool_calls: list[ToolCall], emit: AgentEventSink) -> _Batch:
    """A ``length`` stop fails every tool call of the message, unexecuted (spec 3.4.8)."""
    messages = []
    for tool_call in tool_calls:
        await _maybe_await(emit(_start_event(tool_call)))
        f = _Finalized(tool_call, _error_result(_TRUNCATED_TOOL_CALL.format(name=tool_call.name)), True)
        await _maybe_await(emit(_end_event(f)))
        message = _tool_result_message(f)
        await _emit_tool_result_message(emit, message)
        messages.append(message)
    return _Batch(messages, terminate=False)


def _find_tool(context: AgentContext, name: str) -> AgentTool | None:
    for tool in context.tools or ():
        if tool.name == name:
            return tool
    return None


async def _execute_tool_calls(
    context: AgentContext,
    assistant_message: AssistantMessage,
    tool_calls: list[ToolCall],
    config: AgentLoopConfig,
    signal: AbortSignal,
    emit: AgentEventSink,
) -> _Batch:
    sequential = config.tool_execution == "sequential" or any(
        (tool := _find_tool(context, tc.name)) is not None and tool.execution_mode == "sequential"
        for tc in tool_calls
    )
    run = _execute_sequential if sequential else _execute_parallel
    return await run(context, assistant_message, tool_calls, config, signal, emit)


async def _execute_sequential(
    context: AgentContext,
    assistant_message: AssistantMessage,
    tool_calls: list[ToolCall],
    config: AgentLoopConfig,
    signal: AbortSignal,
    emit: AgentEventSink,
) -> _Batch:
    finalized: list[_Finalized] = []
    messages: list[ToolResultMessage] = []
    for tool_call in tool_calls:
        await _maybe_await(emit(_start_event(tool_call)))
        prepared = await _prepare_tool_call(context, assistant_message, tool_call, config, signal)
        if isinstance(prepared, _Immediate):
            f = _Finalized(tool_call, prepared.result, prepared.is_error)
        else:
            f = await _execute_and_finalize(prepared, assistant_message, context, config, signal, emit)
        await _maybe_await(emit(_end_event(f)))
        message = _tool_result_message(f)
        await _emit_tool_result_message(emit, message)
        finalized.append(f)
        messages.append(message)
        if signal.aborted:
            break  # the remaining calls get no events and no results (spec 3.4.6)
    return _Batch(messages, _batch_terminates(finalized))


async def _execute_parallel(
    context: AgentContext,
    assistant_message: AssistantMessage,
    tool_calls: list[ToolCall],
    config: AgentLoopConfig,
    signal: AbortSignal,
    emit: AgentEventSink,
) -> _Batch:
    # Phase A: preflight, sequential, in source order.
    slots: list[_Finalized | _Prepared] = []
    for tool_call in tool_calls:
        await _maybe_await(emit(_start_event(tool_call)))
        prepared = await _prepare_tool_call(context, assistant_message, tool_call, config, signal)
        if isinstance(prepared, _Immediate):
            f = _Finalized(tool_call, prepared.result, prepared.is_error)
            await _maybe_await(emit(_end_event(f)))
            slots.append(f)
        else:
            slots.append(prepared)
        if signal.aborted:
            break

    # Phase B: every prepared call runs concurrently; tool_execution_end in completion order.
    async def run(prepared: _Prepared) -> _Finalized:
        if signal.aborted:
            f = _Finalized(prepared.tool_call, _error_result("Operation aborted"), True)
        else:
            f = await _execute_and_finalize(prepared, assistant_message, context, config, signal, emit)
        await _maybe_await(emit(_end_event(f)))
        return f

    tasks = {i: asyncio.ensure_future(run(slot))
             for i, slot in enumerate(slots) if isinstance(slot, _Prepared)}
    if tasks:
        await _wait_all(list(tasks.values()))
    results = [tasks[i].result() if i in tasks else slot for i, slot in enumerate(slots)]
    finalized = [f for f in results if isinstance(f, _Finalized)]

    # Phase C: result messages in source order.
    messages = []
    for f in finalized:
        message = _tool_result_message(f)
        await _emit_tool_result_message(emit, message)
        messages.append(message)
    return _Batch(messages, _batch_terminates(finalized))


async def _wait_all(tasks: list[asyncio.Future[Any]]) -> None:
    """Await every task (none is left running), then raise the first error in source order.

    If this coroutine itself is cancelled, the tasks are cancelled too.
    """
    try:
        await asyncio.wait(tasks)
    except asyncio.CancelledError:
        for task in tasks:
            task.cancel()
        raise
    for task in tasks:
        if not task.cancelled() and (error := task.exception()) is not None:
            raise error
    for task in tasks:
        if task.cancelled():
            raise asyncio.CancelledError()


async def _prepare_tool_call(
    context: AgentContext,
    assistant_message: AssistantMessage,
    tool_call: ToolCall,
    config: AgentLoopConfig,
    signal: AbortSignal,
) -> _Immediate | _Prepared:
    tool = _find_tool(context, tool_call.name)
    if tool is None:
        return _Immediate(_error_result(f"Tool {tool_call.name} not found"))
    if arguments_incomplete(tool_call):  # cut or repaired JSON: never run it, whatever the stop reason
        return _Immediate(_error_result(
            f'The arguments of this tool call ("{tool_call.name}") were incomplete (the stream ended '
            "inside them or they were not valid JSON), so it was not executed; call the tool again "
            "with complete arguments."))
    try:
        prepared_call = tool_call
        if tool.prepare_arguments is not None:
            prepared_args = await _maybe_await(tool.prepare_arguments(tool_call.arguments))
            if prepared_args is not tool_call.arguments:
                prepared_call = tool_call.model_copy(update={"arguments": prepared_args})
        args = validate_tool_arguments(tool, prepared_call)
        if config.before_tool_call is not None:
            before = await _maybe_await(config.before_tool_call(
                BeforeToolCallContext(assistant_message=assistant_message, tool_call=tool_call,
                                      args=args, context=context),
                signal))
            if signal.aborted:
                return _Immediate(_error_result("Operation aborted"))
            if before is not None and get_field(before, "block"):
                result = _error_result(get_field(before, "reason") or "Tool execution was blocked")
                if get_field(before, "details") is not None:
                    result.details = get_field(before, "details")
                if get_field(before, "terminate") is True:
                    result.terminate = True
                return _Immediate(result)
        if signal.aborted:
            return _Immediate(_error_result("Operation aborted"))
        return _Prepared(tool_call, tool, args)
    except Exception as error:  # prepare_arguments, validation, before_tool_call
        return _Immediate(_error_result(_error_message(error)))


async def _execute_and_finalize(
    prepared: _Prepared,
    assistant_message: AssistantMessage,
    context: AgentContext,
    config: AgentLoopConfig,
    signal: AbortSignal,
    emit: AgentEventSink,
) -> _Finalized:
    result, is_error = await _execute_prepared(prepared, signal, emit)
    return await _finalize(prepared, result, is_error, assistant_message, context, config, signal)


async def _execute_prepared(
    prepared: _Prepared, signal: AbortSignal, emit: AgentEventSink
) -> tuple[AgentToolResult, bool]:
    tool_call = prepared.tool_call
    pending_updates: list[asyncio.Future[Any]] = []
    accepting = True

    def on_update(partial_result: AgentToolResult) -> None:
        # Scoped to this execute() call: once the tool settled, updates are dropped silently.
        if not accepting:
            return
        sent = emit(ToolExecutionUpdateEvent(
            tool_call_id=tool_call.id, tool_name=tool_call.name, args=tool_call.arguments,
            partial_result=partial_result))
        if inspect.isawaitable(sent):
            pending_updates.append(asyncio.ensure_future(sent))  # starts now, awaited below

    try:
        raw = await _maybe_await(prepared.tool.execute(tool_call.id, prepared.args, signal, on_update))
        result = _coerce_tool_result(raw)
        is_error = result.is_error is True  # pi 0.99: a tool may return an error
    except Exception as error:
        result, is_error = _error_result(_error_message(error)), True
    finally:
        accepting = False
        if pending_updates:
            # every update is emitted and awaited before tool_execution_end
            await _wait_all(pending_updates)
    return result, is_error


async def _finalize(
    prepared: _Prepared,
    result: AgentToolResult,
    is_error: bool,
    assistant_message: AssistantMessage,
    context: AgentContext,
    config: AgentLoopConfig,
    signal: AbortSignal,
) -> _Finalized:
    tool_call = prepared.tool_call
    if config.after_tool_call is None:
        return _Finalized(tool_call, result, is_error)
    try:
        override = await _maybe_await(config.after_tool_call(
            AfterToolCallContext(assistant_message=assistant_message, tool_call=tool_call,
                                 args=prepared.args, result=result, is_error=is_error,
                                 context=context),
            signal))
        if override is not None:
            # field-wise replacement; None keeps the original value (pi's ``??``)
            update = {name: value for name in ("content", "details", "usage", "terminate")
                      if (value := get_field(override, name)) is not None}
            if update:
                result = result.model_copy(update=update)
            override_error = get_field(override, "is_error")
            if override_error is not None:
                is_error = bool(override_error)
    except Exception as error:
        result, is_error = _error_result(_error_message(error)), True
    return _Finalized(tool_call, result, is_error)
