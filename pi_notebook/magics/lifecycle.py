"""One run: a task on the kernel loop that answers one prompt, then keeps going while
messages are queued (a ``%steer`` arriving after the loop's last poll still gets its turn).

A run may have to wait first: a ``%%agent`` cell queued behind a busy run is its own
:class:`Run` with its own options (model, thinking, approval), chained ``after`` the
run before it, and it starts only once that one ended ``done``. ``--new`` chains too,
but starts whatever the old run's outcome.

The body (:func:`drive`) calls back into its coordinator only through :class:`RunSteps`;
:func:`final_status` is the one place that turns how a run ended into its status.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from IPython.core.error import UsageError

from ..levels import AgentThinkingLevel
from ..tools.trust.policy import ApprovalPolicy
from ..widgets.protocol import NoticeLevel, QueueKind, RunStatus, RunView
from .display import DisplayedView

if TYPE_CHECKING:
    from ..agent import Agent
    from ..agent.types import AgentMessage
    from ..review.undo import RunRecord
    from .resolve import ResolvedModel

__all__ = ["IN_AGENT_RUN", "Run", "RunOptions", "RunSteps", "RunRefused", "AgentRunError",
           "drive", "final_status", "not_sent_reason"]

# True inside a run task (and every task it starts, e.g. the python tool's code): the
# wait-for-run input transformer must not make agent code wait for its own run.
IN_AGENT_RUN: contextvars.ContextVar[bool] = contextvars.ContextVar("pi_notebook_in_agent_run",
                                                                    default=False)

Phase = Literal["pending", "running", "ended"]


class RunRefused(Exception):
    """The run cannot reach a model (no model found, no API key): it ends in ``error``
    before anything is added to the conversation."""


class AgentRunError(UsageError):
    """A blocking run ended in ``error`` (``AgentMagics.raise_on_error``): the cell fails
    with one line, like any failing cell, so nbclient/papermill stop."""

    def _render_traceback_(self) -> list[str]:
        # raised from the wait that follows the cell's code, where IPython would otherwise
        # print a traceback through pi_notebook's internals
        return [f"{type(self).__name__}: {self}"]


@dataclass(frozen=True)
class RunOptions:
    """What the ``%%agent`` line asked for, kept with the prompt it carries."""

    model: ResolvedModel | None = None  # named in the cell (-m): already looked up
    base_url: str | None = None  # a bare --base-url: the model is asked of the server at start
    thinking: AgentThinkingLevel | None = None
    approve: ApprovalPolicy | None = None
    new: bool = False


@dataclass(eq=False)
class Run:
    text: str
    kind: QueueKind
    shown: DisplayedView
    options: RunOptions
    policy: ApprovalPolicy  # the approval policy for every tool call this run makes
    interactive: bool  # can a human click approval buttons?
    cell: int | None = None  # execution count of the cell that started it
    after: Run | None = None  # waits for this run to end first
    needs_success: bool = False  # a queued cell: sent only when `after` ended "done"
    task: asyncio.Task[None] | None = None
    phase: Phase = "pending"
    status: RunStatus = "queued"
    error: str | None = None  # one line, when status is "error"
    abort_requested: bool = False
    removed: bool = False  # taken out of the queue before it started
    queue_token: str | None = None  # its row in the queue while pending
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None  # when its view was frozen (time.monotonic)
    # text for the model only, beside the prompt (the full %agent fix request): the view
    # and the transcript keep the short ``text``
    hidden_request: str | None = None
    # the user message this run prompted with (set when it starts): where its messages begin
    prompt_message: AgentMessage | None = None
    # what it did to the user's names, for an undo (review/undo.py; set when it starts)
    undo_record: RunRecord | None = None

    @property
    def view(self) -> RunView:
        return self.shown.view

    def seconds(self) -> float | None:
        """How long it ran, once it has ended (from its start, or from its cell when it
        never started)."""
        return self.ended - self.started if self.ended is not None else None

    def finished(self) -> bool:
        return self.task is not None and self.task.done()

    def remove(self) -> None:
        """Take a pending run out of the queue: it is not sent, and ends (in turn) as
        "removed"."""
        self.removed = True

    def raise_if_failed(self, *, shown: bool = False) -> None:
        """Raise :class:`AgentRunError` (one line) if the run ended in ``error``; ``shown``:
        the error was just printed right above, so the line does not repeat it."""
        if self.status == "error":
            if shown:
                raise AgentRunError("The agent run failed (the error is printed above).")
            detail = (self.error or "see the transcript above").replace("\n", " ")
            raise AgentRunError(f"The agent run failed: {detail}")

    @staticmethod
    def chain(newest: Run | None) -> Iterator[Run]:
        """``newest`` and every run it waits for, newest first."""
        while newest is not None:
            yield newest
            newest = newest.after

    def predecessor(self) -> Run | None:
        """The nearest earlier run that was really sent (removed runs are skipped)."""
        run = self.after
        while run is not None and run.removed:
            run = run.after
        return run


class RunSteps(Protocol):
    """What the body needs from its coordinator (the Runtime)."""

    async def prepare(self, run: Run) -> Agent:
        """Model, settings, policy and queue for ``run``: the Agent to prompt, ready.
        Raises RunRefused when no request could succeed."""

    def prompt_message(self, run: Run) -> AgentMessage:
        """The user message ``run`` prompts with (its notebook-context note attached)."""

    def finish(self, run: Run, status: RunStatus) -> None:
        """Drop what is left queued for ``run``, freeze its view, forget it."""


def final_status(run: Run, *, sent: bool = True, last: AgentMessage | None = None,
                 failure: str | None = None) -> tuple[RunStatus, str | None]:
    """How ``run`` ended: (status, one-line error or None). ``sent``: it started at all;
    ``last``: the conversation's last message; ``failure``: why it failed before or
    outside the model (refused, an exception)."""
    if not sent:
        return ("aborted" if run.abort_requested else "removed"), None
    if failure is not None:
        return "error", failure
    reason = getattr(last, "stop_reason", None)
    if run.abort_requested or reason == "aborted":
        return "aborted", None
    if reason == "error":
        return "error", (getattr(last, "error_message", None) or "the model request failed")
    return "done", None


async def _wait_turn(run: Run) -> None:
    """Wait until the run before it ended. Every run's task ends after its predecessor's
    (a removed run too), so the newest run's task is the one a waiting cell awaits."""
    before = run.after
    if before is not None and before.task is not None and not before.task.done():
        await asyncio.wait({before.task})


