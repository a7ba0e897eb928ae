"""agent-core data model (spec section 2).

Events are pydantic models with pi's ``type`` strings. Their message- and
result-valued fields are typed (:data:`AgentMessage`, ``AssistantMessageEvent``,
:class:`AgentToolResult`) but marked ``SkipValidation``: pi hands the *same* objects
around (``agent_end.messages`` is the loop's ``new_messages`` list itself, a custom
message is opaque to the loop), which pydantic validation would copy or reject. The
type is for readers and mypy; an event field holds exactly the object it was given.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Protocol, TypeVar, Union, runtime_checkable

from pydantic import BaseModel, Field, SkipValidation, TypeAdapter, ValidationError

from ..ai.types import (
    AgentThinkingLevel,
    AssistantMessage,
    AssistantMessageEvent,
    ImageContent,
    Message,
    Model,
    PiModel,
    TextContent,
    ThinkingLevel,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    get_field,
)

__all__ = [
    "AgentMessage", "CheckMessage", "CustomAgentMessage", "CustomMessageDict", "AgentToolResult", "AgentTool", "AgentToolUpdateCallback", "ExecutionMode",
    "AgentStartEvent", "AgentEndEvent", "TurnStartEvent", "TurnEndEvent", "MessageStartEvent",
    "MessageUpdateEvent", "MessageEndEvent", "ToolExecutionStartEvent",
    "ToolExecutionUpdateEvent", "ToolExecutionEndEvent", "AgentEvent",
    "AgentContext", "BeforeToolCallContext", "BeforeToolCallResult", "AfterToolCallContext",
    "AfterToolCallResult", "ShouldStopAfterTurnContext", "PrepareNextTurnContext",
    "AgentLoopTurnUpdate", "AgentLoopConfig", "AgentState", "QueueMode", "MaybeAwaitable",
    "STREAM_OPTION_FIELDS", "default_convert_to_llm", "message_role", "llm_message", "placeholder_model",
]

@runtime_checkable
class CustomAgentMessage(Protocol):
    """The extension point of :data:`AgentMessage` (pi's ``CustomAgentMessages``, which
    TypeScript apps extend by declaration merging): any object with a ``role``, e.g. a
    dataclass or pydantic model an app defines with ``role = "note"``. The loop keeps it
    in the transcript as it is; only ``convert_to_llm`` interprets custom roles."""

    @property
    def role(self) -> str: ...


class CheckMessage(UserMessage):
    """A user turn pi_notebook writes itself, not the user: a run check's corrective message
    (magics/outcome.py). The model reads ``content`` as any user message (it keeps its
    instruction to the model); a person is shown ``shown``, worded for them, under the
    product's label (``author``), never as "You"."""

    author: str = "pi_notebook check"
    shown: str = ""


CustomMessageDict = Mapping[str, object]
"""A message as a pi-JSON mapping with a ``"role"`` key: how a custom message reads back
from a session file, and what an app may pass instead of an object (spec 2.1)."""

AgentMessage = Union[UserMessage, AssistantMessage, ToolResultMessage, CustomAgentMessage,
                     CustomMessageDict]
"""A pi Message (``UserMessage | AssistantMessage | ToolResultMessage``) or a custom one:
an object with a ``role`` (:class:`CustomAgentMessage`) or a pi-JSON mapping with one.
``match message: case AssistantMessage(): ...`` narrows it; :func:`message_role` reads the
role of any of them."""

# how a batch of tool calls runs (AgentLoopConfig.tool_execution) or one tool asks to
# (AgentTool.execution_mode: "sequential" makes its whole batch sequential)
ExecutionMode = Literal["sequential", "parallel"]


class AgentToolResult(PiModel):
    content: list[Union[TextContent, ImageContent]] | None = Field(default_factory=list)
    details: Any = None
    usage: Usage | None = None
    terminate: bool | None = None
    is_error: bool | None = None  # pi 0.99: a tool may *return* an error (docs/design/architecture.md)


AgentToolUpdateCallback = Callable[[AgentToolResult], None]


