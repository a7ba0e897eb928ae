"""The ``openai-responses`` wire API (spec 5.7): OpenAI's Responses API over SSE.

- ``convert_input`` / ``build_params`` / ``build_headers``: pi messages -> request body;
- ``ResponsesEventMapper``: one decoded stream event at a time -> the live partial
  message plus our events (pure, no I/O);
- ``stream_openai_responses``: the key check, URL and headers, run through the shared
  request/stream skeleton (``_common.run_sse_stream``, spec 5.2).

Tool-call ids are compound, ``"<call_id>|<item_id>"``: the function-call item id must be
replayed with the call id for reasoning models to accept the history. Reasoning items are
replayed verbatim from ``thinkingSignature`` (the JSON of the whole item, with its
encrypted content), and text carries a ``{"v":1,"id":...,"phase":...}`` signature.

Not ported: Azure / Codex / Copilot variants, the websocket transport, deferred
(background) responses and grammar-constrained tools.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .. import _http
from .._fast import delta_event
from .._json import parse_final_arguments, parse_streaming_json
from ..env import missing_key_message, needs_api_key
from ..errors import describe_provider_error
from ..event_stream import AssistantMessageEventStream
from ..models import calculate_cost, clamp_thinking_level
from ..options import build_base_options, resolve_cache_retention
from ..stream import register_api_provider
from ..transform import sanitize_surrogates, short_hash, transform_messages
from ..types import (
    AssistantMessage,
    Context,
    Model,
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
    EventMapper,
    ProviderStreamError,
    append_text,
    decode_json,
    has_header,
    merge_headers,
    new_output,
    resolve_api_key,
    run_sse_stream,
    start_stream,
    stream_simple,
    tool_schema,
)
from ._common import (
    compat as _compat,
)

__all__ = [
    "API", "convert_input", "build_params", "build_headers", "normalize_tool_call_id",
    "ResponsesEventMapper", "stream_openai_responses", "stream_simple_openai_responses",
    "register",
]

API = "openai-responses"
ERROR_PREFIX = "OpenAI API error"
ENDED_EARLY = "OpenAI Responses stream ended before a terminal response event"
_ID_PROVIDERS = frozenset({"openai", "openai-codex", "opencode"})
_AUTH_HEADERS = ("authorization", "cf-aig-authorization")
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


# --- ids -------------------------------------------------------------------------------

def _sanitize_id_part(part: str) -> str:
    return _UNSAFE.sub("_", part)[:64].rstrip("_")


def normalize_tool_call_id(id: str, model: Model, source: Any = None) -> str:
    """Rewrite a tool-call id from another model for this one (spec 5.7).

    ``source`` is the assistant message the call came from (``provider``/``api``); for
    the openai providers a foreign item id becomes ``fc_<hash>`` and every item id
    starts with ``fc_``; other providers only get the characters sanitised.
    """
    call_id, sep, item_id = id.partition("|")
    call = _sanitize_id_part(call_id)
    if not sep:
        return call
    if model.provider not in _ID_PROVIDERS:
        return f"{call}|{_sanitize_id_part(item_id)}"
    foreign = source is not None and (getattr(source, "provider", model.provider) != model.provider
                                      or getattr(source, "api", model.api) != model.api)
    item = f"fc_{short_hash(item_id)}" if foreign else _sanitize_id_part(item_id)
    if not item.startswith("fc_"):
        item = _sanitize_id_part("fc_" + item)
    return f"{call}|{item}"


def _message_item_id(signature: str | None, msg_index: int, k: int) -> tuple[str, str | None]:
    """(item id, phase) for a replayed assistant text block."""
    item_id: str | None = None
    phase: str | None = None
    if signature:
        if signature.startswith("{"):
            try:
                parsed = json.loads(signature)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict) and parsed.get("v") == 1:
                item_id = parsed.get("id") or None
                phase = parsed.get("phase") or None
        else:
            item_id = signature  # legacy: the plain message-item id
    if not item_id:
        item_id = f"msg_pi_{msg_index}" if k == 0 else f"msg_pi_{msg_index}_{k}"
    if len(item_id) > 64:
        item_id = f"msg_{short_hash(item_id)}"
    return item_id, phase


# --- request ---------------------------------------------------------------------------

def _data_url(image: Any) -> str:
    return f"data:{image.mime_type};base64,{image.data}"


def _user_content(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "input_text", "text": sanitize_surrogates(content)}]
    parts: list[dict[str, Any]] = []
    for part in content or []:
        if part.type == "text":
            parts.append({"type": "input_text", "text": sanitize_surrogates(part.text)})
        elif part.type == "image":
            parts.append({"type": "input_image", "detail": "auto", "image_url": _data_url(part)})
    return parts


def _tool_output(content: list[Any], model: Model) -> str | list[dict[str, Any]]:
    texts = [sanitize_surrogates(c.text) for c in content if c.type == "text"]
    images = [c for c in content if c.type == "image"]
    if images and "image" in (model.input or []):
        parts: list[dict[str, Any]] = [{"type": "input_text", "text": t} for t in texts]
        parts.extend({"type": "input_image", "detail": "auto", "image_url": _data_url(i)}
                     for i in images)
        return parts
    if texts:
        return "\n".join(texts)
    return "(see attached image)" if images else "(no tool output)"


def _assistant_items(message: AssistantMessage, msg_index: int, model: Model) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    k = 0
    other_model_same_api = (message.provider == model.provider and message.api == model.api
                            and message.model != model.id)
    for part in message.content:
        if part.type == "thinking":
            if part.thinking_signature:
                try:
                    item = json.loads(part.thinking_signature)
                except ValueError:
                    continue  # not a Responses reasoning item: nothing to replay
                if isinstance(item, dict):
                    items.append(item)
        elif part.type == "text":
            item_id, phase = _message_item_id(part.text_signature, msg_index, k)
            k += 1
            entry: dict[str, Any] = {
                "type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": sanitize_surrogates(part.text),
                             "annotations": []}],
                "status": "completed", "id": item_id,
            }
            if phase:
                entry["phase"] = phase
            items.append(entry)
        elif part.type == "toolCall":
            call_id, _, item_id = part.id.partition("|")
            entry = {"type": "function_call", "call_id": call_id, "name": part.name,
                     "arguments": json.dumps(part.arguments or {}, ensure_ascii=False)}
            # An item id only means something next to its own reasoning item.
            if item_id and item_id.startswith("fc_") and not other_model_same_api:
                entry["id"] = item_id
            if part.namespace:
                entry["namespace"] = part.namespace
            items.append(entry)
    return items


def convert_input(model: Model, context: Context) -> list[dict[str, Any]]:
    """pi context -> the Responses ``input`` list."""
    normalize = normalize_tool_call_id
    messages = transform_messages(list(context.messages or []), model, normalize)
    items: list[dict[str, Any]] = []
    if context.system_prompt:
        developer = model.reasoning and _compat(model).get("supportsDeveloperRole") is not False
        items.append({"role": "developer" if developer else "system",
                      "content": sanitize_surrogates(context.system_prompt)})
    for msg_index, message in enumerate(messages):
        if message.role == "user":
            content = _user_content(message.content)
            if content:
                items.append({"role": "user", "content": content})
        elif message.role == "assistant":
            items.extend(_assistant_items(message, msg_index, model))
        elif message.role == "toolResult":
            call_id = message.tool_call_id.partition("|")[0]
            items.append({"type": "function_call_output", "call_id": call_id,
                          "output": _tool_output(message.content, model)})
    return items


def _convert_tools(tools: list[Any], model: Model) -> list[dict[str, Any]]:
    strict_supported = _compat(model).get("supportsStrictMode") is not False
    out = []
    for tool in tools:
        entry: dict[str, Any] = {"type": "function", "name": tool.name,
                                 "description": tool.description or "",
                                 "parameters": tool_schema(tool)}
        if strict_supported:
            sampling = getattr(tool, "constrained_sampling", None)
            entry["strict"] = bool(isinstance(sampling, dict) and sampling.get("type") == "json_schema")
        out.append(entry)
    return out


def build_params(model: Model, context: Context, options: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON body of ``POST {base_url}/responses``."""
    params: dict[str, Any] = {
        "model": model.id,
        "input": convert_input(model, context),
        "stream": True,
        "store": False,
    }
    retention = resolve_cache_retention(options)
    if options.get("session_id") and retention != "none":
        params["prompt_cache_key"] = options["session_id"]
        if retention == "long":
            params["prompt_cache_retention"] = "24h"
    if options.get("max_tokens"):
        params["max_output_tokens"] = max(int(options["max_tokens"]), 16)
    if options.get("temperature") is not None:
        params["temperature"] = options["temperature"]
    if options.get("service_tier"):
        params["service_tier"] = options["service_tier"]
    if context.tools:
        params["tools"] = _convert_tools(list(context.tools), model)
        if options.get("tool_choice"):
            params["tool_choice"] = options["tool_choice"]

    effort = options.get("reasoning_effort")
    summary = options.get("reasoning_summary")
    if model.reasoning and (effort or summary):
        params["reasoning"] = {"effort": effort or "medium", "summary": summary or "auto"}
        params["include"] = ["reasoning.encrypted_content"]
    elif model.reasoning and model.provider != "github-copilot":
        level_map = model.thinking_level_map or {}
        if not ("off" in level_map and level_map["off"] is None):
            params["reasoning"] = {"effort": level_map.get("off") or "none"}

    sampling = {**(model.sampling_params or {}), **(options.get("sampling_params") or {})}
    params.update(sampling)
    return params


