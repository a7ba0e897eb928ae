"""Per-prompt notebook context that reaches the model but never the saved transcript.

Each ``%%agent`` prompt gets a context block (the last error, the namespace summary, resolved
references: see ``tools/context/prompt_context.py``). It must not become part of the user's text: the
transcript, the view and the export show what the user typed. So the block is kept here, next
to the conversation, keyed by the prompt message, and merged into a *copy* of that message
each time a request is built (the Agent's ``transform_context`` hook):

    notes = PromptNotes()
    message = UserMessage(content=[TextContent(text=prompt)])
    notes.attach(message, block)          # when the run starts
    await agent.prompt(message)
    ...
    messages = notes.apply(messages)      # first step of transform_context

The block stays attached to *its* prompt for the whole conversation, so the request prefix is
the same from one run to the next (providers' prompt caches keep working) and the model can
tell which state of the notebook an old answer was based on. It is merged into the prompt's
own message as a text block placed before the user's text (no extra user message, so roles
keep alternating). Notes live in memory only: a reloaded session has none, which is right,
since the notebook state they described is gone.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ..ai.types import TextContent, get_field
from ..tools.trust.redact import redact

__all__ = ["PromptNotes"]


def _key(message: Any) -> tuple[Any, str] | None:
    if get_field(message, "role") != "user":
        return None
    content = get_field(message, "content")
    if isinstance(content, str):
        text = content
    else:
        text = "\n".join(get_field(b, "text") or "" for b in content or [] if get_field(b, "type") == "text")
    return get_field(message, "timestamp"), text


class PromptNotes:
    """Context notes keyed by their prompt message (its timestamp and text)."""

    def __init__(self, max_notes: int = 64) -> None:
        self.max_notes = max_notes
        self._notes: OrderedDict[tuple[Any, str], str] = OrderedDict()

    def attach(self, message: Any, note: str | None) -> None:
        """Attach ``note`` to the user message ``message`` (a falsy note attaches nothing)."""
        key = _key(message)
        if key is None:
            raise ValueError("PromptNotes.attach needs a user message")
        if not note:
            return
        self._notes[key] = note
        self._notes.move_to_end(key)
        while len(self._notes) > self.max_notes:
            self._notes.popitem(last=False)

    def note_for(self, message: Any) -> str | None:
        key = _key(message)
        return self._notes.get(key) if key is not None else None

    def clear(self) -> None:
        self._notes.clear()

    def apply(self, messages: list[Any]) -> list[Any]:
        """``messages`` with each noted prompt replaced by a copy that carries its note."""
        if not self._notes:
            return messages
        out = []
        for message in messages:
            note = self.note_for(message)
            # redacted as it is sent: a secret that became known after the note was built
            # (a token put in os.environ by a later cell or by agent code) is not sent either
            out.append(message if note is None else _with_note(message, redact(note)))
        return out


def _with_note(message: Any, note: str) -> Any:
    content = get_field(message, "content")
    blocks = [TextContent(text=content)] if isinstance(content, str) else list(content or [])
    if isinstance(message, dict):
        dict_blocks = [b.model_dump() if isinstance(b, TextContent) else b for b in blocks]
        return {**message, "content": [{"type": "text", "text": note}, *dict_blocks]}
    return message.model_copy(update={"content": [TextContent(text=note), *blocks]})
