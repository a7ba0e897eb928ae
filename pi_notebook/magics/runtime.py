"""The kernel's single conversation and its runs, behind one object the magics hold.

:class:`Runtime` owns three parts and keeps none of their state itself:

- ``kernel_side.py`` (:class:`KernelSide`): the shell, the kernel host, the loop, a run's
  view in its cell, the Stop button;
- ``conversation.py`` (:class:`Conversation`): the Agent, its messages, model, session
  file, MCP servers and project instructions; readies the Agent for each run;
- ``scheduling.py`` (:class:`RunScheduler`): starting, queueing, steering, aborting and
  ending runs; what ``lifecycle.drive`` calls back into.

The two last share the :class:`~.runs.Runs` (which run is which) and the
:class:`~.queue.PromptQueue`; arrows point from this module to its parts, never back.
The magics, ``%agent`` commands, ``wait.py`` (as a ``WaitHost``) and ``get_agent()`` use
the methods here; tests and tools that need one part's value ask that part. The session
store and the instructions reader are imported on first use, so ``%load_ext`` stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from IPython.core.error import UsageError

from ..tools.kernel.kernel_host import KernelHost
from ..tools.trust.policy import ApprovalPolicy
from ..widgets.protocol import QueueKind
from .args import AgentArgs
from .config import AgentMagics
from .conversation import Conversation, ToolsFactory
from .kernel_side import KernelSide, ViewFactory
from .lifecycle import IN_AGENT_RUN, Run
from .queue import PromptQueue
from .runs import Runs
from .scheduling import RunScheduler, cell_options
from .settings import RunSettings
from .status import StatusSnapshot, status_lines
from .undo_offers import UndoOffers
from .wait import wait_mode

if TYPE_CHECKING:
    import asyncio
    from pathlib import Path

    from IPython.core.interactiveshell import InteractiveShell

    from ..agent import Agent
    from ..agent.types import AgentMessage
    from .instructions import Instructions
    from .mcp_run import McpLink
    from .resolve import ResolvedModel

__all__ = ["Runtime", "Run", "IN_AGENT_RUN", "ViewFactory"]


class Runtime:
    """One per kernel: created at ``%load_ext``, dropped at ``%unload_ext``."""

    def __init__(self, shell: InteractiveShell, settings: AgentMagics, *, view_factory: ViewFactory | None = None,
                 tools_factory: ToolsFactory | None = None) -> None:
        self.kernel = KernelSide(shell, settings, view_factory)
        self.runs = Runs()  # which run is the newest, the one served, the latest (runs.py)
        self.queue: PromptQueue[Run] = PromptQueue()
        self.conversation = Conversation(self.kernel, self.runs, self.queue, tools_factory)
        self.scheduler = RunScheduler(self.kernel, self.conversation, self.runs, self.queue)
        self.on_close: list[Callable[[], object]] = []  # what else ends with the extension

    # --- the parts' names the magics and tests read ---------------------------------------
    @property
    def shell(self) -> InteractiveShell:
        return self.kernel.shell

    @property
    def host(self) -> KernelHost:
        """The kernel (or terminal) hosting the shell: the one seam (tools/kernel/kernel_host.py)."""
        return self.kernel.host

    @property
    def settings(self) -> AgentMagics:
        return self.kernel.settings

    @property
    def undo_offers(self) -> UndoOffers:
        """The Undo buttons under finished runs (undo_offers.py), kept by the scheduler."""
        return self.scheduler.undo_offers

    @property
    def view_factory(self) -> ViewFactory | None:
        return self.kernel.view_factory

    @view_factory.setter
    def view_factory(self, factory: ViewFactory | None) -> None:
        self.kernel.view_factory = factory

    @property
    def tools_factory(self) -> ToolsFactory | None:
        return self.conversation.tools_factory

    @tools_factory.setter
    def tools_factory(self, factory: ToolsFactory | None) -> None:
        self.conversation.tools_factory = factory

    @property
    def on_agent_created(self) -> Callable[[], None] | None:
        """Called once the Agent exists (``%load_ext`` installs the tools' capture here)."""
        return self.conversation.on_agent_created

    @on_agent_created.setter
    def on_agent_created(self, hook: Callable[[], None] | None) -> None:
        self.conversation.on_agent_created = hook

    @property
    def capture_installed(self) -> bool:
        return self.conversation.capture_installed

    @property
    def agent(self) -> Agent | None:
        """The Agent, once made (``get_agent``)."""
        return self.conversation.agent

    @property
    def resolved(self) -> ResolvedModel | None:
        """The conversation's model."""
        return self.conversation.resolved

    @resolved.setter
    def resolved(self, resolved: ResolvedModel | None) -> None:
        self.conversation.resolved = resolved

    @property
    def instructions(self) -> Instructions | None:
        """AGENTS.md of this conversation (None until a run reads it)."""
        return self.conversation.instructions

    @property
    def latest_prompt(self) -> AgentMessage | None:
        """The user message the latest started run prompted with (``%agent code``)."""
        return self.conversation.latest_prompt

    @property
    def run(self) -> Run | None:
        """The newest run not yet ended (what a waiting cell waits for)."""
        return self.runs.newest

    # --- the loop -------------------------------------------------------------------------
    def attach_loop(self) -> asyncio.AbstractEventLoop:
        """Find the kernel loop (raises RuntimeError in terminal IPython between cells)."""
        return self.kernel.attach_loop()

    # --- the conversation -----------------------------------------------------------------
    def get_agent(self) -> Agent:
        return self.conversation.get_agent()

    def mcp(self) -> McpLink:
        """The kernel's MCP servers (magics/mcp_run.py); created without starting any."""
        return self.conversation.mcp()

    def current_policy(self) -> ApprovalPolicy:
        """The approval policy of the prompt being answered."""
        return self.conversation.current_policy()

    def is_interactive(self) -> bool:
        """Can a human click approval buttons for the current run?"""
        return self.conversation.is_interactive()

    def current_model(self) -> ResolvedModel | None:
        """The conversation's model, unless ``AgentMagics.model`` changed since it was chosen."""
        return self.conversation.current_model()

    def settings_now(self) -> RunSettings:
        return self.conversation.settings_now()

    def set_model(self, spec: str) -> str:
        return self.conversation.set_model(spec, running=self.is_running())

    def restore(self, messages: list[AgentMessage], model_spec: str | None, *,
                source: str = "the loaded session") -> None:
        """Put a saved conversation into the agent (``%agent load``, ``--resume``);
        ``source`` is where its model came from, as ``%agent status`` says it."""
        if self.is_running():
            raise UsageError("%agent load: a run is active; %agent abort first.")
        self.conversation.restore(messages, model_spec, source=source)

    def resume_latest(self) -> list[str]:
        """Restore this notebook's newest session; returns lines for the view (what was
        loaded, then the loader's notices)."""
        from ..session.store import latest_session, load_session

        info = latest_session(self.session_dir(), self.session_name())
        if info is None:
            raise UsageError(f"%%agent --resume: no saved session named {self.session_name()!r} "
                             f"in {self.session_dir()}.")
        try:
            loaded = load_session(info.path)
        except (ValueError, OSError) as exc:  # SessionFormatError is a ValueError
            raise UsageError(f"%%agent --resume: {exc}") from None
        self.restore(loaded.messages, loaded.header.model,
                     source=f"the resumed session {info.path.name}")
        repaired = [loaded.repair_notice] if loaded.repair_notice else []
        return [f"Resumed {info.path.name} ({len(loaded.messages)} messages).", *loaded.warnings,
                *repaired]

    def session_dir(self) -> Path:
        return self.kernel.session_dir()

    def session_name(self) -> str:
        return self.kernel.session_name()

    @property
    def session_path(self) -> Path | None:
        return self.conversation.autosave.path

    # --- runs -----------------------------------------------------------------------------
    def is_running(self) -> bool:
        return self.scheduler.is_running()

    def start_cell(self, args: AgentArgs, prompt: str, *, interactive: bool,
                   hidden_request: str | None = None) -> Run:
        """``%%agent``: start a run, or queue one (with this cell's own options) behind the
        busy one; ``--new`` aborts the busy one first. ``hidden_request``: text the model
        gets beside ``prompt`` that the view and the transcript leave out (``%agent fix``)."""
        self.attach_loop()
        prompt = prompt.strip()
        if not prompt:
            raise UsageError("%%agent: the cell body is the prompt, and it is empty.")
        if args.resume and self.is_running():
            raise UsageError("%%agent --resume: a run is active; wait for it to end, or %agent "
                             "abort first.")
        options = cell_options(args, self.settings)
        resumed = self.resume_latest() if args.resume else []
        return self.scheduler.start_cell(prompt, options, interactive=interactive,
                                         hidden_request=hidden_request, notices=resumed)

    def submit(self, kind: QueueKind, text: str, *, interactive: bool) -> Run:
        """``%steer`` / ``%followup``: queue into a run (returned), or start one."""
        self.attach_loop()
        text = text.strip()
        if not text:
            raise UsageError(f"%{kind} needs a message.")
        return self.scheduler.submit(kind, text, interactive=interactive)

    def abort(self) -> None:
        """Abort the run at work and drop every run queued behind it."""
        self.scheduler.abort()

    def reset(self) -> str:
        return self.scheduler.reset()

    def check_run_outcome(self, run: Run) -> None:
        """For a cell that waited for ``run``: fail the cell when the run ended in error
        (``AgentMagics.raise_on_error``). Its transcript is already in the cell."""
        if self.settings.raise_on_error:
            # at a terminal the error was just printed in the run's text: not again
            run.raise_if_failed(shown=not self.host.has_kernel)

    # --- %agent status --------------------------------------------------------------------
    def status_text(self) -> str:
        return "\n".join(status_lines(self.status_snapshot()))

    def status_snapshot(self) -> StatusSnapshot:
        """Plain values for ``%agent`` status (status.py words them)."""
        serving = self.runs.current()
        items = self.queue.items()
        agent = self.agent
        settings = self.settings_now()
        return StatusSnapshot(
            resolved=self.current_model(),
            configured_model=self.settings.model.strip() or None,
            base_url=self.settings.base_url.strip() or None,
            running=self.is_running() and serving is not None,
            run_cell=serving.cell if serving is not None else None,
            run_started=serving.started if serving is not None else None,
            messages=len(agent.state.messages) if agent is not None else 0,
            queued_cells=sum(1 for item in items if item.kind == "prompt"),
            queued_steering=sum(1 for item in items if item.kind == "steer"),
            queued_follow_ups=sum(1 for item in items if item.kind == "followup"),
            thinking=agent.state.thinking_level if agent is not None else settings.thinking,
            policy=self.current_policy(),
            wait=settings.wait,
            wait_mode=wait_mode(None, settings.wait, self.shell),
            autosave=settings.autosave,
            session_path=self.session_path,
            session_dir=self.session_dir(),
            session_name=self.session_name(),
            extra_lines=self._mcp_and_instructions_lines(),
        )

    def _mcp_and_instructions_lines(self) -> list[str]:
        """MCP servers (when any is configured) and the project instructions of the
        conversation (or those the next one would get)."""
        lines: list[str] = []
        mcp = self.mcp().status_lines()
        if not mcp[0].startswith("MCP servers: none"):
            lines.extend(mcp)
        instructions = self.instructions
        if instructions is None:
            from .instructions import load_instructions

            try:
                instructions = load_instructions(self.kernel.notebook_dir(), self.settings.instructions)
            except Exception:
                return lines
        lines.extend(instructions.status_lines())
        return lines

    # --- shutdown -------------------------------------------------------------------------
    def close(self) -> None:
        """``%unload_ext``: abort, cancel our tasks, unsubscribe, close the session file."""
        self.scheduler.cancel_tasks()
        self.conversation.close()
        self.kernel.try_view(self.undo_offers.close)
        for stop in self.on_close:  # e.g. %agent serve's server stops with the extension
            self.kernel.try_view(stop)
        self.on_close.clear()
        self.conversation.close_mcp()
