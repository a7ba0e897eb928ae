"""Cross-provider message conversion (spec 5.5, pi ``api/transform-messages.ts``).

Every adapter runs :func:`transform_messages` before converting to its wire format. The
caller's messages are never mutated: changed messages and blocks are copies, unchanged
ones are passed through. Dict messages in pi's JSON shape are validated into the pydantic
types first; objects with an unknown role pass through untouched.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .types import (
    AssistantMessage,
    Model,
    PiModel,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    now_ms,
)

__all__ = [
    "transform_messages", "sanitize_surrogates", "short_hash", "normalize_anthropic_tool_call_id",
    "normalize_openai_completions_tool_call_id", "normalize_google_tool_call_id", "requires_tool_call_id",
    "USER_IMAGE_PLACEHOLDER", "TOOL_IMAGE_PLACEHOLDER", "NO_RESULT_TEXT",
]

USER_IMAGE_PLACEHOLDER = "(image omitted: model does not support images)"
TOOL_IMAGE_PLACEHOLDER = "(tool image omitted: model does not support images)"
NO_RESULT_TEXT = "No result provided"

NormalizeToolCallId = Callable[[str, Model, AssistantMessage], str]

_BY_ROLE: dict[Any, type[PiModel]] = {
    "user": UserMessage, "assistant": AssistantMessage, "toolResult": ToolResultMessage}


# --- surrogates ---------------------------------------------------------------------------------

_LONE_SURROGATE = re.compile("[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]")
_ANY_SURROGATE = re.compile("[\ud800-\udfff]")


def sanitize_surrogates(text: str) -> str:
    """Remove unpaired UTF-16 surrogates (they break JSON encoding at the provider).

    Proper pairs (which only occur in text decoded with ``surrogatepass``) are kept;
    ordinary Python text with emoji holds no surrogates at all and is returned as is.
    """
    if not _ANY_SURROGATE.search(text):
        return text
    return _LONE_SURROGATE.sub("", text)


# --- tool-call id normalisers ----------------------------------------------------------------

_NOT_ID_CHAR = re.compile(r"[^a-zA-Z0-9_-]")
_GEMINI_MAJOR = re.compile(r"^gemini(?:-live)?-(\d+)")


def _imul(a: int, b: int) -> int:
    return (a * b) & 0xFFFFFFFF


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    if n == 0:
        return "0"
    out = []
    while n:
        n, r = divmod(n, 36)
        out.append(digits[r])
    return "".join(reversed(out))


def short_hash(text: str) -> str:
    """pi's ``shortHash`` (a cyrb53-style pair of 32-bit hashes in base 36), bit for bit."""
    h1, h2 = 0xDEADBEEF, 0x41C6CE57
    units = text.encode("utf-16-le", "surrogatepass")
    for i in range(0, len(units), 2):
        ch = units[i] | (units[i + 1] << 8)
        h1 = _imul(h1 ^ ch, 2654435761)
        h2 = _imul(h2 ^ ch, 1597334677)
    h1 = _imul(h1 ^ (h1 >> 16), 2246822507) ^ _imul(h2 ^ (h2 >> 13), 3266489909)
    h2 = _imul(h2 ^ (h2 >> 16), 2246822507) ^ _imul(h1 ^ (h1 >> 13), 3266489909)
    return _base36(h2 & 0xFFFFFFFF) + _base36(h1 & 0xFFFFFFFF)


def normalize_anthropic_tool_call_id(tool_call_id: str, *_: Any) -> str:
    """Anthropic ids must match ``^[a-zA-Z0-9_-]+$`` and be at most 64 characters."""
    return _NOT_ID_CHAR.sub("_", tool_call_id)[:64]


def requires_tool_call_id(model_id: str) -> bool:
    """Google models that need function-call ids: ``claude-*``, ``gpt-oss-*``, Gemini 3 and later."""
    match = _GEMINI_MAJOR.match(model_id.lower())
    return (model_id.startswith("claude-") or model_id.startswith("gpt-oss-")
            or (match is not None and int(match.group(1)) >= 3))


def normalize_google_tool_call_id(tool_call_id: str, model: Model, *_: Any) -> str:
    if not requires_tool_call_id(model.id):
        return tool_call_id
    return normalize_anthropic_tool_call_id(tool_call_id)


def normalize_openai_completions_tool_call_id(tool_call_id: str, model: Model, *_: Any) -> str:
    """Chat Completions ids: a Responses ``call|item`` id becomes ``call_item`` (sanitised),
    or ``<call prefix>_<hash8>`` beyond 40 characters; the ``openai`` provider truncates
    other ids to 40; everything else is kept."""
    if "|" in tool_call_id:
        call_part, item_part = tool_call_id.split("|", 1)
        call_id = _NOT_ID_CHAR.sub("_", call_part)
        item_id = _NOT_ID_CHAR.sub("_", item_part)
        combined = f"{call_id}_{item_id}" if item_id else call_id
        if len(combined) <= 40:
            return combined
        digest = short_hash(tool_call_id)[:8]
        return f"{call_id[:max(1, 40 - len(digest) - 1)]}_{digest}"
    if model.provider == "openai":
        return tool_call_id[:40]
    return tool_call_id


# --- the transformation -------------------------------------------------------------------------

