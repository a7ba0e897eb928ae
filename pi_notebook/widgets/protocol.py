"""The contract between the run lifecycle (``magics/``) and whatever shows a run.

Both views implement it: :class:`~pi_notebook.widgets.view.AgentView` (ipywidgets, in a
notebook frontend) and :class:`~pi_notebook.widgets.text_view.TextView` (terminal IPython).
Runtime code is typed against :class:`RunView` only, so a third view (a test double, a
log) needs nothing else.

Every method is called on the kernel loop thread. Queued messages are owned by the
prompt queue in ``magics/``: it tells the view that a row was queued
(:meth:`RunView.show_queued`), delivered (:meth:`RunView.deliver_queued`) or dropped
(:meth:`RunView.remove_queued`) by *token*; a view never matches queued rows by text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from ..tools.trust.policy import ApprovalChoice, ApprovalPolicy

if TYPE_CHECKING:
    from ..agent.types import AgentEvent
    from ..tools.trust.approval import ApprovalRequest

__all__ = ["RunStatus", "QueueKind", "NoticeLevel", "ApprovalChoice", "RunView", "MimeBundle", "Publish"]

# What the status pill shows. "queued": a %%agent cell waiting behind a running one;
# "removed": a queued cell taken out of the queue before it was sent.
RunStatus = Literal["idle", "queued", "thinking", "writing", "running tool",
                    "waiting for approval", "aborting", "done", "aborted", "error", "removed"]
# How a user message reached the agent.
QueueKind = Literal["prompt", "steer", "followup"]
NoticeLevel = Literal["info", "warning", "error"]
# ApprovalChoice, the approval panel's answers, is tools/trust/policy.py's (re-exported here).

# A Jupyter display bundle (MIME type -> data): JSON whose shape depends on the MIME type,
# so its values are ``object`` and every reader checks what it got.
MimeBundle = Mapping[str, object]
# How a view replaces the bundle it was displayed with (the displayer's ``update_display``).
Publish = Callable[[dict[str, object]], None]


@runtime_checkable
class RunView(Protocol):
    """What the run lifecycle needs from a view of one ``%%agent`` cell."""

    def handle_event(self, event: AgentEvent) -> None:
        """Render one agent event (the Agent's listener fans every event out here)."""

    def add_user_message(self, text: str, kind: QueueKind = "prompt") -> None:
        """The prompt this view's run was started with (shown once, labelled by kind)."""

    def show_queued(self, kind: QueueKind, text: str, token: str) -> None:
        """A ``%steer``/``%followup``/queued ``%%agent`` prompt waits in the queue."""

    def deliver_queued(self, token: str, text: str, kind: QueueKind) -> None:
        """The queued row ``token`` was handed to the model: it becomes a user message."""

    def remove_queued(self, token: str) -> None:
        """The queued row ``token`` will not be sent (removed, or the run ended)."""

    async def request_approval(self, request: ApprovalRequest) -> ApprovalChoice:
        """Ask the user whether the tool call may run; resolves when they answer."""

    def set_status(self, status: RunStatus, detail: str = "") -> None:
        """Set the status pill."""

    def set_model_label(self, label: str) -> None:
        """The model this run uses, once known (it may be found only after the view shows)."""

    def set_policy(self, policy: ApprovalPolicy) -> None:
        """The approval policy in force for this run (shown in the header)."""

    def show_notice(self, text: str, level: NoticeLevel = "info") -> None:
        """A one-line message from the runtime (compaction, autosave stopped, ...)."""

    def set_context_usage(self, used: int | None, window: int | None = None) -> None:
        """Tokens in the context window after the latest assistant message."""

    def finish(self, status: RunStatus | None = None) -> None:
        """The run ended: final status, stop timers, disable live controls."""

    def to_markdown(self) -> str:
        """The static transcript that replaces the live view when the run ends."""

    def close(self) -> None:
        """Release every frontend resource (widget models); the view is not used again."""
