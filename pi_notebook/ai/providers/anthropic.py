"""The ``anthropic-messages`` wire API (spec 5.8): Anthropic's Messages API over SSE.

Three layers, each testable on its own:

- ``convert_messages`` / ``build_params`` / ``build_headers``: pi messages -> request;
- ``AnthropicEventMapper``: one decoded SSE event at a time -> the live partial message
  plus our stream events (pure, no I/O);
- ``stream_anthropic_messages``: the key check, URL and headers, run through the shared
  request/stream skeleton (``_common.run_sse_stream``, spec 5.2).

Not ported on purpose: Claude-Code OAuth tokens (``sk-ant-oat``: Bearer auth, identity
headers and renamed tools), Bedrock and Vertex transports, deferred responses and
grammar-constrained tools. An OAuth token given explicitly ends the stream with a clear
error; one found in ``ANTHROPIC_OAUTH_TOKEN`` gives way to ``ANTHROPIC_API_KEY`` when set.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .. import _http
from .._fast import delta_event
from .._json import parse_final_arguments, parse_json_with_repair, parse_streaming_json
from ..env import get_env_api_key, get_provider_env_value, missing_key_message, needs_api_key
from ..event_stream import AssistantMessageEventStream
from ..models import calculate_cost, clamp_thinking_level, is_answered_snapshot
from ..options import (
    adjust_max_tokens_for_thinking,
    build_base_options,
    clamp_max_tokens_to_context,
    resolve_cache_retention,
)
from ..stream import register_api_provider
from ..transform import normalize_anthropic_tool_call_id, sanitize_surrogates, transform_messages
from ..types import (
    AssistantMessage,
    Context,
    Model,
    StopReason,
    TextContent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingContent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    mark_arguments_incomplete,
)
from ._common import (
    AUTHENTICATED,
    EventMapper,
    ProviderStreamError,
    append_text,
    decode_json,
    has_header,
    merge_headers,
    new_output,
    run_sse_stream,
    start_stream,
    stream_simple,
    tool_schema,
)
from ._common import (
    compat as _compat,
)

__all__ = [
    "API", "convert_messages", "build_params", "build_headers", "AnthropicEventMapper",
    "map_stop_reason", "stream_anthropic_messages", "stream_simple_anthropic_messages",
    "register",
]

API = "anthropic-messages"
ANTHROPIC_VERSION = "2023-06-01"
INTERLEAVED_THINKING_BETA = "interleaved-thinking-2025-05-14"
FINE_GRAINED_TOOL_STREAMING_BETA = "fine-grained-tool-streaming-2025-05-14"
REDACTED_PLACEHOLDER = "[Reasoning redacted]"
_AUTH_HEADERS = ("authorization", "x-api-key", "cf-aig-authorization")


# --- request ---------------------------------------------------------------------------

def _cache_control(retention: str) -> dict[str, Any] | None:
    if retention == "none":
        return None
    control: dict[str, Any] = {"type": "ephemeral"}
    if retention == "long":
        control["ttl"] = "1h"
    return control


def _image_block(image: Any) -> dict[str, Any]:
    return {"type": "image",
            "source": {"type": "base64", "media_type": image.mime_type, "data": image.data}}


def _user_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": sanitize_surrogates(content)}] if content.strip() else []
    blocks: list[dict[str, Any]] = []
    for part in content or []:
        if part.type == "text":
            if part.text.strip():
                blocks.append({"type": "text", "text": sanitize_surrogates(part.text)})
        elif part.type == "image":
            blocks.append(_image_block(part))
    return blocks


def _tool_result_content(content: list[Any]) -> str | list[dict[str, Any]]:
    texts = [sanitize_surrogates(c.text) for c in content if c.type == "text"]
    if not any(c.type == "image" for c in content):
        return "\n".join(texts)
    blocks: list[dict[str, Any]] = []
    for part in content:
        if part.type == "text":
            blocks.append({"type": "text", "text": sanitize_surrogates(part.text)})
        elif part.type == "image":
            blocks.append(_image_block(part))
    if not texts:
        blocks.insert(0, {"type": "text", "text": "(see attached image)"})
    return blocks


def _assistant_blocks(message: AssistantMessage, model: Model) -> list[dict[str, Any]]:
    allow_empty_signature = bool(_compat(model).get("allowEmptySignature"))
    blocks: list[dict[str, Any]] = []
    for part in message.content:
        if part.type == "text":
            if part.text.strip():
                blocks.append({"type": "text", "text": sanitize_surrogates(part.text)})
        elif part.type == "thinking":
            signature = part.thinking_signature or ""
            if part.redacted:
                blocks.append({"type": "redacted_thinking", "data": signature})
            elif signature.strip():
                blocks.append({"type": "thinking", "thinking": sanitize_surrogates(part.thinking),
                               "signature": signature})
            elif not part.thinking.strip():
                continue  # blank unsigned thinking carries nothing worth replaying
            elif allow_empty_signature:
                blocks.append({"type": "thinking", "thinking": sanitize_surrogates(part.thinking),
                               "signature": ""})
            else:
                blocks.append({"type": "text", "text": sanitize_surrogates(part.thinking)})
        elif part.type == "toolCall":
            blocks.append({"type": "tool_use", "id": part.id, "name": part.name,
                           "input": part.arguments or {}})
    return blocks


def _claim_snapshot_answers(messages: list[Any], model: Model) -> list[Any]:
    """Give our own earlier answers back the requested model id before the transform.

    pi 0.85.1 records the model named in ``message_start`` (a dated snapshot for an
    alias), so ``transform_messages`` would see the previous turn as another model's and
    turn its signed thinking into text; with thinking on, Anthropic then rejects the
    tool-use continuation. Known upstream (earendil-works/pi#9188). Only answers of this
    provider and API whose model the catalogue lists as a snapshot of the requested alias are
    claimed: the dated id is not always the alias plus a date (``claude-sonnet-4-0`` is
    answered as ``claude-sonnet-4-20250514``).
    """
    out = []
    for message in messages:
        if (getattr(message, "role", None) == "assistant" and message.provider == model.provider
                and message.api == model.api and message.model != model.id
                and is_answered_snapshot(model, message.model)):
            message = message.model_copy(update={"model": model.id})
        out.append(message)
    return out


def convert_messages(messages: list[Any], model: Model) -> list[dict[str, Any]]:
    """pi messages -> Anthropic ``messages`` (after the cross-provider transform, 5.5)."""
    transformed = transform_messages(_claim_snapshot_answers(messages, model), model,
                                     normalize_anthropic_tool_call_id)
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(transformed):
        message = transformed[i]
        if message.role == "user":
            blocks = _user_blocks(message.content)
            if blocks:
                out.append({"role": "user", "content": blocks})
        elif message.role == "assistant":
            blocks = _assistant_blocks(message, model)
            if blocks:
                out.append({"role": "assistant", "content": blocks})
        elif message.role == "toolResult":
            # A run of tool results is one user turn holding several tool_result blocks.
            results: list[dict[str, Any]] = []
            while i < len(transformed) and transformed[i].role == "toolResult":
                result = transformed[i]
                results.append({"type": "tool_result", "tool_use_id": result.tool_call_id,
                                "content": _tool_result_content(result.content),
                                "is_error": bool(result.is_error)})
                i += 1
            out.append({"role": "user", "content": results})
            continue
        i += 1
    return out


def _convert_tools(tools: list[Any], model: Model, cache_control: dict[str, Any] | None
                   ) -> list[dict[str, Any]]:
    compat = _compat(model)
    eager = compat.get("supportsEagerToolInputStreaming") is not False
    strict_ok = bool(compat.get("supportsStrictTools"))
    out: list[dict[str, Any]] = []
    for tool in tools:
        schema = tool_schema(tool)
        entry: dict[str, Any] = {
            "name": tool.name,
            "description": tool.description or "",
            "input_schema": {"type": "object", "properties": schema.get("properties", {}),
                             "required": schema.get("required", [])},
        }
        if "$defs" in schema:  # nested pydantic models refer to these
            entry["input_schema"]["$defs"] = schema["$defs"]
        if eager:
            entry["eager_input_streaming"] = True
        sampling = getattr(tool, "constrained_sampling", None)
        if strict_ok and isinstance(sampling, dict) and sampling.get("type") == "json_schema":
            entry["strict"] = True
        out.append(entry)
    if out and cache_control:
        out[-1]["cache_control"] = dict(cache_control)
    return out


def _thinking_enabled(options: Mapping[str, Any]) -> bool:
    return bool(options.get("thinking_enabled"))


def _uses_adaptive_thinking(model: Model) -> bool:
    return bool(_compat(model).get("forceAdaptiveThinking"))


def build_params(model: Model, context: Context, options: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON body of ``POST /v1/messages``."""
    retention = resolve_cache_retention(options)
    cache_control = _cache_control(retention)
    messages = convert_messages(list(context.messages or []), model)
    if cache_control and messages:
        # Cache the whole prompt: mark the last block of the last user turn.
        for message in reversed(messages):
            if message["role"] == "user":
                message["content"][-1]["cache_control"] = dict(cache_control)
                break

    params: dict[str, Any] = {
        "model": model.id,
        "messages": messages,
        "max_tokens": options.get("max_tokens") or model.max_tokens or 4096,  # the API requires one
        "stream": True,
    }
    if context.system_prompt:
        system: dict[str, Any] = {"type": "text", "text": sanitize_surrogates(context.system_prompt)}
        if cache_control:
            system["cache_control"] = dict(cache_control)
        params["system"] = [system]

    thinking_on = _thinking_enabled(options)
    temperature = options.get("temperature")
    if temperature is not None and not thinking_on and _compat(model).get("supportsTemperature", True) is not False:
        params["temperature"] = temperature

    if context.tools:
        params["tools"] = _convert_tools(list(context.tools), model, cache_control)

    display = options.get("thinking_display") or "summarized"
    if model.reasoning and thinking_on:
        if _uses_adaptive_thinking(model):
            params["thinking"] = {"type": "adaptive", "display": display}
            if options.get("effort"):
                params["output_config"] = {"effort": options["effort"]}
        else:
            budget = options.get("thinking_budget_tokens") or 1024
            max_tokens = params["max_tokens"]
            params["thinking"] = {"type": "enabled",
                                  "budget_tokens": min(budget, max(0, max_tokens - 1024)) or 1024,
                                  "display": display}
    elif model.reasoning and options.get("thinking_enabled") is False:
        level_map = model.thinking_level_map or {}
        if not ("off" in level_map and level_map["off"] is None):
            params["thinking"] = {"type": "disabled"}

    metadata = options.get("metadata") or {}
    if isinstance(metadata, Mapping) and metadata.get("user_id"):
        params["metadata"] = {"user_id": metadata["user_id"]}

    tool_choice = options.get("tool_choice")
    if isinstance(tool_choice, str):
        params["tool_choice"] = {"type": tool_choice}
    elif isinstance(tool_choice, Mapping):
        params["tool_choice"] = dict(tool_choice)
    return params


def build_headers(model: Model, api_key: str | None, options: Mapping[str, Any],
                  params: Mapping[str, Any]) -> dict[str, str]:
    """Request headers; ``options.headers`` win, and a ``None`` value removes a header."""
    betas: list[str] = []
    if params.get("tools") and _compat(model).get("supportsEagerToolInputStreaming") is False:
        betas.append(FINE_GRAINED_TOOL_STREAMING_BETA)
    thinking = params.get("thinking") or {}
    if thinking.get("type") == "enabled" and options.get("interleaved_thinking", True) is not False:
        betas.append(INTERLEAVED_THINKING_BETA)

    merged: dict[str, str | None] = {
        "content-type": "application/json",
        "accept": "text/event-stream",
        "anthropic-version": ANTHROPIC_VERSION,
    }
    if api_key:
        merged["x-api-key"] = api_key
    if betas:
        merged["anthropic-beta"] = ",".join(betas)
    return merge_headers(merged, model, options)


# --- stream mapping --------------------------------------------------------------------

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "stop", "max_tokens": "length", "tool_use": "toolUse", "pause_turn": "stop",
    "stop_sequence": "stop",
}


