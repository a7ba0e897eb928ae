"""``%agent`` / ``%agent status``: the same complete picture before the first run and later.

Model (and which rule picked it), run state and queue, approval policy, wait mode and
the session file (or where it will go).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from IPython.core.error import UsageError

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["status_lines"]


def status_lines(runtime: Runtime) -> list[str]:
    lines = [_model_line(runtime)]
    serving = runtime.serving or runtime.run
    if runtime.is_running() and serving is not None:
        where = f" (cell [{serving.cell}])" if serving.cell is not None else ""
        lines.append(f"run: active for {time.monotonic() - serving.started:.1f} s{where}")
    else:
        lines.append("run: idle")
    agent = runtime.agent
    queued_runs = sum(1 for item in runtime.queue.items() if item.kind == "prompt")
    steering = sum(1 for item in runtime.queue.items() if item.kind == "steer")
    follow_ups = sum(1 for item in runtime.queue.items() if item.kind == "followup")
    messages = len(agent.state.messages) if agent is not None else 0
    lines.append(f"messages: {messages}; queued: {queued_runs} cells, {steering} steering, "
                 f"{follow_ups} follow-up")
    settings = runtime.settings_now()
    thinking = agent.state.thinking_level if agent is not None else settings.thinking
    lines.append(f"thinking: {thinking}; approval: {runtime.current_policy()} "
                 f"(%%agent --approve overrides it for one cell)")
    lines.append(f"wait: {settings.wait} ({_wait_meaning(runtime)})")
    if not settings.autosave:
        lines.append("session file: none (AgentMagics.autosave is off)")
    elif runtime.session_path is not None:
        lines.append(f"session file: {runtime.session_path}")
    else:
        lines.append(f"session file: not yet written; goes to {runtime.session_dir()} "
                     f"as {runtime.session_name()}-…")
    lines.extend(_mcp_and_instructions(runtime))
    return lines


def _mcp_and_instructions(runtime: Runtime) -> list[str]:
    """MCP servers (when any is configured) and the project instructions of the
    conversation (or those the next one would get)."""
    lines: list[str] = []
    mcp = runtime.mcp().status_lines()
    if not mcp[0].startswith("MCP servers: none"):
        lines.extend(mcp)
    instructions = runtime.instructions
    if instructions is None:
        from .instructions import load_instructions
        from .mcp_run import notebook_dir

        try:
            instructions = load_instructions(notebook_dir(runtime.shell, runtime.settings.notebook_path.strip()),
                                             runtime.settings.instructions)
        except Exception:
            return lines
    lines.extend(instructions.status_lines())
    return lines


def _model_line(runtime: Runtime) -> str:
    resolved = runtime.current_model()
    configured = runtime.settings.model.strip() or None
    prefix = "model"
    if resolved is None:
        from .resolve import resolve_model

        prefix = "model (next run)"
        try:  # bounded: 0.15 s port probe, then at most 0.5 s for a server's model list
            resolved = resolve_model(None, configured, runtime.settings.base_url.strip() or None,
                                     server_timeout=0.5)
        except UsageError as exc:
            return f"model: none. {exc}"
    why = f" — {resolved.reason}" if resolved.reason else ""
    return f"{prefix}: {resolved.label}{why}"


def _wait_meaning(runtime: Runtime) -> str:
    from .wait import wait_mode

    if wait_mode(None, runtime.settings.wait, runtime.shell) is not None:
        return "a %%agent cell blocks until its run ends here"
    return "a %%agent cell returns at once here; the run continues in its view"
