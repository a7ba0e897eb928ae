"""pi-ai data model (spec section 1): content blocks, messages, usage, models, events.

Python attributes are snake_case; JSON uses pi's camelCase names through aliases.
``model_dump()`` defaults to ``by_alias=True, exclude_none=True`` so that the dump of
a message is exactly pi's JSON (pi omits undefined fields); ``model_validate``
accepts either spelling.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from ..levels import THINKING_LEVELS, AgentThinkingLevel

__all__ = [
    "now_ms", "get_field", "PiModel", "TextContent", "ThinkingContent", "ImageContent", "ToolCall",
    "mark_arguments_incomplete", "arguments_incomplete",
    "UserContent", "AssistantContent", "ToolResultContent", "Cost", "Usage", "usage_total_tokens", "usage_input_tokens",
    "StopReason", "PromptProgress",
    "UserMessage", "AssistantMessage", "ToolResultMessage", "Message", "ModelCostTier",
    "ModelCost", "Model", "Tool", "Context", "ThinkingLevel", "AgentThinkingLevel", "THINKING_LEVELS",
    "StartEvent", "TextStartEvent", "TextDeltaEvent", "TextEndEvent", "ThinkingStartEvent",
    "ThinkingDeltaEvent", "ThinkingEndEvent", "ToolCallStartEvent", "ToolCallDeltaEvent",
    "ToolCallEndEvent", "DoneEvent", "ErrorEvent", "AssistantMessageEvent",
]


def get_field(obj: Any, name: str, alias: str | None = None, default: Any = None) -> Any:
    """Read a field from a pydantic message or a plain pi-JSON dict (camelCase ``alias``).

    Transcripts may mix both shapes (custom messages, sessions loaded as dicts).
    """
    if isinstance(obj, Mapping):
        if alias is not None and alias in obj:
            return obj[alias]
        return obj.get(name, default)
    return getattr(obj, name, default)


def now_ms() -> int:
    """Timestamps are integer milliseconds since the epoch, as in pi."""
    return int(time.time() * 1000)


def _camel(name: str) -> str:
    # cache_write_1h -> cacheWrite1h (pydantic's to_camel would give cacheWrite1H)
    first, *rest = name.split("_")
    return first + "".join(part[:1].upper() + part[1:] for part in rest)


class PiModel(BaseModel):
    """Base for every pi data class: camelCase JSON, snake_case Python, pi-shaped dumps."""

    model_config = ConfigDict(
        alias_generator=_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        arbitrary_types_allowed=True,
    )

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        kwargs.setdefault("by_alias", True)
        kwargs.setdefault("exclude_none", True)
        return super().model_dump(**kwargs)

    def model_dump_json(self, **kwargs: Any) -> str:
        kwargs.setdefault("by_alias", True)
        kwargs.setdefault("exclude_none", True)
        return super().model_dump_json(**kwargs)


# --- content blocks (1.1) ----------------------------------------------------------------

class TextContent(PiModel):
    type: Literal["text"] = "text"
    text: str = ""
    text_signature: str | None = None


class ThinkingContent(PiModel):
    type: Literal["thinking"] = "thinking"
    thinking: str = ""
    thinking_signature: str | None = None
    redacted: bool | None = None


class ImageContent(PiModel):
    type: Literal["image"] = "image"
    data: str
    mime_type: str


class ToolCall(PiModel):
    type: Literal["toolCall"] = "toolCall"
    id: str = ""
    name: str = ""
    arguments: dict[str, Any] = Field(default_factory=dict)
    thought_signature: str | None = None
    namespace: str | None = None
    # Set by the adapter when the arguments' JSON was cut (the stream ended inside it) or had
    # to be repaired: such a call is never executed. Private, so pi's JSON is unchanged.
    _arguments_incomplete: bool = PrivateAttr(default=False)


def mark_arguments_incomplete(tool_call: ToolCall, incomplete: bool = True) -> None:
    """Record that ``tool_call``'s arguments are not what the model finished sending."""
    tool_call._arguments_incomplete = incomplete


