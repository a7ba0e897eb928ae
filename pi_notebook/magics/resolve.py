"""Default model resolution for ``%%agent``.

Order: the explicit ``-m`` (or ``AgentMagics.model``); else the first cloud provider
whose API key is set in the environment; else an OpenAI-compatible server already
listening on its default local port; else the embedded local model when installed;
else a one-line ``UsageError`` that says how to configure one.

The key itself is never read here beyond "is it set"; the provider reads it per
request through ``get_api_key``.
"""

from __future__ import annotations

import errno
import http.client
import json
import os
import select
import socket
import time
from dataclasses import dataclass
from typing import Any

from IPython.core.error import UsageError

__all__ = ["ResolvedModel", "resolve_model", "probe_local_servers", "CLOUD_DEFAULTS",
           "LOCAL_SERVERS", "NO_MODEL_MESSAGE"]

# provider -> (environment variables that make it usable, default model id)
CLOUD_DEFAULTS: list[tuple[str, tuple[str, ...], str]] = [
    ("anthropic", ("ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_API_KEY"), "claude-sonnet-4-5"),
    ("openai", ("OPENAI_API_KEY",), "gpt-4.1"),
    ("google", ("GEMINI_API_KEY",), "gemini-2.5-flash"),
    ("openrouter", ("OPENROUTER_API_KEY",), "anthropic/claude-sonnet-4.5"),
    ("xai", ("XAI_API_KEY",), "grok-4"),
    ("groq", ("GROQ_API_KEY",), "llama-3.3-70b-versatile"),
    ("mistral", ("MISTRAL_API_KEY",), "mistral-large-latest"),
    ("deepseek", ("DEEPSEEK_API_KEY",), "deepseek-chat"),
]

# provider name -> default port of its OpenAI-compatible server
LOCAL_SERVERS: list[tuple[str, int]] = [("ollama", 11434), ("llamacpp", 8080), ("vllm", 8000),
                                        ("lmstudio", 1234)]

NO_MODEL_MESSAGE = (
    "No model configured: set a provider key (e.g. ANTHROPIC_API_KEY or OPENAI_API_KEY), start a "
    "local server (Ollama, llama.cpp, vLLM, LM Studio), install the embedded model "
    "(pip install 'pi-notebook[local]'), or pick one with %%agent -m provider/model or "
    "%config AgentMagics.model = '...'; '-m faux/<id>' after register_faux_provider() demos the UI."
)


@dataclass
class ResolvedModel:
    model: Any  # pi_notebook.ai.types.Model
    source: str  # "explicit" | "configured" | "cloud" | "local-server" | "embedded"

    @property
    def label(self) -> str:
        """What the view header shows: provider/id and where it came from."""
        spec = f"{self.model.provider}/{self.model.id}"
        if self.source == "cloud":
            return f"{spec} (key from environment)"
        if self.source == "local-server":
            return f"{spec} (local server {self.model.base_url})"
        if self.source == "embedded":
            return f"{spec} (embedded)"
        return spec


def _env_key_set(provider: str, names: tuple[str, ...]) -> bool:
    try:
        from ..ai.env import get_env_api_key
    except ImportError:
        return any(os.environ.get(n) for n in names)
    try:
        return bool(get_env_api_key(provider))
    except Exception:
        return any(os.environ.get(n) for n in names)


def _lookup(spec: str, base_url: str | None) -> Any:
    """``get_model`` for 'provider/id' (or a bare id); unknown: one-line UsageError with
    close ids."""
    from ..ai import models

    try:
        return models.get_model(spec, base_url=base_url or None)
    except KeyError as exc:  # UnknownModelError: its message already suggests close ids
        text = (getattr(exc, "message", None) or str(exc)).replace("\n", " ")
        if not getattr(exc, "suggestions", None):
            text += _suggestion(spec)
        raise UsageError(text) from None


def _suggestion(spec: str) -> str:
    try:
        from ..ai import models

        close = list(models.suggest_model_ids(spec))[:5]
    except Exception:
        close = []
    return f" Did you mean: {', '.join(close)}?" if close else ""


