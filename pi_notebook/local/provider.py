"""Provider ``local``: an embedded model served by a shared, supervised ``llama-server``.

``local/<model>`` (a packaged name such as ``qwen2.5-coder-0.5b``, or a path to a
``.gguf``) joins or starts the machine user's one ``llama-server`` for that model
(server.py: a lease per kernel, the server stops with the last one) and talks
to it through the openai-completions wire API, with each request reshaped for the
small model's tool calls (tool_calls.py). Leases are dropped at interpreter exit and
on ``stop_local_servers()`` (called by ``%unload_ext``). Nothing here blocks the event
loop: joining or starting the server runs in a worker thread, and an abort ends the wait
for it at once (the start goes on in the background; the next request joins it). A start
that fails ends the request with one error line: what, where, the log's last lines.

Sharing: the server works on several requests at once (server.choose_slots); when
they are all taken a request waits in the server's queue. The first-byte timeout counts
only while nothing waits there (``/metrics``), so a kernel is not failed because another
one is busy; it is checked here, not in the transport.

Decoding is deterministic unless asked otherwise: temperature 0 and a fixed seed (so a
sampled retry, tool_calls.py, is reproducible too); an explicit ``temperature`` or
``sampling_params`` option wins.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from ..ai._http import DEFAULT_FIRST_BYTE_TIMEOUT_MS
from ..ai.abort import AbortController, AbortSignal
from ..ai.errors import embedded_server_lost_text
from ..ai.event_stream import AssistantMessageEventStream
from ..ai.types import (
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    ErrorEvent,
    Model,
    ModelCost,
    PromptProgress,
    Usage,
)
from .server import CONTEXT_WINDOW, LlamaServer, remember_prefix
from .setup import (
    DEFAULT_LOCAL_MODEL,
    PACKAGED_MODELS,
    LocalSetupError,
    find_llama_server,
    packaged_model_installed,
)
from .fenced import fenced_applies
from .repeat import StreamTally, cut_loops
from .tool_calls import TextToolCallStream, shape_request, tool_call_mode

__all__ = [
    "LOCAL_API", "LOCAL_PROVIDER", "local_model", "local_model_available", "LlamaServer",
    "get_local_server", "stop_local_servers", "stream_local", "stream_simple_local", "register",
]

LOCAL_API = "llama-server"
LOCAL_PROVIDER = "local"
LOCAL_SEED = 42  # fixed: the same request gives the same answer, sampled retries included
QUEUE_POLL_S = 1.0  # how often a request still waiting for its first byte asks the server's queue

_log = logging.getLogger(__name__)

# What llama-server's OpenAI endpoint accepts (local-model.md): no developer role,
# no reasoning_effort, no store, no strict tools; greedy decoding suits a 0.5B model.
LOCAL_COMPAT: dict[str, Any] = {
    "supportsDeveloperRole": False,
    "supportsReasoningEffort": False,
    "supportsStore": False,
    "supportsStrictMode": False,
    "maxTokensField": "max_tokens",
}


def local_model(model_id: str = DEFAULT_LOCAL_MODEL) -> Model:
    """The Model for ``local/<model_id>`` (the server is started lazily, on first request)."""
    packaged = PACKAGED_MODELS.get(model_id)
    name = f"{model_id} (embedded, llama.cpp)" if packaged else f"{Path(model_id).name} (llama.cpp)"
    return Model(
        id=model_id, name=name, api=LOCAL_API, provider=LOCAL_PROVIDER, base_url="",
        reasoning=False, input=["text"], cost=ModelCost(), context_window=CONTEXT_WINDOW,
        max_tokens=2048, compat=dict(LOCAL_COMPAT), sampling_params={"temperature": 0, "seed": LOCAL_SEED},
    )


def local_model_available(model_id: str = DEFAULT_LOCAL_MODEL) -> bool:
    """True when both the binary and the weights are installed (nothing is built or started)."""
    return find_llama_server() is not None and packaged_model_installed(model_id)


_servers: dict[str, LlamaServer] = {}
_servers_lock = threading.Lock()


def get_local_server(model_id: str) -> LlamaServer:
    with _servers_lock:
        server = _servers.get(model_id)
        if server is None:
            server = _servers[model_id] = LlamaServer(model_id)
        return server


def stop_local_servers() -> None:
    with _servers_lock:
        servers = list(_servers.values())
        _servers.clear()
    for server in servers:
        server.stop()


atexit.register(stop_local_servers)


# --- the stream function --------------------------------------------------------------------

_tasks: set[asyncio.Task[None]] = set()


def _setup_error(model: Model, message: str, aborted: bool) -> AssistantMessage:
    return AssistantMessage(
        content=[], api=model.api, provider=model.provider, model=model.id, usage=Usage(),
        stop_reason="aborted" if aborted else "error", error_message=message,
    )


def _start_failure(exc: BaseException, server: LlamaServer | None) -> str:
    """One clear line (plus the server log's tail when there is one) for a failed start."""
    if isinstance(exc, LocalSetupError):
        return str(exc)
    where = getattr(exc, "filename", None)
    what = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    text = f"The embedded model server could not start: {what}" + (f" ({where})" if where else "")
    tail = server.log_tail() if server is not None else ""
    return text + (f"\nlog: {server.log_path}\n{tail}" if tail and server is not None else "")


# Said (the ``on_status`` stream option) when joining the server takes longer than a moment:
# a cold start loads the model, and without a word it looks like a long "thinking".
STARTING_TEXT = ("Starting the local model server: it loads the model before the first answer (a "
                 "minute or more on a busy machine); later requests do not wait for it.")
STATUS_AFTER_S = 1.0


def _say_if_slow(start: asyncio.Future[str], on_status: object) -> None:
    if not callable(on_status):
        return

    def say() -> None:
        if not start.done():
            try:
                on_status(STARTING_TEXT)
            except Exception:  # a listener's failure must not fail the request
                _log.debug("pi_notebook: on_status failed", exc_info=True)

    handle = asyncio.get_running_loop().call_later(STATUS_AFTER_S, say)
    start.add_done_callback(lambda _f: handle.cancel())


async def _start_or_abort(server: LlamaServer, signal: AbortSignal | None,
                          on_status: object = None) -> str | None:
    """``server.start_blocking()`` in a worker thread; ``None`` as soon as ``signal`` fires.
    A start that takes more than a moment is announced through ``on_status``.

    The thread is not interrupted (it may be waiting for another kernel's start lock or for
    /health): it finishes in the background and holds this kernel's lease, which the next
    request reuses."""
    start = asyncio.ensure_future(asyncio.to_thread(server.start_blocking))
    _say_if_slow(start, on_status)
    if signal is None:
        return await start
    loop = asyncio.get_running_loop()
    aborted = asyncio.Event()

    def on_abort() -> None:
        try:
            loop.call_soon_threadsafe(aborted.set)
        except RuntimeError:  # the loop is closed
            pass

    remove = signal.add_listener(on_abort)
    waiter = asyncio.ensure_future(aborted.wait())
    try:
        await asyncio.wait({start, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        remove()
        waiter.cancel()
    if start.done():
        return start.result()
    start.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved: no "never retrieved" noise
    return None


def _first_byte_message(seconds: float) -> str:
    return (f"The embedded model server did not start answering within {seconds:g} s of taking the "
            "request (first-byte timeout; time spent queued behind other kernels' requests is not "
            "counted). Raise it with `%config AgentMagics.first_byte_timeout = <seconds>` (0: no limit), "
            "or the first_byte_timeout_ms option outside a notebook.")


async def _first_byte_guarded(events: AsyncIterator[AssistantMessageEvent], server: LlamaServer,
                              bound_s: float | None, inner: AbortController
                              ) -> AsyncIterator[AssistantMessageEvent]:
    """``events``, with the first-byte bound counted only while no request waits in the
    server's queue (when one does, it may be this one). Poll failures count: a server that
    does not answer its metrics is not busy, it is stuck."""
    if bound_s is None:
        async for event in events:
            yield event
        return
    loop = asyncio.get_running_loop()
    timed_out = False

    async def watch() -> None:
        nonlocal timed_out
        charged, last = 0.0, loop.time()
        interval = max(0.05, min(QUEUE_POLL_S, bound_s / 4))
        while True:
            await asyncio.sleep(interval)
            waiting = await asyncio.to_thread(server.requests_waiting)
            now = loop.time()
            if not waiting:  # 0 (nobody queued: ours is being worked on) or None (unknown)
                charged += now - last
            last = now
            if charged >= bound_s:
                timed_out = True
                inner.abort()
                return

    watcher = asyncio.ensure_future(watch())
    try:
        async for event in events:
            if not watcher.done():
                watcher.cancel()
            if timed_out and event.type == "error":
                event.error.stop_reason = "error"
                event.error.error_message = _first_byte_message(bound_s)
                event = ErrorEvent(reason="error", error=event.error)
            yield event
    finally:
        watcher.cancel()


def _stream(model: Model, context: Context, options: dict[str, Any], simple: bool
            ) -> AssistantMessageEventStream:
    out = AssistantMessageEventStream()
    signal: AbortSignal | None = options.get("signal")

    def aborted_end() -> None:
        out.push(ErrorEvent(reason="aborted", error=_setup_error(model, "Request was aborted", True)))
        out.end()

    async def run() -> None:
        server: LlamaServer | None = None
        try:
            server = get_local_server(model.id)
            base_url = await _start_or_abort(server, signal, options.get("on_status"))
        except Exception as exc:  # every failure ends the request: never a run that hangs
            message = _start_failure(exc, server)
            _log.warning("pi_notebook: %s", message)
            out.push(ErrorEvent(reason="error", error=_setup_error(model, message, False)))
            out.end()
            return
        if base_url is None or (signal is not None and signal.aborted):
            aborted_end()
            return
        try:
            await relay(server, base_url)
        except Exception as exc:  # a bug here must still end the stream
            _log.exception("pi_notebook: the local provider failed")
            out.push(ErrorEvent(reason="error", error=_setup_error(model, f"{type(exc).__name__}: {exc}", False)))
            out.end()

    async def relay(server: LlamaServer, base_url: str) -> None:
        from ..ai.stream import get_api_provider

        wire = get_api_provider("openai-completions")
        assert wire is not None, "the openai-completions provider is built in"
        sampling = dict(model.sampling_params or {})
        if options.get("temperature") is not None:
            sampling.pop("temperature", None)  # the caller asked for one
        inner_model = model.model_copy(update={"api": "openai-completions", "base_url": base_url,
                                               "sampling_params": sampling})
        mode = tool_call_mode() if model.id in PACKAGED_MODELS else "server"
        first_byte_ms = options.get("first_byte_timeout_ms")
        first_byte_ms = DEFAULT_FIRST_BYTE_TIMEOUT_MS if first_byte_ms is None else first_byte_ms
        bound_s = first_byte_ms / 1000 if first_byte_ms > 0 else None
        inner = AbortController()
        remove = signal.add_listener(inner.abort) if signal is not None else (lambda: None)
        tally = StreamTally()  # the usage of a reply cut in a loop (the server's never arrives)
        inner_options = {**options, "api_key": server.api_key or "local", "signal": inner.signal,
                         "on_progress": _progress_hook(tally, options.get("on_progress")),
                         "first_byte_timeout_ms": 0,  # counted here, without the queue wait
                         "on_payload": _payload_hook(model.id, mode, options.get("on_payload"),
                                                     _last_result_failed(context))}
        fn = wire.stream_simple if simple else wire.stream
        tools = list(context.tools or [])
        converter = TextToolCallStream(tools, fenced=mode != "server" and fenced_applies(tools))
        events = _first_byte_guarded(_aiter(fn(inner_model, context, inner_options)), server, bound_s, inner)
        try:
            async for event in cut_loops(converter.convert(tally.watch(events)), inner, tally, model):
                if event.type == "start":
                    # Messages belong to the model the user chose (api "llama-server"),
                    # so that replaying them to the same model keeps thinking etc.
                    event.partial.api = model.api
                elif event.type in ("done", "error"):
                    (event.message if event.type == "done" else event.error).api = model.api
                if event.type == "error" and event.error.error_message:
                    # this server is ours: it starts again with the next request
                    event.error.error_message = embedded_server_lost_text(event.error.error_message)
                out.push(event)
        finally:
            remove()
        out.end()

    task = asyncio.get_running_loop().create_task(run())
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)
    return out


async def _aiter(stream: AssistantMessageEventStream) -> AsyncIterator[AssistantMessageEvent]:
    async for event in stream:
        yield event


def _progress_hook(tally: StreamTally, user_hook: Any) -> Callable[[PromptProgress], None]:
    """The prompt's size for the tally, then the caller's ``on_progress``."""

    def hook(progress: PromptProgress) -> None:
        tally.on_progress(progress)
        if user_hook is not None:
            user_hook(progress)

    return hook


def _last_result_failed(context: Context) -> bool:
    messages = list(context.messages or [])
    return bool(messages) and messages[-1].role == "toolResult" and bool(getattr(messages[-1], "is_error", False))


def _payload_hook(model_id: str, mode: str, user_hook: Any, last_result_failed: bool) -> Any:
    """Reshape the request for llama-server (tool_calls.shape_request), remember its prefix for
    the next server's warm start, then the caller's hook."""

    async def hook(params: dict[str, Any], model: Model) -> Any:
        params = shape_request(params, mode=mode, last_result_failed=last_result_failed)
        # reuse the processed tokens of the slot's last prompt up to the first one that differs
        # (compaction keeps the prompt's start unchanged between requests: session/compaction.py)
        params["cache_prompt"] = True
        # prompt_progress chunks while the prompt is read: the view says how far it got instead
        # of a silent "thinking" (the on_progress stream option)
        params["return_progress"] = True
        await asyncio.to_thread(remember_prefix, model_id, params.get("messages") or [],
                                params.get("tools") or [])
        trace = os.environ.get("PI_NOTEBOOK_LOCAL_TRACE", "").strip()
        if trace:  # a developer's lever: every request body, one JSON line each (bench -v reads it)
            await asyncio.to_thread(_append_trace, trace, params)
        if user_hook is None:
            return params
        replaced = user_hook(params, model)
        if asyncio.iscoroutine(replaced):
            replaced = await replaced
        return params if replaced is None else replaced

    return hook


def _append_trace(path: str, params: dict[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(params, default=str) + "\n")


def stream_local(model: Model, context: Context, options: dict[str, Any] | None = None
                 ) -> AssistantMessageEventStream:
    return _stream(model, context, options or {}, simple=False)


def stream_simple_local(model: Model, context: Context, options: dict[str, Any] | None = None
                        ) -> AssistantMessageEventStream:
    return _stream(model, context, options or {}, simple=True)


def register() -> None:
    from ..ai.stream import register_api_provider

    register_api_provider(LOCAL_API, stream_local, stream_simple_local)