@dataclass(eq=False)
class AgentTool:
    """A tool the agent can call.

    ``parameters`` is a JSON-Schema dict or a pydantic model class. For a model
    class, ``parameters_model`` keeps the class and ``parameters`` becomes its JSON
    schema (what providers send); ``execute`` then receives a validated instance of
    the model, otherwise the validated (coerced) dict.

    ``execute(tool_call_id, params, signal, on_update)`` is async; raise to fail.
    """

    name: str
    description: str
    parameters: Any
    execute: Callable[..., Awaitable[AgentToolResult]]
    label: str = ""
    prepare_arguments: Callable[[Any], Any] | None = None
    execution_mode: ExecutionMode | None = None
    constrained_sampling: Any = None
    parameters_model: type[BaseModel] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.parameters, type) and issubclass(self.parameters, BaseModel):
            self.parameters_model = self.parameters
            self.parameters = self.parameters.model_json_schema()
        if not self.label:
            self.label = self.name


# --- events (2.4) ------------------------------------------------------------------------

class _AgentEvent(PiModel):
    pass


class AgentStartEvent(_AgentEvent):
    type: Literal["agent_start"] = "agent_start"


class AgentEndEvent(_AgentEvent):
    type: Literal["agent_end"] = "agent_end"
    messages: SkipValidation[list[AgentMessage]]  # the loop's new_messages list itself


class TurnStartEvent(_AgentEvent):
    type: Literal["turn_start"] = "turn_start"


class TurnEndEvent(_AgentEvent):
    type: Literal["turn_end"] = "turn_end"
    message: SkipValidation[AgentMessage]  # the turn's assistant message
    tool_results: SkipValidation[list[ToolResultMessage]]  # source order


class MessageStartEvent(_AgentEvent):
    type: Literal["message_start"] = "message_start"
    message: SkipValidation[AgentMessage]


class MessageUpdateEvent(_AgentEvent):
    type: Literal["message_update"] = "message_update"
    message: SkipValidation[AssistantMessage]  # a shallow copy of the partial assistant message
    assistant_message_event: SkipValidation[AssistantMessageEvent]


class MessageEndEvent(_AgentEvent):
    type: Literal["message_end"] = "message_end"
    message: SkipValidation[AgentMessage]


class ToolExecutionStartEvent(_AgentEvent):
    type: Literal["tool_execution_start"] = "tool_execution_start"
    tool_call_id: str
    tool_name: str
    args: SkipValidation[dict[str, Any]]  # the call's raw arguments


class ToolExecutionUpdateEvent(_AgentEvent):
    type: Literal["tool_execution_update"] = "tool_execution_update"
    tool_call_id: str
    tool_name: str
    args: SkipValidation[dict[str, Any]]  # the call's raw arguments
    partial_result: SkipValidation[AgentToolResult]


class ToolExecutionEndEvent(_AgentEvent):
    type: Literal["tool_execution_end"] = "tool_execution_end"
    tool_call_id: str
    tool_name: str
    result: SkipValidation[AgentToolResult]  # finalized
    is_error: bool


AgentEvent = Annotated[Union[
    AgentStartEvent, AgentEndEvent, TurnStartEvent, TurnEndEvent, MessageStartEvent,
    MessageUpdateEvent, MessageEndEvent, ToolExecutionStartEvent, ToolExecutionUpdateEvent,
    ToolExecutionEndEvent,
], Field(discriminator="type")]
"""One agent event, discriminated by ``type``: ``match event:`` with class patterns
(``case MessageUpdateEvent(assistant_message_event=e):``) narrows it for readers and mypy."""


# --- context, hooks, loop config (2.3, 2.5, 2.6) --------------------------------------------
#
# These are plain dataclasses rather than pydantic models: the loop hands the *same*
# message lists and objects around (the live transcript, ``new_messages``), and a
# hook that mutates ``args`` in place must reach ``execute`` (spec 3.4.2). Pydantic
# validation would copy them.

QueueMode = Literal["one-at-a-time", "all"]

_T = TypeVar("_T")
MaybeAwaitable = Union[_T, Awaitable[_T]]  # a hook may be a plain or a coroutine function


def message_role(message: object) -> str | None:
    """The ``role`` of an AgentMessage (a pydantic message, any object, or a mapping), or
    None for a value that has none."""
    role = get_field(message, "role")
    return role if isinstance(role, str) else None


