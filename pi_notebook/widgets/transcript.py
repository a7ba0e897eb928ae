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

from ..agent.types import (
    AgentEndEvent,
    AgentEvent,
    AgentMessage,
    AgentStartEvent,
    CheckMessage,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    TurnStartEvent,
    llm_message,
    message_role,
)
from ..ai.types import (
    AssistantMessage,
    TextContent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingContent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolResultMessage,
    Usage,
    UserMessage,
    get_field,
    usage_input_tokens,
    usage_total_tokens,
)
from ._util import content_images, content_text, cut_off_note, strip_control
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
from ..tools.trust.policy import ApprovalPolicy
from .protocol import NoticeLevel, QueueKind, RunStatus
from .toolcall import ToolItem

__all__ = ["Transcript", "Item", "UserItem", "NoticeItem", "OtherItem", "TextItem", "ThinkingItem",
           "ToolItem", "QueuedRow", "StreamText", "FINAL_STATUSES", "NO_RESULT_MARK", "LIVE_STATUSES", "USER_LABELS",
           "TranscriptViewMixin"]

FINAL_STATUSES: tuple[RunStatus, ...] = ("done", "aborted", "error", "removed")
# the pill of a run that answered after every one of its tool calls failed ("done · no result")
NO_RESULT_MARK = "· no result"
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
        self.live_usage: Usage | None = None
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
        """False if ignored (a live status after the run finished, or a detail of the thinking
        phase, such as how far the prompt was read, once that phase is over)."""
        if self.finished and status not in FINAL_STATUSES:
            return False
        if status == "thinking" and detail and self.status != "thinking":
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

    def pill(self) -> tuple[str, str, str]:
        """The status pill as shown: (label, colour key of ``theme.STATUS_COLOURS``, tooltip).

        A run can end ``done`` (the model answered) although every tool call it ran failed:
        its answer then rests on no result ("The code failed, so I do not know"), and a green
        "done" would say the opposite. The pill says "done · no result" in the warning
        colour; the run's status stays ``done`` (a queued cell after it still starts)."""
        label: str = self.status
        if self.status_detail and self.status in ("running tool", "waiting for approval"):
            label = f"{self.status}: {self.status_detail}"
        elif self.status_detail and self.status == "thinking":
            label = self.status_detail  # what the model's server is doing meanwhile
        if self.status == "done":
            ran = [i for i in self.tools.values() if i.status != "skipped"]
            failed = [i for i in ran if i.is_error]
            if ran and len(failed) == len(ran):
                calls = "the tool call" if len(ran) == 1 else f"all {len(ran)} tool calls"
                return (f"done {NO_RESULT_MARK}", "no result",
                        f"{calls} failed: the answer rests on no result")
        return label, self.status, ""

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
            tin += usage_input_tokens(live)
            tout += live.output
            cost += live.cost.total
        return tin, tout, cost

    # ------------------------------------------------------------------ agent events

    def apply(self, event: AgentEvent) -> None:
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
                if isinstance(message := llm_message(event.message), AssistantMessage):
                    self._finish_assistant(message)
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
            if message_role(message) == "assistant":
                assistant = llm_message(message)
                stop = assistant.stop_reason if isinstance(assistant, AssistantMessage) else None
                status = "aborted" if stop == "aborted" else "error" if stop == "error" else "done"
                break
        if self.status == "aborting":
            status = "aborted"
        # An announced row the agent never sent (the run failed before the model) must
        # not absorb a later run's user message.
        self._expected_users.clear()
        self.settle(status)

    def _on_message_start(self, message: AgentMessage) -> None:
        match llm_message(message):
            case AssistantMessage(usage=usage):
                self._assistant = {}
                self.live_usage = usage
                if self.status not in FINAL_STATUSES and self.status != "aborting":
                    self.set_status("thinking")
            case UserMessage(content=content):
                self._show_user(message, content)
            case ToolResultMessage():
                pass
            case None:  # a custom message: shown by its role, if it has text
                role = message_role(message)
                text = content_text(get_field(message, "content"))
                if role is not None and text:
                    self.append(OtherItem(role, text))

    def _show_user(self, message: AgentMessage, content: object) -> None:
        """``message`` is the agent's object (a row keeps it to see it again), ``content``
        its content."""
        if any(isinstance(i, UserItem) and i.source is message for i in self.items):
            return  # the same message again
        images = len(content_images(content))
        if isinstance(message, CheckMessage):
            # a run check's turn: the product's words for a person, not the model's instruction;
            # it never takes the row of a prompt or %steer the user queued
            row = UserItem(message.shown or content_text(content), "check", images)
            row.source = message
            self.append(row)
            return
        if self._expected_users:
            row = self._expected_users.popleft()
            row.source = message
            if images and not row.images:
                row.images = images
                self.changed(row)
            return
        row = UserItem(content_text(content), "prompt", images)
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
        self.live_usage = event.message.usage
        self.header_dirty = True
        if type(ame) is TextDeltaEvent and self._assistant is not None and self.status == "writing":
            # The hot path (one call per streamed token): append and mark, nothing else.
            item = self._assistant.get(ame.content_index)
            if type(item) is TextItem:
                item.stream.append(ame.delta)
                self.changed(item)
                return
        if self._assistant is None:
            self._assistant = {}
        match ame:
            case TextStartEvent() | TextDeltaEvent() | TextEndEvent():
                item = self._content(ame.content_index, TextItem)
                if isinstance(item, TextItem) and not isinstance(item, ThinkingItem):
                    if isinstance(ame, TextDeltaEvent):
                        item.stream.append(ame.delta)
                    elif isinstance(ame, TextEndEvent):
                        item.finish(ame.content)
                    self.changed(item)
                if not isinstance(ame, TextEndEvent):
                    self._live_status("writing")
            case ThinkingStartEvent() | ThinkingDeltaEvent() | ThinkingEndEvent():
                item = self._content(ame.content_index, ThinkingItem)
                if isinstance(item, ThinkingItem):
                    if isinstance(ame, ThinkingDeltaEvent):
                        item.stream.append(ame.delta)
                    elif isinstance(ame, ThinkingEndEvent):
                        item.finish_at(self.clock(), ame.content)
                    self.changed(item)
                self._live_status("thinking")
            case ToolCallStartEvent() | ToolCallDeltaEvent() | ToolCallEndEvent():
                index = ame.content_index
                call: ToolCall | None = ame.tool_call if isinstance(ame, ToolCallEndEvent) else None
                if call is None:
                    content = ame.partial.content
                    block = content[index] if 0 <= index < len(content) else None
                    if isinstance(block, ToolCall):
                        call = block
                self._stream_tool_call(index, call)
                self._live_status("writing")

    def _stream_tool_call(self, index: int, call: ToolCall | None) -> None:
        assert self._assistant is not None
        tool_call_id = call.id if call is not None else ""
        name = call.name if call is not None else ""
        args = call.arguments if call is not None else None
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

    def _finish_assistant(self, message: AssistantMessage) -> None:
        items = self._assistant if self._assistant is not None else {}
        self._assistant = items
        for index, part in enumerate(message.content):
            match part:
                case TextContent(text=text):
                    item = items.get(index) or self._content(index, TextItem)
                    if isinstance(item, TextItem) and not isinstance(item, ThinkingItem):
                        item.finish(text)
                        self.changed(item)
                case ThinkingContent(thinking=thinking, redacted=redacted):
                    item = items.get(index) or self._content(index, ThinkingItem)
                    if isinstance(item, ThinkingItem):
                        item.redacted = bool(redacted)
                        item.finish_at(self.clock(), thinking)
                        self.changed(item)
                case ToolCall():
                    self._stream_tool_call(index, part)
        # A call that streamed but is not in the final message was left out unfinished: its
        # card says it did not run instead of waiting for a run that never comes.
        # (by id: a note the provider put before a call moves the call one index on)
        kept = {part.id for part in message.content if isinstance(part, ToolCall)}
        for item in items.values():
            if isinstance(item, ToolItem) and item.started is None and item.tool_call_id not in kept:
                item.not_run()
                self.changed(item)
        # Anything still live (an aborted stream without *_end events) is frozen now.
        self._freeze_live(items)
        usage = message.usage
        self.tokens_in += usage_input_tokens(usage)
        self.tokens_out += usage.output
        self.cost += usage.cost.total
        used = usage_total_tokens(usage)
        if used:
            self.context_used = used
        self.live_usage = None
        if message.stop_reason == "error":
            self.notice(strip_control(message.error_message or "The model request failed."), "error")
        elif message.stop_reason == "aborted":
            self.notice("Aborted.", "warning")
        elif message.stop_reason == "length":
            self.notice(cut_off_note(message.error_message), "warning")
        self._assistant = None
        self.changed(header=True)


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