def map_stop_reason(reason: str, stop_details: Any = None) -> tuple[StopReason, str | None]:
    """Anthropic ``stop_reason`` -> (pi stop reason, error message or None)."""
    if reason in _STOP_REASONS:
        return _STOP_REASONS[reason], None
    if reason == "refusal":
        explanation = stop_details.get("explanation") if isinstance(stop_details, Mapping) else None
        return "error", explanation or "The model refused to complete the request"
    if reason == "sensitive":
        return "error", "Provider stopped with: sensitive"
    raise ProviderStreamError(f"Unhandled stop reason: {reason}")


class AnthropicEventMapper(EventMapper):
    """Applies decoded SSE events to the live partial message and pushes our events.

    Streaming scratch (the wire block index, the raw tool JSON) lives here, never on
    the content blocks, so the message stays clean whatever happens.
    """

    def __init__(self, model: Model, output: AssistantMessage, stream: AssistantMessageEventStream):
        super().__init__(model, output, stream)
        self._by_index: dict[int, int] = {}     # wire block index -> content index
        self.message_started = False
        self.message_stopped = False
        self.stop_reason_seen = False

    # Each handler returns nothing; ``handle`` raises ProviderStreamError on provider errors.
    def handle(self, event: str | None, data: Any) -> None:
        kind = event if event and event != "message" else (
            data.get("type") if isinstance(data, Mapping) else None)
        if self.message_stopped:
            return  # whatever follows message_stop (pings, unknown events) is ignored
        if kind == "error":
            raise ProviderStreamError(data if isinstance(data, str) else json.dumps(data))
        if not isinstance(data, Mapping):
            return
        handler = _HANDLERS.get(kind) if isinstance(kind, str) else None
        if handler is not None:
            handler(self, data)

    def _on_message_start(self, data: Mapping[str, Any]) -> None:
        self.message_started = True
        message = data.get("message") or {}
        if message.get("id"):
            self.output.response_id = message["id"]
        if message.get("model"):
            self.output.model = message["model"]  # 0.85.1: server-side fallback model
        usage = message.get("usage") or {}
        u = self.output.usage
        u.input = usage.get("input_tokens") or 0
        u.output = usage.get("output_tokens") or 0
        u.cache_read = usage.get("cache_read_input_tokens") or 0
        u.cache_write = usage.get("cache_creation_input_tokens") or 0
        one_hour = (usage.get("cache_creation") or {}).get("ephemeral_1h_input_tokens")
        if one_hour is not None:
            u.cache_write_1h = one_hour
        self._recompute_usage()

    def _recompute_usage(self) -> None:
        u = self.output.usage
        u.total_tokens = u.input + u.output + u.cache_read + u.cache_write
        calculate_cost(self.model, u)

    def _on_content_block_start(self, data: Mapping[str, Any]) -> None:
        block = data.get("content_block") or {}
        kind = block.get("type")
        content = self.output.content
        index = len(content)
        if kind == "text":
            content.append(TextContent(text=block.get("text") or ""))
            self._emit(TextStartEvent(content_index=index, partial=self.output))
        elif kind == "thinking":
            content.append(ThinkingContent(thinking=block.get("thinking") or "",
                                           thinking_signature=block.get("signature") or ""))
            self._emit(ThinkingStartEvent(content_index=index, partial=self.output))
        elif kind == "redacted_thinking":
            content.append(ThinkingContent(thinking=REDACTED_PLACEHOLDER,
                                           thinking_signature=block.get("data") or "",
                                           redacted=True))
            self._emit(ThinkingStartEvent(content_index=index, partial=self.output))
        elif kind == "tool_use":
            initial = block.get("input")
            content.append(ToolCall(id=block.get("id") or "", name=block.get("name") or "",
                                    arguments=initial if isinstance(initial, dict) else {}))
            self._scratch[index] = ""
            self._emit(ToolCallStartEvent(content_index=index, partial=self.output))
        elif kind == "fallback":
            if content:
                raise ProviderStreamError(
                    "Anthropic sent a fallback block after content had already streamed")
            return
        else:
            return  # server tools and other block kinds are not part of pi's model
        self._by_index[data.get("index", index)] = index

    def _block(self, data: Mapping[str, Any]) -> tuple[int, Any]:
        index = self._by_index.get(data.get("index", -1))
        if index is None:
            return -1, None
        return index, self.output.content[index]

    def _on_content_block_delta(self, data: Mapping[str, Any]) -> None:
        # The per-token path: kept flat on purpose (see bench numbers in the module notes).
        index = self._by_index.get(data.get("index", -1))
        if index is None:
            return
        block = self.output.content[index]
        delta = data.get("delta") or _EMPTY
        kind = delta.get("type")
        if kind == "text_delta":
            if block.type == "text":
                text = delta.get("text") or ""
                fields = block.__dict__  # in-place append, see append_text
                whole = fields["text"]
                fields["text"] = ""
                whole += text
                fields["text"] = whole
                self._emit(delta_event(TextDeltaEvent, "text_delta", index, text, self.output))
        elif kind == "thinking_delta":
            if block.type == "thinking":
                text = delta.get("thinking") or ""
                append_text(block, "thinking", text)
                self._emit(delta_event(ThinkingDeltaEvent, "thinking_delta", index, text, self.output))
        elif kind == "input_json_delta":
            if block.type == "toolCall":
                fragment = delta.get("partial_json") or ""
                raw = self._scratch.get(index, "")
                self._scratch[index] = ""
                raw += fragment
                self._scratch[index] = raw
                # Parsed once per network read in flush(): a consumer only ever looks at the
                # live block after a read's events are handed over, so it always sees the
                # parse of everything received so far, without a full re-parse per fragment.
                self._dirty.add(index)
                self._emit(delta_event(ToolCallDeltaEvent, "toolcall_delta", index, fragment, self.output))
        elif kind == "signature_delta" and block.type == "thinking":
            append_text(block, "thinking_signature", delta.get("signature") or "")  # no event (pi)

    def _on_content_block_stop(self, data: Mapping[str, Any]) -> None:
        index, block = self._block(data)
        if block is None:
            return
        del self._by_index[data.get("index", -1)]
        if block.type == "text":
            self._emit(TextEndEvent(content_index=index, content=block.text, partial=self.output))
        elif block.type == "thinking":
            self._emit(ThinkingEndEvent(content_index=index, content=block.thinking,
                                              partial=self.output))
        elif block.type == "toolCall":
            raw = self._scratch.pop(index, "")
            self._dirty.discard(index)
            if raw:
                block.arguments, complete = parse_final_arguments(raw)
                mark_arguments_incomplete(block, not complete)
            self._emit(ToolCallEndEvent(content_index=index, tool_call=block, partial=self.output))

    def _on_message_delta(self, data: Mapping[str, Any]) -> None:
        delta = data.get("delta") or {}
        reason = delta.get("stop_reason")
        if reason:
            self.stop_reason_seen = True
            self.output.raw_stop_reason = reason
            stop, error = map_stop_reason(reason, delta.get("stop_details"))
            self.output.stop_reason = stop
            if error is not None:
                self.output.error_message = error
        usage = data.get("usage")
        if not isinstance(usage, Mapping):
            return  # no usage: keep what message_start reported
        u = self.output.usage
        if usage.get("input_tokens") is not None:
            u.input = usage["input_tokens"]
        if usage.get("output_tokens") is not None:
            u.output = usage["output_tokens"]
        if usage.get("cache_read_input_tokens") is not None:
            u.cache_read = usage["cache_read_input_tokens"]
        if usage.get("cache_creation_input_tokens") is not None:
            u.cache_write = usage["cache_creation_input_tokens"]
        one_hour = (usage.get("cache_creation") or {}).get("ephemeral_1h_input_tokens")
        if one_hour is not None:
            u.cache_write_1h = one_hour
        thinking_tokens = (usage.get("output_tokens_details") or {}).get("thinking_tokens")
        if thinking_tokens is not None:
            u.reasoning = thinking_tokens
        self._recompute_usage()

    def _on_message_stop(self, data: Mapping[str, Any]) -> None:
        self.message_stopped = True

    def finish(self) -> None:
        """End-of-stream checks (spec 5.8, last row).

        The stop reason arrives in ``message_delta``, after every content block, so a stream
        that has it is whole even when its ``message_stop`` is missing: a last event lacking
        its blank line is discarded by the SSE rules (docs/design/wire-trust.md), and the
        SDKs' own recorded fixtures end that way.
        """
        # A tool call whose block never stopped: the stream ended inside its arguments.
        for index in self._by_index.values():
            block = self.output.content[index]
            if block.type == "toolCall":
                block.arguments = parse_streaming_json(self._scratch.pop(index, ""))
                self._dirty.discard(index)
                mark_arguments_incomplete(block)
        if self.message_started and not self.message_stopped and not self.stop_reason_seen:
            raise ProviderStreamError("Anthropic stream ended before message_stop")
        if not self.stop_reason_seen:
            raise ProviderStreamError("Anthropic stream ended without a stop reason")
        if self.output.stop_reason in ("error", "aborted"):
            raise ProviderStreamError(self.output.error_message or "An unknown error occurred")


