"""Which model a ``%%agent`` run uses, and why.

Order: the cell's ``-m`` (or ``%agent model``); else ``AgentMagics.model``; else the first
cloud provider whose API key is set in the environment; else an OpenAI-compatible server
already listening on its default local port; else the embedded local model when
installed; else a one-line ``UsageError`` that says how to configure one.

Two entry points, because only part of this is instant:

- :func:`resolve_now` answers from the model catalogue alone (no network). The magic
  calls it, so an unknown provider is the cell's own one-line error.
- :func:`resolve_model` runs the whole order, including the local-server probes of
  :mod:`pi_notebook.ai.discovery`. It blocks (for well under a second), so the run task
  calls it in a worker thread, never on the kernel loop.

API keys are only checked for "is it set"; the provider reads the key per request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from IPython.core.error import UsageError

from ..ai import discovery, models
from ..ai.env import find_env_keys, get_env_api_key, missing_key_message, needs_api_key
from ..ai.stream import get_api_provider
from ..ai.types import Model
from ..local import register as register_local_models

register_local_models()  # `local/<id>` names the embedded model (idempotent: the package did it on import)

__all__ = ["ResolvedModel", "ModelSource", "resolve_now", "resolve_model", "lookup",
           "typo_warning", "unreachable_reason", "CLOUD_DEFAULTS", "NO_MODEL_MESSAGE", "no_model_message"]

ModelSource = Literal["explicit", "configured", "cloud", "local-server", "embedded"]

# provider -> default model id, in preference order (the key variables are ai.env's)
CLOUD_DEFAULTS: list[tuple[str, str]] = [
    ("anthropic", "claude-sonnet-4-5"),
    ("openai", "gpt-4.1"),
    ("google", "gemini-2.5-flash"),
    ("openrouter", "anthropic/claude-sonnet-4.5"),
    ("xai", "grok-4"),
    ("groq", "llama-3.3-70b-versatile"),
    ("mistral", "mistral-large-latest"),
    ("deepseek", "deepseek-chat"),
]

_NO_MODEL = (
    "No model configured: set a provider key (e.g. ANTHROPIC_API_KEY or OPENAI_API_KEY), start a "
    "local server (Ollama, llama.cpp, vLLM, LM Studio), {embedded}, or pick one with "
    "%%agent -m provider/model or %config AgentMagics.model = '...'; '-m faux/<id>' after "
    "register_faux_provider() demos the UI."
)
NO_MODEL_MESSAGE = _NO_MODEL.format(embedded="install the embedded model (pip install 'pi-notebook[local]')")


def no_model_message(embedded_gap: str | None) -> str:
    """The one-line help when nothing can serve a run, naming what the embedded model
    actually lacks: its weights (the pip extra) or only the llama-server build."""
    if embedded_gap != "build":
        return NO_MODEL_MESSAGE
    from ..local.setup import build_hint

    return _NO_MODEL.format(embedded="use the embedded model (its weights are installed but "
                                     f"llama-server is not built yet: {build_hint()})")


@dataclass(frozen=True)
class ResolvedModel:
    model: Model
    source: ModelSource
    reason: str = ""  # which rule picked it, for %agent status
    warning: str | None = None  # e.g. a likely typo in the model id (the id is still used)

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


def lookup(spec: str, base_url: str | None = None) -> Model:
    """The catalogue's model for 'provider/id' (or a bare id); an unknown provider is a
    one-line ``UsageError`` naming close ids."""
    try:
        return models.get_model(spec, base_url=base_url or None)
    except models.UnknownModelError as exc:  # its message already suggests close ids
        text = exc.message.replace("\n", " ")
        if not exc.suggestions:
            close = models.suggest_model_ids(spec, 5)
            if close:
                text += f" Did you mean: {', '.join(close)}?"
        raise UsageError(text) from None


def typo_warning(spec: str, model: Model) -> str | None:
    """A "did you mean" line when ``model`` is an id the catalogue does not list for a
    known cloud provider (local servers serve whatever they were given)."""
    provider = model.provider
    if models.is_local_provider(provider) or provider not in models.get_providers():
        return None
    known = {m.id for m in models.get_models(provider)}
    if not known or model.id in known:
        return None
    close = models.suggest_model_ids(f"{provider}/{model.id}", 1)
    hint = f" Did you mean {close[0]}?" if close else ""
    return f"{provider}/{model.id} is not in the model catalogue.{hint} (Using it as given.)"


def _explicit(spec: str, base_url: str | None, source: ModelSource, reason: str) -> ResolvedModel:
    spec = spec.strip()
    model = lookup(spec, base_url)
    return ResolvedModel(model, source, reason, typo_warning(spec, model))


def resolve_now(explicit: str | None, configured: str | None, base_url: str | None,
                explicit_reason: str = "-m in the cell") -> ResolvedModel | None:
    """The model when the catalogue alone decides it (a named model), else None: the
    full order (:func:`resolve_model`) needs the network and runs in the run task."""
    if explicit:
        return _explicit(explicit, base_url, "explicit", explicit_reason)
    if configured:
        return _explicit(configured, base_url, "configured", "AgentMagics.model")
    return None


def resolve_model(explicit: str | None = None, configured: str | None = None,
                  base_url: str | None = None, probe_timeout: float = 0.15,
                  server_timeout: float = 1.0) -> ResolvedModel:
    """Pick the model for a run (module docstring). Blocks: call it off the loop thread."""
    named = resolve_now(explicit, configured, base_url)
    if named is not None:
        return named
    if base_url:
        # A bare --base-url: an OpenAI-compatible server, asked which model it serves.
        parts = urlsplit(base_url)
        host = parts.hostname or "127.0.0.1"
        port = parts.port or (443 if parts.scheme == "https" else 80)
        model_id = discovery.served_model_id(host, port, server_timeout) or "default"
        return ResolvedModel(lookup(model_id, base_url.rstrip("/")), "explicit",
                             f"the server at {base_url} (--base-url)")
    for provider, default_id in CLOUD_DEFAULTS:
        if get_env_api_key(provider):
            names = ", ".join(find_env_keys(provider) or [])
            return ResolvedModel(lookup(f"{provider}/{default_id}"), "cloud",
                                 f"{names} is set (the first cloud provider with a key)")
    for name, port in discovery.probe_local_servers(probe_timeout):
        return ResolvedModel(_local_server_model(name, port, server_timeout), "local-server",
                             f"a server listens on 127.0.0.1:{port} (no cloud key is set)")
    embedded = _embedded_model()
    if embedded is not None:
        return ResolvedModel(embedded, "embedded",
                             "the embedded model is installed (no cloud key, no local server)")
    from ..local.setup import embedded_missing  # on demand, as _embedded_model

    raise UsageError(no_model_message(embedded_missing()))


def _local_server_model(name: str, port: int, timeout: float, host: str = "127.0.0.1") -> Model:
    base_url = f"http://{host}:{port}/v1"
    model_id = discovery.served_model_id(host, port, timeout) or "default"
    # the catalogue knows the local providers: any id gets their defaults
    return models.get_model(name, model_id, base_url=base_url)


def _embedded_model() -> Model | None:
    """``local/<default>`` when the llama.cpp binary and the packaged weights are installed
    (checked without building or starting anything)."""
    from ..local import provider as local  # imported on demand: it pulls in the server manager

    if not local.local_model_available():
        return None
    return local.local_model()


def unreachable_reason(model: Model) -> str | None:
    """Why no request to ``model`` can succeed, known before sending one: no API for it
    is registered, or its provider needs a key and none is set. None: go ahead."""
    if get_api_provider(model.api) is None:
        return f"No API provider registered for api: {model.api} ({model.provider}/{model.id})."
    has_auth_header = any(k.lower() in ("authorization", "x-api-key", "x-goog-api-key")
                          for k in (model.headers or {}))
    if needs_api_key(model.provider) and not get_env_api_key(model.provider) and not has_auth_header:
        return missing_key_message(model.provider)
    return None