def arguments_incomplete(tool_call: ToolCall) -> bool:
    """Whether the adapter found ``tool_call``'s arguments cut or repaired (never execute it)."""
    return bool(getattr(tool_call, "_arguments_incomplete", False))


UserContent = Annotated[Union[TextContent, ImageContent], Field(discriminator="type")]
AssistantContent = Annotated[Union[TextContent, ThinkingContent, ToolCall], Field(discriminator="type")]
ToolResultContent = Annotated[Union[TextContent, ImageContent], Field(discriminator="type")]


# --- usage (1.3) ---------------------------------------------------------------------------

class Cost(PiModel):
    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    total: float = 0.0


class Usage(PiModel):
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cache_write_1h: int | None = None
    reasoning: int | None = None
    total_tokens: int = 0
    cost: Cost = Field(default_factory=Cost)


def usage_total_tokens(usage: Any) -> int:
    """The tokens of one request: ``total_tokens``, or, when the provider left it 0, the sum
    of input, output, cache read and cache write. ``usage`` is a Usage or its pi-JSON dict.

    The one place usage parts are summed: providers fill ``total_tokens`` with it, and
    context-size estimates and status displays read it.
    """
    total = get_field(usage, "total_tokens", "totalTokens", 0) or 0
    if total:
        return int(total)
    return int(sum((get_field(usage, name, alias, 0) or 0) for name, alias in _USAGE_PARTS))


def usage_input_tokens(usage: Usage) -> int:
    """The prompt side of one request: input plus cache read plus cache write tokens
    (what a "tokens in" counter shows; ``usage_total_tokens`` adds the output)."""
    return usage.input + usage.cache_read + usage.cache_write


_USAGE_PARTS = (("input", None), ("output", None), ("cache_read", "cacheRead"),
                ("cache_write", "cacheWrite"))


StopReason = Literal["pending", "stop", "length", "toolUse", "error", "aborted", "deferred"]


@dataclass(frozen=True)
class PromptProgress:
    """How far a server has read the prompt before its first output token (llama-server's
    ``prompt_progress`` with ``return_progress``), passed to the ``on_progress`` stream option.

    ``total``: the prompt's tokens; ``cache``: those reused from the server's prompt cache;
    ``processed``: those read so far, the reused ones included; ``time_ms``: time spent."""

    total: int
    cache: int
    processed: int
    time_ms: int

    @property
    def to_read(self) -> int:
        """Tokens this request reads (the prompt less what the cache gave)."""
        return max(0, self.total - self.cache)

    @property
    def read(self) -> int:
        """Tokens of ``to_read`` read so far."""
        return min(self.to_read, max(0, self.processed - self.cache))


# --- messages (1.2) ------------------------------------------------------------------------

class UserMessage(PiModel):
    role: Literal["user"] = "user"
    content: Union[str, list[UserContent]]
    timestamp: int = Field(default_factory=now_ms)


class AssistantMessage(PiModel):
    role: Literal["assistant"] = "assistant"
    content: list[AssistantContent] = Field(default_factory=list)
    api: str = ""
    provider: str = ""
    model: str = ""
    response_model: str | None = None
    response_id: str | None = None
    provider_thinking_level: str | None = None
    usage: Usage = Field(default_factory=Usage)
    stop_reason: StopReason = "stop"
    error_message: str | None = None
    raw_stop_reason: str | None = None
    timestamp: int = Field(default_factory=now_ms)


class ToolResultMessage(PiModel):
    role: Literal["toolResult"] = "toolResult"
    tool_call_id: str
    tool_name: str
    content: list[ToolResultContent] = Field(default_factory=list)
    details: Any = None
    usage: Usage | None = None
    is_error: bool = False
    timestamp: int = Field(default_factory=now_ms)


Message = Annotated[Union[UserMessage, AssistantMessage, ToolResultMessage], Field(discriminator="role")]


# --- model (1.5) ---------------------------------------------------------------------------