def build_headers(model: Model, api_key: str | None, options: Mapping[str, Any]) -> dict[str, str]:
    merged: dict[str, str | None] = {
        "content-type": "application/json",
        "accept": "text/event-stream",
        "user-agent": _http.default_user_agent(),
    }
    if api_key:
        merged["authorization"] = f"Bearer {api_key}"
    return merge_headers(merged, model, options)


# --- stream mapping --------------------------------------------------------------------

_TIER_FACTORS = {"flex": 0.5, "priority": 2.0}


def _tier_factor(model: Model, tier: Any) -> float:
    if tier == "priority" and model.id.startswith("gpt-5.5"):
        return 2.5
    return _TIER_FACTORS.get(tier, 1.0) if isinstance(tier, str) else 1.0


class ResponsesEventMapper(EventMapper):
    """Applies Responses stream events (dicts) to the live partial message."""

    def __init__(self, model: Model, output: AssistantMessage, stream: AssistantMessageEventStream,
                 service_tier: str | None = None):
        super().__init__(model, output, stream)
        self.service_tier = service_tier
        self._by_output: dict[int, int] = {}    # output_index -> content index
        self._item_ids: dict[int, str] = {}     # content index -> item id (reasoning back-fill)
        self.terminal = False
        self._open_calls: set[int] = set()  # function calls whose final arguments have not come

    def handle(self, data: Any) -> None:
        if not isinstance(data, Mapping):
            return
        kind = data.get("type") or ""
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, data)

    def _block(self, data: Mapping[str, Any], kind: str) -> tuple[int, Any]:
        index = self._by_output.get(data.get("output_index", -1))
        if index is None:
            return -1, None
        block = self.output.content[index]
        return (index, block) if block.type == kind else (-1, None)

    # -- events --
    def _created(self, data: Mapping[str, Any]) -> None:
        response = data.get("response") or {}
        if response.get("id"):
            self.output.response_id = response["id"]

    def _item_added(self, data: Mapping[str, Any]) -> None:
        item = data.get("item") or {}
        kind = item.get("type")
        content = self.output.content
        index = len(content)
        if kind == "reasoning":
            content.append(ThinkingContent(thinking=""))
            self._emit(ThinkingStartEvent(content_index=index, partial=self.output))
        elif kind == "message":
            content.append(TextContent(text=""))
            if item.get("phase") == "final_answer":
                self.output.stop_reason = "stop"
            self._emit(TextStartEvent(content_index=index, partial=self.output))
        elif kind == "function_call":
            raw = item.get("arguments") or ""
            call = ToolCall(id=f"{item.get('call_id', '')}|{item.get('id', '')}",
                            name=item.get("name") or "",
                            arguments=parse_streaming_json(raw) if raw else {})
            if item.get("namespace"):
                call.namespace = item["namespace"]
            content.append(call)
            self._scratch[index] = raw
            self._open_calls.add(index)
            self._emit(ToolCallStartEvent(content_index=index, partial=self.output))
        else:
            return
        if item.get("id"):
            self._item_ids[index] = item["id"]
        self._by_output[data.get("output_index", index)] = index

    def _thinking_delta(self, data: Mapping[str, Any]) -> None:
        index, block = self._block(data, "thinking")
        if block is not None:
            delta = data.get("delta") or ""
            append_text(block, "thinking", delta)
            self._emit(delta_event(ThinkingDeltaEvent, "thinking_delta", index, delta, self.output))

    def _summary_part_done(self, data: Mapping[str, Any]) -> None:
        index, block = self._block(data, "thinking")
        if block is not None:
            append_text(block, "thinking", "\n\n")
            self._emit(ThinkingDeltaEvent(content_index=index, delta="\n\n", partial=self.output))

    def _text_delta(self, data: Mapping[str, Any]) -> None:
        index, block = self._block(data, "text")
        if block is not None:
            delta = data.get("delta") or ""
            append_text(block, "text", delta)
            self._emit(delta_event(TextDeltaEvent, "text_delta", index, delta, self.output))

    def _args_delta(self, data: Mapping[str, Any]) -> None:
        index, block = self._block(data, "toolCall")
        if block is None:
            return
        delta = data.get("delta") or ""
        raw = self._scratch.get(index, "")
        self._scratch[index] = ""
        raw += delta
        self._scratch[index] = raw
        self._dirty.add(index)  # parsed once per network read, in EventMapper.flush()
        self._emit(delta_event(ToolCallDeltaEvent, "toolcall_delta", index, delta, self.output))

    def _args_done(self, data: Mapping[str, Any]) -> None:
        index, block = self._block(data, "toolCall")
        if block is None:
            return
        final = data.get("arguments")
        if not isinstance(final, str):
            return
        previous = self._scratch.get(index, "")
        self._scratch[index] = final
        self._dirty.discard(index)
        self._open_calls.discard(index)
        block.arguments, complete = parse_final_arguments(final)
        mark_arguments_incomplete(block, not complete)
        if final.startswith(previous) and len(final) > len(previous):
            self._emit(ToolCallDeltaEvent(content_index=index, delta=final[len(previous):],
                                                partial=self.output))

    def _item_done(self, data: Mapping[str, Any]) -> None:
        item = data.get("item") or {}
        kind = item.get("type") or ""
        wanted = {"reasoning": "thinking", "message": "text", "function_call": "toolCall"}.get(kind)
        if wanted is None:
            return
        index, block = self._block(data, wanted)
        if block is None:
            return
        if kind == "reasoning":
            summary = [s.get("text", "") for s in item.get("summary") or [] if isinstance(s, Mapping)]
            texts = [c.get("text", "") for c in item.get("content") or [] if isinstance(c, Mapping)]
            if summary:
                block.thinking = "\n\n".join(summary)
            elif texts:
                block.thinking = "\n\n".join(texts)
            block.thinking_signature = json.dumps(item, ensure_ascii=False)
            self._emit(ThinkingEndEvent(content_index=index, content=block.thinking,
                                              partial=self.output))
        elif kind == "message":
            parts = item.get("content") or []
            texts = [p.get("text") if p.get("type") == "output_text" else p.get("refusal")
                     for p in parts if isinstance(p, Mapping) and p.get("type") in ("output_text", "refusal")]
            if texts:
                block.text = "".join(t or "" for t in texts)
            signature: dict[str, Any] = {"v": 1, "id": item.get("id")}
            if item.get("phase"):
                signature["phase"] = item["phase"]
            block.text_signature = json.dumps(signature)
            self._emit(TextEndEvent(content_index=index, content=block.text, partial=self.output))
        else:
            raw = item.get("arguments") or self._scratch.get(index) or "{}"
            self._scratch.pop(index, None)
            self._dirty.discard(index)
            self._open_calls.discard(index)
            block.arguments, complete = parse_final_arguments(raw)
            mark_arguments_incomplete(block, not complete)
            if item.get("namespace"):
                block.namespace = item["namespace"]
            self._emit(ToolCallEndEvent(content_index=index, tool_call=block, partial=self.output))

    def _terminal(self, data: Mapping[str, Any]) -> None:
        self.terminal = True
        response = data.get("response") or {}
        if response.get("id"):
            self.output.response_id = response["id"]
        self._apply_usage(response)
        self._backfill_reasoning(response)
        status = response.get("status")
        reason = (response.get("incomplete_details") or {}).get("reason")
        self.output.raw_stop_reason = f"{status}.{reason}" if status and reason else status
        if status == "incomplete":
            if reason == "max_output_tokens":
                self.output.stop_reason = "length"
            else:
                self.output.stop_reason = "error"
                self.output.error_message = (f"Response incomplete: {reason}" if reason
                                             else "Response incomplete without a provider reason")
        elif status in ("failed", "cancelled"):
            self.output.stop_reason = "error"
            self.output.error_message = _failure_text(response)
        else:  # completed, in_progress, queued, or missing
            self.output.stop_reason = "stop"
        if self.output.stop_reason == "stop" and any(b.type == "toolCall" for b in self.output.content):
            self.output.stop_reason = "toolUse"

    def _failed(self, data: Mapping[str, Any]) -> None:
        self.terminal = True
        response = data.get("response") or {}
        self._apply_usage(response)
        self.output.raw_stop_reason = "failed"
        raise ProviderStreamError(_failure_text(response))

    def _error(self, data: Mapping[str, Any]) -> None:
        code = data.get("code")
        message = data.get("message")
        if code is None and message is None and isinstance(data.get("error"), Mapping):
            code, message = data["error"].get("code"), data["error"].get("message")
        raise ProviderStreamError(f"Error Code {code}: {message}")

    # -- helpers --
    def _apply_usage(self, response: Mapping[str, Any]) -> None:
        usage = response.get("usage")
        if not isinstance(usage, Mapping):
            return
        cached = (usage.get("input_tokens_details") or {}).get("cached_tokens") or 0
        cache_write = (usage.get("input_tokens_details") or {}).get("cache_write_tokens") or 0
        u = self.output.usage
        u.input = max(0, (usage.get("input_tokens") or 0) - cached - cache_write)
        u.output = usage.get("output_tokens") or 0
        u.cache_read = cached
        u.cache_write = cache_write
        reasoning = (usage.get("output_tokens_details") or {}).get("reasoning_tokens")
        if reasoning is not None:
            u.reasoning = reasoning
        total = usage.get("total_tokens")
        u.total_tokens = total if total is not None else u.input + u.output + u.cache_read + u.cache_write
        cost = calculate_cost(self.model, u)
        factor = _tier_factor(self.model, response.get("service_tier") or self.service_tier)
        if factor != 1.0:
            cost = u.cost
            cost.input *= factor
            cost.output *= factor
            cost.cache_read *= factor
            cost.cache_write *= factor
            cost.total = cost.input + cost.output + cost.cache_read + cost.cache_write

    def _backfill_reasoning(self, response: Mapping[str, Any]) -> None:
        # Some deployments (Azure) only put encrypted_content on the final response.
        encrypted = {item.get("id"): item for item in response.get("output") or []
                     if isinstance(item, Mapping) and item.get("type") == "reasoning"
                     and item.get("encrypted_content")}
        if not encrypted:
            return
        for index, item_id in self._item_ids.items():
            block = self.output.content[index]
            if block.type != "thinking" or item_id not in encrypted:
                continue
            try:
                stored = json.loads(block.thinking_signature) if block.thinking_signature else {}
            except ValueError:
                continue
            if isinstance(stored, dict) and not stored.get("encrypted_content"):
                stored = stored or dict(encrypted[item_id])
                stored["encrypted_content"] = encrypted[item_id]["encrypted_content"]
                block.thinking_signature = json.dumps(stored, ensure_ascii=False)

    def finish(self) -> None:
        """End-of-stream checks: a terminal event came and the stop reason is not an error."""
        for index in self._open_calls:  # the stream ended inside these calls' arguments
            block = self.output.content[index]
            assert isinstance(block, ToolCall)
            block.arguments = parse_streaming_json(self._scratch.get(index, ""))
            self._dirty.discard(index)
            mark_arguments_incomplete(block)
        self._open_calls.clear()
        if not self.terminal:
            raise ProviderStreamError(ENDED_EARLY)
        if self.output.stop_reason in ("error", "aborted"):
            raise ProviderStreamError(self.output.error_message or "An unknown error occurred")
        if self.output.stop_reason == "pending":
            raise ProviderStreamError(ENDED_EARLY)


