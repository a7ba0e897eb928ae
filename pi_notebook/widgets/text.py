"""Plain-text rendering of agent events, for frontends without widgets (terminal
IPython). The magics helper prints what ``render_event_text`` returns, as is.

Untrusted text is stripped of ANSI/OSC escape sequences and control characters so
model or tool output cannot drive the terminal.
"""

from __future__ import annotations

from typing import Any

from ..tools.updates import (
    DisplayOutput,
    ErrorOutput,
    ResultOutput,
    StreamOutput,
    parse_call_details,
)
from ._util import content_text, field, reveal_invisible, strip_control
from .items import USER_LABELS
from .toolcall import fold_traceback, read_output

__all__ = ["render_event_text"]

_MAX_RESULT = 2000


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def _record_text(record: DisplayOutput | ResultOutput | ErrorOutput) -> str | None:
    """One output record as terminal text (images by their type only)."""
    if isinstance(record, ErrorOutput):
        summary, _folded = fold_traceback("\n".join(record.traceback) or f"{record.ename}: {record.evalue}")
        return strip_control(summary) + "\n"
    data = record.data
    for mime in ("image/png", "image/jpeg", "image/gif"):
        if mime in data:
            return f"[{mime} output]\n"
    plain = data.get("text/plain")
    if isinstance(plain, list):
        plain = "".join(plain)
    return strip_control(plain) + "\n" if isinstance(plain, str) and plain else None


def render_event_text(event: Any, *, user_kind: str | None = None) -> str | None:
    """Text to print for one AgentEvent, or None if the event prints nothing.

    Assistant text streams delta by delta; thinking is not printed (only a marker
    when it starts); a tool call prints its name and code when its arguments are
    complete, then its streamed output, then one status line with a short result.
    """
    etype = field(event, "type")
    if etype == "message_start":
        message = field(event, "message")
        role = field(message, "role")
        if role == "user":
            label = USER_LABELS.get(user_kind or "prompt", "You")
            return f"\n{label}: {strip_control(content_text(field(message, 'content')))}\n"
        if role not in ("assistant", "toolResult", None):
            text = content_text(field(message, "content"))
            return f"\n[{strip_control(str(role))}] {strip_control(text)}\n" if text else None
        return None
    if etype == "message_update":
        ame = field(event, "assistant_message_event")
        kind = field(ame, "type")
        if kind == "text_delta":
            return strip_control(str(field(ame, "delta", "") or "")) or None
        if kind == "text_end":
            return "\n"
        if kind == "thinking_start":
            return "(thinking…)\n"
        if kind == "toolcall_end":
            call = field(ame, "tool_call")
            name = strip_control(str(field(call, "name", "") or "tool"))
            args = field(call, "arguments") or {}
            code = args.get("code") if isinstance(args, dict) else None
            if isinstance(code, str):
                return f"\n[{name}]\n{_indent(reveal_invisible(strip_control(code)))}\n"
            return f"\n[{name}] {strip_control(str(args))}\n"
        return None
    if etype == "message_end":
        message = field(event, "message")
        if field(message, "role") != "assistant":
            return None
        stop = field(message, "stop_reason")
        if stop == "error":
            return f"\n[error] {strip_control(str(field(message, 'error_message') or 'request failed'))}\n"
        if stop == "aborted":
            return "\n[aborted]\n"
        return None
    if etype == "tool_execution_update":
        match read_output(field(field(event, "partial_result"), "details")):
            case StreamOutput(text=text):
                return strip_control(text) or None
            case DisplayOutput() | ResultOutput() | ErrorOutput() as record:
                return _record_text(record)
        return None
    if etype == "tool_execution_end":
        name = strip_control(str(field(event, "tool_name", "") or "tool"))
        is_error = bool(field(event, "is_error", False))
        result = field(event, "result")
        details = parse_call_details(field(result, "details"))
        if details is not None:
            # A typed python call: its streams and displays were printed as they came; the
            # value of its last expression and its exception come only with the result (the
            # result text is the model's copy, with its markers, not for the user).
            tail = "".join(_record_text(o) or "" for o in details.outputs
                           if isinstance(o, (ResultOutput, ErrorOutput)))
            return f"{tail}[{name} {'failed' if is_error else 'done'}]\n"
        text = strip_control(content_text(field(result, "content"))).strip()
        if len(text) > _MAX_RESULT:
            text = text[:_MAX_RESULT] + f"\n… {len(text) - _MAX_RESULT:,} more characters"
        status = "failed" if is_error else "done"
        return f"[{name} {status}]\n" + (_indent(text) + "\n" if text and is_error else "")
    if etype == "agent_end":
        return "\n"
    return None
