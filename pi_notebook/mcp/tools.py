"""A connected server's tools as AgentTools (``server__tool``) and what one call does.

A call runs through :meth:`McpServer.call` with the server's ``timeout`` (or
``AgentMagics.mcp_timeout``); Abort resolves a future that cancels the request at once
(the SDK sends ``notifications/cancelled``) and the call's result says it was aborted, so
every tool call of the transcript has a result. Arguments reach the server as the model
sent them (validated against the schema by the loop); results are converted by
``results.py``. Approval is not decided here: the loop's ``before_tool_call`` gate
(``gate.py`` in front of tools/trust/approval.py) ran before ``execute``. Progress notifications
become partial results (the card shows the latest line) and restart the call's timeout.

A server decides how many tools it announces; each offered tool costs a schema check at every
run start and room in every request. So at most ``MAX_TOOLS_PER_SERVER`` tools of a server
and ``MAX_TOOLS`` in all are offered (in the server's order; an allow-list in the config picks
others), the rest are not looked at, and a notice says how many were dropped. A result is
converted off the kernel's loop (``asyncio.to_thread``): its size is the server's choice.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..agent.types import AgentTool, AgentToolResult
from ..ai.types import TextContent
from ..tools.python.python_tool import PythonToolSettings
from .results import convert_result, error_result
from .schema import SchemaRejected, simplify_schema, tool_name, unique_name
from .server import McpCallError, McpServer, McpUnavailable, ToolInfo

__all__ = ["McpToolSet", "McpToolMeta", "build_tools", "abort_future", "MAX_TOOLS", "MAX_TOOLS_PER_SERVER"]

MAX_TOOLS_PER_SERVER = 100
# OpenAI's APIs take at most 128 tools a request; the notebook's own tools need the rest
MAX_TOOLS = 120

ABORTED = "The call was aborted by the user before the MCP server answered (the request was cancelled)."


@dataclass(frozen=True)
class McpToolMeta:
    """What the approval gate and the view need of one offered MCP tool: its server, the
    server's own word about it (annotations: never trusted unless the user opted in), and
    the config's say (``autoApprove``, the server's ``approval``)."""

    server: str
    tool: str
    read_only: bool | None = None
    destructive: bool | None = None
    auto_approved: bool = False
    approval: str | None = None
    # what the tool *is* as the server announced it (description, schema, annotations): an
    # "Always for this tool" answer holds for this fingerprint only (gate.py)
    fingerprint: str = ""
    description: str = ""

    @property
    def trusted_read_only(self) -> bool:
        """Read-only and not destructive by the server's annotations (a tool that claims
        both is contradictory and is not taken as read-only)."""
        return self.read_only is True and self.destructive is not True

    def hints(self) -> dict[str, Any]:
        """For ``details["mcp"]`` and the approval request: the card's badges."""
        return {"server": self.server, "tool": self.tool, "read_only": self.read_only,
                "destructive": self.destructive}


@dataclass
class McpToolSet:
    """The tools offered for one run, and which of them need no approval under ``ask``."""

    tools: list[AgentTool] = field(default_factory=list)
    auto_approved: set[str] = field(default_factory=set)
    notices: list[str] = field(default_factory=list)
    origin: dict[str, tuple[str, str]] = field(default_factory=dict)  # agent name -> (server, tool)
    meta: dict[str, McpToolMeta] = field(default_factory=dict)  # agent name -> approval facts