def _failure_text(response: Mapping[str, Any]) -> str:
    error = response.get("error")
    if isinstance(error, Mapping) and (error.get("code") or error.get("message")):
        return f"{error.get('code')}: {error.get('message')}"
    reason = (response.get("incomplete_details") or {}).get("reason")
    if reason:
        return f"incomplete: {reason}"
    return "Unknown error (no error details in response)"


_HANDLERS = {
    "response.created": ResponsesEventMapper._created,
    "response.output_item.added": ResponsesEventMapper._item_added,
    "response.reasoning_summary_text.delta": ResponsesEventMapper._thinking_delta,
    "response.reasoning_text.delta": ResponsesEventMapper._thinking_delta,
    "response.reasoning_summary_part.done": ResponsesEventMapper._summary_part_done,
    "response.output_text.delta": ResponsesEventMapper._text_delta,
    "response.refusal.delta": ResponsesEventMapper._text_delta,
    "response.function_call_arguments.delta": ResponsesEventMapper._args_delta,
    "response.function_call_arguments.done": ResponsesEventMapper._args_done,
    "response.output_item.done": ResponsesEventMapper._item_done,
    "response.completed": ResponsesEventMapper._terminal,
    "response.incomplete": ResponsesEventMapper._terminal,
    "response.failed": ResponsesEventMapper._failed,
    "error": ResponsesEventMapper._error,
}


