"""MCP servers in the kernel: their tools for the agent, and ``await pi_notebook.mcp.call(...)``.

Layering: ``magics -> mcp -> (tools, agent, ai)``. The SDK (the optional ``mcp`` extra) is
imported only when a server starts, so ``%load_ext`` never pays for it. Modules, one job
each: ``config`` (the ``mcpServers`` files), ``server`` (one server's lifecycle),
``schema`` (tool names and input schemas), ``results`` (a call's result for the model),
``tools`` (the AgentTools), ``gate`` (approval), ``manager`` (all servers of the kernel),
``namespace`` (the call from Python). Design: docs/design/mcp.md.
"""

from __future__ import annotations

from typing import Any

from .namespace import call, current_manager, set_manager

__all__ = ["call", "current_manager", "set_manager", "McpToolError"]


def __getattr__(name: str) -> Any:
    if name == "McpToolError":
        from .manager import McpToolError

        return McpToolError
    raise AttributeError(name)