_EMPTY: Mapping[str, Any] = {}

_HANDLERS = {
    "message_start": AnthropicEventMapper._on_message_start,
    "content_block_start": AnthropicEventMapper._on_content_block_start,
    "content_block_delta": AnthropicEventMapper._on_content_block_delta,
    "content_block_stop": AnthropicEventMapper._on_content_block_stop,
    "message_delta": AnthropicEventMapper._on_message_delta,
    "message_stop": AnthropicEventMapper._on_message_stop,
}  # any other event (ping, unknown kinds) is ignored




# --- the stream ------------------------------------------------------------------------

OAUTH_UNSUPPORTED = ("Claude OAuth tokens (sk-ant-oat...) are not supported by pi_notebook; "
                     "set ANTHROPIC_API_KEY to an Anthropic API key instead")


def _resolve_api_key(model: Model, options: Mapping[str, Any]) -> str | None:
    key = options.get("api_key")
    if not (isinstance(key, str) and key.strip()):
        key = get_env_api_key(model.provider, options.get("env"))
        if key and "sk-ant-oat" in key and model.provider == "anthropic":
            # ANTHROPIC_OAUTH_TOKEN wins in pi's lookup, but the OAuth flow is not ported:
            # fall back to a plain API key when one is set.
            key = get_provider_env_value("ANTHROPIC_API_KEY", options.get("env")) or key
    return None if key == AUTHENTICATED else key  # ambient credentials: not a key to send


