"""The ``google-generative-ai`` wire API (spec 5.9): Gemini's ``streamGenerateContent``.

The REST form of what pi sends through ``@google/genai``:
``POST {base_url}/models/{id}:streamGenerateContent?alt=sse`` with the key in the
``x-goog-api-key`` header (never in the URL, so it cannot leak into an error text).

- ``convert_contents`` / ``build_params`` / ``build_headers``: pi messages -> request;
- ``GoogleChunkMapper``: one JSON chunk at a time -> the live partial message plus our
  events. Gemini does not stream tool arguments: each ``functionCall`` part becomes
  ``toolcall_start`` + one ``toolcall_delta`` + ``toolcall_end`` at once;
- ``stream_google_generative_ai``: the key check, URL and headers, run through the shared
  request/stream skeleton (``_common.run_sse_stream``, spec 5.2).

Not ported: Vertex AI (ADC credentials), Gemini CLI / Antigravity, deferred responses.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping
from typing import Any

from .._fast import delta_event
from ..env import missing_key_message
from ..errors import describe_provider_error
from ..event_stream import AssistantMessageEventStream
from ..models import calculate_cost, clamp_thinking_level
from ..options import build_base_options
from ..stream import register_api_provider
from ..transform import (
    normalize_google_tool_call_id,
    requires_tool_call_id,
    sanitize_surrogates,
    transform_messages,
)
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
    now_ms,
)
from ._common import (
    EventMapper,
    ProviderStreamError,
    append_text,
    decode_json,
    merge_headers,
    new_output,
    resolve_api_key,
    run_sse_stream,
    start_stream,
    stream_simple,
    tool_schema,
)

__all__ = [
    "API", "convert_contents", "build_params", "build_headers", "GoogleChunkMapper",
    "is_valid_signature", "thinking_config_for_level",
    "stream_google_generative_ai", "stream_simple_google_generative_ai", "register",
]

API = "google-generative-ai"
_BASE64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")
_GEMINI_VERSION = re.compile(r"gemini-(\d+)")
_tool_ids = itertools.count(1)


# --- model families ---------------------------------------------------------------------

def _gemini_major(model_id: str) -> int | None:
    match = _GEMINI_VERSION.search(model_id.lower())
    return int(match.group(1)) if match else None


def _is_gemini3_flash(model_id: str) -> bool:
    mid = model_id.lower()
    if mid in ("gemini-flash-latest", "gemini-flash-lite-latest"):
        return True
    major = _gemini_major(mid)
    return major is not None and major >= 3 and "flash" in mid


def _is_gemini3_pro(model_id: str) -> bool:
    mid = model_id.lower()
    major = _gemini_major(mid)
    return major is not None and major >= 3 and "pro" in mid


def _is_gemma4(model_id: str) -> bool:
    return "gemma-4" in model_id.lower()


def _is_gemini3_or_later(model_id: str) -> bool:
    major = _gemini_major(model_id)
    return (major is not None and major >= 3) or _is_gemini3_flash(model_id)


def is_valid_signature(signature: str | None) -> bool:
    """Gemini thought signatures are base64; anything else would be rejected on replay."""
    if not signature:
        return False
    return len(signature) % 4 == 0 and _BASE64.match(signature) is not None


# --- request ---------------------------------------------------------------------------

def _user_parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": sanitize_surrogates(content)}] if content else []
    parts: list[dict[str, Any]] = []
    for part in content or []:
        if part.type == "text":
            if part.text:
                parts.append({"text": sanitize_surrogates(part.text)})
        elif part.type == "image":
            parts.append({"inlineData": {"mimeType": part.mime_type, "data": part.data}})
    return parts


def _model_parts(message: AssistantMessage, model: Model) -> list[dict[str, Any]]:
    same = message.provider == model.provider and message.model == model.id

    def usable(signature: str | None) -> str | None:
        return signature if same and is_valid_signature(signature) else None

    with_ids = requires_tool_call_id(model.id)
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if block.type == "text":
            signature = usable(block.text_signature)
            if not block.text and not signature:
                continue
            part: dict[str, Any] = {"text": sanitize_surrogates(block.text)}
            if signature:
                part["thoughtSignature"] = signature
            parts.append(part)
        elif block.type == "thinking":
            signature = usable(block.thinking_signature)
            if not block.thinking and not signature:
                continue
            if same:
                part = {"thought": True, "text": sanitize_surrogates(block.thinking)}
                if signature:
                    part["thoughtSignature"] = signature
            else:
                part = {"text": sanitize_surrogates(block.thinking)}
            parts.append(part)
        elif block.type == "toolCall":
            call: dict[str, Any] = {"name": block.name, "args": block.arguments or {}}
            if with_ids and block.id:
                call["id"] = block.id
            part = {"functionCall": call}
            signature = usable(block.thought_signature)
            if signature:
                part["thoughtSignature"] = signature
            parts.append(part)
    return parts


def _function_response(result: Any, model: Model, nested_images: bool
                       ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One ``functionResponse`` part, plus image parts that must travel in their own turn."""
    text = "\n".join(sanitize_surrogates(c.text) for c in result.content if c.type == "text")
    images = [{"inlineData": {"mimeType": c.mime_type, "data": c.data}}
              for c in result.content if c.type == "image"]
    response: dict[str, Any] = {"name": result.tool_name,
                                "response": {"error": text} if result.is_error else {"output": text}}
    if requires_tool_call_id(model.id) and result.tool_call_id:
        response["id"] = result.tool_call_id
    if images and nested_images:
        response["parts"] = images
        images = []
    return {"functionResponse": response}, images


