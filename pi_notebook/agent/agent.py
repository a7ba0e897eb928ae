"""The stateful ``Agent`` (spec section 4): a port of pi agent-core 0.85.1 ``agent.ts``.

The Agent owns the transcript, two message queues (steering, follow-up), the
listeners and one run at a time. Every event of a run is first reduced into
``agent.state`` and then handed to each listener in subscription order, awaited one
after the other with the run's :class:`AbortSignal`; a slow listener therefore
slows the loop down (backpressure), exactly as in pi.

Claiming the run slot (the one deliberate change of mechanics)
--------------------------------------------------------------
In TypeScript an ``async`` method runs synchronously up to its first ``await``, so
pi's ``prompt()`` claims the run before returning its promise, and a second
``prompt()`` issued right away is rejected. Python coroutines do not start until
awaited, so here ``prompt()`` and ``continue_()`` are *plain* methods that check
and claim the slot, schedule the run as a task on the running event loop, and
return a :class:`RunHandle`: an awaitable (and ``asyncio.create_task``-compatible
coroutine) that finishes when the run and its ``agent_end`` listeners are done.
Consequences:

- precondition errors (already processing, nothing to continue from) are raised by
  the call itself; ``await agent.prompt(...)`` sees them just as a rejected promise;
- the run starts even if the handle is never awaited, like a JS promise;
- called with no running loop (``asyncio.run(agent.prompt("hi"))``), the slot is
  still claimed at once and the run starts when the handle is first awaited;
- cancelling a task that awaits the handle does not stop the run; use ``abort()``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import deque
from collections.abc import Callable, Coroutine, Generator, Iterable
from types import CoroutineType
from typing import Any

from ..ai.abort import AbortController, AbortSignal
from ..ai.types import (
    AssistantMessage,
    ImageContent,
    Message,
    Model,
    TextContent,
    Usage,
    UserMessage,
    now_ms,
)
from .loop import StreamFn, get_default_stream_fn, run_agent_loop, run_agent_loop_continue
from .types import (
    AgentContext,
    AgentEndEvent,
    AgentEvent,
    AgentLoopConfig,
    AgentMessage,
    AgentState,
    ExecutionMode,
    MaybeAwaitable,
    MessageEndEvent,
    MessageStartEvent,
    PrepareNextTurnContext,
    QueueMode,
    ShouldStopAfterTurnContext,
    TurnEndEvent,
    default_convert_to_llm,
    message_role,
)

__all__ = ["Agent", "AgentListener", "RunHandle", "PendingMessageQueue"]

AgentListener = Callable[..., Any]
"""``listener(event, signal)`` (or ``listener(event)``), sync or async."""


class PendingMessageQueue:
    """A steering or follow-up queue; ``drain()`` honours the queue mode (spec 4.8)."""

    def __init__(self, mode: QueueMode = "one-at-a-time") -> None:
        self.mode: QueueMode = mode
        self._items: deque[AgentMessage] = deque()

    def enqueue(self, message: AgentMessage) -> None:
        self._items.append(message)

    def drain(self) -> list[AgentMessage]:
        if self.mode == "all":
            items = list(self._items)
            self._items.clear()
            return items
        return [self._items.popleft()] if self._items else []

    def remove(self, message: AgentMessage) -> bool:
        for i, item in enumerate(self._items):
            if item is message:
                del self._items[i]
                return True
        return False

    def clear(self) -> None:
        self._items.clear()

    def snapshot(self) -> tuple[AgentMessage, ...]:
        return tuple(self._items)

    def __len__(self) -> int:
        return len(self._items)


class _ActiveRun:
    __slots__ = ("controller", "signal", "waiters")

    def __init__(self) -> None:
        self.controller = AbortController()
        # the controller's signal never changes; a plain slot is read once per event
        self.signal: AbortSignal = self.controller.signal
        self.waiters: list[asyncio.Future[None]] = []


class RunHandle(Coroutine[Any, Any, None]):
    """The awaitable returned by ``prompt()`` / ``continue_()``.

    It is a ``collections.abc.Coroutine`` so that ``loop.create_task(agent.prompt(...))``
    and ``asyncio.run(agent.prompt(...))`` accept it; awaiting it waits for the run.
    """

    def __init__(self, start: Callable[[], asyncio.Future[None]], task: asyncio.Future[None] | None
                 ) -> None:
        self._start = start
        self._task = task
        self._iter: Generator[Any, None, None] | None = None

    @property
    def task(self) -> asyncio.Future[None] | None:
        """The run task, once started."""
        return self._task

    def _ensure_iter(self) -> Generator[Any, None, None]:
        if self._iter is None:
            if self._task is None:
                self._task = self._start()
            self._iter = self._task.__await__()
        return self._iter

    def __await__(self) -> Generator[Any, None, None]:
        return self._ensure_iter()

    def send(self, value: Any) -> Any:
        return self._ensure_iter().send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        it = self._ensure_iter()
        if val is None and tb is None:
            return it.throw(typ)
        return it.throw(typ, val, tb)  # pragma: no cover - legacy signature

    def close(self) -> None:
        if self._iter is not None:
            self._iter.close()


def _listener_arity(listener: AgentListener) -> int:
    """2 for ``(event, signal)`` listeners, 1 for ``(event)`` ones."""
    try:
        params = inspect.signature(listener).parameters.values()
    except (TypeError, ValueError):
        return 2
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == p.VAR_POSITIONAL for p in params) or len(positional) >= 2:
        return 2
    return 1


def _user_message(text: str, images: Iterable[ImageContent] = ()) -> UserMessage:
    # pi: the content is an array, text first, then the images.
    return UserMessage(content=[TextContent(text=text), *images], timestamp=now_ms())


def _as_message(value: AgentMessage | str, what: str) -> AgentMessage:
    if isinstance(value, str):
        return _user_message(value)
    if message_role(value) is None:
        raise TypeError(f"{what} expects a message (an object or dict with a `role`) or a "
                        f"string, got {type(value).__name__}")
    return value


class Agent:
    """A stateful agent: transcript, queues, listeners and one run at a time (spec 4)."""

    def __init__(
        self,
        *,
        initial_state: dict[str, Any] | None = None,
        convert_to_llm: Callable[[list[AgentMessage]], MaybeAwaitable[list[Message]]] | None = None,
        transform_context: Callable[..., MaybeAwaitable[list[AgentMessage]]] | None = None,
        stream_fn: StreamFn | None = None,
        get_api_key: Callable[[str], Any] | None = None,
        on_payload: Callable[..., Any] | None = None,
        on_response: Callable[..., Any] | None = None,
        before_tool_call: Callable[..., Any] | None = None,
        after_tool_call: Callable[..., Any] | None = None,
        should_stop_after_turn: Callable[..., Any] | None = None,
        prepare_next_turn: Callable[..., Any] | None = None,
        prepare_next_turn_with_context: Callable[..., Any] | None = None,
        steering_mode: QueueMode = "one-at-a-time",
        follow_up_mode: QueueMode = "one-at-a-time",
        session_id: str | None = None,
        thinking_budgets: dict[str, int] | None = None,
        transport: str = "auto",
        max_retry_delay_ms: int | None = None,
        tool_execution: ExecutionMode = "parallel",
    ) -> None:
        init = dict(initial_state or {})
        unknown = set(init) - {"system_prompt", "model", "thinking_level", "tools", "messages"}
        if unknown:
            raise TypeError(f"unknown initial_state keys: {sorted(unknown)}")
        self._state = AgentState(**init)
        self.convert_to_llm = convert_to_llm or default_convert_to_llm
        self.transform_context = transform_context
        # pi resolves the default at construction (and throws there if there is none).
        self.stream_function: StreamFn = stream_fn if stream_fn is not None else get_default_stream_fn()
        self.get_api_key = get_api_key
        self.on_payload = on_payload
        self.on_response = on_response
        self.before_tool_call = before_tool_call
        self.after_tool_call = after_tool_call
        self.should_stop_after_turn = should_stop_after_turn
        self.prepare_next_turn = prepare_next_turn  # legacy: receives only the signal
        self.prepare_next_turn_with_context = prepare_next_turn_with_context
        self.session_id = session_id
        self.thinking_budgets = thinking_budgets
        self.transport = transport
        self.max_retry_delay_ms = max_retry_delay_ms
        self.tool_execution: ExecutionMode = tool_execution
        self._steering = PendingMessageQueue(steering_mode)
        self._follow_up = PendingMessageQueue(follow_up_mode)
        self._listeners: dict[AgentListener, int] = {}  # insertion-ordered set -> arity
        # what an event is delivered to: rebuilt on (un)subscribe, so a listener added
        # or removed while an event is being delivered takes effect from the next event
        self._listener_snapshot: tuple[tuple[AgentListener, int], ...] = ()
        self._active_run: _ActiveRun | None = None

    # --- state, listeners ------------------------------------------------------------------
    @property
    def state(self) -> AgentState:
        return self._state

    def subscribe(self, listener: AgentListener) -> Callable[[], None]:
        """Add a listener (once; re-adding is a no-op). Returns ``unsubscribe()``."""
        if listener not in self._listeners:
            self._listeners[listener] = _listener_arity(listener)
            self._listener_snapshot = tuple(self._listeners.items())

        def unsubscribe() -> None:
            if self._listeners.pop(listener, None) is not None:
                self._listener_snapshot = tuple(self._listeners.items())

        return unsubscribe

    # --- queues -----------------------------------------------------------------------------
    @property
    def steering_mode(self) -> QueueMode:
        return self._steering.mode

    @steering_mode.setter
    def steering_mode(self, mode: QueueMode) -> None:
        self._steering.mode = _check_mode(mode)

    @property
    def follow_up_mode(self) -> QueueMode:
        return self._follow_up.mode

    @follow_up_mode.setter
    def follow_up_mode(self, mode: QueueMode) -> None:
        self._follow_up.mode = _check_mode(mode)

    def steer(self, message: AgentMessage | str) -> AgentMessage:
        """Queue a message for the next turn boundary. Returns the queued message."""
        message = _as_message(message, "steer()")
        self._steering.enqueue(message)
        return message

    def follow_up(self, message: AgentMessage | str) -> AgentMessage:
        """Queue a message for when the agent would otherwise stop. Returns it."""
        message = _as_message(message, "follow_up()")
        self._follow_up.enqueue(message)
        return message

    @property
    def steering_queue(self) -> tuple[AgentMessage, ...]:
        """A read-only snapshot of the queued steering messages (not in pi)."""
        return self._steering.snapshot()

    @property
    def follow_up_queue(self) -> tuple[AgentMessage, ...]:
        """A read-only snapshot of the queued follow-up messages (not in pi)."""
        return self._follow_up.snapshot()

    def remove_queued(self, message: AgentMessage) -> bool:
        """Remove one queued message (by identity) from either queue (not in pi).

        Returns False if it is no longer queued (for instance already delivered).
        """
        return self._steering.remove(message) or self._follow_up.remove(message)

    def clear_steering_queue(self) -> None:
        self._steering.clear()

    def clear_follow_up_queue(self) -> None:
        self._follow_up.clear()

    def clear_all_queues(self) -> None:
        self._steering.clear()
        self._follow_up.clear()

    def has_queued_messages(self) -> bool:
        return bool(self._steering) or bool(self._follow_up)

    # --- run control --------------------------------------------------------------------------
    @property
    def signal(self) -> AbortSignal | None:
        """The active run's abort signal, or None when idle."""
        return self._active_run.signal if self._active_run is not None else None

    def abort(self) -> None:
        """Abort the active run (cooperatively); a no-op when idle."""
        if self._active_run is not None:
            self._active_run.controller.abort()

    async def wait_for_idle(self) -> None:
        """Wait until the current run and all its awaited listeners are done."""
        run = self._active_run
        if run is None:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        run.waiters.append(waiter)
        await waiter

    def reset(self) -> None:
        """Clear the transcript, the run state and both queues; keep prompt, model, tools."""
        if self._active_run is not None:
            raise RuntimeError("Agent is already processing. Wait for completion before resetting.")
        state = self._state
        state.messages = []
        state._is_streaming = False
        state.streaming_message = None
        state.pending_tool_calls = set()
        state.error_message = None
        self.clear_all_queues()

    def prompt(self, input: str | AgentMessage | list[AgentMessage],
               images: Iterable[ImageContent] | None = None) -> RunHandle:
        """Start a run with a text, a message or a list of messages; await the result.

        Raises RuntimeError at once if a run is active (use ``steer()``/``follow_up()``).
        """
        if self._active_run is not None:
            raise RuntimeError(
                "Agent is already processing a prompt. Use steer() or follow_up() to queue "
                "messages, or wait for completion."
            )
        messages = self._normalize_prompt(input, images)
        return self._start_run(lambda signal, config, context: run_agent_loop(
            messages, context, config, self._process_event, signal, self.stream_function))

    def continue_(self) -> RunHandle:
        """Continue from the transcript (``continue`` is a Python keyword).

        From an assistant tail, a queued steering message (else a follow-up) is run as
        the prompt; otherwise this raises.
        """
        if self._active_run is not None:
            raise RuntimeError("Agent is already processing. Wait for completion before continuing.")
        messages = self._state.messages
        if not messages:
            raise ValueError("No messages to continue from")
        if message_role(messages[-1]) == "assistant":
            queued = self._steering.drain()
            if queued:
                return self._start_prompt_messages(queued, skip_initial_steering_poll=True)
            queued = self._follow_up.drain()
            if queued:
                return self._start_prompt_messages(queued, skip_initial_steering_poll=False)
            raise ValueError("Cannot continue from message role: assistant")
        return self._start_run(lambda signal, config, context: run_agent_loop_continue(
            context, config, self._process_event, signal, self.stream_function))

    # --- internals ------------------------------------------------------------------------------
    def _normalize_prompt(self, input: Any, images: Iterable[ImageContent] | None
                          ) -> list[AgentMessage]:
        if isinstance(input, str):
            return [_user_message(input, images or ())]
        if images:
            raise TypeError("prompt(): images can only be given with a text prompt")
        if isinstance(input, (list, tuple)):
            return [_as_message(m, "prompt()") for m in input]
        return [_as_message(input, "prompt()")]

    def _start_prompt_messages(self, messages: list[AgentMessage], *,
                               skip_initial_steering_poll: bool) -> RunHandle:
        return self._start_run(
            lambda signal, config, context: run_agent_loop(
                messages, context, config, self._process_event, signal, self.stream_function),
            skip_initial_steering_poll=skip_initial_steering_poll)

    def _context_snapshot(self) -> AgentContext:
        state = self._state
        return AgentContext(system_prompt=state.system_prompt, messages=list(state.messages),
                            tools=list(state.tools))

    def _start_run(self, executor: Callable[[AbortSignal, AgentLoopConfig, AgentContext], Any],
                   *, skip_initial_steering_poll: bool = False) -> RunHandle:
        # Synchronous claim: nothing below may yield before the slot is taken. The
        # context snapshot and the loop config are taken now too, as in pi, so that
        # state changes made right after prompt() returns do not leak into this run.
        if self._active_run is not None:
            raise RuntimeError("Agent is already processing.")
        run = _ActiveRun()
        self._active_run = run
        state = self._state
        state._is_streaming = True
        state.streaming_message = None
        state.error_message = None
        context = self._context_snapshot()
        config = self._create_loop_config(skip_initial_steering_poll)

        async def lifecycle() -> None:
            try:
                await executor(run.signal, config, context)
            except Exception as error:
                await self._handle_run_failure(error, run.signal.aborted)
            finally:
                self._finish_run(run)

        def start() -> asyncio.Future[None]:
            return asyncio.ensure_future(lifecycle())

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return RunHandle(start, None)  # started on first await (asyncio.run(...))
        return RunHandle(start, start())

    def _create_loop_config(self, skip_initial_steering_poll: bool) -> AgentLoopConfig:
        state = self._state
        skip = [skip_initial_steering_poll]

        def get_steering_messages() -> list[AgentMessage]:
            if skip[0]:
                skip[0] = False
                return []
            return self._steering.drain()

        def get_follow_up_messages() -> list[AgentMessage]:
            return self._follow_up.drain()

        should_stop = None
        if self.should_stop_after_turn is not None:
            hook = self.should_stop_after_turn

            def should_stop(ctx: ShouldStopAfterTurnContext) -> Any:
                return hook(ctx, self.signal)

        prepare = None
        if self.prepare_next_turn_with_context is not None:
            with_context = self.prepare_next_turn_with_context

            def prepare(ctx: PrepareNextTurnContext) -> Any:
                return with_context(ctx, self.signal)
        elif self.prepare_next_turn is not None:
            legacy = self.prepare_next_turn

            def prepare(ctx: PrepareNextTurnContext) -> Any:
                return legacy(self.signal)

        return AgentLoopConfig(
            model=state.model,
            reasoning=None if state.thinking_level == "off" else state.thinking_level,
            session_id=self.session_id,
            on_payload=self.on_payload,
            on_response=self.on_response,
            transport=self.transport,
            thinking_budgets=self.thinking_budgets,
            max_retry_delay_ms=self.max_retry_delay_ms,
            tool_execution=self.tool_execution,
            before_tool_call=self.before_tool_call,
            after_tool_call=self.after_tool_call,
            should_stop_after_turn=should_stop,
            prepare_next_turn=prepare,
            convert_to_llm=self.convert_to_llm,
            transform_context=self.transform_context,
            get_api_key=self.get_api_key,
            get_steering_messages=get_steering_messages,
            get_follow_up_messages=get_follow_up_messages,
        )

    async def _handle_run_failure(self, error: BaseException, aborted: bool) -> None:
        model: Model = self._state.model
        failure = AssistantMessage(
            content=[TextContent(text="")], api=model.api, provider=model.provider, model=model.id,
            usage=Usage(), stop_reason="aborted" if aborted else "error",
            error_message=str(error) or type(error).__name__, timestamp=now_ms())
        await self._emit(MessageStartEvent(message=failure))
        await self._emit(MessageEndEvent(message=failure))
        await self._emit(TurnEndEvent(message=failure, tool_results=[]))
        await self._emit(AgentEndEvent(messages=[failure]))

    def _finish_run(self, run: _ActiveRun) -> None:
        state = self._state
        state._is_streaming = False
        state.streaming_message = None
        state.pending_tool_calls = set()
        if self._active_run is run:
            self._active_run = None
        for waiter in run.waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _process_event(self, event: AgentEvent) -> Any:
        """The run's ``emit``: reduce the event into state, then deliver it (spec 4.7).

        Returns None when every listener is done already, else an awaitable that awaits
        the listeners one after the other, in subscription order. (A plain function
        rather than a coroutine: with one listener, its own awaitable is returned, which
        saves a coroutine per streamed delta.)
        """
        state = self._state
        # ``event.type ==`` (not a local copy of it) lets mypy narrow the event union
        if event.type == "message_update" or event.type == "message_start":
            state.streaming_message = event.message
        elif event.type == "message_end":
            state.streaming_message = None
            state.messages.append(event.message)
        elif event.type == "tool_execution_start":
            state.pending_tool_calls = state.pending_tool_calls | {event.tool_call_id}
        elif event.type == "tool_execution_end":
            state.pending_tool_calls = state.pending_tool_calls - {event.tool_call_id}
        elif event.type == "turn_end":
            message = event.message
            error_message = getattr(message, "error_message", None)
            if message_role(message) == "assistant" and error_message:
                state.error_message = error_message
        elif event.type == "agent_end":
            state.streaming_message = None

        run = self._active_run
        if run is None:
            raise RuntimeError("Agent listener invoked outside active run")
        listeners = self._listener_snapshot
        if not listeners:
            return None
        signal = run.signal
        if len(listeners) == 1:
            listener, arity = listeners[0]
            result = listener(event, signal) if arity == 2 else listener(event)
            if result is None:
                return None
            # the common async listener first: inspect.isawaitable is slow per delta
            return result if type(result) is CoroutineType or inspect.isawaitable(result) else None
        return self._deliver(event, signal, listeners)

    async def _deliver(self, event: AgentEvent, signal: AbortSignal,
                       listeners: tuple[tuple[AgentListener, int], ...]) -> None:
        for listener, arity in listeners:
            result = listener(event, signal) if arity == 2 else listener(event)
            if result is not None and inspect.isawaitable(result):
                await result

    async def _emit(self, event: AgentEvent) -> None:
        pending = self._process_event(event)
        if pending is not None:
            await pending

    def __repr__(self) -> str:
        return f"Agent({self._state!r})"


def _check_mode(mode: str) -> QueueMode:
    if mode == "one-at-a-time":
        return "one-at-a-time"
    if mode == "all":
        return "all"
    raise ValueError(f'queue mode must be "one-at-a-time" or "all", got {mode!r}')