# --- the stream ------------------------------------------------------------------------

def _authorize(model: Model, options: Mapping[str, Any]) -> str | None:
    api_key = resolve_api_key(model, options)
    if not api_key and needs_api_key(model.provider) \
            and not has_header(options.get("headers"), _AUTH_HEADERS) \
            and not has_header(model.headers, _AUTH_HEADERS):
        raise ProviderStreamError(missing_key_message(model.provider))
    return api_key


async def _run(model: Model, context: Context, options: Mapping[str, Any],
               stream: AssistantMessageEventStream) -> None:
    mapper = ResponsesEventMapper(model, new_output(model), stream, options.get("service_tier"))

    def build_request(params: dict[str, Any], api_key: str | None) -> tuple[str, dict[str, str]]:
        return model.base_url.rstrip("/") + "/responses", build_headers(model, api_key, options)

    await run_sse_stream(
        mapper, options,
        authorize=lambda: _authorize(model, options),
        build_params=lambda: build_params(model, context, options),
        build_request=build_request, dispatch=_dispatch,
        describe_http_error=_describe_http_error,
        is_complete=lambda: mapper.terminal)


def _dispatch(mapper: ResponsesEventMapper, sse: Any) -> None:
    data_text = sse.data
    if not data_text or data_text == "[DONE]":
        return
    try:
        data = decode_json(data_text)
    except ValueError:
        raise ProviderStreamError(
            f"OpenAI Responses sent invalid JSON in an SSE event: {data_text[:200]}") from None
    mapper.handle(data)