ThinkingLevel = Literal["minimal", "low", "medium", "high", "xhigh", "max"]
# AgentThinkingLevel (ThinkingLevel plus "off") is defined in pi_notebook/levels.py, read at %load_ext


class ModelCostTier(PiModel):
    input_tokens_above: int
    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0


class ModelCost(PiModel):
    """USD per million tokens."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    tiers: list[ModelCostTier] | None = None


InputKind = Literal["text", "image"]
_TEXT_ONLY: list[InputKind] = ["text"]


class Model(PiModel):
    id: str
    name: str = ""
    api: str
    provider: str
    base_url: str = ""
    reasoning: bool = False
    thinking_level_map: dict[str, str | None] | None = None
    input: list[InputKind] = Field(default_factory=lambda: _TEXT_ONLY.copy())
    cost: ModelCost = Field(default_factory=ModelCost)
    context_window: int = 0
    max_tokens: int = 0
    sampling_params: dict[str, Any] | None = None
    headers: dict[str, str] | None = None
    compat: dict[str, Any] | None = None


# --- tools and context (1.6) ---------------------------------------------------------------

class Tool(PiModel):
    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    constrained_sampling: Any = None


class Context(PiModel):
    """What a provider sees. ``tools`` may hold AgentTools: providers read only
    ``name``, ``description``, ``parameters`` and ``constrained_sampling``."""

    system_prompt: str | None = None
    messages: list[Any] = Field(default_factory=list)
    tools: list[Any] | None = None


# --- streaming protocol (1.8) --------------------------------------------------------------

class _Event(PiModel):
    pass


class StartEvent(_Event):
    type: Literal["start"] = "start"
    partial: AssistantMessage


class TextStartEvent(_Event):
    type: Literal["text_start"] = "text_start"
    content_index: int
    partial: AssistantMessage


class TextDeltaEvent(_Event):
    type: Literal["text_delta"] = "text_delta"
    content_index: int
    delta: str
    partial: AssistantMessage


class TextEndEvent(_Event):
    type: Literal["text_end"] = "text_end"
    content_index: int
    content: str
    partial: AssistantMessage


class ThinkingStartEvent(_Event):
    type: Literal["thinking_start"] = "thinking_start"
    content_index: int
    partial: AssistantMessage


class ThinkingDeltaEvent(_Event):
    type: Literal["thinking_delta"] = "thinking_delta"
    content_index: int
    delta: str
    partial: AssistantMessage


class ThinkingEndEvent(_Event):
    type: Literal["thinking_end"] = "thinking_end"
    content_index: int
    content: str
    partial: AssistantMessage


class ToolCallStartEvent(_Event):
    type: Literal["toolcall_start"] = "toolcall_start"
    content_index: int
    partial: AssistantMessage


class ToolCallDeltaEvent(_Event):
    type: Literal["toolcall_delta"] = "toolcall_delta"
    content_index: int
    delta: str
    partial: AssistantMessage


class ToolCallEndEvent(_Event):
    type: Literal["toolcall_end"] = "toolcall_end"
    content_index: int
    tool_call: ToolCall
    partial: AssistantMessage


class DoneEvent(_Event):
    type: Literal["done"] = "done"
    reason: Literal["stop", "length", "toolUse", "deferred"]
    message: AssistantMessage


class ErrorEvent(_Event):
    type: Literal["error"] = "error"
    reason: Literal["error", "aborted"]
    error: AssistantMessage


AssistantMessageEvent = Annotated[Union[
    StartEvent, TextStartEvent, TextDeltaEvent, TextEndEvent, ThinkingStartEvent,
    ThinkingDeltaEvent, ThinkingEndEvent, ToolCallStartEvent, ToolCallDeltaEvent,
    ToolCallEndEvent, DoneEvent, ErrorEvent,
], Field(discriminator="type")]
"""One event of the streaming protocol, discriminated by ``type``: ``match event:`` with
class patterns (``case TextDeltaEvent(delta=d):``) narrows it for readers and for mypy."""
