"""MCP calls pass the approval gate of Python calls (tools/approval.py).

The agent's ``before_tool_call`` is the :class:`ApprovalHook`; the MCP tools are added to the
set of tools it gates, so under ``ask`` the card shows the call (server, tool, arguments as
pretty JSON) with Run / Skip / Always, ``deny`` refuses, and a headless ``ask`` refuses as for
Python. :class:`McpGate` sits in front of it for one thing only: a tool the server's config
lists in ``autoApprove`` runs without the prompt under ``ask`` (never under ``deny``, which
stays a refusal for every gated tool).

:func:`namespace_refusal` decides for ``pi_notebook.mcp.call`` made by *agent code*: no card
can be shown for a call inside a Python call, so under ``ask`` a tool that is not
auto-approved is refused with advice to call it as a tool; the user's own cells are the user
acting and need no prompt.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ai.types import get_field
from ..tools.approval import DENIED_REASON, ApprovalHook

__all__ = ["McpGate", "gate_tools", "namespace_refusal"]

ASK_IN_CODE = ("This MCP call needs the user's approval (approval policy 'ask'), which cannot be "
               "asked from inside agent code. Call the tool {tool!r} directly instead, so the user "
               "can approve it, or ask the user to list it in the server's autoApprove.")


class McpGate:
    """``before_tool_call``: auto-approved MCP tools skip the prompt under ``ask``."""

    def __init__(self, approval: ApprovalHook, auto_approved: Callable[[], set[str]],
                 policy: Callable[[], str]) -> None:
        self.approval = approval
        self._auto = auto_approved
        self._policy = policy

    async def __call__(self, ctx: Any, signal: Any = None) -> Any:
        tool_call = get_field(ctx, "tool_call")
        name = get_field(tool_call, "name", default="")
        if name in self._auto() and (self._policy() or "ask").strip().lower() == "ask":
            # recorded like every decision of the gate: "why did this run without asking?"
            self.approval.note(get_field(tool_call, "id", default="") or "", "auto_approved", "ask")
            return None
        return await self.approval(ctx, signal)

    def reset_run(self) -> None:
        self.approval.reset_run()


def gate_tools(approval: ApprovalHook, base: set[str], mcp_names: set[str]) -> None:
    """Gate the notebook's own tools (``base``) and the MCP tools of this run."""
    approval.tools = set(base) | set(mcp_names)


def namespace_refusal(policy: str, auto_approved: bool, agent_name: str) -> str | None:
    """Why agent code may not make this namespace call now (None: it may)."""
    policy = (policy or "ask").strip().lower()
    if policy == "auto":
        return None
    if policy == "deny":
        return DENIED_REASON
    if auto_approved:
        return None
    return ASK_IN_CODE.format(tool=agent_name)