def _describe_http_error(exc: _http.HttpStatusError) -> str:
    return describe_provider_error(exc, ERROR_PREFIX)


def stream_openai_responses(model: Model, context: Context,
                            options: Mapping[str, Any] | None = None) -> AssistantMessageEventStream:
    """Provider options: the common ones plus ``reasoning_effort``, ``reasoning_summary``,
    ``service_tier`` and ``tool_choice``."""
    return start_stream(_run, model, context, options or {})


def simple_options(model: Model, context: Context, options: Mapping[str, Any],
                   api_key: str | None) -> dict[str, Any]:
    """``SimpleStreamOptions`` -> Responses options (spec 5.4)."""
    base = dict(build_base_options(model, context, options, api_key))
    for key in ("tool_choice", "service_tier", "reasoning_summary"):
        if options.get(key) is not None:
            base[key] = options[key]
    level = options.get("reasoning")
    if level and model.reasoning:
        level = clamp_thinking_level(model, level)
        if level and level != "off":
            mapped = (model.thinking_level_map or {}).get(level)
            base["reasoning_effort"] = mapped if isinstance(mapped, str) else level
    return base


def stream_simple_openai_responses(model: Model, context: Context,
                                   options: Mapping[str, Any] | None = None
                                   ) -> AssistantMessageEventStream:
    return stream_simple(stream_openai_responses, simple_options, resolve_api_key,
                         model, context, options)


def register() -> None:
    register_api_provider(API, stream_openai_responses, stream_simple_openai_responses)