def _as_message(message: Any) -> Any:
    if isinstance(message, dict):
        role = message.get("role")
        cls = _BY_ROLE.get(role)
        if cls is None:
            return message
        if message.get("content") is None:
            message = {**message, "content": []}
        return cls.model_validate(message)
    cls = _BY_ROLE.get(getattr(message, "role", None))
    if cls is None or isinstance(message, cls):
        if cls is not None and message.content is None:
            return message.model_copy(update={"content": []})
        return message
    # another object with a pi role (e.g. a custom message class): read its attributes
    if getattr(message, "content", None) is None:
        fields = {name: getattr(message, name) for name in cls.model_fields if hasattr(message, name)}
        return cls.model_validate({**fields, "content": []})
    return cls.model_validate(message, from_attributes=True)


def _replace_images(content: list[Any], placeholder: str) -> list[Any]:
    result: list[Any] = []
    previous_was_placeholder = False
    for block in content:
        if block.type == "image":
            if not previous_was_placeholder:
                result.append(TextContent(text=placeholder))
            previous_was_placeholder = True
            continue
        result.append(block)
        previous_was_placeholder = block.text == placeholder
    return result


def _downgrade_images(message: Any) -> Any:
    role = getattr(message, "role", None)
    if role == "user" and isinstance(message.content, list):
        placeholder = USER_IMAGE_PLACEHOLDER
    elif role == "toolResult":
        placeholder = TOOL_IMAGE_PLACEHOLDER
    else:
        return message
    if any(b.type == "image" for b in message.content):
        return message.model_copy(update={"content": _replace_images(message.content, placeholder)})
    return message


def _transform_assistant(message: AssistantMessage, model: Model, normalize: NormalizeToolCallId | None,
                         id_map: dict[str, str]) -> AssistantMessage:
    same_model = (message.provider == model.provider and message.api == model.api
                  and message.model == model.id)
    content: list[Any] = []
    changed = False
    for block in message.content:
        if isinstance(block, ThinkingContent):
            if block.redacted:
                # opaque encrypted reasoning is only valid for the model that produced it
                if same_model:
                    content.append(block)
                else:
                    changed = True
                continue
            if same_model and block.thinking_signature:
                content.append(block)  # needed for replay even when empty
            elif not block.thinking or not block.thinking.strip():
                changed = True
            elif same_model:
                content.append(block)
            else:
                content.append(TextContent(text=block.thinking))  # no <thinking> tags, as in pi
                changed = True
        elif isinstance(block, TextContent):
            if same_model:
                content.append(block)
            else:
                content.append(TextContent(text=block.text))
                changed = True
        elif isinstance(block, ToolCall):
            update: dict[str, Any] = {}
            if not same_model and block.thought_signature:
                update["thought_signature"] = None
            if not same_model and normalize is not None:
                new_id = normalize(block.id, model, message)
                if new_id != block.id:
                    id_map[block.id] = new_id
                    update["id"] = new_id
            if update:
                content.append(block.model_copy(update=update))
                changed = True
            else:
                content.append(block)
        else:
            content.append(block)
    return message.model_copy(update={"content": content}) if changed else message


def transform_messages(messages: list[Any], model: Model,
                       normalize_tool_call_id: NormalizeToolCallId | None = None) -> list[Any]:
    """Prepare a transcript for ``model`` (spec 5.5).

    * null or missing content becomes ``[]``;
    * without image input, images become a placeholder text (one per run of images);
    * assistant messages from another model (provider, api or id differ): thinking
      becomes plain text (redacted thinking is dropped), text loses its signature, tool
      calls lose ``thought_signature`` and get ``normalize_tool_call_id(id, model,
      source)``, with later tool results renamed to match; empty thinking is dropped;
    * assistant messages that ended in ``error`` or ``aborted`` are dropped;
    * tool calls without a result before the next assistant or user message (or the
      end) get a synthetic error result ``"No result provided"``.
    """
    supports_images = "image" in (model.input or [])
    id_map: dict[str, str] = {}
    transformed: list[Any] = []
    for raw in messages:
        message = _as_message(raw)
        if not supports_images:
            message = _downgrade_images(message)
        role = getattr(message, "role", None)
        if role == "toolResult":
            new_id = id_map.get(message.tool_call_id)
            if new_id and new_id != message.tool_call_id:
                message = message.model_copy(update={"tool_call_id": new_id})
        elif role == "assistant":
            message = _transform_assistant(message, model, normalize_tool_call_id, id_map)
        transformed.append(message)

    result: list[Any] = []
    pending: list[Any] = []
    answered: set[str] = set()

    def flush() -> None:
        nonlocal pending, answered
        for call in pending:
            if call.id not in answered:
                result.append(ToolResultMessage(
                    tool_call_id=call.id, tool_name=call.name,
                    content=[TextContent(text=NO_RESULT_TEXT)], is_error=True, timestamp=now_ms()))
        pending = []
        answered = set()

    for message in transformed:
        role = getattr(message, "role", None)
        if role == "assistant":
            flush()
            if message.stop_reason in ("error", "aborted"):
                continue  # an incomplete turn is never replayed
            calls = [b for b in message.content if b.type == "toolCall"]
            if calls:
                pending = calls
                answered = set()
            result.append(message)
        elif role == "toolResult":
            answered.add(message.tool_call_id)
            result.append(message)
        elif role == "user":
            flush()
            result.append(message)
        else:
            result.append(message)
    flush()
    return result
