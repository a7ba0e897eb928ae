"""``%agent serve``: this kernel as an MCP server for outside agents (serve/, docs/design/serve.md).

::

    %agent serve                start serving (127.0.0.1, a free port); when serving: the status
    %agent serve status         port, clients, calls, calls waiting, refused requests
    %agent serve stop           stop; the token stops working and its files are removed
    %agent serve rotate         a new token (the old one stops working at once)
    %agent serve --host ADDR    only 127.0.0.1 / localhost are accepted

The server never starts by itself and lives in the kernel process, so it ends with the kernel.
The cell prints where the token and the ready entries are, never the token (entries.py).
Every outside call is one line in ``<session dir>/<session name>.serve.jsonl`` (the tool, the
client's name, the redacted arguments, the approval decision, the outcome).
"""

from __future__ import annotations

import contextvars
import json
import os
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

from IPython.core.error import UsageError

if TYPE_CHECKING:
    from ..serve.server import CallRecord, KernelServer
    from ..serve.turns import CellWatch
    from .runtime import Runtime

__all__ = ["SERVE_HELP", "serve_command", "stop_serving"]

SERVE_HELP = __doc__.split("::", 1)[1].split("\n\n", 2)[1] if __doc__ else ""

# one server per kernel runtime, with its cell watch (a weak key: an unloaded runtime goes)
_served: weakref.WeakKeyDictionary[Runtime, tuple[KernelServer, CellWatch]] = weakref.WeakKeyDictionary()
_stops_with_runtime: weakref.WeakSet[Runtime] = weakref.WeakSet()


def serve_command(runtime: Runtime, words: list[str]) -> str:
    host = "127.0.0.1"
    if "--host" in words:
        at = words.index("--host")
        if at + 1 >= len(words):
            raise UsageError("%agent serve --host: needs an address (only 127.0.0.1 is allowed)")
        host = words[at + 1]
        words = words[:at] + words[at + 2:]
    sub = words[0].lower() if words else ""
    current = _served.get(runtime)
    if sub == "help":
        return SERVE_HELP
    if sub == "stop":
        return "Stopped serving this kernel." if stop_serving(runtime) else "Not serving."
    if sub == "rotate":
        if current is None:
            return "Not serving; %agent serve starts."
        current[0].rotate()
        return f"New token in {current[0].files.token}; the old one no longer works."
    if sub not in ("", "status", "start") or len(words) > 1:
        raise UsageError("%agent serve: one of: (nothing), status, stop, rotate (%agent serve help).")
    if current is not None and current[0].running:
        return _status(current[0])
    if sub == "status":
        return "Not serving; %agent serve starts."
    return _start(runtime, host)


def _start(runtime: Runtime, host: str) -> str:
    try:
        import mcp  # noqa: F401  # the SDK (and uvicorn with it) come with the mcp extra
        import uvicorn  # noqa: F401
    except ImportError:
        raise UsageError('%agent serve needs the MCP SDK: pip install "pi-notebook[mcp]"') from None
    from ..serve.entries import setup_text
    from ..serve.gate import ServeGate
    from ..serve.server import KernelServer, ServeHooks, check_bind
    from ..serve.turns import CellWatch
    from ..tools import make_notebook_tools
    from ..tools.context.prompt_context import make_context_tools
    from .frontend import has_widget_frontend, is_headless
    from .serve_view import ServeViews
    from .settings import python_tool_settings

    try:
        check_bind(host)
    except ValueError as exc:
        raise UsageError(f"%agent serve: {exc}") from None
    if not runtime.host.has_kernel:
        raise UsageError("%agent serve needs a Jupyter kernel (terminal IPython has no loop between "
                         "prompts to run outside calls on).")
    shell = runtime.shell
    loop = runtime.attach_loop()
    settings = runtime.settings
    tools = [*make_notebook_tools(shell, lambda: python_tool_settings(settings)),
             *make_context_tools(shell, lambda: settings.notebook_path.strip())]
    watch = CellWatch(shell.events)

    def busy() -> str | None:
        if watch.running:
            return "waiting for its turn: a notebook cell is running"
        if runtime.is_running():
            return "waiting for its turn: a %%agent run is active"
        return None

    # Someone sits at the notebook: a widget frontend was seen, or the %agent serve cell came
    # from a client that can answer input() (Lab, Notebook 7, VS Code; not nbclient/papermill).
    # The first outside call's view is often the kernel's first widget, so waiting for
    # widget evidence alone would refuse it.
    asked_from_a_frontend = not is_headless(shell)

    def interactive() -> bool:
        return asked_from_a_frontend or has_widget_frontend(shell)

    servers: list[KernelServer] = []  # the server, once made (the views find calls' aborts there)
    # the serve cell's parent: on ipykernel 6 (one global parent, the latest request) a call's
    # view would otherwise show under whatever cell ran last
    views = ServeViews(runtime, lambda call_id: servers[0].abort_for(call_id) if servers else None,
                       interactive, parent=runtime.host.parent_header())
    gate = ServeGate(lambda: runtime.settings_now().approval, views.ask, interactive,
                     timeout_s=lambda: runtime.settings_now().approval_timeout or None)
    audit = _Audit(runtime)
    hooks = ServeHooks(tools={t.name: t for t in tools}, kernel_loop=loop, busy=busy, gate=gate,
                       context=contextvars.copy_context(), kernel=runtime.host.kernel,
                       audit=audit.write, view=views.view,
                       on_log=runtime.host.log_warning)
    server = KernelServer(hooks, host=host)
    servers.append(server)
    try:
        server.start()
    except (OSError, RuntimeError) as exc:
        watch.close()
        raise UsageError(f"%agent serve: could not start: {exc}") from None
    _served[runtime] = (server, watch)
    if runtime not in _stops_with_runtime:  # the server stops with the extension (%unload_ext)
        _stops_with_runtime.add(runtime)
        runtime.on_close.append(lambda: stop_serving(runtime))
    return setup_text(server.url, server.files)


def _status(server: KernelServer) -> str:
    waiting = server.turns.queued
    lines = [f"Serving this kernel at {server.url}",
             f"  clients: {server.clients()}, calls: {server.calls}, in the kernel's queue: {waiting}"
             + (f" ({server.turns.waiting})" if server.turns.waiting else ""),
             f"  refused requests (no or wrong token, foreign Host or Origin): {server.refused}",
             f"  token: {server.files.token}",
             "  %agent serve stop   %agent serve rotate"]
    return "\n".join(lines)


def stop_serving(runtime: Runtime) -> bool:
    """Stop this kernel's server, if it serves (also called when the extension unloads)."""
    current = _served.pop(runtime, None)
    if current is None:
        return False
    server, watch = current
    watch.close()
    server.stop()
    return True


class _Audit:
    """One JSON line per outside call, beside the session files (redacted, bounded)."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    def path(self) -> Path:
        return self._runtime.session_dir() / f"{self._runtime.session_name()}.serve.jsonl"

    def write(self, record: CallRecord) -> None:
        from ..tools.trust.redact import redact

        arguments = {k: redact(v if isinstance(v, str) else json.dumps(v, default=str))[:20_000]
                     for k, v in record.arguments.items()}
        line = {"type": "serve_call", "id": record.call_id, "tool": record.tool, "client": record.client,
                "arguments": arguments, "approval": record.approval, "outcome": record.outcome,
                "is_error": record.is_error, "elapsed_s": round(record.elapsed_s, 3),
                "timestamp": int(record.started * 1000)}
        path = self.path()
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")
        os.chmod(path, 0o600)
