"""One served kernel: the SDK's streamable HTTP server on its own thread, inside the kernel.

:class:`KernelServer` binds 127.0.0.1 on a free port (any other address is refused before a
socket is made), runs uvicorn with the SDK's low-level ``Server`` app behind the
:class:`~.guard.RequestGuard` on a daemon thread with its own event loop, and answers:

- ``initialize`` / ``ping`` / ``tools/list`` on that loop: never behind a running cell;
- ``tools/call``: a tool that reads the namespace is handed to the kernel loop in its turn
  (turns.py); ``execute`` first passes the gate (gate.py). While the call waits or runs, a
  progress notification goes out every :data:`PROGRESS_S` so the client's timeout does not
  fire on a long turn or an open approval question.

The server lives in the kernel process: it ends with it (a restart, a shutdown, a SIGKILL)
and nothing outside keeps the port. ``stop()`` ends it earlier, cancels calls still waiting,
and removes the token files.

What it calls back into the kernel (the tools, the gate, the busy question, the audit line
and the live view of a call) is handed in as :class:`ServeHooks`, so this module knows
nothing of the magics' runtime.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import contextvars
import itertools
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcp import types
from mcp.server.lowlevel.server import Server

from ..agent.types import AgentTool, AgentToolResult
from ..ai.abort import AbortController
from ..tools.trust.redact import redact
from .entries import SERVER_NAME, client_entries
from .gate import GateAnswer, ServeGate
from .guard import RequestGuard
from .secret import ServeFiles, new_token
from .tools import SERVED_TOOLS, ServedTool, call_result, error_result, mcp_tool
from .turns import Turns

__all__ = ["LOOPBACK", "CallRecord", "CallView", "KernelServer", "ServeHooks", "check_bind"]

LOOPBACK = "127.0.0.1"
PROGRESS_S = 2.0  # a keep-alive for the client while a call waits for its turn or an answer
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0


def check_bind(host: str) -> str:
    """The address to bind: only the loopback interface (``localhost`` means 127.0.0.1)."""
    if host in (LOOPBACK, "localhost"):
        return LOOPBACK
    raise ValueError(f"refusing to serve the kernel on {host!r}: only {LOOPBACK} (this machine) "
                     "is allowed; anyone who can reach the port could run code as you")


@dataclass
class CallRecord:
    """One outside call, for the audit line and the status."""

    call_id: str
    tool: str
    client: str
    arguments: dict[str, Any]
    started: float = field(default_factory=time.time)
    approval: dict[str, Any] | None = None
    is_error: bool = False
    elapsed_s: float = 0.0
    outcome: str = ""  # "ran", "refused", "failed", "cancelled"


class CallView:
    """How an ``execute`` call shows in the notebook (the magics supply a real one)."""

    def started(self, code: str) -> None: ...

    def update(self, result: AgentToolResult) -> None: ...

    def finished(self, record: CallRecord) -> None: ...


@dataclass
class ServeHooks:
    tools: dict[str, AgentTool]  # the agent's notebook tools by name
    kernel_loop: asyncio.AbstractEventLoop
    busy: Callable[[], str | None]  # why a call must wait for its turn, or None
    gate: ServeGate
    context: contextvars.Context | None = None  # the calls' tasks start in a copy (turns.py)
    kernel: Any = None  # ipykernel's kernel: its Stop button cancels a call (tools/kernel/interrupt.py)
    audit: Callable[[CallRecord], None] = lambda record: None
    view: Callable[[CallRecord], CallView] = lambda record: CallView()
    on_log: Callable[[str], None] = lambda text: None


class KernelServer:
    def __init__(self, hooks: ServeHooks, *, host: str = LOOPBACK, files: ServeFiles | None = None) -> None:
        self.host = check_bind(host)
        self.hooks = hooks
        self.files = files or ServeFiles()
        self.turns = Turns(hooks.kernel_loop, hooks.busy, hooks.context)
        self.port = 0
        self.calls = 0  # tools/call requests answered or running
        self.refused = 0  # HTTP requests the guard turned away
        self._token = ""
        self._ids = itertools.count(1)
        self._served = {s.name: s for s in SERVED_TOOLS if s.serves in hooks.tools}
        self._aborts: dict[str, AbortController] = {}  # the calls in flight
        self._lowlevel: Server[Any] | None = None
        self._uvicorn: Any = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/mcp"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, 0))
        sock.listen(64)
        sock.set_inheritable(False)  # a subprocess of a cell must not keep the port open
        self.port = sock.getsockname()[1]
        self._token = new_token()
        self.files.write(self._token, client_entries(self.url, self._token))
        atexit.register(self.files.remove)  # a kernel that shuts down cleanly leaves no token file
        self._lowlevel = Server(SERVER_NAME, version="1", on_list_tools=self._list_tools,
                                on_call_tool=self._call_tool,
                                instructions=("The user's live Jupyter kernel. execute runs Python in "
                                              "its namespace under the user's approval policy."))
        app = self._lowlevel.streamable_http_app(host=self.host)
        guarded = RequestGuard(app, self.port, lambda: self._token, on_refused=self._refused)
        config = uvicorn.Config(guarded, log_config=None, log_level="warning", access_log=False,
                                lifespan="on", timeout_graceful_shutdown=1)
        self._uvicorn = uvicorn.Server(config)
        ended = threading.Event()  # set when the thread ends (a failed start ends the wait early)
        self._thread = threading.Thread(target=self._serve, args=(sock, ended),
                                        name="pi_notebook-serve", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._uvicorn.started and not ended.is_set() and time.monotonic() < deadline:
            ended.wait(0.02)
        if not self._uvicorn.started:
            self.stop()
            raise RuntimeError("the MCP server did not start (see the kernel's log)")

    def _serve(self, sock: socket.socket, ended: threading.Event) -> None:
        loop = asyncio.new_event_loop()  # the server's own loop: never behind a running cell
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._uvicorn.serve(sockets=[sock]))
        except BaseException as exc:  # logged by type only: a message could quote a request
            self.hooks.on_log(f"pi_notebook serve: the server stopped ({type(exc).__name__})")
        finally:
            ended.set()
            sock.close()
            loop.close()

    def stop(self) -> None:
        for controller in list(self._aborts.values()):
            controller.abort("the server stopped")
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(STOP_TIMEOUT_S)
        self.files.remove()
        atexit.unregister(self.files.remove)

    def rotate(self) -> None:
        """A new token; the old one stops working with the next request."""
        self._token = new_token()
        self.files.write(self._token, client_entries(self.url, self._token))

    def abort_for(self, call_id: str) -> AbortController | None:
        """The controller of a call in flight (the notebook's Abort of its view)."""
        return self._aborts.get(call_id)

    def clients(self) -> int:
        """Connected sessions. The SDK offers no public count: its session manager's table is
        read defensively (0 if its shape changes)."""
        manager = getattr(self._lowlevel, "_session_manager", None)
        return len(getattr(manager, "_server_instances", {}) or {})

    def _refused(self, why: str) -> None:
        self.refused += 1

    # --- the MCP handlers (on the server's loop) ------------------------------------------
    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[mcp_tool(s, self.hooks.tools[s.serves])
                                            for s in self._served.values()])

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        served = self._served.get(params.name)
        if served is None:
            return error_result(f"Unknown tool {params.name!r}; the tools are: {', '.join(self._served)}.")
        self.calls += 1
        arguments = dict(params.arguments or {})
        record = CallRecord(f"serve-{next(self._ids)}", served.name, _client_name(ctx), arguments)
        controller = AbortController()
        self._aborts[record.call_id] = controller
        try:
            if not served.on_kernel:
                return await self._run(served, record, controller)
            future = self.turns.submit(lambda: self._stoppable(served, record, controller))
            return await self._with_progress(ctx, future, controller)
        finally:
            self._aborts.pop(record.call_id, None)

    async def _with_progress(self, ctx: Any, future: concurrent.futures.Future[types.CallToolResult],
                             controller: AbortController) -> types.CallToolResult:
        waiting = asyncio.wrap_future(future)
        beats = 0
        try:
            while True:
                done, _ = await asyncio.wait({waiting}, timeout=PROGRESS_S)
                if done:
                    if waiting.cancelled():  # cancelled on the kernel side (stop, unload)
                        return error_result("The call was cancelled in the kernel.")
                    return waiting.result()
                beats += 1
                # busy() too: while a cell blocks the kernel loop, the call has not even
                # reached its turn's own check (busy() reads plain flags, safe from here)
                note = self.turns.waiting or _safe(self.hooks.busy) or "running in the kernel"
                with contextlib.suppress(Exception):  # a keep-alive is best effort
                    await ctx.session.report_progress(beats, None, note)
        except asyncio.CancelledError:
            controller.abort("the client went away")
            waiting.cancel()
            raise

    async def _stoppable(self, served: ServedTool, record: CallRecord,
                         controller: AbortController) -> types.CallToolResult:
        """On the kernel loop: the kernel's Stop button cancels this call, also while it asks
        for approval (the same SIGINT handler that lets Stop abort an agent run between its
        calls; while the code runs, Stop interrupts the code itself)."""
        from ..tools.kernel.interrupt import stop_aborts_run

        loop = asyncio.get_running_loop()

        def stop() -> None:  # from the signal handler: only schedule
            loop.call_soon_threadsafe(controller.abort, "stopped in the notebook")

        with stop_aborts_run(stop, self.hooks.kernel):
            return await self._run(served, record, controller)

    async def _run(self, served: ServedTool, record: CallRecord, controller: AbortController) -> types.CallToolResult:
        """The call itself (on the kernel loop for kernel tools)."""
        started = time.monotonic()
        tool = self.hooks.tools[served.serves]
        view: CallView | None = None
        try:
            if served.gated:
                code = record.arguments.get("code")
                if not isinstance(code, str):
                    return self._done(record, started, "refused",
                                      error_result("execute needs a 'code' string argument."))
                view = self.hooks.view(record)
                view.started(code)
                answer: GateAnswer = await self.hooks.gate.check(record.call_id, code, controller.signal)
                record.approval = answer.record.as_details() if answer.record is not None else None
                if answer.refusal is not None:
                    return self._done(record, started, "refused", error_result(answer.refusal), view)
            if controller.signal.aborted:
                return self._done(record, started, "cancelled",
                                  error_result("The call was cancelled before it ran."), view)

            def on_update(update: AgentToolResult) -> None:
                if view is not None:
                    view.update(update)

            result = await tool.execute(record.call_id, record.arguments, controller.signal, on_update)
            if view is not None:
                view.update(result)
            outcome = "cancelled" if controller.signal.aborted else "ran"
            return self._done(record, started, outcome, call_result(result), view)
        except asyncio.CancelledError:
            self._done(record, started, "cancelled", error_result("cancelled"), view)
            raise
        except Exception as exc:  # a tool's own error: said to the client, redacted
            return self._done(record, started, "failed",
                              error_result(f"{served.name} failed: {type(exc).__name__}: {exc}"), view)

    def _done(self, record: CallRecord, started: float, outcome: str, result: types.CallToolResult,
              view: CallView | None = None) -> types.CallToolResult:
        record.elapsed_s = time.monotonic() - started
        record.outcome = outcome
        record.is_error = bool(result.is_error)
        if view is not None:
            with contextlib.suppress(Exception):
                view.finished(record)
        with contextlib.suppress(Exception):
            self.hooks.audit(record)
        return result


def _safe(question: Callable[[], str | None]) -> str | None:
    try:
        return question()
    except Exception:
        return None


def _client_name(ctx: Any) -> str:
    params = getattr(getattr(ctx, "session", None), "client_params", None)
    info = getattr(params, "client_info", None)
    name = getattr(info, "name", None)
    return redact(str(name))[:80] if name else "an MCP client"
