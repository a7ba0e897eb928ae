"""The Chat Completions request: pi messages and tools to the JSON body, headers and URL
(spec 5.6.1, 5.6.2), and the API key the request needs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ... import _http
from ...env import get_env_api_key, missing_key_message, needs_api_key
from ...options import resolve_cache_retention
from ...transform import (
    normalize_openai_completions_tool_call_id,
    sanitize_surrogates,
    transform_messages,
)
from ...types import Context, ImageContent, Model, get_field
from .._common import ProviderStreamError, tool_schema
from ._compat import get_compat

__all__ = ["REASONING_FIELDS", "convert_messages", "convert_tools", "build_params", "build_headers",
           "chat_url", "authorize", "dumps"]

# The delta fields that carry reasoning text, in the order they are looked up.
REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")


def _image_part(image: ImageContent) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{image.mime_type};base64,{image.data}"}}


def dumps(value: Any) -> str:
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
        role = get_field(msg, "role")
        if (compat.get("requiresAssistantAfterToolResult") and last_role == "toolResult"
                and role == "user"):
            out.append({"role": "assistant", "content": "I have processed the tool results."})
        if role == "user":
            content = get_field(msg, "content")
            if isinstance(content, str):
                out.append({"role": "user", "content": sanitize_surrogates(content)})
            else:
                parts: list[dict[str, Any]] = []
                for block in content or []:
                    kind = get_field(block, "type")
                    if kind == "text":
                        parts.append({"type": "text", "text": sanitize_surrogates(get_field(block, "text", default=""))})
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
            while i < len(messages) and get_field(messages[i], "role") == "toolResult":
                result = messages[i]
                texts: list[str] = []
                has_image = False
                for block in get_field(result, "content") or []:
                    kind = get_field(block, "type")
                    if kind == "text":
                        texts.append(get_field(block, "text", default=""))
                    elif kind == "image":
                        has_image = True
                        if supports_images:
                            images.append(_image_part(block))
                text = "\n".join(texts)
                if not text:
                    text = "(see attached image)" if has_image else "(no tool output)"
                tool_msg: dict[str, Any] = {"role": "tool", "tool_call_id": get_field(result, "tool_call_id"),
                                            "content": sanitize_surrogates(text)}
                if compat.get("requiresToolResultName"):
                    tool_msg["name"] = get_field(result, "tool_name")
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
    for block in get_field(msg, "content") or []:
        kind = get_field(block, "type")
        if kind == "text":
            text = get_field(block, "text", default="")
            if text and text.strip():
                texts.append(sanitize_surrogates(text))
        elif kind == "thinking":
            text = get_field(block, "thinking", default="")
            signature = get_field(block, "thinking_signature")
            if signature in REASONING_FIELDS:
                thinking_field = thinking_field or signature
            elif isinstance(signature, str) and signature.startswith("["):
                try:
                    reasoning_details = json.loads(signature)
                except ValueError:
                    pass
            if text and text.strip():
                thinking.append(sanitize_surrogates(text))
        elif kind == "toolCall":
            tool_calls.append({"id": get_field(block, "id"), "type": "function", "function": {
                "name": get_field(block, "name"), "arguments": dumps(get_field(block, "arguments") or {})}})
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


def convert_tools(tools: list[Any], compat: Mapping[str, Any]) -> list[dict[str, Any]]:
    converted = []
    for tool in tools:
        function: dict[str, Any] = {"name": get_field(tool, "name"), "description": get_field(tool, "description") or "",
                                    "parameters": tool_schema(tool)}
        if compat.get("supportsStrictMode") is not False:
            constrained = get_field(tool, "constrained_sampling")
            function["strict"] = bool(get_field(constrained, "type") == "json_schema") if constrained else False
        converted.append({"type": "function", "function": function})
    return converted


def _has_tool_history(messages: list[Any]) -> bool:
    for msg in messages:
        role = get_field(msg, "role")
        if role == "toolResult":
            return True
        if role == "assistant" and any(get_field(b, "type") == "toolCall" for b in get_field(msg, "content") or []):
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


def build_headers(model: Model, options: Mapping[str, Any], compat: Mapping[str, Any],
                   api_key: str | None) -> dict[str, str]:
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


def chat_url(model: Model) -> str:
    base = (model.base_url or "https://api.openai.com/v1").rstrip("/")
    return base if base.endswith("/chat/completions") else base + "/chat/completions"


def authorize(model: Model, options: Mapping[str, Any]) -> str | None:
    """The key to send as ``Authorization: Bearer``; ``None`` means "send none".

    Raises ProviderStreamError naming the environment variable when the provider needs a
    key and none is given. A caller that authenticates through its own ``Authorization``
    (or Cloudflare gateway) header needs none; local servers and custom endpoints take an
    optional one.
    """
    headers = {k.lower() for k in (options.get("headers") or {})}
    if "authorization" in headers or "cf-aig-authorization" in headers:
        return None
    key = options.get("api_key")
    if isinstance(key, str) and not key.strip():
        key = None
    if key is None:
        key = get_env_api_key(model.provider, options.get("env"))
    if key == "<authenticated>":
        return None
    if key:
        return str(key)
    if not needs_api_key(model.provider):
        return None
    raise ProviderStreamError(missing_key_message(model.provider))
