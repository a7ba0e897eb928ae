"""Shared test doubles for the agent tests: a scripted stream function (pi's mock,
which pushes ``done`` directly with no ``start``), a streaming variant, tools."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from pi_notebook.agent import AgentTool, AgentToolResult
from pi_notebook.ai.event_stream import AssistantMessageEventStream
from pi_notebook.ai.types import (
    AssistantMessage, DoneEvent, ErrorEvent, Model, StartEvent, TextContent, TextDeltaEvent,
    TextEndEvent, TextStartEvent, ToolCall, Usage, UserMessage, now_ms,
)

MODEL = Model(id="mock", name="Mock", api="mock-api", provider="mock", base_url="",
              context_window=8192, max_tokens=1024)


def model(provider: str = "mock", id: str = "mock") -> Model:
    return MODEL.model_copy(update={"provider": provider, "id": id})


def text(t: str) -> TextContent:
    return TextContent(text=t)


def call(id: str, name: str, args: dict[str, Any] | None = None) -> ToolCall:
    return ToolCall(id=id, name=name, arguments=args if args is not None else {})


def assistant(content: Any = "ok", stop_reason: str = "stop", **kw: Any) -> AssistantMessage:
    if isinstance(content, str):
        content = [text(content)]
    elif not isinstance(content, list):
        content = [content]
    if stop_reason == "stop" and any(isinstance(b, ToolCall) for b in content):
        stop_reason = "toolUse"
    return AssistantMessage(content=content, api="mock-api", provider="mock", model="mock",
                            usage=Usage(), stop_reason=stop_reason, timestamp=now_ms(), **kw)


def user(t: str) -> UserMessage:
    return UserMessage(content=t, timestamp=now_ms())


def roles(messages: list[Any]) -> list[str]:
    return [m["role"] if isinstance(m, dict) else m.role for m in messages]


def types(events: list[Any]) -> list[str]:
    return [e.type for e in events]


def message_text(message: Any) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(getattr(b, "text", "") for b in content)


Step = Any  # AssistantMessage | Callable[[context, options], AssistantMessage | awaitable]


class MockStream:
    """A stream function answering from a script, pushing ``done``/``error`` directly.

    Honours an already-aborted signal like a provider (an ``aborted`` message). With
    ``streaming=True`` it emits ``start``, text deltas and ``text_end`` first.
    """

    def __init__(self, *steps: Step, streaming: bool = False, default: Step | None = None) -> None:
        self.steps = list(steps)
        self.calls: list[dict[str, Any]] = []
        self.streaming = streaming
        self.default = default

    @property
    def call_count(self) -> int:
        return len(self.calls)

    def __call__(self, model: Model, context: Any, options: dict[str, Any] | None = None
                 ) -> AssistantMessageEventStream:
        options = options or {}
        self.calls.append({"model": model, "context": context, "options": options,
                           "messages": list(context.messages),
                           "system_prompt": context.system_prompt})
        out = AssistantMessageEventStream()
        signal = options.get("signal")
        if signal is not None and signal.aborted:
            msg = assistant([text("")], stop_reason="aborted", error_message="Request was aborted")
            out.push(ErrorEvent(reason="aborted", error=msg))
            return out
        step = self.steps.pop(0) if self.steps else self.default
        if step is None:
            msg = assistant([], stop_reason="error", error_message="No more mock responses")
            out.push(ErrorEvent(reason="error", error=msg))
            return out

        async def produce() -> None:
            msg = step(context, options) if callable(step) else step
            if asyncio.iscoroutine(msg):
                msg = await msg
            if self.streaming and msg.stop_reason not in ("error", "aborted"):
                partial = msg.model_copy(update={"content": [], "stop_reason": "pending"})
                out.push(StartEvent(partial=partial))
                for i, block in enumerate(msg.content):
                    if isinstance(block, TextContent):
                        partial.content.append(TextContent(text=""))
                        out.push(TextStartEvent(content_index=i, partial=partial))
                        for ch in block.text:
                            await asyncio.sleep(0)
                            if signal is not None and signal.aborted:
                                aborted = partial.model_copy(update={
                                    "stop_reason": "aborted", "error_message": "Request was aborted"})
                                out.push(ErrorEvent(reason="aborted", error=aborted))
                                return
                            partial.content[i].text += ch
                            out.push(TextDeltaEvent(content_index=i, delta=ch, partial=partial))
                        out.push(TextEndEvent(content_index=i, content=block.text, partial=partial))
                    else:
                        partial.content.append(block)
            if msg.stop_reason in ("error", "aborted"):
                out.push(ErrorEvent(reason=msg.stop_reason, error=msg))
            else:
                out.push(DoneEvent(reason=msg.stop_reason, message=msg))

        if callable(step) or self.streaming:
            task = asyncio.get_running_loop().create_task(produce())
            _keep.add(task)
            task.add_done_callback(_keep.discard)
        else:
            msg = step
            if msg.stop_reason in ("error", "aborted"):
                out.push(ErrorEvent(reason=msg.stop_reason, error=msg))
            else:
                out.push(DoneEvent(reason=msg.stop_reason, message=msg))
        return out


_keep: set[asyncio.Task[Any]] = set()

VALUE_SCHEMA = {"type": "object", "properties": {"value": {"type": "string"}},
                "required": ["value"]}


def make_tool(
    name: str = "echo",
    execute: Callable[..., Any] | None = None,
    *,
    executed: list[Any] | None = None,
    parameters: Any = None,
    execution_mode: str | None = None,
    prepare_arguments: Callable[[Any], Any] | None = None,
    terminate: bool | None = None,
    delay: float = 0.0,
) -> AgentTool:
    """A tool recording its params; by default it echoes ``value`` back."""

    async def default_execute(tool_call_id: str, params: Any, signal: Any, on_update: Any
                              ) -> AgentToolResult:
        if executed is not None:
            executed.append(params)
        if delay:
            await asyncio.sleep(delay)
        value = params.get("value") if isinstance(params, dict) else params
        return AgentToolResult(content=[text(f"echo: {value}")], details={"value": value},
                               terminate=terminate)

    return AgentTool(name=name, label=name, description=f"{name} tool",
                     parameters=parameters if parameters is not None else VALUE_SCHEMA,
                     execute=execute or default_execute, execution_mode=execution_mode,
                     prepare_arguments=prepare_arguments)


def pending_tasks() -> list[asyncio.Task[Any]]:
    current = asyncio.current_task()
    return [t for t in asyncio.all_tasks() if t is not current and not t.done()]
