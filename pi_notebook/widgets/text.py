"""Plain-text rendering of agent events, for frontends without widgets (terminal
IPython). The magics helper prints what ``render_event_text`` returns, as is.

Untrusted text is stripped of ANSI/OSC escape sequences and control characters so
model or tool output cannot drive the terminal.
"""

from __future__ import annotations

from ..agent.types import (
    AgentEndEvent,
    AgentEvent,
    CheckMessage,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolExecutionEndEvent,
    ToolExecutionUpdateEvent,
    llm_message,
    message_role,
)
from ..ai.types import (
    AssistantMessage,
    TextDeltaEvent,
    TextEndEvent,
    ThinkingStartEvent,
    ToolCallEndEvent,
    ToolResultMessage,
    UserMessage,
    get_field,
)
from ..tools.output.updates import (
    DisplayOutput,
    ErrorOutput,
    ResultOutput,
    StreamOutput,
    parse_call_details,
)
from ._util import content_text, cut_off_note, reveal_invisible, strip_control
from .items import CHECK_LABEL, USER_LABELS
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


def render_event_text(event: AgentEvent, *, user_kind: str | None = None) -> str | None:
    """Text to print for one AgentEvent, or None if the event prints nothing.

    Assistant text streams delta by delta; thinking is not printed (only a marker
    when it starts); a tool call prints its name and code when its arguments are
    complete, then its streamed output, then one status line with a short result.
    """
    match event:
        case MessageStartEvent(message=message):
            if isinstance(message, CheckMessage):  # the product's words, for a person
                shown = message.shown or content_text(message.content)
                return f"\n{CHECK_LABEL}: {strip_control(shown)}\n"
            match llm_message(message):
                case UserMessage(content=content):
                    label = USER_LABELS.get(user_kind or "prompt", "You")
                    return f"\n{label}: {strip_control(content_text(content))}\n"
                case AssistantMessage() | ToolResultMessage():
                    return None
            role = message_role(message)  # a custom message: its role and its text
            text = content_text(get_field(message, "content"))
            return f"\n[{strip_control(role)}] {strip_control(text)}\n" if role is not None and text else None
        case MessageUpdateEvent(assistant_message_event=ame):
            match ame:
                case TextDeltaEvent(delta=delta):
                    return strip_control(delta) or None
                case TextEndEvent():
                    return "\n"
                case ThinkingStartEvent():
                    return "(thinking…)\n"
                case ToolCallEndEvent(tool_call=call):
                    name = strip_control(call.name or "tool")
                    args = call.arguments or {}
                    code = args.get("code")
                    if isinstance(code, str):
                        return f"\n[{name}]\n{_indent(reveal_invisible(strip_control(code)))}\n"
                    return f"\n[{name}] {strip_control(str(args))}\n"
            return None
        case MessageEndEvent(message=message):
            assistant = llm_message(message)
            if not isinstance(assistant, AssistantMessage):
                return None
            if assistant.stop_reason == "error":
                return f"\n[error] {strip_control(assistant.error_message or 'request failed')}\n"
            if assistant.stop_reason == "aborted":
                return "\n[aborted]\n"
            if assistant.stop_reason == "length":
                return f"\n[{cut_off_note(assistant.error_message)}]\n"
            return None
        case ToolExecutionUpdateEvent(partial_result=partial):
            match read_output(partial.details):
                case StreamOutput(text=text):
                    return strip_control(text) or None
                case DisplayOutput() | ResultOutput() | ErrorOutput() as record:
                    return _record_text(record)
            return None
        case ToolExecutionEndEvent(tool_name=tool_name, is_error=is_error, result=result):
            name = strip_control(tool_name or "tool")
            details = parse_call_details(result.details)
            if details is not None:
                # A typed python call: its streams and displays were printed as they came; the
                # value of its last expression and its exception come only with the result (the
                # result text is the model's copy, with its markers, not for the user).
                tail = "".join(_record_text(o) or "" for o in details.outputs
                               if isinstance(o, (ResultOutput, ErrorOutput)))
                return f"{tail}[{name} {'failed' if is_error else 'done'}]\n"
            text = strip_control(content_text(result.content)).strip()
            if len(text) > _MAX_RESULT:
                text = text[:_MAX_RESULT] + f"\n… {len(text) - _MAX_RESULT:,} more characters"
            status = "failed" if is_error else "done"
            return f"[{name} {status}]\n" + (_indent(text) + "\n" if text and is_error else "")
        case AgentEndEvent():
            return "\n"
    return None
