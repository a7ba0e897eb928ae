"""The magics: ``%%agent``, ``%agent``, ``%steer``, ``%followup``.

They only parse and delegate to the kernel's :class:`~.runtime.Runtime`; every one
returns at once (blocking runs are the input transformer's job, see ``wait.py``).

The ``%agent`` subcommands are one registry, :data:`COMMANDS` (name, arity, argument,
help, handler): the parser, the dispatch and ``%agent help`` all read it.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class, no_var_expand

from ..widgets.protocol import QueueKind
from .args import AGENT_USAGE, AgentArgs, parse_agent_args, split_line
from .lifecycle import Run
from .runtime import Runtime
from .wait import has_widget_frontend

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from ..agent.types import AgentMessage

__all__ = ["PiNotebookMagics", "describe_submission", "NO_ERROR_TO_FIX", "NO_CODE", "AgentCommand",
           "Subcommand", "COMMANDS", "parse_agent_command", "help_text"]

NO_ERROR_TO_FIX = "The last cell did not raise an error."
NO_CODE = "The last run ran no code to the end."


def describe_submission(kind: QueueKind, run: Run, *, queued: bool) -> str:
    """The one line a ``%steer``/``%followup`` cell prints about where its message went."""
    if not queued:
        return "Started a run (no run was active)."
    cell = f" in cell [{run.cell}]" if run.cell is not None else ""
    what = "steering" if kind == "steer" else "a follow-up"
    waiting = ""
    if run.phase == "pending" and run.after is not None and not run.after.finished():
        waiting = " (it starts when the runs before it end)"
    return f"Queued as {what} for the run{cell}{waiting}."


@magics_class
class PiNotebookMagics(Magics):
    def __init__(self, shell: InteractiveShell, runtime: Runtime) -> None:
        super().__init__(shell)
        self.runtime = runtime

    # --- %%agent / %agent ----------------------------------------------------------------
    @no_var_expand
    @line_cell_magic
    def agent(self, line: str, cell: str | None = None) -> None:
        """%%agent [options]: ask the agent (the cell body is the prompt). %agent help."""
        if cell is None:
            self._command(line)
            return None
        args = parse_agent_args(line)
        self.runtime.start_cell(args, cell, interactive=has_widget_frontend(self.runtime.shell))
        return None

    @no_var_expand
    @line_magic
    def steer(self, line: str) -> None:
        """%steer TEXT: steer the running agent at its next turn (starts a run when idle)."""
        self._submit("steer", line)

    @no_var_expand
    @line_magic
    def followup(self, line: str) -> None:
        """%followup TEXT: queue a message for when the agent would stop (starts a run when idle)."""
        self._submit("followup", line)

    def _submit(self, kind: QueueKind, line: str) -> None:
        queued = self.runtime.is_running()
        run = self.runtime.submit(kind, line, interactive=has_widget_frontend(self.runtime.shell))
        print(describe_submission(kind, run, queued=queued))

    # --- %agent <command> --------------------------------------------------------------------
    def _command(self, line: str) -> None:
        command = parse_agent_command(line)
        COMMANDS[command.name].handler(self, command)  # the parser checked name and arity

    def _abort(self) -> None:
        if self.runtime.is_running():
            self.runtime.abort()
            print("Aborting the run.")
        else:
            print("No run is active.")

    def _mcp(self, words: list[str]) -> None:
        from .mcp_command import mcp_command

        print(mcp_command(self.runtime, words))

    def _serve(self, words: list[str]) -> None:
        from .serve_command import serve_command

        print(serve_command(self.runtime, words))

    def _fix(self) -> None:
        """A normal run that explains and fixes the user's last error. The view and the
        transcript show the short request; the cell, its traceback and the instructions go
        to the model beside it (docs/design/notebook-context.md)."""
        from .context import fix_request

        request = fix_request(self.runtime.shell)
        if request is None:
            print(NO_ERROR_TO_FIX)
            return
        self.runtime.start_cell(AgentArgs(), request.visible, hidden_request=request.request,
                                interactive=has_widget_frontend(self.runtime.shell))

    def _code(self) -> None:
        """The latest run's code in a new cell below (IPython's ``set_next_input`` payload;
        JupyterLab, Notebook 7 and VS Code insert it)."""
        from .context import run_code_cell

        agent = self.runtime.agent
        text = run_code_cell(agent.state.messages, self.runtime.latest_prompt) if agent is not None else ""
        if not text:
            print(NO_CODE)
            return
        shell = self.runtime.shell
        shell.set_next_input(text, replace=False)
        # Said in this cell: the frontend inserts the new cell silently (and leaves the
        # selection where it was: no kernel message can select a cell).
        lines = len(text.rstrip("\n").split("\n"))
        where = "in a new cell below" if self.runtime.host.has_kernel else "at the next prompt"
        print(f"The code of the latest run ({lines} line{'s' if lines != 1 else ''}) is {where}.")

    def _undo(self) -> None:
        """Put back what the newest agent run did to the user's names (docs/design/review.md)."""
        from ..review.watch import review_for

        if self.runtime.is_running():
            print("A run is active: %agent undo restores a finished run. Wait for it, or %agent abort.")
            return
        print(review_for(self.runtime.shell).undo(self.runtime.shell.user_ns).text())
        self.runtime.undo_offers.refresh()  # the undone run's button ends; the one before it may undo

    def _messages(self) -> list[AgentMessage]:
        return list(self.runtime.get_agent().state.messages)

    def _history(self) -> None:
        messages = self._messages()
        if not messages:
            print("The conversation is empty.")
            return
        for message in messages:
            print(_message_line(message))

    def _sessions(self) -> None:
        from ..session.store import list_sessions

        directory = self.runtime.session_dir()
        sessions = list_sessions(directory)
        if not sessions:
            print(f"No saved sessions in {directory}.")
            return
        for info in sessions:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.started_at / 1000))
            print(f"{info.path.stem:<40} {when}  {info.message_count:>4} messages  "
                  f"{info.model or '-'}")

    def _load(self, name_or_path: str) -> None:
        from ..session.store import SessionFormatError, SessionPathError, find_session, load_session

        try:
            path = find_session(name_or_path, self.runtime.session_dir(), os.getcwd())
            loaded = load_session(path)
        except (SessionFormatError, SessionPathError, FileNotFoundError, OSError) as exc:
            raise UsageError(f"%agent load: {exc}") from None
        self.runtime.restore(loaded.messages, loaded.header.model,
                             source=f"the loaded session {path.name}")
        for warning in loaded.warnings:
            print(f"warning: {warning}")
        if loaded.repair_notice:
            print(loaded.repair_notice)
        print(f"Loaded {len(loaded.messages)} messages from {path}.")

    def _save(self, target: str) -> None:
        from ..session.store import SessionPathError, resolve_inside, write_session

        try:
            path = resolve_inside(os.getcwd(), target)
            model = self.runtime.get_agent().state.model
            written = write_session(path, self._messages(), model=f"{model.provider}/{model.id}",
                                    name=path.stem)
        except (SessionPathError, FileExistsError, OSError) as exc:
            raise UsageError(f"%agent save: {exc}") from None
        print(f"Saved {len(self._messages())} messages to {written}.")

    def _export(self, target: str) -> None:
        from ..session.store import SessionPathError, resolve_inside

        if not target.endswith(".ipynb"):
            raise UsageError("%agent export: the path must end with .ipynb")
        try:
            path = resolve_inside(os.getcwd(), target)
        except SessionPathError as exc:
            raise UsageError(f"%agent export: {exc}") from None
        if path.exists():
            raise UsageError(f"%agent export: {path} already exists; nothing overwritten.")
        from ..session.export import export_notebook

        try:
            written = export_notebook(self._messages(), path)
        except (OSError, ValueError) as exc:
            raise UsageError(f"%agent export: {exc}") from None
        print(f"Exported the conversation to {written or path}.")


