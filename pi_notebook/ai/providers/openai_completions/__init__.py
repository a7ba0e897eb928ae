"""The ``openai-completions`` wire API: OpenAI Chat Completions over SSE (spec 5.6).

This is what OpenAI itself, OpenRouter, Groq, DeepSeek, xAI, Mistral and the local
OpenAI-compatible servers (llama.cpp ``llama-server``, Ollama, vLLM, LM Studio) speak; the
differences between them are *compat* flags: ``detect_compat(model)`` (pi's table, spec 5.6.3)
overridden per key by ``model.compat``, with pi's camelCase names: ``supportsStore``,
``supportsDeveloperRole``, ``supportsReasoningEffort``, ``supportsUsageInStreaming``,
``maxTokensField``, ``requiresToolResultName``, ``requiresAssistantAfterToolResult``,
``requiresThinkingAsText``, ``requiresReasoningContentOnAssistantMessages``, ``thinkingFormat``
(``openai``, ``openrouter``, ``deepseek``, ``zai``, ``qwen``, ``together``, ``ant-ling``,
``chat-template``), ``supportsStrictMode``, ``supportsFinishReason``,
``supportsLongCacheRetention``, ``sessionAffinityFormat``, ``sendSessionAffinityHeaders``,
``cacheControlFormat``, ``openRouterRouting``, ``vercelGatewayRouting`` and
``thinkingBudgetField`` (the body field that carries a thinking-token budget, e.g. for vLLM).
Not in pi: local servers (providers ``ollama``, ``llamacpp``, ``vllm``, ``lmstudio``, ``local``, or
an unknown provider on a loopback URL) are detected and get ``supportsDeveloperRole=False``,
``supportsReasoningEffort=False``, no ``store`` and ``max_tokens``.

Options (a dict, snake_case): ``signal, api_key, headers, temperature, max_tokens, session_id,
cache_retention, on_payload, on_response, max_retries, max_retry_delay_ms, timeout_ms,
tool_choice, sampling_params, env`` and, for ``stream()`` only, ``reasoning_effort`` (the value
sent), ``thinking_enabled`` (``None`` = "enabled iff reasoning_effort is set") and
``thinking_budget_tokens``. ``stream_simple()`` takes ``reasoning`` (a thinking level) and
``thinking_budgets`` instead and maps them (spec 5.4). A missing API key is an ``error`` event
from both (pi's ``streamSimple`` throws instead).

Modules: ``_compat`` (the flag table), ``_request`` (messages, tools, body, headers, URL, the
key check), ``_mapper`` (chunks onto the live partial message, the body reader); this module
runs them on the shared request/stream skeleton of ``providers/_common.py``
(``run_sse_stream``) with the real differences as hooks: the key check (``authorize``), the
body reader (``read_body``: it stops at ``[DONE]`` and parses payloads inline on the per-token
path) and the text of an HTTP error (OpenRouter's ``error.metadata.raw``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ... import _http
from ...errors import format_provider_error
from ...event_stream import AssistantMessageEventStream
from ...models import clamp_thinking_level
from ...options import (
    build_base_options,
    clamp_thinking_budget_to_answer_room,
    thinking_budget_for_level,
)
from ...stream import register_api_provider
from ...types import Context, Model
from .._common import new_output, run_sse_stream, start_stream, stream_simple
from ._compat import detect_compat, get_compat
from ._mapper import CompletionsEventMapper, read_body
from ._request import authorize, build_headers, build_params, chat_url, convert_messages, convert_tools

__all__ = [
    "API", "detect_compat", "get_compat", "convert_messages", "convert_tools", "build_params",
    "stream_openai_completions", "stream_simple_openai_completions", "register",
]

API = "openai-completions"


def _describe_http_error(exc: _http.HttpStatusError) -> str:
    """pi's text for a failed request (spec 5.3): ``"<status>: <body>"``, plus OpenRouter's
    ``error.metadata.raw`` on its own line when the text does not show it yet."""
    text = format_provider_error(exc.status, exc.body, str(exc))
    try:
        body = json.loads(exc.body)
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    metadata = error.get("metadata") if isinstance(error, dict) else None
    raw = metadata.get("raw") if isinstance(metadata, dict) else None
    if isinstance(raw, str) and raw and raw not in text:
        text = f"{text}\n{raw}"
    return text


async def _run(model: Model, context: Context, options: Mapping[str, Any],
               stream: AssistantMessageEventStream) -> None:
    compat = get_compat(model)
    mapper = CompletionsEventMapper(model, new_output(model), stream, compat,
                                    on_progress=options.get("on_progress"))

    def build_request(params: dict[str, Any], api_key: str | None) -> tuple[str, dict[str, str]]:
        return chat_url(model), build_headers(model, options, compat, api_key)

    async def read(response: _http.StreamResponse) -> None:
        await read_body(response, mapper)

    await run_sse_stream(
        mapper, options,
        authorize=lambda: authorize(model, options),
        build_params=lambda: build_params(model, context, options, compat),
        build_request=build_request, read_body=read,
        describe_http_error=_describe_http_error)


def _as_context(context: Context | Mapping[str, Any]) -> Context:
    return context if isinstance(context, Context) else Context.model_validate(context)


def stream_openai_completions(model: Model, context: Context | Mapping[str, Any],
                              options: Mapping[str, Any] | None = None) -> AssistantMessageEventStream:
    """Start a Chat Completions request; returns at once, failures end the stream with ``error``."""
    return start_stream(_run, model, _as_context(context), options or {})


def stream_simple_openai_completions(model: Model, context: Context | Mapping[str, Any],
                                     options: Mapping[str, Any] | None = None
                                     ) -> AssistantMessageEventStream:
    """``reasoning`` (a thinking level) and ``thinking_budgets`` mapped per spec 5.4."""
    return stream_simple(stream_openai_completions, _simple_options, authorize, model,
                         _as_context(context), options)


def _simple_options(model: Model, context: Context, options: Mapping[str, Any],
                    api_key: str | None) -> dict[str, Any]:
    base = dict(build_base_options(model, context, options, api_key))
    for key in ("tool_choice", "session_id", "cache_retention", "on_payload", "on_response", "env"):
        if key in options and key not in base:
            base[key] = options[key]
    level = options.get("reasoning")
    if level and model.reasoning:
        level = clamp_thinking_level(model, level)
    if level == "off" or not model.reasoning:
        level = None
    level_map = model.thinking_level_map or {}
    if level:
        mapped = level_map.get(level)
        base["reasoning_effort"] = mapped if isinstance(mapped, str) else level
        base["thinking_enabled"] = True
        if get_compat(model).get("thinkingBudgetField"):
            budget = thinking_budget_for_level(level, options.get("thinking_budgets"))
            ceiling = base.get("max_tokens") or model.max_tokens
            if ceiling:
                budget = clamp_thinking_budget_to_answer_room(budget, ceiling)
            base["thinking_budget_tokens"] = budget
    else:
        off = level_map.get("off")
        base["reasoning_effort"] = off if isinstance(off, str) else None
        base["thinking_enabled"] = False
    base.pop("reasoning", None)
    base.pop("thinking_budgets", None)
    if api_key is None:
        base.pop("api_key", None)
    return base


def register() -> None:
    register_api_provider(API, stream_openai_completions, stream_simple_openai_completions)
