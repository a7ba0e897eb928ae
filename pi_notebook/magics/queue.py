"""The prompt queue: the single owner of every queued message.

A queued item is a ``%steer``/``%followup`` message (handed to the Agent's own queue,
delivered at a turn boundary) or a ``%%agent`` cell waiting for its own run (kind
``"prompt"``). Each item has a token, and the view that shows it as a queued row (its
*origin*) is told about it by token only: queued, delivered, removed. Which queued
message the agent just delivered is decided here, once, by message identity; views
never match queued rows by text, so two identical ``%steer`` texts bind to their own rows.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from ..widgets.protocol import QueueKind, RunView

if TYPE_CHECKING:
    from ..agent.types import AgentMessage

__all__ = ["QueuedPrompt", "PromptQueue"]

Owner = TypeVar("Owner")


@dataclass(eq=False)
class QueuedPrompt(Generic[Owner]):
    token: str
    kind: QueueKind
    text: str
    origin: RunView  # the view showing the queued row
    owner: Owner  # the run it belongs to (a pending run's own record for kind "prompt")
    message: AgentMessage | None = None  # the object handed to the Agent (matched by identity)


class PromptQueue(Generic[Owner]):
    def __init__(self) -> None:
        self._items: dict[str, QueuedPrompt[Owner]] = {}
        self._tokens = itertools.count(1)

    def __len__(self) -> int:
        return len(self._items)

    def items(self) -> list[QueuedPrompt[Owner]]:
        return list(self._items.values())

    def add(self, kind: QueueKind, text: str, origin: RunView, owner: Owner,
            message: AgentMessage | None = None) -> QueuedPrompt[Owner]:
        """Queue an item and show its row in ``origin``."""
        item = QueuedPrompt(f"q{next(self._tokens)}", kind, text, origin, owner, message)
        self._items[item.token] = item
        origin.show_queued(kind, text, item.token)
        return item

    def delivered(self, message: AgentMessage) -> QueuedPrompt[Owner] | None:
        """The agent is about to show ``message``: if it was queued here, the item leaves
        the queue and its row becomes a user message in its view."""
        item = next((i for i in self._items.values() if i.message is message), None)
        if item is None:
            return None  # a run's own prompt (already shown) or a message from elsewhere
        del self._items[item.token]
        item.origin.deliver_queued(item.token, item.text, item.kind)
        return item

    def take(self, token: str) -> QueuedPrompt[Owner] | None:
        """Remove an item (the user's remove button, a started pending run); its row goes."""
        item = self._items.pop(token, None)
        if item is not None:
            item.origin.remove_queued(token)
        return item

    def of(self, owner: Owner) -> list[QueuedPrompt[Owner]]:
        return [i for i in self._items.values() if i.owner is owner]

    def rehome(self, item: QueuedPrompt[Owner], view: RunView) -> None:
        """Show a still-queued item in ``view`` instead (its old view's run ended)."""
        if item.origin is view:
            return
        item.origin.remove_queued(item.token)
        item.origin = view
        view.show_queued(item.kind, item.text, item.token)
