"""The view without a widget frontend (terminal IPython): plain text on stdout.

TEMPORARY COPY in the `magics` branch so its tests run; the `widgets` branch owns
this file (same constructor ``TextView(model_label)``, the RunView protocol).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .protocol import ApprovalChoice, NoticeLevel, QueueKind, RunStatus
from .text import render_event_text

if TYPE_CHECKING:
    from ..agent.types import AgentEvent
    from ..tools.approval import ApprovalRequest

__all__ = ["TextView"]


class TextView:
    """User messages print when the agent emits them, labelled with the kind the runtime
    announced for them (``add_user_message`` / ``deliver_queued``)."""

    def __init__(self, model_label: str) -> None:
        self.model_label = model_label
        self._next_kind: list[QueueKind] = []
        self._parts: list[str] = []
        print(f"[agent: {model_label}]")

    def _write(self, text: str | None) -> None:
        if text:
            self._parts.append(text)
            print(text, end="", flush=True)

    def handle_event(self, event: AgentEvent) -> None:
        kind = None
        if event.type == "message_start" and getattr(event.message, "role", "") == "user":
            kind = self._next_kind.pop(0) if self._next_kind else "prompt"
        self._write(render_event_text(event, user_kind=kind))

    def add_user_message(self, text: str, kind: QueueKind = "prompt") -> None:
        self._next_kind.append(kind)  # printed when the agent emits it

    def show_queued(self, kind: QueueKind, text: str, token: str) -> None:
        self._write(f"\n[queued {kind}] {text}\n")

    def deliver_queued(self, token: str, text: str, kind: QueueKind) -> None:
        self._next_kind.append(kind)

    def remove_queued(self, token: str) -> None:
        pass

    async def request_approval(self, request: ApprovalRequest) -> ApprovalChoice:
        return "skip"  # nobody can click here; the approval hook fails closed before this

    def set_status(self, status: RunStatus, detail: str = "") -> None:
        pass

    def set_model_label(self, label: str) -> None:
        if label != self.model_label:
            self.model_label = label
            self._write(f"[model: {label}]\n")

    def set_policy(self, policy: str) -> None:
        pass

    def show_notice(self, text: str, level: NoticeLevel = "info") -> None:
        self._write(f"\n[{level}] {text}\n")

    def set_context_usage(self, used: int | None, window: int | None = None) -> None:
        pass

    def finish(self, status: RunStatus | None = None) -> None:
        self._write(f"\n[{status or 'done'}]\n")

    def to_markdown(self) -> str:
        return "".join(self._parts)

    def close(self) -> None:
        pass
