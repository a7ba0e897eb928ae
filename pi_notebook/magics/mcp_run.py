"""The notebook's side of MCP: the kernel's manager, and what each run gets from it.

:class:`McpLink` is created with the Agent (no SDK import, nothing started). When a run
starts, :meth:`McpLink.prepare` lets the manager start what is configured (lazily, in
parallel; pi_notebook/mcp/manager.py), adds the MCP tools to the run's tools, gates them
through the approval hook, and shows each failure or renaming once in the run's view.

The small-model profile (docs/design/local-model.md) offers only the tools of servers
whose config has an explicit ``tools`` allow-list: a 0.5B model with a long tool list
stops answering.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..mcp.gate import McpGate, gate_tools
from ..mcp.manager import McpManager, McpSources
from ..mcp.namespace import set_manager

if TYPE_CHECKING:
    from ..agent import Agent
    from ..tools import PythonToolSettings
    from ..tools.approval import ApprovalHook
    from ..tools.policy import ApprovalPolicy

__all__ = ["McpLink", "notebook_dir"]

_closing: set[asyncio.Task[None]] = set()  # strong references until the servers are stopped


def notebook_dir(shell: Any, explicit: str) -> Path:
    """The notebook's folder when the kernel can tell, else the working directory."""
    from ..tools.notebook_file import locate_notebook

    try:
        found = locate_notebook(getattr(shell, "user_ns", None), explicit or None)
    except Exception:
        found = None
    path = getattr(found, "path", None)
    return path.parent if path is not None else Path(os.getcwd())


class McpLink:
    def __init__(self, *, start_dir: Callable[[], Path], explicit: Callable[[], str],
                 timeout: Callable[[], float], tool_settings: Callable[[], PythonToolSettings],
                 policy: Callable[[], ApprovalPolicy], in_agent_code: Callable[[], bool]) -> None:
        self.manager = McpManager(McpSources(start_dir=start_dir, explicit=explicit, timeout=timeout,
                                             tool_settings=tool_settings, policy=policy,
                                             in_agent_code=in_agent_code))
        self._policy = policy
        self._base_gated: set[str] | None = None
        set_manager(self.manager)  # pi_notebook.mcp.call reaches this kernel's servers

    @property
    def auto_approved(self) -> set[str]:
        return self.manager.toolset.auto_approved

    def install_gate(self, agent: Agent, approval: ApprovalHook) -> McpGate:
        """Put the MCP gate in front of the approval hook (once, with the Agent)."""
        self._base_gated = set(approval.tools)
        gate = McpGate(approval, lambda: self.auto_approved, self._policy)
        agent.before_tool_call = gate
        return gate

    async def prepare(self, agent: Agent, approval: ApprovalHook | None, notice: Callable[[str], None],
                      *, small_model: bool) -> None:
        """Start the servers this run needs and offer their tools (module docstring)."""
        manager = self.manager
        manager.reload()
        if not manager.has_servers():
            manager.toolset.tools = []
            return
        taken = {t.name for t in agent.state.tools}
        toolset, notices = await manager.prepare_run(taken)
        for text in notices:
            notice(text)
        offered = toolset.tools
        if small_model:
            offered = [t for t in offered if self._allow_listed(toolset.origin.get(t.name))]
            left_out = sorted({toolset.origin[t.name][0] for t in toolset.tools if t not in offered})
            if left_out and manager.report_once("small-model", ",".join(left_out)):
                notice(f"MCP tools of {', '.join(left_out)} are not offered to this small model: give the "
                       "server a 'tools' allow-list in its config to offer those tools.")
        agent.state.tools = [*agent.state.tools, *offered]
        if approval is not None:
            gate_tools(approval, self._base_gated if self._base_gated is not None else set(approval.tools),
                       {t.name for t in offered})

    def _allow_listed(self, origin: tuple[str, str] | None) -> bool:
        if origin is None:
            return False
        server = self.manager.servers.get(origin[0])
        return server is not None and server.config.tools is not None

    def status_lines(self) -> list[str]:
        try:
            lines = self.manager.status_lines()
        except Exception as exc:  # a status line must never fail %agent
            return [f"MCP servers: cannot read the configuration ({exc})"]
        if lines and lines[0].startswith("MCP servers: none"):
            return lines
        return ["MCP servers:", *lines]

    async def close(self) -> None:
        set_manager(None)
        await self.manager.close()

    def close_soon(self, loop: asyncio.AbstractEventLoop | None) -> None:
        """``%unload_ext``: stop the servers in a task of their own (a magic cannot await)."""
        set_manager(None)
        if loop is None or loop.is_closed() or not self.manager.servers:
            return
        task = loop.create_task(self.close())
        _closing.add(task)
        task.add_done_callback(_closing.discard)
