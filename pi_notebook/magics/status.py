"""``%agent`` / ``%agent status``: the same complete picture before the first run and later.

Model (and which rule picked it), run state and queue, approval policy, wait mode, the
session file (or where it will go), MCP servers and project instructions.

The Runtime hands over a :class:`StatusSnapshot` of plain values; this module only words
them (and resolves the next run's model when none is chosen yet), so it does not import
runtime.py, which calls it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from IPython.core.error import UsageError

from ..version import __version__

if TYPE_CHECKING:  # only for the annotation: %load_ext must not import the model layer
    from ..levels import AgentThinkingLevel
    from ..tools.trust.policy import ApprovalPolicy
    from .config import WaitSetting
    from .wait import WaitMode
    from .resolve import ResolvedModel

__all__ = ["StatusSnapshot", "status_lines"]


@dataclass(frozen=True)
class StatusSnapshot:
    """What ``%agent`` status shows, read off the Runtime at one moment."""

    resolved: ResolvedModel | None  # the model of the conversation, None before a choice
    configured_model: str | None  # AgentMagics.model, for resolving the next run's model
    base_url: str | None
    running: bool
    run_cell: int | None  # the serving run's cell number
    run_started: float | None  # time.monotonic() at the serving run's start
    messages: int
    queued_cells: int
    queued_steering: int
    queued_follow_ups: int
    thinking: AgentThinkingLevel
    policy: ApprovalPolicy
    wait: WaitSetting  # AgentMagics.wait
    wait_mode: WaitMode | None  # how a %%agent cell waits here (wait.py); None: it returns at once
    autosave: bool
    session_path: Path | None
    session_dir: Path
    session_name: str
    extra_lines: list[str] = field(default_factory=list)  # MCP servers, project instructions


def status_lines(snapshot: StatusSnapshot) -> list[str]:
    lines = [_model_line(snapshot)]
    if snapshot.running and snapshot.run_started is not None:
        where = f" (cell [{snapshot.run_cell}])" if snapshot.run_cell is not None else ""
        lines.append(f"run: active for {time.monotonic() - snapshot.run_started:.1f} s{where}")
    else:
        lines.append("run: idle")
    lines.append(f"messages: {snapshot.messages}; queued: {snapshot.queued_cells} cells, "
                 f"{snapshot.queued_steering} steering, {snapshot.queued_follow_ups} follow-up")
    lines.append(f"thinking: {snapshot.thinking}; approval: {snapshot.policy} "
                 f"(%%agent --approve overrides it for one cell)")
    # (in auto mode a fresh notebook kernel cannot know yet whether a frontend shows views: a
    # cell waits until its view is on screen, and only where none ever shows does it wait for
    # the run's end; "blocks until its run ends" was wrong for every cell that had returned)
    meaning = {"run": "a %%agent cell blocks until its run ends here",
               "run_or_frontend": "a %%agent cell returns once its view is on screen, or waits for the "
                                  "run's end where nothing shows it"}.get(
        snapshot.wait_mode or "", "a %%agent cell returns at once here; the run continues in its view")
    lines.append(f"wait: {snapshot.wait} ({meaning})")
    if not snapshot.autosave:
        lines.append("session file: none (AgentMagics.autosave is off)")
    elif snapshot.session_path is not None:
        lines.append(f"session file: {snapshot.session_path}")
    else:
        lines.append(f"session file: not yet written; goes to {snapshot.session_dir} "
                     f"as {snapshot.session_name}-…")
    lines.extend(snapshot.extra_lines)
    lines.append(f"version: pi_notebook {__version__}")
    return lines


def _model_line(snapshot: StatusSnapshot) -> str:
    resolved = snapshot.resolved
    prefix = "model"
    if resolved is None:
        from .resolve import resolve_model

        prefix = "model (next run)"
        try:  # bounded: 0.15 s port probe, then at most 0.5 s for a server's model list
            resolved = resolve_model(None, snapshot.configured_model, snapshot.base_url, server_timeout=0.5)
        except UsageError as exc:
            return f"model: none. {exc}"
    why = f" — {resolved.reason}" if resolved.reason else ""
    return f"{prefix}: {resolved.label}{why}"
