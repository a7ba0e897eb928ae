"""TextView: the view without a widget frontend (terminal IPython), plain text on stdout.

It implements ``RunView`` like ``AgentView``. User messages print when the agent
emits them, labelled with the kind the runtime told us: each ``add_user_message`` /
``deliver_queued`` call labels the next user message, in order (never by text).

Approvals are asked at the terminal (``input()``: y / N / a), since the cell blocks while
its run goes on; Ctrl-D or Ctrl-C at the question skips the call. An error is printed once:
the final status line does not repeat it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..agent.types import (AgentEndEvent, CheckMessage, MessageEndEvent, MessageStartEvent, ToolExecutionEndEvent,
                           llm_message)
from ..ai.types import UserMessage
from ._util import reveal_invisible, strip_control
from ..tools.trust.policy import ApprovalChoice, ApprovalPolicy
from .protocol import NoticeLevel, QueueKind, RunStatus
from .text import render_event_text
from .transcript import NO_RESULT_MARK

if TYPE_CHECKING:
    from ..agent.types import AgentEvent
    from ..tools.trust.approval import ApprovalRequest

__all__ = ["TextView"]


_ANSWERS: dict[str, ApprovalChoice] = {"y": "run", "yes": "run", "": "skip", "n": "skip", "no": "skip",
                                       "a": "always", "always": "always"}


class TextView:
    def __init__(self, model_label: str, *, ask: Callable[[str], str] = input) -> None:
        self.model_label = model_label
        self.status: RunStatus = "idle"
        self.policy: ApprovalPolicy | None = None
        self._ask = ask
        self._kinds: deque[QueueKind] = deque()
        self._parts: list[str] = []
        self._error_shown = False  # an error line was printed: the status line does not repeat it
        self._skipped: set[str] = set()  # tool calls declined at the question
        self._failed: list[bool] = []  # per tool call that ran: did it fail? (the final line)
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
        match event:
            case MessageStartEvent(message=message) if (isinstance(llm_message(message), UserMessage)
                                                        and not isinstance(message, CheckMessage)):
                kind = self._kinds.popleft() if self._kinds else "prompt"
            case AgentEndEvent():
                self._kinds.clear()  # labels the agent never used must not label a later message
            case ToolExecutionEndEvent(tool_call_id=tool_call_id, tool_name=tool_name) \
                    if tool_call_id in self._skipped:
                # declined here: its result text is advice to the model, "skipped" says it all
                self._write(f"[{strip_control(tool_name or 'tool')} skipped]\n")
                return
            case ToolExecutionEndEvent(is_error=is_error):
                self._failed.append(is_error)
        text = render_event_text(event, user_kind=kind)
        if isinstance(event, MessageEndEvent) and text and text.startswith(("\n[error]", "\n[aborted]")):
            self._error_shown = True
        self._write(text)

    def add_user_message(self, text: str, kind: QueueKind = "prompt") -> None:
        self._kinds.append(kind)  # printed when the agent emits it

    def show_queued(self, kind: QueueKind, text: str, token: str) -> None:
        self._write(f"\n[queued {kind}] {text}\n")

    def deliver_queued(self, token: str, text: str, kind: QueueKind) -> None:
        self._kinds.append(kind)

    def remove_queued(self, token: str) -> None:
        pass

    async def request_approval(self, request: ApprovalRequest) -> ApprovalChoice:
        """Ask at the terminal (the code was printed with the call). Blocking the loop is
        what the cell does anyway: nothing else runs while the run waits for the answer."""
        name = reveal_invisible(strip_control(request.tool_name or "tool"))
        while True:
            try:
                answer = self._ask(f"Run this {name} call? [y]es / [N]o, skip / [a]lways for this run: ")
            except (EOFError, KeyboardInterrupt):
                self._write("\n")
                self._skipped.add(request.tool_call_id)
                return "skip"
            choice = _ANSWERS.get(answer.strip().lower())
            if choice is not None:
                if choice == "skip":
                    self._skipped.add(request.tool_call_id)
                return choice
            self._write("Please answer y, n or a.\n")

    def set_status(self, status: RunStatus, detail: str = "") -> None:
        self.status = status

    def set_policy(self, policy: ApprovalPolicy) -> None:
        if policy != self.policy:
            self.policy = policy
            self._write(f"[approval: {policy}]\n")

    def show_notice(self, text: str, level: NoticeLevel = "info") -> None:
        if level == "error":
            self._error_shown = True
        self._write(f"\n[{level}] {text}\n")

    def set_context_usage(self, used: int | None, window: int | None = None) -> None:
        pass

    def finish(self, status: RunStatus | None = None) -> None:
        self.status = status or "done"
        if self.status in ("error", "aborted") and self._error_shown:
            return  # the line that said what went wrong was the status line
        if self.status == "done" and self._failed and all(self._failed):
            # answered, but on no result: the same words as the widget's pill (transcript.py)
            self._write(f"\n[done {NO_RESULT_MARK}: every tool call failed]\n")
            return
        self._write(f"\n[{self.status}]\n")

    def to_markdown(self) -> str:
        return "".join(self._parts)

    def to_text(self) -> str:
        return "".join(self._parts)

    def close(self) -> None:
        pass
