"""agent-core data model (spec section 2).

Events are pydantic models with pi's ``type`` strings; message-valued fields are
typed ``Any`` because an AgentMessage may be a custom object with a ``role`` and
because pi hands the *same* objects around (``agent_end.messages`` is the loop's
``new_messages`` list itself), which pydantic validation would copy.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from pydantic import BaseModel, Field

from ..ai.types import ImageContent, PiModel, TextContent, Usage

__all__ = [
    "AgentMessage", "AgentToolResult", "AgentTool", "AgentToolUpdateCallback", "ExecutionMode",
    "AgentStartEvent", "AgentEndEvent", "TurnStartEvent", "TurnEndEvent", "MessageStartEvent",
    "MessageUpdateEvent", "MessageEndEvent", "ToolExecutionStartEvent",
    "ToolExecutionUpdateEvent", "ToolExecutionEndEvent", "AgentEvent",
]

AgentMessage = Any
"""A pi Message (UserMessage | AssistantMessage | ToolResultMessage) or any custom
object/dict with a ``role``; only ``convert_to_llm`` interprets custom roles."""

ExecutionMode = Literal["sequential", "parallel"]


class AgentToolResult(PiModel):
    content: list[Union[TextContent, ImageContent]] | None = Field(default_factory=list)
    details: Any = None
    usage: Usage | None = None
    terminate: bool | None = None
    is_error: bool | None = None  # pi 0.99: a tool may *return* an error (architecture.md)


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
    messages: Any  # list[AgentMessage]: the loop's new_messages list itself


class TurnStartEvent(_AgentEvent):
    type: Literal["turn_start"] = "turn_start"


class TurnEndEvent(_AgentEvent):
    type: Literal["turn_end"] = "turn_end"
    message: Any
    tool_results: Any  # list[ToolResultMessage], source order


class MessageStartEvent(_AgentEvent):
    type: Literal["message_start"] = "message_start"
    message: Any


class MessageUpdateEvent(_AgentEvent):
    type: Literal["message_update"] = "message_update"
    message: Any
    assistant_message_event: Any


class MessageEndEvent(_AgentEvent):
    type: Literal["message_end"] = "message_end"
    message: Any


class ToolExecutionStartEvent(_AgentEvent):
    type: Literal["tool_execution_start"] = "tool_execution_start"
    tool_call_id: str
    tool_name: str
    args: Any


class ToolExecutionUpdateEvent(_AgentEvent):
    type: Literal["tool_execution_update"] = "tool_execution_update"
    tool_call_id: str
    tool_name: str
    args: Any
    partial_result: Any


class ToolExecutionEndEvent(_AgentEvent):
    type: Literal["tool_execution_end"] = "tool_execution_end"
    tool_call_id: str
    tool_name: str
    result: Any  # AgentToolResult
    is_error: bool


AgentEvent = Union[
    AgentStartEvent, AgentEndEvent, TurnStartEvent, TurnEndEvent, MessageStartEvent,
    MessageUpdateEvent, MessageEndEvent, ToolExecutionStartEvent, ToolExecutionUpdateEvent,
    ToolExecutionEndEvent,
]

# Hook contexts and results, AgentContext, AgentLoopConfig, AgentLoopTurnUpdate and
# AgentState follow below (spec 2.3, 2.5, 2.6, 2.8).