@dataclass(eq=False)
class AgentContext:
    system_prompt: str = ""
    messages: list[AgentMessage] = field(default_factory=list)
    tools: list[AgentTool] | None = None


@dataclass(eq=False)
class BeforeToolCallContext:
    assistant_message: AssistantMessage
    tool_call: ToolCall  # the raw block, original arguments
    args: Any  # validated (cloned, coerced) arguments; mutations reach execute()
    context: AgentContext


@dataclass
class BeforeToolCallResult:
    block: bool = False
    reason: str | None = None
    terminate: bool | None = None
    details: Any = None  # a blocked call's result details (e.g. the approval decision)


@dataclass(eq=False)
class AfterToolCallContext:
    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: Any
    result: AgentToolResult  # before any override
    is_error: bool
    context: AgentContext


@dataclass
class AfterToolCallResult:
    """Field-wise override of the executed result; ``None`` keeps the original (pi's ``??``)."""

    content: list[Any] | None = None
    details: Any = None
    is_error: bool | None = None
    usage: Usage | None = None
    terminate: bool | None = None


@dataclass(eq=False)
class ShouldStopAfterTurnContext:
    message: AssistantMessage
    tool_results: list[ToolResultMessage]
    context: AgentContext  # after the assistant message and tool results were appended
    new_messages: list[AgentMessage]  # what the loop would return if it stopped now


PrepareNextTurnContext = ShouldStopAfterTurnContext


@dataclass
class AgentLoopTurnUpdate:
    """Returned by ``prepare_next_turn``; ``thinking_level="off"`` clears ``reasoning``."""

    context: AgentContext | None = None
    model: Model | None = None
    thinking_level: AgentThinkingLevel | None = None


def llm_message(message: AgentMessage) -> UserMessage | AssistantMessage | ToolResultMessage | None:
    """``message`` as one of pi's message models, or None for a custom message.

    A model is returned as it is; a pi-JSON mapping or another object with an LLM role
    (``user``, ``assistant``, ``toolResult``) is validated into its model (a new object,
    so readers that compare identity keep the original). One that does not validate, like
    any other role, is a custom message.
    """
    if isinstance(message, (UserMessage, AssistantMessage, ToolResultMessage)):
        return message
    if message_role(message) not in _LLM_ROLES:
        return None
    try:
        return _MESSAGE_ADAPTER.validate_python(message, from_attributes=not isinstance(message, Mapping))
    except ValidationError:
        return None


_LLM_ROLES = ("user", "assistant", "toolResult")


def default_convert_to_llm(messages: list[AgentMessage]) -> list[Message]:
    """Keep only the LLM roles (``user``, ``assistant``, ``toolResult``), as pi's Agent does.

    Dict messages with those roles are validated into the pydantic message classes so
    that providers always see one shape.
    """
    out: list[Any] = []
    for message in messages:
        role = message_role(message)
        if role not in ("user", "assistant", "toolResult"):
            continue
        if isinstance(message, dict):
            message = _MESSAGE_ADAPTER.validate_python(message)
        out.append(message)
    return out


_MESSAGE_ADAPTER: TypeAdapter[UserMessage | AssistantMessage | ToolResultMessage] = TypeAdapter(Message)

# The SimpleStreamOptions of spec 1.7 that the loop forwards to the stream function,
# in snake_case. ``signal`` and ``api_key`` are always present in the options dict.
STREAM_OPTION_FIELDS: tuple[str, ...] = (
    "reasoning", "api_key", "session_id", "temperature", "max_tokens", "thinking_budgets",
    "on_payload", "on_response", "max_retry_delay_ms", "max_retries", "timeout_ms", "transport",
    "cache_retention", "headers", "env", "metadata", "sampling_params", "tool_choice",
)


