"""TextView: the view without a widget frontend (terminal IPython), plain text on stdout.

It implements ``RunView`` like ``AgentView``. User messages print when the agent
emits them, labelled with the kind the runtime told us: each ``add_user_message`` /
``deliver_queued`` call labels the next user message, in order (never by text).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from ._util import field
from .protocol import ApprovalChoice, NoticeLevel, QueueKind, RunStatus
from .text import render_event_text

if TYPE_CHECKING:
    from ..agent.types import AgentEvent
    from ..tools.approval import ApprovalRequest

__all__ = ["TextView"]


class TextView:
    def __init__(self, model_label: str) -> None:
        self.model_label = model_label
        self.status: RunStatus = "idle"
        self.policy: str | None = None
        self._kinds: deque[QueueKind] = deque()
        self._parts: list[str] = []
        self._write(f"[agent: {model_label}]\n")

    def set_model_label(self, label: str) -> None:
        if label != self.model_label:
            self.model_label = label
            self._write(f"[model: {label}]\n")

    def _write(self, text: str | None) -> None:
        if text:
            self._parts.append(text)
            print(text, end="", flush=True)

    def handle_event(self, event: AgentEvent) -> None:
        kind: QueueKind | None = None
        etype = field(event, "type")
        if etype == "message_start" and field(field(event, "message"), "role") == "user":
            kind = self._kinds.popleft() if self._kinds else "prompt"
        elif etype == "agent_end":
            self._kinds.clear()  # labels the agent never used must not label a later message
        self._write(render_event_text(event, user_kind=kind))

    def add_user_message(self, text: str, kind: QueueKind = "prompt") -> None:
        self._kinds.append(kind)  # printed when the agent emits it

    def show_queued(self, kind: QueueKind, text: str, token: str) -> None:
        self._write(f"\n[queued {kind}] {text}\n")

    def deliver_queued(self, token: str, text: str, kind: QueueKind) -> None:
        self._kinds.append(kind)

    def remove_queued(self, token: str) -> None:
        pass

    async def request_approval(self, request: ApprovalRequest) -> ApprovalChoice:
        return "skip"  # nobody can click here; the approval hook fails closed before this

    def set_status(self, status: RunStatus, detail: str = "") -> None:
        self.status = status

    def set_policy(self, policy: str) -> None:
        if policy != self.policy:
            self.policy = policy
            self._write(f"[approval: {policy}]\n")

    def show_notice(self, text: str, level: NoticeLevel = "info") -> None:
        self._write(f"\n[{level}] {text}\n")

    def set_context_usage(self, used: int | None, window: int | None = None) -> None:
        pass

    def finish(self, status: RunStatus | None = None) -> None:
        self.status = status or "done"
        self._write(f"\n[{self.status}]\n")

    def to_markdown(self) -> str:
        return "".join(self._parts)

    def close(self) -> None:
        pass
