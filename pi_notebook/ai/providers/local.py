"""Provider ``local``: an embedded model served by a supervised ``llama-server``.

``local/<model>`` (a packaged name such as ``qwen2.5-coder-0.5b``, or a path to a
``.gguf``) starts one ``llama-server`` per model on a free 127.0.0.1 port on first
use, waits for ``/health``, and then talks to it through the openai-completions
wire API. Servers stop at interpreter exit and on ``stop_local_servers()`` (called
by ``%unload_ext``). Nothing here blocks the event loop: the process start and the
health polling run in worker threads.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from ..abort import AbortSignal
from ..event_stream import AssistantMessageEventStream
from ..types import AssistantMessage, AssistantMessageEvent, Context, ErrorEvent, Model, ModelCost, Usage
from .local_setup import (
    DEFAULT_LOCAL_MODEL,
    PACKAGED_MODELS,
    SETUP_HINT,
    LocalSetupError,
    find_llama_server,
    packaged_model_installed,
    resolve_model_path,
)
from .local_tools import TextToolCallStream, shape_request, tool_call_mode

__all__ = [
    "LOCAL_API", "LOCAL_PROVIDER", "local_model", "local_model_available", "LlamaServer",
    "get_local_server", "stop_local_servers", "stream_local", "stream_simple_local", "register",
]

LOCAL_API = "llama-server"
LOCAL_PROVIDER = "local"
CONTEXT_WINDOW = 8192
HEALTH_TIMEOUT_S = 120.0

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


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """One supervised llama-server process for one GGUF file."""

    def __init__(self, model_id: str, threads: int | None = None) -> None:
        self.model_id = model_id
        # One thread by default: with two threads and anything else busy on a
        # 2-core machine llama.cpp collapses to <1 tok/s (measured, local-model.md).
        self.threads = threads or int(os.environ.get("PI_NOTEBOOK_LLAMA_THREADS", "1"))
        self.process: subprocess.Popen[bytes] | None = None
        self.port: int | None = None
        self.log_path: Path | None = None
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start_blocking(self) -> str:
        """Start (once) and wait until healthy; raises LocalSetupError with a clear message."""
        with self._lock:
            if self.running():
                return self.base_url
            binary = find_llama_server()
            if binary is None:
                raise LocalSetupError(
                    "llama-server is not installed. Build it once with "
                    f"`{SETUP_HINT} binary` (about 8 minutes), put llama-server on PATH, "
                    "or set PI_NOTEBOOK_LLAMA_SERVER to its path."
                )
            gguf, template = resolve_model_path(self.model_id)
            self.port = _free_port()
            log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False)
            self.log_path = Path(log.name)
            cmd = [
                str(binary), "-m", str(gguf), "-a", self.model_id, "--host", "127.0.0.1",
                "--port", str(self.port), "-c", str(CONTEXT_WINDOW), "-np", "1",
                "-t", str(self.threads), "-tb", str(self.threads),
            ]
            if template is not None:
                cmd += ["--jinja", "--chat-template-file", str(template)]
            self.process = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,  # the kernel's Stop button (SIGINT) must not kill it
            )
            log.close()
            self._wait_healthy()
            return self.base_url

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + HEALTH_TIMEOUT_S
        url = f"http://127.0.0.1:{self.port}/health"
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise LocalSetupError(
                    f"llama-server exited with code {self.process.returncode}:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(url, timeout=1) as resp:
                    if resp.status == 200 and json.loads(resp.read() or b"{}").get("status") == "ok":
                        return
            except (urllib.error.URLError, OSError, ValueError):
                pass
            time.sleep(0.1)
        self.stop()
        raise LocalSetupError(f"llama-server did not become healthy in {HEALTH_TIMEOUT_S:.0f} s")

    def log_tail(self, lines: int = 15) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


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
                         "on_payload": _payload_hook(mode, options.get("on_payload"))}
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


def _payload_hook(mode: str, user_hook: Any) -> Any:
    """Reshape the request for llama-server (local_tools.shape_request), then the caller's hook."""

    async def hook(params: dict[str, Any], model: Model) -> Any:
        params = shape_request(params, mode=mode)
        if user_hook is None:
            return params
        replaced = user_hook(params, model)
        if asyncio.iscoroutine(replaced):
            replaced = await replaced
        return params if replaced is None else replaced

    return hook


def stream_local(model: Model, context: Context, options: dict[str, Any] | None = None
                 ) -> AssistantMessageEventStream:
    return _stream(model, context, options or {}, simple=False)


def stream_simple_local(model: Model, context: Context, options: dict[str, Any] | None = None
                        ) -> AssistantMessageEventStream:
    return _stream(model, context, options or {}, simple=True)


def register() -> None:
    from ..stream import register_api_provider

    register_api_provider(LOCAL_API, stream_local, stream_simple_local)