def not_sent_reason(run: Run) -> str | None:
    """Why a pending run is not sent, or None when it may start."""
    if run.abort_requested:
        return "Not sent: aborted before it started."
    if run.removed:
        return "Removed from the queue before it was sent."
    before = run.predecessor()
    if run.needs_success and before is not None and before.status != "done":
        return "Not sent: the run before it did not finish (aborted or failed)."
    return None


async def drive(run: Run, steps: RunSteps) -> None:
    """The run task's body (module docstring). Never raises but for cancellation."""
    IN_AGENT_RUN.set(True)
    status: RunStatus = "done"
    error: str | None = None
    agent: Agent | None = None
    try:
        await _wait_turn(run)
        reason = not_sent_reason(run)
        if reason is not None:
            status, error = final_status(run, sent=False)
            if not run.shown.frozen:  # (a removed run's view was ended at once)
                _notice(run, reason, "info" if run.removed and not run.abort_requested else "warning")
            return
        run.phase = "running"
        run.started = time.monotonic()
        agent = await steps.prepare(run)
        if not run.abort_requested:
            run.view.set_status("thinking")
            await agent.prompt(steps.prompt_message(run))
            while (not run.abort_requested and agent.has_queued_messages()
                   and getattr(_last(agent), "stop_reason", None) != "aborted"):
                await agent.continue_()
        status, error = final_status(run, last=_last(agent))
    except asyncio.CancelledError:  # the task itself was cancelled (unload)
        run.abort_requested = True
        status, error = final_status(run, sent=agent is not None)
        if agent is not None:
            agent.abort()
        raise
    except RunRefused as exc:
        status, error = final_status(run, failure=str(exc))
        _notice(run, str(exc), "error")
    except Exception as exc:
        status, error = final_status(run, failure=f"{type(exc).__name__}: {exc}")
        _notice(run, f"The run failed: {error}", "error")
    finally:
        run.status = status
        run.error = error
        run.phase = "ended"
        steps.finish(run, status)


def _last(agent: Agent) -> AgentMessage | None:
    messages = agent.state.messages
    return messages[-1] if messages else None


def _notice(run: Run, text: str, level: NoticeLevel) -> None:
    try:
        run.view.show_notice(text.replace("\n", " "), level)
    except Exception:
        pass  # a broken view: the status still says what happened
