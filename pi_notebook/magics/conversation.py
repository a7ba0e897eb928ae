"""The kernel's one conversation: the Agent, its messages, its model, its session file,
its MCP servers and its project instructions.

:class:`Conversation` builds the Agent on first use (wiring.py) and readies it for each
run (:meth:`Conversation.ready_for`, one named step a line). It reads which run is at
work from the shared :class:`~.runs.Runs` (scheduling.py moves runs along; this module
never does) and asks the kernel only through :class:`~.kernel_side.KernelSide`.

The modules imported inside methods here (the wiring, the fanout, model resolution, the
local model, MCP, instructions, the notebook context) pull in the agent core, the
providers or the MCP SDK: they load with the first run, so ``%load_ext`` stays cheap.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from IPython.core.error import UsageError

from ..levels import AgentThinkingLevel
from ..review.watch import review_for
from ..tools.trust.policy import ApprovalChoice, ApprovalPolicy
from ..widgets.protocol import NoticeLevel, QueueKind, RunView
from .autosave import Autosave
from .config import DEFAULT_SYSTEM_PROMPT
from .kernel_side import KernelSide
from .lifecycle import IN_AGENT_RUN, Run, RunRefused
from .queue import PromptQueue
from .runs import Runs
from .settings import RunSettings, python_tool_settings, run_settings, stream_timeouts, update_python_tool_settings

if TYPE_CHECKING:
    from ..agent import Agent, AgentTool
    from ..agent.types import AgentMessage
    from ..ai.types import PromptProgress
    from ..session.prompt_notes import PromptNotes
    from ..tools import PythonToolSettings
    from ..tools.trust.approval import ApprovalHook, ApprovalRequest
    from .instructions import Instructions
    from .mcp_run import McpLink
    from .resolve import ResolvedModel

__all__ = ["Conversation", "ToolsFactory"]

# the conversation -> the tools it offers instead of the notebook tools (the test seam)
ToolsFactory = Callable[["Conversation"], "list[AgentTool]"]


class Conversation:
    def __init__(self, kernel: KernelSide, runs: Runs, queue: PromptQueue[Run],
                 tools_factory: ToolsFactory | None = None) -> None:
        self.kernel = kernel
        self.settings = kernel.settings
        self.runs = runs  # read here: which run is at work (its view, policy, approvals)
        self.queue = queue  # told by the Agent's listener when a queued message is delivered
        self.tools_factory = tools_factory
        self.agent: Agent | None = None
        self._approval: ApprovalHook | None = None
        self._notes: PromptNotes | None = None  # per-prompt notebook context (built with the agent)
        self._latest_prompt: AgentMessage | None = None  # where the latest started run begins
        self._tool_settings: PythonToolSettings | None = None
        self.all_tools: list[AgentTool] | None = None  # the full set (a profile may offer fewer)
        self._unsubscribe: Callable[[], None] | None = None
        self.resolved: ResolvedModel | None = None  # the conversation's model
        self._configured_model: str | None = None  # AgentMagics.model when last resolved
        self._thinking_override: AgentThinkingLevel | None = None  # from --thinking, kept for the conversation
        self.autosave = Autosave(enabled=lambda: self.settings.autosave, directory=kernel.session_dir,
                                 name=kernel.session_name, transcript=self._transcript,
                                 model_spec=self._model_spec, warn=self.warn)
        self.on_agent_created: Callable[[], None] | None = None  # installs the tools' capture
        self.capture_installed = False
        self.mcp_link: McpLink | None = None  # MCP servers (made by mcp() on first use; nothing starts)
        # the run's MCP preparation while it waits for servers to start: Abort cancels it
        self._preparing_mcp: asyncio.Future[None] | None = None
        self.instructions: Instructions | None = None  # AGENTS.md of this conversation

    # --- the agent ------------------------------------------------------------------------
    def get_agent(self) -> Agent:
        if self.agent is None:
            from .fanout import EventFanout
            from .wiring import AgentHooks, build_agent

            self._tool_settings = python_tool_settings(self.settings)
            factory = self.tools_factory
            hooks = AgentHooks(
                policy=self.current_policy, ask=self._ask_approval, is_interactive=self.is_interactive,
                notify=self.warn, on_compaction=lambda text: self.warn(text, "info"),
                on_status=lambda text: self.warn(text, "info"),
                on_progress=self._reading_prompt,
                stream_options=lambda: stream_timeouts(self.settings_now()),
                notebook_path=lambda: self.settings.notebook_path.strip(),
                tools=(lambda: factory(self)) if factory is not None else None)
            wired = build_agent(self.settings_now(), self.kernel.shell, hooks, self._tool_settings)
            self.agent, self._approval, self._notes = wired.agent, wired.approval, wired.notes
            self.mcp().install_gate(self.agent, self._approval)
            fanout = EventFanout(serving=lambda: self.runs.serving, queue=self.queue, autosave=self.autosave,
                                 context_window=self.context_window, log=self.kernel.log)
            self._unsubscribe = self.agent.subscribe(fanout)
            if self.on_agent_created is not None:
                self.on_agent_created()
                self.capture_installed = True
        return self.agent

    @property
    def approval(self) -> ApprovalHook | None:
        """The approval gate of the Agent's tool calls (None before the Agent exists)."""
        return self._approval

    @property
    def notes(self) -> PromptNotes | None:
        """The notebook-context notes of the prompts (None before the Agent exists)."""
        return self._notes

    def mcp(self) -> McpLink:
        """The kernel's MCP servers (magics/mcp_run.py); created without starting any."""
        if self.mcp_link is None:
            from .mcp_run import McpLink

            self.mcp_link = McpLink(
                start_dir=self.kernel.notebook_dir,
                explicit=lambda: self.settings.mcp_config.strip(),
                timeout=lambda: self.settings.mcp_timeout,
                tool_settings=lambda: self._tool_settings or python_tool_settings(self.settings),
                policy=self.current_policy, in_agent_code=IN_AGENT_RUN.get,
                trust_annotations=lambda: bool(self.settings.mcp_trust_annotations),
                form_view=self._form_view, warn=self.warn)
        return self.mcp_link

    # --- the run at work, as the Agent's hooks see it -------------------------------------
    def current_policy(self) -> ApprovalPolicy:
        """The approval policy of the prompt being answered."""
        run = self.runs.current()
        return run.policy if run is not None else self.settings_now().approval

    def is_interactive(self) -> bool:
        """Can a human click approval buttons for the current run?"""
        return self.kernel.is_interactive(self.runs.current())

    def _form_view(self) -> RunView | None:
        return self.kernel.form_view(self.runs.serving)

    async def _ask_approval(self, request: ApprovalRequest) -> ApprovalChoice:
        run = self.runs.serving
        if run is None:
            return "skip"
        return await run.view.request_approval(request)

    def warn(self, text: str, level: NoticeLevel = "warning") -> None:
        """A notice in the view of the run at work (or the newest)."""
        run = self.runs.current()
        if run is not None:
            run.view.show_notice(text, level)

    def _reading_prompt(self, progress: PromptProgress) -> None:
        """The pill of the run at work says how far the server has read the prompt."""
        from ..widgets._util import reading_prompt_text

        run = self.runs.current()
        if run is not None:
            run.view.set_status("thinking", reading_prompt_text(progress))

    # --- what the conversation holds ------------------------------------------------------
    def _transcript(self) -> list[AgentMessage]:
        return list(self.agent.state.messages) if self.agent is not None else []

    def _model_spec(self) -> str:
        model = self.agent.state.model if self.agent is not None else None
        return f"{model.provider}/{model.id}" if model is not None else ""

    def context_window(self) -> int:
        model = self.agent.state.model if self.agent is not None else None
        return (model.context_window or 0) if model is not None else 0

    def current_model(self) -> ResolvedModel | None:
        """The conversation's model, unless ``AgentMagics.model`` changed since it was chosen."""
        configured = self.settings.model.strip() or None
        return self.resolved if configured == self._configured_model else None

    @property
    def latest_prompt(self) -> AgentMessage | None:
        """The user message the latest started run prompted with (``%agent code``)."""
        return self._latest_prompt

    def settings_now(self) -> RunSettings:
        return run_settings(self.settings)

    # --- readying the Agent for a run (RunSteps.prepare) ----------------------------------
    async def ready_for(self, run: Run) -> Agent:
        """The run starts: its model, thinking level, system prompt, tools and approval."""
        agent = self.get_agent()
        await self._choose_model(run, agent)
        settings = self.settings_now()
        self._set_thinking(run, agent, settings)
        self._apply_profile(agent, settings.system_prompt, self._instructions_for(run, agent))
        self._refresh_tool_settings()
        await self._prepare_mcp(agent, run)
        self._reset_approval(settings)
        self._start_review(run)
        self.kernel.try_view(lambda: run.view.set_policy(run.policy))
        return agent

    async def _choose_model(self, run: Run, agent: Agent) -> None:
        from .resolve import unreachable_reason

        resolved = await self._model_for(run)
        self.kernel.try_view(lambda: run.view.set_model_label(resolved.label))
        # a refused run changes nothing: not the conversation's model (a -m with no key must
        # not stick), not its thinking level, not the conversation (--new)
        model = resolved.model if resolved is not self.resolved else agent.state.model
        refusal = unreachable_reason(model)
        if refusal is not None:
            raise RunRefused(refusal)
        if run.options.new:
            self.reset()
        if resolved is not self.resolved:  # else keep agent.state.model (get_agent() may set it)
            self.resolved = resolved
            self._configured_model = self.settings.model.strip() or None
            agent.state.model = resolved.model
            if resolved.warning and resolved is not run.options.model:
                run.view.show_notice(resolved.warning, "warning")

    async def _model_for(self, run: Run) -> ResolvedModel:
        from .resolve import resolve_model  # (the ai layer loads with the first run)

        if run.options.model is not None:
            return run.options.model
        current = self.current_model()
        if run.options.base_url is None and current is not None:
            return current
        configured = self.settings.model.strip() or None
        base_url = run.options.base_url or self.settings.base_url.strip() or None
        try:  # local-server probes block: never on the kernel loop
            return await asyncio.to_thread(resolve_model, None, configured, base_url)
        except UsageError as exc:
            raise RunRefused(str(exc)) from None

    def _set_thinking(self, run: Run, agent: Agent, settings: RunSettings) -> None:
        if run.options.thinking:
            self._thinking_override = run.options.thinking  # kept for the conversation
        agent.state.thinking_level = self._thinking_override or settings.thinking

    def _apply_profile(self, agent: Agent, system_prompt: str, instructions: str = "") -> None:
        from ..local.apply import apply_model_profile

        if self.all_tools is None:
            self.all_tools = list(agent.state.tools)
        apply_model_profile(agent, system_prompt, self.all_tools, self.kernel.shell.user_ns,
                            instructions=instructions, default_system_prompt=DEFAULT_SYSTEM_PROMPT)

    def _instructions_for(self, run: Run, agent: Agent) -> str:
        """AGENTS.md and AgentMagics.instructions, read when a conversation starts and kept
        for it (magics/instructions.py); never fails a run."""
        if self.instructions is None or not agent.state.messages:
            from .instructions import Instructions, load_instructions

            try:
                self.instructions = load_instructions(self.kernel.notebook_dir(), self.settings.instructions)
            except Exception as exc:
                self.instructions = Instructions(notices=[f"Project instructions not read: {exc}"])
            for text in self.instructions.notices:
                self._notice(run, text)
        return "\n\n" + self.instructions.text if self.instructions.text else ""

    def _refresh_tool_settings(self) -> None:
        if self._tool_settings is not None:
            update_python_tool_settings(self._tool_settings, self.settings, lambda: self.agent and self.agent.state.model)

    async def _prepare_mcp(self, agent: Agent, run: Run) -> None:
        from ..local.profile import small_model_profile

        # A server may never answer ``initialize``: the start waits up to its timeout, so
        # it runs as a task Abort can cancel (the server's own start goes on, shielded, and
        # is shared with the next run).
        preparing = asyncio.ensure_future(
            self.mcp().prepare(agent, self._approval, lambda text: self._notice(run, text),
                               small_model=small_model_profile(agent.state.model) is not None))
        self._preparing_mcp = preparing
        try:
            await preparing
        except asyncio.CancelledError:
            cancelling = getattr(asyncio.current_task(), "cancelling", None)  # Python 3.11+
            if not run.abort_requested or (callable(cancelling) and cancelling()):
                raise  # the run itself is cancelled (unload), not only its preparation
        except Exception as exc:  # MCP trouble never fails a run: it goes on without those tools
            self._notice(run, f"MCP servers not used in this run: {exc}")
        finally:
            self._preparing_mcp = None
            if not preparing.done():
                preparing.cancel()

    def _reset_approval(self, settings: RunSettings) -> None:
        if self._approval is not None:
            self._approval.reset_run()  # "Always for this run" ends with the run
            self._approval.timeout_s = settings.approval_timeout or None

    def _start_review(self, run: Run) -> None:
        # what this run does to the user's names is one step of %agent undo
        run.undo_record = review_for(self.kernel.shell).start_run(f"the run of cell [{run.cell}]"
                                                                  if run.cell is not None else "")

    def _notice(self, run: Run, text: str) -> None:
        self.kernel.try_view(lambda: run.view.show_notice(text, "warning"))

    # --- messages -------------------------------------------------------------------------
    def prompt_message(self, run: Run) -> AgentMessage:
        """The run's user message, with the notebook context of this moment as its note."""
        message = self.noted_message(run.text, run.hidden_request)
        run.prompt_message = self._latest_prompt = message
        return message

    def noted_message(self, text: str, hidden_request: str | None = None) -> AgentMessage:
        """A user message with its own notebook context (``hidden_request``: text for the
        model only, beside ``text``)."""
        from .context import noted_message

        agent = self.get_agent()
        assert self._notes is not None
        return noted_message(self.kernel.shell, self._notes, text, self.settings_now(),
                             hidden_request=hidden_request,
                             offered=[t.name for t in agent.state.tools], log=self.kernel.log)

    def hand_to_agent(self, kind: QueueKind, message: AgentMessage) -> None:
        """A ``%steer`` or ``%followup`` message into the Agent's queues."""
        agent = self.get_agent()
        if kind == "steer":
            agent.steer(message)
        else:
            agent.follow_up(message)

    def remove_queued(self, message: AgentMessage) -> bool:
        return self.agent.remove_queued(message) if self.agent is not None else True

    # --- stopping -------------------------------------------------------------------------
    def abort(self) -> None:
        """Stop the Agent's work now: the MCP servers being waited for, the request, the queues."""
        if self._preparing_mcp is not None:
            self._preparing_mcp.cancel()
        if self.agent is not None:
            self.agent.abort()
            self.agent.clear_all_queues()

    def run_ended(self) -> None:
        """The served run ended: what the Agent still holds queued is dropped (unless it
        is already working again)."""
        if self.agent is not None and self.agent.signal is None:
            self.agent.clear_all_queues()

    # --- history --------------------------------------------------------------------------
    def reset(self) -> None:
        """A new conversation: no messages, AGENTS.md read afresh, a new session file."""
        self.get_agent().reset()
        self.instructions = None
        self._clear_notes()
        self.autosave.close()

    def _clear_notes(self) -> None:
        if self._notes is not None:
            self._notes.clear()

    def set_model(self, spec: str, *, running: bool, source: str = "%agent model") -> str:
        from .resolve import resolve_now

        resolved = resolve_now(spec, None, self.settings.base_url.strip() or None,
                               explicit_reason=source)
        assert resolved is not None
        self.get_agent().state.model = resolved.model
        self.resolved = resolved
        self._configured_model = self.settings.model.strip() or None
        note = " (takes effect with the next run)" if running else ""
        warning = f"\nwarning: {resolved.warning}" if resolved.warning else ""
        return f"Model: {resolved.label}{note}{warning}"

    def restore(self, messages: list[AgentMessage], model_spec: str | None, *, source: str) -> None:
        """Put a saved conversation (from ``source``) into the agent; no run may be active."""
        agent = self.get_agent()
        agent.reset()
        self._clear_notes()
        self.autosave.close()
        agent.state.messages = list(messages)
        if model_spec and not self.settings.model and self.resolved is None:
            try:
                self.set_model(model_spec, running=False, source=source)
            except UsageError:
                pass  # keep default resolution when the saved model is unavailable here

    # --- shutdown -------------------------------------------------------------------------
    def close(self) -> None:
        """Unsubscribe, close the session file, stop the MCP servers (their own tasks)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self.autosave.close()

    def close_mcp(self) -> None:
        if self.mcp_link is not None:  # servers stop with the extension (their own tasks leave them)
            link, self.mcp_link = self.mcp_link, None
            link.close_soon(self.kernel.kernel_loop.loop)
