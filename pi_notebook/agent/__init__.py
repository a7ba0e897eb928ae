"""The agent core: a port of pi agent-core 0.85.1. No IPython imports.

The public names are those of docs/design/architecture.md ("Public API") plus the event classes.
``set_default_stream_fn`` / ``get_default_stream_fn`` live in ``pi_notebook.agent.loop``;
the default stream function is ``pi_notebook.ai.stream.stream_simple``.
"""

from ..ai.abort import AbortController, AbortSignal
from .agent import Agent
from .loop import agent_loop, agent_loop_continue, run_agent_loop, run_agent_loop_continue
from .tools import tool
from .types import (
    AfterToolCallResult,
    AgentContext,
    AgentEndEvent,
    AgentEvent,
    AgentLoopConfig,
    AgentLoopTurnUpdate,
    AgentStartEvent,
    AgentState,
    AgentTool,
    AgentToolResult,
    BeforeToolCallResult,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    TurnEndEvent,
    TurnStartEvent,
)

__all__ = [
    "Agent", "AgentState", "AgentContext", "AgentTool", "AgentToolResult", "AgentLoopConfig",
    "BeforeToolCallResult", "AfterToolCallResult", "AgentLoopTurnUpdate", "AbortController",
    "AbortSignal", "run_agent_loop", "run_agent_loop_continue", "agent_loop",
    "agent_loop_continue", "tool",
    # events
    "AgentEvent", "AgentStartEvent", "AgentEndEvent", "TurnStartEvent", "TurnEndEvent",
    "MessageStartEvent", "MessageUpdateEvent", "MessageEndEvent", "ToolExecutionStartEvent",
    "ToolExecutionUpdateEvent", "ToolExecutionEndEvent",
]
