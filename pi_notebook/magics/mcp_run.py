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
import dataclasses
import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..agent.types import AgentLoopTurnUpdate
from ..mcp.elicit import FormAnswer, FormRequest
from ..mcp.gate import McpGate, gate_tools
from ..mcp.manager import McpManager, McpSources
from ..mcp.tools import McpToolSet

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from ..agent import Agent
    from ..agent.types import AgentTool, PrepareNextTurnContext
    from ..tools import PythonToolSettings
    from ..tools.trust.approval import ApprovalHook
    from ..tools.trust.policy import ApprovalPolicy
    from ..widgets.protocol import RunView

__all__ = ["McpLink", "notebook_dir"]

_closing: set[asyncio.Task[None]] = set()  # strong references until the servers are stopped


def notebook_dir(shell: InteractiveShell, explicit: str) -> Path:
    """The notebook's folder when the kernel can tell, else the working directory."""
    from ..tools.context.notebook_file import locate_notebook

    try:
        found = locate_notebook(getattr(shell, "user_ns", None), explicit or None)
    except Exception:
        found = None
    path = getattr(found, "path", None)
    return path.parent if path is not None else Path(os.getcwd())


@dataclass
class _RunLink:
    agent: Agent
    approval: ApprovalHook | None
    notice: Callable[[str], None]
    small_model: bool


