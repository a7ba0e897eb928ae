"""The served tools: the agent's own notebook tools under names an outside agent expects.

Each :class:`ServedTool` serves one AgentTool of tools/ (the same code, budgets and redaction
the kernel's own agent gets; nothing is reimplemented here) with honest MCP annotations:

- ``execute`` -> ``python``: runs arbitrary code, so not read-only, possibly destructive, not
  idempotent, open world (code may reach the network); it takes a turn on the kernel loop and
  passes the approval gate (gate.py);
- ``list_variables``, ``inspect_variable``: read-only summaries (secrets masked, bounded repr
  time); they read the namespace, so they take a turn too;
- ``recent_cells`` -> ``notebook_history`` (the cells as they ran, the last error with its
  trimmed traceback) and ``read_notebook`` (the saved file in pages, outputs budgeted): read
  what the recorder and the file hold, not the namespace, so they answer at once, even while
  a cell runs.

:func:`call_result` turns an ``AgentToolResult`` into the MCP result (text and images, the
error flag); :func:`error_result` is a refusal or failure said as a tool result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp import types

from ..agent.types import AgentTool, AgentToolResult
from ..ai.types import ImageContent, TextContent
from ..tools.trust.redact import redact

__all__ = ["SERVED_TOOLS", "ServedTool", "call_result", "error_result", "mcp_tool"]


@dataclass(frozen=True)
class ServedTool:
    name: str  # the MCP name
    serves: str  # the AgentTool's name
    title: str
    read_only: bool
    on_kernel: bool  # takes a turn on the kernel loop (touches the namespace)
    gated: bool = False  # passes the approval gate
    description: str = ""  # prepended to the agent tool's description


SERVED_TOOLS: tuple[ServedTool, ...] = (
    ServedTool("execute", "python", "Run Python in the live kernel", read_only=False, on_kernel=True,
               gated=True, description=(
                   "Runs in the user's own live notebook kernel, under its approval policy: the "
                   "user may be asked first, and may decline. ")),
    ServedTool("list_variables", "list_variables", "List the kernel's variables", read_only=True,
               on_kernel=True),
    ServedTool("inspect_variable", "inspect_variable", "Inspect one variable", read_only=True,
               on_kernel=True),
    ServedTool("recent_cells", "notebook_history", "The user's recent cells and last error",
               read_only=True, on_kernel=False),
    ServedTool("read_notebook", "read_notebook", "Read the saved notebook in pages", read_only=True,
               on_kernel=False),
)


def mcp_tool(served: ServedTool, tool: AgentTool) -> types.Tool:
    schema = tool.parameters if isinstance(tool.parameters, dict) else {"type": "object"}
    return types.Tool(
        name=served.name, title=served.title, description=served.description + tool.description,
        input_schema=schema,
        annotations=types.ToolAnnotations(
            title=served.title, read_only_hint=served.read_only,
            destructive_hint=not served.read_only, idempotent_hint=served.read_only,
            open_world_hint=not served.read_only))


def call_result(result: AgentToolResult) -> types.CallToolResult:
    content: list[Any] = []
    for block in result.content or []:
        if isinstance(block, TextContent):
            content.append(types.TextContent(type="text", text=block.text))
        elif isinstance(block, ImageContent):
            content.append(types.ImageContent(type="image", data=block.data, mime_type=block.mime_type))
    return types.CallToolResult(content=content, is_error=bool(result.is_error))


def error_result(text: str) -> types.CallToolResult:
    """A refusal or failure as the client sees it (redacted: it may quote what failed)."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=redact(text))], is_error=True)