def _authorize(model: Model, options: Mapping[str, Any]) -> str | None:
    api_key = _resolve_api_key(model, options)
    if not api_key and needs_api_key(model.provider) \
            and not has_header(options.get("headers"), _AUTH_HEADERS) \
            and not has_header(model.headers, _AUTH_HEADERS):
        raise ProviderStreamError(missing_key_message(model.provider))
    if api_key and "sk-ant-oat" in api_key:
        raise ProviderStreamError(OAUTH_UNSUPPORTED)
    return api_key


async def _run(model: Model, context: Context, options: Mapping[str, Any],
               stream: AssistantMessageEventStream) -> None:
    mapper = AnthropicEventMapper(model, new_output(model), stream)

    def build_request(params: dict[str, Any], api_key: str | None) -> tuple[str, dict[str, str]]:
        return (model.base_url.rstrip("/") + "/v1/messages",
                build_headers(model, api_key, options, params))

    await run_sse_stream(
        mapper, options,
        authorize=lambda: _authorize(model, options),
        build_params=lambda: build_params(model, context, options),
        build_request=build_request, dispatch=_dispatch,
        describe_http_error=_describe_http_error,
        is_complete=lambda: mapper.message_stopped)


def _dispatch(mapper: AnthropicEventMapper, sse: Any) -> None:
    data_text = sse.data
    if not data_text or data_text == "[DONE]":  # some proxies end the stream OpenAI-style
        return
    try:
        data = decode_json(data_text)
    except ValueError:
        data = None
    if data is None:  # invalid escapes, raw control characters: repair, as pi does (item 120)
        try:
            data = parse_json_with_repair(data_text)
        except ValueError:
            data = None
    if data is None:
        if sse.event == "error":
            raise ProviderStreamError(data_text) from None
        raise ProviderStreamError(f"Anthropic sent invalid JSON in an SSE event: {data_text[:200]}")
    mapper.handle(sse.event, data)