class McpLink:
    def __init__(self, *, start_dir: Callable[[], Path], explicit: Callable[[], str],
                 timeout: Callable[[], float], tool_settings: Callable[[], PythonToolSettings],
                 policy: Callable[[], ApprovalPolicy], in_agent_code: Callable[[], bool],
                 trust_annotations: Callable[[], bool] = lambda: False,
                 form_view: Callable[[], RunView | None] = lambda: None,
                 warn: Callable[[str], None] = lambda _text: None) -> None:
        self.manager = McpManager(McpSources(start_dir=start_dir, explicit=explicit, timeout=timeout,
                                             tool_settings=tool_settings, policy=policy,
                                             in_agent_code=in_agent_code, elicit=self.ask_form,
                                             notice=warn))
        self._form_view = form_view
        self._warn = warn
        self._policy = policy
        self._trust = trust_annotations
        self._base_gated: set[str] | None = None
        self.gate: McpGate | None = None
        self._run: _RunLink | None = None  # what the turns of the current run need

    @property
    def auto_approved(self) -> set[str]:
        return self.manager.toolset.auto_approved

    def install_gate(self, agent: Agent, approval: ApprovalHook) -> McpGate:
        """Put the MCP gate in front of the approval hook (once, with the Agent)."""
        self._base_gated = set(approval.tools)
        gate = McpGate(approval, lambda: self.manager.toolset.meta, self._policy, self._trust)
        agent.before_tool_call = gate
        self.gate = gate
        earlier = agent.prepare_next_turn_with_context

        async def next_turn(ctx: PrepareNextTurnContext, signal: object = None) -> AgentLoopTurnUpdate | None:
            earlier_update = earlier(ctx, signal) if earlier is not None else None
            if inspect.isawaitable(earlier_update):
                earlier_update = await earlier_update
            update: AgentLoopTurnUpdate | None = earlier_update
            context = getattr(update, "context", None)
            if context is not None:
                ctx = dataclasses.replace(ctx, context=context)
            mine = await self.next_turn(ctx)
            if mine is None:
                return update
            if update is not None:
                return dataclasses.replace(update, context=mine.context)
            return mine

        agent.prepare_next_turn_with_context = next_turn
        return gate

    async def prepare(self, agent: Agent, approval: ApprovalHook | None, notice: Callable[[str], None],
                      *, small_model: bool) -> None:
        """Start the servers this run needs and offer their tools (module docstring)."""
        manager = self.manager
        if self.gate is not None:
            self.gate.reset_run()  # "Always for this tool" ends with its run
        manager.reload()
        if not manager.has_servers():
            manager.toolset.tools = []
            self._run = None
            return
        self._run = _RunLink(agent, approval, notice, small_model)
        taken = {t.name for t in agent.state.tools}
        toolset, notices = await manager.prepare_run(taken)
        for text in notices:
            notice(text)
        offered = self._offer(toolset, notice, small_model)
        agent.state.tools = [*agent.state.tools, *offered]
        self._gate_offered(approval, offered)

    def _offer(self, toolset: McpToolSet, notice: Callable[[str], None], small_model: bool) -> list[AgentTool]:
        offered = toolset.tools
        if small_model:
            offered = [t for t in offered if self._allow_listed(toolset.origin.get(t.name))]
            left_out = sorted({toolset.origin[t.name][0] for t in toolset.tools if t not in offered})
            if left_out and self.manager.report_once("small-model", ",".join(left_out)):
                notice(f"MCP tools of {', '.join(left_out)} are not offered to this small model: give the "
                       "server a 'tools' allow-list in its config to offer those tools.")
        return offered

    def _gate_offered(self, approval: ApprovalHook | None, offered: list[AgentTool]) -> None:
        if approval is not None:
            gate_tools(approval, self._base_gated if self._base_gated is not None else set(approval.tools),
                       {t.name for t in offered})

    async def next_turn(self, ctx: PrepareNextTurnContext) -> AgentLoopTurnUpdate | None:
        """Between two turns of a run: a server whose tool list changed gets its new tools
        into the next request (and the gate); one notice says what changed. Never fails
        the run: trouble keeps the tools as they were."""
        run = self._run
        toolset = self.manager.toolset
        if run is None or not self.manager.servers:
            return None
        try:
            called = {toolset.origin[name][0] for r in ctx.tool_results
                      if (name := getattr(r, "tool_name", "")) in toolset.origin}
            if not await self.manager.refresh_between_turns(called):
                return None
            old = set(toolset.origin)
            tools = list(ctx.context.tools or [])
            kept = [t for t in tools if t.name not in old]
            new_set, notices = self.manager.rebuild_tools({t.name for t in kept})
            offered = self._offer(new_set, run.notice, run.small_model)
        except Exception as exc:
            run.notice(f"MCP tools were not refreshed between turns: {exc}")
            return None
        for text in notices:
            run.notice(text)
        names = {t.name for t in offered}
        shown_old = {t.name for t in tools if t.name in old}
        added, removed = sorted(names - shown_old), sorted(shown_old - names)
        if added or removed:
            what = "; ".join(bit for bit in (f"added {', '.join(added)}" if added else "",
                                             f"removed {', '.join(removed)}" if removed else "") if bit)
            run.notice(f"MCP tools changed during the run: {what}.")
        run.agent.state.tools = [*(t for t in run.agent.state.tools if t.name not in old), *offered]
        self._gate_offered(run.approval, offered)
        return AgentLoopTurnUpdate(context=dataclasses.replace(ctx.context, tools=[*kept, *offered]))

    async def ask_form(self, request: FormRequest) -> FormAnswer:
        """A server asks the user for input: the run's view shows a form, or, when none can
        be shown (headless, terminal IPython, no run at work), the request is declined with a
        notice."""
        view = self._form_view()
        ask = getattr(view, "request_input", None) if view is not None else None
        if ask is None:
            self._warn(f"MCP server {request.server!r} asked for input ({request.message[:120]}); declined: "
                       "no notebook frontend here to show a form.")
            return FormAnswer("decline")
        action, values = await ask(request)
        if action not in ("accept", "decline", "cancel"):
            action = "cancel"
        return FormAnswer(action, dict(values or {}))

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
        await self.manager.close()

    def close_soon(self, loop: asyncio.AbstractEventLoop | None) -> None:
        """``%unload_ext``: stop the servers in a task of their own (a magic cannot await)."""
        if loop is None or loop.is_closed() or not self.manager.servers:
            return
        task = loop.create_task(self.close())
        _closing.add(task)
        task.add_done_callback(_closing.discard)
