"""``await pi_notebook.mcp.call("server", "tool", **args)``: an MCP tool from Python.

Returns the tool's structured content as Python objects (dicts and lists, ready for
``pandas.DataFrame``); without structured content, its text (parsed when it is JSON). A
tool error or a call without an answer raises :class:`McpToolError`. The result is
redacted like every tool output. Called from agent code, the call passes the approval
policy of the run (gate.py: ``auto`` runs, ``deny`` refuses, ``ask`` runs only tools the
server's config auto-approves); called from the user's own cell, the user is the one
acting.

The notebook layer registers, when the extension loads, how to get the kernel's manager
(``set_manager_source``): the manager is made on first use, so a call from the user's first
cell works before any run or ``%agent mcp``; unloading registers None. This module knows
nothing of the magics.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .manager import McpManager

__all__ = ["call", "set_manager", "set_manager_source", "current_manager"]

_source: Callable[[], McpManager] | None = None


def set_manager_source(source: Callable[[], McpManager] | None) -> None:
    """How to get the kernel's manager when a call needs it (None: the extension is unloaded)."""
    global _source
    _source = source


def set_manager(manager: McpManager | None) -> None:
    """A fixed manager (or none): the same registration, for callers that hold one."""
    set_manager_source(None if manager is None else (lambda: manager))


def current_manager() -> McpManager | None:
    """The kernel's manager (made if needed; nothing starts), or None without the extension."""
    return _source() if _source is not None else None


async def call(server: str, tool: str, /, **arguments: Any) -> Any:
    """Call ``tool`` on the configured MCP ``server`` (module docstring)."""
    manager = current_manager()
    if manager is None:
        from .manager import McpToolError

        raise McpToolError("pi_notebook.mcp.call needs the extension: run %load_ext pi_notebook first.")
    return await manager.call(server, tool, arguments)
