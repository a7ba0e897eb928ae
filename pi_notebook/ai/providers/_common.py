"""What the SSE wire adapters (anthropic, openai_responses, google) share.

Only code whose logic is the same in every adapter lives here; each adapter keeps its
own request building and its own event mapper.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from ..env import AUTHENTICATED, get_env_api_key
from ..event_stream import AssistantMessageEventStream
from ..types import AssistantMessage, ErrorEvent, Model, Usage



class ProviderStreamError(Exception):
    """A failure reported by the provider inside an otherwise healthy stream."""


def append_text(block: Any, field: str, delta: str) -> None:
    """``block.<field> += delta`` in amortised O(len(delta)).

    Dropping the block's own reference first leaves the string with a single owner,
    so CPython can grow it in place instead of copying the whole text per delta.
    """
    d = block.__dict__
    text = d[field] or ""
    d[field] = ""
    text += delta
    d[field] = text


def compat(model: Model) -> Mapping[str, Any]:
    return model.compat or {}


def tool_schema(tool: Any) -> dict[str, Any]:
    """A tool's JSON Schema; AgentTools may carry a pydantic model class instead of a dict."""
    params = getattr(tool, "parameters", None)
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
    return await value if asyncio.iscoroutine(value) else value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"Unexpected token {name}")  # JSON.parse rejects NaN / Infinity


# One decoder for the hot path (json.loads with options builds a new one per call).
decode_json = json.JSONDecoder(parse_constant=_reject_constant).decode