def tool_fingerprint(info: ToolInfo) -> str:
    """A digest of everything the server says a tool is: its title, description, input schema
    and annotations. Any change makes a different fingerprint."""
    import hashlib
    import json

    said = {"title": info.title, "description": info.description, "schema": info.input_schema,
            "read_only": info.read_only, "destructive": info.destructive}
    text = json.dumps(said, sort_keys=True, default=repr, ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def abort_future(signal: Any) -> tuple[asyncio.Future[None] | None, Callable[[], None]]:
    """A future on this loop that resolves when ``signal`` aborts (from any thread)."""
    if signal is None or not hasattr(signal, "add_listener"):
        return None, lambda: None
    loop = asyncio.get_running_loop()
    future: asyncio.Future[None] = loop.create_future()
    loop_thread = threading.get_ident()

    def settle() -> None:
        if not future.done():
            future.set_result(None)

    def on_abort() -> None:
        if threading.get_ident() == loop_thread:
            settle()
        else:
            loop.call_soon_threadsafe(settle)

    remove = signal.add_listener(on_abort)
    if getattr(signal, "aborted", False):
        settle()
    return future, remove


def build_tools(servers: list[McpServer], taken: set[str], settings: Callable[[], PythonToolSettings],
                default_timeout: Callable[[], float]) -> McpToolSet:
    """AgentTools for every connected server's (allow-listed) tools."""
    out = McpToolSet()
    taken = set(taken)
    offered = 0
    for server in servers:
        if server.state != "connected":
            continue
        allowed = server.config.tools
        candidates = [info for info in server.tools if allowed is None or info.name in allowed]
        room = max(0, min(MAX_TOOLS_PER_SERVER, MAX_TOOLS - offered))
        if len(candidates) > room:
            out.notices.append(
                f"{len(candidates) - room} of the {len(candidates)} tools of {server.name!r} are not offered: "
                f"at most {MAX_TOOLS_PER_SERVER} tools of a server and {MAX_TOOLS} MCP tools in all "
                f"(its 'tools' list in the MCP config chooses which).")
            candidates = candidates[:room]
        for info in candidates:
            try:
                schema = simplify_schema(info.input_schema)
                base = tool_name(server.name, info.name)
                name = unique_name(base, taken)
            except SchemaRejected as exc:
                out.notices.append(f"MCP tool {info.name!r} of {server.name!r} is not offered: {exc}.")
                continue
            if name != base:
                out.notices.append(f"MCP tool {info.name!r} of {server.name!r} is offered as {name!r} "
                                   f"({base!r} was taken).")
            taken.add(name)
            meta = McpToolMeta(server=server.name, tool=info.name, read_only=info.read_only,
                               destructive=info.destructive,
                               auto_approved=info.name in server.config.auto_approve,
                               approval=server.config.approval, fingerprint=tool_fingerprint(info),
                               description=info.description or "")
            out.tools.append(_agent_tool(server, meta, name, info.description, schema, settings,
                                         default_timeout))
            offered += 1
            out.origin[name] = (server.name, info.name)
            out.meta[name] = meta
            if meta.auto_approved:
                out.auto_approved.add(name)
    return out


def _progress_to(on_update: Any) -> Callable[[str], None] | None:
    """Progress lines as the tool's partial result: the card shows the latest one."""
    if not callable(on_update):
        return None

    def update(text: str) -> None:
        on_update(AgentToolResult(content=[TextContent(text=f"progress: {text}")]))

    return update


def _with_hints(result: AgentToolResult, meta: McpToolMeta) -> AgentToolResult:
    """The tool's annotations join ``details["mcp"]``: the card shows them as badges."""
    details = result.details
    if isinstance(details, dict) and isinstance(details.get("mcp"), dict):
        details["mcp"]["read_only"] = meta.read_only
        details["mcp"]["destructive"] = meta.destructive
    return result


def _agent_tool(server: McpServer, meta: McpToolMeta, name: str, description: str, schema: dict[str, Any],
                settings: Callable[[], PythonToolSettings], default_timeout: Callable[[], float]) -> AgentTool:
    mcp_name = meta.tool

    async def execute(tool_call_id: str, params: Any, signal: Any = None, on_update: Any = None,
                      ) -> AgentToolResult:
        args = dict(params) if isinstance(params, dict) else {}
        timeout = server.config.timeout or default_timeout() or None
        aborted, remove = abort_future(signal)
        try:
            result = await server.call(mcp_name, args, timeout_s=timeout, aborted=aborted,
                                       on_progress=_progress_to(on_update))
        except asyncio.CancelledError:
            if aborted is not None and aborted.done():
                return _with_hints(error_result(ABORTED, server=server.name, tool=mcp_name), meta)
            raise
        except (McpUnavailable, McpCallError) as exc:
            return _with_hints(error_result(str(exc), server=server.name, tool=mcp_name), meta)
        finally:
            remove()
            if aborted is not None and not aborted.done():
                aborted.cancel()
        converted = await asyncio.to_thread(convert_result, result, settings(), server=server.name, tool=mcp_name)
        return _with_hints(converted, meta)

    text = description.strip() or f"The {mcp_name!r} tool of the MCP server {server.name!r}."
    return AgentTool(name=name, description=f"[MCP server {server.name}] {text}"[:4000],
                     parameters=schema, execute=execute, label=f"{server.name} · {mcp_name}")
