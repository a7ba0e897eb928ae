"""``await pi_notebook.mcp.call("server", "tool", **args)``: an MCP tool from Python.

Returns the tool's structured content as Python objects (dicts and lists, ready for
``pandas.DataFrame``); without structured content, its text (parsed when it is JSON). A
tool error or a call without an answer raises :class:`McpToolError`. The result is
redacted like every tool output. Called from agent code, the call passes the approval
policy of the run (gate.py: ``auto`` runs, ``deny`` refuses, ``ask`` runs only tools the
server's config auto-approves); called from the user's own cell, the user is the one
acting.

The kernel's manager is registered by the notebook layer when the extension loads its
first run (``set_manager``); this module knows nothing of the magics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .manager import McpManager

__all__ = ["call", "set_manager", "current_manager"]

_manager: McpManager | None = None


def set_manager(manager: McpManager | None) -> None:
    global _manager
    _manager = manager


def current_manager() -> McpManager | None:
    return _manager


async def call(server: str, tool: str, /, **arguments: Any) -> Any:
    """Call ``tool`` on the configured MCP ``server`` (module docstring)."""
    manager = _manager
    if manager is None:
        from .manager import McpToolError

        raise McpToolError("pi_notebook.mcp.call needs the extension: run %load_ext pi_notebook first.")
    return await manager.call(server, tool, arguments)
