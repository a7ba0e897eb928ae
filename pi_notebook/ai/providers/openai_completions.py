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

Streaming: one text block and one thinking block per message; tool calls keyed by ``index``
(else ``id``), the first id wins; every ``*_end`` event comes when the stream finishes, in content
order. The partial message is one live object mutated in place and per-token work is O(token):
text is appended in place, each SSE payload is parsed once, and the events of one network read
are handed to the stream together, after the tool-call arguments that grew in that read have
been re-parsed (consumers only run between reads, so they always see the best-effort parse of
everything received, as pi's per-fragment re-parse gives).
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Mapping
from typing import Any

from .. import _http
from .._json import parse_streaming_json
from .._sse import SSEDecoder
from ..abort import AbortError
from ..env import get_env_api_key, missing_key_message, needs_api_key
from ..errors import format_provider_error
from ..event_stream import AssistantMessageEventStream
from ..models import calculate_cost, clamp_thinking_level
from ..options import (
    build_base_options, clamp_thinking_budget_to_answer_room, resolve_cache_retention,
    thinking_budget_for_level,
)
from ..stream import register_api_provider
from ..transform import (
    normalize_openai_completions_tool_call_id, sanitize_surrogates, transform_messages,
)
from ..types import (
    SET_EXTRA as _set_extra, SET_FIELDS_SET as _set_fields_set, SET_MODEL_DICT as _set_dict,
    SET_PRIVATE as _set_private, AssistantMessage, Context, DoneEvent, ErrorEvent, ImageContent,
    Model, StartEvent, TextContent, TextDeltaEvent, TextEndEvent, TextStartEvent, ThinkingContent,
    ThinkingDeltaEvent, ThinkingEndEvent, ThinkingStartEvent, ToolCall, ToolCallDeltaEvent,
    ToolCallEndEvent, ToolCallStartEvent, Usage, new_instance as _new_instance,
)
from ._common import ProviderStreamError, new_output

__all__ = [
    "API", "detect_compat", "get_compat", "convert_messages", "convert_tools", "build_params",
    "stream_openai_completions", "stream_simple_openai_completions", "register",
]

API = "openai-completions"
_REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")
_ABORTED = "Request was aborted"

# --- compat ------------------------------------------------------------------------------

_LOCAL_PROVIDERS = {"ollama", "llamacpp", "llama.cpp", "vllm", "lmstudio", "llama-cpp", "local"}
_LOCAL_HOSTS = ("://localhost", "://127.", "://[::1]", "://0.0.0.0")


def _provider_flags(model: Model) -> dict[str, bool]:
    p = (model.provider or "").lower()
    url = (model.base_url or "").lower()
    flags = {
        "cerebras": p == "cerebras" or "cerebras.ai" in url,
        "xai": p == "xai" or "api.x.ai" in url,
        "together": p == "together" or "together.xyz" in url or "together.ai" in url,
        "chutes": p == "chutes" or "chutes.ai" in url,
        "deepseek": p == "deepseek" or "deepseek.com" in url,
        "zai": p.startswith("zai") or "api.z.ai" in url or "bigmodel.cn" in url,
        "moonshot": p.startswith("moonshot") or "moonshot.ai" in url or "moonshot.cn" in url,
        "opencode": p.startswith("opencode") or "opencode.ai" in url,
        "cloudflare": p.startswith("cloudflare") or "cloudflare.com" in url,
        "cloudflare_gateway": p == "cloudflare-ai-gateway" or "gateway.ai.cloudflare.com" in url,
        "nvidia": p == "nvidia" or "nvidia.com" in url,
        "ant_ling": p == "ant-ling",
        "openrouter": p == "openrouter" or "openrouter.ai" in url,
        "openai": p == "openai" or "api.openai.com" in url,
    }
    flags["local"] = p in _LOCAL_PROVIDERS or (any(h in url for h in _LOCAL_HOSTS)
                                              and not any(flags.values()))
    return flags


def detect_compat(model: Model) -> dict[str, Any]:
    """pi's auto-detection from provider name and base URL (spec 5.6.3).

    Not in pi: local servers (``ollama``, ``llamacpp``, ``vllm``, ``lmstudio`` or a loopback base
    URL) get what pi tells their users to set by hand (no developer role, no reasoning_effort),
    plus no ``store`` and the widely supported ``max_tokens`` field.
    """
    f = _provider_flags(model)
    model_id = model.id or ""
    non_standard = any(f[k] for k in ("nvidia", "cerebras", "xai", "together", "chutes", "deepseek",
                                      "zai", "moonshot", "opencode", "cloudflare", "ant_ling"))
    openrouter_native = f["openrouter"] and (model_id.startswith("anthropic/")
                                             or model_id.startswith("openai/"))
    max_tokens_legacy = any(f[k] for k in ("chutes", "deepseek", "moonshot", "cloudflare_gateway",
                                           "together", "nvidia", "ant_ling", "zai"))
    if f["deepseek"]:
        thinking_format = "deepseek"
    elif f["zai"]:
        thinking_format = "zai"
    elif f["together"]:
        thinking_format = "together"
    elif f["ant_ling"]:
        thinking_format = "ant-ling"
    elif f["openrouter"]:
        thinking_format = "openrouter"
    else:
        thinking_format = "openai"
    compat: dict[str, Any] = {
        "supportsStore": not non_standard,
        "supportsDeveloperRole": not non_standard and (not f["openrouter"] or openrouter_native),
        "supportsReasoningEffort": not any(f[k] for k in ("xai", "zai", "moonshot", "together",
                                                          "cloudflare_gateway", "nvidia", "ant_ling")),
        "supportsUsageInStreaming": True,
        "maxTokensField": "max_tokens" if max_tokens_legacy else "max_completion_tokens",
        "requiresToolResultName": False,
        "requiresAssistantAfterToolResult": False,
        "requiresThinkingAsText": False,
        "requiresReasoningContentOnAssistantMessages": f["deepseek"],
        "thinkingFormat": thinking_format,
        "supportsStrictMode": not any(f[k] for k in ("moonshot", "together", "cloudflare_gateway",
                                                     "nvidia")),
        "supportsFinishReason": True,
        "supportsLongCacheRetention": not any(f[k] for k in ("together", "cloudflare", "nvidia",
                                                             "ant_ling")),
        "sessionAffinityFormat": "openrouter" if f["openrouter"] else "openai",
        "sendSessionAffinityHeaders": False,
        "cacheControlFormat": "anthropic" if f["openrouter"] and model_id.startswith("anthropic/")
        else None,
        "thinkingBudgetField": None,
    }
    if f["local"]:
        compat.update(supportsDeveloperRole=False, supportsReasoningEffort=False,
                      supportsStore=False, maxTokensField="max_tokens")
    return compat


def get_compat(model: Model) -> dict[str, Any]:
    """Detected flags overridden, per key, by ``model.compat`` (``None`` values are ignored)."""
    compat = detect_compat(model)
    if model.compat:
        compat.update({k: v for k, v in model.compat.items() if v is not None})
    return compat


# --- request -----------------------------------------------------------------------------

def _image_part(image: ImageContent) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{image.mime_type};base64,{image.data}"}}


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _dumps(value: Any) -> str:
    # JSON.stringify: compact, non-ASCII kept
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def convert_messages(model: Model, context: Context, compat: Mapping[str, Any]) -> list[dict[str, Any]]:
    """pi messages -> Chat Completions ``messages`` (spec 5.6.1)."""
    supports_images = "image" in (model.input or [])
    out: list[dict[str, Any]] = []
    if context.system_prompt:
        role = "developer" if model.reasoning and compat.get("supportsDeveloperRole") else "system"
        out.append({"role": role, "content": sanitize_surrogates(context.system_prompt)})

    messages = transform_messages(list(context.messages or []), model,
                                  normalize_openai_completions_tool_call_id)
    last_role: str | None = None
    i = 0
    while i < len(messages):
        msg = messages[i]
        role = _get(msg, "role")
        if (compat.get("requiresAssistantAfterToolResult") and last_role == "toolResult"
                and role == "user"):
            out.append({"role": "assistant", "content": "I have processed the tool results."})
        if role == "user":
            content = _get(msg, "content")
            if isinstance(content, str):
                out.append({"role": "user", "content": sanitize_surrogates(content)})
            else:
                parts: list[dict[str, Any]] = []
                for block in content or []:
                    kind = _get(block, "type")
                    if kind == "text":
                        parts.append({"type": "text", "text": sanitize_surrogates(_get(block, "text", ""))})
                    elif kind == "image" and supports_images:
                        parts.append(_image_part(block))
                if parts:
                    out.append({"role": "user", "content": parts})
            last_role = "user"
            i += 1
        elif role == "assistant":
            converted = _convert_assistant(msg, compat)
            if converted is not None:
                out.append(converted)
            last_role = "assistant"
            i += 1
        elif role == "toolResult":
            images: list[dict[str, Any]] = []
            while i < len(messages) and _get(messages[i], "role") == "toolResult":
                result = messages[i]
                texts: list[str] = []
                has_image = False
                for block in _get(result, "content") or []:
                    kind = _get(block, "type")
                    if kind == "text":
                        texts.append(_get(block, "text", ""))
                    elif kind == "image":
                        has_image = True
                        if supports_images:
                            images.append(_image_part(block))
                text = "\n".join(texts)
                if not text:
                    text = "(see attached image)" if has_image else "(no tool output)"
                tool_msg: dict[str, Any] = {"role": "tool", "tool_call_id": _get(result, "tool_call_id"),
                                            "content": sanitize_surrogates(text)}
                if compat.get("requiresToolResultName"):
                    tool_msg["name"] = _get(result, "tool_name")
                out.append(tool_msg)
                i += 1
            if images:
                out.append({"role": "user", "content": [
                    {"type": "text", "text": "Attached image(s) from tool result:"}, *images]})
                last_role = "user"
            else:
                last_role = "toolResult"
        else:
            i += 1
    return out


def _convert_assistant(msg: Any, compat: Mapping[str, Any]) -> dict[str, Any] | None:
    texts: list[str] = []
    thinking: list[str] = []
    thinking_field: str | None = None
    reasoning_details: Any = None
    tool_calls: list[dict[str, Any]] = []
    for block in _get(msg, "content") or []:
        kind = _get(block, "type")
        if kind == "text":
            text = _get(block, "text", "")
            if text and text.strip():
                texts.append(sanitize_surrogates(text))
        elif kind == "thinking":
            text = _get(block, "thinking", "")
            signature = _get(block, "thinking_signature")
            if signature in _REASONING_FIELDS:
                thinking_field = thinking_field or signature
            elif isinstance(signature, str) and signature.startswith("["):
                try:
                    reasoning_details = json.loads(signature)
                except ValueError:
                    pass
            if text and text.strip():
                thinking.append(sanitize_surrogates(text))
        elif kind == "toolCall":
            tool_calls.append({"id": _get(block, "id"), "type": "function", "function": {
                "name": _get(block, "name"), "arguments": _dumps(_get(block, "arguments") or {})}})
    as_text = bool(compat.get("requiresThinkingAsText") and thinking)
    if not texts and not as_text and not tool_calls:
        return None  # pi skips a message with no content and no tool calls (thinking alone too)
    result: dict[str, Any] = {"role": "assistant"}
    if as_text:
        result["content"] = [{"type": "text", "text": t} for t in (*thinking, *texts)]
    else:
        # Some local servers (llama-cpp-python) reject a null content: send "" instead.
        result["content"] = "".join(texts)
        if thinking:
            result[thinking_field or "reasoning_content"] = "\n".join(thinking)
        if reasoning_details is not None:
            result["reasoning_details"] = reasoning_details
        if compat.get("requiresReasoningContentOnAssistantMessages") and "reasoning_content" not in result:
            result["reasoning_content"] = ""
    if tool_calls:
        result["tool_calls"] = tool_calls
    return result


def _tool_parameters(tool: Any) -> dict[str, Any]:
    params = _get(tool, "parameters")
    if isinstance(params, type) and hasattr(params, "model_json_schema"):
        return params.model_json_schema()
    if hasattr(params, "model_json_schema"):
        return params.model_json_schema()
    return params if isinstance(params, Mapping) else {"type": "object", "properties": {}}


def convert_tools(tools: list[Any], compat: Mapping[str, Any]) -> list[dict[str, Any]]:
    converted = []
    for tool in tools:
        function: dict[str, Any] = {"name": _get(tool, "name"), "description": _get(tool, "description") or "",
                                    "parameters": _tool_parameters(tool)}
        if compat.get("supportsStrictMode") is not False:
            constrained = _get(tool, "constrained_sampling")
            function["strict"] = bool(_get(constrained, "type") == "json_schema") if constrained else False
        converted.append({"type": "function", "function": function})
    return converted


def _has_tool_history(messages: list[Any]) -> bool:
    for msg in messages:
        role = _get(msg, "role")
        if role == "toolResult":
            return True
        if role == "assistant" and any(_get(b, "type") == "toolCall" for b in _get(msg, "content") or []):
            return True
    return False


def _apply_reasoning(params: dict[str, Any], model: Model, options: Mapping[str, Any],
                     compat: Mapping[str, Any]) -> None:
    effort = options.get("reasoning_effort")
    enabled = options.get("thinking_enabled")
    if enabled is None:
        enabled = effort is not None
    level_map = model.thinking_level_map or {}
    # map.off === null means "this model cannot turn thinking off": send nothing then.
    can_disable = not ("off" in level_map and level_map["off"] is None)
    fmt = compat.get("thinkingFormat") or "openai"
    if fmt == "openai":
        if effort and model.reasoning and compat.get("supportsReasoningEffort"):
            params["reasoning_effort"] = effort
    elif not model.reasoning:
        pass
    elif fmt == "openrouter":
        if enabled:
            params["reasoning"] = {"effort": effort or "medium"}
        elif can_disable:
            params["reasoning"] = {"effort": "none"}
    elif fmt == "deepseek":
        if enabled:
            params["thinking"] = {"type": "enabled"}
            if effort and compat.get("supportsReasoningEffort"):
                params["reasoning_effort"] = effort
        elif can_disable:
            params["thinking"] = {"type": "disabled"}
    elif fmt == "zai":
        params["thinking"] = ({"type": "enabled", "clear_thinking": False} if enabled
                              else {"type": "disabled"})
    elif fmt == "qwen":
        params["enable_thinking"] = bool(enabled)
    elif fmt in ("together", "ant-ling"):
        params["reasoning"] = {"enabled": bool(enabled)}
    elif fmt == "chat-template":
        kwargs = dict(params.get("chat_template_kwargs") or {})
        kwargs["enable_thinking"] = bool(enabled)
        params["chat_template_kwargs"] = kwargs
    budget_field = compat.get("thinkingBudgetField")
    budget = options.get("thinking_budget_tokens")
    if budget_field and enabled and budget is not None:
        params[budget_field] = budget


def _mark_cache_control(params: dict[str, Any]) -> None:
    """OpenRouter ``anthropic/*``: cache breakpoints on the system prompt, last tool, last text."""
    marker = {"type": "ephemeral"}
    messages = params["messages"]
    for msg in messages:
        if msg["role"] in ("system", "developer") and isinstance(msg["content"], str):
            msg["content"] = [{"type": "text", "text": msg["content"], "cache_control": marker}]
            break
    if params.get("tools"):
        params["tools"][-1]["cache_control"] = marker
    for msg in reversed(messages):
        if msg["role"] not in ("user", "assistant", "tool"):
            continue
        content = msg.get("content")
        if isinstance(content, str) and content:
            msg["content"] = [{"type": "text", "text": content, "cache_control": marker}]
            return
        if isinstance(content, list):
            for part in reversed(content):
                if part.get("type") == "text":
                    part["cache_control"] = marker
                    return


def build_params(model: Model, context: Context, options: Mapping[str, Any],
                 compat: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The request body (before ``on_payload``)."""
    compat = compat if compat is not None else get_compat(model)
    params: dict[str, Any] = {"model": model.id, "messages": convert_messages(model, context, compat),
                              "stream": True}
    if compat.get("supportsUsageInStreaming") is not False:
        params["stream_options"] = {"include_usage": True}
    if compat.get("supportsStore"):
        params["store"] = False
    retention = resolve_cache_retention(options)
    session_id = options.get("session_id")
    long_ok = retention == "long" and compat.get("supportsLongCacheRetention") is not False
    if session_id and (("api.openai.com" in (model.base_url or "") and retention != "none") or long_ok):
        params["prompt_cache_key"] = str(session_id)[:64]
    if long_ok:
        params["prompt_cache_retention"] = "24h"
    max_tokens = options.get("max_tokens")
    if max_tokens:
        params[compat.get("maxTokensField") or "max_completion_tokens"] = max_tokens
    if options.get("temperature") is not None:
        params["temperature"] = options["temperature"]
    if context.tools:
        params["tools"] = convert_tools(list(context.tools), compat)
    elif _has_tool_history(list(context.messages or [])):
        params["tools"] = []  # LiteLLM / Anthropic proxies reject tool history without a tools key
    if options.get("tool_choice") is not None:
        params["tool_choice"] = options["tool_choice"]
    _apply_reasoning(params, model, options, compat)
    if compat.get("openRouterRouting"):
        params["provider"] = compat["openRouterRouting"]
    if compat.get("vercelGatewayRouting"):
        params["providerOptions"] = {"gateway": compat["vercelGatewayRouting"]}
    if compat.get("cacheControlFormat") == "anthropic" and retention != "none":
        _mark_cache_control(params)
    sampling = {**(model.sampling_params or {}), **(options.get("sampling_params") or {})}
    params.update(sampling)  # last: explicit sampling params override the named fields
    return params


def _session_headers(compat: Mapping[str, Any], session_id: str | None) -> dict[str, str]:
    if not session_id or not compat.get("sendSessionAffinityHeaders"):
        return {}
    if compat.get("sessionAffinityFormat") == "openrouter":
        return {"x-session-id": str(session_id)}
    return {"session_id": str(session_id)}


def _build_headers(model: Model, options: Mapping[str, Any], compat: Mapping[str, Any],
                   api_key: str | None) -> dict[str, str | None]:
    """Defaults, model headers, session affinity, then option headers (None suppresses)."""
    merged: dict[str, tuple[str, str | None]] = {}

    def put(source: Mapping[str, Any] | None) -> None:
        for name, value in (source or {}).items():
            merged[name.lower()] = (name, value)

    put({"User-Agent": _http.default_user_agent(), "Accept": "text/event-stream"})
    if api_key:
        put({"Authorization": f"Bearer {api_key}"})
    put(model.headers)
    put(_session_headers(compat, options.get("session_id")))
    put(options.get("headers"))
    return {name: value for name, value in merged.values() if value is not None}


def _chat_url(model: Model) -> str:
    base = (model.base_url or "https://api.openai.com/v1").rstrip("/")
    return base if base.endswith("/chat/completions") else base + "/chat/completions"


# --- stream mapping ----------------------------------------------------------------------

_scan_once = json.JSONDecoder().scan_once


def _parse_payload(data: str) -> Any:
    # The C scanner parses one JSON value without json.loads' Python-level wrapper; when it
    # consumes the whole payload the result is exactly json.loads(data). Anything else goes
    # through json.loads, which accepts surrounding whitespace or raises the real error.
    try:
        value, end = _scan_once(data, 0)
        if end == len(data):
            return value
    except (StopIteration, ValueError):
        pass
    try:
        return json.loads(data)
    except ValueError as exc:
        preview = data if len(data) <= 200 else data[:200] + "..."
        raise ProviderStreamError(f"Invalid JSON in stream event: {exc}: {preview}") from None


def _stream_error_message(error: Any) -> str:
    if isinstance(error, Mapping):
        message = error.get("message")
        text = message if isinstance(message, str) and message else _dumps(error)
        metadata = error.get("metadata")
        raw = metadata.get("raw") if isinstance(metadata, Mapping) else None
        if isinstance(raw, str) and raw and raw not in text:
            text = f"{text}\n{raw}"
        return text
    return error if isinstance(error, str) else _dumps(error)


def _delta_event(cls: Any, kind: str, index: int, delta: str, partial: AssistantMessage) -> Any:
    """Build a ``*_delta`` event without re-validating values we just produced.

    This is pydantic's ``model_construct`` minus its generic Python overhead: one of these is
    made per token, so it matters (see bench/stream_overhead.py). The result is an ordinary,
    fully populated instance of ``cls``. The slot setters of ``ai.types`` skip the MRO check
    that ``object.__setattr__`` repeats on every call.
    """
    event = _new_instance(cls)
    _set_dict(event, {"type": kind, "content_index": index, "delta": delta, "partial": partial})
    _set_fields_set(event, {"content_index", "delta", "partial"})
    _set_extra(event, None)
    _set_private(event, None)
    return event


class _ToolState:
    __slots__ = ("block", "index", "parts", "dirty")

    def __init__(self, block: ToolCall, index: int) -> None:
        self.block = block
        self.index = index
        self.parts: list[str] = []   # the raw argument JSON received so far, in pieces
        self.dirty = False

    @property
    def scratch(self) -> str:
        parts = self.parts
        if len(parts) > 1:
            parts[:] = ["".join(parts)]
        return parts[0] if parts else ""


class _Mapper:
    """Maps parsed chunks onto the live ``output`` message and pushes events."""

    def __init__(self, model: Model, output: AssistantMessage, stream: AssistantMessageEventStream) -> None:
        self.model = model
        self.output = output
        self.content = output.content
        self.stream = stream
        # Events of one network read are collected and handed over together (flush_events):
        # the consumer cannot run before this task yields, so nothing observable changes.
        self.pending: list[Any] = []
        self.push = self.pending.append
        self.text_block: TextContent | None = None
        self.text_index = -1
        self.thinking_block: ThinkingContent | None = None
        self.thinking_index = -1
        self.tools_by_index: dict[int, _ToolState] = {}
        self.tools_by_id: dict[str, _ToolState] = {}
        self.tool_states: list[_ToolState] = []
        self.dirty: list[_ToolState] = []
        self.reasoning_details: list[dict[str, Any]] | None = None
        self.finish_seen = False
        self.need_id = True
        self.need_model = True
        self.need_meta = True

    # one parsed SSE payload
    def chunk(self, chunk: Any) -> None:
        if type(chunk) is not dict:
            return
        get = chunk.get
        error = get("error")
        if error:
            raise ProviderStreamError(_stream_error_message(error))
        if self.need_meta:
            self._meta(chunk)
        usage = get("usage")
        if usage:
            self.usage(usage)
        choices = get("choices")
        if not choices or type(choices) is not list:
            return
        choice = choices[0]
        if type(choice) is not dict:
            return
        if not usage:
            choice_usage = choice.get("usage")
            if choice_usage:
                self.usage(choice_usage)
        finish = choice.get("finish_reason")
        if finish:
            self.finish(finish)
        delta = choice.get("delta")
        if not delta or type(delta) is not dict:
            return
        if len(delta) == 1:
            # The common token: {"content": "..."} alone (OpenAI, llama.cpp, vLLM, Ollama).
            # This is text() inlined: it runs once per token.
            text = delta.get("content")
            if type(text) is str:
                block = self.text_block
                if text and block is not None:
                    fields = block.__dict__
                    current = fields["text"]
                    fields["text"] = ""
                    current += text
                    fields["text"] = current
                    event = _new_instance(TextDeltaEvent)
                    _set_dict(event, {"type": "text_delta", "content_index": self.text_index,
                                      "delta": text, "partial": self.output})
                    _set_fields_set(event, {"content_index", "delta", "partial"})
                    _set_extra(event, None)
                    _set_private(event, None)
                    self.push(event)
                elif text:
                    self.text(text)
                return
            calls = delta.get("tool_calls")
            if type(calls) is list:  # the other common token: one tool-call fragment
                for call in calls:
                    if type(call) is dict:
                        self.tool_call(call)
                return
        self.delta(delta)

    def _meta(self, chunk: dict[str, Any]) -> None:
        if self.need_id:
            cid = chunk.get("id")
            if cid:
                self.output.response_id = str(cid)
                self.need_id = False
        if self.need_model:
            cmodel = chunk.get("model")
            if cmodel:
                self.need_model = False
                if cmodel != self.model.id:
                    self.output.response_model = str(cmodel)
        self.need_meta = self.need_id or self.need_model

    def delta(self, delta: dict[str, Any]) -> None:
        """Any delta: pi's fixed order is content, reasoning, tool calls, reasoning details."""
        text = delta.get("content")
        if text and type(text) is str:
            self.text(text)
        for field in _REASONING_FIELDS:
            reasoning = delta.get(field)
            if reasoning and type(reasoning) is str:
                self.thinking(reasoning, field)
                break
        tool_calls = delta.get("tool_calls")
        if tool_calls and type(tool_calls) is list:
            for call in tool_calls:
                if type(call) is dict:
                    self.tool_call(call)
        details = delta.get("reasoning_details")
        if details and type(details) is list:
            self.add_reasoning_details(details)

    def text(self, delta: str) -> None:
        block = self.text_block
        if block is None:
            block = self.text_block = TextContent(text="")
            self.text_index = len(self.content)
            self.content.append(block)
            self.push(TextStartEvent(content_index=self.text_index, partial=self.output))
        # Append in place: drop the dict's reference first so CPython can grow the string
        # without copying it (keeps a long answer O(delta) per token, not O(text)).
        fields = block.__dict__
        text = fields["text"]
        fields["text"] = ""
        text += delta
        fields["text"] = text
        self.push(_delta_event(TextDeltaEvent, "text_delta", self.text_index, delta, self.output))

    def _ensure_thinking(self, field: str) -> ThinkingContent:
        block = self.thinking_block
        if block is None:
            block = self.thinking_block = ThinkingContent(thinking="", thinking_signature=field)
            self.thinking_index = len(self.content)
            self.content.append(block)
            self.push(ThinkingStartEvent(content_index=self.thinking_index, partial=self.output))
        return block

    def thinking(self, delta: str, field: str) -> None:
        block = self._ensure_thinking(field)
        fields = block.__dict__
        text = fields["thinking"]
        fields["thinking"] = ""
        text += delta
        fields["thinking"] = text
        self.push(_delta_event(ThinkingDeltaEvent, "thinking_delta", self.thinking_index, delta, self.output))

    def tool_call(self, call: dict[str, Any]) -> None:
        index = call.get("index")
        call_id = call.get("id")
        function = call.get("function")
        if type(function) is not dict:
            function = {}
        state: _ToolState | None = None
        by_index = type(index) is int
        if by_index:
            state = self.tools_by_index.get(index)
        elif call_id:
            state = self.tools_by_id.get(call_id)
        name = function.get("name")
        if state is None:
            block = ToolCall(id=str(call_id) if call_id else "", name=name if isinstance(name, str) else "",
                             arguments={})
            state = _ToolState(block, len(self.content))
            self.content.append(block)
            self.tool_states.append(state)
            if by_index:
                self.tools_by_index[index] = state
            if call_id:
                self.tools_by_id[call_id] = state
            self.push(ToolCallStartEvent(content_index=state.index, partial=self.output))
        else:
            block = state.block
            # Fill in late ids and names, but never replace them: some servers repeat the name
            # in every delta (llama-cpp-python) or change the id mid-stream; the first one wins.
            if call_id and not block.id:
                block.id = str(call_id)
                self.tools_by_id.setdefault(call_id, state)
            if name and isinstance(name, str) and not block.name:
                block.name = name
        fragment = function.get("arguments")
        if fragment is None:
            fragment = ""
        elif type(fragment) is not str:
            fragment = _dumps(fragment)
        if fragment:
            state.parts.append(fragment)  # joined once per read, not copied per fragment
            if not state.dirty:
                state.dirty = True
                self.dirty.append(state)
        self.push(_delta_event(ToolCallDeltaEvent, "toolcall_delta", state.index, fragment, self.output))

    def flush_events(self) -> None:
        if self.pending:
            self.stream.push_many(self.pending)
            self.pending.clear()

    def parse_arguments(self) -> None:
        """Re-parse the arguments of the tool calls that grew since the last call.

        pi re-parses after every fragment. Here it happens once per network read, before
        control returns to the event loop: consumers run only then, and the partial is live,
        so every event they see still finds the best-effort parse of all JSON received so far
        (rule 9) while a read carrying many fragments costs one parse instead of one per fragment.
        """
        for state in self.dirty:
            state.dirty = False
            state.block.arguments = _as_arguments(parse_streaming_json(state.scratch))
        self.dirty.clear()

    def add_reasoning_details(self, details: list[Any]) -> None:
        collected = self.reasoning_details
        if collected is None:
            collected = self.reasoning_details = []
        for item in details:
            if type(item) is not dict or not isinstance(item.get("type"), str):
                continue
            last = collected[-1] if collected else None
            kind = item["type"]
            if (last is not None and last.get("type") == kind
                    and kind in ("reasoning.text", "reasoning.summary")
                    and last.get("index", 0) == item.get("index", 0)):
                key = "text" if kind == "reasoning.text" else "summary"
                last[key] = (last.get(key) or "") + (item.get(key) or "")
                if item.get("signature"):
                    last["signature"] = item["signature"]
            else:
                collected.append(dict(item))

    def usage(self, raw: Any) -> None:
        if type(raw) is not dict:
            return
        details = raw.get("prompt_tokens_details")
        details = details if type(details) is dict else {}
        cache_read = details.get("cached_tokens")
        if cache_read is None:
            cache_read = raw.get("prompt_cache_hit_tokens")
        if cache_read is None:
            cache_read = raw.get("cached_tokens")
        cache_read = _int(cache_read)
        cache_write = _int(details.get("cache_write_tokens"))
        prompt = _int(raw.get("prompt_tokens"))
        output_tokens = _int(raw.get("completion_tokens"))
        completion_details = raw.get("completion_tokens_details")
        reasoning = _int(completion_details.get("reasoning_tokens")) if type(completion_details) is dict else 0
        input_tokens = max(0, prompt - cache_read - cache_write)
        usage = Usage(input=input_tokens, output=output_tokens, cache_read=cache_read,
                      cache_write=cache_write, reasoning=reasoning,
                      total_tokens=input_tokens + output_tokens + cache_read + cache_write)
        calculate_cost(self.model, usage)
        self.output.usage = usage

    def finish(self, reason: Any) -> None:
        reason = str(reason)
        self.finish_seen = True
        output = self.output
        output.raw_stop_reason = reason
        if reason in ("stop", "end"):
            output.stop_reason = "stop"
        elif reason == "length":
            output.stop_reason = "length"
        elif reason in ("tool_calls", "function_call"):
            output.stop_reason = "toolUse"
        else:
            output.stop_reason = "error"
            output.error_message = f"Provider finish_reason: {reason}"

    def end_blocks(self) -> None:
        """Finish every block in content order (all ``_end`` events come last)."""
        if self.reasoning_details:
            block = self._ensure_thinking("reasoning_details")
            block.thinking_signature = _dumps(self.reasoning_details)
        tools = {id(s.block): s for s in self.tool_states}
        for index, block in enumerate(self.content):
            if isinstance(block, TextContent):
                self.push(TextEndEvent(content_index=index, content=block.text, partial=self.output))
            elif isinstance(block, ThinkingContent):
                self.push(ThinkingEndEvent(content_index=index, content=block.thinking,
                                           partial=self.output))
            elif isinstance(block, ToolCall):
                state = tools.get(id(block))
                if state is not None and state.scratch:
                    block.arguments = _as_arguments(parse_streaming_json(state.scratch))
                self.push(ToolCallEndEvent(content_index=index, tool_call=block, partial=self.output))
        self.flush_events()


def _int(value: Any) -> int:
    if value is None or isinstance(value, bool):
        return 0
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _as_arguments(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


async def _consume(response: _http.StreamResponse, mapper: _Mapper) -> None:
    decoder = SSEDecoder(data_only=True)
    handle = mapper.chunk
    scan = _scan_once
    chunks = response.iter_bytes()
    try:
        async for raw in chunks:
            for data in decoder.feed(raw):
                # _parse_payload, inlined: this loop runs once per token
                try:
                    value, end = scan(data, 0)
                    if end != len(data):
                        value = _parse_payload(data)
                except (StopIteration, ValueError):
                    if data == "[DONE]":
                        await _drain(chunks)
                        return
                    value = _parse_payload(data)
                handle(value)
            if mapper.dirty:
                mapper.parse_arguments()
            mapper.flush_events()
        for data in decoder.flush():
            if data == "[DONE]":
                return
            handle(_parse_payload(data))
    finally:
        if mapper.dirty:
            mapper.parse_arguments()
        mapper.flush_events()
        await chunks.aclose()


async def _drain(chunks: Any, timeout: float = 2.0) -> None:
    """Read the (normally empty) rest of the body after ``[DONE]``.

    Ending the HTTP response cleanly is what lets the connection go back to the pool; a
    server that keeps the stream open after ``[DONE]`` only costs this bounded wait.
    """
    async def rest() -> None:
        async for _ in chunks:
            pass

    try:
        if _timeout_scope is not None:  # 3.11+: no extra task per request
            async with _timeout_scope(timeout):
                await rest()
        else:
            await asyncio.wait_for(rest(), timeout)
    except (asyncio.TimeoutError, _http.HttpError, AbortError):
        pass  # the message is complete; an abort is still seen by the caller's signal check


_timeout_scope = getattr(asyncio, "timeout", None)


def _error_text(exc: BaseException, secrets: tuple[str | None, ...]) -> str:
    """pi's text for a failed request (spec 5.3): ``"<status>: <body>"`` for HTTP errors, plus
    OpenRouter's ``error.metadata.raw`` on its own line when the text does not show it yet."""
    if isinstance(exc, _http.HttpStatusError):
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
    else:
        text = str(exc) or type(exc).__name__
    return _http.redact(text, secrets)


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


async def _run(model: Model, context: Context, options: Mapping[str, Any], api_key: str | None,
               stream: AssistantMessageEventStream) -> None:
    output = new_output(model)
    signal = options.get("signal")
    secrets = (api_key,)
    try:
        if signal is not None and signal.aborted:
            raise _http.RequestAborted()
        compat = get_compat(model)
        params = build_params(model, context, options, compat)
        on_payload = options.get("on_payload")
        if on_payload is not None:
            replaced = await _maybe_await(on_payload(params, model))
            if replaced is not None:
                params = replaced
        headers = _build_headers(model, options, compat, api_key)
        url = _chat_url(model)
        response = await _http.retry_provider_request(
            lambda: _http.open_stream("POST", url, headers=headers, json_body=params, signal=signal,
                                      timeout_ms=options.get("timeout_ms"), secrets=secrets),
            max_retries=options.get("max_retries") or 0,
            max_retry_delay_ms=options.get("max_retry_delay_ms", 60000),
            signal=signal,
        )
        async with response:
            on_response = options.get("on_response")
            if on_response is not None:
                await _maybe_await(on_response({"status": response.status, "headers": dict(response.headers)},
                                               model))
            stream.push(StartEvent(partial=output))
            mapper = _Mapper(model, output, stream)
            await _consume(response, mapper)
        mapper.end_blocks()
        if (signal is not None and signal.aborted) or output.stop_reason == "aborted":
            raise _http.RequestAborted()
        if not mapper.finish_seen and compat.get("supportsFinishReason") is False:
            output.stop_reason = "toolUse" if mapper.tool_states else "stop"
        if output.stop_reason == "error":
            raise ProviderStreamError(output.error_message or "Provider returned an error stop")
        if output.stop_reason == "pending":
            raise ProviderStreamError("Stream ended without finish_reason")
        stream.push(DoneEvent(reason=output.stop_reason, message=output))
        stream.end()
    except Exception as exc:
        aborted = (signal is not None and signal.aborted) or isinstance(exc, AbortError)
        output.stop_reason = "aborted" if aborted else "error"
        output.error_message = _ABORTED if aborted else _error_text(exc, secrets)
        stream.push(ErrorEvent(reason=output.stop_reason, error=output))
        stream.end()
    except asyncio.CancelledError:
        # Our task itself was cancelled (e.g. the loop is shutting down): still end the stream,
        # so that nobody waits forever on it.
        output.stop_reason = "aborted"
        output.error_message = _ABORTED
        stream.push(ErrorEvent(reason="aborted", error=output))
        stream.end()
        raise


def _resolve_api_key(model: Model, options: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(key, error). A key of ``None`` with no error means "send no Authorization header"."""
    headers = {k.lower() for k in (options.get("headers") or {})}
    if "authorization" in headers or "cf-aig-authorization" in headers:
        return None, None  # the caller authenticates through its own header
    key = options.get("api_key")
    if isinstance(key, str) and not key.strip():
        key = None
    if key is None:
        key = get_env_api_key(model.provider, options.get("env"))
    if key == "<authenticated>":
        return None, None
    if key:
        return key, None
    if not needs_api_key(model.provider):
        return None, None  # local servers and custom endpoints take an optional key
    return None, missing_key_message(model.provider)


def _error_stream(model: Model, message: str) -> AssistantMessageEventStream:
    stream = AssistantMessageEventStream()
    output = new_output(model)
    output.stop_reason = "error"
    output.error_message = message
    stream.push(ErrorEvent(reason="error", error=output))
    stream.end()
    return stream


def _spawn(coro: Any) -> None:
    task = asyncio.get_running_loop().create_task(coro)
    _tasks.add(task)  # keep a strong reference until it finishes
    task.add_done_callback(_tasks.discard)


_tasks: set[Any] = set()


def stream_openai_completions(model: Model, context: Context | Mapping[str, Any],
                              options: Mapping[str, Any] | None = None) -> AssistantMessageEventStream:
    """Start a Chat Completions request; returns at once, failures end the stream with ``error``."""
    options = dict(options or {})
    if not isinstance(context, Context):
        context = Context.model_validate(context)
    api_key, key_error = _resolve_api_key(model, options)
    if key_error is not None:
        return _error_stream(model, key_error)
    stream = AssistantMessageEventStream()
    _spawn(_run(model, context, options, api_key, stream))
    return stream


def stream_simple_openai_completions(model: Model, context: Context | Mapping[str, Any],
                                     options: Mapping[str, Any] | None = None
                                     ) -> AssistantMessageEventStream:
    """``reasoning`` (a thinking level) and ``thinking_budgets`` mapped per spec 5.4."""
    options = dict(options or {})
    if not isinstance(context, Context):
        context = Context.model_validate(context)
    api_key, key_error = _resolve_api_key(model, options)
    if key_error is not None:
        return _error_stream(model, key_error)
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
        compat = get_compat(model)
        if compat.get("thinkingBudgetField"):
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
    return stream_openai_completions(model, context, base)


def register() -> None:
    register_api_provider(API, stream_openai_completions, stream_simple_openai_completions)