# --- the %agent subcommands ---------------------------------------------------------------

@dataclass(frozen=True)
class AgentCommand:
    """One parsed ``%agent`` line."""

    name: str
    arg: str = ""  # the argument of a one-argument command
    rest: tuple[str, ...] = ()  # the words after a command with its own sub-commands


@dataclass(frozen=True)
class Subcommand:
    name: str
    arity: int  # words after the name: 0, 1, or -1 (its own sub-commands take the rest)
    arg: str  # the argument's name in usage lines
    help: str  # one line for %agent help
    handler: Callable[[PiNotebookMagics, AgentCommand], None]


_SUBCOMMANDS = (
    Subcommand("status", 0, "", "show the model, run state, queued messages and conversation size",
               lambda m, c: print(m.runtime.status_text())),
    Subcommand("abort", 0, "", "abort the running agent", lambda m, c: m._abort()),
    Subcommand("reset", 0, "", "start a new conversation (aborts a running one)",
               lambda m, c: print(m.runtime.reset())),
    Subcommand("model", 1, "ID", "switch the model, e.g. %agent model openai/gpt-4.1",
               lambda m, c: print(m.runtime.set_model(c.arg))),
    Subcommand("history", 0, "", "show the conversation so far", lambda m, c: m._history()),
    Subcommand("sessions", 0, "", "list saved sessions of this directory", lambda m, c: m._sessions()),
    Subcommand("load", 1, "NAME|PATH", "restore a saved session into the agent", lambda m, c: m._load(c.arg)),
    Subcommand("save", 1, "PATH", "write the conversation to a session file", lambda m, c: m._save(c.arg)),
    Subcommand("export", 1, "PATH.ipynb", "write the conversation as a notebook",
               lambda m, c: m._export(c.arg)),
    Subcommand("fix", 0, "", "explain and fix the error of your last cell", lambda m, c: m._fix()),
    Subcommand("code", 0, "", "put the code the latest run ran into a new cell below",
               lambda m, c: m._code()),
    Subcommand("undo", 0, "", "restore what the last agent run changed (again: the run before)",
               lambda m, c: m._undo()),
    Subcommand("mcp", -1, "[tools|add|restart|off] ...", "MCP servers: list them; %agent mcp help for more",
               lambda m, c: m._mcp(list(c.rest))),  # magics/mcp_command.py
    Subcommand("serve", -1, "[stop|rotate]",
               "this kernel as an MCP server; %agent serve help for more",
               lambda m, c: m._serve(list(c.rest))),  # magics/serve_command.py
    Subcommand("help", 0, "", "show this help", lambda m, c: print(help_text())),
)
COMMANDS: dict[str, Subcommand] = {command.name: command for command in _SUBCOMMANDS}


