"""AgentView: the live widget under a ``%%agent`` cell.

Threading model (jupyter-mechanics.md §3, §8):

- Every public method is called on the kernel loop's thread (the magics helper and
  the agent's event listener run there).
- Button handlers may run on a *different* thread (ipykernel 7.0-7.3 under
  JupyterLab run comm handlers on a subshell thread). They never touch state: they
  hop onto the loop with ``loop.call_soon_threadsafe`` and the work happens there.

Update model (§4): ``handle_event`` only changes Python-side state and asks the
``FlushScheduler`` for a flush; the flush (at most one per ~50 ms, plus a final one)
syncs the blocks that changed since the last flush. Finished blocks are frozen and
never re-sent; streaming text re-sends only its live tail.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import ipywidgets as W

from ._util import content_images, content_text, field, fmt_cost, fmt_seconds, fmt_tokens
from .blocks import (Block, MarkdownBlock, NoticeBlock, OtherMessageBlock, ThinkingBlock, ToolCard,
                     UserBlock, pill_html)
from .flush import DEFAULT_INTERVAL, FlushScheduler
from .markdown import escape_text, markdown_for_transcript
from .text import render_event_text
from .theme import stylesheet

__all__ = ["AgentView", "STATUSES", "APPROVAL_CHOICES", "render_event_text"]

STATUSES = ("starting", "thinking", "writing", "running tool", "waiting for approval", "aborting",
            "done", "aborted", "error")
FINAL_STATUSES = ("done", "aborted", "error")
APPROVAL_CHOICES = ("run", "skip", "always")
_log = logging.getLogger(__name__)
_LIVE_STATUSES = ("starting", "queued", "thinking", "writing", "running tool", "waiting for approval", "aborting")


def _walk(widget: W.Widget, seen: set[int]):
    """``widget`` and everything it contains: children, layout and style models."""
    if id(widget) in seen:
        return
    seen.add(id(widget))
    yield widget
    for name in ("layout", "style"):
        sub = getattr(widget, name, None)
        if isinstance(sub, W.Widget):
            yield from _walk(sub, seen)
    for child in getattr(widget, "children", ()) or ():
        if isinstance(child, W.Widget):
            yield from _walk(child, seen)


class _QueuedItem:
    def __init__(self, kind: str, text: str, token: object) -> None:
        self.kind, self.text, self.token = kind, text, token
        self.widget: W.HBox | None = None


class AgentView(W.VBox):
    """Live transcript of one agent run: header, conversation, tool cards, queue, Abort.

    Parameters: ``model_label`` (shown in the header), ``loop`` (the kernel loop all
    state lives on), ``on_abort`` (called on the loop when Abort is clicked),
    ``on_remove_queued`` (called on the loop with a queued item's token when its
    remove button is clicked), ``context_window`` (tokens; enables the context fill
    meter from assistant usage), ``flush_interval`` (seconds between flushes).

    User messages: the view shows a user message when the agent emits it
    (``message_start`` with role ``user``). ``add_user_message`` shows one at once
    (e.g. the prompt before the run starts); the agent's later event for the same
    text is then not shown twice. A user message whose text matches a queued item
    (``show_queued``) takes that item's kind (steer/followup) and removes the row.
    """

    def __init__(self, model_label: str, loop: asyncio.AbstractEventLoop,
                 on_abort: Callable[[], None],
                 on_remove_queued: Callable[[object], None] | None = None, *,
                 context_window: int | None = None,
                 flush_interval: float = DEFAULT_INTERVAL) -> None:
        self._loop = loop
        self._on_abort = on_abort
        self._on_remove_queued = on_remove_queued
        self._model_label = model_label
        self._status = "starting"
        self._status_detail = ""
        self._started = time.monotonic()
        self._ended: float | None = None
        self._finished = False
        # usage: finished assistant messages + the one streaming now
        self._tokens_in = 0
        self._tokens_out = 0
        self._cost = 0.0
        self._live_usage: Any = None
        self._context_used: int | None = None
        self._context_window = context_window
        # transcript
        self._blocks: list[Block] = []
        self._dirty: dict[int, Block] = {}
        self._structure_dirty = True
        self._assistant: dict[int, Block] | None = None  # content index -> block
        self._cards: dict[str, ToolCard] = {}
        self._announced: list[UserBlock] = []  # shown by add_user_message, not yet seen as events
        self._queued: list[_QueuedItem] = []
        self._queue_dirty = False
        self._approvals: dict[str, asyncio.Future[str]] = {}
        self._header_dirty = True
        self._tick_handle: asyncio.TimerHandle | None = None
        self._abort_requested = False

        self._style = W.HTML(value=stylesheet())
        self._style.add_class("pi-hidden-style")
        self._header = W.HTML(value=self._header_html())
        self._abort_button = W.Button(description="Abort", icon="stop", button_style="danger",
                                      tooltip="Stop the agent (the transcript stays valid)",
                                      layout=W.Layout(width="auto", flex="0 0 auto"))
        self._abort_button.add_class("pi-abort")
        self._abort_button.on_click(lambda _b: self._hop(self._abort_clicked))
        head_row = W.HBox([self._header, self._abort_button],
                          layout=W.Layout(justify_content="space-between", align_items="center"))
        self._transcript = W.VBox([])
        self._queue_box = W.VBox([])
        super().__init__([self._style, head_row, self._transcript, self._queue_box],
                         layout=W.Layout(width="100%"))
        self.add_class("pi-agent")
        self._scheduler = FlushScheduler(loop, self._flush, flush_interval)
        self._schedule_tick()

    # ------------------------------------------------------------------ public API

    @property
    def status(self) -> str:
        return self._status

    @property
    def widget(self) -> AgentView:
        """The widget to display: the view itself (it is a VBox)."""
        return self

    @property
    def abort_button(self) -> W.Button:
        return self._abort_button

    @property
    def flush_count(self) -> int:
        return self._scheduler.flush_count

    def tool_card(self, tool_call_id: str) -> ToolCard | None:
        return self._cards.get(tool_call_id)

    @property
    def blocks(self) -> list[Block]:
        return list(self._blocks)

    def handle_event(self, event: Any) -> None:
        """Apply one AgentEvent (pydantic object or dict with a ``type``)."""
        etype = field(event, "type")
        handler = self._EVENT_HANDLERS.get(etype)
        if handler is not None:
            handler(self, event)

    def add_user_message(self, text: str, kind: str = "prompt") -> None:
        block = UserBlock(text, kind)
        self._announced.append(block)
        self._append(block)

    def show_queued(self, kind: str, text: str, token: object) -> None:
        self._queued.append(_QueuedItem(kind, text, token))
        self._queue_dirty = True
        self._request()

    def remove_queued(self, token: object) -> None:
        before = len(self._queued)
        self._queued = [q for q in self._queued if q.token is not token and q.token != token]
        if len(self._queued) != before:
            self._queue_dirty = True
            self._request()

    def set_status(self, status: str, detail: str = "") -> None:
        if self._finished and status not in FINAL_STATUSES:
            return
        if status == "aborting" or status in FINAL_STATUSES:
            # Nobody may be left waiting for a click once the run is stopping.
            self.cancel_approvals()
        self._status = status
        self._status_detail = detail
        self._header_dirty = True
        self._request()

    def __repr__(self) -> str:
        # The text/plain fallback of the displayed widget: what a frontend without
        # widgets (or a notebook saved before the run ended) shows instead of the
        # default dump of every child widget and its stylesheet.
        return f"pi agent: {self._model_label} ({self._status})"

    def set_model_label(self, label: str) -> None:
        self._model_label = label
        self._header_dirty = True
        self._request()

    def show_notice(self, text: str, level: str = "info") -> None:
        self._append(NoticeBlock(text, level))

    def set_context_usage(self, used_tokens: int | None, window: int | None = None) -> None:
        self._context_used = used_tokens
        if window:
            self._context_window = window
        self._header_dirty = True
        self._request()

    async def request_approval(self, request: Any) -> str:
        """Show Run / Skip / Always on the call's card and wait for a click.

        ``request`` has ``tool_call_id``, ``tool_name``, ``code`` and optionally
        ``signal`` (an AbortSignal). Returns ``"run"``, ``"skip"`` or ``"always"``.
        Abort (button, ``set_status("aborting")``, the signal), ``finish``,
        ``cancel_approvals`` or a repeated request for the same call resolve it with
        ``"skip"`` and hide the panel. If the awaiting task itself is cancelled, the
        panel is hidden and the ``CancelledError`` propagates (swallowing it would
        break the task's cancellation).
        """
        tool_call_id = str(field(request, "tool_call_id", "") or "")
        tool_name = str(field(request, "tool_name", "") or "python")
        code = field(request, "code")
        signal = field(request, "signal")
        if self._finished or self._abort_requested or getattr(signal, "aborted", False):
            return "skip"
        card = self._card(tool_call_id, tool_name)
        card.request_approval(code if isinstance(code, str) else None)
        card.on_approval_click = self._approval_clicked
        previous = self._approvals.pop(tool_call_id, None)
        if previous is not None and not previous.done():
            previous.set_result("skip")
        future: asyncio.Future[str] = self._loop.create_future()
        self._approvals[tool_call_id] = future
        remove_listener = None
        if signal is not None and hasattr(signal, "add_listener"):
            # The signal may fire on any thread: hop onto the loop.
            remove_listener = signal.add_listener(
                lambda *_a: self._hop(self._resolve_approval, tool_call_id, "skip"))
        self._mark(card)
        self.set_status("waiting for approval", tool_name)
        outcome = "skip"
        try:
            try:
                outcome = await future
            except asyncio.CancelledError:
                task = asyncio.current_task()
                cancelling = getattr(task, "cancelling", None)
                if future.cancelled() and not (cancelling() if cancelling else False):
                    return "skip"  # only the future was cancelled, not the waiting task
                raise
            return outcome
        finally:
            if callable(remove_listener):
                with contextlib.suppress(Exception):
                    remove_listener()
            if self._approvals.get(tool_call_id) is future:
                del self._approvals[tool_call_id]
            card.resolve_approval(outcome)
            self._mark(card)
            if self._status == "waiting for approval" and not self._approvals:
                self.set_status("running tool" if outcome != "skip" else "thinking", tool_name)

    def cancel_approvals(self) -> None:
        """Resolve every pending approval with ``"skip"`` (e.g. the run is aborting)."""
        for future in list(self._approvals.values()):
            if not future.done():
                future.set_result("skip")

    def finish(self, status: str | None = None) -> None:
        """End of the run: final status, clock stopped, pending approvals skipped,
        unfinished tool cards marked aborted, Abort hidden, one final flush."""
        if status is None:
            status = self._status if self._status in FINAL_STATUSES else "done"
        self._settle(status)
        self._finished = True
        self._cancel_tick()
        self._abort_button.layout.display = "none"
        self._scheduler.flush_now()

    def flush(self) -> None:
        """Flush pending changes now (normally the scheduler does this)."""
        self._scheduler.flush_now()

    def close(self) -> None:
        """Stop timers, answer pending approvals and close every widget of the view
        (their comms and frontend models), e.g. once its display was replaced by the
        Markdown transcript. Frozen chunks are not reachable from the widget tree when
        they were replaced, so blocks are walked as well."""
        self._scheduler.close()
        self._cancel_tick()
        self.cancel_approvals()
        seen: set[int] = set()
        roots: list[W.Widget] = [self] + [b.widget for b in self._blocks if b.widget is not None]
        roots += [q.widget for q in self._queued if q.widget is not None]
        for root in roots:
            for widget in _walk(root, seen):
                if widget is not self:
                    widget.close()
        super().close()

    def to_markdown(self) -> str:
        """A static Markdown transcript of the run (safe to render with raw HTML on)."""
        parts = [self._header_markdown()]
        for block in self._blocks:
            md = block.to_markdown()
            if md:
                parts.append(md)
        return "\n\n".join(parts) + "\n"

    # ------------------------------------------------------------------ event handlers

    def _on_agent_start(self, event: Any) -> None:
        if self._finished:
            return
        if self._ended is not None:  # the agent runs again (e.g. queued steering)
            self._ended = None
            self._abort_requested = False
            self._abort_button.disabled = False
            self._schedule_tick()
        self.set_status("thinking")

    def _on_agent_end(self, event: Any) -> None:
        status = "done"
        for message in reversed(field(event, "messages") or []):
            if field(message, "role") == "assistant":
                stop = field(message, "stop_reason")
                status = {"aborted": "aborted", "error": "error"}.get(stop, "done")
                break
        if self._status == "aborting":
            status = "aborted"
        self._settle(status)
        self._cancel_tick()
        self._scheduler.flush_now()

    def _on_turn_start(self, event: Any) -> None:
        if self._status not in FINAL_STATUSES:
            self.set_status("thinking")

    def _on_message_start(self, event: Any) -> None:
        message = field(event, "message")
        role = field(message, "role")
        if role == "assistant":
            self._assistant = {}
            self._live_usage = field(message, "usage")
            if self._status not in FINAL_STATUSES and self._status != "aborting":
                self.set_status("thinking")
        elif role == "user":
            self._show_user_message(message)
        elif role == "toolResult":
            pass  # shown on the tool card (tool_execution_end)
        elif role is not None:
            text = content_text(field(message, "content"))
            if text:
                self._append(OtherMessageBlock(str(role), text))

    def _on_message_update(self, event: Any) -> None:
        ame = field(event, "assistant_message_event")
        etype = field(ame, "type")
        if self._assistant is None:
            self._assistant = {}
        message = field(event, "message")
        if message is not None:
            self._live_usage = field(message, "usage", self._live_usage)
            self._header_dirty = True
        index = field(ame, "content_index")
        if etype == "text_start":
            self._content_block(index, MarkdownBlock)
            self._set_live_status("writing")
        elif etype == "text_delta":
            block = self._content_block(index, MarkdownBlock)
            if isinstance(block, MarkdownBlock):
                block.append(str(field(ame, "delta", "") or ""))
                self._mark(block)
            self._set_live_status("writing")
        elif etype == "text_end":
            block = self._content_block(index, MarkdownBlock)
            if isinstance(block, MarkdownBlock):
                block.finish(field(ame, "content"))
                self._mark(block)
        elif etype in ("thinking_start", "thinking_delta", "thinking_end"):
            block = self._content_block(index, ThinkingBlock)
            if isinstance(block, ThinkingBlock):
                if etype == "thinking_delta":
                    block.append(str(field(ame, "delta", "") or ""))
                elif etype == "thinking_end":
                    block.finish(field(ame, "content"))
                self._mark(block)
            self._set_live_status("thinking")
        elif etype in ("toolcall_start", "toolcall_delta", "toolcall_end"):
            call = field(ame, "tool_call") if etype == "toolcall_end" else None
            if call is None:
                partial = field(ame, "partial")
                content = field(partial, "content") or []
                if isinstance(index, int) and 0 <= index < len(content):
                    call = content[index]
            self._stream_tool_call(index, call)
            self._set_live_status("writing")

    def _on_message_end(self, event: Any) -> None:
        message = field(event, "message")
        role = field(message, "role")
        if role == "assistant":
            self._finish_assistant(message)
        # user / custom messages were shown at message_start (always emitted first)

    def _on_tool_execution_start(self, event: Any) -> None:
        card = self._card(str(field(event, "tool_call_id", "")), str(field(event, "tool_name", "")))
        card.start(field(event, "args"))
        self._mark(card)
        if self._status not in FINAL_STATUSES and self._status not in ("aborting", "waiting for approval"):
            self.set_status("running tool", card.tool_name)

    def _on_tool_execution_update(self, event: Any) -> None:
        card = self._card(str(field(event, "tool_call_id", "")), str(field(event, "tool_name", "")))
        card.add_update(field(event, "partial_result"))
        self._mark(card)

    def _on_tool_execution_end(self, event: Any) -> None:
        card = self._card(str(field(event, "tool_call_id", "")), str(field(event, "tool_name", "")))
        card.end(field(event, "result"), bool(field(event, "is_error", False)))
        self._mark(card)
        if self._status == "running tool" and not any(c.running for c in self._cards.values()):
            self.set_status("thinking")

    _EVENT_HANDLERS: dict[str, Callable[[AgentView, Any], None]] = {
        "agent_start": _on_agent_start, "agent_end": _on_agent_end,
        "turn_start": _on_turn_start,
        "message_start": _on_message_start, "message_update": _on_message_update,
        "message_end": _on_message_end,
        "tool_execution_start": _on_tool_execution_start,
        "tool_execution_update": _on_tool_execution_update,
        "tool_execution_end": _on_tool_execution_end,
    }

    # ------------------------------------------------------------------ helpers (loop thread)

    def _set_live_status(self, status: str) -> None:
        if self._status not in FINAL_STATUSES and self._status not in ("aborting", "waiting for approval"):
            if self._status != status:
                self.set_status(status)

    def _append(self, block: Block) -> None:
        self._blocks.append(block)
        self._structure_dirty = True
        self._mark(block)

    def _mark(self, block: Block) -> None:
        self._dirty[id(block)] = block
        self._request()

    def _request(self) -> None:
        self._scheduler.request()

    def _content_block(self, index: Any, cls: type) -> Block:
        assert self._assistant is not None
        block = self._assistant.get(index)
        if block is None:
            block = cls()
            self._assistant[index] = block
            self._append(block)
        return block

    def _stream_tool_call(self, index: Any, call: Any) -> None:
        assert self._assistant is not None
        tool_call_id = str(field(call, "id", "") or "")
        name = str(field(call, "name", "") or "")
        args = field(call, "arguments")
        block = self._assistant.get(index)
        if not isinstance(block, ToolCard):
            block = self._cards.get(tool_call_id) if tool_call_id else None
            if block is None:
                block = ToolCard(tool_call_id, name, args)
                self._append(block)
            self._assistant[index] = block
        if tool_call_id and block.tool_call_id != tool_call_id:
            block.tool_call_id = tool_call_id
        if tool_call_id:
            self._cards[tool_call_id] = block
        if name:
            block.tool_name = name
        if args is not None:
            block.set_args(args)
        self._mark(block)

    def _card(self, tool_call_id: str, tool_name: str) -> ToolCard:
        card = self._cards.get(tool_call_id)
        if card is None:
            card = ToolCard(tool_call_id, tool_name)
            self._cards[tool_call_id] = card
            self._append(card)
        elif tool_name and not card.tool_name:
            card.tool_name = tool_name
        return card

    def _finish_assistant(self, message: Any) -> None:
        blocks = self._assistant if self._assistant is not None else {}
        for index, item in enumerate(field(message, "content") or []):
            kind = field(item, "type")
            block = blocks.get(index)
            if kind == "text":
                if block is None:
                    block = self._content_block_in(blocks, index, MarkdownBlock)
                if isinstance(block, MarkdownBlock):
                    block.finish(str(field(item, "text", "") or ""))
                    self._mark(block)
            elif kind == "thinking":
                if block is None:
                    block = self._content_block_in(blocks, index, ThinkingBlock)
                if isinstance(block, ThinkingBlock):
                    block.redacted = bool(field(item, "redacted", False))
                    block.finish(str(field(item, "thinking", "") or ""))
                    self._mark(block)
            elif kind == "toolCall":
                self._assistant = blocks
                self._stream_tool_call(index, item)
        # Anything still live (an aborted stream without *_end events) is frozen now.
        for block in blocks.values():
            if isinstance(block, (MarkdownBlock, ThinkingBlock)) and not block.frozen:
                block.finish()
                self._mark(block)
        usage = field(message, "usage")
        if usage is not None:
            self._tokens_in += int(field(usage, "input", 0) or 0) + int(field(usage, "cache_read", 0) or 0) \
                + int(field(usage, "cache_write", 0) or 0)
            self._tokens_out += int(field(usage, "output", 0) or 0)
            self._cost += float(field(field(usage, "cost"), "total", 0.0) or 0.0)
            used = int(field(usage, "total_tokens", 0) or 0) or (
                int(field(usage, "input", 0) or 0) + int(field(usage, "output", 0) or 0)
                + int(field(usage, "cache_read", 0) or 0) + int(field(usage, "cache_write", 0) or 0))
            if used:
                self._context_used = used
        self._live_usage = None
        self._header_dirty = True
        stop = field(message, "stop_reason")
        if stop == "error":
            error = field(message, "error_message") or "The model request failed."
            self.show_notice(str(error), "error")
        elif stop == "aborted":
            self.show_notice("Aborted.", "warning")
        elif stop == "length":
            self.show_notice("The reply was cut off: the model hit its output token limit.", "warning")
        self._assistant = None
        self._request()

    def _content_block_in(self, blocks: dict[int, Block], index: int, cls: type) -> Block:
        block = cls()
        blocks[index] = block
        self._append(block)
        return block

    def _show_user_message(self, message: Any) -> None:
        if self._seen_user(message, mark=True):
            return
        content = field(message, "content")
        text = content_text(content)
        images = len(content_images(content))
        kind = "prompt"
        for item in self._queued:
            if item.text == text:
                kind = item.kind if item.kind in ("steer", "followup") else "prompt"
                self.remove_queued(item.token)
                break
        block = UserBlock(text, kind, images)
        block.source = message  # type: ignore[attr-defined]
        self._append(block)

    def _seen_user(self, message: Any, mark: bool = False) -> bool:
        """True if this user message is already on screen (its message_start was
        handled, or add_user_message announced the same text)."""
        for block in self._blocks:
            if isinstance(block, UserBlock) and getattr(block, "source", None) is message:
                return True
        text = content_text(field(message, "content"))
        for i, block in enumerate(self._announced):
            if block.text == text:
                if mark:
                    block.source = message  # type: ignore[attr-defined]
                    del self._announced[i]
                return True
        return False

    def _settle(self, status: str) -> None:
        """Final-ish state: status, clock stopped, open approvals skipped, live
        blocks frozen."""
        if self._ended is None:
            self._ended = time.monotonic()
        self.cancel_approvals()
        for card in self._cards.values():
            if not card.frozen:
                card.abort()
                self._mark(card)
        if self._assistant:
            for block in self._assistant.values():
                if isinstance(block, (MarkdownBlock, ThinkingBlock)) and not block.frozen:
                    block.finish()
                    self._mark(block)
        self._status = status
        self._status_detail = ""
        self._header_dirty = True

    # ------------------------------------------------------------------ buttons (any thread)

    def _hop(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the loop; safe from any thread."""
        with contextlib.suppress(RuntimeError):  # loop closed: the kernel is going away
            self._loop.call_soon_threadsafe(fn, *args)

    def _approval_clicked(self, tool_call_id: str, choice: str) -> None:
        self._hop(self._resolve_approval, tool_call_id, choice)

    # -- these run on the loop --

    def _resolve_approval(self, tool_call_id: str, choice: str) -> None:
        future = self._approvals.get(tool_call_id)
        if future is not None and not future.done() and choice in APPROVAL_CHOICES:
            future.set_result(choice)

    def _abort_clicked(self) -> None:
        if self._finished or self._status in FINAL_STATUSES or self._abort_requested:
            return
        self._abort_requested = True
        self._abort_button.disabled = True
        self.set_status("aborting")  # also answers pending approvals with "skip"
        self._on_abort()

    def _remove_clicked(self, token: object) -> None:
        self.remove_queued(token)
        if self._on_remove_queued is not None:
            self._on_remove_queued(token)

    # ------------------------------------------------------------------ clock

    def _schedule_tick(self) -> None:
        self._cancel_tick()
        self._tick_handle = self._loop.call_later(1.0, self._tick)

    def _cancel_tick(self) -> None:
        if self._tick_handle is not None:
            self._tick_handle.cancel()
            self._tick_handle = None

    def _tick(self) -> None:
        self._tick_handle = None
        if self._finished or self._ended is not None:
            return
        self._header_dirty = True
        for card in self._cards.values():
            if card.running:
                self._dirty[id(card)] = card
        self._request()
        self._tick_handle = self._loop.call_later(1.0, self._tick)

    # ------------------------------------------------------------------ flush

    def _flush(self) -> None:
        dirty = list(self._dirty.values())
        self._dirty.clear()
        for block in dirty:
            self._sync(block)
        if self._structure_dirty:
            for block in self._blocks:
                if block.widget is None:
                    self._sync(block)
            children = tuple(b.widget for b in self._blocks if b.widget is not None)
            if tuple(self._transcript.children) != children:
                self._transcript.children = children
            self._structure_dirty = False
        if self._queue_dirty:
            self._queue_box.children = tuple(self._queued_widget(q) for q in self._queued)
            self._queue_dirty = False
        if self._header_dirty:
            value = self._header_html()
            if self._header.value != value:
                self._header.value = value
            self._header_dirty = False

    @staticmethod
    def _sync(block: Block) -> None:
        # One broken block must not stop the rest of the view from updating.
        try:
            block.sync()
        except Exception:
            _log.exception("AgentView: could not render %s", type(block).__name__)

    def _queued_widget(self, item: _QueuedItem) -> W.HBox:
        if item.widget is None:
            label = {"steer": "steer", "followup": "follow-up"}.get(item.kind, item.kind)
            text = W.HTML(value=f'<div class="pi-queued"><span class="pi-pill">queued {escape_text(label)}'
                                f"</span>{escape_text(item.text)}</div>",
                          layout=W.Layout(flex="1 1 auto", min_width="0"))
            remove = W.Button(description="", icon="times", tooltip="Remove from the queue",
                              layout=W.Layout(width="28px", height="22px", padding="0"))
            remove.add_class("pi-remove")
            token = item.token
            remove.on_click(lambda _b: self._hop(self._remove_clicked, token))
            item.widget = W.HBox([text, remove])
            item.widget.add_class("pi-queued-row")
        return item.widget

    def queued_row(self, token: object) -> W.HBox | None:
        """The widget row of a queued item (after a flush), for tests and helpers."""
        for item in self._queued:
            if item.token is token or item.token == token:
                return item.widget
        return None

    # ------------------------------------------------------------------ header

    def _elapsed(self) -> float:
        end = self._ended if self._ended is not None else time.monotonic()
        return end - self._started

    def _usage_now(self) -> tuple[int, int, float]:
        tin, tout, cost = self._tokens_in, self._tokens_out, self._cost
        live = self._live_usage
        if live is not None:
            tin += int(field(live, "input", 0) or 0) + int(field(live, "cache_read", 0) or 0) \
                + int(field(live, "cache_write", 0) or 0)
            tout += int(field(live, "output", 0) or 0)
            cost += float(field(field(live, "cost"), "total", 0.0) or 0.0)
        return tin, tout, cost

    def _header_html(self) -> str:
        live = self._status in _LIVE_STATUSES and not self._finished
        status = self._status
        if self._status_detail and status in ("running tool", "waiting for approval"):
            status = f"{status}: {self._status_detail}"
        bits = [f'<span class="pi-model">{escape_text(self._model_label)}</span>',
                pill_html(self._status, live=live, label=status)]
        running = self._ended is None and not self._finished
        bits.append(f'<span class="pi-metric" title="elapsed">'
                    f"{fmt_seconds(self._elapsed(), precise=not running)}</span>")
        tin, tout, cost = self._usage_now()
        if tin or tout:
            bits.append(f'<span class="pi-metric" title="tokens in / out">↑{fmt_tokens(tin)} '
                        f"↓{fmt_tokens(tout)}</span>")
        if cost > 0:
            bits.append(f'<span class="pi-metric" title="cost">{fmt_cost(cost)}</span>')
        if self._context_used and self._context_window:
            frac = max(0.0, min(1.0, self._context_used / self._context_window))
            cls = "pi-ctx-fill pi-full" if frac >= 0.9 else "pi-ctx-fill pi-warn" if frac >= 0.7 else "pi-ctx-fill"
            bits.append(f'<span class="pi-ctx" title="context window: {self._context_used:,} of '
                        f'{self._context_window:,} tokens"><span class="pi-ctx-bar"><span class="{cls}" '
                        f'style="width:{frac * 100:.0f}%"></span></span>{frac * 100:.0f}%</span>')
        return f'<div class="pi-head">{"".join(bits)}</div>'

    def _header_markdown(self) -> str:
        tin, tout, cost = self._usage_now()
        bits = [f"**{markdown_for_transcript(self._model_label)}**", self._status,
                fmt_seconds(self._elapsed())]
        if tin or tout:
            bits.append(f"{tin:,} tokens in / {tout:,} out")
        if cost > 0:
            bits.append(fmt_cost(cost))
        if self._context_used and self._context_window and self._context_used / self._context_window >= 0.01:
            bits.append(f"context {self._context_used / self._context_window:.0%}")
        return "pi agent · " + " · ".join(bits)
