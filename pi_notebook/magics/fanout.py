"""The Agent's one listener: every event goes to the view of the run being answered.

On the way it autosaves finished messages, tells the prompt queue when a queued user
message is delivered, and updates the view's context meter. It never raises: a view or
autosave problem must not turn into a failed run.
"""

from __future__ import annotations

from collections.abc import Callable

from ..agent.types import AgentEvent, MessageEndEvent, MessageStartEvent
from ..ai.types import AssistantMessage, UserMessage, usage_total_tokens
from .autosave import Autosave
from .lifecycle import Run
from .queue import PromptQueue

__all__ = ["EventFanout"]


class EventFanout:
    def __init__(self, *, serving: Callable[[], Run | None], queue: PromptQueue[Run],
                 autosave: Autosave, context_window: Callable[[], int],
                 log: Callable[[str], None]) -> None:
        self._serving = serving
        self._queue = queue
        self._autosave = autosave
        self._context_window = context_window
        self._log = log

    def __call__(self, event: AgentEvent) -> None:
        if isinstance(event, MessageEndEvent):
            self._autosave.message_ended(event.message)
        run = self._serving()
        if run is None:
            return
        if isinstance(event, MessageStartEvent) and isinstance(event.message, UserMessage):
            try:
                self._queue.delivered(event.message)
            except Exception as exc:
                self._log(f"pi_notebook queued-message delivery failed: {exc!r}")
        view = run.view
        try:
            view.handle_event(event)
            if isinstance(event, MessageEndEvent) and isinstance(event.message, AssistantMessage):
                usage = event.message.usage
                window = self._context_window()
                if window:
                    view.set_context_usage(usage_total_tokens(usage), window)
        except Exception as exc:
            self._log(f"pi_notebook view update failed: {exc!r}")
