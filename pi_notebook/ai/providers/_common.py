"""What the SSE wire adapters (anthropic, openai_responses, google, openai_completions) share.

Only code whose logic is the same in every adapter lives here: small helpers and
``run_sse_stream``, the request/stream skeleton of spec 5.2. Each adapter keeps its own
request building, SSE event decoding and event mapper; openai_completions also brings its
own body reader (``read_body``: it stops at ``[DONE]`` and parses payloads inline on the
per-token path).
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .. import _http
from .._fast import append_text as append_text  # re-exported: the adapters import it from here
from .._json import parse_streaming_json
from .._sse import SSEDecoder
from ..abort import AbortError
from ..env import AUTHENTICATED, get_env_api_key
from ..errors import connection_lost_text
from ..event_stream import AssistantMessageEventStream
from ..types import (
    AssistantMessage,
    Context,
    DoneEvent,
    ErrorEvent,
    Model,
    StartEvent,
    ToolCall,
    Usage,
    get_field,
)


class ProviderStreamError(Exception):
    """A failure reported by the provider inside an otherwise healthy stream."""


def compat(model: Model) -> Mapping[str, Any]:
    return model.compat or {}


def tool_schema(tool: Any) -> dict[str, Any]:
    """A tool's JSON Schema; AgentTools may carry a pydantic model class instead of a dict."""
    params = get_field(tool, "parameters")
    if hasattr(params, "model_json_schema"):
        return params.model_json_schema()
    return dict(params) if isinstance(params, Mapping) else {"type": "object", "properties": {}}


def has_header(headers: Mapping[str, Any] | None, names: tuple[str, ...]) -> bool:
    """Whether a header named in ``names`` (lower case) is set to a non-empty value."""
    return any(k.lower() in names and v for k, v in (headers or {}).items())


def merge_headers(defaults: dict[str, str | None], model: Model,
                  options: Mapping[str, Any]) -> dict[str, str]:
    """``defaults``, then ``model.headers``, then ``options.headers``; names compare without
    case, the later spelling wins, and a ``None`` value removes the header."""
    merged = defaults
    for source in (model.headers, options.get("headers")):
        for key, value in (source or {}).items():
            for existing in [k for k in merged if k.lower() == key.lower()]:
                del merged[existing]
            merged[key] = value
    return {k: v for k, v in merged.items() if v is not None}


def resolve_api_key(model: Model, options: Mapping[str, Any]) -> str | None:
    """An explicit non-blank ``api_key`` option, else the provider's environment key."""
    key = options.get("api_key")
    if not (isinstance(key, str) and key.strip()):
        key = get_env_api_key(model.provider, options.get("env"))
    return None if key == AUTHENTICATED else key  # ambient credentials: not a key to send


def new_output(model: Model) -> AssistantMessage:
    """The live partial message of one request (spec 5.2)."""
    return AssistantMessage(content=[], api=model.api, provider=model.provider, model=model.id,
                            usage=Usage(), stop_reason="pending")


def fail(stream: AssistantMessageEventStream, output: AssistantMessage, message: str,
         aborted: bool) -> None:
    """End ``stream`` with its one terminal ``error`` event."""
    output.stop_reason = "aborted" if aborted else "error"
    output.error_message = message
    stream.push(ErrorEvent(reason=output.stop_reason, error=output))
    stream.end()


async def maybe_await(value: Any) -> Any:
    """``await value`` when it is awaitable (a coroutine, a Future...), else ``value``."""
    return await value if inspect.isawaitable(value) else value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"Unexpected token {name}")  # JSON.parse rejects NaN / Infinity


# One decoder for the hot path (json.loads with options builds a new one per call).
decode_json = json.JSONDecoder(parse_constant=_reject_constant).decode


# --- the request/stream skeleton (spec 5.2) ----------------------------------------------

ABORTED = "Request was aborted"


class EventMapper:
    """Base of the adapters' event mappers: the live partial message, the events of one
    network read, and the raw JSON of tool calls whose arguments are still streaming.

    A subclass maps provider events onto ``output``, appends our events with ``_emit``,
    keeps raw argument JSON in ``_scratch`` (content index -> text) and marks the call
    ``_dirty``; ``flush`` re-parses each dirty call once per read, so a consumer (it only
    runs between reads) always sees the parse of everything received so far.
    """

    def __init__(self, model: Model, output: AssistantMessage, stream: AssistantMessageEventStream):
        self.model = model
        self.output = output
        self.stream = stream
        # Events of one network read are handed over together (EventStream.push_many).
        self.events: list[Any] = []
        self._emit = self.events.append
        self._scratch: dict[int, str] = {}  # content index -> raw tool-call JSON so far
        self._dirty: set[int] = set()       # tool calls with unparsed fragments

    def flush(self) -> None:
        """Hand the events mapped so far to the consumer, waking it once."""
        if self._dirty:
            content = self.output.content
            for index in self._dirty:
                block = content[index]
                if isinstance(block, ToolCall):
                    block.arguments = parse_streaming_json(self._scratch.get(index, ""))
            self._dirty.clear()
        if self.events:
            self.stream.push_many(self.events)
            self.events.clear()

    def finish(self) -> None:
        """End-of-stream work and checks; raise when the stream did not end properly."""
        raise NotImplementedError