@dataclass(eq=False)
class AgentLoopConfig:
    """Configuration of one loop run (spec 2.6).

    Hooks may be plain functions or coroutine functions; a hook result that is
    awaitable is awaited. Every stream option that is not ``None`` is forwarded to the
    stream function, together with ``signal`` and the resolved ``api_key``; so is each
    key of ``stream_options`` (for provider-specific options not listed here).

    ``convert_to_llm`` is required in pi; here it defaults to pi's Agent converter
    (keep the ``user``/``assistant``/``toolResult`` roles).
    """

    model: Model
    convert_to_llm: Callable[[list[AgentMessage]], MaybeAwaitable[list[Message]]] = default_convert_to_llm
    transform_context: Callable[..., MaybeAwaitable[list[AgentMessage]]] | None = None  # (messages, signal)
    get_api_key: Callable[[str], Any] | None = None  # (provider) -> key | None
    should_stop_after_turn: Callable[[ShouldStopAfterTurnContext], Any] | None = None
    prepare_next_turn: Callable[[PrepareNextTurnContext], Any] | None = None
    get_steering_messages: Callable[[], MaybeAwaitable[list[AgentMessage]]] | None = None
    get_follow_up_messages: Callable[[], MaybeAwaitable[list[AgentMessage]]] | None = None
    tool_execution: ExecutionMode = "parallel"
    before_tool_call: Callable[..., Any] | None = None  # (BeforeToolCallContext, signal)
    after_tool_call: Callable[..., Any] | None = None  # (AfterToolCallContext, signal)
    # forwarded stream options (SimpleStreamOptions)
    reasoning: ThinkingLevel | None = None
    api_key: str | None = field(default=None, repr=False)
    session_id: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    thinking_budgets: dict[str, int] | None = None
    on_payload: Callable[..., Any] | None = None
    on_response: Callable[..., Any] | None = None
    max_retry_delay_ms: int | None = None
    max_retries: int | None = None
    timeout_ms: int | None = None
    transport: str | None = None
    cache_retention: str | None = None
    headers: dict[str, Any] | None = field(default=None, repr=False)
    env: dict[str, str] | None = field(default=None, repr=False)
    metadata: dict[str, Any] | None = None
    sampling_params: dict[str, Any] | None = None
    tool_choice: str | None = None
    stream_options: dict[str, Any] | None = None

    def build_stream_options(self, api_key: str | None, signal: Any) -> dict[str, Any]:
        options: dict[str, Any] = {}
        for name in STREAM_OPTION_FIELDS:
            value = getattr(self, name)
            if value is not None:
                options[name] = value
        if self.stream_options:
            options.update(self.stream_options)
        options["api_key"] = api_key
        options["signal"] = signal
        return options


# --- Agent state (2.8) ------------------------------------------------------------------------

def placeholder_model() -> Model:
    """pi's default model: usable as a value, unusable for requests."""
    return Model(id="unknown", name="unknown", api="unknown", provider="unknown", base_url="",
                 reasoning=False, input=[], context_window=0, max_tokens=0)


class AgentState:
    """The Agent's mutable state.

    ``tools`` and ``messages`` copy the list on assignment and return the live list on
    read (``state.messages.append(m)`` changes the transcript). ``is_streaming`` is
    read-only. ``pending_tool_calls`` is replaced by a new set on every change.
    """

    def __init__(
        self,
        *,
        system_prompt: str = "",
        model: Model | None = None,
        thinking_level: AgentThinkingLevel = "off",
        tools: list[AgentTool] | None = None,
        messages: list[AgentMessage] | None = None,
    ) -> None:
        self.system_prompt = system_prompt
        self.model: Model = model if model is not None else placeholder_model()
        self.thinking_level: AgentThinkingLevel = thinking_level
        self._tools: list[AgentTool] = list(tools or [])
        self._messages: list[AgentMessage] = list(messages or [])
        self._is_streaming = False
        self.streaming_message: AgentMessage | None = None
        self.pending_tool_calls: set[str] = set()
        self.error_message: str | None = None

    @property
    def tools(self) -> list[AgentTool]:
        return self._tools

    @tools.setter
    def tools(self, value: list[AgentTool]) -> None:
        self._tools = list(value)

    @property
    def messages(self) -> list[AgentMessage]:
        return self._messages

    @messages.setter
    def messages(self, value: list[AgentMessage]) -> None:
        self._messages = list(value)

    @property
    def is_streaming(self) -> bool:
        return self._is_streaming

    def __repr__(self) -> str:
        return (f"AgentState(model={self.model.provider}/{self.model.id}, "
                f"messages={len(self._messages)}, tools={[t.name for t in self._tools]}, "
                f"is_streaming={self._is_streaming})")