def convert_contents(model: Model, context: Context) -> list[dict[str, Any]]:
    """pi messages -> Gemini ``contents``."""
    messages = transform_messages(list(context.messages or []), model, normalize_google_tool_call_id)
    nested_images = _is_gemini3_or_later(model.id)
    contents: list[dict[str, Any]] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        if message.role == "user":
            parts = _user_parts(message.content)
            if parts:
                contents.append({"role": "user", "parts": parts})
        elif message.role == "assistant":
            parts = _model_parts(message, model)
            if parts:
                contents.append({"role": "model", "parts": parts})
        elif message.role == "toolResult":
            # All consecutive function responses go in one user turn.
            responses: list[dict[str, Any]] = []
            loose_images: list[dict[str, Any]] = []
            while i < len(messages) and messages[i].role == "toolResult":
                part, images = _function_response(messages[i], model, nested_images)
                responses.append(part)
                loose_images.extend(images)
                i += 1
            contents.append({"role": "user", "parts": responses})
            if loose_images:  # Gemini 2.x cannot take images inside a function response
                contents.append({"role": "user",
                                 "parts": [{"text": "Tool result image:"}, *loose_images]})
            continue
        i += 1
    return contents


def _thinking_config(model: Model, thinking: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not thinking or not model.reasoning:
        return None
    config: dict[str, Any] = {}
    if thinking.get("enabled"):
        config["includeThoughts"] = True
    if thinking.get("level"):
        config["thinkingLevel"] = thinking["level"]
    elif thinking.get("budget_tokens") is not None:
        config["thinkingBudget"] = thinking["budget_tokens"]
    return config or None


def build_params(model: Model, context: Context, options: Mapping[str, Any]) -> dict[str, Any]:
    """The REST body of ``streamGenerateContent``."""
    params: dict[str, Any] = {"contents": convert_contents(model, context)}
    if context.system_prompt:
        params["systemInstruction"] = {"parts": [{"text": sanitize_surrogates(context.system_prompt)}]}
    generation: dict[str, Any] = {}
    if options.get("temperature") is not None:
        generation["temperature"] = options["temperature"]
    if options.get("max_tokens"):
        generation["maxOutputTokens"] = options["max_tokens"]
    thinking = _thinking_config(model, options.get("thinking"))
    if thinking:
        generation["thinkingConfig"] = thinking
    if generation:
        params["generationConfig"] = generation
    if context.tools:
        declarations = [{"name": t.name, "description": t.description or "",
                         "parametersJsonSchema": tool_schema(t)} for t in context.tools]
        params["tools"] = [{"functionDeclarations": declarations}]
        choice = options.get("tool_choice")
        strict = _is_gemini3_or_later(model.id) and any(
            isinstance(getattr(t, "constrained_sampling", None), dict) for t in context.tools)
        mode = {"auto": "AUTO", "none": "NONE", "any": "ANY"}.get(choice or "")
        if mode is None and strict:
            mode = "VALIDATED"
        if mode:
            params["toolConfig"] = {"functionCallingConfig": {"mode": mode}}
    return params


def build_headers(model: Model, api_key: str | None, options: Mapping[str, Any]) -> dict[str, str]:
    merged: dict[str, str | None] = {"content-type": "application/json", "accept": "text/event-stream"}
    if api_key:
        merged["x-goog-api-key"] = api_key
    return merge_headers(merged, model, options)


# --- stream mapping --------------------------------------------------------------------

def map_finish_reason(reason: str) -> StopReason:
    if reason == "STOP":
        return "stop"
    if reason == "MAX_TOKENS":
        return "length"
    return "error"  # safety, recitation, malformed function call, other, unspecified


class GoogleChunkMapper(EventMapper):
    """Applies ``GenerateContentResponse`` chunks to the live partial message."""

    def __init__(self, model: Model, output: AssistantMessage, stream: AssistantMessageEventStream):
        super().__init__(model, output, stream)
        self._current: int | None = None  # index of the open text/thinking block
        self._ids: set[str] = set()

    def handle(self, chunk: Any) -> None:
        if not isinstance(chunk, Mapping):
            return
        if chunk.get("error"):
            error = chunk["error"]
            message = error.get("message") if isinstance(error, Mapping) else None
            raise ProviderStreamError(message or json.dumps(error))
        if not self.output.response_id and chunk.get("responseId"):
            self.output.response_id = chunk["responseId"]
        candidates = chunk.get("candidates") or []
        candidate = candidates[0] if candidates and isinstance(candidates[0], Mapping) else None
        feedback = chunk.get("promptFeedback")
        if candidate is None and isinstance(feedback, Mapping) and feedback.get("blockReason"):
            # The prompt itself was refused: no candidate will ever come.
            self.output.raw_stop_reason = feedback["blockReason"]
            self.output.stop_reason = "error"
        if candidate is not None:
            for part in (candidate.get("content") or {}).get("parts") or []:
                if isinstance(part, Mapping):
                    self._part(part)
            reason = candidate.get("finishReason")
            if reason:
                self.output.raw_stop_reason = reason
                stop = map_finish_reason(reason)
                if stop == "stop" and any(b.type == "toolCall" for b in self.output.content):
                    stop = "toolUse"
                self.output.stop_reason = stop
        usage = chunk.get("usageMetadata")
        if isinstance(usage, Mapping):
            self._usage(usage)

    def _part(self, part: Mapping[str, Any]) -> None:
        signature = part.get("thoughtSignature") or None
        if part.get("text") is not None:
            thinking = part.get("thought") is True  # a signature alone does not make thinking
            block = self._open("thinking" if thinking else "text")
            index = self._current
            assert index is not None  # _open() just set it
            text = part["text"]
            if thinking:
                if text:
                    append_text(block, "thinking", text)
                    self._emit(delta_event(ThinkingDeltaEvent, "thinking_delta", index, text,
                                           self.output))
                if signature:
                    block.thinking_signature = signature
            else:
                if text:
                    append_text(block, "text", text)
                    self._emit(delta_event(TextDeltaEvent, "text_delta", index, text, self.output))
                if signature:
                    block.text_signature = signature
        elif isinstance(part.get("functionCall"), Mapping):
            self._close()
            call = part["functionCall"]
            name = call.get("name") or ""
            call_id = call.get("id")
            if not call_id or call_id in self._ids:
                call_id = f"{name}_{now_ms()}_{next(_tool_ids)}"
            self._ids.add(call_id)
            args = call.get("args")
            block = ToolCall(id=call_id, name=name, arguments=args if isinstance(args, dict) else {})
            if signature:
                block.thought_signature = signature
            content = self.output.content
            index = len(content)
            content.append(block)
            self._emit(ToolCallStartEvent(content_index=index, partial=self.output))
            self._emit(ToolCallDeltaEvent(content_index=index,
                                                delta=json.dumps(block.arguments, ensure_ascii=False),
                                                partial=self.output))
            self._emit(ToolCallEndEvent(content_index=index, tool_call=block, partial=self.output))

    def _open(self, kind: str) -> Any:
        content = self.output.content
        if self._current is not None and content[self._current].type == kind:
            return content[self._current]
        self._close()
        index = len(content)
        if kind == "thinking":
            content.append(ThinkingContent(thinking=""))
            self._emit(ThinkingStartEvent(content_index=index, partial=self.output))
        else:
            content.append(TextContent(text=""))
            self._emit(TextStartEvent(content_index=index, partial=self.output))
        self._current = index
        return content[index]

    def _close(self) -> None:
        index = self._current
        if index is None:
            return
        self._current = None
        block = self.output.content[index]
        if isinstance(block, ThinkingContent):
            self._emit(ThinkingEndEvent(content_index=index, content=block.thinking,
                                              partial=self.output))
        elif isinstance(block, TextContent):
            self._emit(TextEndEvent(content_index=index, content=block.text, partial=self.output))

    def _usage(self, usage: Mapping[str, Any]) -> None:
        u = self.output.usage
        cached = usage.get("cachedContentTokenCount") or 0
        thoughts = usage.get("thoughtsTokenCount") or 0
        u.input = max(0, (usage.get("promptTokenCount") or 0) - cached)
        u.output = (usage.get("candidatesTokenCount") or 0) + thoughts
        u.cache_read = cached
        u.cache_write = 0
        u.reasoning = thoughts
        total = usage.get("totalTokenCount")
        u.total_tokens = total if total is not None else u.input + u.output + u.cache_read
        calculate_cost(self.model, u)

    def finish(self) -> None:
        """Close the open block (so partial blocks get their end event, also when the stream
        then fails), then check that the stream ended with a usable finish reason."""
        self._close()
        if self.output.stop_reason == "pending":
            raise ProviderStreamError("Google stream ended without a finish reason")
        if self.output.stop_reason == "error":
            raise ProviderStreamError(f"Provider stopped with: {self.output.raw_stop_reason}")


# --- the stream ------------------------------------------------------------------------

def _authorize(model: Model, options: Mapping[str, Any]) -> str | None:
    api_key = resolve_api_key(model, options)
    if not api_key and not any(k.lower() == "x-goog-api-key" and v
                               for k, v in (options.get("headers") or {}).items()):
        raise ProviderStreamError(missing_key_message(model.provider))
    return api_key


async def _run(model: Model, context: Context, options: Mapping[str, Any],
               stream: AssistantMessageEventStream) -> None:
    def build_request(params: dict[str, Any], api_key: str | None) -> tuple[str, dict[str, str]]:
        url = f"{model.base_url.rstrip('/')}/models/{model.id}:streamGenerateContent?alt=sse"
        return url, build_headers(model, api_key, options)

    # Gemini has no terminal event: the stream is read to its end.
    await run_sse_stream(
        GoogleChunkMapper(model, new_output(model), stream), options,
        authorize=lambda: _authorize(model, options),
        build_params=lambda: build_params(model, context, options),
        build_request=build_request, dispatch=_dispatch,
        describe_http_error=describe_provider_error)


def _dispatch(mapper: GoogleChunkMapper, sse: Any) -> None:
    data_text = sse.data
    if not data_text:
        return
    try:
        chunk = decode_json(data_text)
    except ValueError:
        raise ProviderStreamError(f"Google sent invalid JSON in an SSE event: {data_text[:200]}") from None
    mapper.handle(chunk)


def stream_google_generative_ai(model: Model, context: Context,
                                options: Mapping[str, Any] | None = None
                                ) -> AssistantMessageEventStream:
    """Provider options: the common ones plus ``tool_choice`` ("auto" | "none" | "any") and
    ``thinking`` = ``{"enabled": bool, "budget_tokens": int?, "level": str?}``."""
    return start_stream(_run, model, context, options or {})


# --- thinking levels (spec 5.4) ----------------------------------------------------------

_BUDGETS = {
    "gemini-2.5-pro": {"minimal": 128, "low": 2048, "medium": 8192, "high": 32768},
    "gemini-2.5-flash-lite": {"minimal": 512, "low": 2048, "medium": 8192, "high": 24576},
    "gemini-2.5-flash": {"minimal": 128, "low": 2048, "medium": 8192, "high": 24576},
}
_LEVELS = ("minimal", "low", "medium", "high")


def _resolve_google_level(model: Model, level: str) -> str:
    mapped = (model.thinking_level_map or {}).get(level)
    value = (mapped if isinstance(mapped, str) else level).lower()
    if value == "off":
        value = "high"
    if value not in _LEVELS:
        raise ValueError(f"Unsupported Google thinking level: {value}")
    return value


def thinking_config_for_level(model: Model, level: str | None,
                              budgets: Mapping[str, int] | None = None) -> dict[str, Any] | None:
    """The ``thinking`` option for a clamped level (None or "off" = thinking off)."""
    if not model.reasoning:
        return None
    mid = model.id.lower()
    level_based = _is_gemini3_pro(mid) or _is_gemini3_flash(mid) or _is_gemma4(mid)
    if not level or level == "off":
        if _is_gemini3_pro(mid):
            return {"enabled": False, "level": "LOW"}
        if _is_gemini3_flash(mid) or _is_gemma4(mid):
            return {"enabled": False, "level": "MINIMAL"}
        return {"enabled": False, "budget_tokens": 0}
    if level_based:
        value = _resolve_google_level(model, level)
        if _is_gemini3_pro(mid):
            native = "LOW" if value in ("minimal", "low") else "HIGH"
        elif _is_gemma4(mid):
            native = "MINIMAL" if value in ("minimal", "low") else "HIGH"
        else:
            native = value.upper()
        return {"enabled": True, "level": native}
    effective = level if level in _LEVELS else "high"  # xhigh / max budget as high
    if budgets and budgets.get(effective) is not None:
        return {"enabled": True, "budget_tokens": budgets[effective]}
    for prefix in ("gemini-2.5-flash-lite", "gemini-2.5-pro", "gemini-2.5-flash"):
        if prefix in mid:
            return {"enabled": True, "budget_tokens": _BUDGETS[prefix][effective]}
    return {"enabled": True, "budget_tokens": -1}  # dynamic


def simple_options(model: Model, context: Context, options: Mapping[str, Any],
                   api_key: str | None) -> dict[str, Any]:
    base = dict(build_base_options(model, context, options, api_key))
    if options.get("tool_choice") is not None:
        base["tool_choice"] = options["tool_choice"]
    level = options.get("reasoning")
    if level and model.reasoning:
        level = clamp_thinking_level(model, level)
    thinking = thinking_config_for_level(model, level, options.get("thinking_budgets"))
    if thinking is not None:
        base["thinking"] = thinking
    return base


def stream_simple_google_generative_ai(model: Model, context: Context,
                                       options: Mapping[str, Any] | None = None
                                       ) -> AssistantMessageEventStream:
    return stream_simple(stream_google_generative_ai, simple_options, resolve_api_key,
                         model, context, options)


def register() -> None:
    register_api_provider(API, stream_google_generative_ai, stream_simple_google_generative_ai)
