"""The transcript of one run as plain data: agent events in; items, status and usage out.

No ipywidgets here (and no HTML): :class:`Transcript` is what the live view renders
(``view.py``), what the static Markdown transcript is written from
(``transcript_md.py``), and what tests drive with plain events. The design is in
``docs/design/view.md``.

Change tracking: every mutation records what changed (``dirty`` items, the item list,
the header, the queue) and calls ``on_change``; the live view reads and clears these
flags in its coalesced flush, so a flush re-renders only what changed.

User messages: the queue in ``magics/`` owns queued items. A view is *told* that a
row was delivered (:meth:`Transcript.deliver_queued`, by token) or that the run's own
prompt was shown (:meth:`Transcript.announce`); each such user row then absorbs the
next ``message_start`` of a user message, in order. Text is never compared, so two
identical ``%steer`` texts bind to their own rows.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ..agent.types import (
    AgentEndEvent,
    AgentStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    TurnStartEvent,
)
from ._util import content_images, content_text, field, strip_control
from .items import (
    USER_LABELS,
    Item,
    NoticeItem,
    OtherItem,
    QueuedRow,
    StreamText,
    TextItem,
    ThinkingItem,
    UserItem,
)
from ..tools.policy import ApprovalPolicy
from .protocol import NoticeLevel, QueueKind, RunStatus
from .toolcall import ToolItem

__all__ = ["Transcript", "Item", "UserItem", "NoticeItem", "OtherItem", "TextItem", "ThinkingItem",
           "ToolItem", "QueuedRow", "StreamText", "FINAL_STATUSES", "LIVE_STATUSES", "USER_LABELS",
           "TranscriptViewMixin"]

FINAL_STATUSES: tuple[RunStatus, ...] = ("done", "aborted", "error", "removed")
LIVE_STATUSES: tuple[RunStatus, ...] = ("idle", "queued", "thinking", "writing", "running tool",
                                        "waiting for approval", "aborting")


class Transcript:
    """State of one view: items in order, status, clock, usage, queue, policy."""

    def __init__(self, model_label: str, *, context_window: int | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 on_change: Callable[[], None] | None = None) -> None:
        self.model_label = model_label
        self.clock = clock
        self.on_change = on_change
        self.items: list[Item] = []
        self.status: RunStatus = "idle"
        self.status_detail = ""
        self.policy: ApprovalPolicy | None = None
        self.started = clock()
        # False while the run waits in the queue and has not started: the time spent
        # there is not run time (the clock restarts when the run leaves the queue).
        self.timed = True
        self.ended: float | None = None
        self.finished = False
        self.abort_requested = False
        # usage: finished assistant messages, plus the one streaming now
        self.tokens_in = 0
        self.tokens_out = 0
        self.cost = 0.0
        self.live_usage: Any = None
        self.context_used: int | None = None
        self.context_window = context_window
        self.queued: list[QueuedRow] = []
        self.tools: dict[str, ToolItem] = {}
        self._assistant: dict[int, Item] | None = None  # content index -> item, while a message streams
        self._expected_users: deque[UserItem] = deque()  # rows that absorb the next user message_start
        # change tracking (read and cleared by the live view's flush)
        self.dirty: dict[int, Item] = {}
        self.structure_dirty = True
        self.header_dirty = True
        self.queue_dirty = False

    # ------------------------------------------------------------------ changes

    def changed(self, item: Item | None = None, *, header: bool = False, queue: bool = False) -> None:
        if item is not None:
            self.dirty[item.key] = item
        self.header_dirty |= header
        self.queue_dirty |= queue
        if self.on_change is not None:
            self.on_change()

    def append(self, item: Item) -> Item:
        self.items.append(item)
        self.structure_dirty = True
        self.changed(item)
        return item

    # ------------------------------------------------------------------ what the runtime says

    def announce(self, text: str, kind: QueueKind = "prompt") -> UserItem:
        """The run's prompt (or a delivered queued message), shown at once; it absorbs
        the next user ``message_start``."""
        item = UserItem(text, kind)
        self._expected_users.append(item)
        self.append(item)
        return item

    def show_queued(self, kind: QueueKind, text: str, token: str) -> None:
        self.queued.append(QueuedRow(kind, text, token))
        self.changed(queue=True)

    def remove_queued(self, token: str) -> bool:
        before = len(self.queued)
        self.queued = [q for q in self.queued if q.token != token]
        if len(self.queued) != before:
            self.changed(queue=True)
            return True
        return False

    def deliver_queued(self, token: str, text: str, kind: QueueKind) -> UserItem:
        self.remove_queued(token)
        return self.announce(text, kind)

    def set_status(self, status: RunStatus, detail: str = "") -> bool:
        """False if ignored (a live status after the run finished)."""
        if self.finished and status not in FINAL_STATUSES:
            return False
        if status == "queued" and self.status in ("idle", "queued") and self.ended is None:
            self.timed = False
        elif not self.timed and status not in (*FINAL_STATUSES, "aborting", "idle"):
            self.timed = True  # out of the queue: the run starts now (not a Remove click)
            self.started = self.clock()
        self.status, self.status_detail = status, detail
        self.changed(header=True)
        return True

    def set_policy(self, policy: ApprovalPolicy) -> None:
        self.policy = policy
        self.changed(header=True)

    def set_model_label(self, label: str) -> None:
        self.model_label = label
        self.changed(header=True)

    def notice(self, text: str, level: NoticeLevel = "info") -> None:
        self.append(NoticeItem(text, level))

    def set_context_usage(self, used: int | None, window: int | None = None) -> None:
        self.context_used = used
        if window:
            self.context_window = window
        self.changed(header=True)

    def tool(self, tool_call_id: str, tool_name: str = "") -> ToolItem:
        """The call's item, created (and appended) on first mention."""
        item = self.tools.get(tool_call_id)
        if item is None:
            item = ToolItem(tool_call_id, tool_name)
            self.tools[tool_call_id] = item
            self.append(item)
        elif tool_name and not item.tool_name:
            item.tool_name = tool_name
        return item

    def settle(self, status: RunStatus) -> None:
        """Final-ish state: status, clock stopped, unfinished items frozen."""
        now = self.clock()
        if self.ended is None:
            self.ended = now
        for item in self.tools.values():
            if not item.frozen:
                item.abort(now)
                self.changed(item)
        self._freeze_live({i: item for i, item in enumerate(self.items) if isinstance(item, TextItem)})
        self.status, self.status_detail = status, ""
        self.changed(header=True)

    def finish(self, status: RunStatus | None = None) -> None:
        if status is None:
            status = self.status if self.status in FINAL_STATUSES else "done"
        self.settle(status)
        self.finished = True
        self._expected_users.clear()

    @property
    def elapsed(self) -> float:
        """Run time: 0 for a run that never left the queue."""
        if not self.timed:
            return 0.0
        end = self.ended if self.ended is not None else self.clock()
        return end - self.started

    @property
    def running(self) -> bool:
        return self.ended is None and not self.finished

    def usage_now(self) -> tuple[int, int, float]:
        tin, tout, cost = self.tokens_in, self.tokens_out, self.cost
        live = self.live_usage
        if live is not None:
            tin += _int(live, "input") + _int(live, "cache_read") + _int(live, "cache_write")
            tout += _int(live, "output")
            cost += float(field(field(live, "cost"), "total", 0.0) or 0.0)
        return tin, tout, cost

    # ------------------------------------------------------------------ agent events

    def apply(self, event: Any) -> None:
        """Apply one agent event (events of other types are ignored)."""
        match event:
            case MessageUpdateEvent():  # by far the most frequent: first
                self._on_message_update(event)
            case AgentStartEvent():
                self._on_agent_start()
            case AgentEndEvent():
                self._on_agent_end(event)
            case TurnStartEvent():
                if self.status not in FINAL_STATUSES:
                    self.set_status("thinking")
            case MessageStartEvent():
                self._on_message_start(event.message)
            case MessageEndEvent():
                if field(event.message, "role") == "assistant":
                    self._finish_assistant(event.message)
            case ToolExecutionStartEvent():
                item = self.tool(event.tool_call_id, event.tool_name)
                item.start(event.args, self.clock())
                self.changed(item)
                if self.status not in FINAL_STATUSES and self.status not in ("aborting", "waiting for approval"):
                    self.set_status("running tool", item.tool_name)
            case ToolExecutionUpdateEvent():
                item = self.tool(event.tool_call_id, event.tool_name)
                item.add_update(event.partial_result)
                self.changed(item)
            case ToolExecutionEndEvent():
                item = self.tool(event.tool_call_id, event.tool_name)
                item.end(event.result, bool(event.is_error), self.clock())
                self.changed(item)
                if self.status == "running tool" and not any(t.running for t in self.tools.values()):
                    self.set_status("thinking")

    def _on_agent_start(self) -> None:
        if self.finished:
            return
        if self.ended is not None:  # the agent runs again (e.g. queued steering)
            self.ended = None
            self.abort_requested = False
        self.set_status("thinking")

    def _on_agent_end(self, event: AgentEndEvent) -> None:
        status: RunStatus = "done"
        for message in reversed(event.messages or []):
            if field(message, "role") == "assistant":
                stop = field(message, "stop_reason")
                status = "aborted" if stop == "aborted" else "error" if stop == "error" else "done"
                break
        if self.status == "aborting":
            status = "aborted"
        # An announced row the agent never sent (the run failed before the model) must
        # not absorb a later run's user message.
        self._expected_users.clear()
        self.settle(status)

    def _on_message_start(self, message: Any) -> None:
        role = field(message, "role")
        if role == "assistant":
            self._assistant = {}
            self.live_usage = field(message, "usage")
            if self.status not in FINAL_STATUSES and self.status != "aborting":
                self.set_status("thinking")
        elif role == "user":
            self._show_user(message)
        elif role not in ("toolResult", None):
            text = content_text(field(message, "content"))
            if text:
                self.append(OtherItem(str(role), text))

    def _show_user(self, message: Any) -> None:
        if any(isinstance(i, UserItem) and i.source is message for i in self.items):
            return  # the same message again
        images = len(content_images(field(message, "content")))
        if self._expected_users:
            row = self._expected_users.popleft()
            row.source = message
            if images and not row.images:
                row.images = images
                self.changed(row)
            return
        row = UserItem(content_text(field(message, "content")), "prompt", images)
        row.source = message
        self.append(row)

    def _live_status(self, status: RunStatus) -> None:
        if self.status not in FINAL_STATUSES and self.status not in ("aborting", "waiting for approval") \
                and self.status != status:
            self.set_status(status)

    def _content(self, index: int, cls: type[TextItem]) -> Item:
        if self._assistant is None:
            self._assistant = {}
        item = self._assistant.get(index)
        if item is None:
            if cls is not ThinkingItem:
                self._end_thinking()
            item = cls(now=self.clock())
            self._assistant[index] = item
            self.append(item)
        return item

    def _end_thinking(self) -> None:
        """The message's answer (text or a tool call) starts: its thinking is over, even
        if the provider sends ``thinking_end`` only with the whole message. Its duration
        stops here, and its live preview (with its cursor) goes."""
        if not self._assistant:
            return
        now = self.clock()
        for item in self._assistant.values():
            if isinstance(item, ThinkingItem) and not item.frozen:
                item.finish_at(now)
                self.changed(item)

    def _on_message_update(self, event: MessageUpdateEvent) -> None:
        ame = event.assistant_message_event
        if event.message is not None:
            self.live_usage = field(event.message, "usage", self.live_usage)
            self.header_dirty = True
        kind = field(ame, "type")
        index = field(ame, "content_index")
        if kind == "text_delta" and self._assistant is not None and self.status == "writing":
            # The hot path (one call per streamed token): append and mark, nothing else.
            item = self._assistant.get(index)
            if type(item) is TextItem:
                item.stream.append(str(ame.delta or ""))
                self.changed(item)
                return
        if self._assistant is None:
            self._assistant = {}
        if kind in ("text_start", "text_delta", "text_end"):
            item = self._content(index, TextItem)
            if isinstance(item, TextItem) and not isinstance(item, ThinkingItem):
                if kind == "text_delta":
                    item.stream.append(str(field(ame, "delta", "") or ""))
                elif kind == "text_end":
                    item.finish(field(ame, "content"))
                self.changed(item)
            if kind != "text_end":
                self._live_status("writing")
        elif kind in ("thinking_start", "thinking_delta", "thinking_end"):
            item = self._content(index, ThinkingItem)
            if isinstance(item, ThinkingItem):
                if kind == "thinking_delta":
                    item.stream.append(str(field(ame, "delta", "") or ""))
                elif kind == "thinking_end":
                    item.finish_at(self.clock(), field(ame, "content"))
                self.changed(item)
            self._live_status("thinking")
        elif kind in ("toolcall_start", "toolcall_delta", "toolcall_end"):
            call = field(ame, "tool_call") if kind == "toolcall_end" else None
            if call is None:
                content = field(field(ame, "partial"), "content") or []
                if isinstance(index, int) and 0 <= index < len(content):
                    call = content[index]
            self._stream_tool_call(index, call)
            self._live_status("writing")

    def _stream_tool_call(self, index: int, call: Any) -> None:
        assert self._assistant is not None
        tool_call_id = str(field(call, "id", "") or "")
        name = str(field(call, "name", "") or "")
        args = field(call, "arguments")
        item = self._assistant.get(index)
        if not isinstance(item, ToolItem):
            self._end_thinking()
            item = self.tools.get(tool_call_id) if tool_call_id else None
            if item is None:
                item = ToolItem(tool_call_id, name, args)
                self.append(item)
            self._assistant[index] = item
        if tool_call_id:
            item.tool_call_id = tool_call_id
            self.tools[tool_call_id] = item
        if name:
            item.tool_name = name
        if args is not None:
            item.set_args(args)
        self.changed(item)

    def _freeze_live(self, items: dict[int, Item]) -> None:
        now = self.clock()
        for item in items.values():
            if isinstance(item, ThinkingItem) and not item.frozen:
                item.finish_at(now)
                self.changed(item)
            elif isinstance(item, TextItem) and not item.frozen:
                item.finish()
                self.changed(item)

    def _finish_assistant(self, message: Any) -> None:
        items = self._assistant if self._assistant is not None else {}
        self._assistant = items
        for index, part in enumerate(field(message, "content") or []):
            kind = field(part, "type")
            if kind == "text":
                item = items.get(index) or self._content(index, TextItem)
                if isinstance(item, TextItem) and not isinstance(item, ThinkingItem):
                    item.finish(str(field(part, "text", "") or ""))
                    self.changed(item)
            elif kind == "thinking":
                item = items.get(index) or self._content(index, ThinkingItem)
                if isinstance(item, ThinkingItem):
                    item.redacted = bool(field(part, "redacted", False))
                    item.finish_at(self.clock(), str(field(part, "thinking", "") or ""))
                    self.changed(item)
            elif kind == "toolCall":
                self._stream_tool_call(index, part)
        # Anything still live (an aborted stream without *_end events) is frozen now.
        self._freeze_live(items)
        usage = field(message, "usage")
        if usage is not None:
            self.tokens_in += _int(usage, "input") + _int(usage, "cache_read") + _int(usage, "cache_write")
            self.tokens_out += _int(usage, "output")
            self.cost += float(field(field(usage, "cost"), "total", 0.0) or 0.0)
            used = _int(usage, "total_tokens") or (_int(usage, "input") + _int(usage, "output")
                                                   + _int(usage, "cache_read") + _int(usage, "cache_write"))
            if used:
                self.context_used = used
        self.live_usage = None
        stop = field(message, "stop_reason")
        if stop == "error":
            self.notice(strip_control(str(field(message, "error_message") or "The model request failed.")), "error")
        elif stop == "aborted":
            self.notice("Aborted.", "warning")
        elif stop == "length":
            self.notice("The reply was cut off: the model hit its output token limit.", "warning")
        self._assistant = None
        self.changed(header=True)


