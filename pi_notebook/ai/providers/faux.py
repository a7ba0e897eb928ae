"""The faux provider (spec 5.10): a scripted test double that streams like a real one.

A registration owns a queue of *steps*. Each ``stream()`` call takes one step (an
``AssistantMessage``, or a factory ``(context, options, state, model) -> message``
that may be async), estimates usage from the prompt, and streams the message
block by block in small chunks, honouring the abort signal between chunks.

Nothing ever raises out of ``stream()``: an empty queue, a failing factory or an
abort all end the stream with an ``error`` event.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Union

from ..event_stream import AssistantMessageEventStream
from ..options import estimate_text_tokens
from ..types import (
    AssistantMessage,
    Context,
    DoneEvent,
    ErrorEvent,
    Model,
    StartEvent,
    StopReason,
    TextContent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingContent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    Usage,
    get_field,
    now_ms,
    usage_total_tokens,
)

__all__ = [
    "FauxState", "FauxProviderHandle", "FauxStep", "FauxFactory", "register_faux_provider",
    "faux_assistant_message", "faux_text", "faux_thinking", "faux_tool_call",
]

DEFAULT_API = "faux"
DEFAULT_PROVIDER = "faux"
DEFAULT_MODEL_ID = "faux-1"
DEFAULT_BASE_URL = "http://localhost:0"
_CHARS_PER_TOKEN = 4

FauxFactory = Callable[..., Union[AssistantMessage, Awaitable[AssistantMessage]]]
FauxStep = Union[AssistantMessage, FauxFactory]
FauxContentBlock = Union[TextContent, ThinkingContent, ToolCall]


# --- builders --------------------------------------------------------------------------------

def _random_id(prefix: str) -> str:
    # pi: `${prefix}:${Date.now()}:${Math.random().toString(36).slice(2)}`
    return f"{prefix}:{now_ms()}:{random.getrandbits(48):x}"


def faux_text(text: str) -> TextContent:
    return TextContent(text=text)


def faux_thinking(thinking: str) -> ThinkingContent:
    return ThinkingContent(thinking=thinking)


def faux_tool_call(name: str, arguments: dict[str, Any], id: str | None = None) -> ToolCall:
    return ToolCall(id=id if id is not None else _random_id("tool"), name=name,
                    arguments=arguments)


def faux_assistant_message(
    content: str | FauxContentBlock | Iterable[FauxContentBlock],
    stop_reason: StopReason = "stop",
    error_message: str | None = None,
    response_id: str | None = None,
    timestamp: int | None = None,
) -> AssistantMessage:
    """A scripted reply; a string becomes one text block."""
    if isinstance(content, str):
        blocks: list[Any] = [TextContent(text=content)]
    elif isinstance(content, (TextContent, ThinkingContent, ToolCall)):
        blocks = [content]
    else:
        blocks = list(content)
    return AssistantMessage(
        content=blocks, api=DEFAULT_API, provider=DEFAULT_PROVIDER, model=DEFAULT_MODEL_ID,
        usage=Usage(), stop_reason=stop_reason, error_message=error_message,
        response_id=response_id, timestamp=timestamp if timestamp is not None else now_ms(),
    )


# --- state and handle ------------------------------------------------------------------------

@dataclass
class FauxState:
    """Shared with factories; ``call_count`` counts ``stream()`` calls, answered or not."""

    call_count: int = 0


class FauxProviderHandle:
    """What ``register_faux_provider`` returns: the models, the queue and ``unregister()``."""

    def __init__(self, api: str, provider: str, models: list[Model], source_id: str) -> None:
        self.api = api
        self.provider = provider
        self.models = models
        self.state = FauxState()
        self._source_id = source_id
        self._pending: list[FauxStep] = []
        # session id -> last prompt text, for the prompt-cache simulation
        self._prompt_cache: dict[str, str] = {}
        self._registered = True

    def get_model(self, id: str | None = None) -> Model | None:
        if id is None:
            return self.models[0]
        return next((m for m in self.models if m.id == id), None)

    def set_responses(self, responses: Iterable[FauxStep]) -> None:
        self._pending = list(responses)

    def append_responses(self, responses: Iterable[FauxStep]) -> None:
        self._pending.extend(responses)

    def get_pending_response_count(self) -> int:
        return len(self._pending)

    def unregister(self) -> None:
        if not self._registered:
            return
        self._registered = False
        from ..stream import unregister_api_providers

        unregister_api_providers(self._source_id)
        _forget_registration(self)

    def _take_step(self) -> FauxStep | None:
        return self._pending.pop(0) if self._pending else None

    def __repr__(self) -> str:
        return (f"FauxProviderHandle(api={self.api!r}, provider={self.provider!r}, "
                f"models={[m.id for m in self.models]}, pending={len(self._pending)})")


_tasks: set[asyncio.Task[Any]] = set()

# Registrations that share a provider name all publish models under it; when one
# unregisters, the remaining ones are published again.
_registrations: list[FauxProviderHandle] = []


def _catalogue() -> Any:
    """``pi_notebook.ai.models`` if present (imported lazily: it imports the providers)."""
    name = __package__.rsplit(".", 1)[0] + ".models"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            return None  # the catalogue is optional for the test double
        raise


def _publish_models(provider: str, models: list[Model]) -> None:
    catalogue = _catalogue()
    if catalogue is not None:
        catalogue.register_models(provider, models)


def _forget_registration(handle: FauxProviderHandle) -> None:
    if handle in _registrations:
        _registrations.remove(handle)
    catalogue = _catalogue()
    if catalogue is None:
        return
    catalogue.unregister_models(handle.provider, [m.id for m in handle.models])
    # re-publish the others, oldest first, so the newest wins an id they share
    for other in _registrations:
        if other.provider == handle.provider:
            catalogue.register_models(other.provider, other.models)


# --- registration ------------------------------------------------------------------------

def _build_model(definition: Model | Mapping[str, Any], api: str, provider: str) -> Model:
    """A full Model from a definition (a Model, or a dict with at least ``id``)."""
    if isinstance(definition, Model):
        model = definition.model_copy(update={"api": api, "provider": provider})
    else:
        model = Model.model_validate({**definition, "api": api, "provider": provider})
    given = model.model_fields_set
    defaults = {"name": model.name or model.id, "input": ["text", "image"],
                "context_window": 128000, "max_tokens": 16384, "base_url": DEFAULT_BASE_URL}
    return model.model_copy(update={k: v for k, v in defaults.items()
                                    if k not in given or (k == "name" and not model.name)})


def _token_bounds(token_size: tuple[int, int] | Mapping[str, int] | int | None) -> tuple[int, int]:
    if token_size is None:
        low, high = 3, 5
    elif isinstance(token_size, int):
        low = high = token_size
    elif isinstance(token_size, Mapping):
        low, high = token_size.get("min", 3), token_size.get("max", 5)
    else:
        low, high = token_size
    low = max(1, int(low))
    high = max(low, int(high))
    return low, high


def register_faux_provider(
    api: str | None = None,
    provider: str = DEFAULT_PROVIDER,
    models: Iterable[Model | Mapping[str, Any]] | None = None,
    tokens_per_second: float | None = None,
    token_size: tuple[int, int] | Mapping[str, int] | int | None = (3, 5),
) -> FauxProviderHandle:
    """Register a scripted provider under a unique api string (``faux:<ms>:<rand>``).

    ``tokens_per_second`` paces the chunks (unset: one event-loop turn per chunk);
    ``token_size`` is the chunk size in tokens of 4 characters, ``(min, max)``.
    """
    from ..stream import register_api_provider

    api = api or _random_id("faux")
    definitions = list(models) if models is not None else [{"id": DEFAULT_MODEL_ID, "name": "Faux Model"}]
    if not definitions:
        raise ValueError("register_faux_provider needs at least one model")
    built = [_build_model(d, api, provider) for d in definitions]
    source_id = _random_id("faux-provider")
    handle = FauxProviderHandle(api, provider, built, source_id)
    min_tokens, max_tokens = _token_bounds(token_size)

    def stream(model: Model, context: Context, options: dict[str, Any] | None = None
               ) -> AssistantMessageEventStream:
        options = dict(options or {})
        out = AssistantMessageEventStream()
        # Both synchronous, as in pi: a second call made right away takes the next step.
        step = handle._take_step()
        handle.state.call_count += 1
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            message = _error_message("The faux provider needs a running event loop", handle, model)
            out.push(ErrorEvent(reason="error", error=message))
            out.end(message)
            return out
        task = loop.create_task(_run(handle, out, step, model, context, options, min_tokens,
                                     max_tokens, tokens_per_second))
        # The loop keeps only weak references to tasks; hold this one until it ends.
        _tasks.add(task)
        task.add_done_callback(_tasks.discard)
        return out

    register_api_provider(api, stream, stream, source_id)
    _registrations.append(handle)
    _publish_models(provider, built)
    return handle


# --- one request ---------------------------------------------------------------------------

async def _run(
    handle: FauxProviderHandle, out: AssistantMessageEventStream, step: FauxStep | None,
    model: Model, context: Context, options: dict[str, Any], min_tokens: int, max_tokens: int,
    tokens_per_second: float | None,
) -> None:
    try:
        await asyncio.sleep(0)  # pi calls onResponse on a microtask
        on_response = options.get("on_response")
        if on_response is not None:
            result = on_response({"status": 200, "headers": {}}, model)
            if inspect.isawaitable(result):
                await result
        if step is None:
            message = _error_message("No more faux responses queued", handle, model)
            message.usage = _estimate_usage(message, context, options, handle._prompt_cache)
            out.push(ErrorEvent(reason="error", error=message))
            out.end(message)
            return
        resolved = step(context, options, handle.state, model) if callable(step) else step
        if inspect.isawaitable(resolved):
            resolved = await resolved
        if not isinstance(resolved, AssistantMessage):
            raise TypeError(f"faux step returned {type(resolved).__name__}, not an AssistantMessage")
        message = resolved.model_copy(deep=True)
        message.api, message.provider, message.model = handle.api, handle.provider, model.id
        message.usage = _estimate_usage(message, context, options, handle._prompt_cache)
        await _stream_with_deltas(out, message, options.get("signal"), min_tokens, max_tokens,
                                  tokens_per_second)
    except Exception as exc:  # everything ends in an event
        if out.done:
            return
        message = _error_message(str(exc) or type(exc).__name__, handle, model)
        out.push(ErrorEvent(reason="error", error=message))
        out.end(message)


def _error_message(text: str, handle: FauxProviderHandle, model: Model) -> AssistantMessage:
    return AssistantMessage(content=[], api=handle.api, provider=handle.provider, model=model.id,
                            usage=Usage(), stop_reason="error", error_message=text,
                            timestamp=now_ms())


def _split_by_token_size(text: str, min_tokens: int, max_tokens: int) -> list[str]:
    chunks: list[str] = []
    index = 0
    while index < len(text):
        size = random.randint(min_tokens, max_tokens) * _CHARS_PER_TOKEN
        chunks.append(text[index:index + size])
        index += size
    return chunks or [""]


async def _wait_for_chunk(chunk: str, tokens_per_second: float | None) -> None:
    if tokens_per_second and tokens_per_second > 0:
        await asyncio.sleep(len(chunk) / _CHARS_PER_TOKEN / tokens_per_second)
    else:
        await asyncio.sleep(0)  # one loop turn, like pi's microtask


def _aborted(signal: Any) -> bool:
    return bool(signal is not None and getattr(signal, "aborted", False))


async def _stream_with_deltas(
    out: AssistantMessageEventStream, message: AssistantMessage, signal: Any,
    min_tokens: int, max_tokens: int, tokens_per_second: float | None,
) -> None:
    partial = message.model_copy(update={"content": [], "stop_reason": "pending"})

    def push_aborted() -> None:
        aborted = partial.model_copy(update={
            "stop_reason": "aborted", "error_message": "Request was aborted", "timestamp": now_ms(),
        })
        out.push(ErrorEvent(reason="aborted", error=aborted))
        out.end(aborted)

    if _aborted(signal):
        push_aborted()
        return
    out.push(StartEvent(partial=partial.model_copy()))

    async def stream_block(index: int, live: Any, text: str, start_cls: type, delta_cls: type,
                           grow: str | None) -> bool:
        """``*_start``, then one ``*_delta`` per chunk (appending to ``live.<grow>``).

        False when aborted mid-block: the error is pushed and, as in pi, the open block
        gets no ``*_end``."""
        partial.content = [*partial.content, live]
        out.push(start_cls(content_index=index, partial=partial.model_copy()))
        for chunk in _split_by_token_size(text, min_tokens, max_tokens):
            await _wait_for_chunk(chunk, tokens_per_second)
            if _aborted(signal):
                push_aborted()
                return False
            if grow is not None:
                setattr(live, grow, getattr(live, grow) + chunk)
            out.push(delta_cls(content_index=index, delta=chunk, partial=partial.model_copy()))
        return True

    for index, block in enumerate(message.content):
        if isinstance(block, ThinkingContent):
            if not await stream_block(index, ThinkingContent(thinking=""), block.thinking,
                                      ThinkingStartEvent, ThinkingDeltaEvent, "thinking"):
                return
            out.push(ThinkingEndEvent(content_index=index, content=block.thinking,
                                      partial=partial.model_copy()))
        elif isinstance(block, TextContent):
            if not await stream_block(index, TextContent(text=""), block.text,
                                      TextStartEvent, TextDeltaEvent, "text"):
                return
            out.push(TextEndEvent(content_index=index, content=block.text,
                                  partial=partial.model_copy()))
        else:
            live_call = ToolCall(id=block.id, name=block.name, arguments={})
            # The arguments are not re-parsed while streaming (pi's faux does not either).
            if not await stream_block(index, live_call, _json(block.arguments),
                                      ToolCallStartEvent, ToolCallDeltaEvent, None):
                return
            live_call.arguments = block.arguments
            out.push(ToolCallEndEvent(content_index=index, tool_call=live_call,
                                      partial=partial.model_copy()))

    reason = message.stop_reason
    if reason == "pending":
        raise RuntimeError("Faux response ended without a stop reason")
    if reason == "error" or reason == "aborted":
        out.push(ErrorEvent(reason=reason, error=message))
        out.end(message)
        return
    out.push(DoneEvent(reason=reason, message=message))
    out.end(message)


# --- usage estimate (exact serialisation of spec 5.10) ----------------------------------------

def _json(value: Any) -> str:
    # JSON.stringify: no whitespace, non-ASCII kept
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


_estimate_tokens = estimate_text_tokens  # the package's one estimate (UTF-16 code units / 4)




def _content_to_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or []:
        kind = get_field(block, "type")
        if kind == "text":
            parts.append(get_field(block, "text") or "")
        elif kind == "thinking":
            parts.append(get_field(block, "thinking") or "")
        elif kind == "image":
            data = get_field(block, "data") or ""
            parts.append(f"[image:{get_field(block, 'mime_type', 'mimeType')}:{len(data)}]")
        else:
            parts.append(f"{get_field(block, 'name')}:{_json(get_field(block, 'arguments') or {})}")
    return "\n".join(parts)


def _message_to_text(message: Any) -> str:
    if get_field(message, "role") == "toolResult":
        return "\n".join([str(get_field(message, "tool_name", "toolName")),
                          _content_to_text(get_field(message, "content"))])
    return _content_to_text(get_field(message, "content"))


def _tool_json(tool: Any) -> Any:
    if hasattr(tool, "model_dump"):
        return tool.model_dump()
    if isinstance(tool, Mapping):
        return dict(tool)
    # an AgentTool: what JSON.stringify would keep (functions are dropped)
    data: dict[str, Any] = {"name": tool.name}
    if getattr(tool, "label", None):
        data["label"] = tool.label
    data["description"] = getattr(tool, "description", "")
    data["parameters"] = getattr(tool, "parameters", {})
    if getattr(tool, "execution_mode", None):
        data["executionMode"] = tool.execution_mode
    return data


def serialize_context(context: Context) -> str:
    """The prompt text whose length drives the faux usage estimate."""
    parts: list[str] = []
    system_prompt = get_field(context, "system_prompt", "systemPrompt")
    if system_prompt:
        parts.append(f"system:{system_prompt}")
    for message in get_field(context, "messages") or []:
        parts.append(f"{get_field(message, 'role')}:{_message_to_text(message)}")
    tools = get_field(context, "tools")
    if tools:
        parts.append(f"tools:{_json([_tool_json(t) for t in tools])}")
    return "\n\n".join(parts)


def _common_prefix_length(a: str, b: str) -> int:
    limit = min(len(a), len(b))
    index = 0
    while index < limit and a[index] == b[index]:
        index += 1
    return index


def _estimate_usage(message: AssistantMessage, context: Context, options: Mapping[str, Any],
                    prompt_cache: dict[str, str]) -> Usage:
    prompt_text = serialize_context(context)
    prompt_tokens = _estimate_tokens(prompt_text)
    output = _estimate_tokens(_content_to_text(message.content))
    input_tokens, cache_read, cache_write = prompt_tokens, 0, 0
    session_id = options.get("session_id")
    if session_id and options.get("cache_retention") != "none":
        previous = prompt_cache.get(session_id)
        if previous is not None:
            shared = _common_prefix_length(previous, prompt_text)
            cache_read = _estimate_tokens(prompt_text[:shared])
            cache_write = _estimate_tokens(prompt_text[shared:])
            input_tokens = max(0, prompt_tokens - cache_read)
        else:
            cache_write = prompt_tokens
        prompt_cache[session_id] = prompt_text
    usage = Usage(input=input_tokens, output=output, cache_read=cache_read, cache_write=cache_write)
    usage.total_tokens = usage_total_tokens(usage)
    return usage

