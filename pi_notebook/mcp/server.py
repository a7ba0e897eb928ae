"""One MCP server's connection: start, list tools, call, crash, restart, stop.

Why one lifecycle task per server: anyio cancel scopes are task-affine, so the task that
enters ``async with Client(...)`` must be the one that leaves it ("Attempted to exit cancel
scope in a different task"; python-sdk #79, #922). :meth:`McpServer.start` creates that task
on the kernel loop; it enters the client, lists the tools, reports ready and then waits for
its stop event. Every other task (the agent's tool calls, ``pi_notebook.mcp.call``) only
sends requests through the live session.

* stderr of a stdio server goes to a log file in the cache folder
  (``<cache>/mcp/logs/NAME.log``), never to ``sys.stderr``: ipykernel's stream has no usable
  ``fileno`` (python-sdk #156). The server writes into a pipe, and a thread writes each line,
  redacted (``redact_all``), to the file: a secret the server prints never reaches the disk.
  The folders are 0700 and the file 0600 (ai/private_files.py). Its last lines are in the
  reason a user sees when the server fails.
* The connection is opened with the initialize handshake (``mode="legacy"``), not the
  2026-07-28 discovery the SDK picks by default: a modern connection has no way back from
  the server, so a tool that awaits ``ctx.elicit(...)`` mid-call fails ("no back-channel")
  and only ``Resolve(Elicit(...))`` tools could ask. On a handshake connection both styles
  reach the elicitation callback, and ``tools/list_changed`` arrives as a notification.
* A stdio server is started through ``_die_with_kernel.py``, a guard that leads the server's
  process group: the server and everything it starts die with the kernel even when the
  kernel is SIGKILLed, and what a server leaves running dies when it exits.
* Every message from a server is at most 8 MB, over stdio and HTTP (``transport.py``): a
  longer answer is dropped as it streams and its call fails with that reason, the connection
  kept.
* A call has its own deadline, counted in loop-awake time: a user cell that blocks the loop
  for a minute does not make a call time out when the loop wakes up (``_Clock``).
* A server whose connection drops during a call is reported in that call's result, marked
  ``crashed``, and started again by the next call.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..ai.private_files import open_private, private_dir
from ..tools.trust.credentials import redact_all
from ..tools.trust.redact import redact
from .config import ServerConfig

if TYPE_CHECKING:
    from .elicit import FormAnswer, FormRequest

__all__ = ["McpServer", "McpUnavailable", "McpCallError", "ServerState", "ToolInfo", "log_dir",
           "MISSING_SDK"]

ServerState = Literal["idle", "starting", "connected", "failed", "off"]

MISSING_SDK = ("MCP servers need the MCP Python SDK: pip install 'pi-notebook[mcp]' "
               "(or pip install 'mcp>=2.3,<3'), then restart the kernel.")
WRAPPER = Path(__file__).with_name("_die_with_kernel.py")
START_TIMEOUT_S = 30.0
# the handshake gives the server a back-channel for ctx.elicit() (module docstring)
CONNECT_MODE: Literal["legacy"] = "legacy"
_TAIL_LINES = 5
_CONNECTION_ERRORS: tuple[type[BaseException], ...] = (ConnectionError, EOFError, BrokenPipeError)


class McpUnavailable(Exception):
    """The server cannot take calls (failed to start, off, SDK missing): one-line reason."""


class McpCallError(Exception):
    """A call did not get an answer: timed out, the server crashed, a protocol error."""


@dataclass(frozen=True)
class ToolInfo:
    """What the agent needs of one MCP tool (the SDK's ``Tool``, without its types)."""

    name: str
    description: str
    input_schema: Any
    title: str | None = None
    read_only: bool | None = None
    destructive: bool | None = None


def log_dir() -> Path:
    from ..local.setup import cache_dir

    return cache_dir() / "mcp" / "logs"


_LOG_LINE_BYTES = 64 * 1024  # a longer "line" is written in pieces, each redacted


class _RedactedLog:
    """A server's stderr log: ``stream`` is the write end of a pipe (what the server's stderr
    becomes); a daemon thread redacts each line and appends it to the private log file. The
    thread ends when every writer is gone: :meth:`close` and the server's exit."""

    def __init__(self, path: Path) -> None:
        private_dir(path.parent.parent)
        private_dir(path.parent)
        self._file = os.fdopen(open_private(path), "a", encoding="utf-8", errors="replace")
        read_fd, write_fd = os.pipe()
        self.stream = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")
        self._thread = threading.Thread(target=self._pump, args=(read_fd,), name=f"mcp-log-{path.stem}",
                                        daemon=True)
        self._thread.start()

    def write(self, text: str) -> None:
        """A line of the product's own (the start header), redacted like the server's."""
        with contextlib.suppress(OSError, ValueError):
            self._file.write(redact_all(text))
            self._file.flush()

    def _pump(self, read_fd: int) -> None:
        with os.fdopen(read_fd, "rb") as source:
            while line := source.readline(_LOG_LINE_BYTES):
                self.write(line.decode("utf-8", "replace"))
        with contextlib.suppress(OSError):
            self._file.close()

    def close(self) -> None:
        """Our copy of the write end: the log ends when the server's copy closes too."""
        with contextlib.suppress(OSError):
            self.stream.close()

    def settle(self, timeout_s: float = 0.3) -> None:
        """Let the thread write what an exited server left in the pipe (before its tail is
        read for a failure); a server still running holds the pipe open: waited on briefly."""
        self.close()
        self._thread.join(timeout_s)


def _tool_info(tool: Any) -> ToolInfo:
    annotations = getattr(tool, "annotations", None)
    return ToolInfo(name=str(tool.name), description=str(getattr(tool, "description", "") or ""),
                    input_schema=getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None),
                    title=getattr(tool, "title", None),
                    read_only=getattr(annotations, "read_only_hint", None),
                    destructive=getattr(annotations, "destructive_hint", None))