def _int(obj: Any, name: str) -> int:
    return int(field(obj, name, 0) or 0)


class TranscriptViewMixin:
    """The ``RunView`` methods that only pass on to the view's :class:`Transcript`, written
    once for the widget view (``view.py``) and the headless one (``static_view.py``)."""

    transcript: Transcript

    @property
    def status(self) -> RunStatus:
        return self.transcript.status

    def add_user_message(self, text: str, kind: QueueKind = "prompt") -> None:
        self.transcript.announce(text, kind)

    def show_queued(self, kind: QueueKind, text: str, token: str) -> None:
        self.transcript.show_queued(kind, text, token)

    def deliver_queued(self, token: str, text: str, kind: QueueKind) -> None:
        self.transcript.deliver_queued(token, text, kind)

    def remove_queued(self, token: str) -> None:
        self.transcript.remove_queued(token)

    def set_status(self, status: RunStatus, detail: str = "") -> None:
        self.transcript.set_status(status, detail)

    def set_policy(self, policy: ApprovalPolicy) -> None:
        self.transcript.set_policy(policy)

    def set_model_label(self, label: str) -> None:
        self.transcript.set_model_label(label)

    def show_notice(self, text: str, level: NoticeLevel = "info") -> None:
        self.transcript.notice(text, level)

    def set_context_usage(self, used: int | None, window: int | None = None) -> None:
        self.transcript.set_context_usage(used, window)
