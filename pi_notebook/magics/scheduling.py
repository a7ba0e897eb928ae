"""The scheduling of runs: start a run, queue one behind another, hand ``%steer`` and
``%followup`` to the run at work, abort, remove from the queue, and end a run.

:class:`RunScheduler` is what ``lifecycle.drive`` calls back into (it implements
:class:`~.lifecycle.RunSteps`); the conversation (conversation.py) readies the Agent for
each run, and the kernel side (kernel_side.py) shows views and guards the Stop button.
It alone moves runs along in the shared :class:`~.runs.Runs` and owns the
:class:`~.queue.PromptQueue`'s prompt rows.

Everything here runs on the kernel loop thread, except the ``*_threadsafe`` entry point
a widget handler calls. Model resolution (the catalogue) is imported on first use, so
``%load_ext`` stays cheap.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Protocol

from ..widgets.protocol import QueueKind, RunStatus
from .args import AgentArgs
from .kernel_side import KernelSide
from .lifecycle import Run, RunOptions, drive, not_sent_reason
from .queue import PromptQueue
from .runs import AbortFromView, Runs
from .undo_offers import UndoOffers

if TYPE_CHECKING:
    from ..agent import Agent
    from ..agent.types import AgentMessage
    from .config import AgentMagics
    from .resolve import ResolvedModel
    from .settings import RunSettings

__all__ = ["RunScheduler", "RunConversation", "cell_options"]

_CHOOSING = "choosing a model…"


def cell_options(args: AgentArgs, settings: AgentMagics) -> RunOptions:
    """What a ``%%agent`` line asks of its run; a model named with ``-m`` is looked up now
    (a misspelt one fails the cell before anything starts)."""
    from .resolve import resolve_now

    base_url = args.base_url or settings.base_url or None
    named = resolve_now(args.model, None, base_url) if args.model else None
    return RunOptions(model=named, base_url=args.base_url if named is None else None,
                      thinking=args.thinking, approve=args.approve, new=args.new)


class RunConversation(Protocol):
    """What the scheduling of runs asks of the conversation (conversation.py's
    :class:`~.conversation.Conversation` is the one)."""

    async def ready_for(self, run: Run) -> Agent:
        """The Agent, readied for ``run`` (raises RunRefused)."""

    def prompt_message(self, run: Run) -> AgentMessage: ...
    def noted_message(self, text: str, hidden_request: str | None = None) -> AgentMessage: ...
    def hand_to_agent(self, kind: QueueKind, message: AgentMessage) -> None: ...
    def remove_queued(self, message: AgentMessage) -> bool: ...
    def abort(self) -> None: ...
    def run_ended(self) -> None: ...
    def reset(self) -> None: ...
    def current_model(self) -> ResolvedModel | None: ...
    def context_window(self) -> int: ...
    def settings_now(self) -> RunSettings: ...


class RunScheduler:
    def __init__(self, kernel: KernelSide, conversation: RunConversation, runs: Runs,
                 queue: PromptQueue[Run]) -> None:
        self.kernel = kernel
        self.conversation = conversation
        self.runs = runs  # which run is the newest, the one served, the latest (runs.py)
        self.queue = queue
        self._pending_reset = False
        # the Undo buttons under finished runs (a run is active while one is "running")
        self.undo_offers = UndoOffers(kernel.shell, lambda: any(r.phase == "running" for r in runs.chain()),
                                      kernel.call_on_loop)

    # --- asking -------------------------------------------------------------------------
    def is_running(self) -> bool:
        run = self.runs.newest
        return run is not None and run.task is not None and not run.task.done()

    # --- starting and queueing ------------------------------------------------------------
    def start_cell(self, prompt: str, options: RunOptions, *, interactive: bool,
                   hidden_request: str | None = None, notices: list[str] | None = None) -> Run:
        """``%%agent``: start a run, or queue one (with this cell's own options) behind the
        busy one; ``--new`` aborts the busy one first. ``hidden_request``: text the model
        gets beside ``prompt`` that the view and the transcript leave out (``%agent fix``);
        ``notices``: lines for the view first (what ``--resume`` loaded)."""
        named = options.model
        busy = self.is_running()
        if busy and options.new:
            self.abort()  # then start fresh once it has ended
        label = named.label if named is not None else self._expected_label(options)
        # queued behind a live run: sent only if that one ends well (behind a run that is
        # being aborted or removed: sent once it has ended, whatever its outcome)
        queued = busy and not options.new and self.runs.live() is not None
        run = self._new_run(prompt, "prompt", options, label, interactive=interactive,
                            queued=queued, chained=busy)
        run.hidden_request = hidden_request
        for line in notices or []:  # what was loaded, and any notice (a cut last line)
            run.view.show_notice(line, "info")
        if named is not None and named.warning:
            run.view.show_notice(named.warning, "warning")
        return run

    def submit(self, kind: QueueKind, text: str, *, interactive: bool) -> Run:
        """``%steer`` / ``%followup``: queue into a run (returned), or start one."""
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
        message = self.conversation.noted_message(text)  # this message's own notebook context
        self.queue.add(kind, text, target.view, target, message)
        if target is serving:
            self.conversation.hand_to_agent(kind, message)
        return target

    def _expected_label(self, options: RunOptions) -> str:
        current = self.conversation.current_model() if options.base_url is None else None
        return current.label if current is not None else _CHOOSING

    def _new_run(self, text: str, kind: QueueKind, options: RunOptions, label: str, *,
                 interactive: bool, queued: bool, chained: bool) -> Run:
        loop = self.kernel.attach_loop()
        on_abort = AbortFromView(lambda run: self.kernel.call_on_loop(self._abort_from_view, run))
        shown = self.kernel.make_view(label, on_abort, self.remove_queued_threadsafe,
                                      self.conversation.context_window())
        policy = options.approve or self.conversation.settings_now().approval
        run = Run(text, kind, shown, options, policy, interactive, cell=self.kernel.cell_number(),
                  after=self.runs.newest if chained else None, needs_success=queued)
        on_abort.run = run
        if not interactive:  # no evidence yet: this view's rendering will be (is_interactive)
            self.kernel.track_rendering(run.view)
        # the prompt before the first display: the static fallback shown with a live view
        # (a notebook saved mid-run) has it from the start
        run.view.add_user_message(text, kind)
        if chained:
            run.view.set_status("queued")
        shown.show()
        if queued:
            # the running view gets a pointer to the waiting cell (whose own view shows the
            # whole prompt), so the same text is not read twice as two requests
            origin = (self.runs.current() or run).view
            run.queue_token = self.queue.add("prompt", waiting_cell_row(run.cell, text), origin, run).token
        self.runs.started(run)
        run.task = loop.create_task(self._drive(run, loop), name="pi_notebook-run")
        run.task.add_done_callback(self._task_done)
        return run

    async def _drive(self, run: Run, loop: asyncio.AbstractEventLoop) -> None:
        with self.kernel.stop_guard(run, loop, self.abort):
            await drive(run, self)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:  # drive() catches everything
            self.kernel.log(f"pi_notebook run task failed: {task.exception()!r}")

    # --- RunSteps: called by lifecycle.drive ----------------------------------------------
    async def prepare(self, run: Run) -> Agent:
        """The run starts: it is served, the conversation readied for it, and what was
        queued for it while it waited goes to the Agent."""
        self._serve(run)
        agent = await self.conversation.ready_for(run)
        self.kernel.try_view(self.undo_offers.refresh)  # no Undo while a run is active
        self._deliver_queued(run)
        return agent

    def _serve(self, run: Run) -> None:
        self.runs.serving = run
        if run.queue_token is not None:
            self.queue.take(run.queue_token)

    def _deliver_queued(self, run: Run) -> None:
        for item in self.queue.items():
            if item.owner is run and item.message is not None:
                self.conversation.hand_to_agent(item.kind, item.message)  # queued while it waited
            elif item.kind == "prompt":
                self.queue.rehome(item, run.view)  # runs still waiting show up here

    def prompt_message(self, run: Run) -> AgentMessage:
        return self.conversation.prompt_message(run)

    def finish(self, run: Run, status: RunStatus) -> None:
        """The run ended: what is still queued for it is dropped, its view frozen."""
        for item in self.queue.of(run):
            self.queue.take(item.token)
        if self.runs.serving is run:
            self.runs.serving = None
            self.conversation.run_ended()
        run.shown.freeze(status)
        if run.interactive:  # a widget frontend is there to click it
            self.kernel.try_view(lambda: self.undo_offers.offer(run.shown, run.undo_record))
        self.kernel.try_view(self.undo_offers.refresh)
        run.ended = time.monotonic()
        # the newest ended: nothing is left to wait for, a reset asked meanwhile happens now
        if self.runs.ended(run) and self._pending_reset:
            self._pending_reset = False
            self.conversation.reset()

    # --- stopping and removing ------------------------------------------------------------
    def abort(self) -> None:
        """Abort the run at work and drop every run queued behind it."""
        for pending in [r for r in self.runs.chain() if r.phase == "pending"]:
            pending.abort_requested = True
            self._end_pending(pending, "aborted")
        run = self.runs.serving
        if run is not None and not run.abort_requested:
            run.abort_requested = True
            view = run.view  # "aborting" once: a second abort finds abort_requested set
            self.kernel.try_view(lambda: view.set_status("aborting"))
        self.conversation.abort()

    def _end_pending(self, run: Run, status: RunStatus) -> None:
        """A queued run will not be sent: its view says so now (its task still ends in
        turn, after the runs before it)."""
        for item in self.queue.of(run):
            self.queue.take(item.token)
        reason = not_sent_reason(run)
        if reason is not None and not run.shown.frozen:
            self.kernel.try_view(lambda: run.view.show_notice(reason, "info" if status == "removed" else "warning"))
        run.shown.freeze(status)

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
        if item.message is not None:
            return self.conversation.remove_queued(item.message)
        return True

    def remove_queued_threadsafe(self, token: object) -> None:
        self.kernel.call_on_loop(self.remove_queued, str(token))

    def reset(self) -> str:
        """A new conversation now, or once the run at work has ended."""
        if self.is_running():
            self.abort()
            self._pending_reset = True
            return "Aborting the run; the conversation is reset when it ends."
        self.conversation.reset()
        return "New conversation."

    def cancel_tasks(self) -> None:
        """``%unload_ext``: abort, and cancel every run's task."""
        tasks = [r.task for r in self.runs.chain() if r.task is not None]
        self.abort()
        for task in tasks:
            if not task.done():
                task.cancel()


def waiting_cell_row(cell: int | None, text: str) -> str:
    """The queued row of a ``%%agent`` cell waiting behind the running one: which cell, and
    the start of its prompt (one line, at most 80 characters)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    first = lines[0] if lines else ""
    cut = len(first) > 80 or len(lines) > 1
    where = f"cell [{cell}]" if cell is not None else "a waiting cell"
    return f"{where} runs next: {first[:80]}{'…' if cut else ''}"