class McpServer:
    """One configured server (module docstring). Lives on the kernel loop."""

    def __init__(self, config: ServerConfig, *, on_log: Callable[[str], None] | None = None,
                 on_elicit: Callable[[FormRequest], Awaitable[FormAnswer]] | None = None,
                 on_notice: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.state: ServerState = "off" if config.disabled else "idle"
        self.reason: str = "disabled in the config" if config.disabled else ""
        self.tools: list[ToolInfo] = []
        self.crashed = False  # the connection dropped: the next call starts it again
        # tool-list changes during a run (docs/design/mcp.md "Tool lists"): the server's
        # capability, when its list was fetched, and a legacy tools/list_changed seen
        self.tools_may_change = True
        self.listed_at = 0.0
        self.tools_stale = False
        self.started_at: float | None = None
        self._client: Any = None
        self._log: _RedactedLog | None = None  # this start's stderr log
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._stop: asyncio.Event | None = None
        self._on_log = on_log
        # elicitation (elicit.py): who answers a form, and how many forms are open now (the
        # timeout of a call does not run while the user fills one in)
        self._on_elicit = on_elicit
        self._on_notice = on_notice
        self.forms_open = 0
        if config.error:
            self.state, self.reason = "failed", config.error

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def log_path(self) -> Path:
        return log_dir() / f"{self.name}.log"

    # --- start / stop -----------------------------------------------------------------------
    async def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Connect (once; concurrent callers share the attempt). Never raises: the outcome
        is in ``state`` / ``reason``."""
        if self.crashed:
            await self.stop()  # leave the dead client in its own task, then start afresh
        if self.state in ("connected", "off", "failed"):
            return
        if self._ready is None or (self._ready.done() and self.state != "starting"):
            self._begin()
        assert self._ready is not None
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), timeout_s)
        except asyncio.TimeoutError:
            self._fail(f"did not answer within {timeout_s:g} s")
            await self.stop(keep_reason=True)
        except Exception:
            pass  # recorded by the lifecycle task

    def _begin(self) -> None:
        loop = asyncio.get_running_loop()
        self.state, self.reason, self.crashed, self.tools = "starting", "", False, []
        self._ready = loop.create_future()
        self._stop = asyncio.Event()
        self.started_at = time.monotonic()
        self._task = loop.create_task(self._lifecycle(self._ready, self._stop),
                                      name=f"pi_notebook-mcp-{self.name}")

    async def stop(self, *, keep_reason: bool = False) -> None:
        """Leave the client in its own task (the stdio transport closes stdin, then ends the
        process group), bounded; the state becomes ``idle`` unless a reason is kept."""
        task, stop = self._task, self._stop
        self._task = None
        if stop is not None:
            stop.set()
        if task is not None and not task.done():
            done, _ = await asyncio.wait({task}, timeout=8)
            if not done:
                task.cancel()
                await asyncio.wait({task}, timeout=2)
        self._client = None
        if not keep_reason and self.state != "off":
            self.state, self.reason = "idle", ""
        self.crashed = False

    async def turn_off(self) -> None:
        await self.stop()
        self.state, self.reason = "off", "turned off (%agent mcp off)"

    async def _lifecycle(self, ready: asyncio.Future[None], stop: asyncio.Event) -> None:
        log = None
        try:
            try:
                from mcp import Client
            except ImportError:
                raise McpUnavailable(MISSING_SDK) from None
            log = self._log = _RedactedLog(self.log_path)
            log.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {self.config.describe()}\n")
            transport = self._transport(log.stream)
            async with Client(transport, cache=None, mode=CONNECT_MODE, message_handler=self._on_message,
                              elicitation_callback=self._elicitation()) as client:
                self._client = client
                self.tools = await self._list_tools(client)
                self.listed_at, self.tools_stale = time.monotonic(), False
                self.tools_may_change = _may_change(client)
                self.state = "connected"
                if not ready.done():
                    ready.set_result(None)
                await stop.wait()
        except BaseException as exc:  # includes anyio's exception groups and cancellation
            if self.state in ("starting", "connected"):
                self._fail(self._why(exc))
            if not ready.done():
                ready.set_exception(McpUnavailable(self.reason))
                ready.exception()  # retrieved: nobody may be waiting any more
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self._client = None
            if self.state == "connected":
                self.state = "idle"
            if log is not None:
                log.close()

    def _transport(self, log: Any) -> Any:
        """The connection's transport, every message bounded (transport.py, http_cap.py)."""
        from mcp.client.streamable_http import streamable_http_client

        from . import transport
        from .http_cap import capped_http_client

        config, cap = self.config, transport.MAX_MESSAGE_BYTES
        if config.transport == "http":
            return streamable_http_client(config.url, http_client=capped_http_client(config.headers, cap),
                                          max_sse_event_size=cap)
        return transport.stdio_transport(
            sys.executable, ["-S", "-I", str(WRAPPER), str(os.getpid()), config.command, *config.args],
            env=config.env, cwd=config.cwd, errlog=log, max_message_bytes=cap)

    async def refresh_tools(self, timeout_s: float = START_TIMEOUT_S) -> bool:
        """List the tools again; True when the list changed. Every run does it for a server
        already connected, and the turns of a run for a server whose tools may have changed
        (manager.py): on the 2026-07-28 protocol ``tools/list_changed`` is not a plain
        notification the client sees, so waiting for it would miss changes. A failure or a
        slow answer keeps the old list."""
        client = self._client
        if client is None:
            return False
        try:
            tools = await asyncio.wait_for(self._list_tools(client), timeout_s)
        except Exception:
            return False
        self.listed_at, self.tools_stale = time.monotonic(), False
        changed = tools != self.tools
        self.tools = tools
        return changed

    def _elicitation(self) -> Any:
        """The SDK callback, when someone answers forms (without one the SDK does not offer
        elicitation to the server)."""
        if self._on_elicit is None:
            return None
        from .elicit import elicitation_callback

        def waiting(on: bool) -> None:
            self.forms_open = max(0, self.forms_open + (1 if on else -1))

        notice = self._on_notice or (lambda _text: None)
        return elicitation_callback(self.name, self._on_elicit, notice, waiting)

    async def _on_message(self, message: Any) -> None:
        """A legacy (2025-11-25) connection delivers ``notifications/tools/list_changed``
        here: the next turn boundary lists the tools again."""
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self.tools_stale = True

    @staticmethod
    async def _list_tools(client: Any) -> list[ToolInfo]:
        tools: list[ToolInfo] = []
        cursor = None
        for _ in range(100):  # a paginator that never ends cannot hang the start
            listed = await client.list_tools(cursor=cursor) if cursor else await client.list_tools()
            tools.extend(_tool_info(t) for t in listed.tools)
            cursor = getattr(listed, "next_cursor", None)
            if not cursor:
                break
        return tools

    # --- failures ---------------------------------------------------------------------------
    def _fail(self, why: str) -> None:
        tail = self.log_tail()
        self.state = "failed"
        self.reason = why + (f" (stderr: {tail})" if tail else "")

    def _why(self, exc: BaseException) -> str:
        leaf = _leaf(exc)
        if isinstance(leaf, McpUnavailable):
            return str(leaf)
        if isinstance(leaf, asyncio.CancelledError):
            return "start was cancelled"
        text = redact(str(leaf).strip().splitlines()[0] if str(leaf).strip() else "")
        what = type(leaf).__name__
        if self.config.transport == "stdio" and self.state == "starting":
            return f"the server exited or did not speak MCP ({what}{': ' + text if text else ''})"
        return f"{what}: {text}" if text else what

    def log_tail(self, lines: int = _TAIL_LINES) -> str:
        """The last lines of the server's stderr log (this start only), redacted, one line."""
        if self._log is not None:
            self._log.settle()
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        text = text.rsplit("\n--- ", 1)[-1]
        body = [ln.strip() for ln in text.splitlines()[1:] if ln.strip()]
        return redact(" | ".join(body[-lines:]))[-600:]

    # --- calls ------------------------------------------------------------------------------
    async def ensure(self) -> Any:
        """The live client, starting (or restarting after a crash) as needed."""
        if self.state == "off":
            raise McpUnavailable(f"MCP server {self.name!r} is off (%agent mcp restart {self.name})")
        if self.state != "connected" or self.crashed:
            await self.start()
        if self.state != "connected" or self._client is None:
            raise McpUnavailable(f"MCP server {self.name!r} is not available: {self.reason}")
        return self._client

    async def call(self, tool: str, args: dict[str, Any], *, timeout_s: float | None,
                   aborted: asyncio.Future[None] | None = None,
                   on_progress: Callable[[str], None] | None = None) -> Any:
        """``tools/call``; returns the SDK's ``CallToolResult``. Raises McpUnavailable,
        McpCallError, or ``asyncio.CancelledError`` when ``aborted`` resolves first (the
        request is cancelled, so the server gets ``notifications/cancelled``). A progress
        notification from the server starts the timeout afresh (a long call that says it is
        working is not cut) and is handed to ``on_progress`` as one line."""
        client = await self.ensure()
        clock = _Clock(timeout_s or 0.0, paused=lambda: self.forms_open > 0)

        async def progress(value: float, total: float | None, message: str | None) -> None:
            clock.restart()
            if on_progress is not None:
                amount = f"{value:g}/{total:g}" if total else f"{value:g}"
                with contextlib.suppress(Exception):
                    on_progress(redact_all(f"{amount} {message or ''}".strip()))

        call = asyncio.ensure_future(client.call_tool(tool, args, progress_callback=progress))
        waiters: set[asyncio.Future[Any]] = {call}
        if aborted is not None:
            waiters.add(aborted)
        deadline = asyncio.ensure_future(clock.run()) if timeout_s else None
        if deadline is not None:
            waiters.add(deadline)
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if deadline is not None:
                deadline.cancel()
            if not call.done():
                call.cancel()
                await asyncio.wait({call}, timeout=2)
        if call.cancelled() or not call.done():
            if aborted is not None and aborted.done():
                raise asyncio.CancelledError()
            raise McpCallError(f"no answer within {timeout_s:g} s (AgentMagics.mcp_timeout or the "
                               f"server's 'timeout'); the call was cancelled")
        exc = call.exception()
        if exc is None:
            return call.result()
        too_large = _too_large(exc)
        if too_large is not None:  # the connection is fine: the one answer was dropped
            raise McpCallError(too_large) from None
        if self._connection_lost(exc):
            self.crashed = True
            tail = self.log_tail()
            raise McpCallError(f"MCP server {self.name!r} stopped during the call; it is started again "
                               f"on the next call" + (f" (stderr: {tail})" if tail else "")) from None
        leaf = _leaf(exc)
        raise McpCallError(f"{type(leaf).__name__}: {redact(str(leaf))}") from None

    def _connection_lost(self, exc: BaseException) -> bool:
        leaf = _leaf(exc)
        if isinstance(leaf, _CONNECTION_ERRORS):
            return True
        error = getattr(leaf, "error", None)
        code = getattr(error, "code", None)
        if code == -32000 or "connection closed" in str(leaf).lower():
            return True
        return type(leaf).__name__ in ("ClosedResourceError", "BrokenResourceError", "EndOfStream")

    def status_line(self) -> str:
        tools = f", {len(self.tools)} tools" if self.state == "connected" else ""
        reason = f": {self.reason}" if self.reason and self.state in ("failed", "off") else ""
        crashed = " (stopped; restarts on the next call)" if self.crashed else ""
        return f"{self.name}: {self.state}{crashed}{tools} — {self.config.describe()}{reason}"


def _may_change(client: Any) -> bool:
    """Does the server say its tool list may change (``tools.listChanged``)? Unknown: yes."""
    try:
        tools = client.server_capabilities.tools
    except Exception:
        return True
    return tools is not None and getattr(tools, "list_changed", True) is not False


class _Clock:
    """A call's timeout in loop-awake time: ``run()`` returns after ``timeout_s`` seconds in
    which the loop ran; a step that took much longer than asked (a user cell blocked the
    loop) counts only as long as a step may take. ``restart()`` (a progress notification)
    starts the count again."""

    def __init__(self, timeout_s: float, step: float = 0.5, paused: Callable[[], bool] = lambda: False) -> None:
        self.timeout_s, self.step, self.remaining = timeout_s, step, timeout_s
        self.paused = paused  # a form is open: the user is the one taking time

    def restart(self) -> None:
        self.remaining = self.timeout_s

    async def run(self) -> None:
        while self.remaining > 0:
            before = time.monotonic()
            await asyncio.sleep(min(self.step, self.remaining))
            if self.paused():
                self.remaining = self.timeout_s  # the count starts again when the form closes
                continue
            self.remaining -= min(time.monotonic() - before, self.step * 1.5)


def _too_large(exc: BaseException) -> str | None:
    """The reason, when the call's answer was over the size cap (transport.py)."""
    from .transport import is_too_large

    leaf = _leaf(exc)
    error = getattr(leaf, "error", None)
    return is_too_large(str(getattr(error, "message", None) or leaf))


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while getattr(exc, "exceptions", None):  # BaseExceptionGroup (exceptiongroup on 3.10)
        exc = exc.exceptions[0]  # type: ignore[attr-defined]  # duck-typed: checked just above
    return exc
