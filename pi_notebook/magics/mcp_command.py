"""``%agent mcp``: the MCP servers of this kernel.

::

    %agent mcp                          servers: state, tool count, transport, why one failed
    %agent mcp tools NAME               a server's tools (as the agent sees them)
    %agent mcp add NAME -- CMD ARGS...  a stdio server for this session (--save: into the
    %agent mcp add NAME URL             project's .pi_notebook/mcp.json); streamable HTTP
    %agent mcp restart NAME             stop and start again (also after a failure or off)
    %agent mcp off NAME                 stop it; its tools are not offered until restart

A magic cannot await: starting and stopping run as tasks on the kernel loop, and the
command says so; ``%agent mcp`` shows the outcome.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import TYPE_CHECKING

from IPython.core.error import UsageError

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["mcp_command", "MCP_HELP"]

MCP_HELP = __doc__.split("::", 1)[1].split("\n\n", 2)[1] if __doc__ else ""
_tasks: set[asyncio.Task[object]] = set()  # strong references while they run


def _background(runtime: Runtime, work: Coroutine[object, object, object]) -> None:
    loop = runtime.attach_loop()
    task = loop.create_task(work, name="pi_notebook-mcp-command")
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


def mcp_command(runtime: Runtime, words: list[str]) -> str:
    link = runtime.mcp()
    manager = link.manager
    if not words:
        return "\n".join(link.status_lines())
    sub, rest = words[0].lower(), words[1:]
    if sub == "help":
        return MCP_HELP
    if sub == "add":
        return _add(runtime, rest)
    if sub not in ("tools", "restart", "off") or len(rest) != 1:
        raise UsageError("%agent mcp: one of: (nothing), tools NAME, add NAME -- CMD ARGS..., "
                         "add NAME URL, restart NAME, off NAME (%agent mcp help).")
    try:
        server = manager.server(rest[0])
    except KeyError as exc:
        raise UsageError(f"%agent mcp {sub}: {exc.args[0]}") from None
    if sub == "restart":
        _background(runtime, manager.restart(server.name))
        return f"Restarting {server.name!r}; %agent mcp shows when it is connected."
    if sub == "off":
        _background(runtime, manager.off(server.name))
        return f"{server.name!r} is turned off for this session (%agent mcp restart {server.name} to use it again)."
    if server.state != "connected":
        if server.state == "idle":
            _background(runtime, server.start())
            return f"{server.name!r} is starting; run %agent mcp tools {server.name} again in a moment."
        return f"{server.name!r} is {server.state}: {server.reason}"
    from ..mcp.schema import tool_name

    allowed = server.config.tools
    approval = f" (approval: {server.config.approval}, from its config)" if server.config.approval else ""
    lines = [f"{server.name}: {len(server.tools)} tools{approval}"]
    for info in server.tools:
        marks = []
        if allowed is not None and info.name not in allowed:
            marks.append("not offered: not in 'tools'")
        if info.name in server.config.auto_approve:
            marks.append("autoApprove")
        if info.read_only:
            marks.append("read-only")
        if info.destructive:
            marks.append("destructive")
        summary = (info.description.strip().splitlines() or [""])[0][:100]
        tag = f" [{', '.join(marks)}]" if marks else ""
        lines.append(f"  {tool_name(server.name, info.name)}{tag}  {summary}")
    return "\n".join(lines)


def _add(runtime: Runtime, words: list[str]) -> str:
    save = "--save" in words[: words.index("--") if "--" in words else len(words)]
    if save:
        words = [w for i, w in enumerate(words) if not (w == "--save" and ("--" not in words or i < words.index("--")))]
    usage = "%agent mcp add NAME [--save] -- COMMAND ARGS...  or  %agent mcp add NAME [--save] URL"
    if len(words) >= 3 and words[1] == "--":
        name, target = words[0], words[2:]
    elif len(words) == 2 and words[1].startswith(("http://", "https://")):
        name, target = words[0], [words[1]]
    else:
        raise UsageError(f"%agent mcp add: {usage}")
    try:
        config, saved = runtime.mcp().manager.add(name, target, save=save)
    except (ValueError, OSError) as exc:
        raise UsageError(f"%agent mcp add: {exc}") from None
    where = f"saved in {saved}" if saved is not None else "for this session (--save keeps it)"
    return f"Added MCP server {config.name!r} ({config.describe()}), {where}; it starts with the next run."
