"""Provider ``local``: an embedded model served by a shared, supervised ``llama-server``.

``local/<model>`` (a packaged name such as ``qwen2.5-coder-0.5b``, or a path to a
``.gguf``) joins or starts the machine user's one ``llama-server`` for that model
(local_server.py: a lease per kernel, the server stops with the last one) and talks
to it through the openai-completions wire API, with each request reshaped for the
small model's tool calls (local_tools.py). Leases are dropped at interpreter exit and
on ``stop_local_servers()`` (called by ``%unload_ext``). Nothing here blocks the event
loop: joining or starting the server runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from ..abort import AbortSignal
from ..event_stream import AssistantMessageEventStream
from ..types import AssistantMessage, AssistantMessageEvent, Context, ErrorEvent, Model, ModelCost, Usage
from .local_server import CONTEXT_WINDOW, LlamaServer, remember_prefix
from .local_setup import (
    DEFAULT_LOCAL_MODEL,
    PACKAGED_MODELS,
    LocalSetupError,
    find_llama_server,
    packaged_model_installed,
)
from .local_tools import TextToolCallStream, shape_request, tool_call_mode

__all__ = [
    "LOCAL_API", "LOCAL_PROVIDER", "local_model", "local_model_available", "LlamaServer",
    "get_local_server", "stop_local_servers", "stream_local", "stream_simple_local", "register",
]

LOCAL_API = "llama-server"
LOCAL_PROVIDER = "local"

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
        max_tokens=2048, compat=dict(LOCAL_COMPAT), sampling_params={"temperature": 0},
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


def _stream(model: Model, context: Context, options: dict[str, Any], simple: bool
            ) -> AssistantMessageEventStream:
    out = AssistantMessageEventStream()
    signal: AbortSignal | None = options.get("signal")

    async def run() -> None:
        from ..stream import get_api_provider

        try:
            server = get_local_server(model.id)
            base_url = await asyncio.to_thread(server.start_blocking)
        except LocalSetupError as exc:
            out.push(ErrorEvent(reason="error", error=_setup_error(model, str(exc), False)))
            out.end()
            return
        if signal is not None and signal.aborted:
            out.push(ErrorEvent(reason="aborted", error=_setup_error(model, "Request was aborted", True)))
            out.end()
            return
        wire = get_api_provider("openai-completions")
        assert wire is not None, "the openai-completions provider is built in"
        inner_model = model.model_copy(update={"api": "openai-completions", "base_url": base_url})
        mode = tool_call_mode() if model.id in PACKAGED_MODELS else "server"
        inner_options = {**options, "api_key": options.get("api_key") or "local",
                         "on_payload": _payload_hook(model.id, mode, options.get("on_payload"),
                                                     _last_result_failed(context))}
        fn = wire.stream_simple if simple else wire.stream
        converter = TextToolCallStream(list(context.tools or []))
        async for event in converter.convert(_aiter(fn(inner_model, context, inner_options))):
            if event.type == "start":
                # Messages belong to the model the user chose (api "llama-server"),
                # so that replaying them to the same model keeps thinking etc.
                event.partial.api = model.api
            elif event.type in ("done", "error"):
                (event.message if event.type == "done" else event.error).api = model.api
            out.push(event)
        out.end()

    task = asyncio.get_running_loop().create_task(run())
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)
    return out


async def _aiter(stream: AssistantMessageEventStream) -> AsyncIterator[AssistantMessageEvent]:
    async for event in stream:
        yield event


def _last_result_failed(context: Context) -> bool:
    messages = list(context.messages or [])
    return bool(messages) and messages[-1].role == "toolResult" and bool(getattr(messages[-1], "is_error", False))


def _payload_hook(model_id: str, mode: str, user_hook: Any, last_result_failed: bool) -> Any:
    """Reshape the request for llama-server (local_tools.shape_request), remember its prefix for
    the next server's warm start, then the caller's hook."""

    async def hook(params: dict[str, Any], model: Model) -> Any:
        params = shape_request(params, mode=mode, last_result_failed=last_result_failed)
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
    from ..stream import register_api_provider

    register_api_provider(LOCAL_API, stream_local, stream_simple_local)

