"""``%agent mcp``: the MCP servers of this kernel.

::

    %agent mcp                          servers: state, tool count, transport, why one failed
    %agent mcp tools NAME               a server's tools (as the agent sees them)
    %agent mcp add NAME -- CMD ARGS...  a stdio server for this session (--save: into the
    %agent mcp add NAME URL             project's .pi_notebook/mcp.json); streamable HTTP
    %agent mcp restart NAME             stop and start again (also after a failure or off)
    %agent mcp off NAME                 stop it; its tools are not offered until restart

A command waits for what it needs, then answers: ``tools NAME`` for the server to start,
``restart``/``off`` for the server to restart or stop, ``%agent mcp`` for servers that are
starting. A magic cannot await, so that part is a step that runs on the kernel loop just
before the magic (:class:`McpCommandStep`, inserted by wait.py): the kernel keeps answering
widgets and control cells meanwhile, a line says what is awaited after half a second, Stop
ends the wait (the start goes on in the background), and the wait is bounded. Without the
step (a magic called from code, IPython without autoawait) the work goes on in the
background and the command says so.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING

from IPython.core.error import UsageError

if TYPE_CHECKING:
    from ..mcp.server import McpServer
    from .runtime import Runtime

__all__ = ["mcp_command", "MCP_HELP", "McpCommandStep", "WAIT_S"]

MCP_HELP = __doc__.split("::", 1)[1].split("\n\n", 2)[1] if __doc__ else ""
_tasks: set[asyncio.Task[object]] = set()  # strong references while they run
# How long a command waits for a server: longer than a start may take (START_TIMEOUT_S),
# with room for a restart's stop.
WAIT_S = 45.0
_SHOW_AFTER_S = 0.5  # a wait shorter than this shows no progress line
_PROGRESS_EVERY_S = 5.0
_WAITING_SUBS = ("tools", "restart", "off")
# (subcommand, server) the step has carried out for the magic that runs right after it
_settled: tuple[str, str] | None = None


class McpCommandStep:
    """The part of an ``%agent mcp`` command that waits on the kernel loop (module
    docstring; wait.py's ``CommandStep``)."""

    def __init__(self, runtime: Runtime, wait_s: float = WAIT_S) -> None:
        self.runtime = runtime
        self.wait_s = wait_s

    def needs_loop(self, line: str) -> bool:
        words = line.split()
        if len(words) < 2 or words[0] != "%agent" or words[1].lower() != "mcp":
            return False
        return len(words) == 2 or (len(words) == 4 and words[2].lower() in _WAITING_SUBS)

    async def run(self, line: str) -> None:
        global _settled
        _settled = None
        words = line.split()[2:]
        manager = self.runtime.mcp().manager
        work: Coroutine[object, object, object]
        if not words:
            manager.reload()
            starting = [s for s in manager.servers.values() if s.state == "starting"]
            if not starting:
                return
            work = _start_all(starting)
            what = "MCP server" + ("s " if len(starting) > 1 else " ") + ", ".join(repr(s.name) for s in starting)
            sub = name = ""
        else:
            sub, name = words[0].lower(), words[1]
            try:
                server = manager.server(name)
            except KeyError:
                return  # the magic says so
            if sub == "tools":
                if server.state not in ("idle", "starting"):
                    return
                work, what = server.start(), f"MCP server {name!r} to start"
            elif sub == "restart":
                work, what = manager.restart(name), f"MCP server {name!r} to restart"
            else:
                work, what = manager.off(name), f"MCP server {name!r} to stop"
        task = _background(self.runtime, work)
        if await _wait_visibly(task, what, self.wait_s) and sub in ("restart", "off"):
            _settled = (sub, name)


async def _start_all(servers: list[McpServer]) -> None:
    await asyncio.gather(*(s.start() for s in servers), return_exceptions=True)


async def _wait_visibly(task: asyncio.Task[object], what: str, bound: float) -> bool:
    """Wait for ``task`` up to ``bound`` seconds, with a line saying so after a moment;
    True when it ended. Stop (a kernel interrupt cancels the cell) ends the wait only."""
    from IPython.display import clear_output, display

    from .wait import WaitInterrupted

    started = time.monotonic()
    handle, shown = None, -1
    try:
        while not task.done():
            elapsed = time.monotonic() - started
            if elapsed >= bound:
                break
            # the line at half a second, then its count every few seconds (a terminal prints
            # each update as a new line)
            step = int(elapsed // _PROGRESS_EVERY_S)
            if elapsed >= _SHOW_AFTER_S and step != shown:
                shown = step
                text = {"text/plain": f"waiting for {what}… {elapsed:.0f} s of at most {bound:.0f} s "
                                      "(Stop stops waiting)"}
                if handle is None:
                    handle = display(text, raw=True, display_id=True)
                else:
                    handle.update(text, raw=True)
            await asyncio.wait({task}, timeout=min(_SHOW_AFTER_S, bound - elapsed))
    except asyncio.CancelledError:
        raise WaitInterrupted(f"stopped waiting for {what}; that goes on in the background "
                              "(%agent mcp shows how it ends).") from None
    finally:
        if handle is not None:
            clear_output()  # only the progress line: the magic has not run yet
    return task.done()


def _background(runtime: Runtime, work: Coroutine[object, object, object]) -> asyncio.Task[object]:
    loop = runtime.attach_loop()
    task = loop.create_task(work, name="pi_notebook-mcp-command")
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)
    return task


def _settled_now(sub: str, name: str) -> bool:
    """The step just carried out ``sub`` for ``name`` (consumed)."""
    global _settled
    done, _settled = _settled == (sub, name), None
    return done


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
        if _settled_now("restart", server.name):
            return f"Restarted {server.status_line()}"
        _background(runtime, manager.restart(server.name))
        return f"Restarting {server.name!r}; %agent mcp shows when it is connected."
    if sub == "off":
        if not _settled_now("off", server.name):
            _background(runtime, manager.off(server.name))
        return f"{server.name!r} is turned off for this session (%agent mcp restart {server.name} to use it again)."
    if server.state != "connected":
        if server.state == "idle":
            _background(runtime, server.start())
        if server.state in ("idle", "starting"):
            return (f"{server.name!r} is still starting; %agent mcp shows when it is connected, "
                    f"then %agent mcp tools {server.name} lists its tools.")
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