def parse_agent_command(line: str) -> AgentCommand:
    """Parse the ``%agent`` line magic: ``%agent`` alone is ``status``."""
    tokens = split_line(line)
    if not tokens:
        return AgentCommand("status")
    name, rest = tokens[0].lower(), tokens[1:]
    command = COMMANDS.get(name)
    if command is None:
        raise UsageError(f"%agent: unknown command {tokens[0]!r}; one of: {', '.join(COMMANDS)} "
                         "(%agent help).")
    if command.arity < 0:
        return AgentCommand(name, rest=tuple(rest))
    if len(rest) != command.arity:
        if command.arity == 0:
            raise UsageError(f"%agent {name} takes no argument.")
        raise UsageError(f"%agent {name} needs exactly one argument: %agent {name} {command.arg}")
    return AgentCommand(name, rest[0] if rest else "")


HELP_WIDTH = 88  # a stream output line at 1400 px in JupyterLab holds ~120 characters


def _usage_lines() -> list[str]:
    """``%%agent``'s usage, broken between options (as one 131-character line, Lab wrapped
    it in the middle of one)."""
    lines = ["  "]
    for option in re.findall(r"\[[^\]]*\]|\S+", AGENT_USAGE):
        if len(lines[-1]) + 1 + len(option) > HELP_WIDTH and lines[-1].strip():
            lines.append(" " * 10)
        lines[-1] += ("" if not lines[-1].strip() else " ") + option
    return lines


def help_text() -> str:
    lines = [*_usage_lines(), "      the cell body is the prompt; one conversation per kernel",
             "  %steer TEXT        steer the running agent (delivered at the next turn)",
             "  %followup TEXT     queue a follow-up (delivered when the agent would stop)"]
    for command in COMMANDS.values():
        usage = f"%agent {command.name} {command.arg}".rstrip()
        lines.append(f"  {usage:<18} {command.help}")
    return "\n".join(lines)


def _message_line(message: AgentMessage) -> str:
    from ..agent.types import CheckMessage  # (on use: %load_ext imports no agent core, no widgets)
    from ..widgets.markdown import without_notes

    role = getattr(message, "role", "?")
    content = getattr(message, "content", "")
    if isinstance(content, str):
        text = content
    else:
        parts = []
        for block in content or []:
            kind = getattr(block, "type", "")
            if kind == "text":
                parts.append(block.text)
            elif kind == "thinking":
                parts.append("[thinking]")
            elif kind == "toolCall":
                parts.append(f"[call {block.name}]")
            elif kind == "image":
                parts.append("[image]")
        text = " ".join(parts)
    if role == "toolResult":
        role = f"result {getattr(message, 'tool_name', '')}"
    if isinstance(message, CheckMessage):  # a run check's turn: the product's words, not the user's
        role, text = "check", message.shown or text
    error = getattr(message, "error_message", None)
    if error:
        text += f" [error: {error}]"
    # (a notebook-context note the model quoted is its input, not what a person reads)
    text = without_notes(text).replace("\n", " ")
    return f"{role:>14}: {text[:200]}{'…' if len(text) > 200 else ''}"
