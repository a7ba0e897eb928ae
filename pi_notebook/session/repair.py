"""A loaded transcript made valid: every tool call has exactly one result, right after it.

A session file can end between an assistant message that calls a tool and that call's
result (the kernel stopped while the call waited for approval, or ran), lose a line to a
crash (a torn last line), or hold a result whose call is gone. Every provider refuses such a
transcript, and a later user message appended after a call without a result makes it
permanent. So the loader repairs it once, in pi's terms:

- a call without a result gets an error result saying it never ran, placed right after
  its assistant message (after the results it does have), before any later message;
- a result that arrived after a later message is moved back next to its call;
- a result with no call before it (or a second result for the same call) is dropped.

The file itself is never rewritten; ``repair_transcript`` returns the repaired list and one
line telling the user what changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..ai.types import TextContent, ToolResultMessage, get_field

__all__ = ["NEVER_RAN_TEXT", "RepairedTranscript", "repair_transcript"]

# what the model and the user read in place of the missing result
NEVER_RAN_TEXT = ("Not run: the session ended before this tool call ran, so it has no result. "
                  "(Had it started, its result was not saved.)")


@dataclass
class RepairedTranscript:
    messages: list[Any]
    never_ran: list[str]  # names of the tools whose calls got a "never ran" result
    moved: int  # results moved back next to their call
    dropped: int  # results without a call before them, or second results for one call

    @property
    def notice(self) -> str | None:
        """One line for the user, or None when the transcript was valid as it was."""
        parts: list[str] = []
        if self.never_ran:
            n = len(self.never_ran)
            # the model's names, bounded: the notice stays one short line
            distinct = sorted({name[:40] for name in self.never_ran})
            names = ", ".join(distinct[:3]) + (", ..." if len(distinct) > 3 else "")
            parts.append(f"{n} tool call{'s' if n > 1 else ''} ({names}) without a result "
                         f"got an error result saying {'they' if n > 1 else 'it'} never ran")
        if self.moved:
            many = self.moved > 1
            parts.append(f"{self.moved} tool result{'s' if many else ''} moved back next to "
                         f"{'their' if many else 'its'} call")
        if self.dropped:
            parts.append(f"{self.dropped} tool result{'s' if self.dropped > 1 else ''} without "
                         "a call before it dropped")
        if not parts:
            return None
        return "Repaired the loaded transcript: " + "; ".join(parts) + "."


def _role(message: Any) -> Any:
    return get_field(message, "role")


def _calls(message: Any) -> list[tuple[str, str]]:
    """(id, tool name) of each tool call in an assistant message, in order."""
    content = get_field(message, "content")
    if not isinstance(content, list):
        return []
    calls: list[tuple[str, str]] = []
    for block in content:
        if get_field(block, "type") == "toolCall":
            calls.append((str(get_field(block, "id") or ""), str(get_field(block, "name") or "")))
    return calls


def _result_id(message: Any) -> str:
    return str(get_field(message, "tool_call_id") or get_field(message, "toolCallId") or "")


def _never_ran(call_id: str, tool_name: str, after: Any) -> ToolResultMessage:
    result = ToolResultMessage(tool_call_id=call_id, tool_name=tool_name,
                               content=[TextContent(text=NEVER_RAN_TEXT)], is_error=True)
    timestamp = get_field(after, "timestamp")
    if isinstance(timestamp, int):  # of its call's time, not of the load
        result.timestamp = timestamp
    return result


def repair_transcript(messages: Sequence[Any]) -> RepairedTranscript:
    """``messages`` with every tool call answered once, in place (module docstring)."""
    out: list[Any] = []
    never_ran: list[str] = []
    moved = dropped = 0
    consumed: set[int] = set()  # indexes of results already placed next to their call
    i = 0
    while i < len(messages):
        message = messages[i]
        i += 1
        if i - 1 in consumed:
            continue
        role = _role(message)
        if role == "toolResult":
            dropped += 1  # not in the block after a call that asked for it
            continue
        out.append(message)
        calls = _calls(message) if role == "assistant" else []
        if not calls:
            continue
        pending = dict(calls)  # id -> tool name, in call order
        while i < len(messages) and _role(messages[i]) == "toolResult":
            call_id = _result_id(messages[i])
            if call_id in pending:
                out.append(messages[i])
                del pending[call_id]
            else:
                dropped += 1
            i += 1
        for call_id, tool_name in pending.items():
            later = _later_result(messages, i, call_id, consumed)
            if later is not None:
                out.append(messages[later])
                consumed.add(later)
                moved += 1
            else:
                out.append(_never_ran(call_id, tool_name, message))
                never_ran.append(tool_name or "a tool")
    return RepairedTranscript(out, never_ran, moved, dropped)


def _later_result(messages: Sequence[Any], start: int, call_id: str,
                  consumed: set[int]) -> int | None:
    """The index of ``call_id``'s result after a later message, before the next assistant
    message (a result past that belongs to no call of this one's turn)."""
    for index in range(start, len(messages)):
        candidate = messages[index]
        role = _role(candidate)
        if role == "assistant":
            return None
        if role == "toolResult" and index not in consumed and _result_id(candidate) == call_id:
            return index
    return None
