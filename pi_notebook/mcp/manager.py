"""The kernel's MCP servers: configuration, lazy parallel start, tools per run, commands.

Nothing starts at ``%load_ext``: the first run that needs the servers calls
:meth:`McpManager.prepare_run`, which re-reads the configuration (cheap: a few small
files), starts every enabled server that is not running in parallel (bounded by the start
timeout) and returns the tools to offer. A server that failed is reported once (one line
with its stderr tail) and the run goes on without its tools; a server that crashed after it
was connected is started again by its next call or the next run.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..tools.python.python_tool import PythonToolSettings
from ..tools.trust.redact import redact_data
from .config import CONFIG_NAME, LoadedConfig, ServerConfig, load_config, parse_servers, project_config_path
from .gate import namespace_refusal
from .schema import load_schema_checker
from .server import McpCallError, McpServer, McpUnavailable
from .tools import McpToolSet, build_tools

if TYPE_CHECKING:
    from .elicit import FormAnswer, FormRequest

__all__ = ["McpManager", "McpSources", "McpToolError", "TURN_RELIST_S"]

TURN_RELIST_S = 10.0  # a list older than this is fetched again at a turn boundary
TURN_LIST_TIMEOUT_S = 5.0


class McpToolError(Exception):
    """``pi_notebook.mcp.call``: the tool answered with an error, or no answer came."""


@dataclass
class McpSources:
    """What the manager reads from its owner, each time (``%config`` applies at once)."""

    start_dir: Callable[[], Path]  # the notebook's folder (else the working directory)
    explicit: Callable[[], str]  # AgentMagics.mcp_config
    timeout: Callable[[], float]  # AgentMagics.mcp_timeout (0: none)
    tool_settings: Callable[[], PythonToolSettings]
    # for agent code's namespace calls: the approval policy of the run at work, and whether
    # the caller is agent code (None: the user's own cell)
    policy: Callable[[], str] = lambda: "ask"
    in_agent_code: Callable[[], bool] = lambda: False
    user_path: Path | None = None  # tests: instead of ~/.pi_notebook/mcp.json
    # a server's request for input (elicit.py): the notebook shows a form, or declines
    elicit: Callable[[FormRequest], Awaitable[FormAnswer]] | None = None
    notice: Callable[[str], None] | None = None  # one line for the user (the run's view)


@dataclass
class _Report:
    seen: set[tuple[str, str]] = field(default_factory=set)

    def once(self, name: str, text: str) -> bool:
        key = (name, text)
        if key in self.seen:
            return False
        self.seen.add(key)
        return True


class McpManager:
    def __init__(self, sources: McpSources) -> None:
        self.sources = sources
        self.servers: dict[str, McpServer] = {}
        self.session_added: dict[str, ServerConfig] = {}
        self.turned_off: set[str] = set()
        self.loaded: LoadedConfig | None = None
        self.toolset = McpToolSet()
        self._report = _Report()
        self._stopping: set[asyncio.Task[None]] = set()

    # --- configuration ------------------------------------------------------------------
    def reload(self) -> list[str]:
        """Re-read the configuration; servers whose entry changed or vanished are stopped.
        Returns notices (bad files), each once."""
        loaded = load_config(self.sources.start_dir(), self.sources.explicit(),
                             user_path=self.sources.user_path)
        self.loaded = loaded
        wanted = {**loaded.servers, **self.session_added}
        for name in list(self.servers):
            server = self.servers[name]
            new = wanted.get(name)
            if new is None or not server.config.same_launch(new) or new.disabled != server.config.disabled:
                self._stop_later(server)
                del self.servers[name]
            else:
                server.config = new  # tools / autoApprove / timeout apply at once
        for name, config in wanted.items():
            if name not in self.servers:
                server = McpServer(config, on_elicit=self.sources.elicit, on_notice=self.sources.notice)
                if name in self.turned_off:
                    server.state, server.reason = "off", "turned off (%agent mcp off)"
                self.servers[name] = server
        return [n for n in loaded.notices if self._report.once("", n)]

    def _stop_later(self, server: McpServer) -> None:
        try:
            task = asyncio.get_running_loop().create_task(server.stop())
        except RuntimeError:
            return
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    # --- runs ---------------------------------------------------------------------------
    async def prepare_run(self, taken: set[str]) -> tuple[McpToolSet, list[str]]:
        """Start what is needed (in parallel), then the tools for this run and the notices
        to show (each failure once)."""
        notices = self.reload()
        waiting = [s for s in self.servers.values()  # a start under way is shared, not repeated
                   if s.state in ("idle", "starting") or (s.state == "connected" and s.crashed)]
        changed = [s for s in self.servers.values() if s.state == "connected" and not s.crashed
                   and _relisted(s)]
        if waiting or changed:
            await asyncio.gather(*(s.start() for s in waiting), *(s.refresh_tools() for s in changed),
                                 return_exceptions=True)
        for server in self.servers.values():
            if server.state == "failed" and self._report.once(server.name, server.reason):
                notices.append(f"MCP server {server.name!r} is not available; the run goes on "
                               f"without its tools: {server.reason}")
        await asyncio.to_thread(load_schema_checker)  # once: its import is seconds of work
        self.toolset = build_tools(list(self.servers.values()), taken, self.sources.tool_settings,
                                   self.sources.timeout)
        notices.extend(n for n in self.toolset.notices if self._report.once("tools", n))
        return self.toolset, notices

    async def refresh_between_turns(self, called: set[str]) -> bool:
        """At a turn boundary: list again the tools of each server that may have changed
        them (a legacy ``tools/list_changed`` arrived; or the server says its list may
        change and one of its tools ran in the last turn, or its list is older than
        ``TURN_RELIST_S``); True when a list changed. Bounded per server, in parallel: a
        slow server keeps its old list rather than holding the turn."""
        now = time.monotonic()
        due = [s for s in self.servers.values() if s.state == "connected" and not s.crashed and _relisted(s)
               and (s.tools_stale or (s.tools_may_change
                                      and (s.name in called or now - s.listed_at > TURN_RELIST_S)))]
        if not due:
            return False
        changed = await asyncio.gather(*(s.refresh_tools(TURN_LIST_TIMEOUT_S) for s in due),
                                       return_exceptions=True)
        return any(c is True for c in changed)

    def rebuild_tools(self, taken: set[str]) -> tuple[McpToolSet, list[str]]:
        """The tools again from the servers' current lists (after a change within a run)."""
        self.toolset = build_tools(list(self.servers.values()), taken, self.sources.tool_settings,
                                   self.sources.timeout)
        return self.toolset, [n for n in self.toolset.notices if self._report.once("tools", n)]

    def report_once(self, topic: str, text: str) -> bool:
        """True the first time this (topic, text) is reported in this kernel."""
        return self._report.once(topic, text)

    def has_servers(self) -> bool:
        return bool(self.servers) or bool(self.session_added)

    # --- commands -----------------------------------------------------------------------
    def status_lines(self) -> list[str]:
        self.reload()
        if not self.servers:
            where = ", ".join(str(p) for p in self.loaded.files) if self.loaded and self.loaded.files else ""
            return [f"MCP servers: none configured{' (' + where + ')' if where else ''}"]
        return [f"  {s.status_line()}" for s in self.servers.values()]

    def server(self, name: str) -> McpServer:
        self.reload()
        server = self.servers.get(name)
        if server is None:
            known = ", ".join(self.servers) or "none"
            raise KeyError(f"no MCP server named {name!r} (configured: {known})")
        return server

    def add(self, name: str, target: list[str], *, save: bool = False) -> tuple[ServerConfig, Path | None]:
        """A server from ``%agent mcp add``: ``target`` is ``[URL]`` or ``[command, *args]``.
        Session-only, unless ``save``: then it is written to the project's
        ``.pi_notebook/mcp.json`` (created in the notebook's folder if there is none)."""
        is_url = len(target) == 1 and target[0].startswith(("http://", "https://"))
        entry: dict[str, Any] = {"url": target[0]} if is_url else {"command": target[0], "args": target[1:]}
        config = next(iter(parse_servers({"mcpServers": {name: entry}}, "%agent mcp add").values()))
        if config.error:
            raise ValueError(config.error.split(": ", 1)[-1])
        saved = self._save(config.name, entry) if save else None
        self.turned_off.discard(config.name)
        if not save:
            self.session_added[config.name] = config
        self.reload()
        return config, saved

    def _save(self, name: str, entry: dict[str, Any]) -> Path:
        import json

        start = self.sources.start_dir()
        path = project_config_path(start) or Path(start) / CONFIG_NAME
        data: dict[str, Any] = {}
        if path.is_file():
            from ..tools.context.project_files import project_root, read_project_file

            read = read_project_file(path, 1_000_000, project_root(start), redacted=False)
            if read.cut:
                raise ValueError(f"{path} is over 1,000,000 bytes")
            data = json.loads(read.text)
            if not isinstance(data, dict):
                raise ValueError(f"{path} does not hold a JSON object")
        data.setdefault("mcpServers", {})[name] = entry
        path.parent.mkdir(parents=True, exist_ok=True)
        staged = path.with_suffix(".tmp")
        staged.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        staged.replace(path)
        return path

    async def restart(self, name: str) -> McpServer:
        server = self.server(name)
        self.turned_off.discard(name)
        await server.stop()
        server.state, server.reason = "idle", ""
        self._report.seen = {k for k in self._report.seen if k[0] != name}
        await server.start()
        return server

    async def off(self, name: str) -> None:
        server = self.server(name)
        self.turned_off.add(name)
        await server.turn_off()

    async def close(self) -> None:
        await asyncio.gather(*(s.stop() for s in self.servers.values()), return_exceptions=True)
        for task in list(self._stopping):
            with contextlib.suppress(Exception):
                await task

    # --- the namespace call -------------------------------------------------------------
    async def call(self, server_name: str, tool: str, args: dict[str, Any]) -> Any:
        """``pi_notebook.mcp.call``: the structured content as Python objects (module
        ``namespace.py``)."""
        self.reload()
        server = self.servers.get(server_name)
        if server is None:
            raise McpToolError(f"no MCP server named {server_name!r} (configured: "
                               f"{', '.join(self.servers) or 'none'})")
        if server.config.tools is not None and tool not in server.config.tools:
            raise McpToolError(f"{tool!r} is not in the 'tools' allow-list of {server_name!r}")
        if self.sources.in_agent_code():
            from .schema import tool_name

            refusal = namespace_refusal(self.sources.policy(), tool in server.config.auto_approve,
                                        tool_name(server_name, tool), server.config.approval)
            if refusal is not None:
                raise McpToolError(refusal)
        timeout = server.config.timeout or self.sources.timeout() or None
        try:
            result = await server.call(tool, args, timeout_s=timeout)
        except (McpUnavailable, McpCallError) as exc:
            raise McpToolError(str(exc)) from None
        from .results import convert_result

        converted = convert_result(result, self.sources.tool_settings(), server=server_name, tool=tool)
        text = "\n\n".join(getattr(c, "text", "") for c in converted.content or [] if getattr(c, "type", "") == "text")
        if converted.is_error:
            raise McpToolError(f"{server_name}/{tool} returned an error: {text}")
        structured = converted.details["mcp"]["structured"]
        if structured is not None:
            return structured
        return _plain(result)


# A tool list is parsed by the SDK on the kernel's loop, at a cost proportional to its size
# (10,000 tools: seconds). A server that announced more than this is listed once per connection
# (a restart lists it again), not at every run and turn; only a fraction is offered anyway
# (tools.py: MAX_TOOLS_PER_SERVER).
MAX_RELISTED_TOOLS = 1_000


def _relisted(server: McpServer) -> bool:
    return len(server.tools) <= MAX_RELISTED_TOOLS


def _plain(result: Any) -> Any:
    """No structured content: the text (JSON text parsed), redacted."""
    import json

    texts = [str(getattr(b, "text", "")) for b in getattr(result, "content", []) or []
             if getattr(b, "type", "") == "text"]
    text = "\n".join(texts)
    if text.lstrip().startswith(("{", "[")):
        with contextlib.suppress(ValueError):
            return redact_data(json.loads(text))
    return redact_data(text)