def _describe_http_error(exc: _http.HttpStatusError) -> str:
    # The SDK's wording, "<status> <body>" (spec 5.3: Anthropic keeps the SDK message).
    return f"{exc.status} {exc.body}" if exc.body else f"{exc.status} status code (no body)"


def stream_anthropic_messages(model: Model, context: Context,
                              options: Mapping[str, Any] | None = None) -> AssistantMessageEventStream:
    """Provider options: the common ones plus ``thinking_enabled``, ``thinking_budget_tokens``,
    ``effort``, ``thinking_display``, ``interleaved_thinking``, ``tool_choice``."""
    return start_stream(_run, model, context, options or {})


_EFFORT = {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}


def simple_options(model: Model, context: Context, options: Mapping[str, Any],
                   api_key: str | None) -> dict[str, Any]:
    """``SimpleStreamOptions`` -> Anthropic options (spec 5.4)."""
    base = dict(build_base_options(model, context, options, api_key))
    for key in ("tool_choice", "thinking_display", "interleaved_thinking"):
        if options.get(key) is not None:
            base[key] = options[key]
    level = options.get("reasoning")
    if level and model.reasoning:
        level = clamp_thinking_level(model, level)
    if not level or level == "off" or not model.reasoning:
        base["thinking_enabled"] = False
        return base
    base["thinking_enabled"] = True
    if _uses_adaptive_thinking(model):
        mapped = (model.thinking_level_map or {}).get(level)
        base["effort"] = mapped if isinstance(mapped, str) else _EFFORT.get(level, "high")
        return base
    adjusted = adjust_max_tokens_for_thinking(base.get("max_tokens") or 0, model.max_tokens, level,
                                              options.get("thinking_budgets"))
    max_tokens, budget = adjusted
    base["max_tokens"] = clamp_max_tokens_to_context(model, context, max_tokens)
    base["thinking_budget_tokens"] = budget
    return base


def stream_simple_anthropic_messages(model: Model, context: Context,
                                     options: Mapping[str, Any] | None = None
                                     ) -> AssistantMessageEventStream:
    return stream_simple(stream_anthropic_messages, simple_options, _resolve_api_key,
                         model, context, options)


def register() -> None:
    register_api_provider(API, stream_anthropic_messages, stream_simple_anthropic_messages)