def error_text(exc: BaseException, api_key: str | None,
               describe_http_error: Callable[[_http.HttpStatusError], str]) -> str:
    """The error message of a failed request (spec 5.3), with the key redacted."""
    if isinstance(exc, _http.HttpStatusError):
        text = describe_http_error(exc)
    elif isinstance(exc, _http.ConnectionFailed) and exc.reading and not isinstance(exc, _http.RequestTimeout):
        text = connection_lost_text(exc.host, str(exc))
    else:
        text = str(exc) or type(exc).__name__
    return _http.redact(text, (api_key,))


async def run_sse_stream(
    mapper: EventMapper, options: Mapping[str, Any], *,
    authorize: Callable[[], str | None],
    build_params: Callable[[], dict[str, Any]],
    build_request: Callable[[dict[str, Any], str | None], tuple[str, dict[str, str]]],
    dispatch: Callable[[Any, Any], None] | None = None,
    describe_http_error: Callable[[_http.HttpStatusError], str],
    is_complete: Callable[[], bool] | None = None,
    read_body: Callable[[_http.StreamResponse], Awaitable[None]] | None = None,
) -> None:
    """One POST with an SSE answer, ending ``stream`` with exactly one terminal event.

    ``authorize()`` returns the API key to send (raising when one is missing),
    ``build_params()`` the JSON body (before ``on_payload``), ``build_request(params,
    api_key)`` the URL and headers; ``dispatch(mapper, sse)`` maps one decoded SSE event.
    Reading stops early once ``is_complete()`` says the message is whole. An adapter with
    its own body loop passes ``read_body(response)`` instead of ``dispatch`` (it maps the
    whole body and flushes the mapper per read). The mapper's ``stream`` gets the events and
    its ``output`` is the message they carry.
    """
    model, output, stream = mapper.model, mapper.output, mapper.stream
    signal = options.get("signal")
    api_key: str | None = None
    try:
        api_key = authorize()
        if signal is not None and signal.aborted:
            raise AbortError(ABORTED)
        params = build_params()
        if options.get("on_payload") is not None:
            replaced = await maybe_await(options["on_payload"](params, model))
            if replaced is not None:
                params = replaced
        url, headers = build_request(params, api_key)
        response = await _http.retry_provider_request(
            lambda: _http.open_stream("POST", url, headers=headers, json_body=params, signal=signal,
                                      timeout_ms=options.get("timeout_ms"),
                                      first_byte_timeout_ms=options.get("first_byte_timeout_ms"),
                                      idle_timeout_ms=options.get("idle_timeout_ms"),
                                      secrets=(api_key,)),
            max_retries=options.get("max_retries") or 0,
            max_retry_delay_ms=options.get("max_retry_delay_ms", 60000), signal=signal)
        try:
            if options.get("on_response") is not None:
                await maybe_await(options["on_response"](
                    {"status": response.status, "headers": dict(response.headers)}, model))
            stream.push(StartEvent(partial=output))
            if read_body is not None:
                await read_body(response)
            elif dispatch is not None:
                decoder = SSEDecoder()
                async for chunk in response.iter_bytes():
                    for sse in decoder.feed(chunk):
                        if sse.data.strip():  # an empty data: line is a valid, empty event: nothing to map
                            dispatch(mapper, sse)
                    mapper.flush()
                    if is_complete is not None and is_complete():
                        break
                else:
                    for sse in decoder.flush():
                        if sse.data.strip():
                            dispatch(mapper, sse)
        finally:
            await response.aclose()
        # An abort wins over whatever finish() finds: the except path reports it either way.
        mapper.finish()
        if signal is not None and signal.aborted:
            raise AbortError(ABORTED)
        mapper.flush()
        reason = output.stop_reason
        if reason == "pending" or reason == "error" or reason == "aborted":  # finish() let it through
            raise ProviderStreamError(output.error_message or f"Stream ended with stop reason {reason}")
        stream.push(DoneEvent(reason=reason, message=output))
        stream.end()
    except asyncio.CancelledError:
        mapper.flush()
        fail(stream, output, ABORTED, aborted=True)
        raise
    except Exception as exc:  # every failure becomes the one terminal error event
        mapper.flush()  # updates mapped before the failure still reach the consumer, in order
        aborted = isinstance(exc, AbortError) or bool(signal is not None and signal.aborted)
        fail(stream, output, ABORTED if aborted else error_text(exc, api_key, describe_http_error),
             aborted)


_tasks: set[asyncio.Task[Any]] = set()


def start_stream(run: Callable[..., Any], model: Model, context: Context,
                 options: Mapping[str, Any]) -> AssistantMessageEventStream:
    """Return a stream at once and run ``run(model, context, options, stream)`` as a task."""
    stream = AssistantMessageEventStream()
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        fail(stream, new_output(model), "stream() needs a running asyncio event loop", False)
        return stream
    task = loop.create_task(run(model, context, dict(options), stream))
    _tasks.add(task)  # keep a strong reference until the request finishes
    task.add_done_callback(_tasks.discard)
    return stream


def stream_simple(stream_fn: Callable[..., AssistantMessageEventStream],
                  simple_options: Callable[..., dict[str, Any]],
                  resolve_key: Callable[[Model, Mapping[str, Any]], str | None],
                  model: Model, context: Context, options: Mapping[str, Any] | None
                  ) -> AssistantMessageEventStream:
    """``stream_simple``: map the simple options (spec 5.4), then ``stream_fn``."""
    options = options or {}
    try:
        mapped = simple_options(model, context, options, resolve_key(model, options))
    except Exception as exc:  # bad options (an unknown thinking level...) end the stream, never raise
        stream = AssistantMessageEventStream()
        fail(stream, new_output(model), str(exc) or type(exc).__name__, False)
        return stream
    return stream_fn(model, context, mapped)
