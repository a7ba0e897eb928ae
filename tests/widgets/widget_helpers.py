"""Helpers for AgentView tests: a comm log, an HTML safety checker and builders
for agent events in pi's order."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any


from pi_notebook.agent.types import MessageEndEvent, MessageStartEvent, MessageUpdateEvent
from pi_notebook.ai.types import (
    AssistantMessage, Cost, TextContent, TextDeltaEvent, TextEndEvent, TextStartEvent,
    ThinkingContent, ThinkingDeltaEvent, ThinkingEndEvent, ThinkingStartEvent, ToolCall,
    ToolCallDeltaEvent, ToolCallEndEvent, ToolCallStartEvent, Usage, UserMessage,
)
from pi_notebook.widgets.view import AgentView


# --- recording comms ----------------------------------------------------------------------

@dataclass
class CommLog:
    messages: list[tuple[str, str, Any]] = field(default_factory=list)  # (comm_id, msg_type, data)

    def states(self, widget: Any) -> list[dict[str, Any]]:
        """Every state payload sent for ``widget``: its comm_open, then each update."""
        out = []
        for comm_id, msg_type, data in self.messages:
            if comm_id != widget.model_id or not isinstance(data, dict):
                continue
            if msg_type == "comm_open":
                out.append(data.get("state", {}))
            elif msg_type == "comm_msg" and data.get("method") == "update":
                out.append(data.get("state", {}))
        return out

    def updates(self, widget: Any, key: str | None = None) -> list[dict[str, Any]]:
        """Update messages (not the comm_open) for ``widget``, optionally only those
        that carry ``key``."""
        out = []
        for comm_id, msg_type, data in self.messages:
            if comm_id == widget.model_id and msg_type == "comm_msg" and isinstance(data, dict) \
                    and data.get("method") == "update":
                if key is None or key in data.get("state", {}):
                    out.append(data["state"])
        return out

    def last_value(self, widget: Any, key: str = "value") -> Any:
        value = None
        for state in self.states(widget):
            if key in state:
                value = state[key]
        return value

    def all_html_values(self) -> list[str]:
        """Every ``value`` string sent to the frontend by any widget."""
        values = []
        for _cid, msg_type, data in self.messages:
            if not isinstance(data, dict):
                continue
            state = data.get("state") if msg_type in ("comm_open", "comm_msg") else None
            if isinstance(state, dict) and isinstance(state.get("value"), str):
                values.append(state["value"])
        return values

    def mark(self) -> int:
        return len(self.messages)

    def since(self, mark: int) -> list[tuple[str, str, Any]]:
        return self.messages[mark:]


# --- HTML safety checker ------------------------------------------------------------------

ALLOWED_TAGS = {
    "div", "span", "p", "pre", "code", "em", "strong", "a", "img", "ul", "ol", "li", "h1", "h2", "h3",
    "h4", "h5", "h6", "blockquote", "table", "thead", "tbody", "tr", "th", "td", "hr", "br", "s",
    "del", "details", "summary",
    # MathML (math.py rebuilds it from an allow-list)
    "math", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "msub", "msup", "msubsup", "mfrac", "msqrt",
    "mroot", "mstyle", "merror", "mpadded", "mphantom", "mfenced", "menclose", "munder", "mover",
    "munderover", "mtable", "mtr", "mtd", "mlabeledtr", "mmultiscripts", "mprescripts", "none",
    "semantics", "annotation",
}


class _Checker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in ALLOWED_TAGS:
            self.problems.append(f"tag <{tag}>")
        for name, value in attrs:
            value = value or ""
            if name.startswith("on"):
                self.problems.append(f"event handler {name}= on <{tag}>")
            if name in ("href", "src", "action", "formaction", "xlink:href"):
                scheme = _url_scheme(value)
                if tag == "img":
                    if not (scheme == "data" and re.match(r"(?i)data:image/(png|jpeg|gif);", _compact(value))):
                        self.problems.append(f"img src {value!r}")
                elif scheme is not None and scheme not in ("http", "https", "mailto"):
                    self.problems.append(f"{name}={value!r} on <{tag}>")


def _compact(url: str) -> str:
    # What a browser's URL parser does first (WHATWG URL standard): strip leading and
    # trailing C0 controls and spaces, remove every tab and newline.
    return re.sub(r"[\t\n\r]", "", url.strip("".join(map(chr, range(0x21)))))


def _url_scheme(url: str) -> str | None:
    """The scheme a browser would see in ``url`` (already entity-decoded), or None
    for a relative URL."""
    m = re.match(r"([a-zA-Z][a-zA-Z0-9+.\-]*):", _compact(url))
    return m.group(1).lower() if m else None


def html_problems(html: str) -> list[str]:
    """Anything in ``html`` that could run script or load something unexpected."""
    checker = _Checker()
    checker.feed(html)
    checker.close()
    return checker.problems


# --- event builders ----------------------------------------------------------------------

class AssistantStream:
    """Builds the agent events of one streamed assistant message, in pi's order."""

    def __init__(self, view: AgentView) -> None:
        self.view = view
        self.partial = AssistantMessage(api="faux", provider="faux", model="test-model")

    def _update(self, ame: Any) -> None:
        self.view.handle_event(MessageUpdateEvent(message=self.partial.model_copy(), assistant_message_event=ame))

    def start(self) -> AssistantStream:
        self.view.handle_event(MessageStartEvent(message=self.partial.model_copy()))
        return self

    def text_start(self) -> int:
        self.partial.content.append(TextContent(text=""))
        index = len(self.partial.content) - 1
        self._update(TextStartEvent(content_index=index, partial=self.partial))
        return index

    def text_delta(self, index: int, delta: str) -> None:
        self.partial.content[index].text += delta
        self._update(TextDeltaEvent(content_index=index, delta=delta, partial=self.partial))

    def text_end(self, index: int) -> None:
        self._update(TextEndEvent(content_index=index, content=self.partial.content[index].text,
                                  partial=self.partial))

    def text(self, text: str, pieces: int = 1) -> int:
        index = self.text_start()
        step = max(1, len(text) // pieces)
        for i in range(0, len(text), step):
            self.text_delta(index, text[i:i + step])
        self.text_end(index)
        return index

    def thinking(self, text: str) -> int:
        self.partial.content.append(ThinkingContent(thinking=""))
        index = len(self.partial.content) - 1
        self._update(ThinkingStartEvent(content_index=index, partial=self.partial))
        for word in text.split(" "):
            delta = word + " "
            self.partial.content[index].thinking += delta
            self._update(ThinkingDeltaEvent(content_index=index, delta=delta, partial=self.partial))
        self._update(ThinkingEndEvent(content_index=index, content=self.partial.content[index].thinking,
                                      partial=self.partial))
        return index

    def tool_call_start(self, call_id: str, name: str) -> int:
        self.partial.content.append(ToolCall(id=call_id, name=name, arguments={}))
        index = len(self.partial.content) - 1
        self._update(ToolCallStartEvent(content_index=index, partial=self.partial))
        return index

    def tool_call_delta(self, index: int, args: dict[str, Any], raw: str = "") -> None:
        self.partial.content[index].arguments = args
        self._update(ToolCallDeltaEvent(content_index=index, delta=raw, partial=self.partial))

    def tool_call_end(self, index: int) -> ToolCall:
        call = self.partial.content[index]
        self._update(ToolCallEndEvent(content_index=index, tool_call=call, partial=self.partial))
        return call

    def end(self, stop_reason: str = "stop", usage: Usage | None = None,
            error_message: str | None = None) -> AssistantMessage:
        self.partial.stop_reason = stop_reason  # type: ignore[assignment]
        self.partial.usage = usage or Usage(input=120, output=30, total_tokens=150, cost=Cost(total=0.0021))
        self.partial.error_message = error_message
        self.view.handle_event(MessageEndEvent(message=self.partial))
        return self.partial


def user_turn(view: AgentView, text: str) -> UserMessage:
    message = UserMessage(content=text)
    view.handle_event(MessageStartEvent(message=message))
    view.handle_event(MessageEndEvent(message=message))
    return message


# --- the static transcript as text ------------------------------------------------------------

def transcript_text(md: str) -> str:
    """What a reader of the static transcript sees where styles are dropped (GitHub): the
    rendered HTML's text, the stylesheet left out; one line per block."""
    from markdown_it import MarkdownIt

    rendered = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render(md)
    rendered = re.sub(r"(?s)<style>.*?</style>", "", rendered)
    rendered = re.sub(r"</(div|p|pre|li|tr|summary|h\d)>|<br>", "\n", rendered)
    text = html.unescape(re.sub(r"<[^>]+>", "", rendered))
    return "\n".join(line for line in text.split("\n") if line.strip())
