"""The items of a run's transcript, as plain data (no widgets, no HTML).

:class:`StreamText` holds text that streams in; the live view's renderers remember
how much of it they have consumed, so each flush takes only what is new.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Literal

from ._util import fmt_seconds
from .protocol import NoticeLevel, QueueKind

if TYPE_CHECKING:
    from ..agent.types import AgentMessage

__all__ = ["StreamText", "Item", "UserItem", "UserKind", "NoticeItem", "OtherItem", "TextItem", "ThinkingItem",
           "QueuedRow", "USER_LABELS", "CHECK_LABEL"]

# who wrote a user-role row: the user (how it reached the agent), or pi_notebook's run
# checks (agent/types.CheckMessage), which are the product's words, never "You"
UserKind = QueueKind | Literal["check"]
CHECK_LABEL = "pi_notebook check"
USER_LABELS: dict[str, str] = {"prompt": "You", "steer": "Steer", "followup": "Follow-up", "check": CHECK_LABEL}
_keys = itertools.count(1)


class StreamText:
    """Streaming text: deltas are appended in O(1); a reader that remembers how many
    parts it consumed (and the ``epoch``) takes only what is new."""

    def __init__(self, text: str = "") -> None:
        self.parts: list[str] = [text] if text else []
        self.epoch = 0  # bumped when the text is replaced by one that is not an extension
        self.final = False

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def append(self, delta: str) -> None:
        if delta:
            self.parts.append(delta)

    def set_text(self, text: str) -> None:
        """Replace the whole text (e.g. the final ``text_end`` content)."""
        current = self.text
        if text == current:
            return
        if text.startswith(current):
            self.parts.append(text[len(current):])
        else:  # the provider rewrote earlier text: readers start over
            self.parts = [text]
            self.epoch += 1


class Item:
    """One transcript entry. ``key`` identifies it for change tracking."""

    frozen: bool = False

    def __init__(self) -> None:
        self.key = next(_keys)


class UserItem(Item):
    """A prompt, steering or follow-up message (``source``: the agent message it stands for)."""

    frozen = True

    def __init__(self, text: str, kind: UserKind = "prompt", images: int = 0) -> None:
        super().__init__()
        self.text, self.kind, self.images = text, kind, images
        self.source: AgentMessage | None = None

    @property
    def label(self) -> str:
        return USER_LABELS.get(self.kind, "You")


class NoticeItem(Item):
    frozen = True

    def __init__(self, text: str, level: NoticeLevel = "info") -> None:
        super().__init__()
        self.text, self.level = text, level


class OtherItem(Item):
    """A custom agent message (a role pi_notebook does not know)."""

    frozen = True

    def __init__(self, role: str, text: str) -> None:
        super().__init__()
        self.role, self.text = role, text


class TextItem(Item):
    """Assistant text (Markdown), live while its block streams."""

    def __init__(self, text: str = "", *, now: float = 0.0) -> None:
        super().__init__()
        self.stream = StreamText(text)

    @property
    def text(self) -> str:
        return self.stream.text

    def finish(self, text: str | None = None) -> None:
        if text is not None:
            self.stream.set_text(text)
        self.stream.final = True
        self.frozen = True


class ThinkingItem(TextItem):
    """Model reasoning; ``seconds`` is how long it streamed."""

    def __init__(self, text: str = "", redacted: bool = False, *, now: float = 0.0) -> None:
        super().__init__(text)
        self.redacted = redacted
        self.started = now
        self.seconds: float | None = None

    def finish_at(self, now: float, text: str | None = None) -> None:
        if self.seconds is None:
            self.seconds = now - self.started
        self.finish(text)

    @property
    def title(self) -> str:
        if self.redacted:
            return "Thinking (redacted by the provider)"
        if not self.frozen:
            return "Thinking…"
        if not self.seconds or self.seconds < 0.1:  # not streamed: no meaningful duration
            return "Thinking"
        return f"Thought for {fmt_seconds(self.seconds)}"

    def preview(self, lines: int = 3, width: int = 400) -> str:
        """The last few lines while it streams (shown above the collapsed full text)."""
        text = self.text.rstrip()
        tail = text[-width * lines:]
        return "\n".join(tail.splitlines()[-lines:])


class QueuedRow:
    def __init__(self, kind: QueueKind, text: str, token: str) -> None:
        self.kind, self.text, self.token = kind, text, token