def probe_local_servers(timeout: float = 0.15, host: str = "127.0.0.1",
                        servers: list[tuple[str, int]] | None = None) -> list[tuple[str, int]]:
    """The local servers accepting TCP connections, in preference order.

    All ports are tried at once with non-blocking connects, so the whole probe
    takes at most ``timeout`` seconds (a refused port answers at once).
    """
    servers = LOCAL_SERVERS if servers is None else servers
    pending: dict[socket.socket, tuple[str, int]] = {}
    open_ports: set[tuple[str, int]] = set()
    for name, port in servers:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        code = sock.connect_ex((host, port))
        if code == 0:
            open_ports.add((name, port))
            sock.close()
        elif code in (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN):
            pending[sock] = (name, port)
        else:
            sock.close()
    deadline = time.monotonic() + timeout
    try:
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            _, writable, _ = select.select([], list(pending), [], remaining)
            for sock in writable:
                entry = pending.pop(sock)
                if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    open_ports.add(entry)
                sock.close()
    finally:
        for sock in pending:
            sock.close()
    return [s for s in servers if s in open_ports]


def _served_model_id(host: str, port: int, timeout: float = 1.0) -> str | None:
    """First id from the server's /v1/models, or None when it does not answer."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", "/v1/models")
        response = conn.getresponse()
        if response.status != 200:
            return None
        data = json.loads(response.read(1_000_000) or b"{}")
        items = data.get("data") or data.get("models") or []
        for item in items:
            ident = item.get("id") or item.get("name") if isinstance(item, dict) else None
            if ident:
                return str(ident)
    except (OSError, ValueError, http.client.HTTPException):
        return None
    finally:
        conn.close()
    return None


def _local_server_model(name: str, port: int, host: str = "127.0.0.1") -> Any:
    base_url = f"http://{host}:{port}/v1"
    model_id = _served_model_id(host, port) or "default"
    try:
        from ..ai import models

        model = models.get_model(f"{name}/{model_id}")
    except Exception:
        model = None
    if model is None:
        from ..ai.types import Model

        model = Model(id=model_id, name=model_id, api="openai-completions", provider=name,
                      base_url=base_url, context_window=32768, max_tokens=4096)
    return model.model_copy(update={"base_url": base_url})


def _embedded_model() -> Any | None:
    """``local/<default>`` when the llama.cpp binary and the packaged weights are installed
    (checked without building or starting anything)."""
    try:
        from ..ai.providers import local
    except ImportError:
        return None
    try:
        if not local.local_model_available():
            return None
        return local.local_model()
    except Exception:
        return None


def resolve_model(explicit: str | None = None, configured: str | None = None,
                  base_url: str | None = None, probe_timeout: float = 0.15) -> ResolvedModel:
    """Pick the model for a run (see the module docstring for the order)."""
    if explicit:
        return ResolvedModel(_lookup(explicit.strip(), base_url), "explicit")
    if configured:
        return ResolvedModel(_lookup(configured.strip(), base_url), "configured")
    if base_url:
        # A bare --base-url: an OpenAI-compatible server whose model id we ask it for.
        from urllib.parse import urlsplit

        parts = urlsplit(base_url)
        host, port = parts.hostname or "127.0.0.1", parts.port or (443 if parts.scheme == "https" else 80)
        model_id = _served_model_id(host, port) or "default"
        return ResolvedModel(_lookup(model_id, base_url.rstrip("/")), "explicit")
    for provider, names, default_id in CLOUD_DEFAULTS:
        if _env_key_set(provider, names):
            return ResolvedModel(_lookup(f"{provider}/{default_id}", None), "cloud")
    for name, port in probe_local_servers(probe_timeout):
        return ResolvedModel(_local_server_model(name, port), "local-server")
    embedded = _embedded_model()
    if embedded is not None:
        return ResolvedModel(embedded, "embedded")
    raise UsageError(NO_MODEL_MESSAGE)
