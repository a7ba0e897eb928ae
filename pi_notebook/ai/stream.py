"""The compat global API (spec 5.1): an API-provider registry keyed by ``model.api``
plus ``stream`` / ``complete`` / ``stream_simple`` / ``complete_simple``.

A provider registers two functions, each ``(model, context, options) ->
AssistantMessageEventStream``, returned at once; every request failure ends the
stream with an ``error`` event instead of raising.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .event_stream import AssistantMessageEventStream
from .types import AssistantMessage, Context, Model

__all__ = [
    "ApiProvider", "StreamFunction", "register_api_provider", "unregister_api_providers",
    "add_provider_extension",
    "get_api_provider", "reset_api_providers", "stream", "complete", "stream_simple",
    "complete_simple",
]

StreamFunction = Callable[..., AssistantMessageEventStream]


@dataclass(frozen=True)
class ApiProvider:
    api: str
    stream: StreamFunction
    stream_simple: StreamFunction
    source_id: str | None = None


_registry: dict[str, ApiProvider] = {}
_builtins_loaded = False
_extensions: list[Callable[[], None]] = []


def register_api_provider(
    api: str, stream: StreamFunction, stream_simple: StreamFunction, source_id: str | None = None
) -> None:
    """Register (or replace) the provider for ``api``. The wrapper checks ``model.api``."""

    def _checked(fn: StreamFunction) -> StreamFunction:
        def wrapper(model: Model, context: Context, options: dict[str, Any] | None = None, **kw: Any):
            if model.api != api:
                raise ValueError(f"Mismatched api: {model.api} expected {api}")
            return fn(model, context, _merge(options, kw))

        return wrapper

    _registry[api] = ApiProvider(api, _checked(stream), _checked(stream_simple), source_id)


def unregister_api_providers(source_id: str) -> None:
    for api in [a for a, p in _registry.items() if p.source_id == source_id]:
        del _registry[api]


def reset_api_providers() -> None:
    global _builtins_loaded
    _registry.clear()
    _builtins_loaded = False


def add_provider_extension(register: Callable[[], None]) -> None:
    """A package above this layer that serves an API (the embedded model, ``pi_notebook/local/``)
    hands over its ``register``: it runs with the built-in adapters (on the first ``stream()``,
    and again after ``reset_api_providers``), at once when they are already loaded."""
    if register not in _extensions:
        _extensions.append(register)
    if _builtins_loaded:
        register()


def get_api_provider(api: str) -> ApiProvider | None:
    _load_builtins()
    return _registry.get(api)


def _load_builtins() -> None:
    """Import the built-in wire-API adapters once; each registers itself."""
    global _builtins_loaded
    if _builtins_loaded:
        return
    _builtins_loaded = True
    from .providers import register_builtin_providers

    register_builtin_providers()
    for register in list(_extensions):
        register()


def _merge(options: dict[str, Any] | None, kw: dict[str, Any]) -> dict[str, Any]:
    merged = dict(options or {})
    merged.update(kw)
    return merged


def _resolve(api: str) -> ApiProvider:
    provider = get_api_provider(api)
    if provider is None:
        raise LookupError(f"No API provider registered for api: {api}")
    return provider


def stream(model: Model, context: Context, options: dict[str, Any] | None = None, **kw: Any
           ) -> AssistantMessageEventStream:
    """Provider-specific options (spec 1.7); raises only for an unregistered api."""
    return _resolve(model.api).stream(model, context, _merge(options, kw))


async def complete(model: Model, context: Context, options: dict[str, Any] | None = None, **kw: Any
                   ) -> AssistantMessage:
    return await stream(model, context, options, **kw).result()


def stream_simple(model: Model, context: Context, options: dict[str, Any] | None = None, **kw: Any
                  ) -> AssistantMessageEventStream:
    """``SimpleStreamOptions`` (``reasoning`` = thinking level) mapped per API (spec 5.4)."""
    return _resolve(model.api).stream_simple(model, context, _merge(options, kw))


async def complete_simple(model: Model, context: Context, options: dict[str, Any] | None = None,
                          **kw: Any) -> AssistantMessage:
    return await stream_simple(model, context, options, **kw).result()
