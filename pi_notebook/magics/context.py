"""The notebook context of each prompt, ``%agent fix`` and ``%agent code``, for the Runtime.

- :func:`noted_message` builds a prompt's user message and attaches its notebook-context
  block (last error, references, namespace summary, notebook name;
  ``tools/context/prompt_context.py``) as a transient ``PromptNotes`` note: the model sees it, the
  transcript, the view and the session file keep only what the user typed;
- :func:`fix_request` is ``%agent fix``: the short line the user sees and the full request the
  model gets beside it, or None when the last code cell did not raise;
- :func:`run_code_cell` is ``%agent code``: the code the latest run ran to the end, as one cell.

The agent core is imported here on first use only (``%load_ext`` stays light).
See docs/design/notebook-context.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from ..agent.types import AgentMessage
    from ..session.prompt_notes import PromptNotes
    from .settings import RunSettings

__all__ = ["FixRequest", "fix_request", "noted_message", "run_code_cell"]


def fix_block(request: str) -> str:
    """The ``%agent fix`` request as the model gets it: the marker carries the kernel's note
    boundary (tools/context/prompt_context.py), and the request's data (the cell, its traceback) has
    the boundary taken out, so printed output or an exception message that reads like this
    marker cannot pass for it."""
    from ..tools.context.prompt_context import FIX_HEADER, NOTE_BOUNDARY, close_line, quote_data

    return f"{FIX_HEADER} (boundary {NOTE_BOUNDARY})\n{quote_data(request)}\n{close_line()}"


@dataclass(frozen=True)
class FixRequest:
    visible: str  # what the view and the transcript show, e.g. "Fix the error in cell [7]."
    request: str  # the full request (cell, traceback, instructions), for the model only


def noted_message(shell: InteractiveShell, notes: PromptNotes, text: str, settings: RunSettings, *,
                  hidden_request: str | None = None, offered: Sequence[str] | None = None,
                  log: Callable[[str], None] = lambda _: None) -> AgentMessage:
    """The user message for ``text``, with its context note attached in ``notes``;
    ``offered``: the agent's tool names (the block names only tools the model has)."""
    from ..ai.types import TextContent, UserMessage

    message = UserMessage(content=[TextContent(text=text)])
    parts: list[str] = []
    if settings.context_tokens > 0:
        try:  # the context is a help, never a reason for a run to fail
            from ..tools.context.prompt_context import context_for_prompt

            block = context_for_prompt(shell, text, settings.context_tokens,
                                       settings.notebook_path or None, offered=offered)
        except Exception as exc:
            log(f"pi_notebook: notebook context skipped: {exc!r}")
            block = None
        if block:
            parts.append(block)
    if hidden_request:
        parts.append(fix_block(hidden_request))
    if parts:
        notes.attach(message, "\n\n".join(parts))
    return message


def fix_request(shell: InteractiveShell) -> FixRequest | None:
    """``%agent fix``: None when the user's latest code cell did not raise."""
    from ..tools.context.history import installed_history
    from ..tools.context.history_tool import fix_prompt

    history = installed_history(shell)
    if history is None:
        return None
    request = fix_prompt(history)
    record = history.last_error()
    if request is None or record is None:
        return None
    return FixRequest(f"Fix the error in cell {record.label}.", request)


def run_code_cell(messages: Sequence[AgentMessage], start: AgentMessage | None) -> str:
    """The code of the run that began with ``start`` (found by identity; failed attempts left
    out), or "" when there is none: no run yet, or its messages are gone (reset, load)."""
    from ..session.agent_code import runnable_code

    if start is None:
        return ""
    # searched from the end: the newest match (a value-equal copy counts too)
    index = next((i for i in range(len(messages) - 1, -1, -1)
                  if messages[i] is start or messages[i] == start), None)
    if index is None:
        return ""
    return runnable_code(messages[index:])
