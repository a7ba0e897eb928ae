"""The magics: ``%%agent``, ``%agent``, ``%steer``, ``%followup``.

They only parse and delegate to the kernel's :class:`~.runtime.Runtime`; every one
returns at once (blocking runs are the input transformer's job, see ``wait.py``).
"""

from __future__ import annotations

import os
import time
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class, no_var_expand

from ..widgets.protocol import QueueKind
from .args import AgentArgs, help_text, parse_agent_args, parse_agent_command
from .lifecycle import Run
from .runtime import Runtime
from .wait import has_widget_frontend

__all__ = ["PiNotebookMagics", "describe_submission", "NO_ERROR_TO_FIX", "NO_CODE"]

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
    def __init__(self, shell: Any, runtime: Runtime) -> None:
        super().__init__(shell)
        self.runtime = runtime

    # --- %%agent / %agent ----------------------------------------------------------------
    @no_var_expand
    @line_cell_magic
    def agent(self, line: str, cell: str | None = None) -> Any:
        """%%agent [options]: ask the agent (the cell body is the prompt). %agent help."""
        if cell is None:
            return self._command(line)
        args = parse_agent_args(line)
        self.runtime.start_cell(args, cell, interactive=has_widget_frontend(self.shell))
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
        run = self.runtime.submit(kind, line, interactive=has_widget_frontend(self.shell))
        print(describe_submission(kind, run, queued=queued))

    # --- %agent <command> --------------------------------------------------------------------
    def _command(self, line: str) -> Any:
        command = parse_agent_command(line)
        runtime = self.runtime
        name, arg = command.name, command.arg or ""  # the parser checked the argument count
        if name == "status":
            print(runtime.status_text())
        elif name == "help":
            print(help_text())
        elif name == "abort":
            if runtime.is_running():
                runtime.abort()
                print("Aborting the run.")
            else:
                print("No run is active.")
        elif name == "reset":
            print(runtime.reset())
        elif name == "model":
            print(runtime.set_model(arg))
        elif name == "history":
            self._history()
        elif name == "sessions":
            self._sessions()
        elif name == "load":
            self._load(arg)
        elif name == "save":
            self._save(arg)
        elif name == "export":
            self._export(arg)
        elif name == "fix":
            self._fix()
        elif name == "code":
            self._code()
        elif name == "mcp":
            from .mcp_command import mcp_command

            print(mcp_command(runtime, command.rest or []))
        return None

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
                                interactive=has_widget_frontend(self.shell))

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
        where = "in a new cell below" if getattr(shell, "kernel", None) is not None else "at the next prompt"
        print(f"The code of the latest run ({lines} line{'s' if lines != 1 else ''}) is {where}.")

    def _messages(self) -> list[Any]:
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
        self.runtime.restore(loaded.messages, loaded.header.model)
        for warning in loaded.warnings:
            print(f"warning: {warning}")
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


def _message_line(message: Any) -> str:
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
    error = getattr(message, "error_message", None)
    if error:
        text += f" [error: {error}]"
    text = text.replace("\n", " ")
    return f"{role:>14}: {text[:200]}{'…' if len(text) > 200 else ''}"
