"""The kernel's single conversation: one Agent, its runs, their views and the queue.

The Runtime coordinates; each job lives in its own module and gets what it needs from
here as callables, a typed settings object or a ``RunView`` (arrows point from this
module to its parts, never back):

- ``loop.py`` the kernel loop and the thread hop; ``display.py`` a view in its cell;
- ``lifecycle.py`` one run's body and status; ``runs.py`` which run is the newest, the
  one served, the latest; ``queue.py`` every queued message;
- ``wiring.py`` the Agent (tools, approval, compaction, keys); ``fanout.py`` its listener;
- ``autosave.py`` the session file; ``resolve.py`` the model; ``settings.py`` typed settings.

What the kernel (or the terminal) offers is asked of ``self.host``, the kernel host
(tools/kernel_host.py), never of ``shell.kernel`` directly.

Everything here runs on the kernel loop thread, except the ``*_threadsafe`` entry points
a widget handler calls. Modules that import the agent core are imported on first use, so
``%load_ext`` stays cheap.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from IPython.core.error import UsageError

from ..levels import AgentThinkingLevel
from ..review.watch import review_for
from ..tools.kernel_host import kernel_host
from ..tools.policy import ApprovalChoice, ApprovalPolicy
from ..widgets.protocol import NoticeLevel, QueueKind, RunStatus, RunView
from .args import AgentArgs
from .autosave import Autosave, session_dir, session_name
from .config import AgentMagics
from .display import DisplayedView, current_cell_number
from .lifecycle import IN_AGENT_RUN, Run, RunOptions, RunRefused, drive, not_sent_reason
from .loop import KernelLoop
from .queue import PromptQueue
from .runs import AbortFromView, Runs
from .settings import RunSettings, run_settings, stream_timeouts
from .status import StatusSnapshot, status_lines
from .wait import wait_mode

if TYPE_CHECKING:
    from pathlib import Path

    from IPython.core.interactiveshell import InteractiveShell

    from ..agent import Agent, AgentTool
    from ..agent.types import AgentMessage
    from ..ai.types import PromptProgress
    from ..session.prompt_notes import PromptNotes
    from ..tools import PythonToolSettings
    from ..tools.approval import ApprovalHook, ApprovalRequest
    from .instructions import Instructions
    from .mcp_run import McpLink
    from .resolve import ResolvedModel

__all__ = ["Runtime", "Run", "IN_AGENT_RUN", "ViewFactory"]

# How long a Stop waits before it aborts the run: long enough for the shutdown_request that
# follows jupyter_client's interrupt before a shutdown or restart (see Runtime._stop_pressed).
STOP_GRACE_S = 1.0

# (model label, kernel loop, on_abort, on_remove_queued) -> a view; the test seam
ViewFactory = Callable[[str, "asyncio.AbstractEventLoop | None", Callable[[], None],
                        Callable[[object], None]], RunView]
_CHOOSING = "choosing a model…"


class Runtime:
    """One per kernel: created at ``%load_ext``, dropped at ``%unload_ext``."""

    def __init__(self, shell: InteractiveShell, settings: AgentMagics, *, view_factory: ViewFactory | None = None,
                 tools_factory: Callable[[Runtime], list[AgentTool]] | None = None) -> None:
        self.shell = shell
        self.host = kernel_host(shell)  # the kernel (or terminal) hosting the shell: the one seam
        self.settings = settings
        self.kernel_loop = KernelLoop(self.host)
        self.view_factory = view_factory  # test seams: views and tools without ipywidgets
        self.tools_factory = tools_factory
        self.agent: Agent | None = None
        self._approval: ApprovalHook | None = None
        self._notes: PromptNotes | None = None  # per-prompt notebook context (built with the agent)
        self._latest_prompt: AgentMessage | None = None  # where the latest started run begins
        self._tool_settings: PythonToolSettings | None = None
        self._all_tools: list[AgentTool] | None = None  # the full set (a profile may offer fewer)
        self._unsubscribe: Callable[[], None] | None = None
        self.resolved: ResolvedModel | None = None  # the conversation's model
        self._configured_model: str | None = None  # AgentMagics.model when last resolved
        self._thinking_override: AgentThinkingLevel | None = None  # from --thinking, kept for the conversation
        self.runs = Runs()  # which run is the newest, the one served, the latest (runs.py)
        self.queue: PromptQueue[Run] = PromptQueue()
        self.autosave = Autosave(enabled=lambda: self.settings.autosave, directory=self.session_dir,
                                 name=self.session_name, transcript=self._transcript,
                                 model_spec=self._model_spec, warn=self._warn)
        self._pending_reset = False
        self.on_agent_created: Callable[[], None] | None = None  # installs the tools' capture
        self.capture_installed = False
        self._mcp: McpLink | None = None  # MCP servers (created on first use; nothing starts)
        # the run's MCP preparation while it waits for servers to start: Abort cancels it
        self._preparing_mcp: asyncio.Future[None] | None = None
        self.instructions: Instructions | None = None  # AGENTS.md of this conversation
        self.on_close: list[Callable[[], object]] = []  # what else ends with the extension

    # --- loop -----------------------------------------------------------------------------
    def attach_loop(self) -> asyncio.AbstractEventLoop:
        """Find the kernel loop (raises RuntimeError in terminal IPython between cells)."""
        return self.kernel_loop.attach()

    def call_on_loop(self, fn: Callable[..., object], *args: object) -> None:
        self.kernel_loop.call(fn, *args)

    # --- the agent ------------------------------------------------------------------------
    def get_agent(self) -> Agent:
        if self.agent is None:
            from .fanout import EventFanout
            from .settings import python_tool_settings
            from .wiring import AgentHooks, build_agent

            self._tool_settings = python_tool_settings(self.settings)
            factory = self.tools_factory
            hooks = AgentHooks(
                policy=self.current_policy, ask=self._ask_approval, is_interactive=self.is_interactive,
                notify=self._warn, on_compaction=lambda text: self._warn(text, "info"),
                on_status=lambda text: self._warn(text, "info"),
                on_progress=self._reading_prompt,
                stream_options=lambda: stream_timeouts(run_settings(self.settings)),
                notebook_path=lambda: self.settings.notebook_path.strip(),
                tools=(lambda: factory(self)) if factory is not None else None)
            wired = build_agent(run_settings(self.settings), self.shell, hooks, self._tool_settings)
            self.agent, self._approval, self._notes = wired.agent, wired.approval, wired.notes
            self.mcp().install_gate(self.agent, self._approval)
            fanout = EventFanout(serving=lambda: self.runs.serving, queue=self.queue, autosave=self.autosave,
                                 context_window=self._context_window, log=self._log)
            self._unsubscribe = self.agent.subscribe(fanout)
            if self.on_agent_created is not None:
                self.on_agent_created()
                self.capture_installed = True
        return self.agent

    def mcp(self) -> McpLink:
        """The kernel's MCP servers (magics/mcp_run.py); created without starting any."""
        if self._mcp is None:
            from .mcp_run import McpLink, notebook_dir
            from .settings import python_tool_settings

            self._mcp = McpLink(
                start_dir=lambda: notebook_dir(self.shell, self.settings.notebook_path.strip()),
                explicit=lambda: self.settings.mcp_config.strip(),
                timeout=lambda: self.settings.mcp_timeout,
                tool_settings=lambda: self._tool_settings or python_tool_settings(self.settings),
                policy=self.current_policy, in_agent_code=IN_AGENT_RUN.get,
                trust_annotations=lambda: bool(self.settings.mcp_trust_annotations),
                form_view=self._form_view, warn=self._warn)
        return self._mcp

    def _form_view(self) -> RunView | None:
        """The view that may show an MCP server's input form now: the run at work's, in a
        kernel with a frontend (not headless, not terminal IPython)."""
        run = self.runs.serving
        if run is None or not self.host.has_kernel or not self.is_interactive():
            return None
        return run.view

    def current_policy(self) -> ApprovalPolicy:
        """The approval policy of the prompt being answered."""
        run = self.runs.current()
        return run.policy if run is not None else self.settings_now().approval

    def is_interactive(self) -> bool:
        """Can a human click approval buttons for the current run?"""
        run = self.runs.current()
        if run is None:
            return False
        if not self.host.has_kernel:
            # terminal IPython: its text view asks with input(), if a person types there
            return _stdin_is_a_terminal()
        if not run.interactive:
            # the first run of a kernel starts before any frontend evidence (its own view is
            # the first widget shown): its view rendering since then counts (frontend.py)
            from .frontend import has_widget_frontend

            run.interactive = has_widget_frontend(self.shell)
        return run.interactive

    async def _ask_approval(self, request: ApprovalRequest) -> ApprovalChoice:
        run = self.runs.serving
        if run is None:
            return "skip"
        return await run.view.request_approval(request)

    def _warn(self, text: str, level: NoticeLevel = "warning") -> None:
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

    def _transcript(self) -> list[AgentMessage]:
        return list(self.agent.state.messages) if self.agent is not None else []

    def _model_spec(self) -> str:
        model = self.agent.state.model if self.agent is not None else None
        return f"{model.provider}/{model.id}" if model is not None else ""

    def _context_window(self) -> int:
        model = self.agent.state.model if self.agent is not None else None
        return (model.context_window or 0) if model is not None else 0

    def current_model(self) -> ResolvedModel | None:
        """The conversation's model, unless ``AgentMagics.model`` changed since it was chosen."""
        configured = self.settings.model.strip() or None
        return self.resolved if configured == self._configured_model else None

    @property
    def serving(self) -> Run | None:
        """The run the agent is working for (None between runs)."""
        return self.runs.serving

    @property
    def run(self) -> Run | None:
        """The newest run not yet ended (what a waiting cell waits for)."""
        return self.runs.newest

    # --- views ----------------------------------------------------------------------------
    def _make_view(self, label: str, on_abort: Callable[[], None]) -> DisplayedView:
        """The run's view, not shown yet (``DisplayedView.show``)."""
        loop = self.kernel_loop.loop
        if self.view_factory is not None:
            view = self.view_factory(label, loop, on_abort, self.remove_queued_threadsafe)
            return DisplayedView(view, self.host, self._log)
        from .frontend import is_headless

        return DisplayedView.for_host(self.host, self._log, label, loop, on_abort,
                                       self.remove_queued_threadsafe, self._context_window(),
                                       headless=is_headless(self.shell))

    # --- starting and queueing ------------------------------------------------------------
    def is_running(self) -> bool:
        run = self.runs.newest
        return run is not None and run.task is not None and not run.task.done()

    def start_cell(self, args: AgentArgs, prompt: str, *, interactive: bool,
                   hidden_request: str | None = None) -> Run:
        """``%%agent``: start a run, or queue one (with this cell's own options) behind the
        busy one; ``--new`` aborts the busy one first. ``hidden_request``: text the model
        gets beside ``prompt`` that the view and the transcript leave out (``%agent fix``)."""
        self.attach_loop()
        prompt = prompt.strip()
        if not prompt:
            raise UsageError("%%agent: the cell body is the prompt, and it is empty.")
        busy = self.is_running()
        if busy and args.resume:
            raise UsageError("%%agent --resume: a run is active; wait for it to end, or %agent "
                             "abort first.")
        from .resolve import resolve_now

        base_url = args.base_url or self.settings.base_url or None
        named = resolve_now(args.model, None, base_url) if args.model else None
        options = RunOptions(model=named, base_url=args.base_url if named is None else None,
                             thinking=args.thinking, approve=args.approve, new=args.new)
        resumed: list[str] = []
        if args.resume:
            resumed = self.resume_latest()
        if busy and args.new:
            self.abort()  # then start fresh once it has ended
        label = named.label if named is not None else self._expected_label(options)
        # queued behind a live run: sent only if that one ends well (behind a run that is
        # being aborted or removed: sent once it has ended, whatever its outcome)
        queued = busy and not args.new and self.runs.live() is not None
        run = self._new_run(prompt, "prompt", options, label, interactive=interactive,
                            queued=queued, chained=busy)
        run.hidden_request = hidden_request
        for line in resumed:  # what was loaded, and any notice (a cut last line)
            run.view.show_notice(line, "info")
        if named is not None and named.warning:
            run.view.show_notice(named.warning, "warning")
        return run

    def submit(self, kind: QueueKind, text: str, *, interactive: bool) -> Run:
        """``%steer`` / ``%followup``: queue into a run (returned), or start one."""
        self.attach_loop()
        text = text.strip()
        if not text:
            raise UsageError(f"%{kind} needs a message.")
        if not self.is_running():
            return self._new_run(text, kind, RunOptions(), self._expected_label(RunOptions()),
                                 interactive=interactive, queued=False, chained=False)
        serving, live = self.runs.serving, self.runs.live()
        if live is None:  # every run left is being aborted or removed: start after them
            return self._new_run(text, kind, RunOptions(), self._expected_label(RunOptions()),
                                 interactive=interactive, queued=False, chained=True)
        # steering is for the run at work; a follow-up waits for the last queued run
        target = serving if kind == "steer" and serving is not None and not serving.abort_requested \
            else live
        message = self._noted_message(text)  # this message's own notebook context
        self.queue.add(kind, text, target.view, target, message)
        if target is serving:
            self._hand_to_agent(kind, message)
        return target

    def _hand_to_agent(self, kind: QueueKind, message: AgentMessage) -> None:
        agent = self.get_agent()
        if kind == "steer":
            agent.steer(message)
        else:
            agent.follow_up(message)

    def _expected_label(self, options: RunOptions) -> str:
        current = self.current_model() if options.base_url is None else None
        return current.label if current is not None else _CHOOSING

    def _new_run(self, text: str, kind: QueueKind, options: RunOptions, label: str, *,
                 interactive: bool, queued: bool, chained: bool) -> Run:
        loop = self.attach_loop()
        on_abort = AbortFromView(lambda run: self.call_on_loop(self._abort_from_view, run))
        shown = self._make_view(label, on_abort)
        policy = options.approve or self.settings_now().approval
        run = Run(text, kind, shown, options, policy, interactive, cell=current_cell_number(self.shell),
                  after=self.runs.newest if chained else None, needs_success=queued)
        on_abort.run = run
        if not interactive:  # no evidence yet: this view's rendering will be (is_interactive)
            from .frontend import track_view

            track_view(getattr(run.view, "widget", None))
        # the prompt before the first display: the static fallback shown with a live view
        # (a notebook saved mid-run) has it from the start
        run.view.add_user_message(text, kind)
        if chained:
            run.view.set_status("queued")
        shown.show()
        if queued:
            origin = (self.runs.current() or run).view
            run.queue_token = self.queue.add("prompt", text, origin, run).token
        self.runs.started(run)
        run.task = loop.create_task(self._drive(run, loop), name="pi_notebook-run")
        run.task.add_done_callback(self._task_done)
        return run

    async def _drive(self, run: Run, loop: asyncio.AbstractEventLoop) -> None:
        # The kernel's Stop button aborts the run while no agent code executes and the
        # kernel handles no request of the user's (tools/interrupt.py, docs/design/capture.md);
        # while agent code runs it interrupts that code, as before.
        from ..tools.interrupt import stop_aborts_run

        def stop() -> None:  # called from the SIGINT handler: only schedule the abort
            loop.call_soon_threadsafe(loop.call_later, STOP_GRACE_S, self._stop_pressed, run)

        with stop_aborts_run(stop, self.host.kernel):
            await drive(run, self)

    def _stop_pressed(self, run: Run) -> None:
        # jupyter_client interrupts the kernel right before every shutdown and restart; its
        # shutdown_request follows within milliseconds. Aborting then would end the run and
        # close its view's widgets after the frontend dropped them ("Comm not found" in the
        # page's console); the kernel ends the run by going away instead. A run that ended
        # meanwhile (a waiting cell's Stop aborts at once) takes no run started since with it.
        from .frontend import shutdown_requested

        if not shutdown_requested() and run.phase != "ended":
            self.abort()

    def _task_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:  # drive() catches everything
            self._log(f"pi_notebook run task failed: {task.exception()!r}")

    def _apply_profile(self, agent: Agent, system_prompt: str, instructions: str = "") -> None:
        from ..local.apply import apply_model_profile
        from .config import DEFAULT_SYSTEM_PROMPT

        if self._all_tools is None:
            self._all_tools = list(agent.state.tools)
        apply_model_profile(agent, system_prompt, self._all_tools, self.shell.user_ns,
                            instructions=instructions, default_system_prompt=DEFAULT_SYSTEM_PROMPT)

    # --- RunSteps: called by lifecycle.drive --------------------------------------------------
    async def prepare(self, run: Run) -> Agent:
        """The run starts: its model, settings, policy and queued messages."""
        from .resolve import unreachable_reason

        self.runs.serving = run
        agent = self.get_agent()
        if run.queue_token is not None:
            self.queue.take(run.queue_token)
        resolved = await self._model_for(run)
        self._try(lambda: run.view.set_model_label(resolved.label))
        # a refused run changes nothing: not the conversation's model (a -m with no key must
        # not stick), not its thinking level, not the conversation (--new)
        model = resolved.model if resolved is not self.resolved else agent.state.model
        refusal = unreachable_reason(model)
        if refusal is not None:
            raise RunRefused(refusal)
        if run.options.new:
            self._reset_conversation()
        if resolved is not self.resolved:  # else keep agent.state.model (get_agent() may set it)
            self.resolved = resolved
            self._configured_model = self.settings.model.strip() or None
            agent.state.model = resolved.model
            if resolved.warning and resolved is not run.options.model:
                run.view.show_notice(resolved.warning, "warning")
        if run.options.thinking:
            self._thinking_override = run.options.thinking
        settings = run_settings(self.settings)
        agent.state.thinking_level = self._thinking_override or settings.thinking
        self._apply_profile(agent, settings.system_prompt, self._instructions_for(run, agent))
        self._refresh_tool_settings()
        await self._prepare_mcp(agent, run)
        if self._approval is not None:
            self._approval.reset_run()  # "Always for this run" ends with the run
            self._approval.timeout_s = settings.approval_timeout or None
        # what this run does to the user's names is one step of %agent undo
        review_for(self.shell).start_run(f"the run of cell [{run.cell}]" if run.cell is not None else "")
        self._try(lambda: run.view.set_policy(run.policy))
        for item in self.queue.items():
            if item.owner is run and item.message is not None:
                self._hand_to_agent(item.kind, item.message)  # queued while it waited
            elif item.kind == "prompt":
                self.queue.rehome(item, run.view)  # runs still waiting show up here
        return agent

    def _instructions_for(self, run: Run, agent: Agent) -> str:
        """AGENTS.md and AgentMagics.instructions, read when a conversation starts and kept
        for it (magics/instructions.py); never fails a run."""
        if self.instructions is None or not agent.state.messages:
            from .instructions import load_instructions
            from .mcp_run import notebook_dir

            try:
                self.instructions = load_instructions(
                    notebook_dir(self.shell, self.settings.notebook_path.strip()), self.settings.instructions)
            except Exception as exc:
                from .instructions import Instructions

                self.instructions = Instructions(notices=[f"Project instructions not read: {exc}"])
            for text in self.instructions.notices:
                self._notice(run, text)
        return "\n\n" + self.instructions.text if self.instructions.text else ""

    def _notice(self, run: Run, text: str) -> None:
        self._try(lambda: run.view.show_notice(text, "warning"))

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

    def prompt_message(self, run: Run) -> AgentMessage:
        """The run's user message, with the notebook context of this moment as its note."""
        message = self._noted_message(run.text, run.hidden_request)
        run.prompt_message = self._latest_prompt = message
        return message

    def _noted_message(self, text: str, hidden_request: str | None = None) -> AgentMessage:
        from .context import noted_message

        agent = self.get_agent()
        assert self._notes is not None
        return noted_message(self.shell, self._notes, text, self.settings_now(),
                             hidden_request=hidden_request,
                             offered=[t.name for t in agent.state.tools], log=self._log)

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

    def _refresh_tool_settings(self) -> None:
        if self._tool_settings is not None:
            from .settings import update_python_tool_settings

            update_python_tool_settings(self._tool_settings, self.settings)

    def finish(self, run: Run, status: RunStatus) -> None:
        """The run ended: what is still queued for it is dropped, its view frozen."""
        for item in self.queue.of(run):
            self.queue.take(item.token)
        if self.runs.serving is run:
            self.runs.serving = None
            if self.agent is not None and self.agent.signal is None:
                self.agent.clear_all_queues()
        run.shown.freeze(status)
        run.ended = time.monotonic()
        # the newest ended: nothing is left to wait for, a reset asked meanwhile happens now
        if self.runs.ended(run) and self._pending_reset:
            self._pending_reset = False
            self._reset_conversation()

    # --- commands -------------------------------------------------------------------------
    def abort(self) -> None:
        """Abort the run at work and drop every run queued behind it."""
        for pending in [r for r in self.runs.chain() if r.phase == "pending"]:
            pending.abort_requested = True
            self._end_pending(pending, "aborted")
        run = self.runs.serving
        if run is not None and not run.abort_requested:
            run.abort_requested = True
            view = run.view  # "aborting" once: a second abort finds abort_requested set
            self._try(lambda: view.set_status("aborting"))
        if self._preparing_mcp is not None:
            self._preparing_mcp.cancel()
        if self.agent is not None:
            self.agent.abort()
            self.agent.clear_all_queues()

    def _end_pending(self, run: Run, status: RunStatus) -> None:
        """A queued run will not be sent: its view says so now (its task still ends in
        turn, after the runs before it)."""
        for item in self.queue.of(run):
            self.queue.take(item.token)
        reason = not_sent_reason(run)
        if reason is not None and not run.shown.frozen:
            self._try(lambda: run.view.show_notice(reason, "info" if status == "removed" else "warning"))
        run.shown.freeze(status)

    def abort_threadsafe(self, *_: object) -> None:
        self.call_on_loop(self.abort)

    def _abort_from_view(self, run: Run) -> None:
        if run.phase == "pending":  # Abort on a queued cell's view: that cell only
            run.remove()
            self._end_pending(run, "removed")
        elif run.phase == "running":
            self.abort()

    def remove_queued(self, token: str) -> bool:
        item = self.queue.take(token)
        if item is None:
            return False
        if item.kind == "prompt":
            item.owner.remove()
            self._end_pending(item.owner, "removed")
            return True
        if item.message is not None and self.agent is not None:
            return self.agent.remove_queued(item.message)
        return True

    def remove_queued_threadsafe(self, token: object) -> None:
        self.call_on_loop(self.remove_queued, str(token))

    def check_run_outcome(self, run: Run) -> None:
        """For a cell that waited for ``run``: fail the cell when the run ended in error
        (``AgentMagics.raise_on_error``). Its transcript is already in the cell."""
        if self.settings.raise_on_error:
            # at a terminal the error was just printed in the run's text: not again
            run.raise_if_failed(shown=not self.host.has_kernel)

    def _reset_conversation(self) -> None:
        self.get_agent().reset()
        self.instructions = None  # a new conversation reads AGENTS.md afresh
        self._clear_notes()
        self.autosave.close()

    def _clear_notes(self) -> None:
        if self._notes is not None:
            self._notes.clear()

    @property
    def latest_prompt(self) -> AgentMessage | None:
        """The user message the latest started run prompted with (``%agent code``)."""
        return self._latest_prompt

    def reset(self) -> str:
        if self.is_running():
            self.abort()
            self._pending_reset = True
            return "Aborting the run; the conversation is reset when it ends."
        self._reset_conversation()
        return "New conversation."

    def set_model(self, spec: str) -> str:
        from .resolve import resolve_now

        resolved = resolve_now(spec, None, self.settings.base_url.strip() or None,
                               explicit_reason="%agent model")
        assert resolved is not None
        self.get_agent().state.model = resolved.model
        self.resolved = resolved
        self._configured_model = self.settings.model.strip() or None
        note = " (takes effect with the next run)" if self.is_running() else ""
        warning = f"\nwarning: {resolved.warning}" if resolved.warning else ""
        return f"Model: {resolved.label}{note}{warning}"

    def restore(self, messages: list[AgentMessage], model_spec: str | None) -> None:
        """Put a saved conversation into the agent (``%agent load``, ``--resume``)."""
        if self.is_running():
            raise UsageError("%agent load: a run is active; %agent abort first.")
        agent = self.get_agent()
        agent.reset()
        self._clear_notes()
        self.autosave.close()
        agent.state.messages = list(messages)
        if model_spec and not self.settings.model and self.resolved is None:
            try:
                self.set_model(model_spec)
            except UsageError:
                pass  # keep default resolution when the saved model is unavailable here

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
        self.restore(loaded.messages, loaded.header.model)
        return [f"Resumed {info.path.name} ({len(loaded.messages)} messages).", *loaded.warnings]

    def session_dir(self) -> Path:
        return session_dir(self.settings.session_dir)

    def session_name(self) -> str:
        return session_name(self.shell.user_ns or {})

    @property
    def session_path(self) -> Path | None:
        return self.autosave.path

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
            from .mcp_run import notebook_dir

            try:
                instructions = load_instructions(notebook_dir(self.shell, self.settings.notebook_path.strip()),
                                                 self.settings.instructions)
            except Exception:
                return lines
        lines.extend(instructions.status_lines())
        return lines

    def settings_now(self) -> RunSettings:
        return run_settings(self.settings)

    # --- shutdown -------------------------------------------------------------------------
    def close(self) -> None:
        """``%unload_ext``: abort, cancel our tasks, unsubscribe, close the session file."""
        tasks = [r.task for r in self.runs.chain() if r.task is not None]
        self.abort()
        for task in tasks:
            if not task.done():
                task.cancel()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self.autosave.close()
        for stop in self.on_close:  # e.g. %agent serve's server stops with the extension
            self._try(stop)
        self.on_close.clear()
        if self._mcp is not None:  # servers stop with the extension (their own tasks leave them)
            link, self._mcp = self._mcp, None
            link.close_soon(self.kernel_loop.loop)

    # --- helpers --------------------------------------------------------------------------
    def _try(self, call: Callable[[], object]) -> None:
        """Call into a view; a broken (or older) view must not break the run."""
        try:
            call()
        except Exception as exc:
            self._log(f"pi_notebook view call failed: {exc!r}")

    def _log(self, text: str) -> None:
        self.host.log_warning(text)


def _stdin_is_a_terminal() -> bool:
    import sys

    try:
        return bool(sys.stdin is not None and sys.stdin.isatty())
    except (AttributeError, ValueError):  # replaced or closed
        return False
